"""One call of each row-min / GroupNorm variant, for ncu (builds already warm from gn_variants.py)."""
import os, sys
sys.path.insert(0, os.getcwd())
import torch
from utils import build
sys.argv += []
from gn_variants import VARIANTS, flags
x = torch.randn(1024, 8192, device="cuda"); g = torch.randn(8192, device="cuda"); b = torch.randn(8192, device="cuda")
bias = torch.randn(8192, device="cuda")
for v in VARIANTS:
    mb = build.load_kernel("min_bias_broadcast", extra_cuda_cflags=flags(*v))
    gn = build.load_kernel("groupnorm", extra_cuda_cflags=flags(*v))
    mb.group_norm_row_min(x, 512, g, b, 1e-5)
    gn.bias_hardtanh_mish_group_norm(x, bias, -1, 1, 256, g, b, 1e-5)
torch.cuda.synchronize()
