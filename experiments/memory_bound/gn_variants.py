"""GroupNorm team shapes: build GROUPNORM_TEAM_VECS x UNROLL variants in parallel, verify each on
odd shapes, time all at the problems' shapes with same-size copies in one run."""
import json, os, sys, time
from concurrent.futures import ProcessPoolExecutor
sys.path.insert(0, os.getcwd())
import torch
import torch.nn.functional as F
from utils import build, bench

VARIANTS = [(1, 2), (2, 2), (4, 2), (4, 1)]  # (VECS, UNROLL)
def flags(v, u):  # the default (4, 2) is the plain build the tests use
    return [] if (v, u) == (4, 2) else [f"-DGROUPNORM_TEAM_VECS={v}", f"-DGROUPNORM_TEAM_UNROLL={u}"]
def _build(args):
    name, fl = args
    t = time.time(); build.load_kernel(name, extra_cuda_cflags=fl); return name, fl, time.time() - t

def rnd(*s, scale=1.0, off=0.0):
    return torch.randn(*s, device="cuda") * scale + off

if __name__ == "__main__":
    out = os.environ.get("OUT", "/tmp")
    jobs = [(n, flags(*v)) for v in VARIANTS for n in ("groupnorm", "min_bias_broadcast")]
    with ProcessPoolExecutor(8) as ex:
        for name, fl, dt in ex.map(_build, jobs):
            print(f"built {name} {fl} in {dt:.0f}s", flush=True)
    mods = {v: (build.load_kernel("groupnorm", extra_cuda_cflags=flags(*v)),
                build.load_kernel("min_bias_broadcast", extra_cuda_cflags=flags(*v))) for v in VARIANTS}
    torch.manual_seed(0)
    bad = 0
    # correctness: D = 4..516 (team and block paths), odd N
    for N, C, G in [(37, 1024, 256), (37, 1024, 64), (5, 48, 4), (5, 80, 4), (7, 144, 4), (3, 400, 4),
                    (3, 512, 1), (3, 2048, 4), (3, 2064, 4), (3, 115, 5), (1024, 8192, 512)]:
        x, g, b, bias = rnd(N, C, off=3.0), rnd(C), rnd(C), rnd(C)
        ref = F.group_norm(x, G, g, b, 1e-5)
        ref94 = F.group_norm(F.mish(F.hardtanh(x + bias)), G, g, b, 1e-5)
        refmin = ref.min(dim=1, keepdim=True)[0]
        for v, (gn, mb) in mods.items():
            for what, got, want in [("welford", gn.group_norm_welford(x, G, g, b, 1e-5), ref),
                                    ("94", gn.bias_hardtanh_mish_group_norm(x, bias, -1, 1, G, g, b, 1e-5), ref94),
                                    ("rowmin", mb.group_norm_row_min(x, G, g, b, 1e-5), refmin)]:
                if not torch.allclose(got, want, atol=1e-4, rtol=1e-4):
                    bad += 1
                    print("WRONG", v, what, (N, C, G), (got - want).abs().max().item(), flush=True)
    x = rnd(4, 64); x[1, 5] = float("nan")
    for v, (gn, mb) in mods.items():
        r = mb.group_norm_row_min(x, 4, rnd(64), rnd(64), 1e-5)
        if not (torch.isnan(r[1]).all() and not torch.isnan(r[[0, 2, 3]]).any()):
            bad += 1; print("WRONG nan", v, r.flatten().tolist())
    print("verified, wrong:", bad, flush=True)

    results = {}
    for pid, N, C, G in [(94, 1024, 8192, 256), (62, 1024, 8192, 512), (75, 1024, 8192, 512), (37, 32768, 4096, 64)]:
        x, g, b, bias = rnd(N, C), rnd(C), rnd(C), rnd(C)
        b4 = rnd(1, C, 1, 1)
        nbytes = x.numel() * 4
        cont = {"copy": lambda: x.clone(), "read (x.sum)": lambda: x.sum()}
        for v, (gn, mb) in mods.items():
            if pid == 94:
                cont[f"94 v{v}"] = lambda gn=gn: gn.bias_hardtanh_mish_group_norm(x, bias, -1, 1, G, g, b, 1e-5)
                cont[f"gn v{v}"] = lambda gn=gn: gn.group_norm_welford(x, G, g, b, 1e-5)
            elif pid == 62:
                cont[f"62 v{v}"] = lambda gn=gn: gn.group_norm_leaky_relu_x2(x, G, g, b, 1e-5, 0.01)
            elif pid == 37:
                cont[f"37 v{v}"] = lambda gn=gn: gn.swish_bias_group_norm(x, bias, G, g, b, 1e-5)
            else:
                cont[f"rowmin v{v}"] = lambda mb=mb: mb.group_norm_row_min(x, G, g, b, 1e-5)
                cont[f"tail v{v}"] = lambda mb=mb: mb.group_norm_min_bias(x, G, g, b, 1e-5, b4)
        rows = bench.compare(cont, baseline="copy", reps=50, progress=False)
        copy = rows[0]["median_ms"]
        print(f"--- problem {pid} ({N} x {C} / {G}): copy {copy*1e3:.1f} us = {2*nbytes/copy/1e6:.0f} GB/s")
        for r in rows:
            moved = nbytes if r["contender"].startswith(("rowmin", "read")) else 2 * nbytes
            gbps = moved / r["median_ms"] / 1e6
            r["GBps_moved"] = gbps
            print(f"  {r['contender']:<22} {r['median_ms']*1e3:8.1f} us  {gbps:6.0f} GB/s  {100*gbps/(2*nbytes/copy/1e6):5.1f}% of copy", flush=True)
        results[pid] = rows
    json.dump(results, open(f"{out}/gn_variants.json", "w"), indent=1)
