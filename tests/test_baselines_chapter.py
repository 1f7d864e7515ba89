"""utils.chapters.baselines, the helpers of notebook 01, without a GPU: one definition of speedup (over
eager fp32, TF32 off), the predicted-vs-measured table, and the measuring
loop's bookkeeping with the timer and CUDA stubbed out (torch.compile left out: COMPILE=False).
Timing itself is utils.bench's; the profiler needs a GPU."""
import pytest
import torch

from utils.chapters import baselines as bl
from utils import bench


def row(pid, contender, tf32, ms, floor_ms=2.0):
    return {"problem": pid, "contender": contender, "tf32": tf32, "median_ms": ms, "p20_ms": ms, "p80_ms": ms,
            "tflops": 1.0, "floor_ms": floor_ms, "pct_of_floor": 100 * floor_ms / ms, "speedup": 1.0, "flag": ""}


# problem 94 as an older recording stored it: the TF32-on rows' speedup over eager TF32-on
ENTRIES = [row(94, "eager", False, 3.0), row(94, "torch.compile", False, 2.75), row(94, "torch.compile max-autotune", False, 2.8),
           row(94, "eager", True, 0.6, 0.4), row(94, "torch.compile", True, 0.4, 0.4),
           row(37, "eager", False, 8.5, 5.4), row(37, "torch.compile", False, 5.0, 5.4)]
PROFILE = {"entries": [{"problem": 94, "op": "aten::addmm", "cuda_ms": 2.7, "pct": 91.0},
                       {"problem": 94, "op": "aten::add", "cuda_ms": 0.03, "pct": 1.0},
                       {"problem": 37, "op": "aten::addmm", "cuda_ms": 5.5, "pct": 64.0}]}


def test_every_speedup_is_over_eager_fp32():
    rows = {(e["problem"], e["contender"], e["tf32"]): e["speedup"] for e in bl.with_eager_fp32_speedups(ENTRIES)}
    assert rows[(94, "eager", True)] == pytest.approx(5.0)  # not 1.00x: eager TF32-on against eager fp32
    assert rows[(94, "torch.compile", True)] == pytest.approx(7.5)
    assert rows[(94, "eager", False)] == 1.0 and rows[(37, "torch.compile", False)] == pytest.approx(1.7)
    assert bl.with_eager_fp32_speedups({"entries": ENTRIES}) == bl.with_eager_fp32_speedups(ENTRIES)


def test_the_summary_holds_the_run_against_the_floor_and_the_bound():
    table = bl.summary_table(ENTRIES, PROFILE)
    assert list(table.loc[94]) == ["2.00 ms", "3.00 ms (67%)", "9%", "8% (torch.compile)", "yes", "7.50x (torch.compile)"]
    assert list(table.loc[37])[3:] == ["41% (torch.compile)", "no: its GEMM beat eager's", "–"]  # 41% saved > 36%
    assert bl.gemm_shares(PROFILE) == {94: 91.0, 37: 64.0}
    assert table.to_markdown().startswith("|   problem |")  # the Markdown form of the same table


def test_measure_baselines_compares_every_row_with_eager_fp32(monkeypatch, capsys):
    times = iter([3.0, 0.6])  # eager TF32 off, then on
    monkeypatch.setattr(bl.bench, "time_ms", lambda fn, reps: (fn(), bench.Timing(*(next(times),) * 4, reps))[1])
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    rows = bl.measure_baselines([94], "cpu", "small", 3, bench.DATASHEET_H100, compile=False)
    assert [(r["contender"], r["tf32"]) for r in rows] == [("eager", False), ("eager", True)]
    assert rows[1]["speedup"] == pytest.approx(5.0) and rows[0]["problem"] == 94
    assert "94 TF32 on  eager" in capsys.readouterr().out


def test_model_and_input_are_seeded():
    from utils.problems import get_problem

    (m1, x1), (m2, x2) = (bl.model_and_input(get_problem(62), "cpu", "small") for _ in range(2))
    assert torch.equal(x1, x2) and all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m2.state_dict().values()))
    assert not m1.training and bl.contender_fn(m1, None) is m1
