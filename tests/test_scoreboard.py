"""utils.chapters.scoreboard: the stages' compositions (wired on the CPU through PyTorch stand-ins, and with
the real kernels on a GPU), the check that keeps a wrong composition from being timed, the record,
its table and plot, and show() with and without a record."""
import inspect
import json
import re
import types

import pytest
import torch

from utils import REPO, build, results
from utils.report import readme
from utils.chapters import scoreboard as sb
from utils.bench import Timing

H100 = {"name": "NVIDIA H100 80GB HBM3", "slug": "nvidia-h100-80gb-hbm3", "cc": "9.0", "sm_count": 132,
        "memory_gb": 79.1, "l2_mb": 50.0}
H200 = {**H100, "name": "NVIDIA H200", "slug": "nvidia-h200", "memory_gb": 143.8, "l2_mb": 60.0}


def entry(problem, stage, ms, reps=50) -> dict:
    return {"problem": problem, "stage": stage, "contender": sb.STAGES[stage].label if stage in sb.STAGES else stage,
            "median_ms": ms, "p20_ms": ms, "p80_ms": ms, "reps": reps, "warmup": 10 if reps == 50 else 1,
            "first_call_s": 0.1, "max_abs_vs_eager": 1e-6}


def fake_record(device=H100, stages=tuple(sb.STAGES), date="2025-06-01T12:00:00+00:00") -> dict:
    """Eager 10 ms on every problem; compile 9 and 8 ms (8: the faster mode); stage s at 10 / speedup."""
    speed = {"02": 0.01, "03": 0.8, "04": 0.82, "05": 0.9, "06": 1.2, "07": 1.25, "09": 1.6, "10": 1.58}
    entries = []
    for pid in sb.PROBLEM_IDS:
        entries += [entry(pid, "eager", 10.0), entry(pid, "torch.compile", 9.0),
                    entry(pid, "torch.compile max-autotune-no-cudagraphs", 8.0)]
        entries += [entry(pid, s, 10.0 / speed[s], reps=5 if s == "02" else 50) for s in stages]
    return {"schema": 1, "kind": "scoreboard", "device": dict(device), "torch": "2.11.0+cu128", "cuda": "12.8",
            "git_commit": "abc1234", "date": date, "notes": "test", "entries": entries}


def write(root, rec) -> None:
    path = root / rec["device"]["slug"] / f"{rec['kind']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec))


def session(root, on_gpu=False):
    return types.SimpleNamespace(on_gpu=on_gpu, results_dir=root)


# --------------------------------------------------------------------------- the stages

def test_stages_cover_chapters_02_to_09_in_order():
    assert list(sb.STAGES) == ["02", "03", "04", "05", "06", "07", "09", "10"]
    assert set(sb.STAGE_COLOURS) == set(sb.STAGES)
    for stage in sb.STAGES.values():
        assert stage.tier == "strict"  # TF32 off everywhere: one definition of "fp32"
        for kernel in stage.kernels:
            assert (REPO / "kernels" / f"{kernel}.cu").is_file(), kernel
    assert sb.REFERENCES == ("eager", "torch.compile", "torch.compile max-autotune-no-cudagraphs")


def _params(prototype: str) -> list[str]:
    inside = prototype[prototype.index("(") + 1:prototype.rindex(")")]
    return [re.findall(r"\w+", p.partition("=")[0])[-1] for p in inside.split(",") if p.strip()]  # less defaults


@pytest.mark.parametrize("kernel", sorted(sb.STAND_INS))
def test_stand_ins_have_the_kernels_exported_names_and_parameters(kernel):
    """The CPU wiring tests below mean something only if each stand-in is called like its kernel."""
    exported = {e.name: _params(e.prototype) for e in build.exported_functions(build.kernel_source(kernel))}
    for name, fn in vars(sb.STAND_INS[kernel]).items():
        assert name in exported, f"kernels/{kernel}.cu exports no {name}"
        assert list(inspect.signature(fn).parameters) == exported[name], name


@pytest.mark.parametrize("scale", ["small", "odd"])
@pytest.mark.parametrize("stage", list(sb.STAGES))
@pytest.mark.parametrize("pid", sb.PROBLEM_IDS)
def test_every_composition_matches_the_reference_model_on_the_cpu(pid, stage, scale):
    model, x = sb.reference_model(pid, scale, "cpu")
    with torch.no_grad():
        out = sb.contender(stage, pid, model, sb.STAND_INS, scale)(x)
        ok, detail, err = sb.verify(out, model(x))
    assert ok, detail
    assert err <= 1e-5


def spies():
    """STAND_INS whose functions note their calls as "<kernel>.<function>"."""
    calls = set()

    def spy(kernel, name, fn):
        def call(*args):
            calls.add(f"{kernel}.{name}")
            return fn(*args)
        return call

    kernels = {k: types.SimpleNamespace(**{n: spy(k, n, f) for n, f in vars(ns).items()})
               for k, ns in sb.STAND_INS.items()}
    return kernels, calls


LIN = "gemm_bias.linear_bias"
TAILS = {94: "groupnorm.bias_hardtanh_mish_group_norm", 37: "groupnorm.swish_bias_group_norm",
         62: "groupnorm.group_norm_leaky_relu_x2"}
CALLS = {
    "02": lambda pid: {"gemm_01_naive.gemm"},
    "03": lambda pid: {"gemm_07_pipelined.gemm"},
    "04": lambda pid: {"gemm_bias.linear_two_biases" if pid == 94 else LIN},
    "05": lambda pid: {LIN} | {94: {"activations.bias_hardtanh_mish"}, 37: {"activations.swish_bias"},
                               62: {"activations.leaky_relu_x2"}, 75: set()}[pid],
    "06": lambda pid: {LIN, TAILS.get(pid, "groupnorm.group_norm_welford")},
    "07": lambda pid: {LIN, TAILS.get(pid, "min_bias_broadcast.group_norm_min_bias")},
    "09": lambda pid: {"fused_gemm_groupnorm.fusable"} | {{94: "fused_gemm_groupnorm.linear_bias_hardtanh_mish_group_norm",
                        37: "fused_gemm_groupnorm.linear_swish_bias_group_norm",
                        62: "fused_gemm_groupnorm.linear_group_norm_leaky_relu_x2",
                        75: "fused_gemm_groupnorm.linear_group_norm_min_bias"}[pid]},
    "10": lambda pid: set(),  # the drop-in calls the registered ops, not the kernel modules
}


@pytest.mark.parametrize("stage", list(sb.STAGES))
@pytest.mark.parametrize("pid", sb.PROBLEM_IDS)
def test_each_stage_calls_the_kernels_of_its_chapter(pid, stage):
    """A stage that quietly ran eager PyTorch instead of its kernels would still match the reference."""
    kernels, calls = spies()
    model, x = sb.reference_model(pid, "small", "cpu")
    with torch.no_grad():
        forward = sb.contender(stage, pid, model, kernels, "small")
        forward(x)
    assert calls == CALLS[stage](pid)
    if stage == "10":
        from solutions import solution

        assert isinstance(forward, solution(pid).ModelNew)
        assert forward.state_dict().keys() == model.state_dict().keys()
        assert all(a.data_ptr() == b.data_ptr() for a, b in zip(forward.parameters(), model.parameters()))


def test_an_unknown_stage_is_refused(tmp_path):
    model, _ = sb.reference_model(94, "small", "cpu")
    with pytest.raises(ValueError, match="no stage '11'"):
        sb.contender("11", 94, model, sb.STAND_INS)
    with pytest.raises(ValueError, match="no stage '11'"):
        sb.show("11", session(tmp_path))


# --------------------------------------------------------------------------- checking, then timing

def test_reps_for_slow_contenders():
    assert sb.reps_for(0.003, 50) == (50, 10)
    assert sb.reps_for(0.3, 50) == (10, 1)  # rung 1 at full size: about SLOW_BUDGET_S of timing
    assert sb.reps_for(2.0, 50) == (sb.MIN_REPS, 1)
    assert sb.reps_for(0.3, 4) == (sb.MIN_REPS, 1)


def fake_timer(seen):
    """bench.time_interleaved's stand-in: calls each contender once, notes (names, reps, warmup) per group."""
    def timer(fns, *, reps, warmup):
        for fn in fns.values():
            fn()
        seen.append((list(fns), reps, warmup))
        return {name: Timing.from_times([1.0 + 0.01 * i + 0.1 * k for i in range(reps)]) for k, name in enumerate(fns)}
    return timer


def test_measure_checks_every_contender_and_times_them_in_turn(capsys, monkeypatch):
    monkeypatch.setattr(sb, "SLOW_S", 60.0)  # a busy CI machine must not make a small CPU call "slow"
    seen = []
    entries, failures = sb.measure(problems=(62, 75), kernels=sb.STAND_INS, compile_modes={}, scale="small",
                                   device="cpu", timer=fake_timer(seen), reps=7)
    assert failures == []
    assert [(e["problem"], e["stage"]) for e in entries] == [(p, s) for p in (62, 75) for s in ("eager", *sb.STAGES)]
    # one group per problem: eager and every stage timed in turn, as chapter 10 times its contenders
    assert seen == [(["eager", *sb.STAGES], 7, 10)] * 2
    rec = {"schema": 1, "kind": "scoreboard", "device": H100, "torch": "2", "cuda": "12.8", "git_commit": "abc1234",
           "date": "2025-06-01T12:00:00+00:00", "notes": "", "entries": entries}
    results.validate(rec)  # every entry has the kind's keys
    assert all(e["max_abs_vs_eager"] <= 1e-5 and e["reps"] == 7 for e in entries)
    assert all(e["timing"] == "interleaved" and e["group"] == "main" for e in entries)
    # each entry is its own contender's timing, with the spread of the run (p20, p80)
    by = {(e["problem"], e["stage"]): e for e in entries}
    assert by[62, "eager"]["median_ms"] == pytest.approx(1.03) and by[62, "02"]["median_ms"] == pytest.approx(1.13)
    assert by[62, "02"]["p20_ms"] < by[62, "02"]["median_ms"] < by[62, "02"]["p80_ms"]
    out = capsys.readouterr().out
    assert "problem 62: 02 naive GEMM: first call" in out and "n=7" in out and "timed in turn" in out


def test_slow_contenders_are_timed_in_turn_in_a_group_of_their_own():
    seen = []
    timed = {"eager": ("eager", lambda: None, 50, 10, 0.1, 0.0), "02": ("02 naive GEMM", lambda: None, 8, 1, 0.3, 0.0),
             "03": ("03 rung 7", lambda: None, 50, 10, 0.1, 0.0), "x": ("another slow one", lambda: None, 5, 1, 0.6, 0.0)}
    entries = sb._time_in_turn(94, timed, 50, fake_timer(seen), lambda text: None)
    assert seen == [(["eager", "03"], 50, 10), (["02", "x"], 5, 1)]  # the fewest reps any slow one was given
    assert {e["stage"]: (e["group"], e["reps"], e["warmup"]) for e in entries} == {
        "eager": ("main", 50, 10), "03": ("main", 50, 10), "02": ("slow", 5, 1), "x": ("slow", 5, 1)}


def test_the_command_line_times_with_the_interleaved_timer():
    """The default timer is chapter 10's: bench.time_interleaved (no other timer is called in measure)."""
    source = inspect.getsource(sb.measure)
    assert "timer or bench.time_interleaved" in source and "time_ms" not in source


def test_a_wrong_composition_gets_no_number(capsys):
    kernels = dict(sb.STAND_INS)
    kernels["activations"] = types.SimpleNamespace(**{**vars(sb.STAND_INS["activations"]),
                                                      "swish_bias": lambda x, bias: torch.sigmoid(x) * x - bias})
    entries, failures = sb.measure(problems=(37,), kernels=kernels, compile_modes={}, scale="small", device="cpu",
                                   timer=fake_timer([]), reps=3)
    assert (37, "05") not in {(e["problem"], e["stage"]) for e in entries}
    assert {e["stage"] for e in entries} == {"eager", *sb.STAGES} - {"05"}
    assert len(failures) == 1 and "problem 37, 05 + fused activations: wrong at the odd scale" in failures[0]
    assert "WRONG" in capsys.readouterr().out


def test_the_command_line_measures_nothing_without_a_gpu(monkeypatch, capsys):
    from utils import env

    monkeypatch.setattr(env, "mode", lambda: "reference-only")
    assert sb.main(["--reps", "3"]) == 0
    assert "measured on a GPU" in capsys.readouterr().out


# --------------------------------------------------------------------------- the record, shown

def test_a_fake_record_tabulates_its_speedups():
    rec = results.validate(fake_record())
    frame = sb.table(rec, "03")
    assert list(frame.index) == [94, 75, 37, 62] and frame.index.name == "problem"
    assert list(frame.columns) == ["eager fp32 ms", "02 naive GEMM", "03 rung 7", "torch.compile (faster mode)"]
    assert frame.loc[94].tolist() == pytest.approx([10.0, 0.01, 0.8, 1.25])  # compile: the faster mode, 8 ms
    assert sb.table(rec).shape == (4, 2 + len(sb.STAGES))  # every stage
    missing = sb.table(fake_record(stages=("02",)) | {"entries": [e for e in fake_record()["entries"]
                                                                  if (e["problem"], e["stage"]) != (75, "03")]}, "03")
    assert missing.loc[75, "03 rung 7"] != missing.loc[75, "03 rung 7"] and missing.loc[94, "03 rung 7"] == 0.8  # NaN


def test_the_markdown_is_the_tables_with_the_chapter_in_bold():
    rec = results.validate(fake_record())
    text = sb.markdown(rec, "03")
    assert "recorded on NVIDIA H100 80GB HBM3, 2025-06-01, commit `abc1234`" in text
    assert "the contenders timed one after another" in text  # no entry says "timing": "interleaved"
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("|")]
    assert rows[0] == ["problem", "eager fp32 ms", "02 naive GEMM", "**03 rung 7**", "torch.compile (faster mode)"]
    assert rows[2] == ["94", "10.000", "0.010x", "**0.80x**", "1.25x"]
    assert [r[0] for r in rows[2:]] == ["94", "75", "37", "62"]
    assert "04 + bias epilogue" not in text
    assert "Timed with fewer repetitions (slow): 02 (5)." in text
    full = readme.render(rec)  # the README's rendering: every stage
    assert full == sb.markdown(rec) and "**" not in full.split("\n", 1)[1] and "10 the drop-ins" in full
    timed_in_turn = {**rec, "entries": [e | {"timing": "interleaved", "group": "slow" if e["stage"] == "02" else "main"}
                                        for e in rec["entries"]]}
    assert "every contender timed in turn" in sb.markdown(timed_in_turn)
    assert "(slow; in turn in a group of their own, over the others' eager): 02 (5)." in sb.markdown(timed_in_turn)


def test_speedups_take_the_faster_compile_mode():
    table = sb.speedups(fake_record())
    assert table[62]["compile"] == pytest.approx(1.25)
    assert table[62]["compile_mode"] == "torch.compile max-autotune-no-cudagraphs"
    assert table[62]["02"] == pytest.approx(0.01) and table[62]["09"] == pytest.approx(1.6)


def test_a_stage_missing_from_the_record_is_named():
    text = sb.markdown(fake_record(stages=("02", "03", "04")), "06")
    assert "Not in this record: stage 05, 06." in text


def test_the_plot_is_logarithmic_and_highlights_the_chapter(tmp_path):
    png = tmp_path / "scoreboard.png"
    fig = sb.plot(fake_record(), "04", save=png)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    bars = ax.patches
    assert len(bars) == 3 * 4  # stages 02-04, four problems
    mine = [b for b in bars if b.get_alpha() == 1.0]
    assert len(mine) == 4 and all(b.get_height() == pytest.approx(0.82) for b in mine)
    assert all(b.get_alpha() < 1.0 for b in bars if b not in mine)
    lowest = min(b.get_height() for b in bars)
    assert lowest == pytest.approx(0.01) and ax.get_ylim()[0] < lowest  # rung 1's bar is visible
    compile_lines = [c for c in ax.collections if c.get_label() == "torch.compile, the faster mode"]
    assert len(compile_lines) == 1
    title = fig._suptitle.get_text()
    assert "after chapter 04" in title and "recorded on NVIDIA H100 80GB HBM3, 2025-06-01" in title
    assert "commit abc1234" in title
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_show_without_a_record_prints_one_line(tmp_path, capsys):
    sb.show("05", session(tmp_path))
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("SKIPPED: the scoreboard")
    assert "python -m utils.chapters.scoreboard" in out


def test_show_reads_the_record_without_a_gpu(tmp_path, capsys, monkeypatch):
    from utils import env

    monkeypatch.setattr(env, "device_slug", lambda name=None: "cpu")
    write(tmp_path, fake_record())
    sb.show("05", session(tmp_path))
    out = capsys.readouterr().out
    assert "**05 + fused activations**" in out and "06 + fused GroupNorm" not in out


def test_show_on_a_gpu_never_takes_another_devices_record(tmp_path, capsys, monkeypatch):
    from utils import env

    monkeypatch.setattr(env, "device_slug", lambda name=None: "nvidia-h200")
    write(tmp_path, fake_record(device=H100))
    sb.show("03", session(tmp_path, on_gpu=True))
    out = capsys.readouterr().out
    assert out.startswith("SKIPPED: the scoreboard (no scoreboard record for this GPU") and out.count("\n") == 1
    write(tmp_path, fake_record(device=H200, stages=("02", "03")))
    sb.show("03", session(tmp_path, on_gpu=True))
    assert "recorded on NVIDIA H200" in capsys.readouterr().out


def test_show_in_a_notebook_displays_the_plot_and_the_table(tmp_path, monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    shown = []
    write(tmp_path, fake_record())
    InteractiveShell.instance()  # get_ipython() now answers: show() displays instead of printing
    monkeypatch.setattr("IPython.display.display", lambda *objs: shown.extend(objs))
    try:
        sb.show("07", session(tmp_path))
    finally:
        InteractiveShell.clear_instance()
    assert [type(o).__name__ for o in shown] == ["Figure", "Markdown", "DataFrame", "Markdown"]
    table = shown[2]  # the table as HTML: the record's speedups, the chapter's column marked
    assert "07 + 75's fused tail (this chapter)" in table.columns and "09 whole model in the 3xTF32 GEMM" not in table
    assert table.loc[94, "07 + 75's fused tail (this chapter)"] == "1.25x" and table.loc[94, "eager fp32 ms"] == "10.000"
    assert "recorded on NVIDIA H100" in shown[1].data and "fewer repetitions" in shown[3].data


# --------------------------------------------------------------------------- the real kernels

@pytest.mark.gpu
@pytest.mark.parametrize("pid", sb.PROBLEM_IDS)
def test_every_composition_with_the_kernels_matches_the_reference_model(pid, cuda):
    names = sorted({k for s in sb.STAGES.values() for k in s.kernels if build.builds_here(k)})
    kernels = build.load_kernels(names)
    from utils import precision

    for scale in ("odd", "small"):
        model, x = sb.reference_model(pid, scale, cuda)
        with precision.ieee_fp32(), torch.no_grad():
            expected = model(x)
            for stage, spec in sb.STAGES.items():
                if not set(spec.kernels) <= set(kernels):
                    continue  # a kernel this GPU cannot build (wgmma off sm_90)
                ok, detail, _ = sb.verify(sb.contender(stage, pid, model, kernels, scale)(x), expected)
                assert ok, f"stage {stage}, problem {pid}, scale {scale}: {detail}"
