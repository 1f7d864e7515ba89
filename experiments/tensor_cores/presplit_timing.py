#!/usr/bin/env python3
"""Rung 10 with pre-split operands against its first version (split in shared memory), rung 9,
cuBLAS TF32 and cuBLAS SGEMM, in one run per shape; every path verified against float64 at its
tier first. Also the weight-split cache's counters.

    python3 experiments/tensor_cores/presplit_timing.py [--reps 30] [--out results.json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from utils import bench, build, ladder, precision, results  # noqa: E402

SHAPES = [(1024, 8192, 8192), (32768, 4096, 1024)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    mods = build.load_kernels(["gemm_09_wgmma_tf32", "gemm_10_3xtf32"])
    r9, r10 = mods["gemm_09_wgmma_tf32"], mods["gemm_10_3xtf32"]
    report = {"meta": results.metadata(), "shapes": {}}
    for M, N, K in SHAPES:
        x, w = ladder.operands(M, N, K, seed=11)
        b = torch.randn(N, device="cuda")
        with precision.tf32(False):
            paths = {"rung 10 gemm (pre-split, both per call)": r10.gemm,
                     "rung 10 split in smem": r10.gemm_split_in_smem,
                     "rung 10 linear (kept w split), no bias": lambda x, w: r10.linear(x, w, torch.zeros_like(b))}
            checks = {name: ladder.verify(fn, x, w, "strict") for name, fn in paths.items()}
            checks["rung 9"] = ladder.verify(r9.gemm, x, w, "tf32")
        for name, (ok, detail) in checks.items():
            print(f"{M}x{N}x{K}  {name:<42} {'ok' if ok else 'FAIL'}  {detail}", flush=True)
        cost = bench.gemm_cost(M, N, K)
        rows = []
        with precision.tf32(False):
            r10.weight_split_cache_clear()
            rows += bench.compare({
                "cuBLAS SGEMM": lambda: torch.nn.functional.linear(x, w),
                "rung 10 gemm": lambda: r10.gemm(x, w),
                "rung 10 split in smem": lambda: r10.gemm_split_in_smem(x, w),
                "rung 10 linear (kept w split)": lambda: r10.linear(x, w, b),
                "cuBLAS addmm (strict)": lambda: torch.addmm(b, x, w.t()),
            }, cost=cost, baseline="cuBLAS SGEMM", reps=args.reps)
            stats = r10.weight_split_cache_stats().tolist()
        with precision.tf32(True):
            rows += bench.compare({"cuBLAS TF32": lambda: torch.nn.functional.linear(x, w),
                                   "rung 9": lambda: r9.gemm(x, w)}, cost=cost, baseline=None, reps=args.reps)
        sgemm = next(r["median_ms"] for r in rows if r["contender"] == "cuBLAS SGEMM")
        tf32 = next(r["median_ms"] for r in rows if r["contender"] == "cuBLAS TF32")
        print(f"\n{M}x{N}x{K}: weight-split cache [hits, misses, entries] = {stats}")
        print(f"{'contender':<32} {'ms':>8} {'TFLOP/s':>8} {'% cuBLAS TF32':>14} {'x SGEMM':>8}")
        for r in rows:
            print(f"{r['contender']:<32} {r['median_ms']:8.3f} {r.get('tflops', 0):8.1f} "
                  f"{100 * tf32 / r['median_ms']:13.1f}% {sgemm / r['median_ms']:7.2f}x", flush=True)
        report["shapes"][f"{M}x{N}x{K}"] = {"checks": {k: list(v) for k, v in checks.items()}, "rows": rows,
                                             "cache_stats": stats}
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
