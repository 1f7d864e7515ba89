"""`linear`'s small-batch schedule (kernels/common/gemm_small_batch.cuh) and its narrow tiles (65-256 rows,
kernels/common/gemm_dispatch.cuh) at both tiers, for compute-sanitizer: shapes that are no multiple of their
boxes and tiles, one and several slices of K, 1 to 64 rows of x, and 100 and 200 rows (blocks 64 and 128
columns wide on a 132-SM GPU), and 257 (the wide tiles).

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python experiments/small_batch/sanitize_small.py
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from utils import ops, precision  # noqa: E402

for M, N, K in ((1, 77, 36), (7, 1000, 1004), (64, 300, 2052), (33, 4096, 4096), (100, 1000, 1004), (200, 8200, 132),
                (257, 300, 260)):
    g = torch.Generator(device="cuda").manual_seed(M)
    x = torch.randn(M, K, device="cuda", generator=g)
    w = torch.randn(N, K, device="cuda", generator=g) / K**0.5
    b = torch.randn(N, device="cuda", generator=g)
    # Above 64 rows the TF32 tier is cuBLAS's (nothing of ours to check), whose TMA-stored output initcheck
    # cannot see written: PyTorch's float64 copy of it would be flagged.
    for tf32 in (False, True) if M <= 64 else (False,):
        with precision.tf32(tf32):
            out = ops.linear(x, w, b)
        err = ((out.double() - (x.double() @ w.double().T + b.double())).abs().max()).item()
        print(f"M={M} N={N} K={K} tf32={tf32}: max error {err:.1e}", flush=True)
for name, model in ops.WHOLE_MODELS.items():
    for M in (100, 129, 200):
        args = [a.cuda() if isinstance(a, torch.Tensor) else a for a in model.example(M, torch.Generator().manual_seed(M))]
        with precision.tf32(True):
            out, _ = model.op(*args)
        ref, _ = model.math(*[a.double() if isinstance(a, torch.Tensor) else a for a in args])
        print(f"{name} M={M} tf32=True: max error {(out.double() - ref).abs().max().item():.1e}", flush=True)
torch.cuda.synchronize()
