"""What the TF32 training step's dW GEMM spends on its output, on the GPU.

dW = dyᵀ·x at problems 94, 75 and 62's size is an 8192 x 8192 output summed over a batch of 1024:
15.5 waves of 128 x 256 tiles whose main loops are 32 k tiles long, each ending in a store of its
128 KB from registers. The 268 MB the GEMM writes is what sets it apart from the forward's GEMM of
the same FLOPs, whose output is 33.5 MB. How much of dW's time those stores take bounds what
hiding them behind the next tile's main loop (ping-pong, a staged store) could gain, and so how
close the training step can come to three GEMMs at cuBLAS's best rate.

Contenders at M = N = 8192, K = 1024, TF32, every one timed in turn (probe_kit.timed):
  cuBLAS TF32 mm        torch.mm(dyᵀ, x), as eager's backward computes dW
  rung 9                the workbook's wgmma GEMM on K-major copies of dyᵀ and xᵀ
  rung 9, no stores     the same build patched to store nothing (headroom_probe's patch): every
                        accumulator computed, nothing written; the ceiling of hiding the stores
  linear_backward dW    what the drop-ins run: the transposed copies and rung 9's GEMM
  the two copies        dy and x copied transposed, alone
Rung 9 is checked against float64 at the TF32 tier first (on the ladder's operands of this shape),
linear_backward's dW against float64 within 1% of its largest element; the build that stores nothing
cannot be checked.

    python -m experiments.training.dw_store_probe [--reps 30]

Writes $OUT/o/dw_store_probe.json and prints a table.
"""
import argparse
import json
import os

from pathlib import Path

import torch

from experiments.wgmma_schedule.headroom_probe import PATCHES
from experiments.wgmma_schedule.probe_kit import output_dir, patched_kernels, timed
from utils import build, ladder, precision

RUNG = "gemm_09_wgmma_tf32"
N_BATCH, C, K_IN = 1024, 8192, 8192  # problems 94, 75, 62: x (N, K_in), dy (N, C), dW (C, K_in)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--work", type=Path, default=Path("/tmp/dw_store_probe"))
    a = ap.parse_args()
    mods = build.load_kernels({"default": RUNG, "no stores": build.Variant(
        RUNG, kernels_dir=patched_kernels("no stores", PATCHES["no stores"], a.work)), "ops": "gemm_10_3xtf32"})
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(N_BATCH, K_IN, device="cuda", generator=g)
    dy = torch.randn(N_BATCH, C, device="cuda", generator=g)
    w = torch.randn(C, K_IN, device="cuda", generator=g)
    dyt, xt = dy.t().contiguous(), x.t().contiguous()  # K-major operands: dW = dyt @ xt.T
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "reps": a.reps,
           "shape": {"M": C, "N": K_IN, "K": N_BATCH}}
    with precision.tf32(True), torch.no_grad():
        # rung 9 on the ladder's operands at this shape (the tier is calibrated on them: randn's sums
        # of 1024 truncated products reach its atol), linear_backward on these
        ok, detail = ladder.verify(mods["default"].gemm, *ladder.operands(C, K_IN, N_BATCH, seed=0), "tf32")
        _, dw = mods["ops"].linear_backward(dy, x, w, False, True)
        want = (dy.double().t() @ x.double()).float()
        ok_ops = torch.allclose(dw, want, rtol=1e-2, atol=1e-2 * want.abs().max().item())
        print(f"rung 9 against float64: {'passed' if ok else 'FAILED'} ({detail}); "
              f"linear_backward dW: {'passed' if ok_ops else 'FAILED'}", flush=True)
        if not (ok and ok_ops):
            raise SystemExit(1)
        ms = timed({
            "cuBLAS TF32 mm": lambda: torch.mm(dy.t(), x),
            "rung 9": lambda: mods["default"].gemm(dyt, xt),
            "rung 9, no stores": lambda: mods["no stores"].gemm(dyt, xt),
            "linear_backward dW": lambda: mods["ops"].linear_backward(dy, x, w, False, True),
            "the two copies": lambda: (dy.t().contiguous(), x.t().contiguous()),
        }, a.reps)
    flops = 2 * C * K_IN * N_BATCH
    res["ms"] = ms
    res["tflops"] = {n: flops / (v * 1e9) for n, v in ms.items() if n != "the two copies"}
    with open(os.path.join(output_dir(), "dw_store_probe.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(f"dW = dyᵀ·x, {C} x {K_IN} x {N_BATCH}, TF32, on {res['device']}:")
    for n, v in ms.items():
        rate = f"{res['tflops'][n]:6.0f} TFLOP/s" if n in res["tflops"] else ""
        print(f"  {n:22s} {v:.4f} ms  {rate}")
    print(f"  the stores: {ms['rung 9'] - ms['rung 9, no stores']:.4f} ms of rung 9's {ms['rung 9']:.4f}")


if __name__ == "__main__":
    main()
