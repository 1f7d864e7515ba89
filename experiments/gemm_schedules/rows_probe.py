"""The whole model against its row count at 65-256 rows: is the time flat within one row of 128-row tiles?

    python -m experiments.gemm_schedules.rows_probe [--problem 62] [--ms 65 96 127 128 129 192 256]

For each M and tier, side by side (bench.time_interleaved, L2 flushed, medians): the drop-in (its fused
kernel from 65 rows), nn.Linear's cuBLAS GEMM alone, and `linear` alone; the first two also on x padded
with zero rows to a multiple of 128 (no TMA box reads out of bounds). Prints one line per point.
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from utils import bench, ops, precision
from utils.chapters.session import solution_pair


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", type=int, default=62)
    ap.add_argument("--ms", type=int, nargs="*", default=[65, 96, 127, 128, 129, 192, 256])
    args = ap.parse_args(argv)
    _, model = solution_pair(args.problem, "full", "cuda")
    linear_layer = next(m for m in model.modules() if isinstance(m, torch.nn.Linear))
    w, b = linear_layer.weight.detach(), linear_layer.bias.detach()
    for tf32 in (True, False):
        with precision.tf32(tf32), torch.no_grad():
            for M in args.ms:
                x = torch.rand(M, w.shape[1], device="cuda")
                # x padded with zero rows to whole 128-row tiles: no row of a TMA box out of bounds
                xp = F.pad(x, (0, 0, 0, -M % 128))
                t = bench.time_interleaved({"model": lambda: model(x), "model, x padded": lambda: model(xp),
                                            "cuBLAS": lambda: F.linear(x, w, b),
                                            "cuBLAS, x padded": lambda: F.linear(xp, w, b),
                                            "linear": lambda: ops.linear(x, w, b)}, reps=40)
                print(f"{'tf32' if tf32 else 'strict':>6} M={M:>4}: " +
                      "  ".join(f"{k} {v.median:.4f} ({v.p20:.4f}-{v.p80:.4f})" for k, v in t.items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
