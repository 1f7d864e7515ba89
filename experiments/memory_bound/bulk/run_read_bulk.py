"""A pure read by bulk async copies against the plain-load read probe and a copy, 33.5 MB and 1 GiB."""
import os, sys
sys.path.insert(0, os.getcwd())
import torch
from utils import build, bench
from concurrent.futures import ThreadPoolExecutor
HERE = os.path.join(os.getcwd(), "scratch", "bulk")
V = {"chunk32K": [], "chunk16K": ["-DRB_CHUNK=16384"], "chunk64K": ["-DRB_CHUNK=65536"]}
with ThreadPoolExecutor(4) as ex:
    mods = dict(zip(V, ex.map(lambda f: build.load_kernel("read_bulk", kernels_dir=HERE, extra_cuda_cflags=f), V.values())))
    rp = ex.submit(build.load_kernel, "read_probe").result()
for numel in (1024 * 8192, 1 << 28):
    x = torch.randn(numel, device="cuda"); dst = torch.empty_like(x); nb = numel * 4
    for k, m in mods.items():
        out = m.read_bulk(x, 2, 1); assert out.min().item() == x.min().item(), k
    rows = [("copy", lambda: dst.copy_(x), 2 * nb), ("read_probe (plain loads)", lambda: rp.read_probe(x), nb)]
    for k, m in mods.items():
        kb = int(k[5:-1])
        for st, bps in [(3, 1), (4, 1), (6, 1), (12, 1), (3, 2), (2, 3), (4, 2)]:
            if st * kb * bps > 200 or st > 16:  # shared memory per SM
                continue
            rows.append((f"bulk {k} stages {st} x {bps}/SM", lambda m=m, st=st, bps=bps: m.read_bulk(x, st, bps), nb))
    res = [(n, min(bench.time_ms(fn, reps=50).median for _ in range(2)), b) for n, fn, b in rows]
    copy_gbps = res[0][2] / res[0][1] / 1e6
    print(f"\n{nb / 1e6:.1f} MB")
    for n, t, b in res:
        print(f"{n:<34} {t*1e3:8.1f} us {b/t/1e6:6.0f} GB/s {100 * b / t / 1e6 / copy_gbps:5.1f}% of copy", flush=True)
