"""The 16-bit drop-ins against the rows of x: a float32 model under torch.autocast(dtype), and a model in dtype,
from 1 row to KernelBench's, beside eager and torch.compile, with the floor of each point.

    python experiments/bf16/rows16_probe.py --out OUT [--commit SHA] [--pids 94 37] [--rows 1 16 64 ...]

Under autocast today every call converts w (C x K float32) to the autocast dtype before rung 11's wide tiles,
at every M. Below a few hundred rows that conversion, one read of w and one write of half of it, costs more
than the GEMM. The candidate route measured here keeps w float32 and runs the float32 model (the small-batch and
narrow schedules, at the strict tier and at TF32: both at least as accurate as the 16-bit GEMM autocast asks
for). Contenders per (problem, mode, M), forward only, L2 flushed, medians (bench.time_interleaved):

  autocast  ours (today's route: x and w converted, then the 16-bit whole-model kernel), ours on float32 at
            the strict tier, ours on float32 at TF32, eager and torch.compile under autocast;
  model     ours in dtype (rung 11's wide tiles at every M), eager and torch.compile in dtype, the 16-bit GEMM
            alone (F.linear), and the candidate for a few rows: ours unfused, cuBLAS's 16-bit GEMM and then the
            tail's float32 op (the launcher's unfused16, as WholeModel._unfused computes it).

Each contender is checked against float64 first (inside the dtype's tier, utils.check.TIERS). The floor: w read
once (its dtype's bytes, float32's under autocast, where w is float32) over the copy bandwidth measured here,
or the FLOPs over cuBLAS's 16-bit rate at 8192^3 measured here, whichever is longer. Prints one line per point;
OUT/rows16_probe.json holds every row.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from solutions import solution  # noqa: E402
from utils import bench, check, ops, precision  # noqa: E402
from utils.problems import get_problem  # noqa: E402

sys.path.insert(0, str(HERE))
from dropins16_probe import under  # noqa: E402
from probe import WHOLE_MODEL_OF, op_args_of, out_and_commit, write_rows  # noqa: E402


def ceilings(dtype) -> tuple[float, float]:
    """(copy GB/s, the 16-bit GEMM's TFLOP/s at 8192^3), measured here."""
    a = torch.randn(8192, 8192, device="cuda").to(dtype)
    t = bench.time_ms(lambda: torch.mm(a, a), reps=20)
    return bench._copy_GBps(20), 2 * 8192**3 / (t.median * 1e-3) / 1e12


def at_tier(tf32: bool, fn):
    """fn at the fp32 tier asked for: the flag set directly (a context manager's reads of every setting would
    add host time to this contender alone); main restores it."""
    def run():
        torch.backends.cuda.matmul.allow_tf32 = tf32
        return fn()
    return run


def main(argv=None) -> int:
    def more(ap):
        ap.add_argument("--reps", type=int, default=30)
        ap.add_argument("--pids", type=int, nargs="+", default=[94, 37])
        ap.add_argument("--dtype", default="bfloat16")
        ap.add_argument("--modes", nargs="+", default=["autocast", "model"], choices=["model", "autocast"])
        ap.add_argument("--rows", type=int, nargs="+", default=[1, 4, 16, 64, 128, 256, 512, 1024])
    args = out_and_commit(__doc__, argv, more)
    with precision.tf32(False):
        return run(args)


def run(args) -> int:
    dtype = getattr(torch, args.dtype)
    gbps, tflops = ceilings(dtype)
    print(f"ceilings: copy {gbps:.0f} GB/s, {args.dtype} GEMM {tflops:.0f} TFLOP/s", flush=True)
    rows = [{"what": "ceilings", "copy_GBps": gbps, "gemm16_tflops": tflops}]
    tier = check.TIERS[check.TIER_OF_DTYPE[dtype]]
    for pid in args.pids:
        p = get_problem(pid)
        d = p.dims("full")
        for mode in args.modes:
            ref = p.make_model("full", seed=0)
            check._randomise(ref, 0)
            new = solution(pid).ModelNew(*p.init_inputs("full"))
            new.load_state_dict(ref.state_dict())
            model_dtype = dtype if mode == "model" else torch.float32
            ref, new = ref.to("cuda", model_dtype), new.to("cuda", model_dtype)
            ref64 = get_problem(pid).make_model("full", seed=0).double().cuda()
            ref64.load_state_dict(ref.state_dict())
            compiled = torch.compile(ref, dynamic=True)
            lin = next(m for m in ref.modules() if isinstance(m, torch.nn.Linear))
            whole = ops.WHOLE_MODELS[WHOLE_MODEL_OF[pid]]
            for M in args.rows:
                x = torch.rand(M, d.in_features, generator=torch.Generator().manual_seed(M)).to("cuda", model_dtype)
                with torch.no_grad():
                    if mode == "autocast":
                        auto = lambda: torch.autocast("cuda", dtype=dtype)  # noqa: E731
                        fns = {"ours": under(auto, lambda: new(x)),
                               "ours, float32 strict": at_tier(False, lambda: new(x)),
                               "ours, float32 TF32": at_tier(True, lambda: new(x)),
                               "eager": under(auto, lambda: ref(x)),
                               "torch.compile": under(auto, lambda: compiled(x))}
                        w_bytes = d.out_features * d.in_features * 4
                    else:
                        op_args = op_args_of(whole, lambda: new(x))
                        fns = {"ours": lambda: new(x), "eager": lambda: ref(x), "torch.compile": lambda: compiled(x),
                               "16-bit GEMM alone": lambda: F.linear(x, lin.weight),
                               # the candidate for a few rows: cuBLAS's 16-bit GEMM, then the tail's float32 op
                               "ours unfused (cuBLAS, tail)": lambda: whole._unfused(*op_args)[0]}
                        w_bytes = d.out_features * d.in_features * 2
                    want = ref64(x.double())
                    for label, fn in fns.items():
                        if label == "16-bit GEMM alone":
                            continue
                        out = fn().double()
                        ok = out.shape == want.shape and bool(torch.allclose(out, want, atol=tier.atol, rtol=tier.rtol))
                        rel = ((out - want).norm() / want.norm()).item()
                        rows.append({"problem": pid, "mode": mode, "M": M, "contender": label, "what": "check",
                                     "rel_norm": rel, "within_tier": ok})
                        if not ok:
                            print(f"check {pid} {mode} M={M} {label}: OUTSIDE THE TIER (relative norm {rel:.1e})")
                    t = bench.time_interleaved(fns, reps=args.reps)
                floor = max(w_bytes / (gbps * 1e9), 2 * M * d.in_features * d.out_features / (tflops * 1e12)) * 1e3
                best_other = min(t["eager"].median, t["torch.compile"].median)
                for label, v in t.items():
                    print(f"time {pid} {mode:>8} M={M:<5} {label:<22} {v.median:.4f} ms ({v.p20:.4f}-{v.p80:.4f}) "
                          f"{v.median / floor:5.2f}x floor, best other / this {best_other / v.median:.2f}x", flush=True)
                    rows.append({"problem": pid, "mode": mode, "dtype": args.dtype, "M": M, "contender": label,
                                 "what": "forward", "median_ms": v.median, "p20_ms": v.p20, "p80_ms": v.p80,
                                 "floor_ms": floor})
                write_rows(args.out / "rows16_probe.json", args.commit, rows)
            del ref, new, compiled, ref64
            torch._dynamo.reset()
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
