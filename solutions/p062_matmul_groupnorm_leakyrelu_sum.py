"""Problem 62, Matmul_GroupNorm_LeakyReLU_Sum, as a drop-in `ModelNew`.

What runs where, for a float32 x (N, in_features) on a CUDA device: the whole model is one GEMM
kernel, workbook::linear_group_norm_leaky_relu_x2 (kernels/fused_gemm_groupnorm.cu, notebook 09): x
@ W.T on the tensor cores with Linear's bias, GroupNorm, LeakyReLU and x + x in its epilogue, so the GEMM's output goes to memory only in training (kept once for the backward). Its precision follows PyTorch's fp32 matmul setting, as
nn.Linear's would: at the default (IEEE fp32, the strict tier) the GEMM is 3xTF32 with promoted
accumulation (rung 10 of the GEMM ladder), fp32-accurate, `self.fc`'s weight split on every call
(nothing derived from it is kept, so every write to it is seen; freeze() keeps its split on purpose,
utils/freezing.py); with TF32 allowed it is rung 9's 1xTF32. On a GPU other than sm_90, or inputs
the fused kernel does not take (K % 4 != 0, a group width it has no instance for), the op runs
workbook::linear (cuBLAS's addmm off sm_90, named in `allow_torch_ops`) and then the fused tail
workbook::group_norm_leaky_relu_x2 (kernels/groupnorm.cu, notebook 06): the same result, two
kernels.

Why this shape, and what all four solutions share (the inherited constructor, the CPU path,
training, autocast, freeze(), torch.compile): solutions/__init__.py. Measured against eager and
torch.compile: the forward, TF32 off and on, in notebooks/10_fused_solutions.ipynb, recorded in
results/<device>/solutions.json; a training step, TF32 off and on, and the forward under autocast in
notebooks/13_dropins_in_real_code.ipynb, recorded in training.json and autocast.json beside it.
"""
from utils import ops
from utils.freezing import Freezable
from utils.kernelbench.p062_matmul_groupnorm_leakyrelu_sum import Model, get_init_inputs, get_inputs  # noqa: F401


class ModelNew(Freezable, Model):
    # cuBLAS, on purpose: off sm_90 or on inputs the fused kernel does not take (addmm, mm), and the
    # backward's dx = dy @ W with TF32 allowed (mm: faster there than a transposed copy and rung 9)
    allow_torch_ops = ("aten::addmm", "aten::mm")

    def forward(self, x):
        gn = self.gn
        return ops.linear_group_norm_leaky_relu_x2(x, self.fc.weight, self.fc.bias, gn.num_groups, gn.weight, gn.bias,
                                                   gn.eps, self.leaky_relu.negative_slope,
                                                   weight_residual=self.weight_residual)
