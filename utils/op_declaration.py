"""An op of utils/ops.py, declared once: the `Declaration` each op is registered from, the registry of
them (DECLARED), and the sizes and values its examples are drawn at.

A declaration gives an op's kernel file and launcher, its argument rules (`check`), its math, its
outputs' shapes, valid arguments for n rows (`example`) and the dtypes it takes with their tiers. From
it come the op's CPU implementation (check, then math), its fake for torch.compile (check, then empty
outputs), the bad-input matrix's specs (tests/bad_inputs.py) and the dtype check of every op
(`ops._require`). The launcher's TORCH_CHECKs say in C++ what `check` says here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch
from torch import Tensor

from utils import build

# The dtypes an op takes, each with the tiers (utils.check.TIERS) its results meet: at PyTorch's IEEE
# fp32 setting, then with TF32 allowed.
FLOAT32 = {torch.float32: ("strict", "tf32")}
# The whole models also take a model wholly in bfloat16 or float16 (its input and every parameter), and, under
# autocast, x and w in one of them with the parameters in float32.
HALF16 = (torch.bfloat16, torch.float16)
WHOLE_MODEL_DTYPES = {**FLOAT32, torch.bfloat16: ("bf16",), torch.float16: ("fp16",)}


@dataclass(frozen=True)
class Declaration:
    """One op, declared once. The rest follows from these fields: the CPU implementation (check, then
    math), the fake that torch.compile traces (check, then empty outputs of `outputs`' shapes), the
    bad-input matrix's valid arguments (tests/bad_inputs.py: example) and the dtypes the checks accept.
    Its CUDA kernel is the launcher `name` of kernels/<kernel>.cu, whose TORCH_CHECKs say in C++ what
    `check` says here."""
    kernel: str
    name: str
    check: Callable[..., None]  # the argument rules (shapes, dtypes, devices), named as the op's schema names them
    math: Callable  # the computation in PyTorch ops
    outputs: Callable  # the arguments -> the output's shape, or a list of the outputs' shapes
    example: Callable[[int, torch.Generator], list]  # valid arguments with n rows, on the CPU
    dtypes: Mapping[torch.dtype, tuple[str, ...]] = field(default_factory=lambda: FLOAT32)
    # the arguments -> the outputs' dtypes, where they are not all the first tensor argument's
    output_dtypes: Callable | None = None

    def reference(self, *args):
        self.check(*args)
        return self.math(*args)

    def fake(self, *args):
        self.check(*args)
        like = next(a for a in args if isinstance(a, Tensor))
        shapes = self.outputs(*args)
        if isinstance(shapes, list):
            dtypes = self.output_dtypes(*args) if self.output_dtypes else [like.dtype] * len(shapes)
            return tuple(like.new_empty(shape, dtype=dtype) for shape, dtype in zip(shapes, dtypes))
        return like.new_empty(shapes)

    def register(self, backward=None, **options):
        """The op (build.register_op), its CPU and fake implementations this declaration's."""
        DECLARED[self.name] = self
        return build.register_op(self.kernel, self.name, reference=self.reference, fake=self.fake,
                                 backward=backward, **options)


DECLARED: dict[str, Declaration] = {}  # op name -> its declaration, as registered


# The sizes of the examples (Declaration.example): no tile's multiple anywhere. A GEMM's k and its
# output columns; a tail's channels and groups (32 channels a group, a width the fused kernels take).
EXAMPLE = {"K": 64, "N": 67, "C": 128, "G": 4, "EPS": 1e-5, "SLOPE": 0.01}


def example_gamma_beta(g: torch.Generator, c: int = EXAMPLE["C"]) -> list[Tensor]:
    """GroupNorm's weight (of both signs, away from 0) and bias."""
    sign = torch.randint(0, 2, (c,), generator=g) * 2 - 1
    return [(torch.rand(c, generator=g) + 0.5) * sign, 0.5 * torch.randn(c, generator=g)]


def example_nn_linear(g: torch.Generator, rows: int, k: int = EXAMPLE["K"]) -> list[Tensor]:
    """nn.Linear's weight and bias as its init draws them (uniform in ±1/sqrt(k)): what rung 10's linear
    and the fused models get from a drop-in. (Unlike torch.randn's, such values often end in 13 zero
    bits, so that their 3xTF32 small part is the stand-in ±2^-126 of common/tf32_operands.cuh.)"""
    bound = 1 / k**0.5
    return [(torch.rand(rows, k, generator=g) * 2 - 1) * bound, (torch.rand(rows, generator=g) * 2 - 1) * bound]


def example_tail_input(n: int, g: torch.Generator) -> Tensor:
    """A tail's input: a GEMM's output, (n, C)."""
    return torch.randn(n, EXAMPLE["C"], generator=g) * 2
