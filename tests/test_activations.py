"""kernels/activations.cu: the fused elementwise epilogues of problems 94, 37 and 62 (and Mish
alone) compile, match PyTorch element for element (extreme values included), write every
element, and refuse bad input with a message that says what is wrong."""
import pytest
import torch
import torch.nn.functional as F

from utils import check

from kernel_tests import kernel_file_tests, poisoned

KERNEL = "activations"
EXPORTS = {"bias_hardtanh_mish", "swish_bias", "leaky_relu_x2", "mish"}
# rows x cols: odd (scalar path: 115 is no multiple of 4), one row, float4 path, tiny.
SHAPES = [(37, 115), (1, 8192), (37, 128), (3, 4)]
# The problems' GEMM outputs: 94 and 62 (1024, 8192), 37 (32768, 4096).
FULL = {94: (1024, 8192), 37: (32768, 4096), 62: (1024, 8192)}

# Values where a careless formula overflows, underflows or loses NaN: exp overflows past 88,
# softplus switches branch at 20, log(1 + e^x) rounds to 0 below about -17.
EXTREMES = [float("-inf"), -1e30, -1e4, -100.0, -88.7, -87.0, -30.0, -20.5, -20.0, -17.0, -5.0, -1.0, -1e-3,
            -1e-30, -0.0, 0.0, 1e-30, 1e-3, 0.5, 1.0, 5.0, 19.9, 20.0, 20.1, 30.0, 88.0, 88.8, 100.0, 1e4, 1e30,
            float("inf"), float("nan")]


def ref_94(x, bias):
    return F.mish(F.hardtanh(x + bias))  # nn.Hardtanh(): [-1, 1]


def ref_37(x, bias):
    return torch.sigmoid(x) * x + bias


def ref_62(x):
    y = F.leaky_relu(x, 0.01)
    return y + y


kernels, test_exports, test_compiles = kernel_file_tests(KERNEL, EXPORTS)


def x_and_bias(rows, cols, scale=2.0):
    """GEMM-output-like x (never zeros) and a random bias: enough spread that Hardtanh clamps some
    elements on both sides and leaves most inside."""
    def factory(g):
        return [torch.randn(rows, cols, generator=g) * scale, 0.5 * torch.randn(cols, generator=g)]
    return factory


def cases(kernels):
    return {
        "bias_hardtanh_mish": (lambda x, b: kernels.bias_hardtanh_mish(x, b, -1.0, 1.0), ref_94),
        "swish_bias": (kernels.swish_bias, ref_37),
        "leaky_relu_x2": (lambda x, b: kernels.leaky_relu_x2(x, 0.01), lambda x, b: ref_62(x)),
        "mish": (lambda x, b: kernels.mish(x), lambda x, b: F.mish(x)),
    }


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_through_the_harness(kernels, name, shape):
    fn, ref = cases(kernels)[name]
    # Raw kernels: the launchers refuse strided inputs loudly (a drop-in calls .contiguous()).
    report = check.check_fn(fn, ref, x_and_bias(*shape), name=f"{name} {shape}", contiguous_only=True)
    report.raise_if_failed()


@pytest.mark.gpu
def test_hardtanh_range_is_minus_one_to_one(kernels, cuda):
    # Seed 000 clamps to [0, 2], seed 001 to [0, 20]: nn.Hardtanh() is [-1, 1], so negative
    # inputs must give mish(-1) and large ones mish(1), never mish(2) or mish(20).
    x = torch.tensor([[-5.0, -1.0, -0.5, 0.5, 1.0, 2.0, 20.0, 50.0]], device=cuda)
    bias = torch.zeros(8, device=cuda)
    out = kernels.bias_hardtanh_mish(x, bias, -1.0, 1.0)
    torch.testing.assert_close(out, F.mish(torch.nn.Hardtanh()(x)), rtol=2e-6, atol=0)
    assert out.min().item() == pytest.approx(F.mish(torch.tensor(-1.0)).item(), abs=1e-6)
    assert out.max().item() == pytest.approx(F.mish(torch.tensor(1.0)).item(), abs=1e-6)


@pytest.mark.gpu
def test_mish_extremes_match_torch(kernels, cuda):
    # The listed extremes, a dense sweep across both sides of the threshold, and the float4 and
    # scalar paths (odd length). The kernel's one-exp form of Mish and F.mish's exp-log1p-tanh
    # agree to ~10 units in the last place (rtol 2e-6), and in every special value.
    sweep = torch.linspace(-120.0, 120.0, 20001)
    for x in (torch.tensor(EXTREMES), torch.cat([torch.tensor(EXTREMES), sweep]), sweep[:-1]):
        x = x.to(cuda)
        torch.testing.assert_close(kernels.mish(x), F.mish(x), rtol=2e-6, atol=1e-37, equal_nan=True)
    assert torch.isnan(kernels.mish(torch.tensor([float("-inf")], device=cuda))).all()  # -inf * 0, as torch


@pytest.mark.gpu
@pytest.mark.parametrize("cols", [4, 5])  # float4 path, scalar path
def test_fused_ops_on_extremes(kernels, cuda, cols):
    x = torch.tensor(EXTREMES, device=cuda)
    x = x[: x.numel() // cols * cols].view(-1, cols)
    bias = torch.linspace(-0.7, 0.9, cols, device=cuda)
    for fn, ref in cases(kernels).values():
        torch.testing.assert_close(fn(x, bias), ref(x, bias), rtol=2e-6, atol=1e-37, equal_nan=True)


@pytest.mark.gpu
def test_x_plus_x_is_exactly_twice_leaky_relu(kernels, cuda):
    x = torch.randn(1000, device=cuda) * 1e3
    assert torch.equal(kernels.leaky_relu_x2(x, 0.01), 2 * F.leaky_relu(x, 0.01))


@pytest.mark.gpu
def test_unaligned_views_take_the_scalar_path(kernels, cuda):
    # x starts 4 bytes into its storage: float4 accesses would be misaligned.
    buf = torch.randn(16 * 64 + 1, device=cuda)
    x = buf[1:].view(16, 64)
    bias = torch.randn(64, device=cuda)
    assert x.is_contiguous() and x.data_ptr() % 16 != 0
    for fn, ref in cases(kernels).values():
        torch.testing.assert_close(fn(x, bias), ref(x, bias), rtol=2e-6, atol=1e-6)


@pytest.mark.gpu
def test_empty_input(kernels, cuda):
    x = torch.empty(0, 8, device=cuda)
    assert kernels.bias_hardtanh_mish(x, torch.zeros(8, device=cuda), -1.0, 1.0).shape == (0, 8)
    assert kernels.leaky_relu_x2(torch.empty(0, device=cuda), 0.01).shape == (0,)


@pytest.mark.gpu
def test_rejects_bad_input(kernels, cuda):
    x, b = torch.randn(4, 8, device=cuda), torch.randn(8, device=cuda)
    for args, message in [((x.double(), b), "float32"),
                          ((x, b.double()), "float32"),
                          ((x.cpu(), b), "CUDA"),
                          ((x, b.cpu()), "CUDA"),
                          ((torch.randn(8, 4, device=cuda).t(), b), "contiguous"),
                          ((x, torch.randn(7, device=cuda)), r"\[8\].*\[7\]"),
                          ((x[0], b), "2-D")]:
        with pytest.raises(RuntimeError, match=message):
            kernels.bias_hardtanh_mish(*args, -1.0, 1.0)
        with pytest.raises(RuntimeError, match=message):
            kernels.swish_bias(*args)
    with pytest.raises(RuntimeError, match="min_val <= max_val"):
        kernels.bias_hardtanh_mish(x, b, 1.0, -1.0)
    for fn in (lambda t: kernels.leaky_relu_x2(t, 0.01), kernels.mish):
        for bad, message in [(x.double(), "float32"), (x.cpu(), "CUDA"), (x.t(), "contiguous")]:
            with pytest.raises(RuntimeError, match=message):
                fn(bad)


@pytest.mark.gpu
@pytest.mark.large
@pytest.mark.parametrize("problem", sorted(FULL))
def test_full_size(kernels, cuda, problem):
    g = torch.Generator(device=cuda).manual_seed(problem)
    rows, cols = FULL[problem]
    x = torch.randn(rows, cols, device=cuda, generator=g) * 2
    bias = 0.5 * torch.randn(cols, device=cuda, generator=g)
    fn, ref = {94: cases(kernels)["bias_hardtanh_mish"], 37: cases(kernels)["swish_bias"],
               62: cases(kernels)["leaky_relu_x2"]}[problem]
    out = poisoned(fn, x, bias)
    tier = check.TIERS["strict"]
    torch.testing.assert_close(out, ref(x, bias), rtol=tier.rtol, atol=tier.atol)
