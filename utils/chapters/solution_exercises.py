"""Notebook 10's exercise checkers that say what is wrong without giving the answer away. Tested by
tests/test_solutions_exercises.py (and tests/test_chapter.py).

    print(backward_verdict(my_backward))   # exercise 1: problem 62's tail backward, from scratch
    print(fake_verdict(my_fake))           # exercise 2: a fake implementation of problem 75's op

Both run the reader's function under a guard (`_Guard`) that refuses the shortcuts: autograd, any
`*_backward` operator (PyTorch's own or the workbook's), and the workbook's registered ops themselves.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from utils import ops


class Shortcut(Exception):
    """The reader's function reached for what the exercise asks it to do itself."""


# What a from-scratch answer may not call: autograd in any form (torch.func's transforms call torch.autograd.grad).
_AUTOGRAD = {torch.autograd.grad, torch.autograd.backward, torch.Tensor.backward, torch.Tensor.requires_grad_,
             torch.Tensor.requires_grad.__set__}


class _Guard(TorchFunctionMode):
    """While active, autograd raises Shortcut; with its dispatch half (_GuardOps), so does any operator whose
    name says it is a backward (aten's native_group_norm_backward, leaky_relu_backward, ...) and any of the
    workbook's own ops (`workbook::*`), the op under exercise included. Forward math is free to use."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in _AUTOGRAD:
            raise Shortcut("autograd computes the gradient for you there")
        return func(*args, **(kwargs or {}))


class _GuardOps(TorchDispatchMode):
    def __init__(self, max_ops: int | None = None):
        super().__init__()
        self.max_ops, self.ops = max_ops, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        if self.max_ops is not None and self.ops > self.max_ops:
            raise Shortcut(f"it ran over {self.max_ops} operators, where a backward runs a few dozen (the forward "
                           "evaluated again and again, as finite differences do?)")
        name = func.name()  # "aten::native_group_norm_backward", "workbook::group_norm_min_bias", ...
        if "backward" in name:
            raise Shortcut(f"{name} is a backward someone else wrote")
        if name.startswith("workbook::"):
            raise Shortcut(f"{name} is the workbook's own op")
        return func(*args, **(kwargs or {}))


def _op_args(N: int, C: int, seed: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(N, C, generator=g), torch.rand(C, generator=g) + 0.5, torch.randn(C, generator=g),
            torch.randn(1, C, 1, 1, generator=g))


def shape_difference(got: tuple[int, ...], want: tuple[int, ...]) -> str:
    """What differs between two shapes, in words that name neither `want` nor any of its sizes: the number of
    dimensions, or which dimensions (by index) have another size."""
    if len(got) != len(want):
        return (f"your fake's output has {len(got)} dimension{'s' * (len(got) != 1)}, a different number from the "
                "op's")
    wrong = [str(i) for i, (g, w) in enumerate(zip(got, want)) if g != w]
    if len(wrong) == 1:
        return f"your fake's output has the op's number of dimensions, but dimension {wrong[0]} has another size"
    return (f"your fake's output has the op's number of dimensions, but dimensions {', '.join(wrong[:-1])} and "
            f"{wrong[-1]} have other sizes")


def fake_verdict(my_fake: Callable, *, shapes=((37, 115, 5), (1, 64, 4), (0, 64, 4))) -> str:
    """Exercise 2: `my_fake(x, num_groups, gamma, beta, eps, bias)`, problem 75's op on fake CUDA tensors.
    PASS when its output has the real op's shape, dtype and device on every shape (an empty batch too);
    else "Not yet:" and what differs, without the shape the op returns (finding that is the exercise)."""
    from torch._subclasses.fake_tensor import FakeTensorMode  # torch's private module: only where the check runs

    for N, C, G in shapes:
        x, gamma, beta, bias = _op_args(N, C, seed=C)
        real = ops.group_norm_min_bias(x, G, gamma, beta, 1e-5, bias)  # the CPU implementation: the reference
        with FakeTensorMode() as mode:
            args = [mode.from_tensor(t).to("cuda") for t in (x, gamma, beta, bias)]
            try:
                with _GuardOps():  # the op's own fake is what the exercise writes
                    fake = my_fake(args[0], G, args[1], args[2], 1e-5, args[3])
            except Shortcut as why:
                return f"Not yet: my_fake must say the shape itself, and {why}."
            except Exception as error:  # the reader's code: a crash is a verdict, not a traceback
                return f"Not yet: my_fake raised {type(error).__name__}: {error}"
        if not isinstance(fake, Tensor):
            return f"Not yet: my_fake returned {type(fake).__name__}, not a tensor"
        where = f"for x of shape {(N, C)} with {G} groups"
        if tuple(fake.shape) != tuple(real.shape):
            return (f"Not yet: {where}, {shape_difference(tuple(fake.shape), tuple(real.shape))}. Work out the "
                    "shape of `torch.min(x, dim=1, keepdim=True)[0] + bias` with the bias's shape, (1, C, 1, 1), as "
                    "broadcasting does, or compare with the shape of Model's output. torch.compile would plan the "
                    "rest of the graph for the wrong tensor.")
        if (fake.dtype, fake.device.type) != (real.dtype, "cuda"):
            return (f"Not yet: {where}, your fake is {fake.dtype} on {fake.device.type}; the op returns "
                    f"{real.dtype} on cuda, x's device.")
    return f"PASS: your fake matches the op on {len(shapes)} shapes, the empty batch included."


# --- exercise 1: problem 62's tail backward, from scratch -------------------------------------------------------

BACKWARD_SHAPES = ((37, 115, 5), (16, 64, 4), (3, 96, 2))  # (rows, channels, groups)
BACKWARD_RTOL = 1e-12  # norm-wise, against float64's autograd: a float32 detour (1e-7) or a difference quotient is far above it
BACKWARD_MAX_OPS = 2000  # operators one call may run: a backward runs a few dozen, a difference quotient thousands


def _tail_args(N: int, C: int, seed: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """x, gamma (both signs), beta and the output's gradient, in float64."""
    g = torch.Generator().manual_seed(seed)
    sign = torch.randint(0, 2, (C,), generator=g) * 2 - 1
    x = torch.randn(N, C, generator=g, dtype=torch.float64) * 2
    gamma = (torch.rand(C, generator=g, dtype=torch.float64) + 0.5) * sign
    return x, gamma, 0.5 * torch.randn(C, generator=g, dtype=torch.float64), torch.randn(N, C, generator=g,
                                                                                         dtype=torch.float64)


def tail_gradients(x: Tensor, G: int, gamma: Tensor, beta: Tensor, eps: float, slope: float, grad: Tensor):
    """The checker's reference: (dx, dgamma, dbeta) by autograd through problem 62's tail, in x's dtype."""
    leaves = [t.detach().clone().requires_grad_() for t in (x, gamma, beta)]
    y = F.leaky_relu(F.group_norm(leaves[0], G, leaves[1], leaves[2], eps), slope)
    return torch.autograd.grad(y + y, leaves, grad)


def backward_verdict(my_backward: Callable, *, shapes=BACKWARD_SHAPES, eps: float = 1e-5, slope: float = 0.01) -> str:
    """Exercise 1: `my_backward(grad, x, num_groups, gamma, beta, eps, negative_slope) -> (dx, dgamma, dbeta)` for
    problem 62's tail, out = y + y with y = leaky_relu(group_norm(x)), written from scratch: run on float64 inputs
    under _Guard (no autograd, no *_backward op, no workbook op, at most BACKWARD_MAX_OPS operators) and held norm-wise to float64's autograd within
    BACKWARD_RTOL. PASS on every shape; else "Not yet:" and which of the three is off, by how much."""
    for N, C, G in shapes:
        x, gamma, beta, grad = _tail_args(N, C, seed=N * C)
        want = tail_gradients(x, G, gamma, beta, eps, slope, grad)
        try:
            with _Guard(), _GuardOps(BACKWARD_MAX_OPS), torch.no_grad():
                got = my_backward(grad.clone(), x.clone(), G, gamma.clone(), beta.clone(), eps, slope)
        except Shortcut as why:
            return f"Not yet: my_backward must compute the gradients itself, and {why}."
        except Exception as error:  # the reader's code: a crash is a verdict, not a traceback
            return f"Not yet: my_backward raised {type(error).__name__}: {error}"
        if not (isinstance(got, (tuple, list)) and len(got) == 3 and all(isinstance(t, Tensor) for t in got)):
            return "Not yet: my_backward must return three tensors, (dx, dgamma, dbeta)"
        where = f"at x of shape {(N, C)} with {G} groups"
        for label, g_, w in zip(("dx", "dgamma", "dbeta"), got, want):
            if g_.shape != w.shape:
                return f"Not yet: {where}, {label} has shape {tuple(g_.shape)}, the input's is {tuple(w.shape)}"
            if g_.dtype != torch.float64:
                return f"Not yet: {where}, {label} is {g_.dtype}; keep the float64 the inputs came in"
        errors = {label: float((g_ - w).norm() / w.norm()) for label, g_, w in zip(("dx", "dgamma", "dbeta"), got, want)}
        off = {label: e for label, e in errors.items() if not e <= BACKWARD_RTOL}  # NaN is off too
        if off:
            return (f"Not yet: {where}, " + ", ".join(f"{label} is off by {e:.1e} of its norm" if math.isfinite(e)
                                                      else f"{label} is not finite" for label, e in off.items())
                    + f" (float64 allows {BACKWARD_RTOL:.0e}).")
    return f"PASS: dx, dgamma and dbeta match float64's autograd on {len(shapes)} shapes, computed by your own code."
