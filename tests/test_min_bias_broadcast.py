"""kernels/min_bias_broadcast.cu: problem 75 after its GEMM. GroupNorm + row minimum in one read,
then rowmin (N, 1) + bias (1, C, 1, 1), which broadcasts to (1, C, N, 1) (seed 002 thought it an
error), against PyTorch and the reference Model: odd shapes, every element checked as written,
NaN propagated like torch.min, bad input refused with a clear message."""
import pytest
import torch
import torch.nn.functional as F

from utils import check, precision

from kernel_tests import kernel_file_tests, poisoned
from utils.problems import get_problem

KERNEL = "min_bias_broadcast"
EXPORTS = {"group_norm_row_min", "min_bias_broadcast", "group_norm_min_bias"}
EPS = 1e-5
# (N, C, G): odd (block path, D = 23), one sample, problem 75's groups (D = 16), D = 64, D = 20
# (a team whose lanes hold different numbers of float4s), D = 500 (block path, D > 256), N not a
# multiple of 4 with float4 groups.
SHAPES = [(37, 115, 5), (1, 8192, 512), (64, 1024, 64), (8, 4096, 64), (9, 80, 4), (4, 1000, 2), (37, 1024, 64)]
FULL = (1024, 8192, 512)


def affine(C, g):
    """GroupNorm weight and bias far from the defaults: |γ| in [0.5, 1.5] with random signs, β ~ N(0, 0.5²)."""
    sign = torch.randint(0, 2, (C,), generator=g) * 2 - 1
    return (torch.rand(C, generator=g) + 0.5) * sign, 0.5 * torch.randn(C, generator=g)


def gn_inputs(N, C, *, with_bias=False):
    def factory(g):
        x = torch.randn(N, C, generator=g) * 2
        gamma, beta = affine(C, g)
        return [x, gamma, beta, torch.randn(1, C, 1, 1, generator=g)] if with_bias else [x, gamma, beta]
    return factory


def ref_row_min(G):
    return lambda x, gamma, beta: torch.min(F.group_norm(x, G, gamma, beta, EPS), dim=1, keepdim=True)[0]


def ref_tail(G):
    return lambda x, gamma, beta, bias: ref_row_min(G)(x, gamma, beta) + bias


kernels, test_exports, test_compiles = kernel_file_tests(KERNEL, EXPORTS)


def test_the_broadcast_is_not_an_error():
    # What seed 002 doubted, on the CPU: (N, 1) + (1, C, 1, 1) is (1, C, N, 1).
    N, C = 3, 5
    rowmin, bias = torch.randn(N, 1), torch.randn(1, C, 1, 1)
    out = rowmin + bias
    assert out.shape == (1, C, N, 1)
    assert torch.equal(out[0, :, :, 0], bias.view(C, 1) + rowmin.view(1, N))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_row_min_through_the_harness(kernels, shape):
    N, C, G = shape
    report = check.check_fn(lambda x, gamma, beta: kernels.group_norm_row_min(x, G, gamma, beta, EPS),
                            ref_row_min(G), gn_inputs(N, C), name=f"group_norm_row_min {shape}", contiguous_only=True)
    report.raise_if_failed()


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_whole_tail_through_the_harness(kernels, shape):
    N, C, G = shape
    report = check.check_fn(lambda x, gamma, beta, bias: kernels.group_norm_min_bias(x, G, gamma, beta, EPS, bias),
                            ref_tail(G), gn_inputs(N, C, with_bias=True), name=f"group_norm_min_bias {shape}",
                            contiguous_only=True)
    report.raise_if_failed()


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES + [(1028, 256, 16), (6, 3, 3)], ids=lambda s: "x".join(map(str, s)))
def test_tail_is_its_two_kernels_bit_for_bit(kernels, cuda, shape):
    """group_norm_min_bias launches the broadcast as a programmatic dependent of the row minimum
    (common/dependent_launch.cuh): it must wait for every row's minimum, so its output is the two
    kernels' called one after the other, bit for bit, every element written."""
    N, C, G = shape
    x, gamma, beta, bias = (t.to(cuda) for t in gn_inputs(N, C, with_bias=True)(torch.Generator().manual_seed(N)))
    expected = kernels.min_bias_broadcast(kernels.group_norm_row_min(x, G, gamma, beta, EPS), bias)
    for _ in range(3):
        assert torch.equal(poisoned(kernels.group_norm_min_bias, x, G, gamma, beta, EPS, bias), expected)


@pytest.mark.gpu
def test_tail_in_a_cuda_graph_and_on_a_side_stream(kernels, cuda):
    """The dependent launch is captured into a CUDA graph (as a programmatic edge) and replays
    with new inputs; on a stream other than the default it orders against that stream."""
    N, C, G = 256, 1024, 64
    g = torch.Generator().manual_seed(3)
    x, gamma, beta, bias = (t.to(cuda) for t in gn_inputs(N, C, with_bias=True)(g))
    side = torch.cuda.Stream(cuda)
    side.wait_stream(torch.cuda.current_stream(cuda))
    with torch.cuda.stream(side):
        kernels.group_norm_min_bias(x, G, gamma, beta, EPS, bias)  # warm-up outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            out = kernels.group_norm_min_bias(x, G, gamma, beta, EPS, bias)
    for seed in range(3):
        x.copy_(torch.randn(N, C, generator=torch.Generator().manual_seed(10 + seed)).to(cuda) * 2)
        out.fill_(float("nan"))
        graph.replay()
        torch.testing.assert_close(out, ref_tail(G)(x, gamma, beta, bias), rtol=1e-4, atol=1e-4)
    with torch.cuda.stream(side):
        out_side = kernels.group_norm_min_bias(x, G, gamma, beta, EPS, bias)
    torch.cuda.current_stream(cuda).wait_stream(side)
    torch.testing.assert_close(out_side, ref_tail(G)(x, gamma, beta, bias), rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("N, C", [(1024, 8192), (37, 115), (1, 64), (4, 3), (6, 1)])  # float4 path, scalar paths
def test_broadcast_through_the_harness(kernels, N, C):
    def factory(g):
        return [torch.randn(N, 1, generator=g), torch.randn(1, C, 1, 1, generator=g)]

    report = check.check_fn(kernels.min_bias_broadcast, torch.add, factory, name=f"min_bias_broadcast {N}x{C}",
                            contiguous_only=True)
    report.raise_if_failed()


@pytest.mark.gpu
@pytest.mark.parametrize("scale", ["small", "odd"])
def test_finishes_the_reference_model(kernels, cuda, scale):
    """Applied to Model 75's own GEMM output, group_norm_min_bias reproduces Model.forward,
    output shape (1, C, N, 1) included."""
    p = get_problem(75)
    model = p.make_model(scale, seed=75)
    g = torch.Generator().manual_seed(75)
    gamma, beta = affine(model.group_norm.num_channels, g)
    with torch.no_grad():
        model.group_norm.weight.copy_(gamma)
        model.group_norm.bias.copy_(beta)
        model.bias.copy_(torch.randn(model.bias.shape, generator=g))
    model = model.to(cuda)
    x = p.get_inputs(scale, generator=g)[0].to(cuda)
    gn = model.group_norm
    with torch.no_grad(), precision.ieee_fp32():
        expected = model(x)
        out = kernels.group_norm_min_bias(model.gemm(x), gn.num_groups, gn.weight, gn.bias, gn.eps, model.bias)
    assert out.shape == expected.shape == p.output_shape(scale)
    tier = check.TIERS["strict"]
    torch.testing.assert_close(out, expected, rtol=tier.rtol, atol=tier.atol)


@pytest.mark.gpu
@pytest.mark.parametrize("C, G", [(64, 4), (115, 5)])  # team path, block path
def test_nan_propagates_like_torch_min(kernels, cuda, C, G):
    x = torch.randn(3, C, device=cuda)
    x[1, 7] = float("nan")
    gamma, beta = torch.randn(C, device=cuda), torch.randn(C, device=cuda)
    out = kernels.group_norm_row_min(x, G, gamma, beta, EPS)
    torch.testing.assert_close(out, ref_row_min(G)(x, gamma, beta), rtol=1e-4, atol=1e-4, equal_nan=True)
    assert out[1].isnan().all() and out[[0, 2]].isfinite().all()


@pytest.mark.gpu
def test_unaligned_views(kernels, cuda):
    # Views that start 4 bytes into their storage: the scalar and block paths, not float4.
    def shifted(t):
        buf = torch.empty(t.numel() + 1, device=cuda)
        view = buf[1:].view(t.shape)
        view.copy_(t)
        return view

    g = torch.Generator().manual_seed(1)
    x, gamma, beta, bias = (t.to(cuda) for t in gn_inputs(8, 256, with_bias=True)(g))
    ux, ugamma, ubeta, ubias = (shifted(t) for t in (x, gamma, beta, bias))
    assert ux.data_ptr() % 16 and ugamma.data_ptr() % 16
    torch.testing.assert_close(kernels.group_norm_row_min(ux, 16, ugamma, ubeta, EPS), ref_row_min(16)(x, gamma, beta),
                               rtol=1e-4, atol=1e-4)
    rowmin = shifted(torch.randn(8, 1, device=cuda))
    torch.testing.assert_close(kernels.min_bias_broadcast(rowmin, ubias), rowmin + bias, rtol=0, atol=0)


@pytest.mark.gpu
def test_empty_and_degenerate(kernels, cuda):
    gamma, beta = torch.randn(8, device=cuda), torch.randn(8, device=cuda)
    assert kernels.group_norm_row_min(torch.empty(0, 8, device=cuda), 2, gamma, beta, EPS).shape == (0, 1)
    assert kernels.min_bias_broadcast(torch.empty(0, 1, device=cuda), torch.randn(1, 8, 1, 1, device=cuda)).shape == (1, 8, 0, 1)
    with pytest.raises(RuntimeError, match="no channels"):
        kernels.group_norm_row_min(torch.empty(3, 0, device=cuda), 1, torch.empty(0, device=cuda),
                                   torch.empty(0, device=cuda), EPS)


@pytest.mark.gpu
def test_rejects_bad_input(kernels, cuda):
    x = torch.randn(4, 12, device=cuda)
    gamma, beta, bias = torch.randn(12, device=cuda), torch.randn(12, device=cuda), torch.randn(1, 12, 1, 1, device=cuda)
    bad = [
        ((x.double(), 3, gamma, beta), "float32"),
        ((x.cpu(), 3, gamma, beta), "CUDA"),
        ((torch.randn(12, 4, device=cuda).t(), 3, gamma, beta), "contiguous"),
        ((x.view(4, 3, 4), 3, gamma, beta), "2-D"),
        ((x, 3, gamma[:11], beta), r"\[12\].*\[11\]"),
        ((x, 5, gamma, beta), "divisible by num_groups = 5"),
    ]
    for (xx, G, gg, bb), message in bad:
        with pytest.raises(RuntimeError, match=message):
            kernels.group_norm_row_min(xx, G, gg, bb, EPS)
        with pytest.raises(RuntimeError, match=message):
            kernels.group_norm_min_bias(xx, G, gg, bb, EPS, bias)
    rowmin = torch.randn(4, 1, device=cuda)
    for args, message in [((rowmin.double(), bias), "float32"),
                          ((rowmin, bias.cpu()), "CUDA"),
                          ((torch.randn(4, device=cuda), bias), r"\[N, 1\].*\[4\]"),
                          ((rowmin, torch.randn(12, device=cuda)), r"\[1, C, 1, 1\].*\[12\]"),
                          ((rowmin, torch.randn(1, 12, 1, 2, device=cuda)), r"\[1, C, 1, 1\].*\[1, 12, 1, 2\]"),
                          ((rowmin, torch.randn(1, 1, 12, 2, device=cuda).transpose(1, 2)[..., :1]), "contiguous")]:
        with pytest.raises(RuntimeError, match=message):
            kernels.min_bias_broadcast(*args)
    with pytest.raises(RuntimeError, match=r"\[1, C, 1, 1\]"):
        kernels.group_norm_min_bias(x, 3, gamma, beta, EPS, bias.view(12))


@pytest.mark.gpu
@pytest.mark.large
def test_full_size(kernels, cuda):
    N, C, G = FULL
    g = torch.Generator(device=cuda).manual_seed(75)
    x = torch.randn(N, C, device=cuda, generator=g) * 2
    gamma = (torch.rand(C, device=cuda, generator=g) + 0.5) * torch.where(torch.rand(C, device=cuda, generator=g) < 0.5, -1, 1)
    beta = 0.5 * torch.randn(C, device=cuda, generator=g)
    bias = torch.randn(1, C, 1, 1, device=cuda, generator=g)
    tier = check.TIERS["strict"]
    rowmin = poisoned(kernels.group_norm_row_min, x, G, gamma, beta, EPS)
    torch.testing.assert_close(rowmin, ref_row_min(G)(x, gamma, beta), rtol=tier.rtol, atol=tier.atol)
    out = poisoned(kernels.group_norm_min_bias, x, G, gamma, beta, EPS, bias)
    assert out.shape == (1, C, N, 1)
    torch.testing.assert_close(out, ref_tail(G)(x, gamma, beta, bias), rtol=tier.rtol, atol=tier.atol)
