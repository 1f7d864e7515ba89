"""What run_tail.py, run_strips.py and run_bulk.py share (folded here after the runs; each defined it inline):
building (name, flags, kernels_dir) jobs in parallel, and timing contenders in rounds with a table against the copy."""
import json, os, time
from concurrent.futures import ProcessPoolExecutor
from utils import build, bench


def _build(job):
    t = time.time()
    build.load_kernel(job[0], extra_cuda_cflags=list(job[1]), kernels_dir=job[2])
    return job[0], job[1], time.time() - t


def build_all(jobs, workers=10):
    with ProcessPoolExecutor(workers) as ex:
        for name, flags, dt in ex.map(_build, jobs):
            print(f"built {name} {flags} {dt:.0f}s", flush=True)


def time_rounds(cont, rounds, nb, out_name, width):
    """cont: {name: (fn, bytes moved)}, one of them "copy"; nb: the tensor's bytes. Best of `rounds` medians."""
    res = {}
    for _ in range(rounds):
        for name, (fn, _moved) in cont.items():
            res.setdefault(name, []).append(bench.time_ms(fn, reps=100).median)
    copy = min(res["copy"])
    for name, ts in res.items():
        t, moved = min(ts), cont[name][1]
        print(f"{name:<{width}} {t*1e3:7.1f} us {moved/t/1e6:6.0f} GB/s {100*copy/t*moved/(2*nb):5.1f}% of copy  "
              f"({', '.join(f'{v*1e3:.1f}' for v in ts)})")
    json.dump(res, open(os.path.join(os.environ.get("OUT", "/tmp"), out_name), "w"), indent=1)
    return res


def inputs75():
    """Problem 75's tail at full size: N, C, G, x, gamma, beta, bias, a copy destination, x's bytes."""
    import torch
    N, C, G = 1024, 8192, 512
    x = torch.randn(N, C, device="cuda"); g = torch.randn(C, device="cuda"); b = torch.randn(C, device="cuda")
    bias = torch.randn(1, C, 1, 1, device="cuda"); dst = torch.empty_like(x)
    return N, C, G, x, g, b, bias, dst, x.numel() * 4


def ceilings(x, dst, nb, probe):
    """The yardsticks every run times first: a copy, the plain-load pure read, a fill."""
    return {"copy": (lambda: dst.copy_(x), 2 * nb), "read probe": (lambda: probe.read_probe(x, 1), nb),
            "fill_": (lambda: dst.fill_(1.0), nb)}
