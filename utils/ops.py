"""The workbook's registered operators, in the namespace `workbook`: the whole models that solutions/
call (each one GEMM kernel with the rest of the model in its epilogue), the GEMM and the fused tails
they fall back on, and the backward of each.
(Over 600 lines on purpose: each op's declaration, checks, math and backward sit beside the ops it
falls back on and calls in its backward, which a split would send into modules importing each other.)

    from utils import ops
    y = ops.bias_hardtanh_mish_group_norm(x, bias, -1.0, 1.0, 256, gamma, beta, 1e-5)   # = torch.ops.workbook.…
    out = ops.linear_bias_hardtanh_mish_group_norm(x, w, lb, bias, -1.0, 1.0, 256, gamma, beta, 1e-5)

Each op is one launcher of kernels/ (its schema comes from the launcher's C++ prototype, by
`utils.build.register_op`) with
- a CUDA implementation: the launcher itself, registered in C++ so that a call reaches it without
  passing through Python (the kernel file is compiled on the op's first CUDA call; build.register_op);
  whatever the CUDA path must choose, the launcher chooses, in C++. On a GPU a kernel file is not
  built for (gemm_10_3xtf32.cu and fused_gemm_groupnorm.cu are sm_90a's), the reference math in
  Python instead: F.linear (cuBLAS's addmm) for linear, linear then the tail's op for a whole model;
- a CPU implementation: the reference PyTorch math below, so a module that calls the op moves
  between devices like any nn.Module (the drop-in contract);
- a fake implementation: the output's shape, dtype and device, and the checks that need no
  data, so torch.compile traces through the op without a graph break;
- an autograd formula whose every step on the GPU is a kernel of its own op (listed below), so that
  a training step runs on the same engine as the forward and torch.compile traces its backward too.

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
fused_gemm_groupnorm.cu where that kernel applies (the launcher's own `fusable`: sm_90, K % 4 == 0,
groups of 16, 32 or 64 channels), as the ops linear then the tail otherwise (the launcher calls them
through PyTorch's dispatcher). Their ops return two tensors,
(out, saved): `saved` is the GEMM's output, kept when the call asks for it (save_gemm_output: the
functions of this module ask when autograd will need it) and empty otherwise. Training then runs:

    forward   the whole model, which also stores the GEMM's output (4 bytes per element more)
    backward  <tail>_backward (tail_backward.cu): dy and the tail's parameter gradients from the kept
              output, one pass; linear_backward (gemm_10_3xtf32.cu): dx = dy @ w, dw = dy.T @ x on
              the same GEMM kernel as the forward, at the same tier

Recomputing the GEMM instead of keeping its output (what this module's backward did first) would
cost a 137-GFLOP GEMM per step to save a 32 MB tensor at the problems' shapes.

`linear` is nn.Linear's forward. At PyTorch's default fp32 setting (IEEE) on an sm_90 GPU it runs
rung 10 of the GEMM ladder, 3xTF32 with promoted accumulation and the bias in its epilogue, which
meets the strict tier at over twice cuBLAS SGEMM's speed; with TF32 allowed, or on another GPU, it
runs cuBLAS's addmm, exactly as nn.Linear does. The launcher makes that choice on every call. The
3xTF32 operands are prepared on every call, the weight's too (kernels/common/tf32_operands.cuh):
nothing derived from a weight is kept between calls unless the caller keeps it on purpose and
hands it back as `weight_residual` (a drop-in's freeze(): utils/freezing.py).

The GEMM and the tails take float32 only, on both devices, and every other dtype gets an error that
says so: their kernels are written for float32, and a CPU path that accepted float16 would make a
model that works on the CPU and fails on the GPU. The tails' backward ops of 94, 37 and 62 also take
grad and y in bfloat16 or float16 with the parameters float32 (a model's backward in that dtype: dy in
their dtype, the column sums float32). The whole models also take a model wholly in
bfloat16 or float16 (fused_gemm_groupnorm.cu's 16-bit kernels, the epilogue in float32, the output
rounded once; the backward the tail's backward on the 16-bit tensors and 16-bit GEMMs:
WholeModel._backward16), and x and
w in one of those with the parameters in float32, which is how the autocast kernels at the end call
them (the output then float32, as the reference's under CUDA autocast). A whole model in float64 (its
input and nn.Linear's weight) runs the reference math instead, on either device (WholeModel.__call__),
as Model would.
"""
from __future__ import annotations

import inspect
from functools import partial
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from utils import build
from utils.op_declaration import (DECLARED, EXAMPLE, FLOAT32, HALF16, WHOLE_MODEL_DTYPES, Declaration,
                                  example_gamma_beta, example_nn_linear, example_tail_input)

aten = torch.ops.aten


# What the ops call the module's parameters (the rest are inputs, or activations made from the input)
_PARAMETERS = {"w", "weight", "bias", "linear_bias", "channel_bias", "gamma", "beta", "w_residual"}


def _dtype_fix(names: list[str], accepted=FLOAT32) -> str:
    """What to convert, for tensors of the wrong dtype by their names: the input (x.float()), the module's
    parameters (model.float()), or both; accepted: the op's dtypes."""
    fixes = []
    if inputs := [n for n in names if n not in _PARAMETERS]:
        fixes.append(f"convert the input: {inputs[0]}.float()")
    if params := [n for n in names if n in _PARAMETERS]:
        fixes.append(f"convert the module: model.float() (its {', '.join(params)})")
    return " and ".join(fixes) + ("; the kernels are float32" if list(accepted) == [torch.float32] else "")


def _dtype_names(dtypes) -> str:
    """'float32', 'float32 and float64', 'float32, bfloat16 and float16'."""
    names = [str(d).removeprefix("torch.") for d in dtypes]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _require(op: str, dtypes=None, one_dtype: bool = True, **tensors: Tensor) -> None:
    """Tensors of the op's declared dtypes (None: an optional one left out), all of one dtype (unless
    not one_dtype), on one device, as the launchers require: the fake implementation refuses what the
    CUDA kernel would, and the CPU path what the kernel would not give. Arguments by the launcher's
    names, the first one's dtype and device the reference; dtypes: what the op takes, where it is not a
    declaration's (a whole model's: WHOLE_MODEL_DTYPES)."""
    given = [(name, t) for name, t in tensors.items() if t is not None]
    accepted = dtypes or (DECLARED[op].dtypes if op in DECLARED else FLOAT32)
    if wrong := [(name, t) for name, t in given if t.dtype not in accepted]:
        raise TypeError(f"workbook::{op} supports {_dtype_names(accepted)} only: "
                        + ", ".join(f"{name} is {t.dtype}" for name, t in wrong) + "; "
                        + _dtype_fix([n for n, _ in wrong], accepted))
    first, there = given[0]
    if one_dtype and (others := [(name, t) for name, t in given[1:] if t.dtype != there.dtype]):
        raise TypeError(f"workbook::{op}: every tensor must have {first}'s dtype {there.dtype}, got "
                        + ", ".join(f"{name} {t.dtype}" for name, t in others)
                        + f"; the model and its input in one dtype: model.to({there.dtype}), or convert the input")
    for name, t in given[1:]:
        if t.device != there.device:
            raise RuntimeError(f"workbook::{op}: {name} is on {t.device} and {first} on {there.device}: "
                               "every tensor must be on the same device")


def _check_group_norm(op: str, x: Tensor, num_groups: int, gamma: Tensor, beta: Tensor, *, x_name: str = "x",
                      channel_bias: Tensor | None = None, **more: Tensor) -> None:
    """What the launchers check about shapes, dtypes and devices, for the paths that run no launcher
    (CPU, fake). x_name: what the op's schema calls x (the backward ops: y); channel_bias: the (C,)
    bias added before GroupNorm (94, 37); more: other tensors, checked for dtype and device."""
    _require(op, **{x_name: x, "gamma": gamma, "beta": beta, "bias": channel_bias, **more})
    _check_group_norm_shapes(op, x, num_groups, gamma, beta, x_name, channel_bias)


def _check_group_norm_shapes(op: str, x: Tensor, num_groups: int, gamma: Tensor, beta: Tensor, x_name: str,
                             channel_bias: Tensor | None) -> None:
    """_check_group_norm's checks of the shapes alone (common/groupnorm.cuh's check_group_norm_shapes)."""
    if x.dim() != 2:
        raise ValueError(f"workbook::{op}: {x_name} must be 2-D (N, C), got shape {tuple(x.shape)}")
    C = x.shape[1]
    if num_groups <= 0 or C % num_groups != 0:
        raise ValueError(f"workbook::{op}: the number of channels C = {C} must be divisible by "
                         f"num_groups = {num_groups} ({x_name} has shape {tuple(x.shape)})")
    for name, t in (("gamma", gamma), ("beta", beta), ("bias", channel_bias)):
        if t is not None and tuple(t.shape) != (C,):
            raise ValueError(f"workbook::{op}: {name} must have shape ({C},), got {tuple(t.shape)}")


def _check_tail_backward(op: str, grad: Tensor, y: Tensor, num_groups: int, gamma: Tensor, beta: Tensor,
                         bias: Tensor | None = None) -> None:
    """A tail's backward op (tail_backward.cu's launchers): y, the tail's arguments and the output's
    gradient grad, which has y's shape ((N, C) in, (N, C) out). Where the op takes bf16 and fp16 (94, 37,
    62: a model in that dtype), grad and y may be in one of them, the parameters float32."""
    if y.dtype in HALF16:
        _require(op, one_dtype=False, y=y, grad=grad, gamma=gamma, beta=beta, bias=bias)  # dtypes taken, one device
        _require(op, y=y, grad=grad)
        _require(op, FLOAT32, gamma=gamma, beta=beta, bias=bias)
        _check_group_norm_shapes(op, y, num_groups, gamma, beta, "y", bias)
    else:
        _check_group_norm(op, y, num_groups, gamma, beta, x_name="y", channel_bias=bias, grad=grad)
    if grad.shape != y.shape:
        raise ValueError(f"workbook::{op}: grad must have y's shape {tuple(y.shape)}, got {tuple(grad.shape)}")


def _in_float32(math: Callable) -> Callable:
    """A tail backward's math where grad and y may be bf16 or fp16 (94, 37, 62): on their values converted to
    float32 (exactly), dy rounded once to y's dtype and the column sums float32, as tail_backward.cu computes."""
    def run(grad, y, *rest):
        if y.dtype == torch.float32:
            return math(grad, y, *rest)
        dy, *sums = math(grad.float(), y.float(), *rest)
        return (dy.to(y.dtype), *sums)
    return run


def _tail_backward_dtypes(grad, y, *_rest, sums: int) -> list[torch.dtype]:
    """The outputs' dtypes of a tail backward that takes 16-bit grad and y: dy y's, the column sums float32."""
    return [y.dtype] + [torch.float32] * sums


def _group_norm_backward(grad: Tensor, x: Tensor, num_groups: int, gamma: Tensor, beta: Tensor,
                         eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """(dx, dgamma, dbeta) of F.group_norm(x, num_groups, gamma, beta, eps) for x (N, C), as autograd computes them."""
    N, C = x.shape
    _, mean, rstd = aten.native_group_norm(x, gamma, beta, N, C, 1, num_groups, eps)
    return aten.native_group_norm_backward(grad.contiguous(), x, mean, rstd, gamma, N, C, 1, num_groups,
                                           [True, True, True])


def _empty(like: Tensor) -> Tensor:
    return like.new_empty((0,))


# --- the GEMM: nn.Linear's forward and backward ------------------------------------------------------

def _check_linear(x, weight, bias, weight_residual=None, op="linear", bias_name="bias"):
    """The checks of linear's launcher, named as the op's schema names its arguments (x, w, bias,
    w_residual; a whole model's linear bias is linear_bias)."""
    _require(op, x=x, w=weight, **{bias_name: bias}, w_residual=weight_residual)
    if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"workbook::{op}: x (M, K) and w (N, K) must be 2-D with the same K, "
                         f"got x {tuple(x.shape)} and w {tuple(weight.shape)}")
    if tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"workbook::{op}: {bias_name} must have shape ({weight.shape[0]},), got {tuple(bias.shape)}")
    if weight_residual is not None and weight_residual.shape != weight.shape:
        raise ValueError(f"workbook::{op}: w_residual must have w's shape {tuple(weight.shape)}, "
                         f"got {tuple(weight_residual.shape)}")


def _linear_backward(bw, x, weight, bias, w_residual):
    dx, dw = linear_backward(bw.grad, x, weight, bw.needs[0], bw.needs[1])
    return (dx if bw.needs[0] else None, dw if bw.needs[1] else None,
            bw.grad.sum(0) if bw.needs[2] else None, None)


def _example_linear(n, g):
    """x (n, K), nn.Linear's weight and bias, and the weight's small parts, as a frozen drop-in keeps them."""
    x = torch.randn(n, EXAMPLE["K"], generator=g)
    w, bias = example_nn_linear(g, EXAMPLE["N"])
    return [x, w, bias, _tf32_residual_math(w)]


LINEAR = Declaration(
    "gemm_10_3xtf32", "linear", check=_check_linear,
    math=lambda x, weight, bias, w_residual=None: F.linear(x, weight, bias),  # the residual is the GPU's business
    outputs=lambda x, weight, *_: (x.shape[0], weight.shape[0]), example=_example_linear)


def _check_linear_backward(dy, x, weight, need_dx, need_dw):
    _require("linear_backward", dy=dy, x=x, w=weight)
    if not (dy.dim() == x.dim() == weight.dim() == 2 and dy.shape == (x.shape[0], weight.shape[0])
            and x.shape[1] == weight.shape[1]):
        raise ValueError(f"workbook::linear_backward: dy (M, N), x (M, K) and w (N, K) must agree, got "
                         f"dy {tuple(dy.shape)}, x {tuple(x.shape)} and w {tuple(weight.shape)}")


# (dx, dw) of linear: dx = dy @ weight, dw = dy.T @ x, each empty when not needed
LINEAR_BACKWARD = Declaration(
    "gemm_10_3xtf32", "linear_backward", check=_check_linear_backward,
    math=lambda dy, x, weight, need_dx, need_dw: (dy @ weight if need_dx else _empty(dy),
                                                  dy.t() @ x if need_dw else _empty(dy)),
    outputs=lambda dy, x, weight, need_dx, need_dw: [x.shape if need_dx else (0,), weight.shape if need_dw else (0,)],
    # (a TF32 value in w[0], its small part the stand-in, meets dy[0, 0] = inf in the inf rows)
    example=lambda n, g: [torch.randn(n, EXAMPLE["N"], generator=g), torch.randn(n, EXAMPLE["K"], generator=g),
                          example_nn_linear(g, EXAMPLE["N"])[0], True, True])


def _check_tf32_residual(w):
    _require("tf32_residual", w=w)
    if w.dim() != 2:
        raise ValueError(f"workbook::tf32_residual: w must be 2-D (N, K), got shape {tuple(w.shape)}")


def _tf32_residual_math(w):
    """w's small parts, bit for bit as the kernel makes them (common/tensor_core.cuh's tf32_residual):
    rna(w - trunc(w)) where that is not 0; ±2^-126 with w's sign where it is 0 but w is not (an exact
    TF32 value, ±inf, NaN); 0 where w is ±0."""
    big = (w.view(torch.int32) & -8192).view(torch.float32)  # the 19 bits the tensor cores read
    rest = (w - big).view(torch.int32)
    small = ((rest + 4096) & -8192).view(torch.float32)  # to the nearest TF32, ties away from zero
    small = torch.where(torch.isfinite(w), small, torch.zeros_like(w))
    tiny = torch.copysign(torch.full_like(w, torch.finfo(torch.float32).tiny), w)  # 2^-126, w's sign
    return torch.where((small == 0) & (w != 0), tiny, small)


# the small parts of a weight's 3xTF32 split, for a caller that keeps them (a drop-in's freeze())
TF32_RESIDUAL = Declaration(
    "gemm_10_3xtf32", "tf32_residual", check=_check_tf32_residual, math=_tf32_residual_math,
    outputs=lambda w: w.shape, example=lambda n, g: [torch.randn(n, EXAMPLE["K"], generator=g)])

linear = LINEAR.register(backward=_linear_backward)
linear_backward = LINEAR_BACKWARD.register()
tf32_residual = TF32_RESIDUAL.register()


# --- the tails, and their backward ----------------------------------------------------------------
#
# Each tail op's backward is an op of kernels/tail_backward.cu: from the tail's input y (the GEMM's
# output) and the output's gradient, dy and the parameters' gradients in one pass over y. Its CPU
# implementation is the autograd math below, written with PyTorch's own backward ops.

def _tail_examples(name: str, shape_of_grad=None, backward_args=lambda rest: rest):
    """(the tail's example, its backward's): x (n, C), the tail's arguments (utils/ops.py's order); the
    backward's grad of the output's shape (shape_of_grad(n, C), default x's), then y and backward_args."""
    C, G, EPS = EXAMPLE["C"], EXAMPLE["G"], EXAMPLE["EPS"]

    def tail(n, g):
        x, (gamma, beta), bias = example_tail_input(n, g), example_gamma_beta(g), 0.5 * torch.randn(C, generator=g)
        return {"bias_hardtanh_mish_group_norm": [x, bias, -1.0, 1.0, G, gamma, beta, EPS],
                "swish_bias_group_norm": [x, bias, G, gamma, beta, EPS],
                "group_norm_leaky_relu_x2": [x, G, gamma, beta, EPS, EXAMPLE["SLOPE"]],
                "group_norm_min_bias": [x, G, gamma, beta, EPS, bias.view(1, C, 1, 1)]}[name]

    def backward(n, g):
        x, *rest = tail(n, g)
        grad = torch.randn(*(shape_of_grad(n, C) if shape_of_grad else (n, C)), generator=g)
        return [grad, x, *backward_args(rest)]
    return tail, backward


def _register_tail(tail: Declaration, backward: Declaration, gradients: int, backward_args=lambda rest: rest):
    """Registers workbook::<name>_backward (tail_backward.cu: it returns dx, then the gradients of the
    tail's other tensors, then dx summed over rows for some) and workbook::<name> (kernels/<kernel>.cu),
    whose autograd formula is the first `gradients` outputs of its backward op, one per tensor
    argument; backward_args(the tail's arguments after x): what the backward op takes after (grad, x).
    Returns (the op, its backward op)."""
    backward_op = backward.register()

    def formula(bw, x, *rest):
        return backward_op(bw.grad, x, *backward_args(rest))[:gradients]

    return tail.register(backward=formula), backward_op


# --- problem 94: + bias -> Hardtanh -> Mish -> GroupNorm ----------------------------------------

def _bias_hardtanh_mish_group_norm_math(x, bias, min_val, max_val, num_groups, gamma, beta, eps):
    return F.group_norm(F.mish(F.hardtanh(x + bias, min_val, max_val)), num_groups, gamma, beta, eps)


def _bias_hardtanh_mish_group_norm_backward_math(grad, x, bias, min_val, max_val, num_groups, gamma, beta, eps):
    """(dx, dbias, dgamma, dbeta)."""
    z = x + bias
    h = F.hardtanh(z, min_val, max_val)
    dm, dgamma, dbeta = _group_norm_backward(grad, F.mish(h), num_groups, gamma, beta, eps)
    dz = aten.hardtanh_backward(aten.mish_backward(dm, h), z, min_val, max_val)
    return dz, dz.sum(0), dgamma, dbeta


_94_EXAMPLE, _94_BACKWARD_EXAMPLE = _tail_examples("bias_hardtanh_mish_group_norm")
BIAS_HARDTANH_MISH_GROUP_NORM = Declaration(
    "groupnorm", "bias_hardtanh_mish_group_norm",
    check=lambda x, bias, min_val, max_val, num_groups, gamma, beta, eps: _check_group_norm(
        "bias_hardtanh_mish_group_norm", x, num_groups, gamma, beta, channel_bias=bias),
    math=_bias_hardtanh_mish_group_norm_math, outputs=lambda x, *_: x.shape, example=_94_EXAMPLE)
BIAS_HARDTANH_MISH_GROUP_NORM_BACKWARD = Declaration(
    "tail_backward", "bias_hardtanh_mish_group_norm_backward",
    check=lambda grad, x, bias, min_val, max_val, num_groups, gamma, beta, eps: _check_tail_backward(
        "bias_hardtanh_mish_group_norm_backward", grad, x, num_groups, gamma, beta, bias),
    math=_in_float32(_bias_hardtanh_mish_group_norm_backward_math),
    outputs=lambda grad, x, *_: [x.shape, *[(x.shape[1],)] * 3],  # dx; dbias, dgamma, dbeta (C each)
    example=_94_BACKWARD_EXAMPLE, dtypes=WHOLE_MODEL_DTYPES, output_dtypes=partial(_tail_backward_dtypes, sums=3))
bias_hardtanh_mish_group_norm, bias_hardtanh_mish_group_norm_backward = _register_tail(
    BIAS_HARDTANH_MISH_GROUP_NORM, BIAS_HARDTANH_MISH_GROUP_NORM_BACKWARD, gradients=4)


# --- problem 37: Swish -> + bias -> GroupNorm ------------------------------------------------------

def _swish_bias_group_norm_math(x, bias, num_groups, gamma, beta, eps):
    return F.group_norm(torch.sigmoid(x) * x + bias, num_groups, gamma, beta, eps)


def _swish_bias_group_norm_backward_math(grad, x, bias, num_groups, gamma, beta, eps):
    """(dx, dbias, dgamma, dbeta, dx summed over rows)."""
    s = torch.sigmoid(x)
    dz, dgamma, dbeta = _group_norm_backward(grad, s * x + bias, num_groups, gamma, beta, eps)
    # d(s·x)/dx = s + x·s·(1 - s): the product rule, as autograd applies it to torch.sigmoid(x) * x
    dx = dz * s + aten.sigmoid_backward(dz * x, s)
    return dx, dz.sum(0), dgamma, dbeta, dx.sum(0)


_37_EXAMPLE, _37_BACKWARD_EXAMPLE = _tail_examples("swish_bias_group_norm")
SWISH_BIAS_GROUP_NORM = Declaration(
    "groupnorm", "swish_bias_group_norm",
    check=lambda x, bias, num_groups, gamma, beta, eps: _check_group_norm(
        "swish_bias_group_norm", x, num_groups, gamma, beta, channel_bias=bias),
    math=_swish_bias_group_norm_math, outputs=lambda x, *_: x.shape, example=_37_EXAMPLE)
SWISH_BIAS_GROUP_NORM_BACKWARD = Declaration(
    "tail_backward", "swish_bias_group_norm_backward",
    check=lambda grad, x, bias, num_groups, gamma, beta, eps: _check_tail_backward(
        "swish_bias_group_norm_backward", grad, x, num_groups, gamma, beta, bias),
    math=_in_float32(_swish_bias_group_norm_backward_math),
    outputs=lambda grad, x, *_: [x.shape, *[(x.shape[1],)] * 4],  # dx; dbias, dgamma, dbeta, dx's row sum (C each)
    example=_37_BACKWARD_EXAMPLE, dtypes=WHOLE_MODEL_DTYPES, output_dtypes=partial(_tail_backward_dtypes, sums=4))
swish_bias_group_norm, swish_bias_group_norm_backward = _register_tail(
    SWISH_BIAS_GROUP_NORM, SWISH_BIAS_GROUP_NORM_BACKWARD, gradients=4)


# --- problem 62: GroupNorm -> LeakyReLU -> x + x ---------------------------------------------------

def _group_norm_leaky_relu_x2_math(x, num_groups, gamma, beta, eps, negative_slope):
    y = F.leaky_relu(F.group_norm(x, num_groups, gamma, beta, eps), negative_slope)
    return y + y


def _group_norm_leaky_relu_x2_backward_math(grad, x, num_groups, gamma, beta, eps, negative_slope):
    """(dx, dgamma, dbeta, dx summed over rows)."""
    n = F.group_norm(x, num_groups, gamma, beta, eps)
    dn = aten.leaky_relu_backward(grad + grad, n, negative_slope, False)  # y + y: each y gets the gradient once
    dx, dgamma, dbeta = _group_norm_backward(dn, x, num_groups, gamma, beta, eps)
    return dx, dgamma, dbeta, dx.sum(0)


_62_EXAMPLE, _62_BACKWARD_EXAMPLE = _tail_examples("group_norm_leaky_relu_x2")
GROUP_NORM_LEAKY_RELU_X2 = Declaration(
    "groupnorm", "group_norm_leaky_relu_x2",
    check=lambda x, num_groups, gamma, beta, eps, negative_slope: _check_group_norm(
        "group_norm_leaky_relu_x2", x, num_groups, gamma, beta),
    math=_group_norm_leaky_relu_x2_math, outputs=lambda x, *_: x.shape, example=_62_EXAMPLE)
GROUP_NORM_LEAKY_RELU_X2_BACKWARD = Declaration(
    "tail_backward", "group_norm_leaky_relu_x2_backward",
    check=lambda grad, x, num_groups, gamma, beta, eps, negative_slope: _check_tail_backward(
        "group_norm_leaky_relu_x2_backward", grad, x, num_groups, gamma, beta),
    math=_in_float32(_group_norm_leaky_relu_x2_backward_math),
    outputs=lambda grad, x, *_: [x.shape, *[(x.shape[1],)] * 3],  # dx; dgamma, dbeta, dx's row sum (C each)
    example=_62_BACKWARD_EXAMPLE, dtypes=WHOLE_MODEL_DTYPES, output_dtypes=partial(_tail_backward_dtypes, sums=3))
group_norm_leaky_relu_x2, group_norm_leaky_relu_x2_backward = _register_tail(
    GROUP_NORM_LEAKY_RELU_X2, GROUP_NORM_LEAKY_RELU_X2_BACKWARD, gradients=3)


# --- problem 75: GroupNorm -> min over channels -> + bias(1, C, 1, 1) ------------------------------

def _check_min_bias(x, num_groups, gamma, beta, eps, bias, op="group_norm_min_bias"):
    _check_group_norm(op, x, num_groups, gamma, beta, bias=bias)
    C = x.shape[1]
    if tuple(bias.shape) != (1, C, 1, 1):
        raise ValueError(f"workbook::{op}: bias must have shape (1, {C}, 1, 1), got {tuple(bias.shape)}")
    if C == 0 and x.shape[0] > 0:
        raise ValueError(f"workbook::{op}: the minimum over dim 1 of x {tuple(x.shape)} is undefined")


def _group_norm_min_bias_math(x, num_groups, gamma, beta, eps, bias):
    return torch.min(F.group_norm(x, num_groups, gamma, beta, eps), dim=1, keepdim=True)[0] + bias


def _check_min_bias_backward(grad, x, num_groups, gamma, beta, eps):
    _check_group_norm("group_norm_min_bias_backward", x, num_groups, gamma, beta, x_name="y", grad=grad)
    N, C = x.shape
    if tuple(grad.shape) != (1, C, N, 1):
        raise ValueError(f"workbook::group_norm_min_bias_backward: grad must have shape (1, {C}, {N}, 1), "
                         f"got {tuple(grad.shape)}")


def _group_norm_min_bias_backward_math(grad, x, num_groups, gamma, beta, eps):
    """(dx, dgamma, dbeta, dbias, dx summed over rows)."""
    n = F.group_norm(x, num_groups, gamma, beta, eps)
    index = torch.min(n, dim=1, keepdim=True)[1]
    # out[0, c, i, 0] = rowmin[i] + bias[c]: rowmin[i] collects its row of the gradient over c,
    # bias[c] its column over i; the minimum passes its share to the element it selected.
    drowmin = grad.sum(dim=(0, 1, 3)).unsqueeze(1)
    dn = torch.zeros_like(n).scatter(1, index, drowmin)
    dx, dgamma, dbeta = _group_norm_backward(dn, x, num_groups, gamma, beta, eps)
    return dx, dgamma, dbeta, grad.sum(dim=2, keepdim=True), dx.sum(0)


_75_EXAMPLE, _75_BACKWARD_EXAMPLE = _tail_examples(
    "group_norm_min_bias", shape_of_grad=lambda n, C: (1, C, n, 1), backward_args=lambda rest: rest[:-1])
GROUP_NORM_MIN_BIAS = Declaration(
    "min_bias_broadcast", "group_norm_min_bias", check=_check_min_bias, math=_group_norm_min_bias_math,
    outputs=lambda x, *_: (1, x.shape[1], x.shape[0], 1),  # (N, 1) + (1, C, 1, 1) broadcasts to (1, C, N, 1)
    example=_75_EXAMPLE)
GROUP_NORM_MIN_BIAS_BACKWARD = Declaration(
    "tail_backward", "group_norm_min_bias_backward", check=_check_min_bias_backward,
    math=_group_norm_min_bias_backward_math,
    outputs=lambda grad, x, *_: [x.shape, (x.shape[1],), (x.shape[1],), (1, x.shape[1], 1, 1), (x.shape[1],)],
    example=_75_BACKWARD_EXAMPLE)
group_norm_min_bias, group_norm_min_bias_backward = _register_tail(
    GROUP_NORM_MIN_BIAS, GROUP_NORM_MIN_BIAS_BACKWARD, gradients=4,
    backward_args=lambda rest: rest[:-1])  # the minimum's backward needs no bias


# --- whole models: the GEMM and its tail in one kernel --------------------------------------------
#
# kernels/fused_gemm_groupnorm.cu runs x @ w.T on the tensor cores with the tail in the GEMM's
# epilogue: the GEMM's output goes to memory only when the backward will need it. Its tier follows
# PyTorch's fp32 matmul setting like `linear`: 3xTF32 (strict) by default, rung 9's 1xTF32 with TF32
# allowed. Where the kernel does not apply (the launcher's `fusable` says no: not an sm_90 GPU,
# K % 4 != 0, a group width it has no instance for), at up to 64 rows of x (where the time is one
# read of the weight, which `linear`'s small-batch schedule makes and the fused kernel's 128-row tiles
# would not) and at 65-256 rows on the strict tier (where the fused kernel measured no faster:
# kernels/common/gemm_dispatch.cuh, fused_gemm_groupnorm.cu's fused_here), the launcher
# runs the ops `linear` and the tail above instead, through the dispatcher: the same result, two kernels.

FUSED = "fused_gemm_groupnorm"  # the kernel file of the whole models


def _mixed(x: Tensor, weight: Tensor) -> bool:
    """16-bit x with a float32 w: what the autocast kernels below hand a whole model's op at inference, the
    weight left the float32 parameter it is (the launcher picks the GEMM: common/gemm_dispatch.cuh)."""
    return x.dtype in HALF16 and weight.dtype == torch.float32


class WholeModel:
    """One whole-model op: its tail (a tail op above), and how the tail's backward maps onto the
    op's arguments. Calling it runs the op and returns the model's output."""

    def __init__(self, tail: Declaration, tail_op, tail_backward, num_groups_at: int, gradients,
                 backward_args=lambda rest: rest):
        """tail: the tail's declaration (the model is linear_<its name>, a launcher of fused_gemm_groupnorm.cu),
        tail_op and tail_backward its ops; num_groups_at: where num_groups sits among the tail's arguments;
        gradients(tail_backward's outputs) -> (dy, the gradients of the tail's tensor arguments in their
        order, the linear bias's gradient); backward_args(the tail's arguments): what tail_backward takes
        after (grad, y)."""
        self.name, self.tail, self.tail_math, self.num_groups_at = f"linear_{tail.name}", tail_op, tail.math, num_groups_at
        self.tail_names = list(inspect.signature(tail.math).parameters)[1:]  # the tail's arguments after x
        self.tail_arity = len(self.tail_names)
        self.declaration = tail
        self._tail_backward, self._gradients, self._backward_args = tail_backward, gradients, backward_args
        self._backward_dtypes = DECLARED[f"{tail.name}_backward"].dtypes  # 94, 37, 62's take bf16 and fp16
        self.op = build.register_op(FUSED, self.name, reference=self._reference, fake=self._fake,
                                    backward=self._backward, keep_outputs=(1,), elsewhere=self._unfused)

    def example(self, n: int, g: torch.Generator) -> list:
        """Valid arguments with n rows: x (n, K) from torch.rand (the problems' inputs), nn.Linear's weight
        at its init scale, its kept small parts, and the tail's; save_gemm_output off."""
        x, (w, linear_bias) = torch.rand(n, EXAMPLE["K"], generator=g), example_nn_linear(g, EXAMPLE["C"])
        _, *rest = self.declaration.example(n, g)
        return [x, w, linear_bias, *rest, _tf32_residual_math(w), False]

    def math(self, x, weight, linear_bias, *rest):
        """(the model's output, the GEMM's output or an empty tensor), in PyTorch ops."""
        *tail, _, save = rest
        y = F.linear(x, weight, linear_bias)
        return self.tail_math(y, *tail), y if save else _empty(x)

    def __call__(self, x, weight, linear_bias, *rest, weight_residual=None):
        """The model's output; the GEMM's output is kept when autograd will need it. A model wholly in
        float64 (x and nn.Linear's weight) runs the reference math, on any device; one in bf16 or fp16
        runs the op (fused_gemm_groupnorm.cu's 16-bit kernels on the GPU, the reference math on the CPU)."""
        if _mixed(x, weight) and not torch.is_autocast_enabled(x.device.type):
            _require(self.name, WHOLE_MODEL_DTYPES, x=x, w=weight)  # as F.linear: one dtype outside autocast
        if x.dtype == weight.dtype == torch.float64:
            # The kernels are float32's; float64 is what a gradcheck or a reference run asks for, and the
            # reference math is its answer: the same PyTorch ops as Model's, so the same result.
            return self.tail_math(F.linear(x, weight, linear_bias), *rest)
        save = torch.is_grad_enabled() and any(
            isinstance(t, Tensor) and t.requires_grad for t in (x, weight, linear_bias, *rest))
        if save or torch.compiler.is_compiling():
            return self.op(x, weight, linear_bias, *rest, weight_residual, save)[0]
        # Nothing to differentiate: past the op's autograd kernel (Python, from register_autograd),
        # whose path without gradients does only this, to the kernel below it (the launcher, in C++):
        # most of a call's host time above the launcher's is that Python kernel
        # (experiments/training/host_time.py measures each layer).
        with torch._C._AutoDispatchBelowAutograd():
            return self.op(x, weight, linear_bias, *rest, weight_residual, save)[0]

    def _split(self, args):
        """(x, weight, linear_bias, the tail's arguments, w_residual, save_gemm_output)."""
        x, weight, linear_bias, *rest, w_residual, save = args
        return x, weight, linear_bias, rest, w_residual, save

    def _check(self, x, weight, linear_bias, rest, w_residual):
        """The launcher's checks: x and w of one dtype (float32, bfloat16 or float16), the parameters of x's
        dtype or, for 16-bit x and w (under autocast), float32, every tensor on one device; then the shapes:
        linear's and the tail's, on float32 stand-ins on the meta device (the tail's own op takes float32
        alone)."""
        params = {"linear_bias": linear_bias, **{n: t for n, t in zip(self.tail_names, rest) if isinstance(t, Tensor)}}
        _require(self.name, WHOLE_MODEL_DTYPES, False, x=x, w=weight, **params, w_residual=w_residual)
        if not _mixed(x, weight):
            _require(self.name, WHOLE_MODEL_DTYPES, x=x, w=weight)
        _require(self.name, WHOLE_MODEL_DTYPES, **params)
        if _mixed(x, weight) and linear_bias.dtype != torch.float32:
            raise TypeError(f"workbook::{self.name}: with {x.dtype} x and a float32 w (autocast's call) the "
                            f"parameters must be float32, got linear_bias {linear_bias.dtype}")
        if linear_bias.dtype != x.dtype and not (x.dtype in HALF16 and linear_bias.dtype == torch.float32):
            raise TypeError(f"workbook::{self.name}: the parameters must have x's dtype {x.dtype}, got linear_bias "
                            f"{linear_bias.dtype}; the model and its input in one dtype: model.to({x.dtype}), "
                            "or convert the input")
        if w_residual is not None and x.dtype != torch.float32:
            raise TypeError(f"workbook::{self.name}: w_residual is float32's 3xTF32 split of w; x and w in "
                            f"{x.dtype} have none (give None)")

        def meta(t):
            return torch.empty_like(t, device="meta", dtype=torch.float32) if isinstance(t, Tensor) else t
        _check_linear(meta(x), meta(weight), meta(linear_bias), meta(w_residual), op=self.name,
                      bias_name="linear_bias")
        self.declaration.check(meta(x.new_empty((x.shape[0], weight.shape[0]))), *map(meta, rest))

    @staticmethod
    def _gemm_output(x, weight, linear_bias):
        """F.linear in x's dtype (w and the bias converted, as autocast converts them), in the parameters'
        dtype: the tail's input, and what the backward keeps."""
        return F.linear(x, weight.to(x.dtype), linear_bias.to(x.dtype)).to(linear_bias.dtype)

    def _reference(self, *args):
        x, weight, linear_bias, rest, w_residual, save = self._split(args)
        self._check(x, weight, linear_bias, rest, w_residual)
        y = self._gemm_output(x, weight, linear_bias)
        return self.declaration.math(y, *rest), y if save else _empty(linear_bias)

    def _unfused(self, *args):
        """Off sm_90 (the fused kernel's file builds for sm_90a alone): the ops linear (cuBLAS's addmm
        there) and the tail (its kernel builds for any GPU). A model in bf16 or fp16: cuBLAS's GEMM in
        its dtype, then the tail's float32 op, its output rounded to the dtype (as the launcher's unfused16)."""
        x, weight, linear_bias, rest, w_residual, save = self._split(args)
        if x.dtype == torch.float32:
            y = linear(x, weight, linear_bias, w_residual)
            return self.tail(y, *rest), y if save else _empty(x)
        self._check(x, weight, linear_bias, rest, w_residual)
        y = self._gemm_output(x, weight, linear_bias)
        out = self.tail(y.float(), *[t.float() if isinstance(t, Tensor) else t for t in rest])
        return out.to(linear_bias.dtype), y if save else _empty(linear_bias)

    def _fake(self, *args):
        x, weight, linear_bias, rest, w_residual, save = self._split(args)
        self._check(x, weight, linear_bias, rest, w_residual)
        y = linear_bias.new_empty((x.shape[0], weight.shape[0]))  # the parameters' dtype, as the output's
        return y.new_empty(self.declaration.outputs(y, *rest)), y if save else _empty(linear_bias)

    def _backward(self, bw, x, weight, linear_bias, *rest_residual_save):
        *rest, _, save = rest_residual_save
        (y,) = bw.saved
        if not save:
            raise RuntimeError(f"workbook::{self.name} was called with save_gemm_output=False, so its backward "
                               f"has no GEMM output to start from: call utils.ops.{self.name}(...), which keeps it "
                               "whenever autograd needs it")
        if x.dtype != torch.float32:
            return self._backward16(bw, x, weight, linear_bias, y, rest)
        dy, tail_grads, dlinear_bias = self._gradients(self._tail_backward(bw.grad, y, *self._backward_args(rest)))
        dx, dw = linear_backward(dy, x, weight, bw.needs[0], bw.needs[1])
        # one gradient per tensor argument: x, weight, linear_bias, the tail's tensors, w_residual (none)
        return (dx if bw.needs[0] else None, dw if bw.needs[1] else None, dlinear_bias, *tail_grads, None)

    def _backward16(self, bw, x, weight, linear_bias, y, rest):
        """The backward where x and w are bf16 or fp16 (a model in that dtype, or one under autocast), y the
        GEMM's output in the parameters' dtype: the tail's backward op on y and the gradient (one pass, as
        in float32: in their 16-bit dtype where the op takes it, 94, 37 and 62; else converted to float32),
        the parameters converted to float32 (C values each), each gradient in its tensor's dtype, then
        dx = dy @ w and dw = dy.T @ x in x's dtype (cuBLAS's 16-bit GEMMs, as eager's)."""
        rest32 = [t.float() if isinstance(t, Tensor) else t for t in rest]
        grad, y = (bw.grad.to(y.dtype), y) if y.dtype in self._backward_dtypes else (bw.grad.float(), y.float())
        dy, tail_grads, dlinear_bias = self._gradients(self._tail_backward(grad, y, *self._backward_args(rest32)))
        dy = dy.to(x.dtype)
        dx = dy @ weight.to(x.dtype) if bw.needs[0] else None  # (w float32 in autocast's call: converted)
        dw = (dy.t() @ x).to(weight.dtype) if bw.needs[1] else None
        tensors = [t for t in rest if isinstance(t, Tensor)]
        tail_grads = [g.to(t.dtype) for g, t in zip(tail_grads, tensors)]
        return (dx, dw, dlinear_bias.to(linear_bias.dtype), *tail_grads, None)


# The tail's backward returns (dy, its tensors' gradients, [dy summed over rows]); for 94 the linear
# bias's gradient is the second bias's (both are added to the GEMM's output before anything else).
linear_bias_hardtanh_mish_group_norm = WholeModel(  # problem 94: tail (bias, lo, hi, G, gamma, beta, eps)
    BIAS_HARDTANH_MISH_GROUP_NORM, bias_hardtanh_mish_group_norm, bias_hardtanh_mish_group_norm_backward, 3,
    lambda g: (g[0], (g[1], g[2], g[3]), g[1]))
linear_swish_bias_group_norm = WholeModel(  # problem 37: tail (bias, G, gamma, beta, eps)
    SWISH_BIAS_GROUP_NORM, swish_bias_group_norm, swish_bias_group_norm_backward, 1,
    lambda g: (g[0], (g[1], g[2], g[3]), g[4]))
linear_group_norm_leaky_relu_x2 = WholeModel(  # problem 62: tail (G, gamma, beta, eps, slope)
    GROUP_NORM_LEAKY_RELU_X2, group_norm_leaky_relu_x2, group_norm_leaky_relu_x2_backward, 0,
    lambda g: (g[0], (g[1], g[2]), g[3]))
linear_group_norm_min_bias = WholeModel(  # problem 75: tail (G, gamma, beta, eps, bias)
    GROUP_NORM_MIN_BIAS, group_norm_min_bias, group_norm_min_bias_backward, 0,
    lambda g: (g[0], (g[1], g[2], g[3]), g[4]), backward_args=lambda rest: rest[:4])  # its backward needs no bias

# name -> op, in the order above (the GEMM, then the tails of 94, 37, 62, 75)
ALL = {name: getattr(torch.ops.workbook, name) for name in (
    "linear", "bias_hardtanh_mish_group_norm", "swish_bias_group_norm", "group_norm_leaky_relu_x2", "group_norm_min_bias")}
# the backward ops: the GEMM's, then the tails' of 94, 37, 62, 75
BACKWARD = {name: getattr(torch.ops.workbook, name) for name in (
    "linear_backward", "bias_hardtanh_mish_group_norm_backward", "swish_bias_group_norm_backward",
    "group_norm_leaky_relu_x2_backward", "group_norm_min_bias_backward")}
# the whole models, 94, 37, 62, 75: name -> WholeModel (call it for the model's output; .op is the op)
WHOLE_MODELS = {m.name: m for m in (linear_bias_hardtanh_mish_group_norm, linear_swish_bias_group_norm,
                                    linear_group_norm_leaky_relu_x2, linear_group_norm_min_bias)}


# --- under torch.autocast ------------------------------------------------------------------------
#
# Under torch.autocast the reference runs nn.Linear in the autocast dtype (cuBLAS's bf16 or fp16
# GEMM) and each later op as autocast's policy for it says: on CUDA GroupNorm in float32, so all four
# models return float32; on the CPU GroupNorm keeps its input's dtype, so 62 returns bfloat16. The
# ops do what the reference does, registered as autocast kernels (torch.library), not special-cased
# in any module:
#   whole models, CUDA  x converted to the autocast dtype (as autocast converts nn.Linear's) and, for
#                       training, w; the parameters float32; then the whole-model op itself below
#                       autocast: one kernel of fused_gemm_groupnorm.cu (rung 11's 16-bit GEMM, or at
#                       inference on float32 w: up to 256 rows the TF32 tiles, to 2,048 the
#                       mixed-input GEMM; the epilogue and the output in float32), its backward the
#                       tail's op and 16-bit GEMMs;
#   whole models, CPU   the reference math itself, under autocast: the reference's dtypes exactly;
#   linear              F.linear under autocast, as nn.Linear;
#   tails               inputs cast to float32, as autocast's fp32 policy does for GroupNorm.

_autocast_library = torch.library.Library(build.OP_NAMESPACE, "FRAGMENT")


def _whole_model_autocast(model: WholeModel, device_type: str):
    def kernel(x, weight, linear_bias, *rest_and_defaults):
        rest = rest_and_defaults[:model.tail_arity]  # (the dispatcher leaves out trailing defaults)
        if device_type == "cpu":
            y = F.linear(x, weight, linear_bias)  # in the autocast dtype, as nn.Linear under autocast
            return model.tail_math(y, *rest), _empty(x)
        save = len(rest_and_defaults) > model.tail_arity + 1 and rest_and_defaults[model.tail_arity + 1]
        dtype = torch.get_autocast_dtype("cuda")
        # At inference w stays float32 and the launcher chooses, by the rows of x, what to convert (x; w, in
        # registers; or w, before the GEMM: common/gemm_dispatch.cuh);
        # for training it is converted here, so that autograd keeps the converted w for the backward's GEMMs.
        w = weight if weight.dtype == torch.float32 and not save else weight.to(dtype)
        with torch.autocast("cuda", enabled=False):
            return model.op(x.to(dtype), w, linear_bias.float(),
                            *[t.float() if isinstance(t, Tensor) else t for t in rest], None, save)
    return kernel


for _model in WHOLE_MODELS.values():
    for _device, _key in (("cuda", "AutocastCUDA"), ("cpu", "AutocastCPU")):
        _autocast_library.impl(_model.name, _whole_model_autocast(_model, _device), _key)
for _key in ("AutocastCUDA", "AutocastCPU"):
    _autocast_library.impl("linear", lambda x, weight, bias, w_residual=None: F.linear(x, weight, bias), _key)
for _name in list(ALL)[1:]:
    torch.library.register_autocast(f"{build.OP_NAMESPACE}::{_name}", "cuda", torch.float32, lib=_autocast_library)
