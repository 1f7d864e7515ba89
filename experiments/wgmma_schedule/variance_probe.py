"""Why does rung 9 at 32768 x 4096 x 1024 measure anywhere from 0.81 to 0.90 ms from one run to the
next (study runs 1-7), while cuBLAS TF32 stays within 0.72-0.74 ms?

Each trial allocates fresh operands behind a spacer of a different size, so x, w and the output land
at other addresses, and times three rounds, each contender one after another: cuBLAS TF32, rung 9
(one tile per block, then the default), rung 9 persistent. If the spread is between trials and not
within them, where the buffers sit decides it; if it is within a trial, it is the device's state
(the clock) at the time. nvidia-smi reads the SM clock after each trial.

    python -m experiments.wgmma_schedule.variance_probe [--trials 6] [--reps 30]

Writes $OUT/o/variance_probe.json and prints a table.
"""
import argparse
import json
import os
import subprocess

import torch

from experiments.wgmma_schedule.schedule_study import output_dir, schedule_kernels
from utils import bench, build, ladder, precision

M, N, K = 32768, 4096, 1024
RUNG = "gemm_09_wgmma_tf32"


def sm_clock() -> str:
    out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True)
    return out.stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=6)
    ap.add_argument("--reps", type=int, default=30)
    a = ap.parse_args()
    mods = build.load_kernels({"one tile per block": build.Variant(RUNG, kernels_dir=schedule_kernels((1, 0))),
                               "persistent": build.Variant(RUNG, kernels_dir=schedule_kernels((1, 1)))})
    rows = []
    gen = torch.Generator().manual_seed(0)
    for trial in range(a.trials):
        spacer = torch.empty(int(torch.randint(0, 32 << 20, (1,), generator=gen)) + 4096 * trial, dtype=torch.uint8,
                             device="cuda")
        x, w = ladder.operands(M, N, K, seed=trial)
        with precision.tf32(True), torch.no_grad():
            contenders = {"cuBLAS TF32": lambda: torch.mm(x, w.t())}
            contenders.update({name: (lambda m=m: m.gemm(x, w)) for name, m in mods.items()})
            out_ptr = mods["one tile per block"].gemm(x, w).data_ptr()
            times = {name: [] for name in contenders}
            for _ in range(3):
                for name, fn in contenders.items():
                    t = bench.time_ms(fn, reps=a.reps)
                    times[name].append([round(t.median, 4), round(t.p20, 4), round(t.p80, 4)])
        row = {"trial": trial, "x_mod_2MB": x.data_ptr() % (2 << 20), "w_mod_2MB": w.data_ptr() % (2 << 20),
               "out_mod_2MB": out_ptr % (2 << 20), "spacer_MB": round(spacer.numel() / 2**20, 2),
               "smi_clock_power": sm_clock(), "times": times}
        rows.append(row)
        print(f"trial {trial}: x%2MB {row['x_mod_2MB']:>8} out%2MB {row['out_mod_2MB']:>8} clock,power {row['smi_clock_power']}  " +
              "  ".join(f"{n}: {' '.join(f'{t[0]:.4f}' for t in ts)}" for n, ts in times.items()), flush=True)
        del x, w, spacer
        torch.cuda.empty_cache()
    json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "shape": [M, N, K], "reps": a.reps,
               "trials": rows}, open(os.path.join(output_dir(), "variance_probe.json"), "w"), indent=1)
    print("\nmedian ms per trial (three rounds each: min-max)")
    for row in rows:
        print(f"  trial {row['trial']}: " + "  ".join(
            f"{n} {min(t[0] for t in ts):.4f}-{max(t[0] for t in ts):.4f}" for n, ts in row["times"].items()))


if __name__ == "__main__":
    main()
