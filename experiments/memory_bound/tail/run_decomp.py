import os, sys
sys.path.insert(0, os.getcwd())
import torch
from utils import build, bench
TAIL = os.path.join(os.getcwd(), "scratch", "tail")
from concurrent.futures import ThreadPoolExecutor
VV = {"acq/rel": [], "fences": ["-DSTRIP_SYNC=0"], "acq/rel smem bias": ["-DSTRIP_BIAS_SMEM=1"], "acq/rel c32": ["-DSTRIP_CHANNELS=32"]}
with ThreadPoolExecutor(4) as ex:
    mods = dict(zip(VV, ex.map(lambda f: build.load_kernel("tail_strips", kernels_dir=TAIL, extra_cuda_cflags=f), VV.values())))
st = mods["acq/rel"]; mb = build.load_kernel("min_bias_broadcast")
pdl = build.load_kernel("tail_pdl", kernels_dir=TAIL)
N, C, G = 1024, 8192, 512
x = torch.randn(N, C, device="cuda"); g = torch.randn(C, device="cuda"); b = torch.randn(C, device="cuda")
bias = torch.randn(1, C, 1, 1, device="cuda"); dst = torch.empty_like(x)
rowmin = torch.empty(N, device="cuda"); done = torch.zeros(8, dtype=torch.int32, device="cuda"); out = torch.empty(1, C, N, 1, device="cuda")
st.row_min_strips_only(x, G, g, b, 1e-5, rowmin, done); torch.cuda.synchronize(); print("done flags", done.tolist())
rm2 = rowmin.view(N, 1)
rows = [("copy", lambda: dst.copy_(x)), ("zeros(8)", lambda: torch.zeros(8, dtype=torch.int32, device="cuda")),
        ("row_min (kernel file)", lambda: mb.group_norm_row_min(x, G, g, b, 1e-5)),
        ("row_min_strips_only", lambda: st.row_min_strips_only(x, G, g, b, 1e-5, rowmin, done)),
        ("broadcast (kernel file)", lambda: mb.min_bias_broadcast(rm2, bias)),
        ("broadcast_strips_only", lambda: st.broadcast_strips_only(rowmin, bias, done, out)),
        ("two kernels", lambda: mb.group_norm_min_bias(x, G, g, b, 1e-5, bias)),
        ("two kernels PDL", lambda: pdl.group_norm_min_bias_pdl(x, G, g, b, 1e-5, bias, True)),
        ("strips no PDL", lambda: st.group_norm_min_bias_strips(x, G, g, b, 1e-5, bias, False, True))]
for k, m in mods.items():
    rows += [(f"rm {k}", lambda m=m: m.row_min_strips_only(x, G, g, b, 1e-5, rowmin, done)),
             (f"bc {k}", lambda m=m: m.broadcast_strips_only(rowmin, bias, done, out)),
             (f"strips PDL {k}", lambda m=m: m.group_norm_min_bias_strips(x, G, g, b, 1e-5, bias, True, True))]
import torch.nn.functional as F
ref = mb.group_norm_min_bias(x, G, g, b, 1e-5, bias)
for k, m in mods.items():
    for rep in range(10):
        assert torch.equal(m.group_norm_min_bias_strips(x, G, g, b, 1e-5, bias, True, rep % 2 == 0), ref), k
print("checked")
for name, fn in rows:
    ts = [bench.time_ms(fn, reps=100).median for _ in range(3)]
    print(f"{name:<30} {min(ts)*1e3:6.1f} us  ({', '.join(f'{t*1e3:.1f}' for t in ts)})", flush=True)
