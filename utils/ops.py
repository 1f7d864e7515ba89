"""The workbook's registered operators, in the namespace `workbook`: the whole models that solutions/
call (each one GEMM kernel with the rest of the model in its epilogue), and the GEMM and the fused
tails they fall back on.

    from utils import ops
    y = ops.bias_hardtanh_mish_group_norm(x, bias, -1.0, 1.0, 256, gamma, beta, 1e-5)   # = torch.ops.workbook.…

Each op is one launcher of kernels/ (its schema comes from the launcher's C++ prototype, by
`utils.build.register_op`) with
- a CUDA implementation: the kernel, compiled on its first call;
- a CPU implementation: the reference PyTorch math below, so a module that calls the op moves
  between devices like any nn.Module (the drop-in contract);
- a fake implementation: the output's shape, dtype and device, and the checks that need no
  data, so torch.compile traces through the op without a graph break;
- an autograd formula written with PyTorch's own backward ops. It recomputes the cheap
  element-wise intermediates from the op's input instead of keeping them: the op saves its
  inputs only, as a fused kernel should.

| op | kernel file | problem | computes, for x (N, C), the GEMM's output |
|---|---|---|---|
| linear | gemm_10_3xtf32.cu | all four | x @ w.T + bias (the GEMM itself, x the model's input; see below) |
| bias_hardtanh_mish_group_norm | groupnorm.cu | 94 | group_norm(mish(hardtanh(x + bias))) |
| swish_bias_group_norm | groupnorm.cu | 37 | group_norm(x * sigmoid(x) + bias) |
| group_norm_leaky_relu_x2 | groupnorm.cu | 62 | y = leaky_relu(group_norm(x)); y + y |
| group_norm_min_bias | min_bias_broadcast.cu | 75 | min(group_norm(x), dim=1, keepdim) + bias(1, C, 1, 1): (1, C, N, 1) |

The whole models (WHOLE_MODELS), x the model's input: linear_bias_hardtanh_mish_group_norm (94),
linear_swish_bias_group_norm (37), linear_group_norm_leaky_relu_x2 (62), linear_group_norm_min_bias
(75), each = its tail above applied to linear(x, weight, linear_bias), in one kernel of
fused_gemm_groupnorm.cu where that kernel applies (sm_90, K % 4 == 0, groups of 16, 32 or 64
channels), as linear then the tail otherwise.

`linear` is nn.Linear's forward. At PyTorch's default fp32 setting (IEEE) on an sm_90 GPU it runs
rung 10 of the GEMM ladder, 3xTF32 with promoted accumulation and the bias in its epilogue, which
meets the strict tier at over twice cuBLAS SGEMM's speed (the weight's split is kept between calls
while the weight is unchanged; see gemm_10_3xtf32.cu); with TF32 allowed, or on another GPU,
it runs cuBLAS's addmm, exactly as nn.Linear does. The launcher makes that choice on every call.

Only float32 is supported, on both devices, and every other dtype gets an error that says so:
the kernels are written for float32, and a CPU path that accepted float16 would make a model
that works on the CPU and fails on the GPU.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from utils import build

aten = torch.ops.aten


def _require_float32(op: str, **tensors: Tensor) -> None:
    for name, t in tensors.items():
        if t.dtype != torch.float32:
            raise TypeError(f"workbook::{op} supports float32 only: {name} is {t.dtype} "
                            "(the kernels are float32; convert the module with .float())")


def _check_group_norm(op: str, x: Tensor, num_groups: int, gamma: Tensor, beta: Tensor, **more: Tensor) -> None:
    """What the launchers check about shapes and dtypes, for the paths that run no launcher (CPU, fake)."""
    _require_float32(op, x=x, gamma=gamma, beta=beta, **more)
    if x.dim() != 2:
        raise ValueError(f"workbook::{op}: x must be 2-D (N, C), got shape {tuple(x.shape)}")
    C = x.shape[1]
    if num_groups <= 0 or C % num_groups != 0:
        raise ValueError(f"workbook::{op}: the number of channels C = {C} must be divisible by "
                         f"num_groups = {num_groups}")
    for name, t in (("gamma", gamma), ("beta", beta)):
        if tuple(t.shape) != (C,):
            raise ValueError(f"workbook::{op}: {name} must have shape ({C},), got {tuple(t.shape)}")


def _group_norm_backward(grad: Tensor, x: Tensor, num_groups: int, gamma: Tensor, beta: Tensor,
                         eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """(dx, dgamma, dbeta) of F.group_norm(x, num_groups, gamma, beta, eps) for x (N, C), as autograd computes them."""
    N, C = x.shape
    _, mean, rstd = aten.native_group_norm(x, gamma, beta, N, C, 1, num_groups, eps)
    return aten.native_group_norm_backward(grad.contiguous(), x, mean, rstd, gamma, N, C, 1, num_groups,
                                           [True, True, True])


# --- the GEMM: nn.Linear's forward ----------------------------------------------------------------

def _check_linear(x, weight, bias):
    _require_float32("linear", x=x, weight=weight, bias=bias)
    if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"workbook::linear: x (M, K) and weight (N, K) must be 2-D with the same K, "
                         f"got x {tuple(x.shape)} and weight {tuple(weight.shape)}")
    if tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"workbook::linear: bias must have shape ({weight.shape[0]},), got {tuple(bias.shape)}")


def _linear_reference(x, weight, bias):
    _check_linear(x, weight, bias)
    return F.linear(x, weight, bias)


def _linear_fake(x, weight, bias):
    _check_linear(x, weight, bias)
    return x.new_empty((x.shape[0], weight.shape[0]))


def _linear_cuda(launch, x, weight, bias):
    # gemm_10_3xtf32.cu is built for sm_90 alone (wgmma): on any other GPU, nn.Linear's own GEMM.
    # Tensors on different devices go there too, for PyTorch's own error.
    if x.device != weight.device or torch.cuda.get_device_capability(weight.device) != (9, 0):
        _check_linear(x, weight, bias)
        return aten.addmm(bias, x, weight.t())
    return launch(x, weight, bias)


def _linear_backward(grad, x, weight, bias):
    # PyTorch's matmuls, at whatever precision the caller's fp32 setting allows, as nn.Linear's backward
    return grad @ weight, grad.t() @ x, grad.sum(0)


linear = build.register_op("gemm_10_3xtf32", "linear", reference=_linear_reference, fake=_linear_fake,
                           backward=_linear_backward, cuda=_linear_cuda)


# --- problem 94: + bias -> Hardtanh -> Mish -> GroupNorm ----------------------------------------

def _bias_hardtanh_mish_group_norm_reference(x, bias, min_val, max_val, num_groups, gamma, beta, eps):
    _check_group_norm("bias_hardtanh_mish_group_norm", x, num_groups, gamma, beta, bias=bias)
    return F.group_norm(F.mish(F.hardtanh(x + bias, min_val, max_val)), num_groups, gamma, beta, eps)


def _bias_hardtanh_mish_group_norm_fake(x, bias, min_val, max_val, num_groups, gamma, beta, eps):
    _check_group_norm("bias_hardtanh_mish_group_norm", x, num_groups, gamma, beta, bias=bias)
    return x.new_empty(x.shape)


def _bias_hardtanh_mish_group_norm_backward(grad, x, bias, min_val, max_val, num_groups, gamma, beta, eps):
    z = x + bias
    h = F.hardtanh(z, min_val, max_val)
    m = F.mish(h)
    dm, dgamma, dbeta = _group_norm_backward(grad, m, num_groups, gamma, beta, eps)
    dz = aten.hardtanh_backward(aten.mish_backward(dm, h), z, min_val, max_val)
    return dz, dz.sum(0), dgamma, dbeta


bias_hardtanh_mish_group_norm = build.register_op(
    "groupnorm", "bias_hardtanh_mish_group_norm", reference=_bias_hardtanh_mish_group_norm_reference,
    fake=_bias_hardtanh_mish_group_norm_fake, backward=_bias_hardtanh_mish_group_norm_backward)


# --- problem 37: Swish -> + bias -> GroupNorm ------------------------------------------------------

def _swish_bias_group_norm_reference(x, bias, num_groups, gamma, beta, eps):
    _check_group_norm("swish_bias_group_norm", x, num_groups, gamma, beta, bias=bias)
    return F.group_norm(torch.sigmoid(x) * x + bias, num_groups, gamma, beta, eps)


def _swish_bias_group_norm_fake(x, bias, num_groups, gamma, beta, eps):
    _check_group_norm("swish_bias_group_norm", x, num_groups, gamma, beta, bias=bias)
    return x.new_empty(x.shape)


def _swish_bias_group_norm_backward(grad, x, bias, num_groups, gamma, beta, eps):
    s = torch.sigmoid(x)
    dz, dgamma, dbeta = _group_norm_backward(grad, s * x + bias, num_groups, gamma, beta, eps)
    # d(s·x)/dx = s + x·s·(1 - s): the product rule, as autograd applies it to torch.sigmoid(x) * x
    dx = dz * s + aten.sigmoid_backward(dz * x, s)
    return dx, dz.sum(0), dgamma, dbeta


swish_bias_group_norm = build.register_op(
    "groupnorm", "swish_bias_group_norm", reference=_swish_bias_group_norm_reference,
    fake=_swish_bias_group_norm_fake, backward=_swish_bias_group_norm_backward)


# --- problem 62: GroupNorm -> LeakyReLU -> x + x ---------------------------------------------------

def _group_norm_leaky_relu_x2_reference(x, num_groups, gamma, beta, eps, negative_slope):
    _check_group_norm("group_norm_leaky_relu_x2", x, num_groups, gamma, beta)
    y = F.leaky_relu(F.group_norm(x, num_groups, gamma, beta, eps), negative_slope)
    return y + y


def _group_norm_leaky_relu_x2_fake(x, num_groups, gamma, beta, eps, negative_slope):
    _check_group_norm("group_norm_leaky_relu_x2", x, num_groups, gamma, beta)
    return x.new_empty(x.shape)


def _group_norm_leaky_relu_x2_backward(grad, x, num_groups, gamma, beta, eps, negative_slope):
    n = F.group_norm(x, num_groups, gamma, beta, eps)
    dn = aten.leaky_relu_backward(grad + grad, n, negative_slope, False)  # y + y: each y gets the gradient once
    return _group_norm_backward(dn, x, num_groups, gamma, beta, eps)


group_norm_leaky_relu_x2 = build.register_op(
    "groupnorm", "group_norm_leaky_relu_x2", reference=_group_norm_leaky_relu_x2_reference,
    fake=_group_norm_leaky_relu_x2_fake, backward=_group_norm_leaky_relu_x2_backward)


# --- problem 75: GroupNorm -> min over channels -> + bias(1, C, 1, 1) ------------------------------

def _check_min_bias(x, num_groups, gamma, beta, bias):
    _check_group_norm("group_norm_min_bias", x, num_groups, gamma, beta, bias=bias)
    C = x.shape[1]
    if tuple(bias.shape) != (1, C, 1, 1):
        raise ValueError(f"workbook::group_norm_min_bias: bias must have shape (1, {C}, 1, 1), got {tuple(bias.shape)}")
    if C == 0 and x.shape[0] > 0:
        raise ValueError(f"workbook::group_norm_min_bias: the minimum over dim 1 of x {tuple(x.shape)} is undefined")


def _group_norm_min_bias_reference(x, num_groups, gamma, beta, eps, bias):
    _check_min_bias(x, num_groups, gamma, beta, bias)
    return torch.min(F.group_norm(x, num_groups, gamma, beta, eps), dim=1, keepdim=True)[0] + bias


def _group_norm_min_bias_fake(x, num_groups, gamma, beta, eps, bias):
    _check_min_bias(x, num_groups, gamma, beta, bias)
    N, C = x.shape
    return x.new_empty((1, C, N, 1))  # (N, 1) + (1, C, 1, 1) broadcasts to (1, C, N, 1)


def _group_norm_min_bias_backward(grad, x, num_groups, gamma, beta, eps, bias):
    n = F.group_norm(x, num_groups, gamma, beta, eps)
    index = torch.min(n, dim=1, keepdim=True)[1]
    # out[0, c, i, 0] = rowmin[i] + bias[c]: rowmin[i] collects its row of the gradient over c,
    # bias[c] its column over i; the minimum passes its share to the element it selected.
    drowmin = grad.sum(dim=(0, 1, 3)).unsqueeze(1)
    dn = torch.zeros_like(n).scatter(1, index, drowmin)
    dx, dgamma, dbeta = _group_norm_backward(dn, x, num_groups, gamma, beta, eps)
    return dx, dgamma, dbeta, grad.sum(dim=2, keepdim=True)


group_norm_min_bias = build.register_op(
    "min_bias_broadcast", "group_norm_min_bias", reference=_group_norm_min_bias_reference,
    fake=_group_norm_min_bias_fake, backward=_group_norm_min_bias_backward)


# --- whole models: the GEMM and its tail in one kernel --------------------------------------------
#
# kernels/fused_gemm_groupnorm.cu runs x @ w.T on the tensor cores with the tail in the GEMM's
# epilogue: the GEMM's output never goes to memory. Its tier follows PyTorch's fp32 matmul setting
# like `linear`: 3xTF32 (strict) by default, rung 9's 1xTF32 with TF32 allowed. Where the kernel
# does not apply (not an sm_90 GPU, K % 4 != 0, a group width it has no instance for), the op runs
# `linear` and the tail above instead: the same result, two kernels.

FUSED_GROUP_WIDTHS = (16, 32, 64)  # fused_gemm_groupnorm.cu's kGroupWidths (tests/test_fused_models.py compares)


def _fusable(x: Tensor, weight: Tensor, num_groups: int) -> bool:
    """Whether the fused kernel takes these inputs (the launcher checks the same and says which failed)."""
    if x.dim() != 2 or weight.dim() != 2 or x.device != weight.device or x.shape[1] != weight.shape[1]:
        return False
    C, K = weight.shape
    return (K > 0 and K % 4 == 0 and num_groups > 0 and C % num_groups == 0
            and C // num_groups in FUSED_GROUP_WIDTHS and torch.cuda.get_device_capability(weight.device) == (9, 0))


def _whole_model(name: str, tail, num_groups_of):
    """Registers workbook::<name> = tail(linear(x, weight, linear_bias), *rest): the op of
    fused_gemm_groupnorm.cu, with its CPU reference, fake, backward and unfused fallback composed
    from `linear`'s and the tail's. num_groups_of(rest): the tail's num_groups."""
    tail_op, tail_reference, tail_fake, tail_backward = (
        globals()[f"{prefix}{tail}{suffix}"] for prefix, suffix in (("", ""), ("_", "_reference"), ("_", "_fake"),
                                                                    ("_", "_backward")))

    def reference(x, weight, linear_bias, *rest):
        return tail_reference(_linear_reference(x, weight, linear_bias), *rest)

    def fake(x, weight, linear_bias, *rest):
        return tail_fake(_linear_fake(x, weight, linear_bias), *rest)

    def backward(grad, x, weight, linear_bias, *rest):
        # the GEMM's output is not kept (it never existed): recomputed with PyTorch's own GEMM
        y = F.linear(x, weight, linear_bias)
        dy, *d_rest = tail_backward(grad, y, *rest)
        return (*_linear_backward(dy, x, weight, linear_bias), *d_rest)

    def cuda(launch, x, weight, linear_bias, *rest):
        # (dtypes and shapes: the launcher's checks, or the fallback ops')
        if _fusable(x, weight, num_groups_of(rest)):
            return launch(x, weight, linear_bias, *rest)
        return tail_op(linear(x, weight, linear_bias), *rest)

    return build.register_op("fused_gemm_groupnorm", name, reference=reference, fake=fake, backward=backward,
                             cuda=cuda)


linear_bias_hardtanh_mish_group_norm = _whole_model(  # problem 94
    "linear_bias_hardtanh_mish_group_norm", "bias_hardtanh_mish_group_norm",
    lambda r: r[3])
linear_swish_bias_group_norm = _whole_model(  # problem 37
    "linear_swish_bias_group_norm", "swish_bias_group_norm",
    lambda r: r[1])
linear_group_norm_leaky_relu_x2 = _whole_model(  # problem 62
    "linear_group_norm_leaky_relu_x2", "group_norm_leaky_relu_x2",
    lambda r: r[0])
linear_group_norm_min_bias = _whole_model(  # problem 75
    "linear_group_norm_min_bias", "group_norm_min_bias",
    lambda r: r[0])

# name -> op, in the order above (the GEMM, then the tails of 94, 37, 62, 75)
ALL = {name: getattr(torch.ops.workbook, name) for name in (
    "linear", "bias_hardtanh_mish_group_norm", "swish_bias_group_norm", "group_norm_leaky_relu_x2", "group_norm_min_bias")}
# the whole models, 94, 37, 62, 75
WHOLE_MODELS = {name: getattr(torch.ops.workbook, name) for name in (
    "linear_bias_hardtanh_mish_group_norm", "linear_swish_bias_group_norm", "linear_group_norm_leaky_relu_x2",
    "linear_group_norm_min_bias")}
