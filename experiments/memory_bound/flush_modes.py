"""Does the L2 flush's write-back land on the timed kernel? Time memory-bound kernels with the
usual zeroing flush (L2 left full of dirty lines) and with a reading flush (L2 left clean)."""
import json, os, sys
sys.path.insert(0, os.getcwd()); sys.path.insert(0, os.path.join(os.getcwd(), "scratch"))
import torch
from utils import build, bench
from gn_variants import flags

from flushlib import time_ms, FLUSH  # the timer and flushes this run defined inline, moved there for later runs

V = [(1, 2), (2, 2), (4, 2)]
mods = {v: (build.load_kernel("groupnorm", extra_cuda_cflags=flags(*v)),
            build.load_kernel("min_bias_broadcast", extra_cuda_cflags=flags(*v))) for v in V}
res = {}
for N, C in [(1024, 8192), (32768, 4096)]:
    x = torch.randn(N, C, device="cuda"); g = torch.randn(C, device="cuda"); b = torch.randn(C, device="cuda")
    bias = torch.randn(C, device="cuda"); b4 = torch.randn(1, C, 1, 1, device="cuda")
    out = torch.empty_like(x)
    nb = x.numel() * 4
    cont = {"copy": (lambda: out.copy_(x), 2 * nb), "read x.amax": (lambda: x.amax(), nb),
            "write out.fill_": (lambda: out.fill_(1.0), nb)}
    if N == 1024:
        for v, (gn, mb) in mods.items():
            cont[f"rowmin {v}"] = (lambda mb=mb: mb.group_norm_row_min(x, 512, g, b, 1e-5), nb)
            cont[f"tail75 {v}"] = (lambda mb=mb: mb.group_norm_min_bias(x, 512, g, b, 1e-5, b4), 2 * nb)
            cont[f"94 {v}"] = (lambda gn=gn: gn.bias_hardtanh_mish_group_norm(x, bias, -1, 1, 256, g, b, 1e-5), 2 * nb)
            cont[f"62 {v}"] = (lambda gn=gn: gn.group_norm_leaky_relu_x2(x, 512, g, b, 1e-5, 0.01), 2 * nb)
        cont["broadcast"] = (lambda: mods[(2, 2)][1].min_bias_broadcast(x[:, :1].contiguous(), b4), nb)
    else:
        for v, (gn, mb) in mods.items():
            cont[f"37 {v}"] = (lambda gn=gn: gn.swish_bias_group_norm(x, bias, 64, g, b, 1e-5), 2 * nb)
    print(f"--- {N} x {C}: {'contender':<18}" + "".join(f"{m:>22}" for m in FLUSH), flush=True)
    for name, (fn, moved) in cont.items():
        row = {m: time_ms(fn, f) for m, f in FLUSH.items()}
        res[f"{N}x{C} {name}"] = {"bytes": moved, **row}
        print(f"    {name:<28}" + "".join(f"{row[m]*1e3:9.1f} us {moved/row[m]/1e6:6.0f} GB/s" for m in FLUSH), flush=True)
json.dump(res, open(os.path.join(os.environ.get("OUT", "/tmp"), "flush_modes.json"), "w"), indent=1)
