"""The four KernelBench problems, looked up by id, at three scales.

The reference `Model`, `get_inputs` and `get_init_inputs` come verbatim from
`utils/kernelbench/` (KernelBench's own files). This module adds what the workbook
needs on top, without changing the reference:

- ``full``  the sizes KernelBench defines (what the benchmarks measure);
- ``small`` the same structure (channels per group included) at a size a CPU runs in
  well under a second, for machines without a GPU and for quick checks;
- ``odd``   sizes that are multiples of nothing a kernel tiles by (37 rows, 129 inputs,
  115 outputs in 5 groups of 23), where edge handling goes wrong.

Where a scale is taken, a `Dims` of the caller's own may stand instead (`p.init_inputs(Dims(300, 600,
544, 17))`).

    >>> p = get_problem(94)
    >>> p.init_inputs("small")
    [256, 1024, (1024,), 32]
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Callable

import torch

SCALES = ("full", "small", "odd")


@dataclass(frozen=True)
class Dims:
    batch: int
    in_features: int
    out_features: int
    groups: int

    @property
    def channels_per_group(self) -> int:
        return self.out_features // self.groups


@dataclass(frozen=True)
class Problem:
    id: int
    kernelbench_file: str  # the file name in KernelBench/level2/
    chain: str  # the forward pass, in words
    module_name: str
    _init_inputs: Callable[[Dims], list]
    _small: Dims
    _odd: Dims

    @property
    def module(self) -> ModuleType:
        return importlib.import_module(f"utils.kernelbench.{self.module_name}")

    @property
    def Model(self) -> type[torch.nn.Module]:
        return self.module.Model

    @property
    def slug(self) -> str:
        """`p094_gemm_biasadd_hardtanh_mish_groupnorm`: the name solutions/ uses."""
        return self.module_name

    def dims(self, scale: str | Dims = "full") -> Dims:
        """The sizes at a named scale; a Dims is taken as it is (sizes of the caller's own)."""
        if isinstance(scale, Dims):
            return scale
        if scale == "full":
            m = self.module
            init = m.get_init_inputs()
            return Dims(m.batch_size, init[0], init[1], _groups_of(self, init))
        if scale == "small":
            return self._small
        if scale == "odd":
            return self._odd
        raise ValueError(f"unknown scale {scale!r}; choose one of {SCALES}")

    def init_inputs(self, scale: str | Dims = "full") -> list:
        """The `__init__` arguments, in KernelBench's order, at this scale (or these Dims)."""
        if scale == "full":
            return self.module.get_init_inputs()
        return self._init_inputs(self.dims(scale))

    def get_inputs(self, scale: str | Dims = "full", *, generator: torch.Generator | None = None) -> list[torch.Tensor]:
        """Fresh inputs like KernelBench's `get_inputs()`: `torch.rand(batch, in)`, fp32 on the CPU."""
        d = self.dims(scale)
        return [torch.rand(d.batch, d.in_features, generator=generator)]

    def make_model(self, scale: str | Dims = "full", *, seed: int | None = 0) -> torch.nn.Module:
        """The reference Model at this scale; with a seed, built under torch.manual_seed(seed)."""
        if seed is not None:
            torch.manual_seed(seed)
        return self.Model(*self.init_inputs(scale))

    def output_shape(self, scale: str | Dims = "full") -> tuple[int, ...]:
        d = self.dims(scale)
        if self.id == 75:  # (N, 1) + bias(1, C, 1, 1) broadcasts to (1, C, N, 1)
            return (1, d.out_features, d.batch, 1)
        return (d.batch, d.out_features)

    def __repr__(self) -> str:
        return f"Problem({self.id}: {self.kernelbench_file})"


def _groups_of(p: Problem, init: list) -> int:
    # 94 passes (in, out, bias_shape, groups); 75 and 37 (in, out, groups, bias_shape); 62 (in, hidden, groups).
    return init[3] if p.id == 94 else init[2]


PROBLEMS: dict[int, Problem] = {
    p.id: p
    for p in (
        Problem(
            94,
            "94_Gemm_BiasAdd_Hardtanh_Mish_GroupNorm.py",
            "Linear → + bias(out,) → Hardtanh() → Mish() → GroupNorm",
            "p094_gemm_biasadd_hardtanh_mish_groupnorm",
            lambda d: [d.in_features, d.out_features, (d.out_features,), d.groups],
            Dims(64, 256, 1024, 32),
            Dims(37, 129, 115, 5),
        ),
        Problem(
            75,
            "75_Gemm_GroupNorm_Min_BiasAdd.py",
            "Linear → GroupNorm → min(dim=1, keepdim=True) → + bias(1, out, 1, 1)",
            "p075_gemm_groupnorm_min_biasadd",
            lambda d: [d.in_features, d.out_features, d.groups, (1, d.out_features, 1, 1)],
            Dims(64, 256, 1024, 64),
            Dims(37, 129, 115, 5),
        ),
        Problem(
            37,
            "37_Matmul_Swish_Sum_GroupNorm.py",
            "Linear → x·sigmoid(x) → + bias(out,) → GroupNorm",
            "p037_matmul_swish_sum_groupnorm",
            lambda d: [d.in_features, d.out_features, d.groups, (d.out_features,)],
            Dims(256, 128, 512, 8),
            Dims(37, 129, 115, 5),
        ),
        Problem(
            62,
            "62_Matmul_GroupNorm_LeakyReLU_Sum.py",
            "Linear → GroupNorm(eps=1e-5) → LeakyReLU(0.01) → x + x",
            "p062_matmul_groupnorm_leakyrelu_sum",
            lambda d: [d.in_features, d.out_features, d.groups],
            Dims(64, 256, 1024, 64),
            Dims(37, 129, 115, 5),
        ),
    )
}


def get_problem(pid: int | str | Problem) -> Problem:
    """Look a problem up by KernelBench id (94, "75", ...) or pass one through."""
    if isinstance(pid, Problem):
        return pid
    try:
        return PROBLEMS[int(pid)]
    except (KeyError, ValueError):
        raise KeyError(f"no problem {pid!r}; the workbook's problems are {sorted(PROBLEMS)}") from None


def all_problems() -> list[Problem]:
    """The four problems in the workbook's order (94, 75, 37, 62)."""
    return [PROBLEMS[i] for i in (94, 75, 37, 62)]
