"""Nsight Compute on the workbook's kernels: the few metrics that decide what binds a kernel, recorded.

    python -m utils.profile                  # on a GPU: every target under ncu, recorded as results/<device>/profile.json
    python -m utils.profile --target "rung 7"

Each target runs once to warm up (builds, autotuning, caches) and once more inside an NVTX range named
"profile"; ncu profiles every kernel launched in that range (`--nvtx --nvtx-include profile/`), with
its kernel replay (each kernel re-run once per group of counters, memory restored in between), and
reads the metrics of METRICS. The record has one entry per (target, kernel, metric): what chapters 03
and 09 read their debriefs from.

Metric names differ between GPU generations and ncu versions, so each role lists candidates and the
first one this ncu knows (`ncu --query-metrics`) is measured; a role none of whose candidates exists
is left out and said so, never filled in.
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import shutil
import subprocess
import sys
from typing import Callable

import torch

from utils import build, ladder, ops, results
from utils.kernelbench import p094_gemm_biasadd_hardtanh_mish_groupnorm as p094

NVTX_RANGE = "profile"

# role -> candidate metrics, the first this ncu has wins; each role answers one question of the debriefs
METRICS: dict[str, tuple[str, ...]] = {
    "duration": ("gpu__time_duration.sum",),
    "DRAM throughput, % of peak": ("dram__throughput.avg.pct_of_peak_sustained_elapsed",),
    "SM throughput, % of peak": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "FMA pipe, % of active cycles": ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",),
    "tensor pipe, % of active cycles": ("sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
                                        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                                        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"),
    "achieved occupancy, % of max warps": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "shared loads, bank conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",),
    "shared loads, wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",),
    "shared stores, bank conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",),
    "registers per thread": ("launch__registers_per_thread",),
}


def _rung7() -> Callable[[], object]:
    x, w = ladder.operands(*ladder.SHAPE)
    mod = build.load_kernel("gemm_07_pipelined")
    return lambda: mod.gemm(x, w)


def _whole_model_94() -> Callable[[], object]:
    """Problem 94's forward as its drop-in runs it (solutions/p094_...: one call of the whole-model op, with
    the reference Model's parameters), strict tier, no gradient: the library's op, not the solution module,
    which sits above the library."""
    torch.manual_seed(0)
    m = p094.Model(*p094.get_init_inputs()).cuda()
    x = p094.get_inputs()[0].cuda()
    gn = m.groupnorm

    def call():
        with torch.no_grad():
            return ops.linear_bias_hardtanh_mish_group_norm(x, m.gemm.weight, m.gemm.bias, m.bias, m.hardtanh.min_val,
                                                            m.hardtanh.max_val, gn.num_groups, gn.weight, gn.bias,
                                                            gn.eps)
    return call


# name -> (what it is, how to make the callable)
TARGETS: dict[str, tuple[str, Callable[[], Callable[[], object]]]] = {
    "rung 7": ("the cp.async-pipelined SIMT GEMM at 1024 x 8192 x 8192 (notebook 03)", _rung7),
    "whole model 94": ("problem 94's whole-model kernel, strict tier, KernelBench's shape (notebook 09)", _whole_model_94),
}


def run_target(name: str) -> None:
    """Run a target once, then once more inside the NVTX range ncu profiles (this is what ncu launches)."""
    call = TARGETS[name][1]()
    call()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(NVTX_RANGE)
    call()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()


def available_metrics(ncu: str) -> set[str]:
    out = subprocess.run([ncu, "--query-metrics", "--csv"], capture_output=True, text=True, check=True).stdout
    return {row[0].strip() for row in csv.reader(io.StringIO(out)) if row}


def chosen_metrics(known: set[str]) -> tuple[dict[str, str], list[str]]:
    """({role: metric}, [roles none of whose candidates this ncu knows]). query-metrics lists base names
    ("dram__throughput"), the roles ask for base name + rollup ("...avg.pct_of_peak_sustained_elapsed")."""
    chosen, missing = {}, []
    for role, candidates in METRICS.items():
        found = next((m for m in candidates if m in known or m.split(".")[0] in known), None)
        if found:
            chosen[role] = found
        else:
            missing.append(role)
    return chosen, missing


def parse_raw_csv(text: str, chosen: dict[str, str]) -> list[dict]:
    """ncu's `--page raw --csv` output (a header row, a units row, one row per kernel) to entries."""
    lines = [line for line in text.splitlines() if line.startswith('"')]  # ncu's own log lines start with ==
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 3:
        raise RuntimeError(f"ncu profiled no kernel in the '{NVTX_RANGE}' range:\n{text[-2000:]}")
    header, units, kernels = rows[0], rows[1], rows[2:]
    col = {name: i for i, name in enumerate(header)}
    entries = []
    for row in kernels:
        for role, metric in chosen.items():
            if metric not in col:
                continue
            value = row[col[metric]].replace(",", "")
            entries.append({"kernel": row[col["Kernel Name"]], "role": role, "metric": metric,
                            "value": float(value) if value not in ("", "n/a") else None, "unit": units[col[metric]]})
    return entries


def profile(name: str, ncu: str, chosen: dict[str, str]) -> list[dict]:
    cmd = [ncu, "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/", "--metrics", ",".join(chosen.values()),
           "--page", "raw", "--csv", sys.executable, "-m", "utils.profile", "--run-target", name]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if done.returncode != 0:
        raise RuntimeError(f"ncu failed on {name!r} (exit {done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    return [{"target": name, **e} for e in parse_raw_csv(done.stdout, chosen)]


def main_kernel(entries: list[dict]) -> list[dict]:
    """The entries of the kernel a target spends its time in: the longest by its recorded duration (the role
    "duration"), or the only kernel. A target may launch several (problem 94's strict forward splits the
    weight in a pass of its own before the GEMM): what one kernel's metrics say is not another's."""
    kernels = list(dict.fromkeys(e["kernel"] for e in entries))
    if len(kernels) <= 1:
        return list(entries)
    duration = {e["kernel"]: e["value"] for e in entries if str(e["metric"]).startswith(METRICS["duration"])}
    longest = max(kernels, key=lambda k: duration.get(k, -1.0))
    return [e for e in entries if e["kernel"] == longest]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m utils.profile", description=__doc__.splitlines()[0])
    ap.add_argument("--target", action="append", choices=sorted(TARGETS), help="profile only this target (repeatable)")
    ap.add_argument("--run-target", choices=sorted(TARGETS), help=argparse.SUPPRESS)  # what ncu launches
    ap.add_argument("--results-dir", default=None, help="record under this results root (default results/)")
    args = ap.parse_args(argv)
    if args.run_target:
        run_target(args.run_target)
        return 0
    if not torch.cuda.is_available():
        print("utils.profile: no GPU here; the recorded profiles are results/<device>/profile.json")
        return 0
    ncu = shutil.which("ncu")
    if ncu is None:
        print("utils.profile: Nsight Compute's `ncu` is not on PATH (it comes with the CUDA toolkit)", file=sys.stderr)
        return 2
    chosen, missing = chosen_metrics(available_metrics(ncu))
    if missing:
        print(f"utils.profile: this ncu knows none of the candidates for {missing}; left out", flush=True)
    entries = []
    for name in args.target or list(TARGETS):
        print(f"[profile] {name}: {TARGETS[name][0]}", flush=True)
        got = profile(name, ncu, chosen)
        entries += got
        for e in got:
            print(f"  {e['kernel'][:60]:<60} {e['role']:<36} {e['value']} {e['unit']}", flush=True)
    path = results.record("profile", entries, results_dir=args.results_dir,
                          notes="python -m utils.profile: Nsight Compute, kernel replay, one call inside an NVTX range"
                                + (f"; no metric for {', '.join(missing)} on this ncu" if missing else ""))
    print(f"recorded {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
