"""The workbook's ending: one drop-in `ModelNew` per problem, each in its own module.

    from solutions import p094_gemm_biasadd_hardtanh_mish_groupnorm as s94
    model = s94.ModelNew(*s94.get_init_inputs()).cuda()      # the reference Model's weights, names and order
    y = model(*[x.cuda() for x in s94.get_inputs()])

    solution(94)                                              # the same module, by problem id

Each module follows the drop-in contract of ARCHITECTURE.md: same constructor, parameters and
output as KernelBench's Model; the GEMM through cuBLAS (named in `ModelNew.allow_torch_ops`), the
rest in one registered kernel (utils/ops.py); backward and torch.compile work. To take one into
code of your own without this repository, export it as one self-contained KernelBench file:

    python -m utils.export solutions/p094_gemm_biasadd_hardtanh_mish_groupnorm.py
"""
from __future__ import annotations

import importlib
from types import ModuleType


def solution(pid: int | str) -> ModuleType:
    """The solution module of a problem, by KernelBench id (94, 75, 37, 62)."""
    from utils.problems import get_problem

    return importlib.import_module(f"solutions.{get_problem(pid).slug}")
