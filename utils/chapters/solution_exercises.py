"""Notebook 10's exercise checkers that say what is wrong without giving the answer away. Tested by
tests/test_chapter.py.

    print(fake_verdict(my_fake))   # exercise 2: a fake implementation of problem 75's op

(Exercise 1's `backward_verdict` is session.py's: its hint asks a question and prints no answer.)
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from utils import ops


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
                fake = my_fake(args[0], G, args[1], args[2], 1e-5, args[3])
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
