"""The TF32 whole-model regression, measured: the fused kernel (fused_gemm_groupnorm.cu) as it was at
a8f2412 (old), as it is at 7456398 (new: the GEMM's saved output stored beside each activation,
660e2ad) and with the saved output stored in a pass of its own (fix, branch tf32-regression,
7dfd610), side by side, with rung 9's plain GEMM (gemm_09_wgmma_tf32.gemm, x @ w.T) as the
yardstick of each shape: the epilogue's price = fused / GEMM alone - 1.

    cd <repo root> && PYTHONPATH=$PWD MAX_JOBS=16 python3 experiments/fused_models/epilogue_save_probe.py         (an sm_90 GPU)
    ... python3 experiments/fused_models/epilogue_save_probe.py --build-only                                    (no GPU: build, check exports)

The three kernel trees sit beside this script as old_kernels, new_kernels and fix_kernels, made from
the commits named in VARIANTS, e.g. `git archive a8f2412 kernels | tar x --transform s/^kernels/old_kernels/`,
so that the device needs no git history. Every contender is checked against eager (TF32 tier's tolerance) before
it is timed; one that fails is reported and left out. Timing: utils.bench.time_interleaved (CUDA
events, a clean L2, medians), two rounds, the second in the reverse order, each contender keeping its
better median (as notebook 09's measure_fusion does). Writes $OUT/tf32reg.json (or ./tf32reg.json).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from utils import build, check, precision
from utils.bench import time_interleaved
from utils.chapters.epilogue_fusion import linear_and_rest
from utils.problems import get_problem

HERE = Path(__file__).resolve().parent
FUSED = "fused_gemm_groupnorm"
GEMM09 = "gemm_09_wgmma_tf32"
VARIANTS = {"old": ("a8f2412, before 660e2ad", HERE / "old_kernels"),
            "new": ("7456398 (main): saved stored beside each activation", HERE / "new_kernels"),
            "fix": ("7dfd610: saved stored in a pass of its own", HERE / "fix_kernels")}
OPS = {94: "linear_bias_hardtanh_mish_group_norm", 37: "linear_swish_bias_group_norm",
       62: "linear_group_norm_leaky_relu_x2", 75: "linear_group_norm_min_bias"}
REST = {94: 7, 37: 5, 62: 5, 75: 5}  # arguments after (x, w, linear_bias)
PIDS = (94, 37, 62, 75)


def builds() -> dict:
    items = {v: build.Variant(FUSED, (), d) for v, (_, d) in VARIANTS.items()}
    items[GEMM09] = build.Variant(GEMM09, (), HERE / "new_kernels")
    return items


def check_exports() -> None:
    """Each tree exports the four launchers with the arity this script calls them with."""
    for v, variant in builds().items():
        if v == GEMM09:
            continue
        exports = {e.name: e for e in variant.plan().exports}
        for pid, op in OPS.items():
            want = 3 + REST[pid] + (0 if v == "old" else 2)  # new and fix: + (w_residual, save_gemm_output)
            got = len(build.parameters(exports[op]))
            assert got == want, f"{v}: {op} takes {got} arguments, the probe passes {want}"
    print("exports checked: the arities the probe calls with", flush=True)


def call(mod, v: str, pid: int, x, w, lb, rest, save: bool = False):
    """The whole-model op of tree v: out (old returns it alone; new and fix return (out, saved))."""
    f = getattr(mod, OPS[pid])
    if v == "old":
        return f(x, w, lb, *rest)
    return f(x, w, lb, *rest, None, save)


def timed(fns: dict, reps: int) -> dict:
    rounds = {n: [] for n in fns}
    for order in (list(fns), list(fns)[::-1]):
        for n, t in time_interleaved({n: fns[n] for n in order}, reps=reps, l2="clean").items():
            rounds[n].append(t.median)
    return {n: {"median_ms": min(ms), "median_ms_by_round": ms} for n, ms in rounds.items()}


def probe_problem(pid: int, mods: dict, tier: str, reps: int, scale: str = "full") -> dict:
    p = get_problem(pid)
    model = p.make_model(scale, seed=0)
    check._randomise(model, 0)
    model = model.cuda().eval()
    x = p.get_inputs(scale, generator=torch.Generator().manual_seed(1))[0].cuda()
    linear, rest = linear_and_rest(pid, model)
    w, lb = linear.weight, linear.bias
    tol = check.TIERS["tf32" if tier == "tf32" else "strict"]
    entry = {"problem": pid, "tier": tier, "shape": [x.shape[0], w.shape[0], w.shape[1]], "checks": {}, "left_out": {}}
    with precision.tf32(tier == "tf32"), torch.no_grad():
        want = model(x)
        fns = {v: (lambda v=v: call(mods[v], v, pid, x, w, lb, rest)) for v in VARIANTS}
        if tier == "tf32":
            fns["gemm09 alone"] = lambda: mods[GEMM09].gemm(x, w)
            for v in ("new", "fix"):
                fns[f"{v} save"] = lambda v=v: call(mods[v], v, pid, x, w, lb, rest, save=True)
        outs = {}
        for name, fn in fns.items():
            got = fn()
            torch.cuda.synchronize()
            if name == "gemm09 alone":
                ref, out = F.linear(x, w), got
            else:
                ref, out = want, got if name == "old" else got[0]
            ok = out.shape == ref.shape and torch.allclose(out, ref, atol=tol.atol, rtol=tol.rtol)
            c = {"max_abs_vs_eager": (out - ref).abs().max().item() if out.shape == ref.shape else None, "ok": ok}
            if name.endswith(" save"):
                saved = got[1]
                lin = F.linear(x, w, lb)
                c["saved_ok"] = saved.shape == lin.shape and torch.allclose(saved, lin, atol=tol.atol, rtol=tol.rtol)
                c["saved_max_abs_vs_F.linear"] = (saved - lin).abs().max().item()
                outs[name + " saved"] = saved
                ok = ok and c["saved_ok"]
            entry["checks"][name] = c
            outs[name] = out
            if not ok:
                entry["left_out"][name] = f"differs from its reference: {c}"
                print(f"  problem {pid} {tier}: {name} FAILED its check, not timed: {c}", flush=True)
        same = {}
        for a, b in (("old", "new"), ("new", "fix"), ("old", "fix"), ("new", "new save"), ("fix", "fix save"),
                     ("new save saved", "fix save saved")):
            if a in outs and b in outs and outs[a].shape == outs[b].shape:
                same[f"{a} vs {b}"] = {"bitwise": bool(torch.equal(outs[a], outs[b])),
                                       "max_abs": (outs[a] - outs[b]).abs().max().item()}
        entry["agreement"] = same
        del outs
        entry["timings"] = timed({n: f for n, f in fns.items() if n not in entry["left_out"]}, reps)
    alone = entry["timings"].get("gemm09 alone", {}).get("median_ms")
    if alone:
        entry["price_pct_over_gemm09"] = {n: 100 * (t["median_ms"] / alone - 1) for n, t in entry["timings"].items()
                                          if n != "gemm09 alone"}
    del model, x, want
    torch.cuda.empty_cache()
    return entry


def table(entries: list[dict]) -> str:
    names = ["old", "new", "fix", "gemm09 alone", "new save", "fix save"]
    lines = [f"{'problem':>7} {'tier':>6} | " + " | ".join(f"{n:>14}" for n in names)]
    for e in entries:
        t, pr = e["timings"], e.get("price_pct_over_gemm09", {})
        cells = []
        for n in names:
            if n not in t:
                cells.append(f"{'-':>14}")
            else:
                extra = f" {pr[n]:+5.1f}%" if n in pr else ""
                cells.append(f"{t[n]['median_ms']:.3f}{extra}".rjust(14))
        lines.append(f"{e['problem']:>7} {e['tier']:>6} | " + " | ".join(cells))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-only", action="store_true", help="build the four kernels and check the exports; no GPU")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--pids", type=int, nargs="*", default=list(PIDS))
    ap.add_argument("--scale", default="full", help="utils.problems scale (full: KernelBench's sizes)")
    ap.add_argument("--no-strict", action="store_true", help="skip the strict tier (TF32 off) runs")
    args = ap.parse_args()
    start = time.time()
    check_exports()
    if args.build_only:
        failed = build.load_kernels(builds(), build_only=True, on_error="return")
        for k, e in failed.items():
            print(f"FAILED {k}: {e}", flush=True)
        print(f"built in {time.time() - start:.0f} s" if not failed else "build failures", flush=True)
        return 1 if failed else 0
    assert torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0), "needs an sm_90 GPU"
    mods = build.load_kernels(builds())
    print(f"built/loaded in {time.time() - start:.0f} s on {torch.cuda.get_device_name()}", flush=True)
    entries = []
    for tier in ("tf32",) + (() if args.no_strict else ("strict",)):
        for pid in args.pids:
            entries.append(probe_problem(pid, mods, tier, args.reps, args.scale))
            e = entries[-1]
            print(f"problem {pid} {tier}: " + ", ".join(f"{n} {t['median_ms']:.3f}" for n, t in e["timings"].items())
                  + f"  agreement {json.dumps(e['agreement'])}", flush=True)
    print("\nmedian ms (and % over rung 9's plain GEMM at the same shape, TF32 tier); strict: 'old' keeps w's split "
          "between calls (before 660e2ad), new and fix split it per call\n" + table(entries), flush=True)
    record = {"kind": "tf32_regression_probe", "device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "variants": {v: label for v, (label, _) in VARIANTS.items()}, "reps": args.reps,
              "wall_s": time.time() - start, "entries": entries}
    out = Path(os.environ.get("OUT") or ".") / "tf32reg.json"
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out} ({time.time() - start:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
