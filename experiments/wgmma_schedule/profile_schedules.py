"""Rung 9's GEMM once per schedule, for Nsight Compute to profile side by side (the builds are the
study's, warm when schedule_study.py ran first):

    ncu --kernel-name regex:gemm_wgmma_kernel --section SpeedOfLight --section WarpStateStats \
        python -m experiments.wgmma_schedule.profile_schedules --shape 32768 4096 1024 --schedules 1,0 2,0
"""
import argparse

import torch

from experiments.wgmma_schedule.schedule_study import schedule_kernels, schedule_name
from utils import build, ladder


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", type=int, nargs=3, default=[32768, 4096, 1024])
    ap.add_argument("--schedules", nargs="*", default=["1,0", "2,0"])
    a = ap.parse_args()
    schedules = [tuple(int(v) for v in s.split(",")) for s in a.schedules]
    mods = build.load_kernels({s: build.Variant("gemm_09_wgmma_tf32", kernels_dir=schedule_kernels(s)) for s in schedules})
    x, w = ladder.operands(*a.shape, seed=0)
    for s in schedules:
        mods[s].gemm(x, w)
        torch.cuda.synchronize()
        print(f"ran {schedule_name(s)} at {a.shape}", flush=True)


if __name__ == "__main__":
    main()
