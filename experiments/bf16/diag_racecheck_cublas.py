"""Are the hazards compute-sanitizer's racecheck reports inside cuBLAS's split-K bf16 GEMM (nvjet_..._splitK, the
backward of a bf16 model at 200 rows and C = 8192 or 4096, K = 256) cuBLAS's own? The backward's two GEMMs on random
bf16 tensors, nothing of the workbook's, each after a MARK (README, "A model in bf16 at a few rows"):

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool racecheck python experiments/bf16/diag_racecheck_cublas.py
"""
import torch


def mark(what):
    torch.cuda.synchronize()
    print("MARK", what, flush=True)


for C in (8192, 4096):
    x = torch.randn(200, 256, device="cuda").bfloat16()
    w = torch.randn(C, 256, device="cuda").bfloat16()
    dy = torch.randn(200, C, device="cuda").bfloat16()
    dx = dy @ w
    mark(f"C = {C}: dx = dy @ w, (200, {C}) @ ({C}, 256)")
    dw = dy.t() @ x
    mark(f"C = {C}: dw = dy.T @ x, ({C}, 200) @ (200, 256)")
