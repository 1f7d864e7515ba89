"""Problem 94, Gemm_BiasAdd_Hardtanh_Mish_GroupNorm, as a drop-in `ModelNew`.

What runs where, for a float32 x (N, in_features) on a CUDA device:

1. `self.gemm(x)`, the GEMM with Linear's own bias: cuBLAS (aten::addmm), called on purpose and
   named in `allow_torch_ops`. It follows PyTorch's fp32 matmul setting as nn.Linear does: IEEE
   fp32 by default (the strict tier), TF32 tensor cores once the caller allows TF32.
2. `+ bias -> Hardtanh -> Mish -> GroupNorm`: one kernel, workbook::bias_hardtanh_mish_group_norm
   (kernels/groupnorm.cu, notebook 06). It reads the GEMM's output once and writes the result once,
   where eager makes nine passes; the second bias stays its own parameter, `self.bias`.

Why this split, and what all four solutions share (the inherited constructor, the CPU path,
backward, torch.compile): solutions/__init__.py. Measured against eager and torch.compile,
TF32 off and on: notebooks/09_fused_solutions.ipynb, recorded in results/<device>/solutions.json.
"""
from utils import ops
from utils.kernelbench.p094_gemm_biasadd_hardtanh_mish_groupnorm import Model, get_init_inputs, get_inputs  # noqa: F401


class ModelNew(Model):
    allow_torch_ops = ("aten::addmm",)  # the GEMM: cuBLAS, on purpose (see above)

    def forward(self, x):
        gn = self.groupnorm
        return ops.bias_hardtanh_mish_group_norm(self.gemm(x), self.bias, self.hardtanh.min_val,
                                                 self.hardtanh.max_val, gn.num_groups, gn.weight, gn.bias, gn.eps)
