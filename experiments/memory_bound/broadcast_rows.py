"""Problem 75's broadcast write (common/broadcast_add.cuh) at few rows: why notebook 07's tail took 23.6 us at
4 rows against 9.5-10.1 us at 1, 16 and 64 (results/nvidia-h200/logs/final_run/README.md).

out (1, C, N, 1) = rowmin (N, 1) + bias (1, C, 1, 1) at C = 8192 (75's channels), N = 1 to 256, by both of
the launcher's paths, timed side by side (utils.bench.time_interleaved: L2 flushed, medians): the float4 path
(a thread owns 4 consecutive n and walks down the channels; taken when N % 4 == 0 and both pointers are
16-byte aligned) and the flat scalar path (consecutive threads, consecutive floats of out), forced by handing
the same rowmin as a view 4 bytes off alignment. Each output is checked against PyTorch's first.

    python experiments/memory_bound/broadcast_rows.py --out $OUT/broadcast_rows.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from utils import bench, build, results  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=100)
    args = ap.parse_args()
    bench.require_gpu("the broadcast probe")
    kernel = build.load_kernel("min_bias_broadcast")
    C = 8192
    bias = torch.randn(1, C, 1, 1, device="cuda")
    rows = []
    for N in (1, 2, 3, 4, 5, 8, 12, 16, 32, 64, 256):
        store = torch.randn(N + 1, 1, device="cuda")
        aligned = store[:N].clone()  # its own allocation: 16-byte aligned
        offset = store[1:]  # 4 bytes past an aligned start: the scalar path
        for name, rowmin in (("float4 path", aligned), ("scalar path", offset)):
            assert torch.equal(kernel.min_bias_broadcast(rowmin, bias), rowmin + bias), (N, name)
        fns = {"scalar path": lambda: kernel.min_bias_broadcast(offset, bias)}
        if N % 4 == 0:
            fns["float4 path"] = lambda: kernel.min_bias_broadcast(aligned, bias)
        for name, t in bench.time_interleaved(fns, reps=args.reps).items():
            rows.append({"N": N, "C": C, "path": name, "median_us": t.median * 1e3, "p20_us": t.p20 * 1e3,
                         "p80_us": t.p80 * 1e3, "GBps": C * N * 4 / (t.median * 1e-3) / 1e9})
            print(f"N = {N:>4}  {name:<12} {t.median * 1e3:7.2f} us  (p20 {t.p20 * 1e3:.2f}, p80 {t.p80 * 1e3:.2f})  "
                  f"{rows[-1]['GBps']:7.1f} GB/s", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": results.metadata(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
