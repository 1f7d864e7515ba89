"""The small-batch regime, second look: out = x @ w.T + bias at M = 1..64 on the tensor cores with w as the
instruction's M operand (swapped_mma.cu), at both tiers, against cuBLAS, weight_stream.cu (the first probe's
winner at M <= 4) and the floor of one read of w at the device's measured read bandwidth. Every contender of
one M is timed side by side (utils.bench.time_interleaved: L2 flushed, medians).

Swept per tier: variant 1 (w straight into registers) at its best of the first sweep (8 splits of K, 4 k16 steps
loaded together), variant 2 (w into shared memory by TMA) at
its best of the second sweep, variant 3 (w and x by TMA, x split once) at 1-4 splits and four (warps, KC, STAGES). Each contender is
checked first against a float64 reference: the error relative to the output's largest value.

    python experiments/small_batch/swapped_probe.py --out $OUT/swapped.json
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
sys.path.insert(0, str(HERE))
from probe import at_tier, cases, read_GBps, rel_err  # noqa: E402  (the first probe's)


def check_edges(swapped) -> None:
    """Variant 3 on shapes that are no multiple of its tiles, and with a non-finite w, at both tiers: every
    element against float64 (strict 1e-5, TF32 5e-3 of the largest value), and inf/NaN where fp32 has them."""
    g = torch.Generator(device="cuda").manual_seed(1)
    bad = []
    for N, K in ((1000, 1004), (77, 36), (4096, 260)):
        w = torch.randn(N, K, device="cuda", generator=g) / K**0.5
        b = torch.randn(N, device="cuda", generator=g)
        for M in (1, 7, 13, 33, 64):
            x = torch.randn(M, K, device="cuda", generator=g)
            ref = x.double() @ w.double().T + b.double()
            for strict in (True, False):
                for cfg in range(4):
                    for splits in (1, 3):
                        err = rel_err(swapped.tma3_linear(x, w, b, splits, strict, cfg), ref)
                        if not err < (1e-5 if strict else 5e-3):
                            bad.append((N, K, M, strict, cfg, splits, err))
        w_inf = w.clone()
        w_inf[min(5, N - 1), 3] = float("inf")
        x = torch.randn(7, K, device="cuda", generator=g)
        with precision.tf32(False):
            want = F.linear(x, w_inf, b)
        for cfg in range(4):
            got = swapped.tma3_linear(x, w_inf, b, 3, True, cfg)
            if not (torch.equal(got.isinf(), want.isinf()) and torch.equal(got.isnan(), want.isnan())):
                bad.append((N, K, 7, "inf", cfg))
    print("edge checks:", "all passed" if not bad else f"FAILED {bad}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ms", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    ap.add_argument("--shapes", nargs="+", default=["8192x8192", "4096x4096"], help="N x K")
    ap.add_argument("--splits", type=int, nargs="+", default=[8], help="variant 1 (registers)")
    ap.add_argument("--unrolls", type=int, nargs="+", default=[4], help="variant 1 (registers)")
    ap.add_argument("--bulk-splits", type=int, nargs="+", default=[3], help="variant 2 (w by TMA)")
    ap.add_argument("--bulk-cfgs", type=int, nargs="+", default=[1], help="variant 2: (KC, STAGES) choices")
    ap.add_argument("--tma3-splits", type=int, nargs="+", default=[1, 2, 3, 4], help="variant 3 (w and x by TMA)")
    ap.add_argument("--tma3-cfgs", type=int, nargs="+", default=[0, 1, 2, 3], help="variant 3: (warps, KC, STAGES)")
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    mods = build.load_kernels({"swapped": build.Variant("swapped_mma", kernels_dir=HERE),
                               "stream": build.Variant("weight_stream", kernels_dir=HERE),
                               "gemm10": "gemm_10_3xtf32",
                               "probe": build.Variant("read_probe", kernels_dir=ROOT / "kernels" / "probes")})
    swapped, stream, gemm10 = mods["swapped"], mods["stream"], mods["gemm10"]
    check_edges(swapped)
    gbps = read_GBps(mods["probe"])
    rows = []
    print(f"{torch.cuda.get_device_name()}: pure read {gbps:.0f} GB/s", flush=True)
    for N, K, M, x, w, b, ref, floor_ms in cases(args.shapes, args.ms, gbps):
        for tier, tf32 in (("strict", False), ("tf32", True)):
            fns = {"cuBLAS": at_tier(lambda: F.linear(x, w, b), tf32)}
            if not tf32:
                fns["linear (rung 10)"] = at_tier(lambda: gemm10.linear(x, w, b, None), False)
                if M <= 16:
                    fns["stream R=1"] = at_tier(lambda: stream.weight_stream(x, w, b, 1), False)
            for s in args.splits:
                for u in args.unrolls:
                    fns[f"swapped S={s} U={u}"] = at_tier(
                        lambda s=s, u=u: swapped.swapped_linear(x, w, b, s, not tf32, u), tf32)
            for s in args.bulk_splits:
                for c in args.bulk_cfgs:
                    fns[f"bulk S={s} cfg={c}"] = at_tier(
                        lambda s=s, c=c: swapped.bulk_linear(x, w, b, s, not tf32, c), tf32)
            for s in args.tma3_splits:
                for c in args.tma3_cfgs:
                    fns[f"tma3 S={s} cfg={c}"] = at_tier(
                        lambda s=s, c=c: swapped.tma3_linear(x, w, b, s, not tf32, c), tf32)
            errs = {name: rel_err(fn(), ref) for name, fn in fns.items()}
            times = bench.time_interleaved(fns, reps=args.reps)
            for name, t in times.items():
                rows.append({"N": N, "K": K, "M": M, "tier": tier, "contender": name, "median_ms": t.median,
                             "p20_ms": t.p20, "p80_ms": t.p80, "floor_ms": floor_ms,
                             "x_floor": t.median / floor_ms, "rel_err": errs[name]})
            mine = {n: times[n].median for n in times if n.startswith(("swapped", "bulk", "tma3"))}
            best = min(mine, key=mine.get)
            print(f"{tier:6s} N=K={N} M={M:2d} floor {floor_ms:.4f} | cuBLAS {times['cuBLAS'].median:.4f} "
                  f"({times['cuBLAS'].median / floor_ms:.2f}x) | best {best} {mine[best]:.4f} "
                  f"({mine[best] / floor_ms:.2f}x, err {errs[best]:.1e}) | worst swapped err "
                  f"{max(errs[n] for n in mine):.1e}"
                  + (f" | rung 10 {times['linear (rung 10)'].median:.4f}" if not tf32 else ""), flush=True)
    record = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "git_commit": results.git_commit(),
              "read_GBps": gbps, "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(record, indent=1))
    import pandas as pd
    df = pd.DataFrame(rows)
    table = df.pivot_table(index=["tier", "N", "M"], columns="contender", values="x_floor")
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 40)
    print("\nmedian / floor\n", table.round(2).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
