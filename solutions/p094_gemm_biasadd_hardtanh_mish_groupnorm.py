"""Problem 94, Gemm_BiasAdd_Hardtanh_Mish_GroupNorm, as a drop-in `ModelNew`.

What runs where, for a float32 x (N, in_features) on a CUDA device:

1. The GEMM and Linear's own bias, `self.gemm(x)`: cuBLAS (aten::addmm), called on purpose.
   It follows PyTorch's fp32 matmul setting exactly as nn.Linear does: IEEE fp32 SGEMM by
   default (the strict tier), TF32 tensor cores once the caller allows TF32 (the tf32 tier).
   At the strict tier it is the fastest GEMM this workbook has: rung 7 of notebook 03 reaches
   86.5% of it (results/nvidia-h100-80gb-hbm3/ladder.json). The GEMM is over 90% of the time.
2. Everything after it, `+ bias -> Hardtanh -> Mish -> GroupNorm`, in one kernel:
   workbook::bias_hardtanh_mish_group_norm (kernels/groupnorm.cu, notebook 06). It reads the
   GEMM's output once and writes the result once, where eager makes nine passes; the
   second bias stays its own parameter, `self.bias`, as the reference has it.

On the CPU the same op runs the reference PyTorch math, so the module moves between devices
like any nn.Module. Backward: the op's autograd formula (utils/ops.py) and nn.Linear's.
Inherits Model, so the constructor, parameter names, shapes and creation order are the
reference's: ModelNew(...).load_state_dict(Model(...).state_dict()) works.

Measured against eager and torch.compile, TF32 off and on: notebooks/09_fused_solutions.ipynb,
recorded in results/<device>/solutions.json.
"""
from utils import ops
from utils.kernelbench.p094_gemm_biasadd_hardtanh_mish_groupnorm import Model, get_init_inputs, get_inputs  # noqa: F401


class ModelNew(Model):
    allow_torch_ops = ("aten::addmm",)  # the GEMM: cuBLAS, on purpose (see above)

    def forward(self, x):
        gn = self.groupnorm
        return ops.bias_hardtanh_mish_group_norm(self.gemm(x), self.bias, self.hardtanh.min_val,
                                                 self.hardtanh.max_val, gn.num_groups, gn.weight, gn.bias, gn.eps)
