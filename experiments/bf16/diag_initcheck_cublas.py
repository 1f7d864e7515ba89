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
