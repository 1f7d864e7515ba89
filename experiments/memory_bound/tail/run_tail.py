"""Overlapped tail for 75: variants built in parallel, every element checked, then timed against copy / read / write / the two kernels."""
import os, sys
sys.path.insert(0, os.getcwd()); sys.path.insert(0, os.path.join(os.getcwd(), "scratch", "tail"))
import torch, torch.nn.functional as F
from utils import build
from runlib import build_all, ceilings, inputs75, time_rounds
TAIL = os.path.join(os.getcwd(), "scratch", "tail"); EXP = os.path.join(os.getcwd(), "scratch", "exp")
RF = ("-DTAIL_DYNAMIC=0", "-DTAIL_LAG=1000000", "-DTAIL_RUNS=1")
V = {"rf u1 c64": RF, "rf u1 c256": RF + ("-DTAIL_CHANNELS=256",),
     "lag4 u1 c64": ("-DTAIL_DYNAMIC=0", "-DTAIL_LAG=4", "-DTAIL_RUNS=1"),
     "lag4 u1 c256": ("-DTAIL_DYNAMIC=0", "-DTAIL_LAG=4", "-DTAIL_RUNS=1", "-DTAIL_CHANNELS=256"),
     "lag3 u1 c128": ("-DTAIL_DYNAMIC=0", "-DTAIL_LAG=3", "-DTAIL_RUNS=1", "-DTAIL_CHANNELS=128"),
     "rdy u1 c64 nopf": ("-DTAIL_DYNAMIC=2", "-DTAIL_RUNS=1", "-DTAIL_PREFETCH_ITEM=0"),
     "rdy u1 c256 nopf": ("-DTAIL_DYNAMIC=2", "-DTAIL_RUNS=1", "-DTAIL_PREFETCH_ITEM=0", "-DTAIL_CHANNELS=256")}
JOBS = [("probe", (), EXP), ("min_bias_broadcast", (), None), ("tail_pdl", (), TAIL)] + [("tail_overlap", f, TAIL) for f in V.values()]
if __name__ == "__main__":
    build_all(JOBS)
    probe = build.load_kernel("probe", kernels_dir=EXP)
    mb = build.load_kernel("min_bias_broadcast")
    pdl = build.load_kernel("tail_pdl", kernels_dir=TAIL)
    mods = {k: build.load_kernel("tail_overlap", extra_cuda_cflags=list(f), kernels_dir=TAIL) for k, f in V.items()}
    torch.manual_seed(0)
    bad = 0
    for N, C, G in [(1024, 8192, 512), (1023, 8192, 512), (37, 1024, 64), (130, 256, 16), (1, 64, 4), (257, 520, 130),
                    (513, 96, 8), (64, 8192, 512), (300, 4096, 128), (2050, 1000, 250)]:
        x = torch.randn(N, C, device="cuda") * 2 + 0.5; g = torch.randn(C, device="cuda"); b = torch.randn(C, device="cuda")
        bias = torch.randn(1, C, 1, 1, device="cuda")
        ref = torch.min(F.group_norm(x, G, g, b, 1e-5), dim=1, keepdim=True)[0] + bias
        two = mb.group_norm_min_bias(x, G, g, b, 1e-5, bias)
        if N % 4 == 0:
            for p_ in (False, True):
                if not torch.equal(pdl.group_norm_min_bias_pdl(x, G, g, b, 1e-5, bias, p_), two):
                    bad += 1; print("MISMATCH pdl", p_, (N, C, G), flush=True)
        for k, m in mods.items():
            for rep in range(5):
                out = m.group_norm_min_bias_overlap(x, G, g, b, 1e-5, bias)
                ok = out.shape == ref.shape and torch.equal(out, two) and (out - ref).abs().max().item() < 1e-4
                if not ok:
                    bad += 1; print("MISMATCH", (N, C, G), k, rep, out.shape, (out - two).abs().max().item(), flush=True)
        print("checked", (N, C, G), "max diff vs ref", (two - ref).abs().max().item(), flush=True)
    print("mismatches:", bad, flush=True)
    N, C, G, x, g, b, bias, dst, nb = inputs75()
    rowmin = mb.group_norm_row_min(x, G, g, b, 1e-5)
    cont = {**ceilings(x, dst, nb, probe), "zeros(9, int32)": (lambda: torch.zeros(9, dtype=torch.int32, device="cuda"), 36),
            "row_min": (lambda: mb.group_norm_row_min(x, G, g, b, 1e-5), nb),
            "broadcast": (lambda: mb.min_bias_broadcast(rowmin, bias), nb),
            "two kernels": (lambda: mb.group_norm_min_bias(x, G, g, b, 1e-5, bias), 2 * nb),
            "two kernels, launchEx": (lambda: pdl.group_norm_min_bias_pdl(x, G, g, b, 1e-5, bias, False), 2 * nb),
            "two kernels, PDL": (lambda: pdl.group_norm_min_bias_pdl(x, G, g, b, 1e-5, bias, True), 2 * nb)}
    for k, m in mods.items():
        cont[f"overlap {k}"] = (lambda m=m: m.group_norm_min_bias_overlap(x, G, g, b, 1e-5, bias), 2 * nb)
    res = time_rounds(cont, 2, nb, "tail.json", 22)

    # timelines at 75's shape
    R = 128; S = (N + R - 1) // R
    for k in ("rf u1 c256", "lag4 u1 c256", "rdy u1 c256 nopf"):
        m = mods[k]; K = int(k.split(" c")[1].split()[0]); chunks = (C + K - 1) // K; total = N + S * chunks
        for rep in range(3):
            tr = torch.zeros(total, 4, dtype=torch.int64, device="cuda")
            torch.cuda.synchronize(); _ = torch.empty(int(1e8), device="cuda").amax(); torch.cuda.synchronize()
            m.group_norm_min_bias_overlap_traced(x, G, g, b, 1e-5, bias, tr); torch.cuda.synchronize()
        tr = tr.cpu(); torch.save(tr, os.path.join(os.environ.get("OUT", "/tmp"), f"trace_{k.replace(' ', '_')}.pt"))
        t0 = tr[:, 1].min().item(); T = (tr[:, 1:] - t0).double() / 1e3
        print(f"\n{k}: span {T[:, 2].max():.1f} us, blocks {len(set((tr[:, 0] & 0xffffffff).tolist()))}")
        print(" strip | rows claimed..done (us) | writes claimed..ready..done (us)")
        for s_ in range(S):
            r_ = list(range(s_ * R, min(N, (s_ + 1) * R))); w_ = list(range(N + s_ * chunks, N + (s_ + 1) * chunks))
            print(f" {s_:5d} | {T[r_, 0].min():5.1f} .. {T[r_, 2].max():5.1f} (median row {float((T[r_, 2] - T[r_, 0]).median()):4.1f}) |"
                  f" {T[w_, 0].min():5.1f} .. {T[w_, 1].min():5.1f} .. {T[w_, 2].max():5.1f} (median wait {float((T[w_, 1] - T[w_, 0]).median()):4.1f}, write {float((T[w_, 2] - T[w_, 1]).median()):4.1f})")
        print(" us  | rows active | writes waiting | writes writing")
        isrow = torch.arange(total) < N
        for t in range(0, min(60, int(T[:, 2].max()) + 2), 2):
            ra = int(((T[:, 0] <= t) & (t < T[:, 2]) & isrow).sum()); ww = int(((T[:, 0] <= t) & (t < T[:, 1]) & ~isrow).sum())
            wr = int(((T[:, 1] <= t) & (t < T[:, 2]) & ~isrow).sum())
            print(f" {t:3d} | {ra:5d} | {ww:5d} | {wr:5d}")
