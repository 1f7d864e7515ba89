"""The wgmma engine's configurations side by side (variants.cu), out = x @ w.T, at the sizes where the
tile count or the strict tier's pass over w decides: M = 64 to 4096 at N = K = 8192 (problems 94, 75, 62)
and M = 128 to 32768 at N = 4096, K = 1024 (problem 37). Per tier, every contender of one (shape, M) timed
side by side (utils.bench.time_interleaved: L2 flushed, medians), with cuBLAS, against the floor: one read
of w, x and the output at the measured read bandwidth, or the tier's tensor-core work at cuBLAS TF32's
measured rate (3x for 3xTF32), whichever is longer.

Strict-tier contenders each include what they need per call: x's small parts (a pass over x), and w's
(a pass over w) unless kept (`kept`: a drop-in's freeze()) or made in the kernel (`split_w`). Every contender
is checked first against float64 on shapes that are no multiple of its tiles, and with an inf in w.

    python experiments/gemm_schedules/probe.py --out $OUT/schedules.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from utils import bench, build, precision, results  # noqa: E402

HERE = Path(__file__).resolve().parent


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref).abs().max() / ref.abs().max()).item()


def contenders(v, x, w, ws_kept):
    """name -> (tier, callable): each strict contender makes per call what its kernel needs."""
    def strict(fn):
        def run():
            with precision.tf32(False):
                return fn()
        return "strict", run

    def tf32(fn):
        def run():
            with precision.tf32(True):
                return fn()
        return "tf32", run

    out = {
        "cublas fp32": strict(lambda: x @ w.T),
        "presplit128 pass": strict(lambda: v.presplit(x, v.residual(x), w, v.residual(w), 128)),
        "presplit128 kept": strict(lambda: v.presplit(x, v.residual(x), w, ws_kept, 128)),
        "presplit64 pass": strict(lambda: v.presplit(x, v.residual(x), w, v.residual(w), 64)),
        "presplit64 kept": strict(lambda: v.presplit(x, v.residual(x), w, ws_kept, 64)),
        "split_w128": strict(lambda: v.split_w(x, v.residual(x), w, 128)),
        "split_w64": strict(lambda: v.split_w(x, v.residual(x), w, 64)),
        "cublas tf32": tf32(lambda: x @ w.T),
    }
    for bn in (64, 128, 256):
        out[f"tf32_{bn}"] = tf32(lambda bn=bn: v.tf32(x, w, bn))
    return out


def check(v) -> list:
    """Every contender against float64 at shapes no multiple of its tiles, and an inf in w at the strict tier."""
    g = torch.Generator(device="cuda").manual_seed(1)
    bad = []
    for N, K in ((1000, 1004), (77, 36), (300, 2052)):
        w = torch.randn(N, K, device="cuda", generator=g) / K**0.5
        for M in (1, 7, 65, 129, 300):
            x = torch.randn(M, K, device="cuda", generator=g)
            ref = x.double() @ w.double().T
            for name, (tier, fn) in contenders(v, x, w, v.residual(w)).items():
                err = rel_err(fn(), ref)
                if not err < (1e-5 if tier == "strict" else 5e-3):
                    bad.append((N, K, M, name, err))
        w_inf = w.clone()
        w_inf[min(5, N - 1), 3] = float("inf")
        x = torch.randn(7, K, device="cuda", generator=g)
        with precision.tf32(False):
            want = x @ w_inf.T
        for name, (tier, fn) in contenders(v, x, w_inf, v.residual(w_inf)).items():
            if tier == "strict" and not name.startswith("cublas"):
                got = fn()
                if not (torch.equal(got.isinf(), want.isinf()) and torch.equal(got.isnan(), want.isnan())):
                    bad.append((N, K, 7, name, "inf"))
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    bench.require_gpu("the schedule probe")
    mods = build.load_kernels({"v": build.Variant("variants", kernels_dir=HERE), "probe": build.Variant("read_probe", kernels_dir=ROOT / "kernels" / "probes")})
    v, probe = mods["v"], mods["probe"]
    bad = check(v)
    print("checks:", "all passed" if not bad else f"FAILED {bad}", flush=True)

    big = torch.rand(2**28, device="cuda")
    gbps = big.numel() * 4 / (bench.time_ms(lambda: probe.read_probe(big), reps=20).median * 1e-3) / 1e9
    del big
    _, tf32_tflops = bench._gemm_tflops(8192, 20)
    print(f"read {gbps:.0f} GB/s, cuBLAS TF32 {tf32_tflops:.0f} TFLOP/s", flush=True)

    rows = []
    sizes = [((8192, 8192), m) for m in (64, 128, 192, 256, 384, 512, 1024, 2048, 4096)]
    sizes += [((4096, 1024), m) for m in (128, 512, 2048, 32768)]
    for (N, K), M in sizes:
        g = torch.Generator(device="cuda").manual_seed(0)
        w = torch.randn(N, K, device="cuda", generator=g) / K**0.5
        x = torch.randn(M, K, device="cuda", generator=g)
        ref = x.double() @ w.double().T
        fns = contenders(v, x, w, v.residual(w))
        errs = {name: rel_err(fn(), ref) for name, (tier, fn) in fns.items()}
        mem_ms = (N * K + M * K + M * N) * 4 / (gbps * 1e9) * 1e3
        math_ms = 2 * M * N * K / (tf32_tflops * 1e12) * 1e3
        floor = {"strict": max(mem_ms, 3 * math_ms), "tf32": max(mem_ms, math_ms)}
        for tier in ("strict", "tf32"):
            times = bench.time_interleaved({n: f for n, (t, f) in fns.items() if t == tier}, reps=args.reps)
            for name, t in times.items():
                rows.append({"N": N, "K": K, "M": M, "tier": tier, "contender": name, "median_ms": t.median,
                             "p20_ms": t.p20, "p80_ms": t.p80, "floor_ms": floor[tier], "error": errs[name]})
        del w, x, ref
    meta = results.metadata()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "read_GBps": gbps, "tf32_tflops": tf32_tflops, "checks": bad,
                                    "rows": rows}, indent=1, default=str))
    for tier in ("strict", "tf32"):
        names = list(dict.fromkeys(r["contender"] for r in rows if r["tier"] == tier))
        print(f"\n{tier}, ms (floor last)\n" + " ".join(f"{h:>20}" for h in ["N x K, M", *names, "floor"]))
        for (N, K), M in sizes:
            got = {r["contender"]: r for r in rows if r["tier"] == tier and (r["N"], r["K"], r["M"]) == (N, K, M)}
            print(" ".join(f"{c:>20}" for c in [f"{N}x{K}, {M}", *(f"{got[n]['median_ms']:.4f}" for n in names),
                                                  f"{got[names[0]]['floor_ms']:.4f}"]), flush=True)
    return 0 if not bad else 1


if __name__ == "__main__":
    raise SystemExit(main())
