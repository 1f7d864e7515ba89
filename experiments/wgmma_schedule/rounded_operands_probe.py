"""Does a TF32 GEMM run faster on operands already rounded to TF32?

At the 700 W limit a GEMM's clock is set by its energy per FLOP (peak_probe.py), and part of that
energy is the bits that flip as operands move from DRAM through the L2 and shared memory into the
tensor cores. The tensor cores read 19 of an fp32 operand's 32 bits; the low 13 still travel. A
weight rounded to TF32 once (cvt.rna, kept between calls as rung 10 keeps its split) has those
13 bits zero in every copy of every tile, and rounding to nearest is no less accurate than the
tensor cores' own truncation of the raw value.

In one run, on the current GPU, at 1024 x 8192 x 8192 and 32768 x 4096 x 1024:
  1. rung 9 on the rounded weight (and on both operands rounded) checked against float64 of the
     raw operands at the TF32 tier, every element;
  2. timed in turn (utils.bench.time_interleaved): cuBLAS TF32 and rung 9, each on the raw operands,
     on the rounded weight, and on both rounded;
  3. rung 9 and cuBLAS sustained for a few seconds each, raw and on the rounded weight, while
     nvidia-smi samples the SM clock and the power (peak_probe.sampled);
  4. problem 62 with TF32: torch.compile (default mode) against our whole model on the raw weight
     and on the rounded one, checked against eager at the TF32 tier.

    python -m experiments.wgmma_schedule.rounded_operands_probe [--reps 30] [--seconds 3]

Writes $OUT/o/rounded_operands_probe.json and prints a table.
"""
import argparse
import json
import os
import time

import torch

from experiments.wgmma_schedule.headroom_probe import against_compile, print_against_compile, problem_62
from experiments.wgmma_schedule.peak_probe import sampled
from experiments.wgmma_schedule.probe_kit import FUSED, output_dir, timed
from tests.test_gemm_tensor_cores import FULL
from utils import build, ladder, precision
from utils.chapters import session as chapter
from utils.tf32 import to_tf32

RUNG, MODEL = "gemm_09_wgmma_tf32", "fused_gemm_groupnorm"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    out_dir = output_dir()
    chapter.quiet_inductor()
    t0 = time.time()
    mods = build.load_kernels([RUNG, MODEL])
    rung9 = mods[RUNG].gemm
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "reps": a.reps, "gemm": {},
           "sustained": {}, "model_62": {}}

    for M, N, K in FULL:
        shape = f"{M}x{N}x{K}"
        x, w = ladder.operands(M, N, K, seed=0)
        xr, wr = to_tf32(x), to_tf32(w)
        operands = {"raw": (x, w), "w rounded": (x, wr), "x and w rounded": (xr, wr)}
        with precision.tf32(True), torch.no_grad():
            ref = torch.nn.functional.linear(x.double(), w.double())
            checks = {}
            for name, (p, q) in operands.items():  # every one against the raw operands' exact product
                ok, checks[name] = ladder.verify(rung9, p, q, "tf32", reference=ref)
                print(f"{shape}: rung 9, {name}: {'passed' if ok else 'FAILED'} ({checks[name]})", flush=True)
                if not ok:
                    raise SystemExit(1)
            del ref
            c = {}
            for name, (p, q) in operands.items():
                c[f"cuBLAS TF32, {name}"] = lambda p=p, q=q: torch.mm(p, q.t())
                c[f"rung 9, {name}"] = lambda p=p, q=q: rung9(p, q)
            ms = timed(c, a.reps)
            res["gemm"][shape] = {"checks": checks, "ms": ms}
            print("   ", {n: round(v, 4) for n, v in ms.items()}, flush=True)
            if (M, N, K) == FULL[0]:
                for name in ("cuBLAS TF32, raw", "cuBLAS TF32, w rounded", "rung 9, raw", "rung 9, w rounded"):
                    res["sustained"][name] = s = sampled(c[name], a.seconds)
                    print(f"    sustained {name}: {s}", flush=True)
        del x, w, xr, wr, operands
        torch.cuda.empty_cache()

    ref, x, lin, rest = problem_62()
    wr = to_tf32(lin.weight.detach())
    fused = getattr(mods[MODEL], FUSED[62])
    with precision.tf32(True), torch.no_grad():
        ours = {"ours, raw weight": lambda: fused(x, lin.weight, lin.bias, *rest, None, False)[0],
                "ours, weight rounded": lambda: fused(x, wr, lin.bias, *rest, None, False)[0]}
        res["model_62"] = against_compile(ref, x, ours, {}, a.reps)
    json.dump(res, open(os.path.join(out_dir, "rounded_operands_probe.json"), "w"), indent=1)

    print("\nms (x cuBLAS TF32 on the raw operands):")
    for shape, r in res["gemm"].items():
        ms = r["ms"]
        base = ms["cuBLAS TF32, raw"]
        print(f"  {shape}")
        for n, v in ms.items():
            print(f"      {n:32s} {v:.4f}  {base / v:.3f}x")
    print("sustained (1024 x 8192 x 8192):")
    for n, s in res["sustained"].items():
        print(f"      {n:32s} {s['ms_per_call']:.4f} ms/call  {s['sm_clock_mhz']} MHz  {s['power_w']} W")
    print_against_compile(res["model_62"]["ms"])
    print(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
