"""utils.chapters.session: the notebooks' shared helpers, and notebook 10's exercise 2 checker
(utils.chapters.solution_exercises; exercise 1's and the shortcuts of both: tests/test_solutions_exercises.py).

The checkers' starting points are the notebook's own cells, run here: each must say "Not yet"
until the reader acts, and a solved version must say PASS."""
import json

import pytest
import torch

from utils import REPO, env, results
from utils.report import readme, records
from utils.chapters import session as chapter
from utils.chapters import solution_exercises as exercises
from utils.check import CheckReport, CheckResult

from kernel_tests import notebook_cell

NB10 = "10_fused_solutions.ipynb"


def notebook_cells(name: str) -> list[dict]:
    return json.loads((REPO / "notebooks" / name).read_text())["cells"]


def code(cell: dict) -> str:
    return "".join(cell["source"])


def test_session_resolves_auto_from_the_machines_mode(monkeypatch):
    monkeypatch.setattr(env, "mode", lambda: "gpu")
    s = chapter.session()
    assert (s.device, s.scale, s.on_gpu, s.can_compile) == ("cuda", "full", True, True)
    monkeypatch.setattr(env, "mode", lambda: "reference-only")
    s = chapter.session("auto", "odd", "7", "/tmp/r")
    assert (s.device, s.scale, s.reps, str(s.results_dir), s.on_gpu, s.can_compile) == ("cpu", "odd", 7, "/tmp/r", False, False)
    assert s.plot_path("x") is None  # a replot of a record is not saved over it
    assert "mode reference-only" in str(s)


def test_session_with_cuda_and_no_gpu_stops_in_the_first_cell(monkeypatch):
    monkeypatch.setattr(env, "mode", lambda: "compile-only")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"DEVICE='cuda' but no CUDA GPU is visible \(torch.cuda.is_available\(\) "
                                           r"is False\): run with DEVICE='cpu'"):
        chapter.session("cuda")
    assert chapter.session("cpu").device == "cpu"


def test_session_on_a_gpu_where_no_kernel_builds_says_why(monkeypatch, capsys):
    monkeypatch.setattr(env, "mode", lambda: "reference-only")
    monkeypatch.setattr(env, "why", lambda: "a GPU is visible (X) but no kernel can be built here: nvcc not found")
    s = chapter.session()
    assert (s.device, s.scale, s.on_gpu, s.can_compile) == ("cpu", "small", False, False)
    assert capsys.readouterr().out == "a GPU is visible (X) but no kernel can be built here: nvcc not found\n"
    monkeypatch.setattr(env, "mode", lambda: "gpu")  # a working GPU: nothing to say
    chapter.session()
    assert capsys.readouterr().out == ""


def test_session_reads_one_device_for_every_kind(tmp_path, monkeypatch):
    """Without a GPU: one device (results.reading_device) for every kind; on a GPU: only its own records."""
    import json

    def write(slug, kind, entries, date):
        rec = {"schema": 1, "kind": kind, "device": {"name": slug.upper(), "slug": slug, "cc": "9.0", "sm_count": 132,
                                                    "memory_gb": 80.0, "l2_mb": 50.0},
               "torch": "2", "cuda": "12.8", "git_commit": "abc1234", "date": date, "notes": "", "entries": entries}
        (tmp_path / slug).mkdir(exist_ok=True)
        (tmp_path / slug / f"{kind}.json").write_text(json.dumps(rec))

    profile = [{"problem": 94, "op": "aten::addmm", "cuda_ms": 9.0, "pct": 90.0}]
    write("gpu-a", "eager_profile", profile, "2025-06-01T00:00:00+00:00")
    write("gpu-a", "x", [{}], "2025-06-01T00:00:00+00:00")
    write("gpu-b", "eager_profile", profile, "2025-07-01T00:00:00+00:00")  # newer, but gpu-a recorded more
    monkeypatch.setattr(env, "device_slug", lambda name=None: "cpu")
    off = chapter.Session("reference-only", "cpu", "small", 5, tmp_path)
    assert off.reading_device == "gpu-a" and off.recorded("eager_profile")["device"]["slug"] == "gpu-a"
    monkeypatch.setattr(env, "device_slug", lambda name=None: "gpu-b")
    on = chapter.Session("gpu", "cuda", "full", 5, tmp_path)
    assert on.reading_device == "gpu-b" and on.recorded("x") is None  # gpu-a's is another device's
    assert results.reading_device(tmp_path, on_gpu=False) == "gpu-a"


def test_harness_summary_says_what_failed_and_what_was_skipped():
    ok = CheckReport("ModelNew vs problem 62", "strict", "cuda:0", [CheckResult("trials", "pass"), CheckResult("stream", "skip")])
    bad = CheckReport("ModelNew vs problem 75", "tf32", "cuda:0", [CheckResult("trials", "fail")])
    lines = chapter.harness_summary([ok, bad]).splitlines()
    assert "1 pass, 0 fail, 1 skip: OK (skipped: stream)" in lines[0] and "tier strict" in lines[0]
    assert lines[1].endswith("FAILED: trials") and "tier tf32" in lines[1]


def _entry(pid, contender, tf32, protocol, ms):
    return {"problem": pid, "contender": contender, "tf32": tf32, "protocol": protocol, "median_ms": ms,
            "p20_ms": ms, "p80_ms": ms, "tflops": 1.0, "floor_ms": 1.0, "pct_of_floor": 50.0}


ENTRIES = [_entry(94, c, tf32, protocol, ms * (1.1 if protocol == "per_call" else 1.0))
           for tf32, times in ((False, {"eager": 3.0, "torch.compile": 2.8, "torch.compile max-autotune-no-cudagraphs": 2.7,
                                        "ours": 2.7}),
                               (True, {"eager": 0.6, "torch.compile": 0.40, "torch.compile max-autotune-no-cudagraphs": 0.45,
                                       "ours": 0.38}))
           for c, ms in times.items() for protocol in ("steady", "per_call")]


def test_solution_ratios_take_the_faster_compile_mode_and_eager_fp32():
    ratios = {(r["tf32"], r["protocol"]): r for r in chapter.solution_ratios(ENTRIES)}
    off, on = ratios[(False, "steady")], ratios[(True, "steady")]
    assert off["compile_mode"] == "torch.compile max-autotune-no-cudagraphs" and off["vs_compile"] == pytest.approx(1.0)
    assert on["compile_mode"] == "torch.compile" and on["vs_compile"] == pytest.approx(0.40 / 0.38)
    assert on["vs_eager_fp32"] == pytest.approx(3.0 / 0.38)  # against eager with TF32 off, not on
    assert ratios[(True, "per_call")]["vs_eager_fp32"] == pytest.approx(3.0 / 0.38)  # same protocol on both sides


def test_solution_ratios_of_another_contender_and_against_eager_with_the_same_setting():
    frozen = [e | {"contender": "ours, frozen", "median_ms": e["median_ms"] / 2} for e in ENTRIES if e["contender"] == "ours"]
    ratios = {(r["tf32"], r["protocol"]): r for r in chapter.solution_ratios(ENTRIES + frozen, "ours, frozen")}
    on = ratios[(True, "steady")]
    assert on["contender"] == "ours, frozen" and on["ours_ms"] == pytest.approx(0.19)
    assert on["vs_eager"] == pytest.approx(0.6 / 0.19) and on["vs_eager_fp32"] == pytest.approx(3.0 / 0.19)


def test_verdict_against_a_target_and_a_moonshot():
    assert chapter.verdict(2.2, 2.0, 2.5) == "met"
    assert chapter.verdict(2.5, 2.0, 2.5) == "met, moonshot too"
    assert chapter.verdict(1.99, 2.0) == "missed"
    assert chapter.verdict(2.7391, 2.74) == "met"  # read as the table shows it, 2.74x: not "2.74x, missed"


def test_ratio_table_marks_each_row_met_or_missed_from_the_numbers():
    def target(r):
        return ("vs_eager", 5.0, None) if r["tf32"] else ("vs_compile", 1.1, 1.5)

    table = chapter.ratio_table(ENTRIES, target, predicted=lambda r: f"p{r['problem']}", protocols=("steady", "per_call"))
    assert list(table.columns) == ["problem", "TF32", "contender", "predicted", "× compile, steady",
                                   "× compile, per call", "× eager", "target", "verdict"]
    rows = table.set_index(["problem", "TF32", "contender"])
    # TF32 off: 2.7 against the faster mode's 2.7; TF32 on: 0.6 / 0.38 = 1.58x eager with TF32 on
    off, on = rows.loc[(94, "off", "ours")], rows.loc[(94, "on", "ours")]
    assert off["× compile, steady"] == pytest.approx(1.0) and off["× eager"] == pytest.approx(3.0 / 2.7, abs=0.005)
    assert (off["target"], off["verdict"], off["predicted"]) == ("≥ 1.1x compile (moonshot 1.5x)", "missed", "p94")
    assert on["× compile, per call"] == pytest.approx(0.40 / 0.38, abs=0.005)
    assert on["× eager"] == pytest.approx(0.6 / 0.38, abs=0.005) and (on["target"], on["verdict"]) == ("≥ 5x eager", "missed")
    plain = chapter.ratio_table(ENTRIES, lambda r: None, tf32_column=False)
    assert list(plain.columns) == ["problem", "contender", "× compile, steady", "× eager", "target", "verdict"]
    assert plain.iloc[0].tolist() == [94, "ours", 1.0, 1.11, "–", "–"]
    text = chapter.ratio_markdown(table)
    lines = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()]
    assert lines[2] == ["94", "off", "ours", "p94", "1.00x", "1.00x", "1.11x", "≥ 1.1x compile (moonshot 1.5x)",
                        "**missed**"]


def test_the_solutions_record_renders_for_the_readme():
    record = {"schema": 1, "kind": "solutions", "entries": ENTRIES}
    frame = chapter.record_table(record)  # what the README writes, as a DataFrame
    assert frame.loc[(94, "ours", "on")].tolist() == pytest.approx([0.38, 0.418, 3.0 / 0.38, 0.40 / 0.38, 0.44 / 0.418])
    assert frame.loc[(94, "eager", "off"), ["steady ms", "per call ms", "vs eager fp32"]].tolist() == pytest.approx(
        [3.0, 3.3, 1.0])
    rows = [[c.strip() for c in line.strip()[1:-1].split("|")] for line in readme.render(record).splitlines()
            if line.startswith("|")]
    assert ["ours", "on", "0.380", "0.418", "7.89x", "1.05x", "1.05x"] in rows


# --- notebook 10's exercises --------------------------------------------------------------------


def _spellings(shape) -> list[str]:
    """The ways a message could print a shape: as a tuple, a list, a torch.Size or its sizes in a row."""
    sizes = ", ".join(map(str, shape))
    return [f"({sizes})", f"[{sizes}]", sizes]


def _op_shapes() -> list[tuple[int, ...]]:
    """The shapes problem 75's op returns for the checker's inputs: the exercise's answer."""
    return [(1, C, N, 1) for N, C, _ in ((37, 115, 5), (1, 64, 4), (0, 64, 4))]


def test_the_fake_exercise_fails_until_the_reader_acts():
    draft = notebook_cell(NB10, "my_fake")["my_fake"]
    verdict = exercises.fake_verdict(draft)
    assert verdict.startswith("Not yet") and "(37, 115)" in verdict  # which input it failed on
    assert "2 dimensions, a different number from the op's" in verdict  # what is wrong with the draft's (N, 1)


def test_the_fake_exercise_says_what_is_wrong_without_the_shape_it_wants():
    draft = notebook_cell(NB10, "my_fake")["my_fake"]

    def transposed(x, num_groups, gamma, beta, eps, bias):  # the right number of dimensions, N and C swapped
        N, C = x.shape
        return x.new_empty((1, N, C, 1))

    for wrong in (draft, transposed):
        verdict = exercises.fake_verdict(wrong)
        assert verdict.startswith("Not yet")
        for shape in _op_shapes():
            assert not any(spelled in verdict for spelled in _spellings(shape)), (verdict, shape)
    assert "dimensions 1 and 2 have other sizes" in exercises.fake_verdict(transposed)


def test_the_fake_exercise_passes_when_solved():
    def solved(x, num_groups, gamma, beta, eps, bias):
        N, C = x.shape
        return x.new_empty((1, C, N, 1))

    assert exercises.fake_verdict(solved).startswith("PASS")
    assert "on cpu" in exercises.fake_verdict(lambda x, *a: torch.empty(1, x.shape[1], x.shape[0], 1))
    assert "raised ZeroDivisionError" in exercises.fake_verdict(lambda *a: 1 / 0)
    assert "not a tensor" in exercises.fake_verdict(lambda *a: None)


def test_the_fake_exercise_cell_calls_the_checker_that_keeps_the_answer():
    cell = next(c for c in notebook_cells(NB10) if c["cell_type"] == "code" and "fake_verdict(my_fake)" in code(c))
    assert "solution_exercises.fake_verdict(my_fake)" in code(cell)


@pytest.mark.gpu
def test_measure_solutions_times_every_contender_in_both_protocols():
    rows = chapter.measure_solutions([62], scale="small", reps=3, progress=False)
    assert len(rows) == 6 * 2 * 2  # contenders x TF32 off/on x protocols
    assert {r["protocol"] for r in rows} == {"steady", "per_call"}
    assert {r["contender"] for r in rows} == {"eager", *chapter.COMPILE_MODES, "ours", "ours, frozen",
                                              "ours + torch.compile"}
    assert all("compile_s" in r for r in rows if "torch.compile" in r["contender"])
    assert all(r["max_abs_vs_eager"] < (1e-2 if r["tf32"] else 1e-4) for r in rows)


def test_quiet_inductor_silences_the_autotuner_and_its_warnings():
    import logging
    import warnings

    with warnings.catch_warnings():
        chapter.quiet_inductor()
        assert logging.getLogger("torch._inductor").getEffectiveLevel() >= logging.CRITICAL
        # max-autotune's table of candidates goes to stderr past the logs (249 lines in one recorded run)
        from torch._inductor import config as inductor_config
        assert inductor_config.autotune_num_choices_displayed == 0
        assert inductor_config.max_autotune_report_choices_stats is False
        with warnings.catch_warnings(record=True) as caught:
            warnings.warn("TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled")
        assert not caught


@pytest.mark.gpu
def test_measure_training_checks_then_times_a_step_of_every_contender():
    rows = chapter.measure_training([62], scale="small", reps=3, progress=False)
    assert len(rows) == 4 * 2  # contenders x TF32 off/on
    assert {r["contender"] for r in rows} == {"eager", *chapter.COMPILE_MODES, "ours"}
    assert all(r["protocol"] == "steady" and "gradients" in r for r in rows)
    assert all("compile_s" in r for r in rows if r["contender"].startswith("torch.compile"))
    results.validate({"schema": 1, "kind": "training", "device": {"name": "x", "slug": "x", "cc": "9.0", "sm_count": 1,
                                                                 "memory_gb": 1.0, "l2_mb": 1.0},
                      "torch": "2", "cuda": "12", "git_commit": "a", "date": "2025-06-01T00:00:00+00:00", "notes": "",
                      "entries": rows})


@pytest.mark.gpu
def test_measure_autocast_times_every_contender_under_bf16():
    rows = chapter.measure_autocast([62], scale="small", reps=3, progress=False)
    assert {r["contender"] for r in rows} == {"eager", *chapter.COMPILE_MODES, "ours"}
    assert all(r["autocast"] == "bf16" and r["protocol"] == "steady" for r in rows)


def test_a_timing_cell_runs_only_on_a_gpu_at_full_scale_and_says_why_not(tmp_path, capsys):
    assert chapter.Session("gpu", "cuda", "full", 5, tmp_path).measures("timing x")
    assert not chapter.Session("gpu", "cuda", "small", 5, tmp_path).measures("timing x")
    assert not chapter.Session("compile-only", "cpu", "small", 5, tmp_path).measures("timing x")
    assert capsys.readouterr().out.splitlines() == [
        "SKIPPED: timing x (scale small: only KernelBench's sizes are measured)", "SKIPPED: timing x (no GPU)"]


def test_a_measurement_recorded_at_this_commit_by_another_process_is_shown_not_measured_again(tmp_path, monkeypatch,
                                                                                             capsys):
    monkeypatch.setattr(env, "device_slug", lambda name=None: "gpu-a")
    monkeypatch.setattr(results, "git_commit", lambda repo=None: "abc1234")
    on = chapter.Session("gpu", "cuda", "full", 5, tmp_path)
    kept = {}
    monkeypatch.setattr(results, "load", lambda kind, device=None, root=None: kept.get((kind, device, root)))

    def recorded_at(commit):
        kept["training", "gpu-a", tmp_path] = {"git_commit": commit, "entries": []}

    assert on.measures_unless_recorded("training", "timing x", by="a step")  # no record: measured here
    recorded_at("abc1234")
    assert not on.measures_unless_recorded("training", "timing x", by="a step")
    assert capsys.readouterr().out == "timing x: recorded at this commit (abc1234) by a step; shown below\n"
    recorded_at("0ld0ld0")  # another commit's record: measured again
    assert on.measures_unless_recorded("training", "timing x", by="a step")
    assert not chapter.Session("compile-only", "cpu", "small", 5, tmp_path).measures_unless_recorded(
        "training", "timing x", by="a step")  # no GPU: skipped as any timing cell is


def test_a_record_is_shown_with_where_and_when_or_skipped(tmp_path, monkeypatch, capsys):
    import json

    monkeypatch.setattr(env, "device_slug", lambda name=None: "cpu")
    off = chapter.Session("reference-only", "cpu", "small", 5, tmp_path)
    assert off.shown("solutions", "the table") is None
    assert capsys.readouterr().out == "SKIPPED: the table (no GPU and no recorded run)\n"
    rec = {"schema": 1, "kind": "solutions", "device": {"name": "GPU A", "slug": "gpu-a", "cc": "9.0", "sm_count": 1,
                                                       "memory_gb": 80.0, "l2_mb": 50.0},
           "torch": "2", "cuda": "12.8", "git_commit": "abc1234", "date": "2025-06-01T00:00:00+00:00", "notes": "",
           "entries": ENTRIES}
    (tmp_path / "gpu-a").mkdir()
    (tmp_path / "gpu-a" / "solutions.json").write_text(json.dumps(rec))
    shown = off.shown("solutions", "the table")
    assert shown["device"]["slug"] == "gpu-a" and capsys.readouterr().out == ""
    text = chapter.record_caption(shown)
    assert text.startswith("Recorded on GPU A, 2025-06-01. Speedup is against eager PyTorch") and "abc1234" not in text
    assert chapter.record_table(shown).equals(records.solutions_frame(shown))
    # on a GPU without this GPU's record (an earlier chapter's run records it), the line says so, not "no GPU"
    on = chapter.Session("gpu", "cuda", "full", 5, tmp_path)
    assert on.missing("tensor_cores", "chapter 08's run") == (
        "no tensor_cores record on this GPU yet: chapter 08's run records it")
    assert off.missing("tensor_cores", "chapter 08's run") == "no GPU and no recorded run"



def test_a_training_steps_gradients_verdict_judges_against_float64_and_its_draws():
    # the path measure_training takes on the GPU, run here: a wrong gradient sends the judge to
    # float64 and to its moved draws (a list of them: check.judge_gradients' contract)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
    g = torch.Generator().manual_seed(0)
    x, grad = torch.randn(5, 8, generator=g), torch.randn(5, 4, generator=g)
    want = chapter._training_step(model, x, grad)()
    assert chapter._gradients_verdict(want, want, model, x, grad, False)[0] == "pass"
    status, detail = chapter._gradients_verdict(tuple(w * 1.5 for w in want), want, model, x, grad, False)
    assert status == "fail" and "wrong gradients" in detail
