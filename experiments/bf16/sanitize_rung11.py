"""Rung 11 on shapes no tile divides, bf16 and fp16, the TMA path and the padded-K path, for compute-sanitizer:

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python experiments/bf16/sanitize_rung11.py

Each output is also checked against float64 here, so that a run the tool finds clean is a correct run."""
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from utils import build  # noqa: E402

gemm = build.load_kernel("gemm_11_wgmma_bf16").gemm
for dtype in (torch.bfloat16, torch.float16):
    for M, N, K in [(130, 257, 1032), (37, 129, 65), (300, 520, 64)]:  # TMA, padded K, one stage
        g = torch.Generator(device="cuda").manual_seed(M + N + K)
        x = torch.randn(M, K, device="cuda", generator=g).to(dtype)
        w = (torch.randn(N, K, device="cuda", generator=g) / K**0.5).to(dtype)
        out = gemm(x, w)
        ref = F.linear(x.double(), w.double())
        err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
        assert out.dtype == dtype and err < 1e-2, (dtype, M, N, K, err)
        print(f"{str(dtype)[6:]} {M}x{N}x{K}: error {err:.1e}", flush=True)
torch.cuda.synchronize()
