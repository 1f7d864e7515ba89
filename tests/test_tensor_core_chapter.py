"""utils.chapters.tensor_cores, the helpers of notebooks 08 and 09, without a GPU: TF32 rounding and the split
against their definitions, the float64 emulation, the modeled adder, the predictions read from the rungs'
headers, the tables, figures and exercise checkers on a synthetic record, each chapter's share of the run, and
notebook 08's exercises: each checker says Not yet on the notebook's starting value and PASS on a right answer.
Notebook 09's section 4 (whole models in the GEMM's epilogue): the fit and the quad layout against the
kernels' constants, the bytes, measure_fusion's logic on the CPU with the timing replaced, its tables, plot and
the header's prediction on a synthetic record. Notebook 09's own helpers are tests/test_hopper_chapter.py's.
The GPU runs themselves (measure, measure_fusion) are exercised by the notebooks on a GPU and by the one
gpu-marked test below."""
import ast
import json
import math
import re
import types

import pytest
import torch
from matplotlib.figure import Figure

from utils import REPO, build, env, results, tf32
from utils.chapters import epilogue_fusion as fusion
from utils.chapters import tensor_core_figures as tcf
from utils.chapters import tensor_cores as tcc
from utils.report import readme
from utils.report import tensor_cores as tcr

NB08 = REPO / "notebooks" / "08_tensor_cores_and_precision.ipynb"
NB09 = REPO / "notebooks" / "09_hopper_gemm_and_epilogue.ipynb"


# --- TF32 and the split -------------------------------------------------------------------------


def md_rows(text: str) -> list[list[str]]:
    """The cells of every Markdown table row in `text` (DataFrame.to_markdown pads them), stripped."""
    return [[c.strip() for c in line.strip()[1:-1].split("|")] for line in text.splitlines() if line.startswith("|")]


def test_to_tf32_keeps_10_mantissa_bits_and_rounds_to_nearest_ties_away():
    one = 1.0
    ulp = 2.0 ** -10  # TF32's spacing at 1.0
    t = torch.tensor([one + ulp / 4, one + ulp / 2, one + 3 * ulp / 4, -(one + ulp / 2), 0.0, float("inf"), float("nan")])
    rn = to_list(tf32.to_tf32(t))
    assert rn[:5] == [one, one + ulp, one + ulp, -(one + ulp), 0.0]  # the tie goes away from zero, either sign
    assert rn[5] == float("inf") and math.isnan(rn[6])
    tr = to_list(tf32.to_tf32(t, "truncate"))
    assert tr[:4] == [one, one, one, -one]
    x = torch.randn(10_000, generator=torch.Generator().manual_seed(1))
    assert not (tf32.to_tf32(x).view(torch.int32) & 0x1FFF).any()
    rel = ((tf32.to_tf32(x) - x).abs() / x.abs()).max().item()
    assert rel <= 2.0 ** -11 and ((tf32.to_tf32(x, "truncate") - x).abs() / x.abs()).max().item() <= 2.0 ** -10
    with pytest.raises(TypeError):
        tf32.to_tf32(x.double())


def to_list(t):
    return [float(v) for v in t.tolist()]


def test_split_is_exact_to_2_to_the_minus_22():
    x = torch.randn(100_000, generator=torch.Generator().manual_seed(2)) * 1e3
    big, small = tf32.split_tf32(x)
    assert not (big.view(torch.int32) & 0x1FFF).any() and not (small.view(torch.int32) & 0x1FFF).any()
    rest = (x.double() - big.double() - small.double()).abs() / x.double().abs()
    assert rest.max().item() <= 2.0 ** -22


def test_bits_and_the_rounding_tables():
    assert tf32.bits(1.0) == "0 01111111 0000000000|0000000000000"
    assert tf32.bits(-2.0) == "1 10000000 0000000000|0000000000000"
    table = tcc.rounding_table((1 + 2 ** -11,))
    assert "0 01111111 0000000000|1000000000000" in table and "1.00097656" in table
    stats = tcc.rounding_stats(10_000).splitlines()
    largest = [float(re.search(r"2\^(-?[\d.]+)", line).group(1)) for line in stats[1:]]
    assert -11.1 < largest[0] <= -11 and -10.1 < largest[1] <= -10  # nearest: 2^-11 at most; truncation: 2^-10
    assert float(stats[2].split()[-1]) < -1e-4 < abs(float(stats[1].split()[-1])) * -1  # truncation's bias


def test_term_sizes_put_the_dropped_product_at_float32s_level():
    sizes = tcc.term_sizes(20_000)
    assert -11.5 < sizes["xb·ws"] <= -10.9 and -11.5 < sizes["xs·wb"] <= -10.9
    assert sizes["xs·ws"] <= -21.9 and sizes["left out by the split"] <= -21.9


def test_split_gemm64_of_three_products_is_as_good_as_float32():
    g = torch.Generator().manual_seed(3)
    x, w = torch.rand(32, 512, generator=g), (torch.rand(48, 512, generator=g) * 2 - 1) / 23
    exact = x.double() @ w.double().T
    err = lambda out: ((out.double() - exact).abs().max() / exact.abs().max()).item()  # noqa: E731
    assert err(tf32.split_gemm64(x, w)) <= err(x @ w.T)
    assert err(tf32.split_gemm64(x, w, ["xb·wb"])) > 100 * err(x @ w.T)
    assert torch.equal(tf32.split_gemm64(x, w, ["xb*wb", "xs * wb"]), tf32.split_gemm64(x, w, ["xb·wb", "xs·wb"]))
    with pytest.raises(ValueError):
        tf32.split_gemm64(x, w, ["xb·xs"])


# --- accuracy of the models ---------------------------------------------------------------------

def test_accuracy_on_the_cpu_finds_1xtf32_outside_and_the_split_inside_the_tier():
    rows = tcc.accuracy([62], tcc.cpu_variants(), scale="small", seeds=2, device="cpu")
    by = {r["contender"]: r for r in rows}
    assert by["1xTF32 operands, float64 sums"]["excess"] > 1
    assert by["3xTF32, products and sums in float64"]["excess"] < 1
    assert all(len(r["excess_by_seed"]) == 2 and r["section"] == "accuracy" for r in rows)
    frame = tcr.accuracy_frame(rows)
    assert list(frame.columns) == [62] and frame.loc["1xTF32 operands, float64 sums", 62] > 1
    table = md_rows(tcr.accuracy_table(rows))
    assert table[0] == ["GEMM", "62"]
    assert next(r for r in table if r[0] == "1xTF32 operands, float64 sums")[1].startswith("**")  # a failure, bold


def test_the_gpu_variants_compute_what_they_say_on_the_cpu():
    """On a CPU, F.linear adds in float32 whatever the TF32 setting: the interleaving and the chunks must still
    give the three products' sum, and 1xTF32 the rounded operands' product."""
    g = torch.Generator().manual_seed(5)
    x, w = torch.rand(8, 96, generator=g), (torch.rand(12, 96, generator=g) * 2 - 1) / 10
    three = tf32.split_gemm64(x, w).double()
    variants = tcc.gpu_variants()
    for name in ("3xTF32, one accumulator over all of K", "3xTF32, K in chunks of 32 added in fp32"):
        assert torch.allclose(variants[name](x, w).double(), three, atol=1e-6), name
    assert torch.allclose(variants["1xTF32"](x, w), tf32.to_tf32(x) @ tf32.to_tf32(w).T)
    x3, w3 = tcc._interleaved(x, w)
    xb, xs = tf32.split_tf32(x[:, 1])
    wb, ws = tf32.split_tf32(w[:, 1])
    assert x3.shape == (8, 288) and torch.equal(x3[:, 3:6], torch.stack([xs, xb, xb], 1))  # k = 1: xs·wb, xb·ws, xb·wb
    assert torch.equal(w3[:, 3:6], torch.stack([wb, ws, wb], 1))


class FakeRung:
    """A rung's module as measure() uses it, on the CPU: every path is F.linear, each taking the arguments
    its launcher's prototype has (a pybind launcher has no defaults: linear's w_residual is passed)."""
    gemm = gemm_mma_sync = gemm_split_in_smem = staticmethod(lambda x, w: x @ w.T)
    linear = staticmethod(lambda x, w, b, w_residual: x @ w.T + b)
    tf32_residual = staticmethod(torch.zeros_like)


def test_measure_runs_every_section_and_its_record_renders(monkeypatch):
    from utils import bench

    loaded = []

    def load_kernels(kernels, *args, **kw):  # every build in one call: the cold ones side by side
        loaded.append(dict(kernels))
        return {key: FakeRung for key in kernels}

    monkeypatch.setattr(tcc.build, "load_kernels", load_kernels)
    monkeypatch.setattr(tcc.build, "load_kernel", None)  # nothing loads on its own
    monkeypatch.setattr(tcc, "PIDS", (62,))
    monkeypatch.setattr(tcc, "SHAPES", ((16, 24, 64), (32, 8, 32)))
    monkeypatch.setattr(tcc, "SWEEP_MN", (8, 8))
    monkeypatch.setattr(tcc, "SWEEP_KS", (32, 64))
    timed = []

    def compare(contenders, baseline=None, reps=3, progress=True, interleave=False):
        assert interleave  # tensor-core contenders run at the power limit: timed in turn
        timed.append(list(contenders))
        return [{"contender": n, "median_ms": 1.0 + i, "p20_ms": 1.0, "p80_ms": 1.0, "speedup": None, "tf32": False,
                 "flag": ""} for i, n in enumerate(contenders)]

    monkeypatch.setattr(bench, "compare", compare)
    entries = tcc.measure(3, seeds=1, progress=False, scale="odd", device="cpu")
    sections = {e["section"] for e in entries}
    assert sections == {"accuracy", "promotion_k", "timing"}
    assert loaded == [tcc.build_jobs(fused=False)]  # notebook 08's builds: the whole-model kernel is 09's
    assert {e["promote_k"] for e in entries if e.get("source") == "rung 10"} == set(tcc.PROMOTE_KS)
    assert len(timed) == 2 and {tcr.SGEMM, tcr.TF32_CUBLAS, *tcr.PATHS} <= set(timed[0])
    rec = fake_record() | {"entries": entries}
    results.validate(rec)
    for text in (tcr.accuracy_table(rec), tcr.promotion_table(rec), tcr.prediction_table(rec), tcr.target_check(rec),
                 tcr.render(rec), tcr.promotion_findings(rec)):
        assert text and "nan" not in text
    assert isinstance(tcf.timing_figure(rec), Figure) and isinstance(tcf.accumulation_figure(None, rec), Figure)
    json.dumps(rec, allow_nan=False)  # what results.record writes


def test_the_models_forward_is_restored_after_accuracy():
    from utils.problems import get_problem

    calls = []

    def spy(x, w):
        calls.append(1)
        return x @ w.T

    rows = tcc.accuracy([37], {"spy": spy}, scale="odd", seeds=1, device="cpu")
    assert calls and rows[0]["excess"] < 1
    model = get_problem(37).make_model("odd")
    assert "forward" not in vars(tcc._linear_of(model))


def test_excess_is_allclose_s_measure():
    ref = torch.tensor([0.0, 1.0])
    assert tcc.excess(ref + torch.tensor([1e-4, 0.0]), ref)[0] == pytest.approx(1.0)
    assert tcc.excess(ref + torch.tensor([0.0, 4e-4]), ref)[0] == pytest.approx(2.0, rel=1e-3)


# --- the accumulation ---------------------------------------------------------------------------

def test_the_modeled_adder_loses_what_fadd_keeps():
    lines = tcc.adder_example().splitlines()
    assert lines[1].split()[-1] == "3" and lines[2].split()[-1] == "4" and lines[3].split()[-1] == "0"


def test_the_model_of_one_accumulator_drifts_and_promotion_bounds_it():
    g = torch.Generator().manual_seed(4)
    K = 2048
    x, w = torch.rand(64, K, generator=g), (torch.rand(64, K, generator=g) * 2 - 1) / math.sqrt(K)
    exact = (x.double() * w.double()).sum(1)
    one = (tf32.tensor_core_dot(x, w) - exact).abs().max().item()
    promoted = (tf32.tensor_core_dot(x, w, promote=256) - exact).abs().max().item()
    assert promoted < one
    assert (tf32.fadd_dot(x, w) - exact).abs().max().item() < 1e-5


def test_accumulation_model_rows_and_figure():
    rows = tcc.accumulation_model(ks=(64, 128), outputs=16)
    assert {r["K"] for r in rows} == {64, 128} and len({r["how"] for r in rows}) == 3
    assert isinstance(tcf.accumulation_figure(rows, fake_record()), Figure)
    assert isinstance(tcf.accumulation_figure(rows), Figure)


# --- the rungs' predictions ---------------------------------------------------------------------

def test_predictions_are_read_per_shape_and_yardstick():
    text = ("PREDICTION (written before measuring): 65-80% of cuBLAS with TF32 on at 1024 x 8192 x 8192 (one wave), "
            "60-75% at 32768 x 4096 x 1024 (K = 1024). Speed: 60-70% of a third of the TF32 peak, 1.8-2.3x cuBLAS "
            "SGEMM, i.e. 25-30% of cuBLAS TF32. mma.sync: 1.0-1.4x cuBLAS SGEMM.")
    got = tcr.predictions("any", text)
    assert got["pct"] == {(1024, 8192, 8192): (65.0, 80.0), (32768, 4096, 1024): (60.0, 75.0), None: (25.0, 30.0)}
    assert got["x_sgemm"] == (1.8, 2.3)
    assert tcr.predictions("any", "45-60% of cuBLAS with TF32 on (and ~4x cuBLAS SGEMM).")["x_sgemm"] == (4.0, 4.0)
    assert tcr.predictions("any", "nothing numeric") == {"pct": {}, "x_sgemm": None}


def test_a_clause_that_names_a_path_speaks_for_that_path_only():
    text = ("PREDICTION: 3.2-3.7x cuBLAS TF32's time, i.e. 27-31% of its rate, 2.2-2.6x cuBLAS SGEMM for linear() "
            "with a kept weight split; gemm() adds the split of both operands, ~1.8-2.0x cuBLAS SGEMM. The "
            "in-shared-memory split (measured first: 1.49x and 1.63x cuBLAS SGEMM) should be slower. mma.sync "
            "path: 1.0-1.4x cuBLAS SGEMM.")
    got = {e: tcr.predictions(tcr.RUNG10, text, e) for e in ("gemm", "linear", "gemm_split_in_smem", "gemm_mma_sync")}
    assert got["gemm"] == {"pct": {}, "x_sgemm": (1.8, 2.0)}
    assert got["linear"] == {"pct": {None: (27.0, 31.0)}, "x_sgemm": (2.2, 2.6)}
    assert got["gemm_split_in_smem"] == {"pct": {}, "x_sgemm": None}  # a measurement quoted is not a prediction
    assert got["gemm_mma_sync"]["x_sgemm"] == (1.0, 1.4)
    # rung 8's only path is mma.sync: the word does not set its clause aside
    assert tcr.predictions(tcr.RUNGS[0], "45-60% of cuBLAS (and ~4x cuBLAS SGEMM). mma.sync is Ampere's.")["x_sgemm"] == (4.0, 4.0)


@pytest.mark.parametrize("name", tcr.RUNGS)
def test_every_rungs_main_path_has_a_prediction_to_compare(name):
    got = tcr.predictions(name)
    assert got["pct"] or got["x_sgemm"], f"{name}'s PREDICTION names no '% of cuBLAS' or 'x cuBLAS SGEMM' range"


def test_rung_10s_paragraph_on_its_kernels_is_found():
    from utils.show import header_section

    assert tcc.paths_label() and header_section(tcr.RUNG10, tcc.paths_label())


def test_default_promotion_interval_is_the_kernels():
    assert tcc.default_promote_k() in tcc.PROMOTE_KS
    assert re.search(r"#define GEMM10_PROMOTE_K \(gemm_wgmma::PROMOTE_K\)\n", build.kernel_source(tcr.RUNG10))
    assert f"constexpr int PROMOTE_K = {tcc.default_promote_k()};" in (
        build.KERNELS_DIR / "common" / "gemm_wgmma.cuh").read_text()


def test_build_jobs_are_the_rungs_and_the_other_intervals():
    jobs = tcc.build_jobs()
    assert [j for j in jobs if j in tcr.RUNGS] == list(tcr.RUNGS)  # this CPU machine builds every arch
    builds = [build.as_variant(kernel) for kernel in jobs.values()]  # what build.load_kernels reads them as
    variants = {v.extra_cuda_cflags for v in builds if v.name == tcr.RUNG10 and v.extra_cuda_cflags}
    assert variants == {(f"-DGEMM10_PROMOTE_K={k}",) for k in tcc.PROMOTE_KS if k != tcc.default_promote_k()}
    assert set(tcc.build_jobs(variants=False)) == {*tcr.RUNGS, tcr.FUSED_KERNEL}
    assert set(tcc.build_jobs(variants=False, fused=False)) == set(tcr.RUNGS)  # notebook 08 (its run times all three)
    wgmma = tcc.build_jobs(variants=False, rungs=tcc.WGMMA_RUNGS)  # notebook 09: the wgmma rungs and the whole models
    assert set(wgmma) == {"gemm_09_wgmma_tf32", tcr.RUNG10, tcr.FUSED_KERNEL}


def test_the_two_chapters_share_the_timed_paths_between_them():
    assert set(tcc.MMA_SYNC_PATHS) | set(tcc.WGMMA_PATHS) == set(tcr.PATHS)
    assert not set(tcc.MMA_SYNC_PATHS) & set(tcc.WGMMA_PATHS)
    assert tcc.MMA_SYNC_PATHS == ("gemm_08_mma_tf32", f"{tcr.RUNG10} mma.sync")
    rec = fake_record()
    view = tcc.timed_view(rec, tcc.MMA_SYNC_PATHS)
    timed = {e["contender"] for e in view["entries"] if e["section"] == "timing"}
    assert timed == {tcr.SGEMM, tcr.TF32_CUBLAS, *tcc.MMA_SYNC_PATHS}  # the yardsticks stay for the plot's references
    assert [e for e in view["entries"] if e["section"] != "timing"] == [e for e in rec["entries"] if e["section"] != "timing"]
    assert "gemm_09" not in tcr.prediction_table(view) and isinstance(tcf.timing_figure(view, title="t"), Figure)


def test_outside_reads_a_band_as_the_prediction_tables_do():
    assert tcc.outside(33.9, (45.0, 60.0)) == "below" and tcc.outside(98.3, (65.0, 80.0)) == "above"
    assert tcc.outside(50.0, (45.0, 60.0)) is None and tcc.outside(5.0, None) is None
    assert tcc.outside(2.83, (4.0, 4.0)) == "below" and tcc.outside(3.7, (4.0, 4.0)) is None  # "~4x": +-10%


def test_missed_names_every_prediction_outside_and_nothing_else():
    rec = fake_record()  # rung 8 at 0.9 ms: 36.7% of cuBLAS TF32 (predicted 45-60%), 3.0x SGEMM (predicted ~4x)
    text = tcc.missed(rec, tcc.MMA_SYNC_PATHS)
    assert text.count("`gemm_08_mma_tf32`") == 4 and "predicted 45-60% of cuBLAS TF32, measured **36.7% of" in text
    assert "predicted ~4x cuBLAS SGEMM, measured **3x cuBLAS SGEMM**, below" in text
    assert "mma.sync`" not in text  # 2.7 / 2.4 = 1.12x: inside its 1.0-1.4x
    fine = fake_record()
    for e in fine["entries"]:
        if e.get("contender") == "gemm_08_mma_tf32":
            e["pct_of_cublas_tf32"], e["x_cublas_sgemm"] = 50.0, 4.0
    assert tcc.missed(fine, tcc.MMA_SYNC_PATHS) == "- Every prediction of these paths held."


def test_verified_says_what_the_check_found_at_each_shape():
    text = tcc.verified(fake_record(), "gemm_10_3xtf32").splitlines()
    assert text == ["- at 1024 x 8192 x 8192: ok (strict tier)", "- at 32768 x 4096 x 1024: ok (strict tier)"]


def test_time_ratios_are_read_per_shape():
    text = tcc.time_ratios(fake_record(), "gemm_10_3xtf32 mma.sync", "gemm_08_mma_tf32")
    assert text.count("\n") == 1 and "**2.67x** its time" in text and "at 32768 x 4096 x 1024" in text
    assert tcc.time_ratios(fake_record(), "no such path", "gemm_08_mma_tf32") == ""


# --- a synthetic record: tables, figures, the README, exercise 2 --------------------------------

def fake_record(worst=None) -> dict:
    """A "tensor_cores" record with made-up numbers, shaped as measure() writes it. worst: {promote_k: excess}."""
    worst = worst or {0: 1.6, 256: 0.2, 1024: 0.4, 4096: 0.9}
    entries = []
    for i, name in enumerate(tcc.gpu_variants()):
        entries += [{"section": "accuracy", "source": "cuBLAS", "contender": name, "problem": p, "excess": 0.1 * (7 - i) + j,
                     "excess_by_seed": [0.1], "max_abs": 1e-5, "seeds": 5, "scale": "full"} for j, p in enumerate(tcc.PIDS)]
    for k, e in worst.items():
        entries += [{"section": "accuracy", "source": "rung 10", "contender": tcr.promote_label(k), "problem": p,
                     "excess": e * (1 if p == 62 else 0.5), "excess_by_seed": [e], "max_abs": 1e-5, "seeds": 5,
                     "scale": "full", "promote_k": k, "default_promote_k": 256} for p in tcc.PIDS]
    for K in tcc.SWEEP_KS:
        for name in [*(tcr.promote_label(k) for k in worst), tcr.SGEMM]:
            entries.append({"section": "promotion_k", "contender": name, "M": 1024, "N": 2048, "K": K,
                            "promote_k": None, "max_abs_err": 1e-9 * K, "strict_ratio": 0.01})
    for shape in tcr.SHAPES:
        times = {tcr.SGEMM: 2.7, tcr.TF32_CUBLAS: 0.33, "gemm_08_mma_tf32": 0.9, "gemm_09_wgmma_tf32": 0.34,
                 "gemm_10_3xtf32": 1.8, "gemm_10_3xtf32 mma.sync": 2.4,
                 **{tcr.promote_label(k): 1.6 + 0.0001 * k for k in worst if k != 256}}
        for name, ms in times.items():
            entries.append({"section": "timing", "contender": name, "shape": list(shape), "median_ms": ms,
                            "p20_ms": ms, "p80_ms": ms, "tflops": 2 * math.prod(shape) / ms / 1e9,
                            "pct_of_cublas_tf32": 100 * 0.33 / ms, "x_cublas_sgemm": 2.7 / ms, "tier": "strict",
                            "tf32": False, "verified": "ok"})
    return {"schema": 1, "kind": tcr.KIND, "device": {"name": "NVIDIA H100 80GB HBM3", "slug": "nvidia-h100-80gb-hbm3",
                                                      "cc": "9.0", "sm_count": 132, "memory_gb": 85.0, "l2_mb": 50.0},
            "torch": "2.11.0", "cuda": "12.8", "git_commit": "abc1234", "date": "2026-01-01T00:00:00+00:00",
            "notes": "test", "entries": entries}


def test_the_kind_is_registered_and_a_record_validates():
    assert tcr.KIND in results.KINDS
    results.validate(fake_record())


def test_tables_from_a_record():
    rec = fake_record()
    acc = tcr.accuracy_frame(rec)
    assert list(acc.columns) == [94, 75, 37, 62] and "1xTF32" in acc.index and not any("rung 10" in g for g in acc.index)
    assert md_rows(tcr.accuracy_table(rec))[0] == ["GEMM", "94", "75", "37", "62"]
    promo = tcr.promotion_frame(rec)
    assert list(promo.index)[0] == 256 and list(promo.index)[-1] == 0  # never promoting last
    assert promo.loc[256].tolist() == pytest.approx([0.1, 0.1, 0.1, 0.2, 1.8, 1.5])
    rows = md_rows(tcr.promotion_table(rec))
    assert rows[2] == ["256 k", "0.1", "0.1", "0.1", "0.2", "1.800", "1.50x"] and rows[-1][0] == "never"
    pred = tcr.prediction_frame(rec)
    assert "gemm_09_wgmma_tf32" in set(pred["rung, path"]) and (pred["rung, path"] == "gemm_10_3xtf32").sum() == 2
    assert ["`gemm_09_wgmma_tf32`", "1024 x 8192 x 8192"] in [r[:2] for r in md_rows(tcr.prediction_table(rec))]
    text = readme.RENDERERS[tcr.KIND](rec)
    assert "cuBLAS TF32 GEMMs on pre-split operands" in text
    assert ["gemm_09_wgmma_tf32", "1024 x 8192 x 8192"] in [r[:2] for r in md_rows(text)]
    assert tcr.timing_frame(rec)["contender"].tolist()[:1] and len(tcr.timing_frame(rec)) == sum(
        e.get("section") == "timing" for e in rec["entries"])


def test_figures():
    rec = fake_record()
    for fig in (tcf.format_figure(), tcf.split_figure(), tcf.fragment_figure(), tcf.pipeline_figure(),
                tcf.timing_figure(rec)):
        assert isinstance(fig, Figure)


def test_fragment_layout_covers_every_element_once():
    layout = tcf.fragment_layout()
    for name, (rows, cols, per_lane) in {"A": (16, 8, 4), "B": (8, 8, 2), "D": (16, 8, 4)}.items():
        cells = layout[name]
        assert set(cells) == {(r, c) for r in range(rows) for c in range(cols)}
        lanes = [lane for lane, _ in cells.values()]
        assert all(lanes.count(lane) == per_lane for lane in range(32))
    assert layout["A"][(9, 5)] == (4 * 1 + 1, 3)  # g = 1, t = 1: a[3] = A[g + 8][t + 4]


def test_the_pipeline_schedule_keeps_the_ring():
    sched = tcf.pipeline_schedule(k_tiles=12, stages=4)
    for r in sched:
        assert r["arrive"] <= r["start"] < r["end"]
        if r["kt"] >= 4:  # a stage is refilled only after the consumers are done with it
            assert r["issue"] >= sched[r["kt"] - 4]["end"]


def test_show_excerpt_renders_from_the_file_and_says_when_markers_are_gone(capsys):
    text = tcc.show_excerpt("common/tensor_core.cuh", "__device__ __forceinline__ void split_tf32", "}")
    assert text.startswith("__device__ __forceinline__ void split_tf32") and text.rstrip().endswith("}")
    assert tcc.show_excerpt("common/tensor_core.cuh", "no such line", "}") is None
    assert "no longer in" in capsys.readouterr().out


# --- the notebook: its excerpts exist, its exercises wait for the reader --------------------------

def notebook_cells(notebook=NB08):
    return json.loads(notebook.read_text())["cells"]


def code(cell):
    return "".join(cell["source"])


@pytest.mark.parametrize("notebook", [NB08, NB09], ids=lambda p: p.name[:2])
def test_every_excerpt_the_notebook_shows_is_in_its_file(notebook):
    calls = []
    for cell in notebook_cells(notebook):
        if cell["cell_type"] != "code":
            continue
        for node in ast.walk(ast.parse(code(cell).replace("%matplotlib inline", ""))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "show_excerpt":
                calls.append([a.value for a in node.args] + [k.value.value for k in node.keywords if k.arg == "after"])
    assert calls
    for name, first, last, *after in calls:
        path = REPO / "kernels" / (name if name.endswith(".cuh") else f"{name}.cu")
        text = path.read_text()
        text = text[text.index(after[0]):] if after else text
        assert first in text and last in text[text.index(first):], f"{name}: {first!r} .. {last!r} after {after}"
        lines = len(text[text.index(first):text.index(last, text.index(first))].splitlines())
        assert lines <= 30, f"{notebook.name} shows {lines} lines of {name} at once: a short excerpt, please"


def test_an_excerpt_can_start_after_a_marker(capsys):
    consumers = tcc.show_excerpt("common/gemm_wgmma.cuh", "for (int kt = 0; kt < k_tiles; ++kt, ++it) {",
                                 "const uint64_t b_big", after="// ---- consumers ----")
    producer = tcc.show_excerpt("common/gemm_wgmma.cuh", "for (int kt = 0; kt < k_tiles; ++kt, ++it) {", "full[s]")
    assert "mbar_wait(&full[s]" in consumers and "mbar_wait(&empty[s]" in producer
    assert consumers.first_line > producer.first_line
    assert tcc.show_excerpt("common/gemm_wgmma.cuh", "{", "}", after="no such marker") is None
    assert "no longer in" in capsys.readouterr().out


def starting_value(name):
    for cell in notebook_cells():
        if cell["cell_type"] != "code":
            continue
        for node in ast.parse(code(cell).replace("%matplotlib inline", "")).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
                return ast.literal_eval(node.value)
    raise AssertionError(f"no code cell of notebook 08 assigns {name}")


SIZES_W_TF32 = {"xb·wb": 0, "xb·ws": None, "xs·wb": -11, "xs·ws": None}  # the reader's own arithmetic, w = wb


def test_exercise_1_is_not_yet_at_the_start_and_passes_with_the_two_products():
    keep, sizes = starting_value("KEEP"), starting_value("SIZES")
    assert tcc.products_verdict(keep, sizes).startswith("Not yet")
    assert tcc.products_verdict({"xb·wb", "xs·wb"}, SIZES_W_TF32).startswith("PASS")
    assert tcc.products_verdict({"xb·wb", "xs·wb"}, tcc.product_sizes()).startswith("PASS")
    assert tcc.product_sizes()["xb·ws"] is None and tcc.product_sizes()["xs·ws"] is None  # ws = 0 exactly


@pytest.mark.parametrize("keep", [set(s) for r in range(1, 5) for s in tcc._subsets(r)], ids=lambda s: "+".join(sorted(s)))
def test_exercise_1_cannot_be_passed_by_trying_subsets(keep):
    """15 subsets, each tried without the sizes or with wrong ones: none passes, and no message tells how many
    products to keep or which way a size is off."""
    wrong = dict(SIZES_W_TF32, **{"xs·wb": -22})
    for sizes in (None, {p: None for p in SIZES_W_TF32}, wrong, {p: 0 for p in SIZES_W_TF32}):
        verdict = tcc.products_verdict(keep, sizes)
        assert verdict.startswith("Not yet"), (keep, sizes)
        assert "suffice" not in verdict and not re.search(r"\b(two|2) products\b", verdict)
        assert not re.search(r"\b(too (large|small|big)|larger than yours|smaller than yours|fewer|more products)\b",
                             verdict)


def test_exercise_1_shortcuts_fail():
    assert tcc.products_verdict(set(tcc.PRODUCTS), SIZES_W_TF32).startswith("Not yet")  # everything, to be safe
    assert tcc.products_verdict({"xb·wb"}, SIZES_W_TF32).startswith("Not yet")  # 1xTF32's single product
    assert tcc.products_verdict({"xb·wb", "xb·ws"}, SIZES_W_TF32).startswith("Not yet")  # the zero one kept
    assert tcc.products_verdict({"xb·wb", "xs·wb"}, dict(SIZES_W_TF32, **{"xs·wb": -30})).startswith("Not yet")
    # claims that are right but a KEEP that does not follow from them
    assert "does not follow" in tcc.products_verdict({"xb·wb", "xs·wb", "xs·ws"}, SIZES_W_TF32)


def worst(rec, k):
    return max(e["excess"] for e in rec["entries"] if e.get("source") == "rung 10" and e["promote_k"] == k)


def test_exercise_2_is_not_yet_at_the_start_and_passes_on_the_largest_interval_with_a_margin():
    start, start_excess = starting_value("MY_PROMOTE_K"), starting_value("MY_EXCESS")
    rec = fake_record({0: 1.6, 256: 0.2, 1024: 0.4, 4096: 0.9})  # 62's excess is the worst: 1.6, 0.2, 0.4, 0.9
    assert tcc.promotion_verdict(start, start_excess, rec).startswith("Not yet")
    read = {k: worst(rec, k) for k in (1024, 4096, 0)}
    assert tcc.promotion_verdict(1024, read, rec).startswith("PASS")
    assert not tcc.promotion_verdict(1024, read, None).startswith("PASS")  # no record, no verdict
    assert start is None and start_excess == {}  # placeholders: no answer is filled in for the reader


@pytest.mark.parametrize("k", [0, 256, 1024, 4096])
def test_exercise_2_cannot_be_bisected(k):
    """Each interval tried without the record's numbers is Not yet; with them, a wrong interval hears that it is
    not what the numbers imply, never which way to move, and the answer is never named."""
    rec = fake_record({0: 1.6, 256: 0.2, 1024: 0.4, 4096: 0.9})
    order = [256, 1024, 4096, 0]
    read = {j: worst(rec, j) for j in order[order.index(k):]}
    assert tcc.promotion_verdict(k, {}, rec).startswith("Not yet")
    assert tcc.promotion_verdict(k, {j: 0.1 for j in read}, rec).startswith("Not yet")  # numbers made up
    verdict = tcc.promotion_verdict(k, read, rec)
    assert verdict.startswith("PASS") == (k == 1024)
    if k != 1024:
        low = verdict.lower()
        assert "1024" not in verdict and "more often" not in low and "less often" not in low
        assert "larger" not in low.replace("the largest interval", "") and "smaller" not in low


def test_exercise_2s_answer_is_not_told_before_it_is_asked():
    """Rung 10's own interval is the exercise's answer on the recorded runs: the chapter asks which interval to
    build it with, so neither the prose before the exercise nor the promotion findings name one as the default."""
    cells = notebook_cells()
    exercise = next(i for i, c in enumerate(cells) if code(c).startswith("### Exercise 2: how often to promote"))
    before = "\n".join(code(c) for c in cells[:exercise + 2] if c["cell_type"] == "markdown")
    default = tcc.default_promote_k()
    assert f"{default} by default" not in before and f"chunk of {default} values" not in before
    findings = tcr.promotion_findings(fake_record())
    assert "default" not in findings and "every 256 k, at **0.20**" in findings
    assert "costs **" in findings  # the promotion's price is still told


@pytest.mark.parametrize("notebook", [NB08, NB09], ids=lambda p: p.name[:2])
def test_think_it_through_answers_are_hidden(notebook):
    text = "\n".join(code(c) for c in notebook_cells(notebook) if c["cell_type"] == "markdown")
    think = text[text.index("Think it through"):text.index("## Summary")]
    questions = re.findall(r"^- ", think, re.MULTILINE)
    answers = re.findall(r"^  <details><summary>Answer</summary>\n(?:.*\n)+?  </details>$", think, re.MULTILINE)
    assert questions and len(answers) == len(questions)


@pytest.mark.parametrize("notebook", [NB08, NB09], ids=lambda p: p.name[:2])
def test_the_chapter_has_no_more_code_words_than_prose_words(notebook):
    words = {"code": 0, "markdown": 0}
    for cell in notebook_cells(notebook):
        words[cell["cell_type"]] += len(code(cell).split())
    assert words["code"] <= words["markdown"], words


# --- notebook 09, section 4: whole models in the GEMM's epilogue -----------------------------------

def test_every_group_width_divides_both_tile_widths():
    assert fusion.tile_widths() == {"strict": 128, "tf32": 256}  # rung 10's PresplitConfig, rung 9's Tf32Config
    assert fusion.group_widths() == {94: 32, 75: 16, 37: 64, 62: 16}
    table = fusion.fit_table()
    assert list(table.index) == [94, 75, 37, 62] and not table.isin(["straddles"]).any().any()
    assert list(table.columns) == ["C", "G", "D = C/G", "BN = 128 (strict)", "BN = 256 (tf32)", "values per lane"]
    assert list(table.loc[75]) == [8192, 512, 16, "fits, 8 groups", "fits, 16 groups", 4]


def test_quad_layout_puts_a_rows_group_on_one_quad():
    layout = fusion.quad_layout(32)
    assert set(layout) == {(r, c) for r in range(16) for c in range(32)}  # every value once
    for lane in range(32):
        mine = [cell for cell, (owner, _) in layout.items() if owner == lane]
        assert len(mine) == 4 * 32 // 8 and {r for r, _ in mine} == {lane // 4, lane // 4 + 8}
        assert sorted(reg for (owner, reg) in layout.values() if owner == lane) == list(range(16))
    for D in (16, 32):  # the quad's 4 lanes hold a row's D values of a group, D / 4 each
        for row in range(16):
            owners = [layout[(row, c)][0] for c in range(D)]
            assert set(owners) == {4 * (row % 8) + t for t in range(4)}
            assert all(owners.count(o) == D // 4 for o in set(owners))
    assert layout[(9, 13)] == (4 * 1 + 2, 4 * 1 + 2 * 1 + 1)  # g = 1, t = 2, j = 1, h = 1, e = 1
    with pytest.raises(ValueError):
        fusion.quad_layout(12)


def test_the_kernel_states_the_layout_quad_layout_draws():
    text = (build.KERNELS_DIR / "common" / "gemm_wgmma.cuh").read_text()
    assert "value 4j + 2h + e of the lane's registers is" in " ".join(text.split())
    epilogue = (build.KERNELS_DIR / "common" / "gemm_epilogue_groupnorm.cuh").read_text()
    assert "team_welford<4>" in epilogue and "acc[4 * j + 2 * h]" in epilogue


def test_epilogue_figure_draws():
    assert isinstance(fusion.epilogue_figure(), Figure) and isinstance(fusion.epilogue_figure(37, "tf32"), Figure)


def test_fusion_bytes_count_the_gemm_output_three_times_against_once():
    b = fusion.fusion_bytes(94)
    assert (b["M"], b["C"], b["K"]) == (1024, 8192, 8192)
    assert b["unfused_bytes"] == 3 * 1024 * 8192 * 4 and b["fused_bytes"] == 1024 * 8192 * 4
    assert b["saved_bytes"] == 2 * 1024 * 8192 * 4 and b["gemm_flops"] == 2 * 1024 * 8192 * 8192
    b75 = fusion.fusion_bytes(75)  # less the row minimum's partials: 64 tiles x 1024 rows, written and read
    assert b75["saved_bytes"] == 2 * 1024 * 8192 * 4 - 2 * 64 * 1024 * 4
    assert fusion.fusion_bytes(75, bn=256)["fused_bytes"] == 1024 * 8192 * 4 + 2 * 32 * 1024 * 4
    assert fusion.fusion_bytes(37)["saved_bytes"] == 2 * 32768 * 4096 * 4


def test_fusion_bytes_table_with_and_without_ceilings():
    plain = fusion.fusion_bytes_table()
    assert list(plain.columns) == ["M x C, K", "unfused: MB moved", "fused: MB moved", "saved MB"] and len(plain) == 4
    assert list(plain.loc[37]) == ["32768 x 4096, 1024", 1610.6, 536.9, 1073.7]
    ceilings = fake_record() | {"kind": "ceilings", "entries": [{"copy_GBps": 2000.0, "fp32_tflops": 50.0,
                                                                 "tf32_tflops": 400.0}]}
    row = fusion.fusion_bytes_table(ceilings).loc[94]
    assert row["saved, ms at the copy bandwidth"] == pytest.approx(2 * 1024 * 8192 * 4 / 2e12 * 1e3, abs=1e-3)
    assert row["the GEMM's TF32 floor, ms"] == pytest.approx(2 * 1024 * 8192 * 8192 / 4e14 * 1e3, abs=1e-3)


@pytest.mark.parametrize("pid", tcc.PIDS)
def test_linear_and_rest_feed_the_whole_model_and_the_tail_ops(pid):
    from utils import ops
    from utils.problems import get_problem

    p = get_problem(pid)
    model = p.make_model("small").eval()
    x = p.get_inputs("small", generator=torch.Generator().manual_seed(0))[0]
    linear, rest = fusion.linear_and_rest(pid, model)
    tail, whole = getattr(ops, fusion.FUSION_OPS[pid][0]), ops.WHOLE_MODELS[fusion.FUSION_OPS[pid][1]]
    with torch.no_grad():
        want = model(x)
        torch.testing.assert_close(whole(x, linear.weight, linear.bias, *rest), want)  # the CPU reference
        torch.testing.assert_close(tail(ops.linear(x, linear.weight, linear.bias), *rest), want)
    assert any(t is linear.weight for t in model.parameters())  # the model's own, not a copy


class FakeFused:
    """fused_gemm_groupnorm and rung 9 as measure_fusion uses them, on the CPU."""
    fusable = staticmethod(lambda x, w, groups: True)
    gemm = staticmethod(lambda x, w: x @ w.T)

    @staticmethod
    def linear_group_norm_min_bias_atomic(*args):  # (..., w_residual, save_gemm_output) -> (out, saved)
        from utils import ops
        return ops.WHOLE_MODELS["linear_group_norm_min_bias"].op(*args)


def fake_compare(timed):
    def compare(contenders, baseline=None, reps=3, progress=True, interleave=False):
        assert interleave  # tensor-core contenders run at the power limit: timed in turn
        timed.append(list(contenders))
        return [{"contender": n, "median_ms": 1.0 + 0.1 * i, "p20_ms": 0.9 + 0.1 * i, "p80_ms": 1.1 + 0.1 * i,
                 "speedup": None, "tf32": False, "flag": ""} for i, n in enumerate(contenders)]
    return compare


def test_measure_fusion_checks_then_times_every_contender(monkeypatch):
    from utils import bench

    monkeypatch.setattr(tcc.build, "load_kernels", lambda kernels, *a, **kw: {k: FakeFused for k in kernels})
    timed = []
    monkeypatch.setattr(bench, "compare", fake_compare(timed))
    entries = fusion.measure_fusion(3, pids=(75, 62), scale="small", device="cpu", progress=False, compiler=lambda m: m)
    assert len(timed) == 8  # two rounds per problem and tier, the second in reverse order
    assert timed[0] == ["eager", tcr.COMPILE, tcr.UNFUSED, tcr.FUSED, tcr.ATOMIC, tcr.GEMM_ALONE] == timed[1][::-1]
    assert timed[4] == ["eager", tcr.COMPILE, tcr.UNFUSED, tcr.FUSED, tcr.GEMM_ALONE]
    eager = next(e for e in entries if e["contender"] == "eager" and e["problem"] == 75 and e["tier"] == "strict")
    assert eager["median_ms_by_round"] == [1.0, 1.5] and eager["median_ms"] == 1.0  # the better round
    assert {(e["problem"], e["tier"]) for e in entries} == {(75, "strict"), (75, "tf32"), (62, "strict"), (62, "tf32")}
    assert all(e["max_abs_vs_eager"] < 1e-4 and e["shape"] == [64, 1024, 256] for e in entries)
    rec = fake_record() | {"kind": tcr.FUSION_KIND, "entries": entries}
    results.validate(rec)
    json.dumps(rec, allow_nan=False)  # what results.record writes
    for text in (tcr.fusion_table(rec), tcr.fusion_findings(rec), tcr.fusion_prediction_table(rec),
                 readme.RENDERERS[tcr.FUSION_KIND](rec)):
        assert text and "nan" not in text


def test_measure_fusion_raises_on_a_wrong_contender_and_times_nothing(monkeypatch):
    from utils import bench, ops

    monkeypatch.setattr(tcc.build, "load_kernels", lambda kernels, *a, **kw: {k: FakeFused for k in kernels})
    timed = []
    monkeypatch.setattr(bench, "compare", fake_compare(timed))
    wrong = dict(ops.WHOLE_MODELS)
    right = wrong["linear_group_norm_leaky_relu_x2"]
    wrong["linear_group_norm_leaky_relu_x2"] = lambda *args: right(*args) + 1e-3  # off by 10x the strict tolerance
    monkeypatch.setattr(ops, "WHOLE_MODELS", wrong)
    with pytest.raises(AssertionError, match="problem 62, strict tier: fused differs from eager"):
        fusion.measure_fusion(3, pids=(62,), scale="small", device="cpu", progress=False, compiler=lambda m: m)
    assert timed == []


def test_measure_fusion_refuses_when_the_kernel_would_not_run(monkeypatch):
    class NotFusable(FakeFused):
        fusable = staticmethod(lambda x, w, groups: False)

    monkeypatch.setattr(tcc.build, "load_kernels", lambda kernels, *a, **kw: {k: NotFusable for k in kernels})
    with pytest.raises(RuntimeError, match="does not take these inputs"):
        fusion.measure_fusion(3, pids=(62,), scale="small", device="cpu", progress=False, compiler=lambda m: m)


def fusion_record(ms=None) -> dict:
    """A "whole_model_fusion" record with made-up numbers, shaped as measure_fusion writes it.
    ms: {(problem, tier): {contender: median_ms}}."""
    ms = ms or {(pid, tier): {"eager": 3.0, tcr.COMPILE: 2.7, tcr.UNFUSED: 1.05, tcr.FUSED: 1.0 if pid != 37 else 0.8,
                              tcr.GEMM_ALONE: 0.97} | ({tcr.ATOMIC: 1.1} if pid == 75 else {})
                for pid in tcc.PIDS for tier in tcr.TIERS}
    entries = [{"problem": pid, "tier": tier, "contender": c, "median_ms": v, "p20_ms": 0.99 * v, "p80_ms": 1.01 * v,
                "tf32": tier == "tf32", "speedup": None, "flag": "", "max_abs_vs_eager": 1e-5, "shape": [1024, 8192, 8192]}
               for (pid, tier), row in ms.items() for c, v in row.items()]
    return fake_record() | {"kind": tcr.FUSION_KIND, "entries": entries}


def test_the_fusion_kind_is_registered_and_a_record_validates():
    assert tcr.FUSION_KIND in results.KINDS
    results.validate(fusion_record())
    with pytest.raises(ValueError, match="lacks"):
        rec = fusion_record()
        del rec["entries"][0]["max_abs_vs_eager"]
        results.validate(rec)


def test_fusion_table_and_findings():
    rec = fusion_record()
    frame = tcr.fusion_frame(rec)
    assert len(frame) == 8 and frame.index[0] == (94, "strict")
    assert frame.loc[(37, "TF32")].tolist() == pytest.approx([3.0, 2.7, 1.05, 0.8, 2.7 / 0.8, 1.05 / 0.8, -17.5], abs=0.05)
    assert ["37", "TF32", "3.000", "2.700", "1.050", "0.800", "**3.38x**", "**1.31x**", "-17.5%"] in md_rows(
        tcr.fusion_table(rec))
    findings = tcr.fusion_findings(rec)
    assert "from **1.05x** (problem 94) to **1.31x** (problem 37)" in findings
    assert "Problem 75, strict tier: partials and a second kernel 1.000 ms, the atomic fold 1.100 ms: the partials are faster" in findings
    assert "no problem's two timings overlap" in findings  # p20-p80 of 1% around 1.00 and 1.05


def test_fusion_findings_see_an_overlap():
    ms = {(94, "strict"): {"eager": 3.0, tcr.COMPILE: 2.7, tcr.UNFUSED: 1.005, tcr.FUSED: 1.0}}
    assert "overlap within the run's p20-p80 spread for problem(s) 94" in tcr.fusion_findings(fusion_record(ms))


def test_fusion_figure():
    assert isinstance(fusion.fusion_figure(fusion_record()), Figure)


def test_the_prediction_is_read_from_the_kernels_header():
    want = tcr.fusion_predictions()
    assert set(want) == {"strict", "tf32"}
    for tier in want.values():  # whatever the numbers, the header names each: epilogue and every problem's saving
        assert tier["epilogue"] is not None and set(tier["saving"]) == set(tcc.PIDS)
    text = ("PREDICTION: strict tier, plus 2-4% (the epilogue): 37 saves ~0.3 ms of ~3.0 (10%), 94/62/75 ~0.01 ms "
            "of ~1.1 (1%). TF32 tier: plus 3-6%: 37 saves ~0.3 ms of ~1.1 (25-30%); at 94/62/75 rung 9 is close, "
            "so they come out within +-5%.")
    parsed = tcr.fusion_predictions(text)
    assert parsed["strict"] == {"epilogue": (2.0, 4.0), "saving": {37: (10.0, 10.0), 94: (1.0, 1.0), 62: (1.0, 1.0),
                                                                   75: (1.0, 1.0)}}
    assert parsed["tf32"] == {"epilogue": (3.0, 6.0), "saving": {37: (25.0, 30.0), 94: (-5.0, 5.0), 62: (-5.0, 5.0),
                                                                 75: (-5.0, 5.0)}}
    frame = tcr.fusion_prediction_frame(fusion_record(), text)
    assert frame.loc[(37, "TF32")].tolist() == pytest.approx(["3-6%", -17.5, "below", "25-30%", 23.8, "below"], abs=0.05)
    assert frame.loc[(94, "strict"), ["predicted saving", "saving verdict"]].tolist() == ["1%", "+3.8 points from it"]
    rows = md_rows(tcr.fusion_prediction_table(fusion_record(), text))
    assert ["94", "strict", "2-4%", "+3.1%", "inside", "1%", "+4.8%", "+3.8 points from it"] in rows
    assert next(r for r in rows if r[:2] == ["62", "TF32"])[5] == "±5%"


@pytest.mark.gpu
def test_measure_fusion_on_the_gpu_records_a_valid_run():
    """The real kernels at the small scale (the notebook measures the full one, with torch.compile; here the
    model itself stands in for its compiled self, to keep the test short): every contender checked and timed."""
    if not fusion.fusion_runs_here():
        pytest.skip("the whole-model kernels need an sm_90 GPU")
    entries = fusion.measure_fusion(3, pids=(75, 37), scale="small", progress=False, compiler=lambda m: m)
    rec = fake_record() | {"kind": tcr.FUSION_KIND, "entries": entries}
    results.validate(rec)
    assert {e["contender"] for e in entries} >= {"eager", tcr.COMPILE, tcr.UNFUSED, tcr.FUSED, tcr.ATOMIC, tcr.GEMM_ALONE}
    assert all(e["median_ms"] > 0 for e in entries) and tcr.fusion_table(rec)


def test_every_timed_path_calls_its_launcher_with_every_argument_of_its_prototype():
    """A pybind launcher takes every argument its prototype has (no defaults): chapter 08's run once stopped on
    `linear(x, w, bias)` without the optional w_residual. Stand-ins with the launchers' exact arity, each
    path called as the run calls it."""
    protos = {e.name: e for e in build.exported_functions(build.kernel_source(tcr.RUNG10))}

    def strict(name, fn):
        arity = len(build.parameters(protos[name]))
        return lambda *args: fn(*args) if len(args) == arity else pytest.fail(f"{name} called with {len(args)} of {arity}")

    product = lambda x, w: x @ w.T  # noqa: E731
    rung10 = types.SimpleNamespace(
        gemm=strict("gemm", product), gemm_split_in_smem=strict("gemm_split_in_smem", product),
        gemm_mma_sync=strict("gemm_mma_sync", product), tf32_residual=strict("tf32_residual", torch.zeros_like),
        linear=strict("linear", lambda x, w, b, r: x @ w.T + b))
    mods = {rung: types.SimpleNamespace(gemm=product) for rung in tcr.RUNGS} | {tcr.RUNG10: rung10}
    x, w = torch.randn(5, 8), torch.randn(3, 8)
    paths = tcc.timed_paths(mods, {k: types.SimpleNamespace(gemm=product) for k in tcc.PROMOTE_KS}, w)
    assert set(tcr.PATHS) <= set(paths)
    for label, (fn, _) in paths.items():
        torch.testing.assert_close(fn(x, w), x @ w.T, msg=label)


# --- rung 8 launched from a cell ----------------------------------------------------------------------

def test_the_launch_cell_uses_rung_8s_own_configuration():
    """The cell computes grid, block and shared memory from the tiles; they must be Tf32Config's."""
    header = (build.KERNELS_DIR / "common" / "gemm_mma.cuh").read_text()
    bm, bn, bk, wm, wn, stages, _ = map(int, re.search(r"using Tf32Config = Config<([\d, ]+)>;", header).group(1).split(","))
    pad = int(re.search(r"constexpr int PAD = (\d+);", header).group(1))
    cell = next(code(c) for c in notebook_cells() if "mma_tf32_kernel[grid, block, smem]" in code(c))
    assert f"BM, BN, BK, PAD, STAGES = {bm}, {bn}, {bk}, {pad}, {stages}" in cell
    assert f"WARPS_M, WARPS_N = {wm}, {wn}" in cell
    assert "// @launch" in (build.KERNELS_DIR / "gemm_08_mma_tf32.cu").read_text()


@pytest.mark.gpu
def test_rung_8s_launchable_kernel_computes_what_its_launcher_does():
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    mod = build.load_kernel("gemm_08_mma_tf32")
    M, N, K = 300, 520, 264
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.rand(M, K, device="cuda", generator=g)
    w = torch.rand(N, K, device="cuda", generator=g) - 0.5
    out = torch.full((M, N), float("nan"), device="cuda")
    mod.mma_tf32_kernel[(-(-M // 128) * -(-N // 128),), (256,), 3 * 256 * 36 * 4](x, w, out, M, N, K)
    assert torch.equal(out, mod.gemm(x, w))


@pytest.mark.compile
def test_rung_8s_launchable_kernel_is_bound_with_its_parameters():
    if env.mode() == "reference-only":
        pytest.skip(env.no_build_reason())
    mod = build.load_kernel("gemm_08_mma_tf32")
    assert [p.name for p in mod.mma_tf32_kernel.kernel.params] == ["x", "w", "out", "M", "N", "K"]
