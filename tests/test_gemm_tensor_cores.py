"""The tensor-core rungs of the GEMM ladder (8: mma.sync TF32, 9: wgmma TF32, 10: 3xTF32 with
promoted accumulation, 11: wgmma on bf16 and fp16 operands): they build (on CI too: nvcc, no GPU), contain the instructions they are
about, and on a GPU compute x @ w.T at their tier for every element on shapes that are multiples
of nothing, misaligned views, K % 4 != 0 and degenerate shapes, and refuse bad input clearly.
Rung 10 meets the strict tier at the problems' full shapes on data like the problems'.

test_gemm_ladder.py runs the same rungs through the ladder's checks (the harness, bad input);
this file adds what is particular to tensor cores: every kernel path (rung 9's and 10's TMA paths
and their mma.sync fallbacks, rung 10's second export), alignment, and the SASS."""
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from utils import build, ladder, precision, toolchain

RUNG8, RUNG9, RUNG10, RUNG11 = "gemm_08_mma_tf32", "gemm_09_wgmma_tf32", "gemm_10_3xtf32", "gemm_11_wgmma_bf16"
KERNELS = (RUNG8, RUNG9, RUNG10, RUNG11)
EXPORTS = {RUNG8: {"gemm"}, RUNG9: {"gemm"}, RUNG10: {"gemm", "gemm_mma_sync", "gemm_split_in_smem"}, RUNG11: {"gemm"}}
PATHS = [(k, e) for k in KERNELS for e in sorted(EXPORTS[k])]  # every exported kernel path of x @ w.T
# rung 10's third export, x @ w.T + bias for the solutions (workbook::linear; tests/test_ops.py)
OTHER_EXPORTS = {RUNG10: {"linear", "linear_backward", "tf32_residual"}}
TIER = {RUNG8: "tf32", RUNG9: "tf32", RUNG10: "strict", RUNG11: "bf16"}
# rung 11 takes fp16 operands too, checked at the fp16 tier
FP16_PATHS = [(RUNG11, "gemm")]

# (M, N, K, which operand starts one float past a 16-byte boundary)
SHAPES = [
    (37, 129, 65, None),     # K % 4 != 0: rungs 9 and 10 take their mma.sync kernels
    (37, 129, 68, None),     # TMA / 16-byte path, M and N multiples of nothing
    (64, 64, 4, None),       # K shorter than one stage
    (5, 3, 36, None),        # a tile that is almost all zero fill
    (130, 257, 1027, None),  # K % 4 != 0 over many stages
    (130, 257, 1028, "x"),   # K % 4 == 0 but x misaligned: the 4-byte path / the fallback
    (130, 257, 1028, "w"),
    (1, 8192, 8192, None),   # one row
    (1000, 1000, 1000, None),
    (1300, 4100, 68, None),  # 11 x 17 tiles of 128 x 256, more than an H100's 132 SMs: persistent blocks loop
]
FULL = [(1024, 8192, 8192), (32768, 4096, 1024)]  # problems 94, 75, 62; problem 37


@pytest.fixture(scope="module")
def modules():
    """The three rungs, built once for this module (in parallel where there are cores)."""
    return build.load_kernels(KERNELS)


def fn_of(modules, kernel, export):
    return getattr(modules[kernel], export)


def misaligned_copy(t: torch.Tensor) -> torch.Tensor:
    """t's values in a contiguous tensor whose data starts one element past a 16-byte boundary."""
    flat = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    view = flat[1:].view_as(t)
    view.copy_(t)
    assert view.is_contiguous() and view.data_ptr() % 16 == t.element_size()
    return view


def operands_of(kernel, M, N, K, seed, dtype=None):
    """ladder.operands in the rung's dtype (or `dtype`): float32, or rounded to bf16 (fp16) for rung 11."""
    x, w = ladder.operands(M, N, K, seed=seed)
    dtype = dtype or ladder.dtype_of(kernel)
    return x.to(dtype), w.to(dtype)


# ---------------------------------------------------------------------------- CPU


def test_the_tensor_core_family_is_these_rungs():
    assert ladder.rungs("tensor_cores") == list(KERNELS)


@pytest.mark.parametrize("kernel", KERNELS)
def test_exports_and_tier(kernel):
    names = {e.name for e in build.exported_functions(build.kernel_source(kernel))}
    assert names == EXPORTS[kernel] | OTHER_EXPORTS.get(kernel, set())
    assert ladder.tier_of(kernel) == TIER[kernel]


@pytest.mark.parametrize("kernel", KERNELS)
def test_header_states_mapping_and_prediction(kernel):
    source = build.kernel_source(kernel)
    header = source[: source.index("#include")]
    assert "Thread -> data" in header
    assert "PREDICTION (written before measuring)" in header
    assert "% of cuBLAS" in header or "x cuBLAS SGEMM" in header


def test_wgmma_rungs_ask_for_sm_90a_and_rung_8_does_not():
    assert build.required_arch(build.kernel_source(RUNG8)) is None
    assert build.required_arch(build.kernel_source(RUNG9)) == "9.0a"
    assert build.required_arch(build.kernel_source(RUNG10)) == "9.0a"
    assert build.required_arch(build.kernel_source(RUNG11)) == "9.0a"


def test_promotion_interval_is_a_build_knob():
    source = build.kernel_source(RUNG10)
    assert re.search(r"#ifndef GEMM10_PROMOTE_K\n#define GEMM10_PROMOTE_K \(gemm_wgmma::PROMOTE_K\)\n#endif", source)
    # the default, shared with the whole-model kernels
    assert "constexpr int PROMOTE_K = 256;" in (build.KERNELS_DIR / "common" / "gemm_wgmma.cuh").read_text()


# ---------------------------------------------------------------------------- compile (CI too)


@pytest.mark.compile
@pytest.mark.parametrize("kernel", KERNELS)
def test_compiles(modules, kernel):
    assert all(callable(getattr(modules[kernel], e)) for e in EXPORTS[kernel])


def _cuobjdump() -> str | None:
    candidates = [shutil.which("cuobjdump")]
    home = toolchain.find_cuda_home()
    if home:
        candidates.append(str(Path(home) / "bin" / "cuobjdump"))
    try:
        import triton

        candidates.append(str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"))
    except ImportError:
        pass
    return next((c for c in candidates if c and Path(c).is_file()), None)


# kernel -> the tensor-core instructions its SASS must contain (mma.sync is HMMA, wgmma is HGMMA)
SASS = {
    RUNG8: [r"HMMA\.1688\.F32\.TF32"],
    RUNG9: [r"HGMMA\.64x256x8\.F32\.TF32", r"HMMA\.1688\.F32\.TF32"],  # and its fallback, rung 8's kernel
    RUNG10: [r"HGMMA\.64x128x8\.F32\.TF32", r"HMMA\.1688\.F32\.TF32"],
    # bf16 and fp16 (f16 is HGMMA's default kind: no suffix), and the quad writer's 8-byte stores
    RUNG11: [r"HGMMA\.64x256x16\.F32\.BF16", r"HGMMA\.64x256x16\.F32 ", r"STG\.E\.64"],
}


@pytest.mark.compile
@pytest.mark.parametrize("kernel", KERNELS)
def test_sass_has_the_tensor_core_instructions(modules, kernel):
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump (CUDA toolkit or triton's copy) to disassemble with")
    sass = subprocess.run([tool, "-sass", modules[kernel].__file__], capture_output=True, text=True, timeout=300).stdout
    for pattern in SASS[kernel]:
        assert re.search(pattern, sass), f"{kernel}: no {pattern} in its SASS"
    if kernel != RUNG8:
        assert "USETMAXREG" in sass and "UTMALDG" in sass, f"{kernel}: no setmaxnreg / TMA load in its SASS"


# ---------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:3])) + (f"-{s[3]}-misaligned" if s[3] else ""))
@pytest.mark.parametrize("kernel,export", PATHS)
def test_matches_float64_at_its_tier(modules, kernel, export, shape):
    M, N, K, misaligned = shape
    x, w = operands_of(kernel, M, N, K, seed=M + N + K)
    if misaligned == "x":
        x = misaligned_copy(x)
    elif misaligned == "w":
        w = misaligned_copy(w)
    ok, detail = ladder.verify(fn_of(modules, kernel, export), x, w, TIER[kernel])
    assert ok, f"{kernel}.{export} at {shape} ({TIER[kernel]} tier): {detail}"


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:3])) + (f"-{s[3]}-misaligned" if s[3] else ""))
@pytest.mark.parametrize("kernel,export", FP16_PATHS)
def test_rung_11_on_fp16_at_the_fp16_tier(modules, kernel, export, shape):
    """Rung 11's other operand type: fp16 in, fp16 out, every element against float64 of the fp16 values."""
    M, N, K, misaligned = shape
    x, w = operands_of(kernel, M, N, K, seed=M + N + K, dtype=torch.float16)
    if misaligned == "x":
        x = misaligned_copy(x)
    elif misaligned == "w":
        w = misaligned_copy(w)
    ok, detail = ladder.verify(fn_of(modules, kernel, export), x, w, "fp16")
    assert ok, f"{kernel}.{export} at {shape} (fp16 tier): {detail}"
    with pytest.raises(RuntimeError, match="must share one 16-bit dtype, bfloat16 or float16"):
        fn_of(modules, kernel, export)(x, w.bfloat16())


@pytest.mark.gpu
@pytest.mark.large
@pytest.mark.parametrize("shape", FULL, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kernel,export", PATHS)
def test_full_shapes(modules, kernel, export, shape):
    """At the problems' shapes, on data like theirs (x = torch.rand, w = nn.Linear's U(±1/√K)): the
    TF32 rungs inside the tf32 tier, rung 10 (both kernels) inside the strict tier."""
    x, w = operands_of(kernel, *shape, seed=11)
    ok, detail = ladder.verify(fn_of(modules, kernel, export), x, w, TIER[kernel])
    assert ok, f"{kernel}.{export} at {shape} ({TIER[kernel]} tier): {detail}"


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,export", PATHS)
def test_repeatable(modules, kernel, export):
    """Deterministic: no atomics, a fixed order of accumulation (a race would show here)."""
    fn = fn_of(modules, kernel, export)
    x, w = operands_of(kernel, 300, 260, 1028, seed=5)
    assert torch.equal(fn(x, w), fn(x, w))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,export", PATHS)
def test_degenerate_shapes(modules, kernel, export, cuda):
    fn, like = fn_of(modules, kernel, export), {"device": cuda, "dtype": ladder.dtype_of(kernel)}
    assert fn(torch.rand(0, 8, **like), torch.rand(5, 8, **like)).shape == (0, 5)
    assert fn(torch.rand(3, 8, **like), torch.rand(0, 8, **like)).shape == (3, 0)
    assert torch.equal(fn(torch.rand(3, 0, **like), torch.rand(5, 0, **like)), torch.zeros(3, 5, **like))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,export", PATHS)
def test_rejects_bad_input(modules, kernel, export, cuda):
    fn, like = fn_of(modules, kernel, export), {"device": cuda, "dtype": ladder.dtype_of(kernel)}
    dtype_message = "float32" if like["dtype"] == torch.float32 else "must share one 16-bit dtype, bfloat16 or float16"
    x, w = torch.rand(4, 8, **like), torch.rand(5, 8, **like)
    for bad, message in [((x, torch.rand(5, 7, **like)), r"same K.*\[4, 8\].*\[5, 7\]"),
                         ((x.double(), w), dtype_message),
                         ((x, w.double()), dtype_message),
                         ((x.cpu(), w), "CUDA"),
                         ((torch.rand(8, 4, **like).t(), w), "contiguous"),
                         ((x, torch.rand(8, 5, **like).t()), "contiguous"),
                         ((x[0], w), "2-D")]:
        with pytest.raises(RuntimeError, match=message):
            fn(*bad)


@pytest.mark.gpu
def test_3xtf32_is_far_more_accurate_than_tf32(modules):
    """The point of rung 10: at K = 8192 its error is a small fraction of rung 8's."""
    x, w = ladder.operands(256, 1024, 8192, seed=3)
    ref = torch.nn.functional.linear(x.double(), w.double())
    err8 = (modules[RUNG8].gemm(x, w).double() - ref).abs().max().item()
    err10 = (modules[RUNG10].gemm(x, w).double() - ref).abs().max().item()
    assert err10 < 1e-4 and err10 < err8 / 10, f"rung 10 max abs err {err10:.2e}, rung 8 {err8:.2e}"


def _exact_or_fp32s_specials(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    """got equals want (float64 on the CPU, IEEE) bit for bit, NaN where want has NaN (±inf compare equal
    with their sign)."""
    want = want.float().to(got.device)
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan), f"{what}: NaN at {int(got.isnan().sum())} places, fp32 at {int(nan.sum())}"
    assert torch.equal(got[~nan], want[~nan]), f"{what}: differs at {int((got[~nan] != want[~nan]).sum())} places"


@pytest.mark.gpu
@pytest.mark.parametrize("K", [1028, 1027], ids=["tma", "k-not-multiple-of-4"])
def test_3xtf32_on_tf32_values_is_exact_and_gives_fp32s_inf(modules, cuda, K):
    """Operands that are TF32 values already (small integers, zeros among them): rung 10's split gives
    them small parts of 0, the operands' split (linear, linear_backward) the stand-in ±2^-126
    (kernels/common/tf32_operands.cuh). Every 3xTF32 path gives the exact product (float32 holds it),
    bit for bit: the stand-in changes no finite result. An inf in x (in dy for the backward) gives
    fp32's ±inf, and NaN only where fp32 has it (inf·0), not inf·(a small part of 0)."""
    g = torch.Generator(device=cuda).manual_seed(K)
    x = torch.randint(-8, 9, (130, K), device=cuda, generator=g).float()
    w = torch.randint(-8, 9, (257, K), device=cuda, generator=g).float()
    dy = torch.randint(-8, 9, (130, 257), device=cuda, generator=g).float()
    m = modules[RUNG10]
    with precision.tf32(False):
        for special in (False, True):
            xs, dys = x.clone(), dy.clone()
            if special:
                xs[0, 0], xs[-1, 5], dys[0, 0], dys[-1, 3] = math.inf, -math.inf, math.inf, -math.inf
            want = xs.cpu().double() @ w.cpu().double().T
            for name, out in [(e, fn_of(modules, RUNG10, e)(xs, w)) for e in sorted(EXPORTS[RUNG10])] + [
                    ("linear", m.linear(xs, w, torch.zeros(257, device=cuda), None)),
                    ("linear, kept w_residual", m.linear(xs, w, torch.zeros(257, device=cuda), m.tf32_residual(w)))]:
                _exact_or_fp32s_specials(out, want, f"{name}, K = {K}, inf: {special}")
            dx, dw = m.linear_backward(dys, x, w, True, True)
            dy64 = dys.cpu().double()
            _exact_or_fp32s_specials(dx, dy64 @ w.cpu().double(), f"linear_backward's dx, inf: {special}")
            _exact_or_fp32s_specials(dw, dy64.T @ x.cpu().double(), f"linear_backward's dw, inf: {special}")
