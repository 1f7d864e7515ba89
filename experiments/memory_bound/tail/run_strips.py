"""Strip-announcing row minimum + PDL broadcast: variants built in parallel, every element checked, timed side by side."""
import os, sys
sys.path.insert(0, os.getcwd()); sys.path.insert(0, os.path.join(os.getcwd(), "scratch", "tail"))
import torch, torch.nn.functional as F
from utils import build
from runlib import build_all, ceilings, inputs75, time_rounds
TAIL = os.path.join(os.getcwd(), "scratch", "tail"); EXP = os.path.join(os.getcwd(), "scratch", "exp")
V = {"c64": (), "c32": ("-DSTRIP_CHANNELS=32",), "c128": ("-DSTRIP_CHANNELS=128",), "c256": ("-DSTRIP_CHANNELS=256",),
     "c64 notrigger": ("-DSTRIP_TRIGGER=0",)}
JOBS = [("probe", (), EXP), ("min_bias_broadcast", (), None), ("tail_pdl", (), TAIL)] + [("tail_strips", f, TAIL) for f in V.values()]
if __name__ == "__main__":
    build_all(JOBS)
    probe = build.load_kernel("probe", kernels_dir=EXP)
    mb = build.load_kernel("min_bias_broadcast")
    pdl = build.load_kernel("tail_pdl", kernels_dir=TAIL)
    mods = {k: build.load_kernel("tail_strips", extra_cuda_cflags=list(f), kernels_dir=TAIL) for k, f in V.items()}
    torch.manual_seed(0)
    bad = 0
    for N, C, G in [(1024, 8192, 512), (1028, 8192, 512), (36, 1024, 64), (132, 256, 16), (4, 64, 4), (256, 520, 130),
                    (516, 96, 8), (64, 8192, 512), (300, 4096, 128), (2048, 1000, 250), (4096, 8192, 512)]:
        x = torch.randn(N, C, device="cuda") * 2 + 0.5; g = torch.randn(C, device="cuda"); b = torch.randn(C, device="cuda")
        bias = torch.randn(1, C, 1, 1, device="cuda")
        ref = torch.min(F.group_norm(x, G, g, b, 1e-5), dim=1, keepdim=True)[0] + bias
        two = mb.group_norm_min_bias(x, G, g, b, 1e-5, bias)
        for k, m in mods.items():
            for rep in range(4):
                for p_ in (False, True):
                    out = m.group_norm_min_bias_strips(x, G, g, b, 1e-5, bias, p_, rep % 2 == 1)
                    if not (out.shape == two.shape and torch.equal(out, two)):
                        bad += 1; print("MISMATCH", (N, C, G), k, rep, p_, flush=True)
        print("checked", (N, C, G), "two vs ref", (two - ref).abs().max().item(), flush=True)
    print("mismatches:", bad, flush=True)
    N, C, G, x, g, b, bias, dst, nb = inputs75()
    cont = {**ceilings(x, dst, nb, probe), "row_min": (lambda: mb.group_norm_row_min(x, G, g, b, 1e-5), nb),
            "two kernels": (lambda: mb.group_norm_min_bias(x, G, g, b, 1e-5, bias), 2 * nb),
            "two kernels, PDL": (lambda: pdl.group_norm_min_bias_pdl(x, G, g, b, 1e-5, bias, True), 2 * nb)}
    for k, m in mods.items():
        cont[f"strips {k}"] = (lambda m=m: m.group_norm_min_bias_strips(x, G, g, b, 1e-5, bias, False, False), 2 * nb)
        cont[f"strips {k} PDL"] = (lambda m=m: m.group_norm_min_bias_strips(x, G, g, b, 1e-5, bias, True, False), 2 * nb)
        cont[f"strips {k} PDL memset"] = (lambda m=m: m.group_norm_min_bias_strips(x, G, g, b, 1e-5, bias, True, True), 2 * nb)
    res = time_rounds(cont, 3, nb, "strips.json", 28)
