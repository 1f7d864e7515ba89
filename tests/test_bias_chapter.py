"""utils.chapters.bias, the helpers of notebook 04, without a GPU: the Amdahl bound (from one device only),
the Amdahl bound, the PREDICTION's numbers and the predicted-vs-measured table, the cost table and
plot (one control per GEMM), seed 001's op traffic on meta tensors, the exercise checkers, and the
measurement's bookkeeping on CPU stand-ins for the kernels. Timing itself is utils.bench's."""
import json

import pytest
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

from utils.chapters import bias as bc
from utils.chapters import bias_diagram
from utils import check, results
from utils.problems import get_problem

from kernel_tests import fake_report

H100 = {"name": "NVIDIA H100 80GB HBM3", "slug": "nvidia-h100-80gb-hbm3"}
H200 = {"name": "NVIDIA H200", "slug": "nvidia-h200"}
# (contender, GEMM, biases, separate passes, median ms): an H100 run of notebook 04, rounded
TIMES = [(bc.RUNG7, "rung 7", 0, 0, 3.1111), (bc.FUSED1, "rung 7", 1, 0, 3.1197), (bc.FUSED2, "rung 7", 2, 0, 3.1101),
         (bc.SEP1, "rung 7", 1, 1, 3.1397), (bc.SEP2, "rung 7", 2, 2, 3.1698), (bc.CUB0, "cuBLAS", 0, 0, 2.6922),
         (bc.CUB1, "cuBLAS", 1, 0, 2.6844), (bc.EAGER94, "cuBLAS", 2, 1, 2.7136), (bc.FOLDED, "cuBLAS", 2, 0, 2.6873),
         (bc.COPY, "none", 0, 0, 0.0218), (bc.AGAIN, "rung 7", 0, 0, 3.1111)]


def entries():
    return [{"contender": c, "gemm": g, "biases": b, "separate_passes": s, "median_ms": t, "p20_ms": t * 0.9998,
             "p80_ms": t * 1.0002, "shape": [1024, 8192, 8192]} for c, g, b, s, t in TIMES]


def record(kind, device, date, entries_):
    return {"schema": 1, "kind": kind, "device": {**device, "cc": "9.0", "sm_count": 132,
            "memory_gb": 80.0, "l2_mb": 50.0}, "torch": "2.11.0", "cuda": "13.0", "git_commit": "abc1234",
            "date": date, "notes": "test", "entries": entries_}


PROFILE = [{"problem": 94, "op": "aten::addmm", "cuda_ms": 2.681, "pct": 91.0},
           {"problem": 94, "op": "aten::native_group_norm", "cuda_ms": 0.193, "pct": 6.5},
           {"problem": 94, "op": "aten::add", "cuda_ms": 0.028, "pct": 0.95},
           {"problem": 37, "op": "aten::addmm", "cuda_ms": 5.479, "pct": 63.9}]
CEILINGS = [{"copy_GBps": 3024.0, "fp32_tflops": 51.6, "tf32_tflops": 365.0}]


def write(root, rec):
    path = root / rec["device"]["slug"] / f"{rec['kind']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec))


@pytest.fixture
def two_devices(tmp_path):
    """The H100 recorded notebooks 01 and 04; the H200 recorded notebook 01 later."""
    write(tmp_path, record("bias_fusion", H100, "2026-11-22T08:00:00+00:00", entries()))
    write(tmp_path, record("eager_profile", H100, "2026-11-22T07:00:00+00:00", PROFILE))
    write(tmp_path, record("ceilings", H100, "2026-11-22T07:00:00+00:00", CEILINGS))
    write(tmp_path, record("eager_profile", H200, "2026-11-23T03:00:00+00:00", PROFILE))
    write(tmp_path, record("ceilings", H200, "2026-11-23T03:00:00+00:00", [{**CEILINGS[0], "copy_GBps": 4245.0}]))
    return tmp_path


# --- Amdahl -----------------------------------------------------------------------------------

def test_amdahl_bounds_from_the_profile_and_the_same_devices_copy(two_devices):
    rec = {kind: results.load(kind, device=H100["slug"], results_root=two_devices) for kind in ("eager_profile", "ceilings")}
    a = bc.amdahl(rec["eager_profile"], rec["ceilings"], (1024, 8192, 8192))
    assert a["slug"] == H100["slug"] and a["copy_GBps"] == 3024.0
    assert a["max_speedup"] == pytest.approx(100 / 91.0) and a["add_us"] == pytest.approx(28.0)
    assert a["pass_us"] == pytest.approx(4 * (2 * 1024 * 8192 + 8192) / 3024e9 * 1e6)
    assert a["gemm_shares"] == {94: 91.0, 37: 63.9}
    table = bc.amdahl_table(a).set_index("what")
    assert list(table.columns) == ["how much", "from"] and "NVIDIA H100 80GB HBM3" in a["source"]
    assert table.loc["fusing all of it, perfectly", "how much"] == "at most 1.099x"
    assert "(3024 GB/s)" in table.loc["one bias pass, estimated", "from"]


def test_amdahl_refuses_a_profile_and_ceilings_of_two_devices(two_devices):
    profile = results.load("eager_profile", device=H100["slug"], results_root=two_devices)
    ceilings = results.load("ceilings", device=H200["slug"], results_root=two_devices)
    with pytest.raises(ValueError, match="different devices"):
        bc.amdahl(profile, ceilings, (1024, 8192, 8192))
    assert bc.amdahl(None, ceilings, (1024, 8192, 8192)) is None


# --- the PREDICTION against the run -------------------------------------------------------------

def test_the_header_states_the_numbers_the_table_reads():
    assert set(bc.predicted(bc.prediction())) == {"target_pct", "noise_pct", "per_bias_us", "gemm_ms", "gain_pct",
                                                  "gemm_share_pct"}
    assert bc.predicted("costs < 2% and\n about 15 us more per bias") == {"target_pct": 2.0, "per_bias_us": 15.0}


def test_prediction_table_verdicts():
    profile = record("eager_profile", H100, "2026-11-22T07:00:00+00:00", PROFILE)
    bound = bc.amdahl(profile, None, (1024, 8192, 8192))
    text = ("costs < 1% over the same GEMM, below the run-to-run noise of about 0.3%; about 20 us more per bias, of the "
            "3.1 ms GEMM: buys ~1% for 94. The GEMM is over 90% of these models' eager time")
    table = bc.prediction_table(entries(), bound, text)
    assert list(table.columns) == ["the PREDICTION says", "predicted", "measured", "verdict"]
    rows = {r[0]: list(r[2:]) for r in table.itertuples(index=False)}
    assert rows[f"{bc.FUSED1} over {bc.RUNG7}"] == ["+0.28%", "held"]
    assert "missed: the differences exceed the noise" in rows["the fused biases, against the run's resolution"][1]
    first = rows[f"a separate pass, the first bias ({bc.SEP1} over {bc.RUNG7})"]
    assert first == ["28.6 us", "missed (1.43x the prediction)"]
    assert rows[f"eager 94's second bias ({bc.EAGER94} over {bc.CUB1})"] == ["29.2 us", "held"]
    assert rows[f"{bc.RUNG7} at this shape"] == ["3.111 ms", "held"]
    assert rows["the GEMM's share of eager time (notebook 01's profile)"] == ["37: 64%, 94: 91%", "missed for 37"]
    assert bc.prediction_table(entries(), None, None).empty


# --- one control per GEMM ------------------------------------------------------------------------

def test_every_row_is_measured_against_its_own_gemm_without_a_bias():
    bases = bc.controls(entries())
    assert {g: r["contender"] for g, r in bases.items()} == {"rung 7": bc.RUNG7, "cuBLAS": bc.CUB0}
    table = bc.cost_table(entries()).set_index("contender")
    assert list(table.columns) == ["median ms", "control", "over the control"]
    assert list(table.loc[bc.EAGER94])[1:] == [bc.CUB0, "+21.4 us (+0.79%)"]  # the plot's control, named in the row
    assert list(table.loc["one (M, N) copy"]) == [0.022, "–", "–"]
    assert "timed again last it moved +0.00%" in bc.resolution(entries())


def test_the_plot_names_each_rows_control():
    fig = bc.bias_plot(entries())
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert f"{bc.EAGER94}  [vs {bc.CUB0}]" in labels and all(bc.COPY not in label for label in labels)
    assert isinstance(bias_diagram.epilogue_diagram(), Figure)


def test_this_run_prefers_the_rows_just_measured():
    rec = record("bias_fusion", H100, "2026-11-22T08:00:00+00:00", entries())
    assert bc.this_run(None, rec).record is rec and "NVIDIA H100" in bc.this_run(None, rec).source
    assert bc.this_run(entries(), rec).record is None and bc.this_run(None, None) is None


# --- the seeds ----------------------------------------------------------------------------------

def test_seed_001s_count_on_meta_tensors():
    p = get_problem(94)
    with torch.device("meta"):
        model, x = p.Model(*p.init_inputs("full")), torch.empty(1024, 8192)
    (mm, mm_shape, _, _), (add, add_shape, read, written) = bc.traffic(lambda: model.gemm(x) + model.bias)
    assert (mm, add, add_shape, written) == ("aten.addmm", "aten.add", (1024, 8192), 4 * 1024 * 8192)
    folded = bc.traffic(lambda: F.linear(x, model.gemm.weight, model.gemm.bias + model.bias))
    assert [(op, shape) for op, shape, _, _ in folded] == [("aten.add", (8192,)), ("aten.addmm", (1024, 8192))]
    table = bc.traffic_table({"ref": lambda: model.gemm(x) + model.bias})
    assert table[["variant", "op", "writes shape"]].values.tolist() == [["ref", "aten.addmm", "(1024, 8192)"],
                                                                      ["ref", "aten.add", "(1024, 8192)"]]
    assert table.iloc[1][["MB read", "MB written"]].tolist() == [33.587, 33.554]


def test_renamed_parameters_do_not_load_and_linear_bias_is_not_zeros():
    p = get_problem(94)
    reference = p.make_model("small", seed=0)
    assert bc.state_dict_report(p.make_model("small", seed=1), reference) == "load_state_dict(strict=True): loaded"
    renamed = torch.nn.Module()
    renamed.linear_bias = torch.nn.Parameter(torch.zeros(3))
    assert "Missing key(s)" in bc.state_dict_report(renamed, reference)
    assert bc.linear_bias_init(reference.gemm).startswith("nn.Linear's bias is zeros: False;")


def test_epilogue_counts_read_the_kernels_constants():
    text = bc.epilogue_counts((1024, 8192, 8192))
    assert "128 x 128 outputs per block of 256 threads, 64 per thread" in text and "67.1 MB" in text


# --- compiling, checking, measuring --------------------------------------------------------------

def test_register_counts_are_read_from_cuobjdumps_text():
    dump = ("Function _ZN14gemm_pipelined21gemm_pipelined_kernelI12BiasEpilogueEEvPKfS2_Pfiiib:\n"
            "REG:128 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:420\n"
            "Function _ZN14gemm_pipelined21gemm_pipelined_kernelINS_10NoEpilogueEEEvPKfS3_Pfiiib:\n"
            "REG:127 STACK:8 SHARED:0 LOCAL:16\n"
            "Function _Z5otherv:\nREG:12 LOCAL:0\n")
    assert bc.instantiations(dump) == [("BiasEpilogue", 128, 0), ("NoEpilogue", 127, 16)]


class CpuKernels:
    """Stand-ins for the compiled modules, so the measurement's bookkeeping runs on the CPU."""
    gemm = staticmethod(lambda x, w: x @ w.T)
    linear_bias = staticmethod(F.linear)
    linear_two_biases = staticmethod(lambda x, w, b, e: F.linear(x, w, b) + e)


def test_measure_checks_then_times_every_contender_once(monkeypatch, capsys):
    timed = []

    def compare(fns, baseline, reps):
        timed.append(list(fns))
        for fn in fns.values():
            fn()  # every contender runs
        return [{"contender": name, "median_ms": 1.0, "p20_ms": 1.0, "p80_ms": 1.0} for name in fns]

    monkeypatch.setattr(bc.bench, "compare", compare)
    rows = bc.measure({"gemm_bias": CpuKernels, "gemm_07_pipelined": CpuKernels}, (8, 16, 32), reps=3, device="cpu")
    assert timed == [[c for c, *_ in TIMES]] and rows[7]["separate_passes"] == 1 and rows[0]["shape"] == [8, 16, 32]
    assert capsys.readouterr().out.count(", ok") == 2


def test_measure_refuses_to_time_a_wrong_kernel(monkeypatch):
    class Wrong(CpuKernels):
        linear_bias = staticmethod(lambda x, w, b: x @ w.T)

    with pytest.raises(AssertionError, match="not timing a wrong kernel"):
        bc.measure({"gemm_bias": Wrong, "gemm_07_pipelined": CpuKernels}, (8, 16, 32), reps=3, device="cpu")


def test_the_harness_on_cpu_stand_ins_passes():
    for report in bc.harness_reports(CpuKernels):
        assert not report.failed, str(report)


# --- the exercises ------------------------------------------------------------------------------

CANDIDATES = {"relu(x @ w.T + bias)": lambda lin, b: torch.relu(lin + b), "x @ w.T + bias": lambda lin, b: lin + b}


def test_expression_diagnosis_and_verdict():
    x, w, b, _ = bc.odd_operands(torch.Generator().manual_seed(0))
    out = F.linear(x, w, b)
    assert bc.expression_diagnosis(out, x, w, b, CANDIDATES) == "x @ w.T + bias"
    assert bc.expression_diagnosis(torch.zeros(37, 128), x, w, b, CANDIDATES) is None
    failed = fake_report("f", ("trials", "fail"), ("stream", "pass"))
    text = bc.expression_verdict(failed, "x @ w.T + bias", "relu(x @ w.T + bias)", CANDIDATES, "PASS")
    assert text.startswith("Not yet: trials failed.") and "computes x @ w.T + bias" in text
    assert "matches none of" in bc.expression_verdict(failed, None, "relu(x @ w.T + bias)", CANDIDATES, "PASS")
    assert bc.expression_verdict(fake_report("f", ("trials", "pass")), None, "g", CANDIDATES, "PASS!") == "PASS!"


def test_prediction_verdict():
    assert bc.prediction_verdict(None, 2.5, "measured").startswith("Not yet")
    assert bc.prediction_verdict(2.0, 2.5, "measured").startswith("PASS")
    for miss in (20.0, 0.5):  # neither the value nor the direction: a reader could bisect the answer from either
        text = bc.prediction_verdict(miss, 2.5, "the estimate says")
        assert text.startswith("Not yet") and "2.5" not in text and "high" not in text and "low" not in text


def test_the_estimate_at_37s_shape_counts_from_the_runs_rates(capsys):
    estimate, how = bc.estimate_37(entries(), (32768, 4096, 1024))
    # 16x the outputs (the pass) for 2x the FLOPs (the GEMM): the pass weighs 8x more than at 94's shape
    at_94 = 100 * 0.0218 / 3.1111
    assert estimate == pytest.approx(8 * at_94, rel=0.01) and "32768 x 4096 x 1024" in how
    run = bc.Run(entries(), "Recorded")
    bc.exercise_37(None, run, {}, on_gpu=False, reps=3, shape37=(32768, 4096, 1024))
    assert capsys.readouterr().out.startswith("Not yet: write your prediction")
    bc.exercise_37(estimate, run, {}, on_gpu=False, reps=3, shape37=(32768, 4096, 1024))
    out = capsys.readouterr().out
    assert "PASS" in out and "measuring at problem 37's shape (no GPU)" in out and "count-based estimate" in out
    bc.exercise_37(10 * estimate, run, {}, on_gpu=False, reps=3, shape37=(32768, 4096, 1024))
    out = capsys.readouterr().out  # a miss shows neither the estimate nor how it was counted
    assert out.startswith("Not yet") and "count-based estimate" not in out and f"{estimate:.2f}" not in out


def test_odd_operands_are_odd_and_not_zeros():
    x, w, b, e = bc.odd_operands(torch.Generator().manual_seed(0))
    assert (x.shape, w.shape, b.shape, e.shape) == ((37, 65), (129, 65), (129,), (129,))
    assert (b < 0).any() and (b > 0).any() and check.TIERS["strict"].atol == 1e-4
