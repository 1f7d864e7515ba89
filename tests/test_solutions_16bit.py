"""A drop-in in bfloat16 or float16 (`model.to(dtype)`, `.half()`, `.bfloat16()`) does what Model does in that
dtype: its output in the dtype, forward and backward, every element within the dtype's tier (utils.check.TIERS)
of the float64 answer on the same 16-bit values, and no further from it in norm than eager Model in the dtype.

On the CPU (CI): the reference math, Model's own ops, bit for bit; gradients of every parameter in the dtype,
close to Model's; torch.compile(fullgraph=True) traces it; a model and an input of different dtypes get an error
that names the conversion. On the GPU: fused_gemm_groupnorm.cu's 16-bit kernels (K % 8 == 0, the instantiated
group widths) and its unfused path (cuBLAS's 16-bit GEMM, then the float32 tail: K % 8 != 0, or a group width it
has no instance for), at batch sizes that are no tile's multiple, from an allocator left full of NaN (an element
never written stays NaN and fails), forward and gradients; and a float32 drop-in under torch.autocast, where x and
w go to the same 16-bit kernels with the parameters and the output in float32. On both: the harness
(utils.check.check_model with dtype) at the dtype's tier, and at the CPU, models it must fail.
"""
import copy

import pytest
import torch

from tests.test_fused_models import _args as whole_model_args
from utils import check, ops, precision
from utils.chapters.session import solution_pair
from utils.problems import Dims, all_problems, get_problem
from solutions import solution

PIDS = [p.id for p in all_problems()]
DTYPES = [torch.bfloat16, torch.float16]
DTYPE_IDS = ["bf16", "fp16"]
# (scale, in_features or None for the scale's): the fused kernels (the small scale: groups of 32, 64 and 16
# channels, K = 256 or 128), K % 8 != 0 at the same widths (the unfused path), and the odd scale (K = 129,
# groups of 23 channels: unfused too)
CASES = {"fused": ("small", None), "K % 8 != 0": ("small", 260), "odd": ("odd", None)}


def _pair(pid: int, case: str | Dims, dtype: torch.dtype, device="cpu", seed: int = 0):
    """(Model, ModelNew) with one seed's weights, GroupNorm's γ, β and the biases randomised, in dtype; case: a
    name of CASES, or the sizes themselves."""
    scale, k = CASES[case] if isinstance(case, str) else (case, None)
    p = get_problem(pid)
    init = p.init_inputs(scale)
    if k is not None:
        init = [k, *init[1:]]  # every problem's first argument is in_features
    torch.manual_seed(seed)
    ref = p.Model(*init)
    check._randomise(ref, seed)
    new = solution(pid).ModelNew(*init)
    new.load_state_dict(ref.state_dict())
    return ref.to(device, dtype).eval(), new.to(device, dtype).eval()


def _x(ref, batch: int, dtype, device="cpu", seed: int = 1) -> torch.Tensor:
    linear = next(m for m in ref.modules() if isinstance(m, torch.nn.Linear))
    g = torch.Generator().manual_seed(seed)
    return torch.rand(batch, linear.in_features, generator=g).to(device, dtype)


def _relative(out: torch.Tensor, want: torch.Tensor) -> float:
    return ((out.double() - want).norm() / want.norm().clamp_min(1e-30)).item()


# --- CPU -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("pid", PIDS)
def test_on_the_cpu_it_is_models_own_math(pid, dtype):
    ref, new = _pair(pid, "fused", dtype)
    x = _x(ref, 37, dtype)
    with torch.no_grad():
        out, want = new(x), ref(x)
    assert out.dtype == dtype and torch.equal(out, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("pid", PIDS)
def test_on_the_cpu_every_gradient_is_in_the_dtype_and_close_to_models(pid, dtype):
    ref, new = _pair(pid, "fused", dtype)
    x = _x(ref, 9, dtype)
    grad = torch.randn(ref(x).shape, generator=torch.Generator().manual_seed(2)).to(dtype)
    got = torch.autograd.grad(new(x.clone().requires_grad_()), list(new.parameters()), grad)
    want = torch.autograd.grad(ref(x.clone().requires_grad_()), list(ref.parameters()), grad)
    tier = check.TIERS[check.TIER_OF_DTYPE[dtype]]
    for (name, _), g, w in zip(new.named_parameters(), got, want):
        assert g.dtype == dtype, name
        # the tail's backward runs in float32 where Model's runs in the dtype: the two differ by its rounding
        assert _relative(g, w.double()) < tier.gradient_band, name


@pytest.mark.parametrize("pid", PIDS)
def test_torch_compile_traces_a_bf16_model_without_a_graph_break(pid):
    ref, new = _pair(pid, "fused", torch.bfloat16)
    x = _x(ref, 5, torch.bfloat16)
    compiled = torch.compile(new, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        assert torch.equal(compiled(x), ref(x))


@pytest.mark.parametrize("pid", PIDS)
def test_a_model_and_an_input_of_different_dtypes_name_the_conversion(pid):
    _, new = _pair(pid, "fused", torch.bfloat16)
    x = _x(new, 4, torch.float32)
    with torch.no_grad(), pytest.raises(TypeError, match=r"must have x's dtype torch.float32.*model.to\(torch.float32\)"):
        new(x)


# --- GPU -------------------------------------------------------------------------------------------

def _poisoned(fn):
    """fn() after NaN filled the blocks the caching allocator holds: an element never written stays NaN."""
    n = fn().nbytes
    torch.full((n,), 0xFF, dtype=torch.uint8, device="cuda")  # freed at once: NaN (0xFFFF) in the cached block
    return fn()


def _assert_within_tier_and_eager(ref, new, x, dtype):
    """new(x) against ref's float64 copy on every element (the output poisoned first), within the dtype's tier
    and no further than eager's ref(x)."""
    ref64 = copy.deepcopy(ref).double()  # the same 16-bit values, computed in float64
    with torch.no_grad():
        want, eager = ref64(x.double()), ref(x)
        out = _poisoned(lambda: new(x))
    tier = check.TIERS[check.TIER_OF_DTYPE[dtype]]
    assert out.dtype == dtype and out.shape == want.shape
    worst = (out.double() - want).abs().max().item()
    assert torch.allclose(out.double(), want, atol=tier.atol, rtol=tier.rtol), f"max abs error {worst:.2e}"
    ours, theirs = _relative(out, want), _relative(eager, want)
    # one rounding of the output (2^-9 of a value in bf16, 2^-12 in fp16) where eager rounds after every op
    assert ours <= 1.25 * theirs + 2e-3 * (dtype == torch.bfloat16) + 3e-4 * (dtype == torch.float16), (
        f"relative error vs float64: ours {ours:.2e}, eager in {dtype} {theirs:.2e}")


@pytest.mark.gpu
@pytest.mark.parametrize("batch", [1, 37, 300])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("pid", PIDS)
def test_on_the_gpu_it_is_within_its_tier_and_no_worse_than_eager(pid, dtype, case, batch, cuda):
    ref, new = _pair(pid, case, dtype, cuda)
    _assert_within_tier_and_eager(ref, new, _x(ref, batch, dtype, cuda), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 64, 65, 128, 129, 200, 256, 257])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("pid", PIDS)
def test_at_kernelbenchs_channels_every_row_count_is_within_its_tier(pid, dtype, rows, cuda):
    """KernelBench's channels and groups (K = 256): up to 256 rows of x the narrow tiles (64 wide; 128 from 129
    rows where C = 8192 on 132 SMs: common/gemm_dispatch.cuh's narrow_width), the wide ones beyond, x padded to
    whole tiles and only its own rows written."""
    full = get_problem(pid).dims("full")
    ref, new = _pair(pid, Dims(rows, 256, full.out_features, full.groups), dtype, cuda)
    _assert_within_tier_and_eager(ref, new, _x(ref, rows, dtype, cuda), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["fused", "K % 8 != 0"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("pid", PIDS)
def test_on_the_gpu_a_training_step_gets_models_gradients(pid, dtype, case, cuda):
    ref, new = _pair(pid, case, dtype, cuda)
    ref64 = copy.deepcopy(ref).double()
    x = _x(ref, 131, dtype, cuda)
    grad = torch.randn(ref(x).shape, generator=torch.Generator().manual_seed(2)).to(cuda, dtype)
    got = torch.autograd.grad(new(x.clone().requires_grad_()), list(new.parameters()), grad)
    eager = torch.autograd.grad(ref(x.clone().requires_grad_()), list(ref.parameters()), grad)
    want = torch.autograd.grad(ref64(x.double()), list(ref64.parameters()), grad.double())
    tier = check.TIERS[check.TIER_OF_DTYPE[dtype]]
    for (name, _), g, e, w in zip(new.named_parameters(), got, eager, want):
        assert g.dtype == dtype and torch.isfinite(g).all(), name
        ours, theirs = _relative(g, w), _relative(e, w)
        assert ours < max(tier.gradient_band, 2 * theirs), f"{name}: ours {ours:.2e}, eager {theirs:.2e} vs float64"


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["fused", "K % 8 != 0"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("pid", PIDS)
def test_under_autocast_on_the_gpu_it_does_what_model_does_there(pid, dtype, case, cuda):
    """A float32 drop-in under torch.autocast(dtype): Model's output dtype (float32: CUDA autocast runs GroupNorm in
    float32), forward and gradients within the autocast tier of float64's, and no further than eager's."""
    ref, new = _pair(pid, case, torch.float32, cuda)
    ref64 = copy.deepcopy(ref).double()
    x = _x(ref, 131, torch.float32, cuda)
    grad = torch.randn(ref(x).shape, generator=torch.Generator().manual_seed(2)).to(cuda)
    with torch.autocast("cuda", dtype=dtype):
        with torch.no_grad():
            eager, out = ref(x), _poisoned(lambda: new(x))
        got = torch.autograd.grad(new(x), list(new.parameters()), grad)
        eager_grads = torch.autograd.grad(ref(x), list(ref.parameters()), grad)
    want = ref64(x.double())
    want_grads = torch.autograd.grad(ref64(x.double()), list(ref64.parameters()), grad.double())
    tier = check.autocast_tier(dtype)
    assert out.dtype == eager.dtype == torch.float32 and out.shape == want.shape
    worst = (out.double() - want.detach()).abs().max().item()
    assert torch.allclose(out.double(), want, atol=tier.atol, rtol=tier.rtol), f"max abs error {worst:.2e}"
    ours, theirs = _relative(out, want), _relative(eager, want)
    assert ours <= 1.25 * theirs + 1e-4, f"relative error vs float64: ours {ours:.2e}, eager {theirs:.2e}"
    for (name, p), g, e, w in zip(new.named_parameters(), got, eager_grads, want_grads):
        assert g.dtype == p.dtype == torch.float32 and torch.isfinite(g).all(), name
        ours, theirs = _relative(g, w), _relative(e, w)
        assert ours < max(tier.gradient_band, 2 * theirs), f"{name}: ours {ours:.2e}, eager {theirs:.2e} vs float64"


def _with_the_products_autocast_takes(ref, x, dtype):
    """ref in float64 on x and nn.Linear's weight rounded to dtype (what a 16-bit GEMM multiplies), the bias
    and the rest as they are: what a GEMM on 16-bit operands with float32 sums and the float32 tail computes."""
    ref64 = copy.deepcopy(ref).double()
    linear = next(m for m in ref64.modules() if isinstance(m, torch.nn.Linear))
    with torch.no_grad():
        linear.weight.copy_(linear.weight.to(dtype).double())
        return ref64(x.to(dtype).double())


def _assert_autocast_inference(ref, new, x, dtype):
    """new(x) under autocast at inference against ref's float64 copy: the output float32, every element written,
    within the autocast tier and no further than eager's under autocast; beyond 256 rows (the mixed-input GEMM,
    then w converted: common/gemm_dispatch.cuh) within 1e-4 of the float64 answer on the products autocast's
    16-bit GEMM takes (the sums in float32 are all that is left between them)."""
    ref64 = copy.deepcopy(ref).double()
    with torch.no_grad():
        with torch.autocast("cuda", dtype=dtype):
            eager, out = ref(x), _poisoned(lambda: new(x))
        want = ref64(x.double())
        tier = check.autocast_tier(dtype)
        assert out.dtype == eager.dtype == torch.float32 and out.shape == want.shape
        worst = (out.double() - want).abs().max().item()
        assert torch.allclose(out.double(), want, atol=tier.atol, rtol=tier.rtol), f"max abs error {worst:.2e}"
        ours, theirs = _relative(out, want), _relative(eager, want)
        assert ours <= 1.25 * theirs + 1e-4, f"relative error vs float64: ours {ours:.2e}, eager {theirs:.2e}"
        if x.shape[0] > 256:
            products = _with_the_products_autocast_takes(ref, x, dtype)
            assert torch.allclose(out.double(), products, atol=1e-4, rtol=1e-4), (
                f"max difference from the 16-bit products' answer {(out.double() - products).abs().max().item():.2e}")
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 7, 64, 129, 256, 257, 512, 513, 1000, 2048, 2049])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("pid", PIDS)
def test_under_autocast_at_inference_every_row_count_is_within_the_tier(pid, dtype, rows, cuda):
    """At inference under autocast w stays float32 and the launcher picks the route by the rows of x (up to 256:
    x converted, the TF32 narrow tiles; 257-2,048: the mixed-input GEMM, w converted in registers; beyond: w
    converted, rung 11's GEMM): every element written, within the autocast tier of float64's and no further than
    eager's; up to 256 rows what the float32 drop-in computes at TF32 on x rounded to the dtype (the same kernel
    on the same values: bit for bit at 65-256 rows; at 1-64 the float32 model runs linear's small-batch schedule
    and then the tail, the same TF32 products summed in another order, within 1e-5), and beyond what a 16-bit
    GEMM's products give (_assert_autocast_inference)."""
    ref, new = _pair(pid, "fused", torch.float32, cuda)
    x = _x(ref, rows, torch.float32, cuda)
    out = _assert_autocast_inference(ref, new, x, dtype)
    if rows <= 256:
        with torch.no_grad(), precision.tf32(True):
            same = new(x.to(dtype).float())
        exact = rows > 64
        assert torch.equal(out, same) if exact else torch.allclose(out, same, atol=1e-5, rtol=1e-5), (
            f"max difference {(out - same).abs().max().item():.2e}")


@pytest.mark.gpu
@pytest.mark.parametrize("width", [16, 32, 64])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("pid", PIDS)
def test_under_autocast_the_mixed_input_gemm_takes_shapes_no_tile_divides(pid, dtype, width, cuda):
    """The mixed-input GEMM's whole models (257-2,048 rows under autocast at inference) at 300 rows (a tile of
    256 and part of one), 192 channels (one and a half tiles of 128), K = 72 (one k tile of 64 and part of one)
    and groups of 16, 32 and 64 channels: every element written and right (_assert_autocast_inference)."""
    ref, new = _pair(pid, Dims(300, 72, 192, 192 // width), torch.float32, cuda)
    _assert_autocast_inference(ref, new, _x(ref, 300, torch.float32, cuda), dtype)


def test_a_16bit_input_beside_a_float32_model_outside_autocast_is_refused_as_f_linear_refuses_it():
    """16-bit x with float32 w is autocast's call to the op; outside autocast the drop-in refuses it, as Model's
    F.linear does, naming both dtypes."""
    _, new = _pair(94, "fused", torch.float32)
    x = _x(new, 3, torch.bfloat16)
    with torch.no_grad(), pytest.raises(TypeError, match="every tensor must have x's dtype torch.bfloat16, got w "
                                                          "torch.float32"):
        new(x)


# --- the harness at the 16-bit tiers ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("pid", PIDS)
def test_the_harness_passes_a_16bit_model_on_the_cpu_path(pid, dtype):
    report = check.check_model(pid, solution(pid).ModelNew, device="cpu", dtype=dtype)
    assert report.ok, str(report)
    assert report.tier == check.TIER_OF_DTYPE[dtype] and f"in {dtype}" in report.subject
    assert report["trials"].status == report["gradients"].status == report["training_step"].status == "pass"


class _Float32Out(solution(94).ModelNew):
    """Computes in float32 and forgets to give the output back in the model's dtype."""
    def forward(self, x):
        F, gn = torch.nn.functional, self.groupnorm
        y = F.linear(x.float(), self.gemm.weight.float(), self.gemm.bias.float()) + self.bias.float()
        y = F.mish(F.hardtanh(y, self.hardtanh.min_val, self.hardtanh.max_val))
        return F.group_norm(y, gn.num_groups, gn.weight.float(), gn.bias.float(), gn.eps)


class _Fp8Gemm(solution(94).ModelNew):
    """The GEMM on operands rounded to fp8 (e4m3: 3 mantissa bits), far below bf16's 8."""
    def forward(self, x):
        w = self.gemm.weight.to(torch.float8_e4m3fn).to(x.dtype)
        y = torch.nn.functional.linear(x.to(torch.float8_e4m3fn).to(x.dtype), w, self.gemm.bias) + self.bias
        return self.groupnorm(torch.nn.functional.mish(self.hardtanh(y)))


@pytest.mark.parametrize("hack, why", [(_Float32Out, "dtype torch.float32, expected torch.bfloat16"),
                                       (_Fp8Gemm, "mismatched")], ids=["float32 out", "fp8 GEMM"])
def test_the_harness_at_the_bf16_tier_fails_a_model_below_it(hack, why):
    report = check.check_model(94, hack, device="cpu", dtype=torch.bfloat16)
    assert report["trials"].status == "fail" and why in report["trials"].detail, str(report)


def test_the_harness_refuses_a_tier_that_is_not_the_dtypes():
    with pytest.raises(ValueError, match="held to the bf16 tier, not 'strict'"):
        check.check_model(94, solution(94).ModelNew, device="cpu", dtype=torch.bfloat16, tier="strict")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("pid", PIDS)
def test_the_harness_passes_a_16bit_model_on_the_gpu(pid, dtype, cuda):
    report = check.check_model(pid, solution(pid).ModelNew, device=cuda, dtype=dtype,
                               allow_torch_ops=solution(pid).ModelNew.allow_torch_ops)
    assert report.ok, str(report)


# --- the whole-model ops in 16 bits: opcheck ---------------------------------------------------------

def _op_args(name: str, dtype: torch.dtype, params: torch.dtype, device="cpu", grad: bool = True,
             w_float32: bool = False) -> list:
    """A whole model's op arguments (tests/test_fused_models.py's), x and w in dtype (w float32 with w_float32), the
    parameters in params (dtype: a model in it; float32: as the autocast kernels call the op), every tensor
    requiring a gradient."""
    args = whole_model_args(name, 7, 24, 64, 4, device)
    args = [a.to(dtype if i < 2 else params) if isinstance(a, torch.Tensor) else a for i, a in enumerate(args)]
    if w_float32:
        args[1] = args[1].float()
    return [a.requires_grad_() if grad and isinstance(a, torch.Tensor) else a for a in args]


PARAMS = ["the dtype's", "float32", "float32, w float32"]  # a model in dtype; autocast's calls for training, inference


def _op_args_for(name, dtype, params, device="cpu"):
    return _op_args(name, dtype, dtype if params == "the dtype's" else torch.float32, device,
                    w_float32=params == "float32, w float32")


@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", list(ops.WHOLE_MODELS))
def test_opcheck_of_a_whole_model_in_16_bits_on_the_cpu(name, dtype, params):
    """Schema, autograd registration, fake tensors against the CPU implementation and AOT dispatch, for a model
    in bf16 or fp16 and for 16-bit x with float32 parameters and 16-bit or float32 w (what the autocast kernels
    pass); the output in the parameters' dtype, as the kept GEMM output, and each gradient in its input's."""
    args = _op_args_for(name, dtype, params)
    op = ops.WHOLE_MODELS[name].op
    out, saved = op(*args, None, True)
    assert out.dtype == saved.dtype == args[2].dtype
    torch.library.opcheck(op, [*args, None, True])


@pytest.mark.gpu
@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", list(ops.WHOLE_MODELS))
def test_opcheck_of_a_whole_model_in_16_bits_on_the_gpu(name, dtype, params, cuda):
    args = _op_args_for(name, dtype, params, cuda)
    torch.library.opcheck(ops.WHOLE_MODELS[name].op, [*args, None, True])
