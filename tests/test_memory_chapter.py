"""utils.chapters.memory, the helpers of notebooks 05-07, without a GPU: GB/s and % of copy from timed rows, the
table, the predicted-against-measured table and its verdicts, the bar plot and the diagrams, the harness cases and
timed contenders (with CPU stand-ins for the kernels), broadcasting step by step, and the chapter object: its
records are its session's (a GPU reads only its own device's). Timing itself is utils.bench's (tests/test_bench.py);
the exercise checkers are tests/test_memory_bound_exercises.py's."""
import json
import re
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

from utils import REPO
from utils.chapters import session as chapter
from utils.chapters import memory as mc
from utils.chapters import memory_diagrams as diagrams
from utils.run import SKIP_MARKER

RECORD = {"device": {"name": "NVIDIA H100"}, "date": "2024-05-01T12:00:00+00:00", "git_commit": "abc1234",
          "torch": "2.3.0", "notes": "full scale"}


def entries(ours_ms=0.12, eager_ms=0.5):
    """Problem 94's rows as measure() makes them: a copy of 1e8 bytes in 0.1 ms, eager, and ours."""
    spec = [(94, "copy", "copy", None, 10**8, (1000, 25000), None),
            (94, "eager chain", "eager", None, 10**8, (1000, 25000), None),
            (94, "fused", "ours", None, 10**8, (1000, 25000), ["eager chain"])]
    times = {"94: copy": 0.1, "94: eager chain": eager_ms, "94: fused": ours_ms}
    rows = [{"median_ms": times[f"{p}: {name}"], "p20_ms": 0.0, "p80_ms": 0.0} for p, name, *_ in spec]
    return spec, rows


def measured(monkeypatch, **times):
    spec, rows = entries(**times)
    monkeypatch.setattr(mc.bench, "compare", lambda fns, baseline, reps: rows)
    return mc.measure(spec, reps=3)


def test_measure_adds_gbps_and_percent_of_copy(monkeypatch):
    copy, eager, ours = measured(monkeypatch)
    assert copy["GBps"] == 1000 and copy["pct_of_copy"] == 100
    assert abs(ours["pct_of_copy"] - 100 / 1.2) < 1e-9 and ours["replaces"] == ["eager chain"]
    assert "replaces" not in eager and ours["shape"] == [1000, 25000]


def test_table_is_a_dataframe_with_a_row_per_contender_and_the_speedups(monkeypatch):
    df = mc.table(measured(monkeypatch))
    assert len(df) == 3 and list(df.columns[:2]) == ["problem", "contender"]
    assert df.iloc[2]["faster than"] == "4.17x eager chain"


# --- predicted against measured ----------------------------------------------------------------

HEADER = "It should reach 80-90% of\n a copy, 3-5x the eager chain, in 100-110 us, 80-90% of a read."


def test_the_prediction_table_says_within_better_worse_and_no_longer_said(monkeypatch):
    rows = measured(monkeypatch)
    P = mc.Prediction
    predictions = [P("fused", "80-90% of a copy", 80, 90), P("fused", "3-5x the eager chain", 3, 5, "eager chain"),
                   P("fused", "in 100-110 us", 100, 110, "us"), P("fused", "95% of a copy", 95, 100),
                   P("fused", "80-90% of a read", 80, 90, "a read", percent=True)]
    got = mc.prediction_rows(rows, predictions, HEADER)
    assert [(r["measured"], r["verdict"]) for r in got] == [
        ("83% of the same-size copy", "within it"), ("4.17x against \"eager chain\"", "within it"),
        ("120.0 us", "worse than predicted"), ("–", "no longer in the header: not compared"),
        ("–", "no row 'a read' in this run")]
    table = mc.prediction_table(rows, predictions, HEADER)
    assert list(table.columns) == ["the header predicted", "problem", "kernel", "measured", "verdict"]
    assert ['"3-5x the eager chain"', 94, "fused", '4.17x against "eager chain"', "within it"] in table.values.tolist()
    twice = mc.prediction_table(rows, predictions[:1] * 2, HEADER).values.tolist()
    assert twice[-2][:2] == ['"80-90% of a copy"', 94] and twice[-1][:2] == ["", 94]  # quoted once


def test_percent_of_another_row_and_lower_is_better():
    rows = [{"problem": 75, "contender": "read", "median_ms": 0.015, "GBps": 2000.0, "pct_of_copy": 70.0},
            {"problem": 75, "contender": "ours", "median_ms": 0.018, "GBps": 1660.0, "pct_of_copy": 58.0}]
    P = mc.Prediction
    got = mc.prediction_rows(rows, [P("ours", "80-90% of a read", 80, 90, "read", percent=True),
                                    P("ours", "in 20-25 us", 20, 25, "us")], HEADER + " in 20-25 us")
    assert [r["measured"] for r in got] == ["83% of the GB/s of \"read\"", "18.0 us"]
    assert [r["verdict"] for r in got] == ["within it", "better than predicted"]


def test_quoted_and_verdict():
    assert mc.quoted("about 2x\n   faster", "2x faster") == "2x faster"
    assert mc.quoted("about 3x", "2x faster") is None and mc.quoted(None, "2x") is None
    assert [mc.verdict(v, 2, 3) for v in (2.5, 4, 1)] == ["within it", "better than predicted", "worse than predicted"]
    assert mc.verdict(1, 2, 3, lower_is_better=True) == "better than predicted"


def test_the_row_minimum_budget_multiplies_out():
    rows = [{"contender": "group_norm_row_min", "median_ms": 0.018, "GBps": 1859.0, "pct_of_copy": 58.4},
            {"contender": "read_probe: a pure read", "median_ms": 0.015, "GBps": 2241.0, "pct_of_copy": 70.4}]
    text = mc.row_min_budget(rows)
    assert "**58%** of the copy" in text and "**70%** of the copy" in text and "**83%** of the pure read" in text
    assert mc.row_min_budget(rows[:1]) == ""


def test_the_launch_gap():
    rows = [{"contender": "row minimum, then broadcast: two launches", "median_ms": 0.029},
            {"contender": "group_norm_min_bias", "median_ms": 0.0269}]
    assert mc.launch_gap(rows) == ("Two plain launches 29.0 us, the broadcast as a dependent 26.9 us: 2.1 us saved, "
                                   "1.08x.")
    assert mc.launch_gap(rows[1:]).startswith("(no run")


# --- plots and diagrams ------------------------------------------------------------------------

def test_bandwidth_plot_returns_a_figure_and_saves_it(monkeypatch, tmp_path):
    rows = measured(monkeypatch)
    fig = mc.bandwidth_plot(rows, "Test", recorded_from=RECORD, save=tmp_path / "sub" / "plot.png")
    assert isinstance(fig, Figure) and (tmp_path / "sub" / "plot.png").is_file()
    assert len(fig.axes[0].patches) == 2  # the copy row is the 100% line, not a bar
    assert "recorded on NVIDIA H100" in fig._suptitle.get_text()


def test_the_diagrams_draw():
    passes = diagrams.passes_figure({94: ("a -> b -> c", [1, 1, 1]), 37: ("a * x", [2])})
    assert isinstance(passes, Figure) and len(passes.axes[0].patches) == 6 + 2 + 3 + 2  # reads + writes per row
    assert all(isinstance(f, Figure) and f.axes for f in (diagrams.groupnorm_figure(), diagrams.broadcast_figure()))


def test_stamp():
    assert mc.stamp(RECORD) == "NVIDIA H100, 2024-05-01, commit `abc1234`"
    assert mc.stamp(RECORD | {"git_commit": "1d6d181670f1a5b38c7b302757b385c394c13375"}).endswith("commit `1d6d181`")


# --- broadcasting --------------------------------------------------------------------------------

def test_broadcast_steps_agree_with_torch(capsys):
    assert mc.broadcast_steps((1024, 1), (1, 8192, 1, 1)) == torch.broadcast_shapes((1024, 1), (1, 8192, 1, 1))
    out = capsys.readouterr().out
    assert "(1024, 1) -> (1, 1, 1024, 1)" in out and "a 1 stretches to 8192" in out
    assert mc.broadcast_steps((4, 3), (1, 5, 1, 2)) is None and "neither is 1 -> error" in capsys.readouterr().out


# --- the cases and the timed contenders, with CPU stand-ins for the kernels ---------------------

def gn(x, G, g_, b_, eps):
    return F.group_norm(x, G, g_, b_, eps)


KERNELS = SimpleNamespace(  # what the compiled modules compute, in PyTorch, so the cases run on the CPU
    bias_hardtanh_mish=lambda x, b, lo, hi: F.mish(F.hardtanh(x + b, lo, hi)),
    swish_bias=lambda x, b: x * torch.sigmoid(x) + b,
    leaky_relu_x2=lambda x, s: 2 * F.leaky_relu(x, s),
    mish=F.mish,
    group_norm_welford=gn, group_norm_sumsq=gn,
    bias_hardtanh_mish_group_norm=lambda x, bias, lo, hi, G, g_, b_, eps: gn(F.mish(F.hardtanh(x + bias)), G, g_, b_, eps),
    swish_bias_group_norm=lambda x, bias, G, g_, b_, eps: gn(x * torch.sigmoid(x) + bias, G, g_, b_, eps),
    group_norm_leaky_relu_x2=lambda x, G, g_, b_, eps, s: 2 * F.leaky_relu(gn(x, G, g_, b_, eps), s),
    group_norm_row_min=lambda x, G, g_, b_, eps: gn(x, G, g_, b_, eps).min(dim=1, keepdim=True)[0],
    min_bias_broadcast=lambda m, b: m + b,
    group_norm_min_bias=lambda x, G, g_, b_, eps, bias: gn(x, G, g_, b_, eps).min(dim=1, keepdim=True)[0] + bias,
    read_probe=lambda x: x.view(-1, 1024).min(dim=1)[0],
)


@pytest.mark.parametrize("cases", [mc.activation_cases(KERNELS, 6, 20), mc.groupnorm_cases(KERNELS, 6, 20, 5),
                                   mc.tail_cases(KERNELS, 6, 20, 5)], ids=["05", "06", "07"])
def test_each_case_agrees_with_its_reference(cases):
    for name, (fn, ref, factory) in cases.items():
        args = factory(torch.Generator().manual_seed(0))
        torch.testing.assert_close(fn(*args), ref(*args), msg=name)


def test_the_eager_chain_of_62_applies_leaky_relu_once():
    """Problem 62's model: y = leaky_relu(x); y + y. Timing leaky_relu twice would flatter the fused kernel."""
    import utils.chapters.memory as m

    calls = []
    original = m.F.leaky_relu
    try:
        m.F.leaky_relu = lambda *a, **k: calls.append(1) or original(*a, **k)
        _, ref, factory = mc.activation_cases(KERNELS, 4, 8)["leaky_relu_x2"]
        ref(*factory(torch.Generator().manual_seed(0)))
    finally:
        m.F.leaky_relu = original
    assert len(calls) == 1


def test_the_inputs_are_never_the_defaults_and_follow_the_generator():
    x, gamma, beta = mc.gn_inputs(5, 16, offset=3.0)(torch.Generator().manual_seed(0))
    assert x.shape == (5, 16) and abs(x.mean().item() - 3.0) < 2.0
    assert gamma.abs().min() >= 0.5 and (gamma < 0).any() and (gamma > 0).any() and beta.abs().max() > 0
    *_, bias = mc.gn_inputs(5, 16, with_bias=True)(torch.Generator().manual_seed(0))
    assert bias.shape == (1, 16, 1, 1)
    x2, bias2, gamma2, _ = mc.gn_inputs(5, 16, offset=3.0, bias_before=True)(torch.Generator().manual_seed(0))
    assert torch.equal(x2, x) and torch.equal(gamma2, gamma) and bias2.shape == (16,)
    assert [t.shape for t in mc.rowmin_and_bias(3, 7)(torch.Generator())] == [(3, 1), (1, 7, 1, 1)]


def spec_rows(spec):
    return [(p, name, role, nbytes, replaces) for p, name, role, _, nbytes, _, replaces in spec]


def test_the_timed_contenders_of_each_chapter():
    acts = mc.activation_spec(KERNELS, {94: (4, 8), 62: (4, 8)}, device="cpu")
    assert spec_rows(acts)[:3] == [(94, "copy (4 x 8)", "copy", 256, None), (94, "eager chain", "eager", 256, None),
                                   (94, "bias_hardtanh_mish", "ours", 256, ["eager chain"])]
    gns = mc.groupnorm_spec(KERNELS, {94: (4, 16, 2), 62: (4, 16, 2)}, device="cpu")
    assert [r[1] for r in spec_rows(gns)[:6]] == ["copy (4 x 16)", "eager chain", "F.group_norm",
                                                  "bias_hardtanh_mish_group_norm", "group_norm_welford",
                                                  "group_norm_sumsq"]
    tail = mc.tail_spec(KERNELS, KERNELS, 4, 1024, 64, device="cpu")
    assert [r[2] for r in spec_rows(tail)].count("ours") == 3 and spec_rows(tail)[-1][4][-1].startswith("row minimum")
    for spec in (acts, gns, tail):
        for row in spec:
            row[3]()  # every contender runs


def test_a_wrong_kernel_is_never_timed():
    wrong = SimpleNamespace(**{**vars(KERNELS), "swish_bias": lambda x, b: x + b})
    with pytest.raises(AssertionError):
        mc.activation_spec(wrong, {37: (4, 8)}, device="cpu")


def test_run_checks_prints_a_line_per_case_and_stops_at_a_failure(capsys):
    mc.run_checks({"leaky_relu_x2": mc.activation_cases(KERNELS, 5, 7)["leaky_relu_x2"]}, "(5, 7)")
    assert capsys.readouterr().out.split()[:3] == ["leaky_relu_x2", "(5,", "7)"]
    wrong = SimpleNamespace(**{**vars(KERNELS), "mish": lambda x: x})
    with pytest.raises(AssertionError):
        mc.run_checks({"mish": mc.activation_cases(wrong, 5, 7)["mish"]}, "(5, 7)")


# --- the chapter: its session's records, loading, measuring, showing -------------------------------

def session(tmp_path, mode):
    return chapter.Session(mode, "cuda" if mode == "gpu" else "cpu", "full" if mode == "gpu" else "small", 3, tmp_path)


def write_record(root, slug, kind, date="2024-05-01T12:00:00+00:00"):
    rec = {"schema": 1, "kind": kind, "device": {"name": slug.upper(), "slug": slug, "cc": "9.0", "sm_count": 132,
                                                  "memory_gb": 80.0, "l2_mb": 50.0},
           "torch": "2.3.0", "cuda": "12.1", "git_commit": "abc1234", "date": date, "notes": "test", "entries": [
               {"problem": 94, "contender": "copy", "role": "copy", "median_ms": 0.1, "p20_ms": 0.1, "p80_ms": 0.1,
                "bytes": 10**8, "GBps": 1000.0, "pct_of_copy": 100.0, "shape": [1, 2]}]}
    if kind == "ceilings":
        rec["entries"] = [{"copy_GBps": 3000.0, "fp32_tflops": 50.0, "tf32_tflops": 300.0}]
    (root / slug).mkdir(parents=True, exist_ok=True)
    (root / slug / f"{kind}.json").write_text(json.dumps(rec))


def test_the_chapter_stands_in_for_its_session(tmp_path):
    S = session(tmp_path, "compile-only")
    M = mc.MemoryChapter(S)
    assert (M.on_gpu, M.can_compile, M.device, M.scale, M.reps, M.results_dir) == (False, True, "cpu", "small", 3,
                                                                                    tmp_path)


def test_a_gpu_reads_its_own_device_records_only(tmp_path, monkeypatch):
    import utils.env

    monkeypatch.setattr(utils.env, "device_slug", lambda name=None: "this-gpu")
    write_record(tmp_path, "other-gpu", "fused_activations")
    on_gpu = mc.MemoryChapter(session(tmp_path, "gpu"))
    assert on_gpu.recorded("fused_activations") is None  # another device's record is not this GPU's
    write_record(tmp_path, "this-gpu", "fused_activations")
    assert on_gpu.recorded("fused_activations")["device"]["slug"] == "this-gpu"


def test_without_a_gpu_rows_and_ceilings_come_from_one_device(tmp_path, monkeypatch):
    import utils.env

    monkeypatch.setattr(utils.env, "device_slug", lambda name=None: "cpu")
    monkeypatch.delenv("WORKBOOK_RESULTS_DEVICE", raising=False)
    write_record(tmp_path, "gpu-a", "fused_activations")
    write_record(tmp_path, "gpu-a", "ceilings")
    write_record(tmp_path, "gpu-b", "ceilings", date="2025-01-01T00:00:00+00:00")  # newer, another device
    M = mc.MemoryChapter(session(tmp_path, "reference-only"))
    rec = M.recorded("fused_activations")
    assert rec["device"]["slug"] == "gpu-a" and M.companion("ceilings", rec)["device"]["slug"] == "gpu-a"
    assert "1 GiB copy of the ceilings record ran at 3000 GB/s" in mc.copy_against_ceiling(
        rec["entries"], M.companion("ceilings", rec))
    assert mc.copy_against_ceiling(rec["entries"], None).startswith("(no ceilings record")


def test_the_chapter_without_a_gpu_or_a_compiler(tmp_path, monkeypatch, capsys):
    import utils.env

    monkeypatch.setattr(utils.env, "device_slug", lambda name=None: "cpu")
    monkeypatch.setattr(utils.env, "no_build_reason", lambda: "a CPU-only torch (2.x+cpu)")  # what env would say
    M = mc.MemoryChapter(session(tmp_path, "reference-only"))
    assert M.plot_path("x") is None and M.recorded("x") is None
    assert M.load("activations") is None
    assert M.run("x", lambda: pytest.fail("nothing is measured without a GPU"), "notes") is None
    assert M.show_measurement("x", None, "Title", [], None) is None
    M.check_exercise("bias_gelu", lambda module: pytest.fail("nothing runs without a compiler"))
    out = capsys.readouterr().out
    assert f"{SKIP_MARKER} compiling activations (a CPU-only torch (2.x+cpu))" in out
    assert f"{SKIP_MARKER} measuring x (no GPU)" in out
    assert f"{SKIP_MARKER} the x plot and table (no GPU and no recorded x run)" in out
    assert f"{SKIP_MARKER} compiling the exercise (a CPU-only torch (2.x+cpu))" in out


def test_the_chapter_shows_the_record_without_a_gpu(tmp_path, monkeypatch, capsys):
    import utils.env

    monkeypatch.setattr(utils.env, "device_slug", lambda name=None: "cpu")
    monkeypatch.setattr(mc, "display", lambda obj: None)
    write_record(tmp_path, "some-gpu", "fused_activations")
    shown = mc.MemoryChapter(session(tmp_path, "reference-only")).show_measurement("fused_activations", None, "T", [],
                                                                                  None)
    assert shown[0]["contender"] == "copy" and "the recorded run (SOME-GPU, 2024-05-01" in capsys.readouterr().out


def test_the_chapter_on_a_gpu_saves_its_plot_beside_its_records(tmp_path, monkeypatch):
    import utils.env

    monkeypatch.setattr(utils.env, "device_slug", lambda name=None: "h100")
    M = mc.MemoryChapter(session(tmp_path, "gpu"))
    assert M.plot_path("fused_activations") == tmp_path / "h100" / "fused_activations.png"


# --- 06: the GEMM's share of the models, and the sweep of the tails -------------------------------------------

def share_frame():
    import pandas as pd
    return pd.DataFrame([{"problem": 94, "tail speedup": 10.0, "tail saves": 0.25, "GEMM costs more": 0.45,
                          "GEMM share of ours": 0.99, "model speedup": 0.93},
                         {"problem": 37, "tail speedup": 8.6, "tail saves": 2.7, "GEMM costs more": -0.1,
                          "GEMM share of ours": 0.95, "model speedup": 1.28}]).set_index("problem")


def test_tail_share_text_says_what_the_table_says():
    text = mc.tail_share_text(share_frame())
    assert "**94**: the tail runs 10.0x faster than eager's and saves 250 us; our GEMM is 450 us slower" in text
    assert "99% of our model's time, which runs at 0.93x eager" in text
    assert "100 us faster than eager's" in text.splitlines()[1]
    assert "No scoreboard" in mc.tail_share_text(share_frame().iloc[0:0])


def test_the_share_cell_reads_the_records_of_one_device():
    """Notebook 06's cell computes the shares from the scoreboard and groupnorm_fusion records; the text under it is
    tail_share_text's, from those numbers (none typed)."""
    cell = next("".join(c["source"]) for c in json.loads((REPO / "notebooks" / "06_groupnorm_reduction.ipynb").read_text())["cells"]
                if "mc.tail_share_text(share)" in "".join(c["source"]))
    assert 'M.recorded("scoreboard")' in cell and 'M.companion("groupnorm_fusion", board_rec)' in cell
    assert not re.search(r"\b\d+\.\d+\b", cell)  # no measured number typed into the cell


class T:  # a bench.Timing stand-in
    def __init__(self, ms):
        self.median, self.p20, self.p80 = ms, 0.9 * ms, 1.1 * ms


def sweep_entries():
    rows = []
    for N, ms in [(1, 0.004), (4, 0.005), (16, 0.0055), (64, 0.006), (256, 0.01), (1024, 0.025), (4096, 0.09)]:
        rows += mc.sweep_entries("rows", N, 8192, 512, {"ours": T(ms), "eager": T(10 * ms)}, 2 * 4 * N * 8192)
    for D, ms in [(4, 0.03), (16, 0.025), (256, 0.024), (1024, 0.05)]:
        rows += mc.sweep_entries("group width", 1024, 8192, 8192 // D, {"ours": T(ms), "eager": T(40 * ms / D ** 0.5)},
                                 2 * 4 * 1024 * 8192)
    return rows


def test_sweep_entries_are_what_the_record_kind_asks():
    from utils import results
    rows = sweep_entries()
    assert set(results.KINDS["sweep_tails"].entry_keys) <= set(rows[0])
    assert set(results.KINDS["sweep_min_bias"].entry_keys) <= set(rows[0])  # notebook 07's sweep, the same entries
    chain = mc.sweep_entries("rows", 64, 8192, None, {"ours": T(0.01)}, 2 * 4 * 64 * 8192)
    assert set(results.KINDS["sweep_activations"].entry_keys) == set(chain[0])  # notebook 05's: no group width
    assert rows[0]["group_width"] == 16 and rows[0]["GBps"] == pytest.approx(2 * 4 * 8192 / 0.004 / 1e6)


def test_sweep_regimes_are_read_from_the_entries():
    rows = sweep_entries()
    text = mc.sweep_regimes(rows, "ours", 3000.0, 132, 4)
    assert "up to 64 rows ours takes at most 1.5x its 4.0 us at 1 row:" in text
    assert "from 64 rows the grid has a block for each of the 132 SMs" in text
    # GB/s: 64 rows 699, 256 rows 1678, 1024 rows 2684: half (1500) from 256 rows, 80% (2400) from 1024
    assert "from 256 rows ours moves at least half the copy bandwidth (3000 GB/s), from 1024 rows at least 80%" in text
    assert "never reaches half" in mc.sweep_regimes(rows, "ours", 1e6, 132, 4)
    # half and 80% at the same rows: said once
    jump = [{"sweep": "rows", "contender": "ours", "rows": r, "median_ms": t, "GBps": gb}
            for r, t, gb in [(1, 0.004, 10.0), (256, 0.004, 1000.0), (1024, 0.005, 2900.0)]]
    assert "from 1024 rows ours moves at least 80% of the copy bandwidth (3000 GB/s): from" in \
        mc.sweep_regimes(jump, "ours", 3000.0, 132, 4)
    assert "(64 rows, 1 block each)" in mc.sweep_regimes(rows, "ours", 3000.0, 64, 1)
    assert "Spread" not in text  # the stand-in's p20 and p80 are its median
    # the recorded H200 run of notebook 07 at its fewest rows: 1 row fast, 4 rows 5.7x slower, wide spreads
    noisy = [{"sweep": "rows", "contender": "ours", "rows": r, "median_ms": t, "GBps": 1.0, "p20_ms": lo, "p80_ms": hi}
             for r, lo, t, hi in [(1, 0.0093, 0.0102, 0.0181), (4, 0.0450, 0.0583, 0.0793), (16, 0.0267, 0.0336, 0.0424),
                                  (64, 0.0381, 0.0656, 0.0832), (1024, 0.0246, 0.0249, 0.0252)]]
    said = mc.sweep_regimes(noisy, "ours", 3000.0, 132, 1)
    assert "at 1 row ours takes 10.2 us, and already more than 1.5x that at 4 rows." in said
    assert "at 64 rows this run's p20 and p80 of ours lie more than 2x apart (widest at 64 rows: 38.1 to 83.2 us)" in said
    width = mc.width_regimes(rows, "ours", "eager", 3000.0)
    assert "**Teams of lanes** (D = 4 to 256)" in width and "**The block path** (D = 1024" in width
    assert "20.0x faster at D = 4" in width and "1.2x faster at D = 1024" in width


# --- the kernels chapters 05-07 launch from a cell (`// @launch`) -----------------------------------------------

LAUNCHED = {"activations": ["bias_hardtanh_mish_vec4"], "groupnorm": ["group_norm_leaky_relu_x2_team2"],
            "min_bias_broadcast": ["group_norm_row_min_team_kernel", "broadcast_add_vec4_kernel"]}


def test_the_kernels_the_chapters_launch_are_marked():
    from utils import build
    assert {n: [k.name for k in build.plan(n).launchables] for n in LAUNCHED} == LAUNCHED  # the file's and its headers'


@pytest.mark.gpu
def test_the_launched_kernels_write_every_element_as_pytorch_computes_it():
    """Each launch as the chapters compute its grid, into NaN-poisoned outputs, against PyTorch."""
    import math
    from utils import build
    act, gn, mb = (build.load_kernel(n) for n in LAUNCHED)
    x, bias = (t.cuda() for t in mc.x_and_bias(37, 128)(torch.Generator().manual_seed(0)))
    y = torch.full_like(x, float("nan"))
    n4 = x.numel() // 4
    act.bias_hardtanh_mish_vec4[(math.ceil(n4 / 512),), (256,), 0](x, bias, y, n4, 128, -1.0, 1.0)
    torch.testing.assert_close(y, F.mish(F.hardtanh(x + bias)), atol=1e-5, rtol=1e-5)

    N, C, G = 37, 1024, 64  # D = 16: teams of 2 lanes
    x, gamma, beta, b4 = (t.cuda() for t in mc.gn_inputs(N, C, with_bias=True)(torch.Generator().manual_seed(1)))
    y = torch.full_like(x, float("nan"))
    gn.group_norm_leaky_relu_x2_team2[(math.ceil(N * G / 128),), (256,), 0](x, gamma, beta, y, N * G, G, 16, mc.EPS, 0.01)
    h = F.leaky_relu(F.group_norm(x, G, gamma, beta, mc.EPS), 0.01)
    torch.testing.assert_close(y, h + h, atol=1e-4, rtol=1e-4)

    N = 40  # a multiple of 4: float4s of n
    x, gamma, beta, b4 = (t.cuda() for t in mc.gn_inputs(N, C, with_bias=True)(torch.Generator().manual_seed(2)))
    rowmin = torch.full((N, 1), float("nan"), device="cuda")
    out = torch.full((1, C, N, 1), float("nan"), device="cuda")
    mb.group_norm_row_min_team_kernel[(N,), (256,), 0](x, gamma, beta, rowmin, N, G, 16, mc.EPS)
    mb.broadcast_add_vec4_kernel[(1, 7), (256,), 0](rowmin, b4, out, N, C)
    torch.testing.assert_close(out, torch.min(F.group_norm(x, G, gamma, beta, mc.EPS), 1, keepdim=True)[0] + b4,
                               atol=1e-4, rtol=1e-4)


def test_06s_welford_column_is_computed_with_welford():
    """The cell's 'Welford (M2/n)' comes from Welford's update, one value at a time, in float32: no two-pass mean."""
    import pandas as pd
    cell = next("".join(c["source"]) for c in json.loads((REPO / "notebooks" / "06_groupnorm_reduction.ipynb").read_text())["cells"]
                if "def float32_stats_error(" in "".join(c["source"]))
    function = cell[:cell.index("\n\n\nerrors = ")]
    assert "v.mean(" not in function and "delta = v[:, k] - w_mean" in function
    namespace = {"torch": torch, "pd": pd, "display": lambda *a: None}
    exec(compile(cell, "notebook 06's Welford cell", "exec"), namespace)
    sumsq, welford = namespace["float32_stats_error"](1e3)
    assert sumsq > 1e-2 and welford < 1e-3  # Welford: float32 rounding of the data near 1e3, not cancellation
