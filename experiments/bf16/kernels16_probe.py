"""What the GPU runs in one forward of a drop-in under torch.autocast at inference (or, with --mode model, of the drop-in
as a model in bf16), kernel by kernel (torch.profiler),
beside three timings of the same call: L2 flushed with events (bench.time_ms, as rows16_probe.py), warm L2 with
events, and back to back (200 calls queued, the total over 200: the host's time per call where it is the longer).

    python experiments/bf16/kernels16_probe.py --out OUT [--commit SHA] [--pid 94] [--rows 16 128 256] [--cpu]
        [--mode autocast|model]

With --cpu the profile also holds the host's side: each op's own CPU time per call, the longest first.

OUT/kernels16_probe_<mode>_<pid>.json holds every row (kernels16_probe.json in the runs before --mode).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from solutions import solution  # noqa: E402
from utils import bench  # noqa: E402
from utils.problems import get_problem  # noqa: E402

sys.path.insert(0, str(HERE))
from probe import out_and_commit, write_rows  # noqa: E402


def main(argv=None) -> int:
    def more(ap):
        ap.add_argument("--pid", type=int, default=94)
        ap.add_argument("--rows", type=int, nargs="+", default=[16, 128, 256])
        ap.add_argument("--cpu", action="store_true", help="profile the host too: each op's own CPU time")
        ap.add_argument("--cpu-top", type=int, default=25)
        ap.add_argument("--mode", default="autocast", choices=["autocast", "model"])
    args = out_and_commit(__doc__, argv, more)
    p = get_problem(args.pid)
    model = args.mode == "model"
    new = solution(args.pid).ModelNew(*p.init_inputs("full")).to("cuda", torch.bfloat16 if model else torch.float32)
    rows = []
    for M in args.rows:
        x = torch.rand(M, p.dims("full").in_features, device="cuda", dtype=torch.bfloat16 if model else torch.float32)

        def call():
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=not model):
                return new(x)
        with torch.no_grad():
            for _ in range(10):
                call()
            torch.cuda.synchronize()
            acts = [torch.profiler.ProfilerActivity.CUDA] + [torch.profiler.ProfilerActivity.CPU] * args.cpu
            with torch.profiler.profile(activities=acts) as prof:
                for _ in range(20):
                    call()
                torch.cuda.synchronize()
            for e in prof.key_averages():
                if e.device_type == torch.autograd.DeviceType.CUDA and e.count:
                    us = e.device_time_total / 20
                    print(f"kernel M={M:<4} {us:8.1f} us per call  x{e.count / 20:.0f}  {e.key[:110]}", flush=True)
                    rows.append({"M": M, "kernel": e.key, "us_per_call": us, "per_call": e.count / 20})
            if args.cpu:  # the host's side: each op's own time per call, the longest first
                host = sorted((e for e in prof.key_averages() if e.self_cpu_time_total > 0),
                              key=lambda e: -e.self_cpu_time_total)
                for e in host[:args.cpu_top]:
                    us = e.self_cpu_time_total / 20
                    print(f"host   M={M:<4} {us:8.1f} us per call  x{e.count / 20:.0f}  {e.key[:110]}", flush=True)
                    rows.append({"M": M, "host_op": e.key, "self_cpu_us_per_call": us, "per_call": e.count / 20})
            flushed = bench.time_ms(call, reps=50).median
            warm = bench.time_ms(call, reps=50, l2="warm").median
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(200):
                call()
            torch.cuda.synchronize()
            queued = (time.perf_counter() - t0) / 200 * 1e3
        print(f"time   M={M:<4} flushed {flushed:.4f} ms, warm {warm:.4f} ms, back to back {queued:.4f} ms per call",
              flush=True)
        rows.append({"M": M, "flushed_ms": flushed, "warm_ms": warm, "back_to_back_ms": queued})
    write_rows(args.out / f"kernels16_probe_{args.mode}_{args.pid}.json", args.commit, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
