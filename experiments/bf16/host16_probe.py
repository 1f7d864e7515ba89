"""The host's time in one forward of a drop-in under torch.autocast, layer by layer: where a call at a few rows
spends the microseconds that rows16_probe.py shows between "ours" and the float32 model it runs.

    python experiments/bf16/host16_probe.py --out OUT [--commit SHA] [--pid 94] [--rows 16]

Each line is the median wall time of one call on the host (the GPU idle before it: synchronized, so that no
launch waits for a full queue), over 300 calls after 30 of warm-up:
  model, autocast           ModelNew(x) under torch.autocast(bf16): the whole path
  model, float32            ModelNew(x) on float32, no autocast: WholeModel.__call__ and the launcher
  op below autograd         the whole-model op on x bf16 and w float32, below autograd and autocast: the launcher
  autocast(enabled=False)   entering and leaving the context the autocast kernel calls the op in, alone
  exclude-key guard         entering and leaving torch._C._ExcludeDispatchKeyGuard(AutocastCUDA), alone
  x.to(bf16)                the conversion of x the autocast kernel makes
OUT/host16_probe_<pid>_M<rows>.json holds every row.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from solutions import solution  # noqa: E402
from utils import ops  # noqa: E402
from utils.problems import get_problem  # noqa: E402

sys.path.insert(0, str(HERE))
from probe import WHOLE_MODEL_OF, op_args_of, out_and_commit, write_rows  # noqa: E402


def host_us(fn, reps: int = 300, warmup: int = 30) -> float:
    times = []
    for i in range(warmup + reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        if i >= warmup:
            times.append((t1 - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def main(argv=None) -> int:
    def more(ap):
        ap.add_argument("--pid", type=int, default=94)
        ap.add_argument("--rows", type=int, default=16)
    args = out_and_commit(__doc__, argv, more)
    p = get_problem(args.pid)
    new = solution(args.pid).ModelNew(*p.init_inputs("full")).cuda()
    x = torch.rand(args.rows, p.dims("full").in_features, device="cuda")
    model = ops.WHOLE_MODELS[WHOLE_MODEL_OF[args.pid]]
    bf16 = torch.bfloat16
    guard = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCUDA)

    def under_autocast():
        with torch.autocast("cuda", dtype=bf16):
            new(x)

    def autocast_off():
        with torch.autocast("cuda", enabled=False):
            pass

    def exclude_guard():
        with torch._C._ExcludeDispatchKeyGuard(guard):
            pass

    rows = []
    with torch.no_grad():
        measured = {"model, autocast": under_autocast, "model, float32": lambda: new(x),
                    "autocast(enabled=False)": autocast_off, "exclude-key guard": exclude_guard,
                    "x.to(bf16)": lambda: x.to(bf16)}
        op_args = op_args_of(model, under_autocast)  # as the autocast kernel hands them over

        def below():
            with torch._C._AutoDispatchBelowAutograd(), torch._C._ExcludeDispatchKeyGuard(guard):
                model.op(*op_args)
        measured["op below autograd"] = below
        for name, fn in measured.items():
            us = host_us(fn)
            print(f"host {args.pid} M={args.rows} {name:<26} {us:8.1f} us", flush=True)
            rows.append({"problem": args.pid, "M": args.rows, "what": name, "host_us": us})
    write_rows(args.out / f"host16_probe_{args.pid}_M{args.rows}.json", args.commit, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
