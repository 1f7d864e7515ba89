"""Problem 37, Matmul_Swish_Sum_GroupNorm, as a drop-in `ModelNew`.

What runs where, for a float32 x (N, in_features) on a CUDA device:

1. The GEMM and Linear's own bias, `self.matmul(x)`: cuBLAS (aten::addmm), called on purpose.
   It follows PyTorch's fp32 matmul setting exactly as nn.Linear does: IEEE fp32 SGEMM by
   default (the strict tier), TF32 tensor cores once the caller allows TF32 (the tf32 tier).
   At the strict tier it is the fastest GEMM this workbook has (notebook 03's ladder).
2. Everything after it, `x * sigmoid(x) -> + bias -> GroupNorm`, in one kernel:
   workbook::swish_bias_group_norm (kernels/groupnorm.cu, notebook 06). At this problem's
   shape (32768 x 4096, 537 MB) the tail is the largest of the four: eager makes ten passes
   over the tensor, the kernel one read and one write.

On the CPU the same op runs the reference PyTorch math, so the module moves between devices
like any nn.Module. Backward: the op's autograd formula (utils/ops.py) and nn.Linear's.
Inherits Model, so the constructor, parameter names, shapes and creation order are the
reference's: ModelNew(...).load_state_dict(Model(...).state_dict()) works.

Measured against eager and torch.compile, TF32 off and on: notebooks/09_fused_solutions.ipynb,
recorded in results/<device>/solutions.json.
"""
from utils import ops
from utils.kernelbench.p037_matmul_swish_sum_groupnorm import Model, get_init_inputs, get_inputs  # noqa: F401


class ModelNew(Model):
    allow_torch_ops = ("aten::addmm",)  # the GEMM: cuBLAS, on purpose (see above)

    def forward(self, x):
        gn = self.group_norm
        return ops.swish_bias_group_norm(self.matmul(x), self.bias, gn.num_groups, gn.weight, gn.bias, gn.eps)
