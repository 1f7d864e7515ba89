"""Does compute-sanitizer's initcheck see cuBLAS's bf16 GEMM write its output? A copy of that output, then of the
float32 GEMM's, each after a MARK (README, "The tail's backward in 16 bits"):

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool initcheck python experiments/bf16/diag_initcheck_cublas.py
"""
import torch
def mark(what):
    torch.cuda.synchronize(); print("MARK", what, flush=True)
w = torch.randn(1024, 256, device="cuda").bfloat16()
for rows in (131, 128):
    dy = torch.randn(rows, 1024, device="cuda").bfloat16()
    dx = dy @ w
    mark(f"{rows}: cuBLAS bf16 GEMM dy @ w written")
    c = dx.clone()
    mark(f"{rows}: its output cloned")
    dx32 = dy.float() @ w.float()
    c = dx32.clone()
    mark(f"{rows}: float32 GEMM's output cloned")
