"""Where a drop-in's call spends its host (CPU) time, layer by layer, on the GPU.

A call's host time is what the CPU spends before the GPU has the kernel: with a synchronize after
each call (the per-call protocol) the GPU waits that long for every call. For each problem at
KernelBench's size, under torch.no_grad(), calls queued back to back (the GPU busy with earlier
ones, so the time measured is the CPU's alone), the layers in turn over ten rounds of 100 calls
(the queue stays far from full, where a launch would wait), the median of 1,000 calls of each:
- the launcher itself (kernels/fused_gemm_groupnorm.cu, through its pybind binding);
- the registered op, torch.ops.workbook.<name>.default (the dispatcher, the autograd and CUDA kernels),
  and the same under torch.inference_mode() (which skips the autograd kernel: what that kernel costs);
- the op as the module calls it (utils.ops.WholeModel: whether to keep the GEMM's output);
- the module, by default and frozen (the forward, freeze()'s checks).
Then cProfile of the module's calls, the 25 costliest functions, into OUT/host_profile.txt; with
--trace, torch.profiler's table of the same calls (the launcher's ATen ops and CUDA runtime calls, by
CPU time) into OUT/host_trace.txt.
With --rows, at that many rows of x instead (below 257 the whole model runs as `linear` and its tail:
both are timed alone too), and with --tf32 at the TF32 tier.

    python -m experiments.training.host_time --out OUT [--problems 94 75 37 62] [--rows 128] [--tf32]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import time
from pathlib import Path

import torch

from experiments.training.training_probe import _op_args, _op_name
from utils import build, ops, precision
from utils.chapters import session as chapter
from utils.problems import get_problem


def host_us(layers: dict, calls: int = 100, rounds: int = 10) -> dict:
    """Median CPU time of one call of each layer, in µs: the calls queued back to back (no synchronize
    between, the GPU busy with earlier ones, so the time is the CPU's alone), the layers taken in
    turn, `calls` each, for `rounds` rounds (a drift of the machine reaches every layer alike); the
    median over all of a layer's calls."""
    times = {name: [] for name in layers}
    for fn in layers.values():
        for _ in range(20):
            fn()
    for _ in range(rounds):
        for name, fn in layers.items():
            torch.cuda.synchronize()  # each layer starts from an empty queue
            for _ in range(calls):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return {name: sorted(t)[len(t) // 2] * 1e6 for name, t in times.items()}


def rows_for(pid: int, out: Path, rows: int | None = None, trace: bool = False) -> list[dict]:
    _, new = chapter.solution_pair(pid, "full", "cuda")
    frozen = chapter.solution_pair(pid, "full", "cuda")[1].freeze()
    x = get_problem(pid).get_inputs("full")[0].cuda()
    if rows is not None:
        x = x.repeat(-(-rows // x.shape[0]), 1)[:rows].contiguous()
    name = _op_name(pid)
    args = _op_args(new)
    launcher = build.launcher(ops.FUSED, name)
    op = getattr(torch.ops.workbook, name).default
    whole = ops.WHOLE_MODELS[name]
    def inference(fn):
        def call():
            with torch.inference_mode():
                return fn()
        return call

    layers = {"launcher": lambda: launcher(x, *args, None, False),
              "op, no autograd kernel (inference_mode)": inference(lambda: op(x, *args, None, False)),
              "op (dispatcher)": lambda: op(x, *args, None, False),
              "ops.<whole model>": lambda: whole(x, *args),
              "module": lambda: new(x),
              "module, frozen": lambda: frozen(x)}
    if rows is not None:  # the two ops the launcher calls where it does not fuse
        weight, linear_bias, *tail_args = args
        y = ops.linear(x, weight, linear_bias)
        layers["ops.linear"] = lambda: ops.linear(x, weight, linear_bias)
        layers["the tail's op"] = lambda: whole.tail(y, *tail_args)
        linear_op = torch.ops.workbook.linear.default
        layers["linear's op, no autograd kernel"] = inference(lambda: linear_op(x, weight, linear_bias, None))
        layers["F.linear (eager's GEMM)"] = lambda: torch.nn.functional.linear(x, weight, linear_bias)
    with torch.no_grad():
        rows = [{"problem": pid, "rows": x.shape[0], "layer": layer, "host_us": us} for layer, us in host_us(layers).items()]
        for label, model in (("default", new), ("frozen", frozen)):
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(500):
                model(x)
            prof.disable()
            torch.cuda.synchronize()
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
            with open(out / "host_profile.txt", "a") as f:
                f.write(f"=== problem {pid}, {label}\n{text.getvalue()}\n")
        if trace:
            # the C++ side of a call: each ATen op and CUDA runtime call the launcher makes, with its
            # CPU time (what cProfile above sees as one built-in call)
            from torch.profiler import ProfilerActivity, profile
            for _ in range(20):
                new(x)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(200):
                    new(x)
                torch.cuda.synchronize()
            table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=70)
            with open(out / "host_trace.txt", "a") as f:
                f.write(f"=== problem {pid}, {x.shape[0]} rows, 200 calls of the module\n{table}\n")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--problems", type=int, nargs="*", default=[94, 75, 37, 62])
    ap.add_argument("--commit", default="unknown", help="the commit the sources are at (the device has no .git)")
    ap.add_argument("--rows", type=int, default=None, help="rows of x (default: KernelBench's batch)")
    ap.add_argument("--tf32", action="store_true", help="at the TF32 tier (default: strict)")
    ap.add_argument("--trace", action="store_true",
                    help="also torch.profiler's table of the module's calls (ATen ops, CUDA runtime calls) into OUT/host_trace.txt")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with precision.tf32(args.tf32):
        rows = [r for pid in args.problems for r in rows_for(pid, args.out, args.rows, args.trace)]
    for r in rows:
        print(f"{r['problem']:>3} {r['rows']:>6} rows {r['layer']:<40} {r['host_us']:8.1f} µs")
    record = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "commit": args.commit,
              "tier": "tf32" if args.tf32 else "strict", "rows": rows}
    name = f"host_time_{args.rows}_{'tf32' if args.tf32 else 'strict'}" if args.rows else "host_time"
    (args.out / f"{name}.json").write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
