import os, sys
sys.path.insert(0, os.getcwd())
import torch
from utils import build, bench
TAIL = os.path.join(os.getcwd(), "scratch", "tail")
wp = build.load_kernel("write_probe", kernels_dir=TAIL); mb = build.load_kernel("min_bias_broadcast")
N, C = 1024, 8192
rowmin = torch.randn(N, 1, device="cuda"); bias = torch.randn(1, C, 1, 1, device="cuda"); out = torch.empty(C, N, device="cuda")
ref = mb.min_bias_broadcast(rowmin, bias).view(C, N)
nb = N * C * 4
rows = [("fill_", lambda: out.fill_(1.0)), ("broadcast kernel", lambda: mb.min_bias_broadcast(rowmin, bias))]
for R in (128, 256, 512, 1024):
    for cpb in (8, 32, 64, 256):
        out.zero_(); wp.strip_write(rowmin, bias, out, R, cpb); assert torch.equal(out, ref), (R, cpb)
        rows.append((f"strips R={R} cpb={cpb}", lambda R=R, cpb=cpb: wp.strip_write(rowmin, bias, out, R, cpb)))
for name, fn in rows:
    t = min(bench.time_ms(fn, reps=100).median for _ in range(2))
    print(f"{name:<24} {t*1e3:6.1f} us {nb/t/1e6:6.0f} GB/s", flush=True)
