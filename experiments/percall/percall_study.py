"""Per-call overhead study: ours vs eager vs torch.compile, host launch cost, direct launchers; rung 10 linear vs gemm."""
import json, os, sys, time, statistics
import torch, torch.nn.functional as F
from utils import bench, build, precision
from utils.chapters import session as chapter
from utils.problems import get_problem
OUT = os.environ["OUT"] + "/o"; os.makedirs(OUT, exist_ok=True)
chapter.quiet_inductor()
build.load_kernels(["gemm_10_3xtf32", "min_bias_broadcast", "groupnorm", "activations"])
res = {}
def host_us(fn, n=50):
    ts = []
    for _ in range(n):
        torch.cuda.synchronize(); s = time.perf_counter(); fn(); ts.append((time.perf_counter() - s) * 1e6)
    torch.cuda.synchronize(); return statistics.median(ts)
L = lambda k, n: build.launcher(k, n)
def direct(pid, new):
    if pid == 75:
        gn = new.group_norm
        return lambda x: L("min_bias_broadcast", "group_norm_min_bias")(L("gemm_10_3xtf32", "linear")(x, new.gemm.weight, new.gemm.bias), gn.num_groups, gn.weight, gn.bias, gn.eps, new.bias)
    return None
for pid in (94, 75, 37, 62):
    ref, new = chapter.solution_pair(pid, "full", "cuda", 0)
    p = get_problem(pid)
    (x,) = [t.cuda() for t in p.get_inputs("full", generator=torch.Generator().manual_seed(1))]
    for tf32 in (False, True):
        torch._dynamo.reset()
        with precision.tf32(tf32), torch.no_grad():
            models = {"eager": ref, "compile": torch.compile(ref), "ours": new}
            d = direct(pid, new)
            if d: models["ours-direct"] = lambda x, d=d: d(x)
            exp = ref(x)
            for n, m in models.items():
                o = m(x); torch.cuda.synchronize()
                assert torch.allclose(o, exp, atol=1e-2 if tf32 else 1e-4, rtol=1e-2 if tf32 else 1e-4), n
            row = {}
            for n, m in models.items():
                row[n] = {"host_us": host_us(lambda m=m: m(x))}
            for rnd in range(3):
                for n, m in models.items():
                    row[n].setdefault("per_call", []).append(bench.time_ms(lambda m=m: m(x), reps=50, sync_each=True).median)
            for n, m in models.items():
                row[n]["steady"] = bench.time_ms(lambda m=m: m(x), reps=50).median
            res[f"{pid}-{'tf32' if tf32 else 'ieee'}"] = row
            print(pid, "tf32" if tf32 else "ieee", {n: (round(r["host_us"]), [round(v, 3) for v in r["per_call"]], round(r["steady"], 3)) for n, r in row.items()}, flush=True)
    del ref, new, x; torch.cuda.empty_cache()
# rung 10 linear vs gemm, strict
g10 = build.load_kernel("gemm_10_3xtf32")
with precision.ieee_fp32(), torch.no_grad():
    for M, N, K in ((1024, 8192, 8192), (32768, 4096, 1024)):
        x = torch.randn(M, K, device="cuda"); w = torch.randn(N, K, device="cuda"); b = torch.randn(N, device="cuda")
        c = {"cublas sgemm": lambda: F.linear(x, w), "cublas addmm": lambda: F.linear(x, w, b), "gemm": lambda: g10.gemm(x, w),
             "linear": lambda: g10.linear(x, w, b, None), "gemm_split_in_smem": lambda: g10.gemm_split_in_smem(x, w)}
        row = {}
        for rnd in range(3):
            for n, f in c.items():
                row.setdefault(n, []).append(bench.time_ms(f, reps=30).median)
        res[f"rung10-{M}x{N}x{K}"] = row
        print(M, N, K, {n: [round(v, 3) for v in vs] for n, vs in row.items()}, flush=True)
json.dump(res, open(OUT + "/diag.json", "w"), indent=1)
