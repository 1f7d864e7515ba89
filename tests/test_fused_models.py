"""kernels/fused_gemm_groupnorm.cu and its ops (utils/ops.py WHOLE_MODELS): each model's GEMM with
the tail in its epilogue, and the training step built on it.

On the CPU (CI): the file compiles for sm_90a, exports what it says, the ops' schemas, the CPU
reference against the model's own PyTorch math, opcheck (autograd included), backward against
autograd. On an sm_90 GPU: every model at both tiers, 5 seeds, on shapes that are multiples of no
tile (M, C, K), every element checked over NaN-poisoned memory against float64; the GEMM's output
kept for the backward; the gradients of the input and every parameter against float64 at both
tiers; the unfused fallback where the kernel does not apply; the launcher's errors.
"""
import pytest
import torch
import torch.nn.functional as F

from tests.kernel_tests import kernel_file_tests, poisoned
from utils import build, check, ops, precision

KERNEL = "fused_gemm_groupnorm"
EXPORTS = {"fusable", "linear_bias_hardtanh_mish_group_norm", "linear_swish_bias_group_norm",
           "linear_group_norm_leaky_relu_x2", "linear_group_norm_min_bias", "linear_group_norm_min_bias_atomic"}
kernels, test_exports, test_compiles = kernel_file_tests(KERNEL, EXPORTS)

EPS = 1e-5
MODELS = list(ops.WHOLE_MODELS)  # 94, 37, 62, 75
TAIL = {"linear_bias_hardtanh_mish_group_norm": "bias_hardtanh_mish_group_norm",
        "linear_swish_bias_group_norm": "swish_bias_group_norm",
        "linear_group_norm_leaky_relu_x2": "group_norm_leaky_relu_x2",
        "linear_group_norm_min_bias": "group_norm_min_bias"}


def _args(name: str, M: int, K: int, C: int, G: int, device="cpu", seed=0, scale=1.0) -> list:
    """The op's arguments: x (M, K) from torch.rand (the problems' inputs), nn.Linear's weight and
    bias at its own init scale, random γ (signs too), β and model biases. Never zeros."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(M, K, generator=g) * scale
    bound = 1 / max(K, 1) ** 0.5
    weight = (torch.rand(C, K, generator=g) * 2 - 1) * bound
    linear_bias = (torch.rand(C, generator=g) * 2 - 1) * bound
    sign = torch.randint(0, 2, (C,), generator=g) * 2 - 1
    gamma, beta = (torch.rand(C, generator=g) + 0.5) * sign, 0.5 * torch.randn(C, generator=g)
    bias = 0.5 * torch.randn(C, generator=g)
    x, weight, linear_bias, gamma, beta, bias = (t.to(device) for t in (x, weight, linear_bias, gamma, beta, bias))
    head = [x, weight, linear_bias]
    return head + {
        "linear_bias_hardtanh_mish_group_norm": [bias, -1.0, 1.0, G, gamma, beta, EPS],
        "linear_swish_bias_group_norm": [bias, G, gamma, beta, EPS],
        "linear_group_norm_leaky_relu_x2": [G, gamma, beta, EPS, 0.01],
        "linear_group_norm_min_bias": [G, gamma, beta, EPS, bias.view(1, C, 1, 1)],
    }[name]


def _model_math(name: str, args: list) -> torch.Tensor:
    """The model as KernelBench writes it, in whatever dtype args have (float64 for the reference)."""
    x, w, lb, *r = args
    y = F.linear(x, w, lb)
    if name == "linear_bias_hardtanh_mish_group_norm":
        bias, lo, hi, G, gamma, beta, eps = r
        return F.group_norm(F.mish(F.hardtanh(y + bias, lo, hi)), G, gamma, beta, eps)
    if name == "linear_swish_bias_group_norm":
        bias, G, gamma, beta, eps = r
        return F.group_norm(torch.sigmoid(y) * y + bias, G, gamma, beta, eps)
    if name == "linear_group_norm_leaky_relu_x2":
        G, gamma, beta, eps, slope = r
        z = F.leaky_relu(F.group_norm(y, G, gamma, beta, eps), slope)
        return z + z
    G, gamma, beta, eps, bias = r
    return torch.min(F.group_norm(y, G, gamma, beta, eps), dim=1, keepdim=True)[0] + bias


def _double(args):
    return [a.double() if isinstance(a, torch.Tensor) else a for a in args]


def _launcher(name: str):
    """The launcher itself, for the model's output: no kept small parts, no kept GEMM output."""
    launch = getattr(build.load_kernel(KERNEL), name)
    return lambda *args: launch(*args, None, False)[0]


# --- CPU ---------------------------------------------------------------------------------------------


def test_the_schemas_come_from_the_launchers():
    assert str(torch.ops.workbook.linear_group_norm_min_bias.default._schema) == (
        "workbook::linear_group_norm_min_bias(Tensor x, Tensor w, Tensor linear_bias, int num_groups, Tensor gamma, "
        "Tensor beta, float eps, Tensor bias, Tensor? w_residual=None, bool save_gemm_output=False) -> (Tensor, Tensor)")
    for name in MODELS:
        assert build.op_kernel(f"workbook::{name}") == KERNEL


@pytest.mark.parametrize("name", MODELS)
def test_the_cpu_path_is_the_models_math(name):
    args = _args(name, 7, 20, 64, 4)
    out = ops.WHOLE_MODELS[name](*args)
    assert torch.allclose(out, _model_math(name, args), atol=1e-5, rtol=1e-5)
    op = ops.WHOLE_MODELS[name].op
    _, saved = op(*args, None, True)
    assert torch.equal(saved, F.linear(*args[:3]))  # the GEMM's output, kept for the backward
    assert op(*args)[1].numel() == 0  # not kept unless asked
    with_grad = [a.clone().requires_grad_() if isinstance(a, torch.Tensor) else a for a in args]
    torch.library.opcheck(op, [*with_grad, None, True])
    torch.library.opcheck(op, [*args, ops.tf32_residual(args[1]), False])


def test_a_backward_without_the_kept_output_says_how_to_get_it():
    name = "linear_group_norm_leaky_relu_x2"
    args = [a.clone().requires_grad_() if isinstance(a, torch.Tensor) else a for a in _args(name, 3, 8, 32, 2)]
    out, _ = ops.WHOLE_MODELS[name].op(*args, None, False)
    with pytest.raises(RuntimeError, match="save_gemm_output=False"):
        out.sum().backward()


@pytest.mark.parametrize("name", MODELS)
def test_backward_matches_autograd_through_the_models_math(name):
    args = _args(name, 5, 12, 32, 2, seed=3)
    mine = [a.clone().requires_grad_() if isinstance(a, torch.Tensor) else a for a in args]
    theirs = [a.clone().requires_grad_() if isinstance(a, torch.Tensor) else a for a in args]
    out, ref = ops.WHOLE_MODELS[name](*mine), _model_math(name, theirs)
    grad = torch.randn_like(ref)
    idx = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    got = torch.autograd.grad(out, [mine[i] for i in idx], grad)
    want = torch.autograd.grad(ref, [theirs[i] for i in idx], grad)
    for i, g, w in zip(idx, got, want):
        assert torch.allclose(g, w, atol=1e-4, rtol=1e-4), f"argument {i}: max diff {(g - w).abs().max():.1e}"


def test_a_half_input_to_a_float32_model_gets_an_error_naming_both_dtypes():
    args = _args("linear_swish_bias_group_norm", 3, 8, 32, 2)
    args[0] = args[0].half()
    with pytest.raises(TypeError, match="every tensor must have x's dtype torch.float16, got w torch.float32"):
        ops.linear_swish_bias_group_norm(*args)


# --- GPU -------------------------------------------------------------------------------------------

# (M, K, C, G): multiples of no tile in M (128), K (32) or C (BN = 128 and 256), at each group
# width the kernel has (16, 32, 64), and one problem-sized K with a long accumulation.
SHAPES = [(131, 100, 224, 7), (200, 516, 400, 25), (67, 1028, 704, 11), (257, 8192, 160, 5)]
TIERS = {"strict": (False, 1e-4), "tf32": (True, 1e-2)}


@pytest.fixture
def sm90(cuda):
    if torch.cuda.get_device_capability(cuda) != (9, 0):
        pytest.skip("the fused kernels are sm_90 only (elsewhere the ops run the unfused path, tested below)")
    return cuda


@pytest.mark.gpu
@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", MODELS)
def test_every_element_is_within_the_tier_on_5_seeds(name, shape, tier, sm90):
    allow_tf32, tol = TIERS[tier]
    M, K, C, G = shape
    launch = _launcher(name)
    for seed in range(5):
        args = _args(name, M, K, C, G, sm90, seed)
        ref = _model_math(name, _double(args)).float()
        with precision.tf32(allow_tf32):
            out = poisoned(launch, *args)
        assert out.shape == ref.shape
        assert torch.allclose(out, ref, atol=tol, rtol=tol), \
            f"seed {seed}: max diff {(out - ref).abs().max():.2e}, {int(out.isnan().sum())} NaN"


@pytest.mark.gpu
@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("export", MODELS + ["linear_group_norm_min_bias_atomic"])
def test_persistent_blocks_that_take_several_tiles(export, tier, sm90):
    """More output tiles than the GPU has SMs: each persistent block loops over two tiles or more, so
    its stages' barriers go on changing phase from one tile to the next, and its per-column parameters
    and partial row minima are those of each new tile, at both tiles' widths."""
    allow_tf32, tol = TIERS[tier]
    M, K, C, G = 1300, 68, 4096, 128
    fewest_tiles = -(-M // 128) * -(-C // 256)  # BN = 256, the wider of the kernel's tiles
    assert fewest_tiles > torch.cuda.get_device_properties(sm90).multi_processor_count
    name = export.removesuffix("_atomic")  # the atomic fold of 75's row minimum takes 75's arguments
    args = _args(name, M, K, C, G, sm90, seed=2)
    ref = _model_math(name, _double(args)).float()
    with precision.tf32(allow_tf32):
        out = poisoned(_launcher(export), *args)
    assert torch.allclose(out, ref, atol=tol, rtol=tol), \
        f"max diff {(out - ref).abs().max():.2e}, {int(out.isnan().sum())} NaN"


@pytest.mark.gpu
@pytest.mark.parametrize("tier", TIERS)
def test_both_row_minimum_folds_agree_bitwise(tier, sm90):
    args = _args("linear_group_norm_min_bias", 300, 260, 400, 25, sm90, seed=1)
    with precision.tf32(TIERS[tier][0]):
        assert torch.equal(poisoned(_launcher("linear_group_norm_min_bias"), *args),
                           poisoned(_launcher("linear_group_norm_min_bias_atomic"), *args))


@pytest.mark.gpu
@pytest.mark.parametrize("fold", ["linear_group_norm_min_bias", "linear_group_norm_min_bias_atomic"])
def test_a_nan_wins_the_row_minimum_as_in_torch_min(fold, sm90):
    args = _args("linear_group_norm_min_bias", 130, 64, 256, 16, sm90)
    args[2][37] = float("nan")  # channel 37's bias: every row's group of channel 37 is NaN
    args[0][5] = float("inf")
    out = _launcher(fold)(*args)
    ref = _model_math("linear_group_norm_min_bias", args)
    assert torch.equal(out.isnan(), ref.isnan()) and out.isnan().all()


@pytest.mark.gpu
@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("name", MODELS)
def test_the_kept_gemm_output_is_the_linear_layers(name, tier, sm90):
    allow_tf32, tol = TIERS[tier]
    args = _args(name, 131, 260, 400 if name != "linear_swish_bias_group_norm" else 448, 25 if name !=
                 "linear_swish_bias_group_norm" else 7, sm90, seed=4)
    k = getattr(build.load_kernel(KERNEL), name)
    with precision.tf32(allow_tf32):
        n = k(*args, None, True)[1].numel()
        check._poison_allocator({4 * n}, 0xFF, sm90)  # both outputs from NaN: an element never written stays NaN
        out, saved = k(*args, None, True)
        assert torch.equal(out, k(*args, None, False)[0])  # keeping it changes nothing else
    ref = F.linear(*_double(args[:3])).float()
    assert torch.allclose(saved, ref, atol=tol, rtol=tol), f"max diff {(saved - ref).abs().max():.2e}"


@pytest.mark.gpu
@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("name", MODELS)
def test_the_kept_small_parts_give_the_same_bits(name, tier, sm90):
    args = _args(name, 200, 516, 400, 25, sm90, seed=6)
    with precision.tf32(TIERS[tier][0]):
        assert torch.equal(ops.WHOLE_MODELS[name](*args),
                           ops.WHOLE_MODELS[name](*args, weight_residual=ops.tf32_residual(args[1])))


# gradients: the tail's backward kernel, then both GEMMs of nn.Linear's backward on the forward's
# kernel, judged as the harness judges them (check.judge_gradients): elementwise at the tier against
# eager at the same TF32 setting, or, where eager's own gradients are not determined to the tier,
# norm-wise against float64.
@pytest.mark.gpu
@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("shape", [(131, 100, 224, 7), (67, 1028, 704, 11), (1030, 516, 400, 25)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", MODELS)
def test_gradients_of_the_input_and_every_parameter_meet_the_tier(name, shape, tier, sm90):
    allow_tf32, _ = TIERS[tier]
    M, K, C, G = shape
    args = _args(name, M, K, C, G, sm90, seed=8)
    idx = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    grad = torch.randn(_model_math(name, args).shape, device=sm90, generator=torch.Generator(sm90).manual_seed(9))

    def gradients(fn, dtype=torch.float32, moved=0.0):
        leaves = [a.to(dtype).requires_grad_() if isinstance(a, torch.Tensor) else a for a in args]
        x = leaves[0] * (1 + moved * (2 * torch.rand(leaves[0].shape, device=sm90, dtype=dtype) - 1))
        out = fn([x, *leaves[1:]])
        return {str(i): g for i, g in zip(idx, torch.autograd.grad(out, [leaves[i] for i in idx], grad.to(dtype)))}

    with precision.tf32(allow_tf32):
        ours = gradients(lambda a: ops.WHOLE_MODELS[name](*a))
        eager = gradients(lambda a: _model_math(name, a))
    tier_ = check.TIERS[tier]
    status, detail = check.judge_gradients(ours, eager, lambda: gradients(lambda a: _model_math(name, a), torch.float64),
                                           tier_, lambda: [gradients(lambda a: _model_math(name, a), torch.float64,
                                                                     moved=tier_.noise) for _ in range(check.MOVED_DRAWS)])
    assert status == "pass", detail


@pytest.mark.gpu
@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("shape", [(1, 4, 1), (37, 13, 5), (130, 516, 67), (1030, 260, 400), (0, 8, 4)],
                         ids=lambda s: "x".join(map(str, s)))
def test_linear_backward_meets_the_tier(shape, tier, cuda):
    """Both GEMMs of nn.Linear's backward, M, N and K multiples of nothing (odd M is the reduction of
    dW, odd N that of dX: both padded with zeros to a multiple of 4 on the transposed copy); the
    largest error relative to the largest element, as a GEMM's error scales."""
    allow_tf32, _ = TIERS[tier]
    M, K, N = shape
    g = torch.Generator(cuda).manual_seed(sum(shape))
    dy, x = torch.randn(M, N, device=cuda, generator=g), torch.rand(M, K, device=cuda, generator=g)
    w = torch.randn(N, K, device=cuda, generator=g) / K ** 0.5
    with precision.tf32(allow_tf32):
        dx, dw = ops.linear_backward(dy, x, w, True, True)
        none = ops.linear_backward(dy, x, w, False, False)
    assert none[0].numel() == none[1].numel() == 0
    for got, want in ((dx, dy.double() @ w.double()), (dw, dy.double().t() @ x.double())):
        assert got.shape == want.shape
        err = (got.double() - want).abs().max().item() if got.numel() else 0.0
        assert err <= {"strict": 1e-4, "tf32": 2e-2}[tier] * max(want.abs().max().item() if want.numel() else 0.0, 1e-30)


@pytest.mark.gpu
def test_the_tensor_cores_read_an_fp32_operand_by_truncating_it(sm90):
    """What tf32_operands.cuh builds on: the raw values as the big parts equal their truncation."""
    g = torch.Generator(sm90).manual_seed(3)
    x, w = torch.randn(300, 520, device=sm90, generator=g), torch.randn(260, 520, device=sm90, generator=g)
    truncate = lambda t: (t.view(torch.int32) & -8192).view(torch.float32)  # noqa: E731
    rung9 = build.load_kernel("gemm_09_wgmma_tf32")
    assert torch.equal(rung9.gemm(x, w), rung9.gemm(truncate(x), truncate(w)))


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["K % 4", "group width 8", "view"])
def test_inputs_the_kernel_does_not_take_run_unfused_with_the_same_result(case, cuda):
    name = "linear_group_norm_leaky_relu_x2"
    M, K, C, G = {"K % 4": (70, 130, 128, 8), "group width 8": (70, 128, 128, 16), "view": (70, 128, 128, 8)}[case]
    args = _args(name, M, K, C, G, cuda)
    if case == "view":
        args[0] = torch.cat([args[0], args[0]], 1)[:, ::2]  # strided: the launcher copies it
    with precision.tf32(False):
        out = ops.WHOLE_MODELS[name](*args)
    ref = _model_math(name, _double(args)).float()
    assert torch.allclose(out, ref, atol=1e-4, rtol=1e-4), f"max diff {(out - ref).abs().max():.2e}"


@pytest.mark.gpu
def test_the_launcher_runs_the_unfused_ops_itself(sm90):
    # the launcher is the op's CUDA kernel: where fusable says no, it calls workbook::linear and the
    # tail's op through the dispatcher (registered by utils.ops), with the op's result and saved output
    k = build.load_kernel(KERNEL)
    name = "linear_group_norm_leaky_relu_x2"
    args = _args(name, 70, 130, 128, 8, sm90)
    assert not k.fusable(args[0], args[1], 8)
    with precision.tf32(False):
        out, saved = getattr(k, name)(*args, None, True)
        assert torch.equal(out, ops.group_norm_leaky_relu_x2(ops.linear(*args[:3]), *args[3:]))
        assert torch.equal(saved, ops.linear(*args[:3]))


@pytest.mark.gpu
def test_the_launcher_names_what_it_cannot_take(sm90):
    # 75's atomic launcher (not an op, no unfused path) makes the checks every launcher makes
    k = build.load_kernel(KERNEL)
    name = "linear_group_norm_min_bias"
    launcher = getattr(k, f"{name}_atomic")
    args = _args(name, 8, 130, 128, 8, sm90)
    with pytest.raises(RuntimeError, match="K % 4 == 0"):
        launcher(*args, None, False)
    args = _args(name, 8, 128, 128, 16, sm90)
    with pytest.raises(RuntimeError, match="groups of 16, 32 or 64 channels, got 8"):
        launcher(*args, None, False)
    args = _args(name, 8, 128, 128, 8, sm90)
    for fn in (launcher, getattr(k, name)):  # the op's launcher too, where fusable says yes
        with pytest.raises(RuntimeError, match="w_residual must be tf32_residual"):
            fn(*args, args[1][:, :64].contiguous(), False)
    args[5] = args[5][:5]
    with pytest.raises(RuntimeError, match=r"beta \(the GroupNorm bias\) must have shape \[128\]"):
        launcher(*args, None, False)
    assert k.fusable(args[0], args[1], 8) and not k.fusable(args[0], args[1], 16)
