"""How fast can rung 9's main loop go on this device? The tensor cores' own ceiling, the clock they
hold while they work, and cuBLAS's kernels beside them.

Rung 9's main loop runs a 128 x 256 x 32 k tile in 0.67-0.69 us at both shapes (README.md, "Where a
block's time goes").
Is that the tensor cores' rate, or is there room inside the loop? kernels/probes/wgmma_peak_probe.cu runs
the same k tile (4 wgmma m64n256k8 per warp group, one group in flight behind another) on a stage
that never changes: no TMA, no barriers, no epilogue. In one run:
  1. the probe checked against float64 (TF32-truncated operands) on every block;
  2. timed (events, medians) at rung 9's work per SM: 512 k tiles per block (1024 x 8192 x 8192:
     two tiles of 256) and 1024 (32768 x 4096 x 1024: the busiest SM's 32 tiles of 32), one block per SM, and
     beside it rung 9 and cuBLAS TF32 at both shapes;
  3. sustained for a few seconds each (the probe, cuBLAS TF32, rung 9) while nvidia-smi samples
     the SM clock and the power draw every 50 ms: the clock a TF32 GEMM runs at on this device;
  4. the names of the kernels cuBLAS runs (torch.profiler): their tile, cluster and schedule.
Its second run also timed rung 9 built in clusters of 2 and one tile per block (`--schedules`,
schedules that have left the header since; that version is in the history: experiments/README.md,
"Historical scripts and logs").

    python -m experiments.wgmma_schedule.peak_probe [--reps 30] [--seconds 3]

Writes $OUT/o/peak_probe.json and prints a short table.
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import torch

from experiments.wgmma_schedule.probe_kit import output_dir, timed
from tests.test_gemm_tensor_cores import FULL
from utils import build, ladder, precision
from utils.tf32 import to_tf32

PROBE, RUNG = "wgmma_peak_probe", "gemm_09_wgmma_tf32"
PROBES = build.KERNELS_DIR / "probes"  # the yardsticks' folder
K_TILE_FMA = 128 * 256 * 32  # one block's k tile
SMI_FIELDS = "clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu"


def k_tiles_per_sm(M: int, N: int, K: int, sms: int) -> int:
    """Rung 9's k tiles on the busiest SM: its blocks (one per SM at a time) times K / 32."""
    blocks = (M + 127) // 128 * ((N + 255) // 256)
    return -(-blocks // sms) * ((K + 31) // 32)


def sampled(fn, seconds: float) -> dict:
    """Runs fn back to back for `seconds` while nvidia-smi samples the SM clock and the power;
    medians of the samples taken after the first second (the clock settles), and fn's rate."""
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits", "-lms", "50"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    fn()
    torch.cuda.synchronize()
    t0 = time.time()
    calls = 0
    while time.time() - t0 < seconds:
        for _ in range(10):
            fn()
        calls += 10
        torch.cuda.synchronize()
    elapsed = time.time() - t0
    smi.terminate()
    lines = smi.communicate()[0].strip().splitlines()
    rows = []
    for line in lines:
        try:
            rows.append([float(v) for v in line.split(",")])
        except ValueError:  # an error line, or a field this nvidia-smi does not know
            continue
    settled = rows[len(rows) // max(1, int(seconds)):] or rows
    med = lambda i: round(statistics.median(r[i] for r in settled), 1) if settled else None
    return {"ms_per_call": round(1000 * elapsed / calls, 4), "samples": len(rows), "sm_clock_mhz": med(0),
            "max_sm_clock_mhz": med(1), "power_w": med(2), "power_limit_w": med(3), "temperature_c": med(4),
            "smi_said": lines[:2] if not rows else []}


def cublas_kernels(fn) -> list[str]:
    """The CUDA kernels one call of fn launches, by name (torch.profiler)."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    out_dir = output_dir()
    t0 = time.time()
    mods = build.load_kernels({PROBE: build.Variant(PROBE, kernels_dir=PROBES), RUNG: build.Variant(RUNG)})
    probe, rung9 = mods[PROBE], mods[RUNG]
    gemms = {"rung 9": rung9.gemm}  # {name: its gemm}
    print(f"built in {time.time() - t0:.0f} s", flush=True)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "sms": sms, "reps": a.reps}

    g = torch.Generator().manual_seed(0)
    px, pw = torch.rand(128, 32, generator=g).cuda(), (torch.rand(256, 32, generator=g) * 2 - 1).cuda()
    want = 3 * (to_tf32(px, "truncate").double() @ to_tf32(pw, "truncate").double().T)
    got = probe.wgmma_peak_probe(px, pw, 3, sms).double()
    err = (got - want).abs().max().item()
    res["probe_check"] = {"max_abs_err": err, "passed": bool(torch.allclose(got, want.expand_as(got), rtol=1e-5, atol=3e-4))}
    print("probe check", res["probe_check"], flush=True)

    res["shapes"] = {}
    for M, N, K in FULL:
        shape = f"{M}x{N}x{K}"
        tiles = k_tiles_per_sm(M, N, K, sms)
        x, w = ladder.operands(M, N, K, seed=0)
        with precision.tf32(True), torch.no_grad():
            ms = timed({"cuBLAS TF32": lambda: torch.mm(x, w.t()),
                        **{n: (lambda g=g: g(x, w)) for n, g in gemms.items()},
                        "probe": lambda: probe.wgmma_peak_probe(px, pw, tiles, sms)}, a.reps)
            names = cublas_kernels(lambda: torch.mm(x, w.t()))
        flops = 2.0 * M * N * K
        row = {"k_tiles_per_sm": tiles, "ms": ms, "cublas_kernels": names,
               "us_per_k_tile": {n: round(1000 * t / tiles, 4) for n, t in ms.items()},
               "tflops": {n: (2.0 * K_TILE_FMA * tiles * sms if n == "probe" else flops) / t / 1e9
                          for n, t in ms.items()}}
        res["shapes"][shape] = row
        print(shape, {n: round(v, 4) for n, v in ms.items()}, "cuBLAS runs", names, flush=True)
        del x, w
        torch.cuda.empty_cache()

    # Sustained: the clock each holds (rung 9 and cuBLAS at the K = 8192 shape, the models' GEMM).
    M, N, K = FULL[0]
    x, w = ladder.operands(M, N, K, seed=0)
    long_iters = 20 * k_tiles_per_sm(M, N, K, sms)
    res["sustained"] = {}
    with precision.tf32(True), torch.no_grad():
        for n, fn in {"probe": lambda: probe.wgmma_peak_probe(px, pw, long_iters, sms),
                      "cuBLAS TF32": lambda: torch.mm(x, w.t()),
                      **{n: (lambda g=g: g(x, w)) for n, g in gemms.items()}}.items():
            s = sampled(fn, a.seconds)
            if n == "probe":
                s["tflops"] = 2.0 * K_TILE_FMA * long_iters * sms / s["ms_per_call"] / 1e9
                s["us_per_k_tile"] = 1000 * s["ms_per_call"] / long_iters
            else:
                s["tflops"] = 2.0 * M * N * K / s["ms_per_call"] / 1e9
            res["sustained"][n] = s
            print("sustained", n, s, flush=True)
    json.dump(res, open(os.path.join(out_dir, "peak_probe.json"), "w"), indent=1)

    print("\nPer SM k tile (128 x 256 x 32), us, and TFLOP/s: medians of one run")
    for shape, row in res["shapes"].items():
        print(f"  {shape:18s} " + "  ".join(f"{n}: {row['us_per_k_tile'][n]:.3f} us {row['tflops'][n]:6.1f}"
                                             for n in row["ms"]))
    for n, s in res["sustained"].items():
        print(f"  sustained {n:12s} {s['tflops']:6.1f} TFLOP/s at {s['sm_clock_mhz']} MHz, {s['power_w']} W "
              f"(limit {s['power_limit_w']} W)")
    print(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
