"""Problem 62, Matmul_GroupNorm_LeakyReLU_Sum, as a drop-in `ModelNew`.

What runs where, for a float32 x (N, input_size) on a CUDA device:

1. The GEMM and Linear's own bias, `self.fc(x)`: cuBLAS (aten::addmm), called on purpose.
   It follows PyTorch's fp32 matmul setting exactly as nn.Linear does: IEEE fp32 SGEMM by
   default (the strict tier), TF32 tensor cores once the caller allows TF32 (the tf32 tier).
   At the strict tier it is the fastest GEMM this workbook has (notebook 03's ladder).
2. Everything after it, `GroupNorm -> LeakyReLU -> x + x`, in one kernel:
   workbook::group_norm_leaky_relu_x2 (kernels/groupnorm.cu, notebook 06), with the eps and
   the slope the modules were built with.

On the CPU the same op runs the reference PyTorch math, so the module moves between devices
like any nn.Module. Backward: the op's autograd formula (utils/ops.py) and nn.Linear's.
Inherits Model, so the constructor (eps and negative_slope included), parameter names, shapes
and creation order are the reference's: ModelNew(...).load_state_dict(Model(...).state_dict())
works.

Measured against eager and torch.compile, TF32 off and on: notebooks/09_fused_solutions.ipynb,
recorded in results/<device>/solutions.json.
"""
from utils import ops
from utils.kernelbench.p062_matmul_groupnorm_leakyrelu_sum import Model, get_init_inputs, get_inputs  # noqa: F401


class ModelNew(Model):
    allow_torch_ops = ("aten::addmm",)  # the GEMM: cuBLAS, on purpose (see above)

    def forward(self, x):
        gn = self.gn
        return ops.group_norm_leaky_relu_x2(self.fc(x), gn.num_groups, gn.weight, gn.bias, gn.eps,
                                            self.leaky_relu.negative_slope)
