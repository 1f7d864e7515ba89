"""Problem 75, Gemm_GroupNorm_Min_BiasAdd, as a drop-in `ModelNew`.

What runs where, for a float32 x (N, in_features) on a CUDA device:

1. The GEMM with Linear's own bias, `self.gemm`'s weight and bias: workbook::linear. It follows
   PyTorch's fp32 matmul setting as nn.Linear does. At the default (IEEE fp32, the strict tier) on
   an sm_90 GPU it is rung 10 of the GEMM ladder (kernels/gemm_10_3xtf32.cu): 3xTF32 on the tensor
   cores, fp32-accurate, the bias added in its epilogue; the weight's split is kept between calls
   while the weight is unchanged. With TF32 allowed, or on another GPU,
   it is cuBLAS's addmm, nn.Linear's own GEMM, named in `allow_torch_ops`.
2. `GroupNorm -> min over channels -> + bias(1, C, 1, 1)`: workbook::group_norm_min_bias
   (kernels/min_bias_broadcast.cu, notebook 07). One kernel reads the GEMM's output once and keeps
   each row's minimum of the normalised values, with no normalised tensor in memory; a second,
   launched as its programmatic dependent, writes the broadcast. The output has the reference's
   shape, (1, C, N, 1): (N, 1) + (1, C, 1, 1) broadcasts, it is not an error (seed 002's slip).
   Its backward passes the minimum's gradient to the element it selected, as torch.min does.

Why this split, and what all four solutions share (the inherited constructor, the CPU path,
backward, torch.compile): solutions/__init__.py. Measured against eager and torch.compile,
TF32 off and on: notebooks/09_fused_solutions.ipynb, recorded in results/<device>/solutions.json.
"""
from utils import ops
from utils.kernelbench.p075_gemm_groupnorm_min_biasadd import Model, get_init_inputs, get_inputs  # noqa: F401


class ModelNew(Model):
    allow_torch_ops = ("aten::addmm",)  # the GEMM with TF32 allowed, or off sm_90: cuBLAS, on purpose

    def forward(self, x):
        gn = self.group_norm
        y = ops.linear(x, self.gemm.weight, self.gemm.bias)
        return ops.group_norm_min_bias(y, gn.num_groups, gn.weight, gn.bias, gn.eps, self.bias)
