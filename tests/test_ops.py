"""utils.ops and build.register_op: the GEMM and the fused tails as torch.library operators.

On the CPU (CI): the schemas derived from the launchers' prototypes, torch.library.opcheck on
the CPU implementation (schema, autograd registration, fake tensors, AOT dispatch with dynamic
shapes), the fake implementation on CUDA fake tensors, the autograd formulas against autograd
through the reference math, and the dtype and shape errors. On the GPU: opcheck and the values
of the CUDA implementation (the kernels), on shapes that are multiples of no tile, and that after
an op's first call its CUDA kernel is the launcher registered in C++.
"""
import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

from tests import bad_inputs as bi
from tests.test_fused_models import _args as whole_model_args
from utils import build, ops
from utils.check import TIERS

EPS = 1e-5


def _args(name: str, N: int, C: int, G: int, device="cpu", seed=0) -> list:
    """The op's arguments at (N, C) in G groups: random x, γ (signs too), β and biases, never zeros."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, C, generator=g) * 2
    sign = torch.randint(0, 2, (C,), generator=g) * 2 - 1
    gamma, beta = (torch.rand(C, generator=g) + 0.5) * sign, 0.5 * torch.randn(C, generator=g)
    bias = 0.5 * torch.randn(C, generator=g)
    # the GEMM: x (N, C) against a weight of C + 3 rows (no tile's multiple), nn.Linear's scale
    weight = torch.randn(C + 3, C, generator=g) / max(C, 1) ** 0.5
    linear_bias = 0.5 * torch.randn(C + 3, generator=g)
    x, gamma, beta, bias, weight, linear_bias = (t.to(device) for t in (x, gamma, beta, bias, weight, linear_bias))
    return {
        "linear": [x, weight, linear_bias],
        "bias_hardtanh_mish_group_norm": [x, bias, -1.0, 1.0, G, gamma, beta, EPS],
        "swish_bias_group_norm": [x, bias, G, gamma, beta, EPS],
        "group_norm_leaky_relu_x2": [x, G, gamma, beta, EPS, 0.01],
        "group_norm_min_bias": [x, G, gamma, beta, EPS, bias.view(1, C, 1, 1)],
    }[name]


def _reference(name: str):
    return ops.DECLARED[name].reference


def _out_shape(name: str, N: int, C: int) -> tuple:
    return {"group_norm_min_bias": (1, C, N, 1), "linear": (N, C + 3)}.get(name, (N, C))


def _with_grad(args: list) -> list:
    return [a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) else a for a in args]


NAMES = list(ops.ALL)
# (N, C, G): the problems' channels per group (32, 16, 64) at small sizes, and 23 per group (no float4 fits)
SHAPES = [(5, 128, 4), (3, 64, 4), (4, 256, 4), (7, 115, 5)]


def test_every_op_is_registered_in_the_workbook_namespace():
    assert NAMES == ["linear", "bias_hardtanh_mish_group_norm", "swish_bias_group_norm", "group_norm_leaky_relu_x2",
                     "group_norm_min_bias"]
    for name, op in ops.ALL.items():
        assert op is getattr(torch.ops.workbook, name)
        assert build.op_kernel(f"workbook::{name}") in ("gemm_10_3xtf32", "groupnorm", "min_bias_broadcast")


def test_schemas_come_from_the_launchers_prototypes():
    (export,) = [e for e in build.exported_functions(build.kernel_source("groupnorm"))
                 if e.name == "bias_hardtanh_mish_group_norm"]
    assert build.op_schema(export) == ("(Tensor x, Tensor bias, float min_val, float max_val, int num_groups, "
                                       "Tensor gamma, Tensor beta, float eps) -> Tensor")
    assert str(torch.ops.workbook.group_norm_min_bias.default._schema) == (
        "workbook::group_norm_min_bias(Tensor x, int num_groups, Tensor gamma, Tensor beta, float eps, "
        "Tensor bias) -> Tensor")


def test_a_launcher_an_op_cannot_express_is_refused():
    source = ("// @export\nvoid scale_(torch::Tensor x, double a) {\n}\n// @export\ntorch::Tensor f(float* p) {\n}\n"
              "// @export\ntorch::Tensor g(torch::Tensor x, int64_t n = 3) {\n}\n")
    void, pointer, default = build.exported_functions(source)
    with pytest.raises(build.KernelSourceError, match="returns new tensors"):
        build.op_schema(void)
    with pytest.raises(build.KernelSourceError, match="float\\* p"):
        build.op_schema(pointer)
    with pytest.raises(build.KernelSourceError, match="a default an operator schema cannot take"):
        build.op_schema(default)


def test_tuples_optional_tensors_and_defaults_in_a_schema():
    source = ("// @export\nstd::tuple<torch::Tensor, torch::Tensor> f(torch::Tensor x, "
              "c10::optional<torch::Tensor> r = c10::nullopt, bool keep = false) {\n}\n")
    (export,) = build.exported_functions(source)
    assert build.op_schema(export) == "(Tensor x, Tensor? r=None, bool keep=False) -> (Tensor, Tensor)"
    assert str(torch.ops.workbook.linear.default._schema) == (
        "workbook::linear(Tensor x, Tensor w, Tensor bias, Tensor? w_residual=None) -> Tensor")


def _backward_args(name: str, N: int, C: int, G: int) -> list:
    """A backward op's arguments: the output's gradient, then the forward op's (the GEMM: dy, x, w)."""
    if name == "linear_backward":
        x, weight, _ = _args("linear", N, C, G)
        return [torch.randn(N, weight.shape[0]), x, weight, True, True]
    forward = name.removesuffix("_backward")
    args = _args(forward, N, C, G)
    grad = torch.randn(_out_shape(forward, N, C))
    if forward == "group_norm_min_bias":
        args = args[:-1]  # the min's backward needs no bias
    return [grad, *args]


@pytest.mark.parametrize("name", list(ops.BACKWARD))
def test_the_backward_ops_on_the_cpu(name):
    args = _backward_args(name, 6, 64, 4)
    torch.library.opcheck(ops.BACKWARD[name], args, test_utils=("test_schema", "test_faketensor"))
    got = ops.BACKWARD[name](*args)
    assert all(isinstance(t, torch.Tensor) for t in got)


@pytest.mark.parametrize("name", NAMES[1:])
def test_each_tails_backward_op_is_its_autograd_formula(name):
    args = _args(name, 5, 64, 4)
    x = args[0].clone().requires_grad_()
    out = _reference(name)(x, *args[1:])
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(2))
    (want,) = torch.autograd.grad(out, x, grad)
    rest = args[1:-1] if name == "group_norm_min_bias" else args[1:]
    got = ops.BACKWARD[f"{name}_backward"](grad, args[0], *rest)
    assert torch.allclose(got[0], want, atol=1e-5, rtol=1e-5)
    if len(got) > 4 or name == "group_norm_leaky_relu_x2":  # the column sums of dy, for nn.Linear's bias
        assert torch.allclose(got[-1], want.sum(0), atol=1e-5, rtol=1e-5)


def test_the_cuda_implementation_loads_its_kernel_once(monkeypatch):
    # load_kernel hashes the sources to find the build: on every call it would cost more CPU time
    # than the tail takes on the GPU (seen on the H100: 4-5 ms per call instead of 0.4 ms)
    loads = []

    class Kernel:
        def launch(self, x):
            return x

    monkeypatch.setattr(build, "load_kernel", lambda kernel: loads.append(kernel) or Kernel())
    build.launcher.cache_clear()
    try:
        assert build.launcher("k", "launch")(1) == 1 and build.launcher("k", "launch")(2) == 2
    finally:
        build.launcher.cache_clear()
    assert loads == ["k"]


def test_registering_twice_returns_the_same_op():
    again = build.register_op("groupnorm", "swish_bias_group_norm", reference=None, fake=None, backward=None)
    assert again is ops.swish_bias_group_norm


@pytest.mark.parametrize("name", NAMES)
def test_opcheck_on_the_cpu(name):
    # schema (no input mutated), autograd registration, fake tensors, AOT dispatch with dynamic shapes
    torch.library.opcheck(getattr(ops, name), _with_grad(_args(name, 5, 128, 4)))


@pytest.mark.parametrize("name", NAMES)
def test_fake_implementation_on_cuda_fake_tensors(name):
    with FakeTensorMode():
        args = [a.to("cuda") if isinstance(a, torch.Tensor) else a for a in _args(name, 7, 115, 5)]
        out = getattr(ops, name)(*args)
    assert (tuple(out.shape), out.dtype, out.device.type) == (_out_shape(name, 7, 115), torch.float32, "cuda")
    assert out.is_contiguous()


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", NAMES)
def test_autograd_formula_matches_autograd_through_the_reference(name, shape):
    args = _args(name, *shape)
    mine, theirs = _with_grad(args), _with_grad(args)
    out = getattr(ops, name)(*mine)
    ref = _reference(name)(*theirs)
    assert torch.equal(out, ref)  # the CPU implementation is the reference math
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    got = torch.autograd.grad(out, [mine[i] for i in tensors], grad)
    want = torch.autograd.grad(ref, [theirs[i] for i in tensors], grad)
    for i, g, w in zip(tensors, got, want):
        assert torch.allclose(g, w, atol=1e-5, rtol=1e-5), f"argument {i}: max diff {(g - w).abs().max():.1e}"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("name", NAMES)
def test_other_dtypes_get_an_error_naming_float32(name, dtype):
    args = [a.to(dtype) if isinstance(a, torch.Tensor) else a for a in _args(name, 3, 64, 4)]
    with pytest.raises(TypeError, match=f"supports float32 only: x is {dtype}"):
        getattr(ops, name)(*args)


def test_shape_errors_say_what_to_fix():
    x, bias, lo, hi, G, gamma, beta, eps = _args("bias_hardtanh_mish_group_norm", 3, 64, 4)
    with pytest.raises(ValueError, match="C = 64 must be divisible by num_groups = 5"):
        ops.bias_hardtanh_mish_group_norm(x, bias, lo, hi, 5, gamma, beta, eps)
    with pytest.raises(ValueError, match=r"gamma must have shape \(64,\)"):
        ops.bias_hardtanh_mish_group_norm(x, bias, lo, hi, G, gamma[:8], beta, eps)
    x, G, gamma, beta, eps, bias = _args("group_norm_min_bias", 3, 64, 4)
    with pytest.raises(ValueError, match=r"bias must have shape \(1, 64, 1, 1\)"):
        ops.group_norm_min_bias(x, G, gamma, beta, eps, bias.view(64))
    x, weight, bias = _args("linear", 3, 64, 4)
    with pytest.raises(ValueError, match="must be 2-D with the same K"):
        ops.linear(x[:, :63], weight, bias)
    with pytest.raises(ValueError, match=r"bias must have shape \(67,\)"):
        ops.linear(x, weight, bias[:64])


def test_empty_batch_on_the_cpu():
    for name in NAMES:
        out = getattr(ops, name)(*_args(name, 0, 64, 4))
        assert out.shape == _out_shape(name, 0, 64)


# --- on the GPU: the kernels ---------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_opcheck_on_the_gpu(name, cuda):
    torch.library.opcheck(getattr(ops, name), _with_grad(_args(name, 7, 115, 5, cuda)))
    torch.library.opcheck(getattr(ops, name), _with_grad(_args(name, 33, 1024, 32, cuda)))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES + [(1024, 8192, 256)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", NAMES)
def test_the_cuda_implementation_is_the_kernel_and_matches_the_reference(name, shape, cuda):
    args = _args(name, *shape, device=cuda, seed=sum(shape))
    n = getattr(ops, name)(*args).numel()
    torch.full((n,), float("nan"), device=cuda)  # freed at once: an element the kernel never writes stays NaN
    out = getattr(ops, name)(*args)
    ref = _reference(name)(*args)
    assert out.shape == ref.shape and out.is_contiguous()
    assert torch.allclose(out, ref, atol=1e-4, rtol=1e-4), f"max diff {(out - ref).abs().max():.1e}"
    kernel = getattr(build.load_kernel(build.op_kernel(f"workbook::{name}")), name)
    defaults = [None] if name == "linear" else []  # linear's w_residual: none kept
    assert torch.equal(out, kernel(*args, *defaults))  # the op runs the kernel, nothing else


@pytest.mark.gpu
@pytest.mark.parametrize("name", [*NAMES, *ops.BACKWARD, *ops.WHOLE_MODELS])
def test_after_its_first_call_the_cuda_kernel_is_the_launcher_registered_in_cpp(name, cuda):
    op = getattr(torch.ops.workbook, name)
    if "(inactive)" not in torch._C._dispatch_dump(f"workbook::{name}"):  # not called yet in this process
        args = (_backward_args(name, 7, 128, 4) if name in ops.BACKWARD else
                whole_model_args(name, 7, 128, 128, 8) if name in ops.WHOLE_MODELS else _args(name, 7, 128, 4))
        op(*[a.to(cuda) if isinstance(a, torch.Tensor) else a for a in args])
    cuda_kernels = [line for line in torch._C._dispatch_dump(f"workbook::{name}").splitlines()
                    if line.startswith("CUDA")]
    # the active one from the kernel's bindings file (C++, unboxed), the Python stand-in beneath it
    assert cuda_kernels[0].startswith("CUDA: registered at ") and "main.cpp" in cuda_kernels[0], cuda_kernels
    assert "unboxed" in cuda_kernels[0]
    assert cuda_kernels[1].startswith("CUDA (inactive)") and "build.py" in cuda_kernels[1], cuda_kernels


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_gradients_on_the_gpu(name, cuda):
    args = _args(name, 7, 115, 5, cuda)
    mine, theirs = _with_grad(args), _with_grad(args)
    out, ref = getattr(ops, name)(*mine), _reference(name)(*theirs)
    grad = torch.randn(out.shape, device=cuda)
    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    got = torch.autograd.grad(out, [mine[i] for i in tensors], grad)
    want = torch.autograd.grad(ref, [theirs[i] for i in tensors], grad)
    for i, g, w in zip(tensors, got, want):
        assert torch.allclose(g, w, atol=1e-4, rtol=1e-4), f"argument {i}: max diff {(g - w).abs().max():.1e}"


@pytest.mark.gpu
def test_a_half_tensor_on_the_gpu_gets_the_launchers_error(cuda):
    args = [a.half() if isinstance(a, torch.Tensor) else a for a in _args("swish_bias_group_norm", 3, 64, 4, cuda)]
    with pytest.raises(RuntimeError, match="must be float32"):
        ops.swish_bias_group_norm(*args)


# --- workbook::linear: which GEMM runs --------------------------------------------------------------


def _gemm10():
    return build.load_kernel("gemm_10_3xtf32")


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(37, 1027, 515), (64, 1024, 8192), (5, 13, 7), (3, 0, 9)],
                         ids=lambda s: "x".join(map(str, s)))
def test_linear_runs_rung_10_with_the_bias_in_its_epilogue_at_the_default_setting(shape, cuda):
    from utils import precision
    if torch.cuda.get_device_capability(cuda) != (9, 0):
        pytest.skip("rung 10 is sm_90 only; elsewhere the op is cuBLAS's addmm (tested below)")
    M, K, N = shape
    g = torch.Generator(device=cuda).manual_seed(sum(shape))
    x = torch.randn(M, K, device=cuda, generator=g)
    w = torch.randn(N, K, device=cuda, generator=g) / max(K, 1) ** 0.5
    b = torch.randn(N, device=cuda, generator=g)
    with precision.tf32(False):
        out = ops.linear(x, w, b)
        ref = F.linear(x.double(), w.double(), b.double()).float()
        # the epilogue adds the bias to the kernel's sum once, as adding it afterwards does: bitwise equal
        assert torch.equal(out, ops.linear(x, w, torch.zeros_like(b)) + b)
        # the weight's small parts kept by the caller give the same bits as those made on the call
        assert torch.equal(ops.linear(x, w, b, ops.tf32_residual(w)), out)
        assert torch.equal(ops.tf32_residual(w), ops.TF32_RESIDUAL.reference(w.cpu()).to(cuda))  # every bit
        assert torch.allclose(out, ref, atol=1e-4, rtol=1e-4), f"max diff {(out - ref).abs().max():.1e}"
        # a transposed view of x is copied, not misread
        xt = x.t().contiguous().t()
        assert not xt.is_contiguous() or min(M, K) <= 1
        assert torch.equal(ops.linear(xt, w, b), out)


@pytest.mark.gpu
def test_linear_is_cublas_addmm_when_tf32_is_allowed(cuda):
    """Beyond the small-batch schedule's 64 rows of x (tests/test_small_batch.py has those)."""
    from utils import precision
    x, w, b = _args("linear", 65, 1024, 4, cuda)
    with precision.tf32(True):
        assert torch.equal(ops.linear(x, w, b), torch.addmm(b, x, w.t()))


@pytest.mark.gpu
def test_linear_on_the_gpu_names_float32(cuda):
    x, w, b = _args("linear", 3, 64, 4, cuda)
    with pytest.raises(RuntimeError, match="x must be float32"):
        _gemm10().linear(x.half(), w, b, None)
    with pytest.raises(RuntimeError, match=r"bias must have shape \(N,\)"):
        _gemm10().linear(x, w, b[:3], None)


def test_each_declared_op_names_the_harness_tiers_and_its_spec_is_its_declaration():
    """The declaration is the one place: every dtype's tiers are the harness's (utils.check.TIERS), and the
    bad-input matrix's spec of each declared op is its example and its math."""
    assert set(ops.DECLARED) >= {"linear", "linear_backward", "tf32_residual", *NAMES[1:]}
    for name, d in ops.DECLARED.items():
        assert all(tier in TIERS for tiers in d.dtypes.values() for tier in tiers), name
        spec = bi.SPECS[f"{d.kernel}:{d.name}"]
        assert spec.make is d.example and spec.reference is d.math, name
        assert bi.op_launcher(f"workbook::{name}").key == f"{d.kernel}:{d.name}"
