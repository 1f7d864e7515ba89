"""The small-batch regime, first look: out = x @ w.T + bias at M = 1..16 rows of x, K = N = 8192 (and 4096 x 4096),
every contender timed side by side (utils.bench.time_interleaved: L2 flushed, medians), against the floor of one
read of w at the device's measured read bandwidth.

Contenders: cuBLAS with TF32 off (nn.Linear's strict tier) and on; the workbook's `linear` (rung 10, 3xTF32 on
wgmma, the strict tier); weight_stream.cu (fp32 FMA on CUDA cores, w streamed once) at 1, 2, 4, 8 rows of w
per warp. Each is checked against a float64 reference first: the error relative to the output's largest value.

    python experiments/small_batch/probe.py --out $OUT/small_batch.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from utils import bench, build, precision, results  # noqa: E402

HERE = Path(__file__).resolve().parent


def read_GBps(probe, reps: int = 20) -> float:
    """A pure read of 1 GiB (kernels/probes/read_probe.cu): what streaming w once can reach."""
    x = torch.rand(2**28, device="cuda")
    t = bench.time_ms(lambda: probe.read_probe(x), reps=reps)
    return x.numel() * 4 / (t.median * 1e-3) / 1e9


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref).abs().max() / ref.abs().max()).item()


def at_tier(fn, tf32: bool):
    """fn run with PyTorch's fp32 matmul setting as the tier says."""
    def run():
        with precision.tf32(tf32):
            return fn()
    return run


def cases(shapes, ms, gbps: float):
    """(N, K, M, x, w, bias, the float64 reference, the floor in ms) for each "NxK" shape and M: w scaled by
    1/sqrt(K), seeded once per shape; the floor one read of w, x, out and bias at gbps."""
    for shape in shapes:
        N, K = map(int, shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(0)
        w = torch.randn(N, K, device="cuda", generator=g) / K**0.5
        b = torch.randn(N, device="cuda", generator=g)
        for M in ms:
            x = torch.randn(M, K, device="cuda", generator=g)
            ref = x.double() @ w.double().T + b.double()
            yield N, K, M, x, w, b, ref, (N * K + M * K + M * N + N) * 4 / (gbps * 1e9) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ms", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--shapes", nargs="+", default=["8192x8192", "4096x4096"], help="N x K")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    ours = build.load_kernel("weight_stream", kernels_dir=HERE)
    gemm10 = build.load_kernel("gemm_10_3xtf32")
    probe = build.load_kernel("read_probe", kernels_dir=ROOT / "kernels" / "probes")
    gbps = read_GBps(probe)
    rows = []
    print(f"{torch.cuda.get_device_name()}: pure read {gbps:.0f} GB/s", flush=True)
    for N, K, M, x, w, b, ref, floor_ms in cases(args.shapes, args.ms, gbps):
        fns = {"cuBLAS fp32": at_tier(lambda: F.linear(x, w, b), False),
               "cuBLAS TF32": at_tier(lambda: F.linear(x, w, b), True),
               "linear (3xTF32)": at_tier(lambda: gemm10.linear(x, w, b, None), False)}
        for r in (1, 2, 4, 8):
            fns[f"stream R={r}"] = at_tier(lambda r=r: ours.weight_stream(x, w, b, r), False)
        errs = {name: rel_err(fn(), ref) for name, fn in fns.items()}
        times = bench.time_interleaved(fns, reps=args.reps)
        for name, t in times.items():
            rows.append({"N": N, "K": K, "M": M, "contender": name, "median_ms": t.median,
                         "p20_ms": t.p20, "p80_ms": t.p80, "floor_ms": floor_ms,
                         "x_floor": t.median / floor_ms, "rel_err": errs[name]})
        best = min(times, key=lambda n: times[n].median)
        print(f"N=K={N}x{K} M={M:2d} floor {floor_ms:.4f} ms | " + " | ".join(
            f"{n} {times[n].median:.4f} ({times[n].median / floor_ms:.2f}x, err {errs[n]:.1e})" for n in times)
            + f" | best {best}", flush=True)
    record = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "git_commit": results.git_commit(), "read_GBps": gbps, "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(record, indent=1))
    print("\nM  N=K   " + "  ".join(f"{n:>16s}" for n in dict.fromkeys(r["contender"] for r in rows)))
    for (N, M) in dict.fromkeys((r["N"], r["M"]) for r in rows):
        sel = [r for r in rows if r["N"] == N and r["M"] == M]
        print(f"{M:<3d}{N:<6d}" + "  ".join(f"{r['median_ms']:>9.4f} {r['x_floor']:>5.2f}x" for r in sel))
    return 0


if __name__ == "__main__":
    sys.exit(main())
