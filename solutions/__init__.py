"""The workbook's ending: one drop-in `ModelNew` per problem, each in its own module.

    from solutions import p094_gemm_biasadd_hardtanh_mish_groupnorm as s94
    model = s94.ModelNew(*s94.get_init_inputs()).cuda()      # the reference Model's weights, names and order
    y = model(*[x.cuda() for x in s94.get_inputs()])

    solution(94)                                              # the same module, by problem id

Each module follows the drop-in contract (docs/ARCHITECTURE.md, "The drop-in contract"), the same way:

- `ModelNew` inherits KernelBench's `Model`: the constructor, parameter names, shapes and creation
  order are the reference's, so the same seed gives the same weights and
  `ModelNew(...).load_state_dict(Model(...).state_dict())` works. Every constant (eps, slopes,
  Hardtanh's range) is read from the modules.
- The whole model is one registered operator (utils/ops.py), one per problem:
  workbook::linear_bias_hardtanh_mish_group_norm (94), linear_group_norm_min_bias (75),
  linear_swish_bias_group_norm (37) and linear_group_norm_leaky_relu_x2 (62), each called with
  nn.Linear's weight and bias and then the tail's own arguments. On an sm_90 GPU it is one kernel,
  kernels/fused_gemm_groupnorm.cu (notebook 09): x @ W.T on the tensor cores with the bias, the
  activations, GroupNorm and, for 75, each row's minimum in the GEMM's epilogue, so the GEMM's
  output goes to memory only when training keeps it; the model's output is written once.
- Its precision follows PyTorch's fp32 matmul setting, as nn.Linear's would. At the default (IEEE
  fp32, the strict tier) the GEMM is rung 10 of the GEMM ladder, 3xTF32 with promoted accumulation:
  fp32's accuracy at over twice cuBLAS SGEMM's speed (notebooks 08 and 09). With TF32 allowed it is rung 9's
  1xTF32 with the same epilogue, held to the TF32 tier.
- Every write to a parameter is seen, whatever made it (`.data` included): by default nothing derived
  from a parameter is kept between calls. The 3xTF32 split of x and of the weight is made on every
  call (kernels/common/tf32_operands.cuh: the tensor cores read the raw values as the big parts, only
  the small parts are written: one read and one write of the weight, ~0.18 ms at 8192 x 8192 on an
  H100). `model.freeze()` keeps the weight's small parts instead, the user's explicit choice, with the
  contract PyTorch's own kept weights have (utils/freezing.py): made again when a counter sees a
  write (an optimizer step, load_state_dict, `.to()`), not after a `.data` write until freeze() is
  called again; `unfreeze()` goes back to the default.
- Where the fused kernel does not apply (a GPU other than sm_90, K % 4 != 0, a group width C / G
  other than 16, 32 or 64) the op runs two ops instead, with the same result: workbook::linear
  (rung 10 at the strict tier on sm_90; otherwise cuBLAS's addmm, exactly nn.Linear's) and then
  the tail as one fused kernel (workbook::bias_hardtanh_mish_group_norm, group_norm_min_bias,
  swish_bias_group_norm, group_norm_leaky_relu_x2; notebooks 06 and 07). cuBLAS runs on purpose
  only there, and for the backward's dx = dy @ W with TF32 allowed (faster than a transposed copy
  and rung 9): aten::addmm and aten::mm, named in `ModelNew.allow_torch_ops`.
- Training runs on the same engine. When autograd will need it, the forward also keeps the GEMM's
  output (one more store in the epilogue); the backward is the tail's backward as one kernel
  (kernels/tail_backward.cu: dy and the parameters' gradients in one pass), then nn.Linear's
  dx = dy @ W and dW = dy.T @ x on the forward's GEMM kernel at its tier (gemm_10_3xtf32.cu's
  linear_backward; the operands that reduce along their rows are copied transposed, as TF32 wgmma
  reads K-major operands only).
- Under torch.autocast it does what Model does (utils/ops.py registers the autocast kernels with
  torch.library): on CUDA x and the weight converted to the autocast dtype, as autocast converts
  nn.Linear's, then one kernel: rung 11's 16-bit GEMM with the rest of the model in its epilogue in
  float32, the output float32 (the reference's own: GroupNorm runs in float32 under CUDA autocast);
  the backward the tail's float32 kernel and cuBLAS's 16-bit GEMMs. On the CPU the reference math itself.
- A model wholly in bfloat16 or float16 (`.to(dtype)`, `.bfloat16()`, `.half()`) runs the same 16-bit
  kernel with its parameters and its output in that dtype: the epilogue in float32, the output rounded
  once, so closer to float64 than eager's chain of 16-bit ops (tests/test_solutions_16bit.py); its
  backward the tail's backward kernel on its 16-bit tensors (94, 37, 62; 75's converts to float32), then
  cuBLAS's 16-bit GEMMs. Where
  the fused kernel does not take the inputs (K % 8 != 0, a group width it has no instance for), cuBLAS's
  16-bit GEMM and the float32 tail, the result rounded to the dtype.
- Every op has, besides its CUDA implementation, the reference PyTorch math on the CPU (so the
  module moves between devices like any nn.Module), a fake implementation for
  torch.compile(fullgraph=True), and an autograd formula whose steps are ops too.
- float64: a model wholly in float64 (`.double()`, and a float64 x) runs the reference math on either
  device, Model's own ops, so that a gradcheck or a reference run works as with Model. A model and an
  input of different dtypes, or another dtype, get an error naming what to convert.

To take one into code of your own without this repository, export it as one self-contained
KernelBench file:

    python -m utils.export solutions/p094_gemm_biasadd_hardtanh_mish_groupnorm.py
"""
from __future__ import annotations

import importlib
from types import ModuleType

from utils.problems import get_problem


def solution(pid: int | str) -> ModuleType:
    """The solution module of a problem, by KernelBench id (94, 75, 37, 62)."""
    return importlib.import_module(f"solutions.{get_problem(pid).slug}")
