"""kernels/groupnorm.cu: GroupNorm on (N, C) per (sample, group), alone (Welford and sum/sum of
squares) and fused with the activations of problems 94, 37 and 62, against PyTorch: odd shapes,
random affine parameters and biases, every element checked as written, data far from zero,
bad input refused with a clear message."""
import pytest
import torch
import torch.nn.functional as F

from utils import check, precision

from kernel_tests import kernel_file_tests, poisoned
from utils.problems import get_problem

KERNEL = "groupnorm"
EXPORTS = {"group_norm_welford", "group_norm_sumsq", "bias_hardtanh_mish_group_norm", "swish_bias_group_norm",
           "group_norm_leaky_relu_x2"}
EPS = 1e-5
# (N, C, G) and what each exercises (D = C / G channels per group):
SHAPES = [
    (37, 115, 5),     # D = 23: not whole float4s -> block path; KernelBench-odd sizes
    (1, 8192, 256),   # D = 32 (problem 94's groups), one sample: teams of 4 lanes, 2 float4s each
    (37, 1024, 64),   # D = 16 (62's and 75's groups): teams of 2
    (5, 4096, 64),    # D = 64 (37's groups): teams of 8
    (3, 384, 3),      # D = 128: teams of 16
    (3, 768, 3),      # D = 256: teams of 32, a whole warp per group
    (7, 120, 10),     # D = 12: a team of 2 lanes, the second with one float4 of its two
    (9, 80, 4),       # D = 20: 5 float4s over a team of 4 lanes: the first holds 2, the others 1
    (9, 12, 3),       # D = 4: one lane, one float4 of its two
    (3, 1040, 4),     # D = 260 > 256: block path
    (3, 1000, 2),     # D = 500: block path
    (2, 20000, 1),    # D = 20000: more than a block holds in registers, normalised from a second read
]
FULL = {94: (1024, 8192, 256), 37: (32768, 4096, 64), 62: (1024, 8192, 512)}


def affine(C, g):
    """GroupNorm weight and bias far from the defaults (γ = 1, β = 0 hide an ignored affine):
    |γ| in [0.5, 1.5] with random signs, β ~ N(0, 0.5²)."""
    sign = torch.randint(0, 2, (C,), generator=g) * 2 - 1
    return (torch.rand(C, generator=g) + 0.5) * sign, 0.5 * torch.randn(C, generator=g)


def inputs(N, C, *, bias=False, offset=0.0, scale=2.0):
    def factory(g):
        x = torch.randn(N, C, generator=g) * scale + offset
        gamma, beta = affine(C, g)
        return [x, 0.5 * torch.randn(C, generator=g), gamma, beta] if bias else [x, gamma, beta]
    return factory


def variants(kernels, G):
    """name -> (kernel, PyTorch reference, whether it takes a bias), each called as f(x, [bias,] gamma, beta)."""
    def ref_62(x, gamma, beta):
        y = F.leaky_relu(F.group_norm(x, G, gamma, beta, EPS), 0.01)
        return y + y

    return {
        "group_norm_welford": (lambda x, gamma, beta: kernels.group_norm_welford(x, G, gamma, beta, EPS),
                               lambda x, gamma, beta: F.group_norm(x, G, gamma, beta, EPS), False),
        "group_norm_sumsq": (lambda x, gamma, beta: kernels.group_norm_sumsq(x, G, gamma, beta, EPS),
                             lambda x, gamma, beta: F.group_norm(x, G, gamma, beta, EPS), False),
        "bias_hardtanh_mish_group_norm": (
            lambda x, b, gamma, beta: kernels.bias_hardtanh_mish_group_norm(x, b, -1.0, 1.0, G, gamma, beta, EPS),
            lambda x, b, gamma, beta: F.group_norm(F.mish(F.hardtanh(x + b)), G, gamma, beta, EPS), True),
        "swish_bias_group_norm": (
            lambda x, b, gamma, beta: kernels.swish_bias_group_norm(x, b, G, gamma, beta, EPS),
            lambda x, b, gamma, beta: F.group_norm(torch.sigmoid(x) * x + b, G, gamma, beta, EPS), True),
        "group_norm_leaky_relu_x2": (
            lambda x, gamma, beta: kernels.group_norm_leaky_relu_x2(x, G, gamma, beta, EPS, 0.01), ref_62, False),
    }


kernels, test_exports, test_compiles = kernel_file_tests(KERNEL, EXPORTS)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_through_the_harness(kernels, name, shape):
    N, C, G = shape
    fn, ref, has_bias = variants(kernels, G)[name]
    # Raw kernels: the launchers refuse strided inputs loudly (a drop-in calls .contiguous()).
    report = check.check_fn(fn, ref, inputs(N, C, bias=has_bias), name=f"{name} {shape}", contiguous_only=True)
    report.raise_if_failed()


@pytest.mark.gpu
@pytest.mark.parametrize("scale", ["small", "odd"])
@pytest.mark.parametrize("problem", [94, 37, 62])
def test_fused_kernel_finishes_the_reference_model(kernels, cuda, problem, scale):
    """The fused kernel applied to the model's own GEMM output reproduces Model.forward: the
    module's Hardtanh range, its two biases, its GroupNorm's γ, β, groups and eps."""
    p = get_problem(problem)
    model = p.make_model(scale, seed=problem)
    g = torch.Generator().manual_seed(problem)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias") or "norm" in name or name.startswith("gn."):
                param.copy_(0.5 * torch.randn(param.shape, generator=g) + (1.0 if name.endswith("weight") else 0.0))
    model = model.to(cuda)
    x = p.get_inputs(scale, generator=g)[0].to(cuda)
    with torch.no_grad(), precision.ieee_fp32():
        expected = model(x)
        if problem == 94:
            gn, ht = model.groupnorm, model.hardtanh
            out = kernels.bias_hardtanh_mish_group_norm(model.gemm(x), model.bias, ht.min_val, ht.max_val,
                                                        gn.num_groups, gn.weight, gn.bias, gn.eps)
        elif problem == 37:
            gn = model.group_norm
            out = kernels.swish_bias_group_norm(model.matmul(x), model.bias, gn.num_groups, gn.weight, gn.bias, gn.eps)
        else:
            gn = model.gn
            out = kernels.group_norm_leaky_relu_x2(model.fc(x), gn.num_groups, gn.weight, gn.bias, gn.eps,
                                                   model.leaky_relu.negative_slope)
    tier = check.TIERS["strict"]
    torch.testing.assert_close(out, expected, rtol=tier.rtol, atol=tier.atol)


@pytest.mark.gpu
def test_statistics_are_per_sample(kernels, cuda):
    # Seeds 003 and 004 reduce over the whole batch: then one sample's output would depend on the
    # others. GroupNorm's does not.
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 1024, generator=g).to(cuda)
    gamma, beta = (t.to(cuda) for t in affine(1024, g))
    first = kernels.group_norm_welford(x, 64, gamma, beta, EPS)[0]
    x[1:] = x[1:] * 100 + 50
    assert torch.equal(kernels.group_norm_welford(x, 64, gamma, beta, EPS)[0], first)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(37, 115, 5), (64, 8192, 512), (16, 4096, 64)], ids=lambda s: "x".join(map(str, s)))
def test_welford_survives_data_far_from_zero_sumsq_does_not(kernels, cuda, shape):
    """Data around 1e3 with unit spread, as a GEMM output with a large bias might be: sum of
    squares (~1e6 per element) keeps about one digit of the variance; Welford keeps them all."""
    N, C, G = shape
    g = torch.Generator().manual_seed(C)
    x = (1e3 + torch.randn(N, C, generator=g)).to(cuda)
    gamma, beta = (t.to(cuda) for t in affine(C, g))
    exact = F.group_norm(x.double(), G, gamma.double(), beta.double(), EPS)

    def error(out):
        return (out.double() - exact).abs().max().item()

    welford = error(kernels.group_norm_welford(x, G, gamma, beta, EPS))
    sumsq = error(kernels.group_norm_sumsq(x, G, gamma, beta, EPS))
    pytorch = error(F.group_norm(x, G, gamma, beta, EPS))
    detail = f"max abs error vs float64: welford {welford:.1e}, sumsq {sumsq:.1e}, F.group_norm {pytorch:.1e}"
    assert welford < 1e-3, detail
    assert sumsq > 1e-2, detail


@pytest.mark.gpu
def test_unaligned_views_take_the_block_path(kernels, cuda):
    # x, gamma and beta start 4 bytes into their storage: no float4 access is allowed.
    N, C, G = 6, 256, 8

    def shifted(t):
        buf = torch.empty(t.numel() + 1, device=cuda)
        view = buf[1:].view(t.shape)
        view.copy_(t)
        return view

    g = torch.Generator().manual_seed(6)
    for name, (fn, ref, has_bias) in variants(kernels, G).items():
        args = [t.to(cuda) for t in inputs(N, C, bias=has_bias)(g)]
        unaligned = [shifted(t) for t in args]
        assert all(t.is_contiguous() and t.data_ptr() % 16 for t in unaligned)
        torch.testing.assert_close(fn(*unaligned), ref(*args), rtol=1e-4, atol=1e-4, msg=name)


@pytest.mark.gpu
def test_extreme_inputs_of_the_fused_94(kernels, cuda):
    # ±inf and huge values are clamped by Hardtanh before Mish; a NaN makes its whole group NaN,
    # as in PyTorch.
    C, G = 64, 4
    x = torch.randn(3, C, device=cuda)
    x[0, :8] = torch.tensor([float("inf"), float("-inf"), 1e30, -1e30, 3e38, -3e38, 88.0, -88.0])
    x[1, 20] = float("nan")
    b, gamma, beta = torch.randn(C, device=cuda), torch.randn(C, device=cuda), torch.randn(C, device=cuda)
    fn, ref, _ = variants(kernels, G)["bias_hardtanh_mish_group_norm"]
    out = fn(x, b, gamma, beta)
    torch.testing.assert_close(out, ref(x, b, gamma, beta), rtol=1e-4, atol=1e-4, equal_nan=True)
    assert out[1, 16:32].isnan().all() and out[1, :16].isfinite().all()


@pytest.mark.gpu
@pytest.mark.parametrize("lo, hi", [(-1.0, 1.0), (-30.0, 30.0), (-100.0, 100.0)])
def test_fused_94_fast_mish_over_wide_hardtanh_ranges(kernels, cuda, lo, hi):
    # The fused 94 uses mish_fast_f (__expf, __fdividef), whose error grows with |v|: the
    # GroupNorm's tolerance must hold over every range Hardtanh may pass, not only [-1, 1].
    g = torch.Generator(device=cuda).manual_seed(94)
    N, C, G = 33, 2048, 64
    x = torch.randn(N, C, device=cuda, generator=g) * 40
    b, gamma, beta = (torch.randn(C, device=cuda, generator=g) for _ in range(3))
    out = kernels.bias_hardtanh_mish_group_norm(x, b, lo, hi, G, gamma, beta, EPS)
    ref = F.group_norm(F.mish(F.hardtanh(x + b, lo, hi)), G, gamma, beta, EPS)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_empty_input(kernels, cuda):
    gamma, beta = torch.ones(8, device=cuda), torch.zeros(8, device=cuda)
    assert kernels.group_norm_welford(torch.empty(0, 8, device=cuda), 2, gamma, beta, EPS).shape == (0, 8)


@pytest.mark.gpu
def test_rejects_bad_input(kernels, cuda):
    x = torch.randn(4, 12, device=cuda)
    gamma, beta, bias = torch.randn(12, device=cuda), torch.randn(12, device=cuda), torch.randn(12, device=cuda)
    bad = [
        ((x.double(), 3, gamma, beta), "float32"),
        ((x, 3, gamma.double(), beta), "float32"),
        ((x.cpu(), 3, gamma, beta), "CUDA"),
        ((x, 3, gamma, beta.cpu()), "CUDA"),
        ((torch.randn(12, 4, device=cuda).t(), 3, gamma, beta), "contiguous"),
        ((x.view(4, 3, 4), 3, gamma, beta), "2-D"),
        ((x, 3, gamma[:11], beta), r"\[12\].*\[11\]"),
        ((x, 3, gamma, torch.randn(1, 12, device=cuda)), r"\[12\].*\[1, 12\]"),
        ((x, 5, gamma, beta), "divisible by num_groups = 5"),
        ((x, 0, gamma, beta), "positive"),
    ]
    for (xx, G, gg, bb), message in bad:
        for call in (lambda: kernels.group_norm_welford(xx, G, gg, bb, EPS),
                     lambda: kernels.group_norm_sumsq(xx, G, gg, bb, EPS),
                     lambda: kernels.bias_hardtanh_mish_group_norm(xx, bias, -1.0, 1.0, G, gg, bb, EPS),
                     lambda: kernels.swish_bias_group_norm(xx, bias, G, gg, bb, EPS),
                     lambda: kernels.group_norm_leaky_relu_x2(xx, G, gg, bb, EPS, 0.01)):
            with pytest.raises(RuntimeError, match=message):
                call()
    with pytest.raises(RuntimeError, match="eps"):
        kernels.group_norm_welford(x, 3, gamma, beta, -1.0)
    for b, message in [(bias.double(), "float32"), (bias.cpu(), "CUDA"), (bias[:11], r"\[12\].*\[11\]")]:
        with pytest.raises(RuntimeError, match=message):
            kernels.bias_hardtanh_mish_group_norm(x, b, -1.0, 1.0, 3, gamma, beta, EPS)
        with pytest.raises(RuntimeError, match=message):
            kernels.swish_bias_group_norm(x, b, 3, gamma, beta, EPS)


@pytest.mark.gpu
@pytest.mark.large
def test_the_largest_group_and_one_past_it(kernels, cuda):
    """A group of 2^24 floats, the most the kernels take (their float counts are exact up to there),
    is normalised right, by one block; one float more is refused with the limit in the message."""
    D = 1 << 24
    g = torch.Generator(device=cuda).manual_seed(24)
    x = torch.randn(1, D, device=cuda, generator=g) * 2 + 3
    gamma, beta = torch.rand(D, device=cuda, generator=g) + 0.5, torch.randn(D, device=cuda, generator=g)
    torch.testing.assert_close(kernels.group_norm_welford(x, 1, gamma, beta, EPS), F.group_norm(x, 1, gamma, beta, EPS),
                               rtol=1e-4, atol=1e-4)
    del x
    over = torch.zeros(1, D + 1, device=cuda)
    ones = torch.ones(D + 1, device=cuda)
    with pytest.raises(RuntimeError, match=r"a group of 16777217 channels .* \(16777216 = 2\^24\)"):
        kernels.group_norm_welford(over, 1, ones, ones, EPS)


@pytest.mark.gpu
@pytest.mark.large
@pytest.mark.parametrize("problem", sorted(FULL))
def test_full_size(kernels, cuda, problem):
    N, C, G = FULL[problem]
    g = torch.Generator(device=cuda).manual_seed(problem)
    x = torch.randn(N, C, device=cuda, generator=g) * 2
    bias = 0.5 * torch.randn(C, device=cuda, generator=g)
    gamma = (torch.rand(C, device=cuda, generator=g) + 0.5) * torch.where(torch.rand(C, device=cuda, generator=g) < 0.5, -1, 1)
    beta = 0.5 * torch.randn(C, device=cuda, generator=g)
    name = {94: "bias_hardtanh_mish_group_norm", 37: "swish_bias_group_norm", 62: "group_norm_leaky_relu_x2"}[problem]
    tier = check.TIERS["strict"]
    for variant in ("group_norm_welford", name):
        fn, ref, has_bias = variants(kernels, G)[variant]
        args = (x, bias, gamma, beta) if has_bias else (x, gamma, beta)
        torch.testing.assert_close(poisoned(fn, *args), ref(*args), rtol=tier.rtol, atol=tier.atol, msg=variant)
