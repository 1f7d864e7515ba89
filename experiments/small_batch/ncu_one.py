"""One small-batch contender, run a few times, for Nsight Compute to profile its third launch:

    ncu -k regex:bulk_kernel --launch-skip 2 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
        python experiments/small_batch/ncu_one.py bulk strict 1 3 1
    (variant, tier, M, splits, cfg or unroll; N = K = 8192)
"""
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from utils import build  # noqa: E402

variant, tier, M, splits, knob = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
mod = build.load_kernel("swapped_mma", kernels_dir=Path(__file__).resolve().parent)
N = K = 8192
w = torch.randn(N, K, device="cuda") / K**0.5
b = torch.randn(N, device="cuda")
x = torch.randn(M, K, device="cuda")
fn = mod.bulk_linear if variant == "bulk" else mod.swapped_linear
for _ in range(4):
    fn(x, w, b, splits, tier == "strict", knob)
torch.cuda.synchronize()
