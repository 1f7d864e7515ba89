"""Problem 37, Matmul_Swish_Sum_GroupNorm, as a drop-in `ModelNew`.

What runs where, for a float32 x (N, in_features) on a CUDA device:

1. The GEMM with Linear's own bias, `self.matmul`'s weight and bias: workbook::linear. It follows
   PyTorch's fp32 matmul setting as nn.Linear does. At the default (IEEE fp32, the strict tier) on
   an sm_90 GPU it is rung 10 of the GEMM ladder (kernels/gemm_10_3xtf32.cu): 3xTF32 on the tensor
   cores, fp32-accurate, the bias added in its epilogue; the weight's split is kept between calls
   while the weight is unchanged. With TF32 allowed, or on another GPU,
   it is cuBLAS's addmm, nn.Linear's own GEMM, named in `allow_torch_ops`.
2. `x * sigmoid(x) -> + bias -> GroupNorm`: one kernel, workbook::swish_bias_group_norm
   (kernels/groupnorm.cu, notebook 06). At this problem's shape (32768 x 4096, 537 MB) the tail is
   the largest of the four: eager makes ten passes over the tensor, the kernel one read and one
   write.

Why this split, and what all four solutions share (the inherited constructor, the CPU path,
backward, torch.compile): solutions/__init__.py. Measured against eager and torch.compile,
TF32 off and on: notebooks/09_fused_solutions.ipynb, recorded in results/<device>/solutions.json.
"""
from utils import ops
from utils.kernelbench.p037_matmul_swish_sum_groupnorm import Model, get_init_inputs, get_inputs  # noqa: F401


class ModelNew(Model):
    allow_torch_ops = ("aten::addmm",)  # the GEMM with TF32 allowed, or off sm_90: cuBLAS, on purpose

    def forward(self, x):
        gn = self.group_norm
        y = ops.linear(x, self.matmul.weight, self.matmul.bias)
        return ops.swish_bias_group_norm(y, self.bias, gn.num_groups, gn.weight, gn.bias, gn.eps)
