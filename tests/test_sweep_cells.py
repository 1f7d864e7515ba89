"""The sweep cells of chapters 02, 04, 05, 07, 08, 11 and 12 run only on a GPU, so nbval on a CPU machine sees them skip.
Here each runs end to end on the CPU with the GPU's parts stood in for: the kernels by the PyTorch math they
replace, `.cuda()` by the tensor itself, the timer by fixed times, torch.compile by the function. What is
real: the loop over the sizes, each size's check against the reference, the rows the cell builds (validated
by `results.record` against the record kind), the floor, the plot and the regimes read from the rows. The
sizes are cut down (the cells' own, at the full size, are the GPU's to run)."""
import json
import math
import types

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from IPython.display import Markdown

from utils import REPO, bench, check, plots, precision, results
from utils.chapters import gemm_ladder as lc
from utils.chapters import memory as mc

H100 = {"name": "NVIDIA H100 80GB HBM3", "slug": "nvidia-h100-80gb-hbm3", "cc": "9.0", "sm_count": 132,
        "memory_gb": 79.1, "l2_mb": 50.0}
ROWS = ("(1, 4, 16, 64, 256, 1024, 4096, 16384)", "(1, 4, 16, 64, 256)")
ON_CPU = ('device="cuda"', 'device="cpu"')


class Timing:
    def __init__(self, ms):
        self.median, self.p20, self.p80 = ms, 0.9 * ms, 1.1 * ms


def timed_once(fns, reps=10, warmup=0):
    """bench.time_interleaved's stand-in: each contender called once (so that it runs), at a fixed time."""
    times = {}
    for i, (name, fn) in enumerate(fns.items()):
        fn()
        times[name] = Timing(0.01 * (i + 1))
    return times


@pytest.fixture
def gpu_faked(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self, *a, **k: self)
    monkeypatch.setattr(torch, "compile", lambda fn, **k: fn)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(multi_processor_count=132))
    monkeypatch.setattr(bench, "time_interleaved", timed_once)
    monkeypatch.setattr(results, "metadata", lambda: {"device": dict(H100), "torch": "2.11.0+cu130", "cuda": "13.0",
                                                      "git_commit": "abc1234", "date": "2026-11-28T00:00:00+00:00"})
    return tmp_path


def run_cells(tmp_path, notebook: str, ids: list[str], names: dict, subs=()) -> list:
    """Execute the cells `ids` of `notebook` in one namespace; what they displayed."""
    shown = []
    session = types.SimpleNamespace(on_gpu=True, reps=3, results_dir=tmp_path, recorded=lambda kind: None,
                                    companion=lambda kind, rec: None)
    chapter = types.SimpleNamespace(recorded=lambda kind: None, companion=lambda kind, rec: None)
    ns = dict(torch=torch, F=F, pd=pd, math=math, Markdown=Markdown, display=lambda *a: shown.extend(a), bench=bench,
              check=check, plots=plots, precision=precision, results=results, mc=mc, lc=lc, S=session, M=chapter,
              skip=lambda *a: pytest.fail(f"the cell skipped: {a}"), **names)
    cells = {c["id"]: "".join(c["source"]) for c in json.loads((REPO / "notebooks" / notebook).read_text())["cells"]}
    sources = [cells[cell_id] for cell_id in ids]
    for old, new in subs:
        assert any(old in source for source in sources), f"{notebook} no longer holds {old!r}: update the test's sizes"
        sources = [source.replace(old, new) for source in sources]
    for source in sources:
        exec(source, ns)  # noqa: S102: the chapter's own cell
    return shown


def recorded(tmp_path, kind: str) -> list[dict]:
    return results.read(tmp_path / H100["slug"] / f"{kind}.json")["entries"]


def regimes(shown) -> str:
    return "\n".join(o.data for o in shown if isinstance(o, Markdown))


def test_07_sweeps_the_min_bias_tail_over_rows(gpu_faked):
    eager = lambda x, G, g, b, eps, bias: torch.min(F.group_norm(x, G, g, b, eps), dim=1, keepdim=True)[0] + bias
    shown = run_cells(gpu_faked, "07_broadcasting_pitfall.ipynb", ["nb07-sweep-run", "nb07-sweep-plot"],
                      {"mb": types.SimpleNamespace(group_norm_min_bias=eager)}, [ROWS])
    rows = recorded(gpu_faked, "sweep_min_bias")
    assert {r["rows"] for r in rows} == {1, 4, 16, 64, 256} and {r["contender"] for r in rows} == {"ours", "eager", "torch.compile"}
    assert "from 256 rows the grid has a block for each of the 132 SMs" in regimes(shown)  # a block per row


def test_05_sweeps_the_activation_chain_over_rows(gpu_faked):
    chain = lambda x, b, lo, hi: F.mish(F.hardtanh(x + b, lo, hi))
    shown = run_cells(gpu_faked, "05_fused_activations.ipynb", ["nb05-sweep-run", "nb05-sweep-plot"],
                      {"act": types.SimpleNamespace(bias_hardtanh_mish=chain)}, [ROWS])
    rows = recorded(gpu_faked, "sweep_activations")
    assert len(rows) == 15 and "group_width" not in rows[0]
    assert "from 64 rows the grid has a block for each of the 132 SMs (64 rows, 4 blocks each)" in regimes(shown)


def test_04_sweeps_the_bias_over_k(gpu_faked):
    fused = types.SimpleNamespace(linear_bias=lambda x, w, b: F.linear(x, w, b))
    rung7 = types.SimpleNamespace(gemm=lambda x, w: F.linear(x, w))
    shown = run_cells(gpu_faked, "04_bias_fusion.ipynb", ["nb04-sweep-run", "nb04-sweep-plot"],
                      {"modules": {"gemm_bias": fused, "gemm_07_pipelined": rung7}, "SHAPE_94": (64, 256, 512)},
                      [("(64, 128, 256, 512, 1024, 2048, 4096, 8192)", "(64, 128, 256)"), ON_CPU])
    assert {(r["M"], r["N"]) for r in recorded(gpu_faked, "sweep_bias_k")} == {(64, 256)}
    share = next(o for o in shown if isinstance(o, pd.DataFrame))
    assert list(share.index) == [64, 128, 256]  # the separate pass's share per K


def test_02_sweeps_the_naive_rungs_over_m(gpu_faked):
    rungs = {n: types.SimpleNamespace(gemm=lambda x, w: F.linear(x, w)) for n in ("gemm_01_naive", "gemm_02_coalesced")}
    shown = run_cells(gpu_faked, "02_naive_gemm.ipynb", ["nb02-sweep-run", "nb02-sweep-plot"], {"modules": rungs},
                      [("8192", "256"), ("range(11)", "range(5)"), ("\"gemm_01_naive\": 64", "\"gemm_01_naive\": 4"),
                       ON_CPU])
    rows = recorded(gpu_faked, "sweep_naive_m")
    assert max(r["M"] for r in rows if r["contender"] == "gemm_01_naive") == 4  # rung 1 stops at its largest M
    assert "**The floors**" in regimes(shown)


def test_08_sweeps_the_tensor_core_rungs_over_m(gpu_faked):
    linear = lambda x, w: F.linear(x, w)  # noqa: E731: each rung stands in as the product it computes
    names = {"rung8": types.SimpleNamespace(gemm=linear), "tcc": types.SimpleNamespace(runs_here=lambda: True),
             "modules": {"gemm_10_3xtf32": types.SimpleNamespace(gemm_mma_sync=linear)}}
    shown = run_cells(gpu_faked, "08_tensor_cores_and_precision.ipynb",
                      ["nb08-sweep-setup", "nb08-sweep-run", "nb08-sweep-plot"], names,
                      [("range(15)", "range(5)"), ("N_SWEEP = K_SWEEP = 8192", "N_SWEEP = K_SWEEP = 256"), ON_CPU])
    rows = recorded(gpu_faked, "sweep_tensor_cores_m")
    assert {r["M"] for r in rows} == {1, 2, 4, 8, 16} and {r["contender"] for r in rows} == {
        "gemm_08_mma_tf32", "gemm_10_3xtf32 mma.sync", "cuBLAS SGEMM", "cuBLAS TF32"}
    said = regimes(shown)
    assert "the TF32 tensor-core arithmetic" in said and "above it the tensor cores" in said
    assert "**Measured, gemm_10_3xtf32 mma.sync**" in said


def test_08_refuses_a_rung_that_misses_its_tier(gpu_faked):
    names = {"rung8": types.SimpleNamespace(gemm=lambda x, w: F.linear(x, w) + 0.1),  # off by more than the TF32 tier (1e-2)
             "tcc": types.SimpleNamespace(runs_here=lambda: True),
             "modules": {"gemm_10_3xtf32": types.SimpleNamespace(gemm_mma_sync=lambda x, w: F.linear(x, w))}}
    with pytest.raises(AssertionError, match="gemm_08_mma_tf32 misses the tf32 tier at M = 1"):
        run_cells(gpu_faked, "08_tensor_cores_and_precision.ipynb", ["nb08-sweep-setup", "nb08-sweep-run"], names,
                  [("range(15)", "range(2)"), ("N_SWEEP = K_SWEEP = 8192", "N_SWEEP = K_SWEEP = 256"), ON_CPU])


def test_11_sweeps_linear_cublas_and_problem_94_over_m_at_both_tiers(gpu_faked):
    """Chapter 11's sweep: every contender checked against float64 at its tier, then timed, at each M and tier;
    recorded as sweep_regimes; one plot and one table of ratios per tier, with the floor."""
    from utils.problems import get_problem

    p = get_problem(94)
    dims = p.dims("small")
    pair = lambda pid, scale, device: (p.make_model("small", seed=0).eval(), p.make_model("small", seed=0).eval())
    names = {"chapter": types.SimpleNamespace(solution_pair=pair), "ops": types.SimpleNamespace(linear=F.linear),
             "build": types.SimpleNamespace(builds_here=lambda name: True), "N": dims.out_features,
             "K": dims.in_features, "ceil_rec": None, "ceilings": bench.DATASHEET_H100}
    shown = run_cells(gpu_faked, "11_every_batch_size.ipynb", ["nb11-sweep-run", "nb11-sweep-plot"], names,
                      [("[1, 2, 4, 8, 16, 32, 64, 65, 96, 128, 129, 192, 256, 512, 1024, 2048, 4096, 8192, 16384]",
                        "[1, 65, 129]"), ON_CPU, ('"full", "cuda"', '"small", "cpu"')])
    rows = recorded(gpu_faked, "sweep_regimes")
    assert {(r["tier"], r["M"]) for r in rows} == {(t, m) for t in ("strict", "tf32") for m in (1, 65, 129)}
    assert {r["contender"] for r in rows} == {"cuBLAS (F.linear)", "ours: linear", "eager: model 94", "ours: model 94"}
    tables = [o for o in shown if isinstance(o, pd.DataFrame)]
    assert len(tables) == 2 and all("ours (linear) over the floor" in t.columns for t in tables)


def test_11_refuses_a_contender_that_misses_its_tier(gpu_faked):
    from utils.problems import get_problem

    p = get_problem(94)
    dims = p.dims("small")
    pair = lambda pid, scale, device: (p.make_model("small", seed=0).eval(), p.make_model("small", seed=0).eval())
    names = {"chapter": types.SimpleNamespace(solution_pair=pair),
             "ops": types.SimpleNamespace(linear=lambda x, w, b: F.linear(x, w, b) + 1e-3),  # outside the strict tier
             "build": types.SimpleNamespace(builds_here=lambda name: True), "N": dims.out_features, "K": dims.in_features}
    with pytest.raises(AssertionError, match="ours: linear misses strict at M=1"):
        run_cells(gpu_faked, "11_every_batch_size.ipynb", ["nb11-sweep-run"], names,
                  [("[1, 2, 4, 8, 16, 32, 64, 65, 96, 128, 129, 192, 256, 512, 1024, 2048, 4096, 8192, 16384]", "[1]"),
                   ON_CPU, ('"full", "cuda"', '"small", "cpu"')])


def test_12_sweeps_problem_94_as_a_bf16_model_and_under_autocast(gpu_faked):
    """Chapter 12's sweep: at each M, ours, eager and torch.compile checked against float64 at the bf16 tier, then
    timed, as a bf16 model and under autocast; one plot with the floor and one row of ratios per mode."""
    import copy

    from utils.problems import get_problem

    p = get_problem(94)
    pair = lambda pid, scale, device: (p.make_model("small", seed=0).eval(), p.make_model("small", seed=0).eval())
    names = {"chapter": types.SimpleNamespace(solution_pair=pair), "copy": copy, "get_problem": get_problem,
             "build": types.SimpleNamespace(builds_here=lambda name: True), "LOGS": None, "json": json}
    shown = run_cells(gpu_faked, "12_bf16_and_fp16.ipynb", ["nb12-sweep-run", "nb12-sweep-plot"], names,
                      [("[1, 16, 64, 128, 256, 384, 512, 1024, 2048]", "[1, 65]"), ON_CPU, ('"full", "cuda"', '"small", "cpu"'),
                       ('dims("full")', 'dims("small")')])
    from matplotlib.figure import Figure

    tables = [r for r in shown if isinstance(r, pd.DataFrame)]
    assert len(tables) == 2 and all(list(t.index) == ["best other / ours"] for t in tables)
    figures = [o for o in shown if isinstance(o, Figure)]
    assert len(figures) == 2 and all("one read of w" in [t.get_text() for t in f.axes[0].get_legend().get_texts()]
                                     for f in figures)
