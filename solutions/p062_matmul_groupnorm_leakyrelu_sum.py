"""Problem 62, Matmul_GroupNorm_LeakyReLU_Sum, as a drop-in `ModelNew`.

What runs where, for a float32 x (N, in_features) on a CUDA device:

1. `self.fc(x)`, the GEMM with Linear's own bias: cuBLAS (aten::addmm), called on purpose and
   named in `allow_torch_ops`. It follows PyTorch's fp32 matmul setting as nn.Linear does: IEEE
   fp32 by default (the strict tier), TF32 tensor cores once the caller allows TF32.
2. `GroupNorm -> LeakyReLU -> x + x`: one kernel, workbook::group_norm_leaky_relu_x2
   (kernels/groupnorm.cu, notebook 06), with the eps and the slope the modules were built with.

Why this split, and what all four solutions share (the inherited constructor, the CPU path,
backward, torch.compile): solutions/__init__.py. Measured against eager and torch.compile,
TF32 off and on: notebooks/09_fused_solutions.ipynb, recorded in results/<device>/solutions.json.
"""
from utils import ops
from utils.kernelbench.p062_matmul_groupnorm_leakyrelu_sum import Model, get_init_inputs, get_inputs  # noqa: F401


class ModelNew(Model):
    allow_torch_ops = ("aten::addmm",)  # the GEMM: cuBLAS, on purpose (see above)

    def forward(self, x):
        gn = self.gn
        return ops.group_norm_leaky_relu_x2(self.fc(x), gn.num_groups, gn.weight, gn.bias, gn.eps,
                                            self.leaky_relu.negative_slope)
