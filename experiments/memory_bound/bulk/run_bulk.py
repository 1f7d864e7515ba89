"""Bulk-copy row minimum (+ PDL broadcast): variants built in parallel, every element checked, timed against copy / read / the team kernel."""
import os, sys
sys.path.insert(0, os.getcwd()); sys.path.insert(0, os.path.join(os.getcwd(), "scratch", "tail"))
import torch, torch.nn.functional as F
from utils import build
from runlib import build_all, ceilings, inputs75, time_rounds
HERE = os.path.join(os.getcwd(), "scratch", "bulk"); EXP = os.path.join(os.getcwd(), "scratch", "exp")
V = {"smem64 u2": ("-DBULK_SMEM=65536",), "smem96 u2": (), "smem96 u1": ("-DBULK_RUNS=1",),
     "smem128 u2": ("-DBULK_SMEM=131072",), "smem192 u2": ("-DBULK_SMEM=196608",), "smem96 u2 notrigger": ("-DBULK_TRIGGER=0",)}
JOBS = [("probe", (), EXP), ("min_bias_broadcast", (), None)] + [("rowmin_bulk", f, HERE) for f in V.values()]
if __name__ == "__main__":
    build_all(JOBS)
    probe = build.load_kernel("probe", kernels_dir=EXP)
    mb = build.load_kernel("min_bias_broadcast")
    mods = {k: build.load_kernel("rowmin_bulk", extra_cuda_cflags=list(f), kernels_dir=HERE) for k, f in V.items()}
    torch.manual_seed(0)
    bad = 0
    for N, C, G in [(1024, 8192, 512), (1023, 8192, 512), (37, 1024, 64), (130, 256, 16), (1, 64, 4), (257, 520, 130),
                    (513, 96, 8), (64, 8192, 512), (300, 4096, 128), (2050, 1000, 250), (5, 16384, 1024)]:
        x = torch.randn(N, C, device="cuda") * 2 + 0.5; g = torch.randn(C, device="cuda"); b = torch.randn(C, device="cuda")
        bias = torch.randn(1, C, 1, 1, device="cuda")
        ref = torch.min(F.group_norm(x, G, g, b, 1e-5), dim=1, keepdim=True)[0]
        team = mb.group_norm_row_min(x, G, g, b, 1e-5)
        two = mb.group_norm_min_bias(x, G, g, b, 1e-5, bias)
        for k, m in mods.items():
            if C * 4 > {"smem64": 65536, "smem96": 98304, "smem128": 131072, "smem192": 196608}[k.split()[0]]:
                continue
            for rep in range(3):
                out = m.row_min_bulk(x, G, g, b, 1e-5)
                ok = out.shape == ref.shape and torch.equal(out, team)
                if N % 4 == 0:
                    for pdl in (False, True):
                        o2 = m.min_bias_bulk(x, G, g, b, 1e-5, bias, pdl)
                        ok = ok and torch.equal(o2, two)
                if not ok:
                    bad += 1; print("MISMATCH", (N, C, G), k, rep, flush=True)
        print("checked", (N, C, G), "team vs ref", (team - ref).abs().max().item(), flush=True)
    print("mismatches:", bad, flush=True)
    N, C, G, x, g, b, bias, dst, nb = inputs75()
    cont = {**ceilings(x, dst, nb, probe), "row_min team": (lambda: mb.group_norm_row_min(x, G, g, b, 1e-5), nb),
            "tail two kernels": (lambda: mb.group_norm_min_bias(x, G, g, b, 1e-5, bias), 2 * nb)}
    for k, m in mods.items():
        cont[f"row_min bulk {k}"] = (lambda m=m: m.row_min_bulk(x, G, g, b, 1e-5), nb)
        cont[f"tail bulk {k}"] = (lambda m=m: m.min_bias_bulk(x, G, g, b, 1e-5, bias, False), 2 * nb)
        cont[f"tail bulk+pdl {k}"] = (lambda m=m: m.min_bias_bulk(x, G, g, b, 1e-5, bias, True), 2 * nb)
    res = time_rounds(cont, 2, nb, "bulk.json", 32)
