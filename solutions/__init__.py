"""The workbook's ending: one drop-in `ModelNew` per problem, each in its own module.

    from solutions import p094_gemm_biasadd_hardtanh_mish_groupnorm as s94
    model = s94.ModelNew(*s94.get_init_inputs()).cuda()      # the reference Model's weights, names and order
    y = model(*[x.cuda() for x in s94.get_inputs()])

    solution(94)                                              # the same module, by problem id

Each module follows the drop-in contract of ARCHITECTURE.md, the same way:

- `ModelNew` inherits KernelBench's `Model`: the constructor, parameter names, shapes and creation
  order are the reference's, so the same seed gives the same weights and
  `ModelNew(...).load_state_dict(Model(...).state_dict())` works. Every constant (eps, slopes,
  Hardtanh's range) is read from the modules.
- The GEMM, over 90% of every model's time, is the workbook's fastest at the precision PyTorch's
  fp32 matmul setting asks for, with nn.Linear's weight and bias: workbook::linear. At the default
  (IEEE fp32, the strict tier) on an sm_90 GPU that is rung 10 of the GEMM ladder, 3xTF32 on the
  tensor cores with promoted accumulation: fp32's accuracy at over twice cuBLAS SGEMM's speed
  (notebook 08 measures it; the FP32 units' best, rung 7 of notebook 03, stays below cuBLAS). x is
  split into its big and small parts on every call; the weight's split is kept between calls, at
  the cost of twice the weight's memory on the GPU, and made again whenever the weight changes
  (an optimizer step, load_state_dict, any in-place write: its version counter moves). With TF32 allowed
  the fastest is cuBLAS's TF32 GEMM (rung 9 reaches 90-98% of it), and on GPUs other than sm_90
  cuBLAS again: aten::addmm, exactly nn.Linear's, named in `ModelNew.allow_torch_ops` so the
  harness knows it is deliberate.
- Everything after the GEMM is one fused kernel, called as a registered operator (utils/ops.py):
  on CUDA the kernel, on the CPU the reference PyTorch math (so the module moves between devices
  like any nn.Module), a fake implementation for torch.compile(fullgraph=True), and an autograd
  formula for training.
- float32 only: other dtypes get an error naming it.

To take one into code of your own without this repository, export it as one self-contained
KernelBench file:

    python -m utils.export solutions/p094_gemm_biasadd_hardtanh_mish_groupnorm.py
"""
from __future__ import annotations

import importlib
from types import ModuleType


def solution(pid: int | str) -> ModuleType:
    """The solution module of a problem, by KernelBench id (94, 75, 37, 62)."""
    from utils.problems import get_problem

    return importlib.import_module(f"solutions.{get_problem(pid).slug}")
