"""Where does a block of rung 9 spend its time? A timeline of every block of one GEMM call.

Rung 9 runs at 97% of cuBLAS TF32 at 1024 x 8192 x 8192 but 83-91% at 32768 x 4096 x 1024, and
at that shape it lands in one of two modes about 8% apart from run to run (README.md, "Noise at
K = 1024"). Every block there computes one 128 x 256 tile in 32 k tiles, so what surrounds the
main loop weighs more: the first stage's arrival, the epilogue's 128 KB of stores, the next
block's start on the SM.

A patched copy of kernels/ (as cluster_probe.py makes them) stamps %globaltimer at four points
of every block: its entry, the consumers' first full stage, the end of the main loop (the last
wgmma done) and the end of the epilogue (all consumer threads past a barrier), with the SM it
ran on. The stamps cost a barrier and a few stores per block; the probe build is timed beside the
unpatched build to show what that changes. Both are built with one tile per block
(ScheduleCooperative), the schedule its runs had, since a persistent block would overwrite
its row of stamps at every tile.

    python -m experiments.wgmma_schedule.timeline_probe [--calls 5]

Writes $OUT/o/timeline_probe.json (each captured call's summary, and every stamp of the first)
and prints, per shape, the medians of each phase, the gap between consecutive blocks on one SM,
and how closely the blocks of a wave end together.
"""
import argparse
import json
import os
import statistics
import time

from pathlib import Path

import torch

from experiments.wgmma_schedule.schedule_study import (output_dir, patched_kernels, schedule_kernels,
                                                       schedule_patches, timed)
from tests.test_gemm_tensor_cores import FULL
from utils import build, ladder, precision

RUNG = "gemm_09_wgmma_tf32"
STAMPS = 5  # per block: SM, entry, first full stage, main loop done, epilogue done
CAPACITY = 8192  # blocks
# The stamps are per block, one row each: the schedule the probe was written for and ran with, one
# tile per block. Persistent blocks (the default since 37bb4a1) would overwrite a block's row at
# every tile.
ONE_TILE_PER_BLOCK = (1, 0)  # a schedule of schedule_study: no cluster, not persistent

TIMER = """#include "common/hopper.cuh"
#include "common/tensor_core.cuh"

// timeline_probe: per block [SM, entry, first stage, main loop done, epilogue done], ns
__device__ unsigned long long g_timeline[%d * %d];
__device__ __forceinline__ unsigned long long probe_timer() {
  unsigned long long t;
  asm volatile("mov.u64 %%0, %%%%globaltimer;" : "=l"(t));
  return t;
}""" % (STAMPS, CAPACITY)

PATCHES = [
    ('#include "common/hopper.cuh"\n#include "common/tensor_core.cuh"', TIMER),
    ("  const int wg = threadIdx.x / 128;\n",
     "  const int wg = threadIdx.x / 128;\n"
     "  const unsigned long long t_entry = probe_timer();\n"
     "  unsigned long long t_first = 0, t_loop = 0;\n"),
    ("        hopper::mbar_wait(&full[s], (it / C::STAGES) & 1);\n        const uint64_t a_big",
     "        hopper::mbar_wait(&full[s], (it / C::STAGES) & 1);\n"
     "        if (kt == 0 && threadIdx.x == 128) t_first = probe_timer();\n"
     "        const uint64_t a_big"),
    ("      release((it - 1) % C::STAGES);  // the tile's last stage",
     "      if (threadIdx.x == 128) t_loop = probe_timer();\n"
     "      release((it - 1) % C::STAGES);  // the tile's last stage"),
    ("        finish(DirectWriter{epi.out, t.row, t.col, M, N});\n      }\n",
     "        finish(DirectWriter{epi.out, t.row, t.col, M, N});\n      }\n"
     "      hopper::named_barrier(5, 128 * CONSUMERS);\n"
     "      if (threadIdx.x == 128 && blockIdx.x < %d) {\n"
     "        unsigned smid;\n"
     "        asm volatile(\"mov.u32 %%0, %%%%smid;\" : \"=r\"(smid));\n"
     "        unsigned long long* p = g_timeline + %d * blockIdx.x;\n"
     "        p[0] = smid; p[1] = t_entry; p[2] = t_first; p[3] = t_loop; p[4] = probe_timer();\n"
     "      }\n" % (CAPACITY, STAMPS)),
]

EXPORT = """

// @export: the timeline_probe stamps of the last call's first n blocks, (n, 5) int64 on the CPU
torch::Tensor timeline(int64_t n) {
  TORCH_CHECK(n > 0 && n <= %d, "timeline: 1 .. %d blocks");
  torch::Tensor t = at::empty({n, %d}, at::TensorOptions().dtype(at::kLong));
  C10_CUDA_CHECK(cudaDeviceSynchronize());
  C10_CUDA_CHECK(cudaMemcpyFromSymbol(t.data_ptr<int64_t>(), g_timeline, n * %d * sizeof(int64_t)));
  return t;
}
""" % (CAPACITY, CAPACITY, STAMPS, STAMPS)


def probe_kernels(root: Path) -> Path:
    kernels = patched_kernels("timeline", schedule_patches(ONE_TILE_PER_BLOCK) + PATCHES, root)
    with open(kernels / f"{RUNG}.cu", "a") as f:
        f.write(EXPORT)
    return kernels


def summary(stamps: torch.Tensor) -> dict:
    """Medians (µs) of each phase over the blocks, the gap between consecutive blocks on one SM,
    and the spread of the end times within each wave of 132 (the first blocks to end, etc.)."""
    s = stamps.tolist()
    t0 = min(r[1] for r in s)
    us = lambda v: v / 1000.0
    fill = [us(r[2] - r[1]) for r in s]
    loop = [us(r[3] - r[2]) for r in s]
    epi = [us(r[4] - r[3]) for r in s]
    by_sm = {}
    for r in s:
        by_sm.setdefault(r[0], []).append(r)
    gaps = []
    for rows in by_sm.values():
        rows.sort(key=lambda r: r[1])
        gaps += [us(b[1] - a[4]) for a, b in zip(rows, rows[1:])]
    ends = sorted(us(r[4] - t0) for r in s)
    sms = len(by_sm)
    waves = [ends[i:i + sms] for i in range(0, len(ends), sms)]
    med = lambda v: round(statistics.median(v), 2) if v else None
    return {"blocks": len(s), "sms": sms, "span_us": round(us(max(r[4] for r in s) - t0), 1),
            "fill_us": med(fill), "main_loop_us": med(loop), "epilogue_us": med(epi), "gap_us": med(gaps),
            "wave_end_spread_us": [round(w[-1] - w[0], 1) for w in waves[:6]]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--work", type=Path, default=Path("/tmp/timeline_probe"))
    a = ap.parse_args()
    out_dir = output_dir()
    t0 = time.time()
    mods = build.load_kernels({"default": build.Variant(RUNG, kernels_dir=schedule_kernels(ONE_TILE_PER_BLOCK, a.work)),
                               "timeline": build.Variant(RUNG, kernels_dir=probe_kernels(a.work))})
    print(f"built in {time.time() - t0:.0f} s", flush=True)
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "shapes": {}}
    for M, N, K in FULL:
        x, w = ladder.operands(M, N, K, seed=0)
        blocks = (M + 127) // 128 * ((N + 255) // 256)
        with precision.tf32(True), torch.no_grad():
            ok, detail = ladder.verify(mods["timeline"].gemm, x, w, "tf32")
            ms = timed({"cuBLAS TF32": lambda: torch.mm(x, w.t()), "default": lambda: mods["default"].gemm(x, w),
                        "timeline": lambda: mods["timeline"].gemm(x, w)}, a.reps)
            calls = []
            for _ in range(a.calls):
                mods["timeline"].gemm(x, w)
                calls.append(mods["timeline"].timeline(blocks))
        shape = f"{M}x{N}x{K}"
        res["shapes"][shape] = {"check": detail if not ok else "passed", "ms": ms,
                                "summaries": [summary(c) for c in calls], "stamps": calls[0].tolist()}
        print(shape, "check", "passed" if ok else f"FAILED: {detail}", {n: round(v, 4) for n, v in ms.items()})
        for sm in res["shapes"][shape]["summaries"]:
            print("   ", sm, flush=True)
        del x, w
        torch.cuda.empty_cache()
    json.dump(res, open(os.path.join(out_dir, "timeline_probe.json"), "w"))
    print(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
