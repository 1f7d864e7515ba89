"""Does eager's time depend on what it is timed in turn with? (the scoreboard and chapter 09 quote problem 94's
whole model over eager from two interleaved runs on one card, and eager came out 2-4% apart)

    python experiments/full_run/eager_neighbours.py --out OUT

Problem 94's eager forward (strict tier: cuBLAS's SIMT SGEMM, then the tail) timed by bench.time_interleaved in
five company sets, each twice: alone; with three tensor-core GEMMs of the same shape (1xTF32, cuBLAS's); with
three SIMT GEMMs (as the scoreboard's rungs 03-07); with three of chapter 09's whole-model kernels at the strict
tier (3xTF32, as 09's set has them); alone again; and with --soak,
alone after that many seconds of SIMT GEMMs back to back (a card held hot, as a chapter after another finds it). nvidia-smi samples
the SM clock, power and temperature every 100 ms meanwhile (OUT/smi.csv); OUT/eager_neighbours.json has each
set's medians with the wall-clock window it ran in.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from solutions import solution  # noqa: E402
from utils import bench, precision  # noqa: E402
from utils.problems import get_problem  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--soak", type=float, default=0.0,
                    help="then heat the card for this many seconds with SIMT GEMMs and time eager alone again")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu",
                            "--format=csv,noheader", "-lms", "100"], stdout=open(args.out / "smi.csv", "w"))
    p = get_problem(94)
    model = p.make_model("full", seed=0).cuda().eval()
    x = p.get_inputs("full", generator=torch.Generator().manual_seed(1))[0].cuda()
    w = model.gemm.weight.detach().clone()

    def tf32_gemm():
        with precision.tf32(True):
            return F.linear(x, w)

    def simt_gemm():
        with precision.tf32(False):
            return F.linear(x, w)

    fused = solution(94).ModelNew(*p.init_inputs("full")).cuda().eval()  # chapter 09's fused kernel, strict: 3xTF32
    fused.load_state_dict(model.state_dict())

    def fused_model():
        return fused(x)

    sets = {
        "alone": {"eager": model},
        "with 3 TF32 GEMMs": {"eager": model, "tc1": tf32_gemm, "tc2": tf32_gemm, "tc3": tf32_gemm},
        "with 3 SIMT GEMMs": {"eager": model, "simt1": simt_gemm, "simt2": simt_gemm, "simt3": simt_gemm},
        "with 3 3xTF32 whole models": {"eager": model, "f1": fused_model, "f2": fused_model, "f3": fused_model},
        "alone again": {"eager": model},
    }
    if args.soak:
        sets[f"alone after {args.soak:.0f} s of SIMT GEMMs"] = {"eager": model}
    rows = []
    with torch.no_grad(), precision.tf32(False):
        for name, fns in sets.items():
            if name.startswith("alone after"):
                t_end = time.time() + args.soak
                while time.time() < t_end:
                    for _ in range(20):
                        simt_gemm()
                    torch.cuda.synchronize()
            for run in range(2):
                t0 = time.time()
                fns_called = {k: (lambda f=f: f(x)) if f is model else f for k, f in fns.items()}
                times = bench.time_interleaved(fns_called, reps=args.reps)
                t1 = time.time()
                row = {"set": name, "run": run, "start": t0, "end": t1,
                       **{f"{k}_ms": times[k].median for k in times}, "eager_p20": times["eager"].p20,
                       "eager_p80": times["eager"].p80}
                rows.append(row)
                print(f"{name:<20} run {run}: eager {times['eager'].median:.4f} ms "
                      f"({times['eager'].p20:.4f}-{times['eager'].p80:.4f})"
                      + "".join(f", {k} {times[k].median:.4f}" for k in times if k != "eager"), flush=True)
                time.sleep(1.0)
    smi.terminate()
    (args.out / "eager_neighbours.json").write_text(json.dumps({"device": torch.cuda.get_device_name(),
                                                                  "torch": torch.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
