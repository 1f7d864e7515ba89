"""The GEMM ladder: every rung compiles, computes x @ w.T at its declared precision's tier (fp32:
strict, tf32: tf32, bf16: bf16 on bf16 operands) on shapes that are multiples of nothing, writes every element, and refuses bad
input. The tensor-core rungs (8 on) have more tests in test_gemm_tensor_cores.py."""
import pytest
import torch
import torch.nn.functional as F

from utils import build, check, ladder

RUNGS = ladder.all_rungs()
# M x N x K: odd everywhere, one row, a square that is no power of two, the problems' shape.
SHAPES = [(37, 129, 65), (1, 8192, 8192), (1000, 1000, 1000),
          pytest.param((1024, 8192, 8192), marks=pytest.mark.large)]


def test_the_ladder_is_numbered_in_order():
    assert RUNGS, "no kernels/gemm_NN_*.cu"
    assert [int(name.split("_")[1]) for name in RUNGS] == list(range(1, len(RUNGS) + 1))


def test_the_families_split_the_ladder():
    simt, tensor_cores = ladder.rungs(), ladder.rungs("tensor_cores")
    assert simt + tensor_cores == RUNGS == ladder.rungs("all")
    assert [ladder.rung_number(n) for n in simt] == list(range(1, ladder.TENSOR_CORES_FROM))
    assert all(ladder.rung_number(n) >= ladder.TENSOR_CORES_FROM for n in tensor_cores)
    with pytest.raises(ValueError, match="family"):
        ladder.rungs("tensor cores")


@pytest.mark.parametrize("name", RUNGS)
def test_each_rung_exports_the_same_launcher(name):
    """Every rung exports gemm(x, w); a rung may export more (rung 10: each of its two kernels)."""
    exports = {e.name: e for e in build.exported_functions(build.kernel_source(name))}
    assert "gemm" in exports
    assert exports["gemm"].prototype == "torch::Tensor gemm(torch::Tensor x, torch::Tensor w)"


@pytest.mark.parametrize("name", RUNGS)
def test_each_rung_declares_a_known_precision(name):
    assert ladder.precision_of(name) in ladder.TIER_OF_PRECISION
    assert ladder.tier_of(name) in check.TIERS


def test_the_simt_rungs_are_fp32_and_tf32_is_declared():
    assert {ladder.tier_of(n) for n in ladder.rungs()} == {"strict"}
    expected = {"gemm_08_mma_tf32": "tf32", "gemm_09_wgmma_tf32": "tf32", "gemm_10_3xtf32": "fp32",
                "gemm_11_wgmma_bf16": "bf16"}
    assert {n: ladder.precision_of(n) for n in expected if n in RUNGS} == {n: p for n, p in expected.items() if n in RUNGS}


def test_declared_precision_reads_one_mark():
    assert ladder.declared_precision("// no mark\n") == "fp32"
    assert ladder.declared_precision("// a header\n// @precision: tf32\n#include <x>\n") == "tf32"
    assert ladder.declared_precision("  //  @precision:  fp32 \n") == "fp32"
    assert ladder.declared_precision("// @precision: bf16\n") == "bf16"
    with pytest.raises(ValueError, match="k.cu: `// @precision: fp8` is not one of"):
        ladder.declared_precision("// @precision: fp8\n", "k.cu")
    with pytest.raises(ValueError, match="more than one"):
        ladder.declared_precision("// @precision: tf32\n// @precision: fp32\n", "k.cu")


def test_groups_pair_each_tier_with_its_cublas():
    names = ["gemm_07_pipelined", *ladder.rungs("tensor_cores")]
    grouped = ladder.groups(names)
    assert [(tier, ref) for tier, ref, _ in grouped] == [("strict", "cuBLAS"), ("tf32", "cuBLAS TF32"),
                                                         ("bf16", "cuBLAS bf16")][:len(grouped)]
    assert sorted(n for _, _, group in grouped for n in group) == sorted(names)
    for tier, _, group in grouped:
        assert all(ladder.tier_of(n) == tier for n in group)
    assert ladder.groups(ladder.rungs()) == [("strict", "cuBLAS", ladder.rungs())]  # the SIMT ladder: as before


@pytest.mark.compile
@pytest.mark.parametrize("name", RUNGS)
def test_each_rung_compiles(name):
    assert callable(ladder.load(name))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", RUNGS)
def test_rung_matches_float64_linear(name, shape):
    x, w = (t.to(ladder.dtype_of(name)) for t in ladder.operands(*shape, seed=sum(shape)))
    ok, detail = ladder.verify(ladder.load(name), x, w, ladder.tier_of(name))
    assert ok, f"{name} at {shape} ({ladder.tier_of(name)} tier): {detail}"


@pytest.mark.gpu
@pytest.mark.parametrize("name", RUNGS)
def test_rung_through_the_harness(name):
    gemm = ladder.load(name)

    def operands(g):  # 37 x 129 x 65: no tile divides any dimension; in the rung's dtype
        return [t.to(ladder.dtype_of(name)) for t in (torch.rand(37, 65, generator=g),
                                                       torch.rand(129, 65, generator=g) * 2 - 1)]

    # A raw kernel: its launcher refuses strided inputs with a clear error (solutions call .contiguous()).
    report = check.check_fn(gemm, F.linear, operands, name=name, contiguous_only=True, tier=ladder.tier_of(name))
    report.raise_if_failed()


@pytest.mark.gpu
@pytest.mark.parametrize("name", RUNGS)
def test_rung_degenerate_shapes(name, cuda):
    gemm, like = ladder.load(name), {"device": cuda, "dtype": ladder.dtype_of(name)}
    assert gemm(torch.rand(0, 8, **like), torch.rand(5, 8, **like)).shape == (0, 5)
    assert gemm(torch.rand(3, 8, **like), torch.rand(0, 8, **like)).shape == (3, 0)
    assert torch.equal(gemm(torch.rand(3, 0, **like), torch.rand(5, 0, **like)), torch.zeros(3, 5, **like))


@pytest.mark.gpu
@pytest.mark.parametrize("name", RUNGS)
def test_rung_rejects_bad_input(name, cuda):
    gemm, like = ladder.load(name), {"device": cuda, "dtype": ladder.dtype_of(name)}
    x, w = torch.rand(4, 8, **like), torch.rand(5, 8, **like)
    for bad, message in [((x, torch.rand(5, 7, **like)), r"\[4, 8\].*\[5, 7\]"),
                         ((x.double(), w), "float32" if like["dtype"] == torch.float32 else "bfloat16"),
                         ((x.cpu(), w), "CUDA"),
                         ((torch.rand(8, 4, **like).t(), w), "contiguous"),
                         ((x[0], w), "2-D|2D|dim")]:
        with pytest.raises(RuntimeError, match=message):
            gemm(*bad)


def test_verify_checks_against_a_reference_given_in_place_of_x_at_w():
    x, w = torch.rand(5, 7, dtype=torch.float32), torch.rand(3, 7, dtype=torch.float32)
    exact = F.linear(x.double(), w.double())
    assert ladder.verify(F.linear, x, w, reference=exact)[0]
    ok, detail = ladder.verify(F.linear, x, w, reference=exact + 1.0)  # another product: every element off
    assert not ok and "15 of 15 elements off" in detail


def test_rung_7_defaults_are_the_best_recorded_tuning():
    """The BK and STAGES that common/gemm_pipelined.cuh defaults to won the latest recorded sweep
    (python -m utils.ladder --tune) on an H100, or on whichever GPU recorded one."""
    from utils import results

    records = [results.read(p) for p in results.root_dir().glob("*/ladder_tuning.json")]
    records = [r for r in records if "h100" in r["device"]["slug"]] or records  # an H100's, if there is one
    records.sort(key=lambda r: r["date"], reverse=True)  # the newest first
    if not records:
        pytest.skip("no recorded ladder_tuning yet: run `python -m utils.ladder --tune` on a GPU")
    tuned = [e for e in records[0]["entries"] if e.get("bk") is not None]
    best = min(tuned, key=lambda e: e["median_ms"])
    assert (best["bk"], best["stages"]) == ladder.defaults(), (
        f"the sweep's best is BK={best['bk']}, STAGES={best['stages']}; the header defaults to {ladder.defaults()}")
    assert [e["default"] for e in tuned].count(True) == 1


def test_tune_grid_fits_shared_memory():
    grid = ladder.tune_grid()
    assert ladder.defaults() in grid
    assert all(ladder.stage_bytes(bk) * st <= ladder.SMEM_PER_SM for bk, st in grid)
    assert (64, 4) not in grid  # 270 KB: more than a block may have
