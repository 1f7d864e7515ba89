"""The drop-ins as a model in bf16 or fp16 (`ModelNew(...).to(dtype)`), and as a float32 model under
torch.autocast(dtype), at KernelBench's size, against Model the same way: checked against float64, then timed side
by side, the forward and a training step.

    python experiments/bf16/dropins16_probe.py --out OUT [--commit SHA] [--dtypes bfloat16 float16]
        [--modes model autocast] [--no-train]

Per problem, dtype and mode: Model at the full scale with GroupNorm's γ, β and the biases randomised (utils.check's
_randomise), ModelNew with its state; mode "model": both converted to the dtype, x from the problem's get_inputs in
the dtype; mode "autocast": both float32, x float32, every call under torch.autocast("cuda", dtype).
Checked first: the forward of ours, eager and torch.compile against Model in float64 on the same 16-bit values
(largest absolute error, relative norm; ours must be inside the dtype's tier, utils.check.TIERS, or nothing is
timed). Then timed in turn (bench.time_interleaved: L2 flushed, medians):
  forward   ours, eager, torch.compile (default mode), cuBLAS's 16-bit GEMM alone (F.linear, no bias; under
            autocast with x and w converted on every call, as autocast does);
  training  forward and backward of every parameter's gradient (the output's gradient a fixed tensor), for ours,
            eager and torch.compile.
OUT/dropins16_probe.json holds every row.
"""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from solutions import solution  # noqa: E402
from utils import bench, check  # noqa: E402
from utils.problems import get_problem  # noqa: E402

sys.path.insert(0, str(HERE))
from probe import out_and_commit, write_rows  # noqa: E402


def models(pid: int, dtype: torch.dtype):
    """(Model, ModelNew, x) in dtype, on the GPU."""
    p = get_problem(pid)
    ref = p.make_model("full", seed=0)
    check._randomise(ref, 0)
    new = solution(pid).ModelNew(*p.init_inputs("full"))
    new.load_state_dict(ref.state_dict())
    x = p.get_inputs("full", generator=torch.Generator().manual_seed(1))[0].to("cuda", dtype)
    return ref.to("cuda", dtype), new.to("cuda", dtype), x


def under(context, fn):
    """fn called inside a fresh context() each time."""
    def run():
        with context():
            return fn()
    return run


def step(model, x, grad):
    """One training step's forward and backward: every parameter's gradient."""
    def run():
        for q in model.parameters():
            q.grad = None
        model(x).backward(grad)
    return run


def main(argv=None) -> int:
    def more(ap):
        ap.add_argument("--reps", type=int, default=30)
        ap.add_argument("--pids", type=int, nargs="+", default=[94, 75, 37, 62])
        ap.add_argument("--dtypes", nargs="+", default=["bfloat16", "float16"])
        ap.add_argument("--modes", nargs="+", default=["model", "autocast"], choices=["model", "autocast"])
        ap.add_argument("--no-train", action="store_true")
    args = out_and_commit(__doc__, argv, more)
    rows = []
    for pid in args.pids:
        for dtype, mode in ((getattr(torch, d), m) for d in args.dtypes for m in args.modes):
            name = str(dtype).removeprefix("torch.") + (" autocast" if mode == "autocast" else "")
            ref, new, x = models(pid, dtype if mode == "model" else torch.float32)
            ctx = (lambda: torch.autocast("cuda", dtype=dtype)) if mode == "autocast" else contextlib.nullcontext
            lin = next(m for m in ref.modules() if isinstance(m, torch.nn.Linear))
            compiled = torch.compile(ref)
            tier = check.TIERS[check.TIER_OF_DTYPE[dtype]]
            with torch.no_grad():
                want = ref.double()(x.double())
                ref.to(x.dtype)
                for label, fn in (("ours", new), ("eager", ref), ("torch.compile", compiled)):
                    with ctx():
                        out = fn(x).double()
                    err = (out - want).abs().max().item()
                    rel = ((out - want).norm() / want.norm()).item()
                    ok = out.shape == want.shape and bool(torch.allclose(out, want, atol=tier.atol, rtol=tier.rtol))
                    print(f"check {pid} {name:>17} {label:<14} max abs {err:.2e}, relative norm {rel:.2e} "
                          f"{'ok' if ok else 'OUTSIDE THE TIER'}", flush=True)
                    rows.append({"problem": pid, "dtype": name, "contender": label, "what": "check", "max_abs": err,
                                 "rel_norm": rel, "within_tier": ok})
                    if label == "ours" and not ok:
                        raise AssertionError(f"problem {pid} in {name}: ours is outside the tier; not timing it")
                forward = {"ours": lambda: new(x), "eager": lambda: ref(x), "torch.compile": lambda: compiled(x),
                           "cuBLAS GEMM alone": lambda: F.linear(x, lin.weight)}
                timed = {"forward": bench.time_interleaved({k: under(ctx, f) for k, f in forward.items()},
                                                           reps=args.reps)}
            if not args.no_train:
                grad = torch.randn(want.shape, generator=torch.Generator().manual_seed(2)).to("cuda", x.dtype)
                compiled_train = torch.compile(ref)
                timed["training step"] = bench.time_interleaved(
                    {"ours": under(ctx, step(new, x, grad)), "eager": under(ctx, step(ref, x, grad)),
                     "torch.compile": under(ctx, step(compiled_train, x, grad))}, reps=args.reps)
            for what, t in timed.items():
                for label, v in t.items():
                    print(f"time  {pid} {name:>17} {what:<13} {label:<18} {v.median:.4f} ms "
                          f"({v.p20:.4f}-{v.p80:.4f}); compile / this {t['torch.compile'].median / v.median:.2f}x",
                          flush=True)
                    rows.append({"problem": pid, "dtype": name, "contender": label, "what": what,
                                 "median_ms": v.median, "p20_ms": v.p20, "p80_ms": v.p80})
            del ref, new, x, compiled
            torch._dynamo.reset()
            torch.cuda.empty_cache()
            write_rows(args.out / "dropins16_probe.json", args.commit, rows)  # after each, so a timeout keeps them
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
