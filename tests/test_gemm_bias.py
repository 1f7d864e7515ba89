"""The bias epilogue (kernels/gemm_bias.cu): F.linear with its bias, and problem 94's two biases,
fused into rung 7's GEMM; exact on shapes that are multiples of nothing, every element written,
bad input refused."""
import pytest
import torch
import torch.nn.functional as F

from utils import build, check, ladder
from utils.problems import get_problem

SHAPES = [(37, 129, 65), (1, 8192, 8192), (1000, 1000, 1000), (5, 3, 0),
          pytest.param((1024, 8192, 8192), marks=pytest.mark.large)]


def load():
    return build.load_kernel("gemm_bias")


def biases(N, device, seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(N, generator=g) * 2 - 1).to(device) for _ in range(2)]  # never zeros, both signs


def test_exports():
    names = [e.name for e in build.exported_functions(build.kernel_source("gemm_bias"))]
    assert names == ["linear_bias", "linear_two_biases"]


@pytest.mark.compile
def test_compiles():
    mod = load()
    assert callable(mod.linear_bias) and callable(mod.linear_two_biases)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matches_float64(shape, cuda):
    mod = load()
    M, N, K = shape
    x, w = ladder.operands(M, N, K, seed=sum(shape))
    b1, b2 = biases(N, cuda, seed=M)
    one = F.linear(x.double(), w.double(), b1.double())
    for out, ref in [(mod.linear_bias(x, w, b1), one), (mod.linear_two_biases(x, w, b1, b2), one + b2.double())]:
        assert out.shape == ref.shape and out.dtype == torch.float32
        # With K == 0 the output is the bias alone: exact.
        torch.testing.assert_close(out.double(), ref, atol=check.TIERS["strict"].atol, rtol=check.TIERS["strict"].rtol)


@pytest.mark.gpu
def test_every_element_written_and_harness():
    mod = load()

    def operands(g):  # no tile divides any dimension
        return [torch.rand(37, 65, generator=g), torch.rand(129, 65, generator=g) * 2 - 1,
                torch.rand(129, generator=g) - 0.5, torch.rand(129, generator=g) - 0.5]

    report = check.check_fn(mod.linear_two_biases, lambda x, w, b1, b2: F.linear(x, w, b1) + b2, operands,
                            name="linear_two_biases", contiguous_only=True)
    report.raise_if_failed()
    report = check.check_fn(mod.linear_bias, F.linear, lambda g: operands(g)[:3], name="linear_bias",
                            contiguous_only=True)
    report.raise_if_failed()


@pytest.mark.gpu
def test_problem_94_first_two_ops(cuda):
    """The model's own parameters, as nn.Linear and the model initialise them, at the odd scale."""
    mod = load()
    problem = get_problem(94)
    model = problem.make_model("odd").to(cuda)
    (x,) = [t.to(cuda) for t in problem.get_inputs("odd", generator=torch.Generator().manual_seed(0))]
    with torch.no_grad():
        ref = model.gemm(x) + model.bias
        out = mod.linear_two_biases(x, model.gemm.weight, model.gemm.bias, model.bias)
    torch.testing.assert_close(out, ref, atol=check.TIERS["strict"].atol, rtol=check.TIERS["strict"].rtol)


@pytest.mark.gpu
def test_bad_biases_are_refused(cuda):
    mod = load()
    x, w = torch.rand(4, 8, device=cuda), torch.rand(5, 8, device=cuda)
    good = torch.rand(5, device=cuda)
    for bad, message in [(torch.rand(4, device=cuda), r"bias must have shape \[N\] = \[5\].*got \[4\]"),
                         (torch.rand(1, 5, device=cuda), r"got \[1, 5\]"),
                         (good.double(), "float32"),
                         (good.cpu(), "CUDA"),
                         (torch.rand(10, device=cuda)[::2], "contiguous")]:
        with pytest.raises(RuntimeError, match=message):
            mod.linear_bias(x, w, bad)
        with pytest.raises(RuntimeError, match=message.replace("bias must", "extra_bias must")):
            mod.linear_two_biases(x, w, good, bad)
    with pytest.raises(RuntimeError, match=r"same K"):
        mod.linear_bias(x, torch.rand(5, 7, device=cuda), good)
