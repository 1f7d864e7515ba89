"""One schema for recorded measurements: results/<device-slug>/<kind>.json, and the README table.

    path = record("baselines", entries, notes="notebook 01", results_dir=RESULTS_DIR)
    rec = load("baselines")            # this GPU's record; without a GPU, that of the one device
                                       # reading_device() picks for every kind (never mixed)
    python -m utils.results --update-readme   # regenerate README.md's results table
    python -m utils.results --check-readme    # exit 1 if the table is out of date (a test runs this)
    python -m utils.results --commit          # the git_commit a record made here carries (for a GPU runner)

A record (schema 1) is one JSON object:

    {"schema": 1,
     "kind": "baselines",                       # [a-z0-9_]+, also the file name
     "device": {"name": "NVIDIA H100 80GB HBM3", "slug": "nvidia-h100-80gb-hbm3",
                "cc": "9.0", "sm_count": 132, "memory_gb": 85.0, "l2_mb": 50.0},  # l2_mb may be null
     "torch": "2.11.0+cu128", "cuda": "12.8",
     "git_commit": "1a2b3c4" | "1a2b3c4-dirty" | "unknown",
     "date": "2025-06-01T12:34:56+00:00",       # ISO-8601, UTC
     "notes": "free text",
     "entries": [{...}, ...]}

Results are GPU recordings: `record` refuses to write one on a machine without a GPU.
One file per kind and device; recording again replaces it (git keeps the history).

Reading and writing: `load`, `recorded` and `latest` read under `root_dir` (the argument, else
$WORKBOOK_RESULTS_DIR, else results/); `record` and the notebooks' plots write under
`write_root`, which is the same folder except while $WORKBOOK_RECORD_DIR is set: then what would
be written into the repository's results/ goes there instead. The test session sets it
(conftest.py), so that `make test` and nbval, which execute the notebooks with their default
RESULTS_DIR, still show the recorded runs and never write into results/.

Entry conventions of the kinds known so far (every listed key is required):

    ceilings       exactly one entry {"copy_GBps", "fp32_tflops", "tf32_tflops"}
                   (utils.bench.Ceilings.entry(); copy counts bytes read + written)
    baselines      {"problem": 94, "contender": "eager" | "torch.compile" |
                    "torch.compile max-autotune" | ..., "tf32": false, "median_ms", "p20_ms",
                    "p80_ms", "tflops", "floor_ms", "pct_of_floor"}
                   floor_ms is the floor that applies under that TF32 setting;
                   pct_of_floor = 100 * floor_ms / median_ms (100 = runs at the floor).
                   utils.bench.compare() rows carry these keys; add "problem".
    eager_profile  {"problem": 94, "op": "aten::addmm", "cuda_ms", "pct"}
                   pct: share of that problem's eager CUDA time.
    ladder         {"contender": "gemm_01_naive" | ... | "cuBLAS", "median_ms", "tflops"}
                   compare() rows, in ladder order.
    bias_fusion    {"contender", "gemm": "rung 7" | "cuBLAS" | "none", "biases": 0 | 1 | 2,
                    "separate_passes", "median_ms", "p20_ms", "p80_ms", "shape": [M, N, K]}
                   notebook 04: compare() rows of one run, TF32 off. "gemm" is the GEMM
                   underneath ("none": the (M, N) copy that is a separate pass's floor);
                   "separate_passes": elementwise kernels the contender launches after it.
    fused_activations, groupnorm_fusion, broadcast_min
                   notebooks 05, 06, 07: the memory-bound kernels, compare() rows of one run,
                   {"problem": 94, "contender", "role": "ours" | "eager" | "torch" | "copy" |
                    "yardstick" (a kernel of ours measured for comparison, not held to the target),
                    "median_ms", "p20_ms", "p80_ms", "bytes", "GBps", "pct_of_copy", "shape"}
                   and optionally "replaces": [contender, ...] (the rows of the same problem it
                   is compared with: the eager chain, F.group_norm). bytes: the least the
                   contender's work must move (each input read once, each output written once);
                   GBps = bytes / median; pct_of_copy = 100 * GBps / the GBps of the problem's
                   "copy" row, a copy of a tensor of the same size timed in the same run.
    solutions      notebook 09: the drop-ins against eager and torch.compile, TF32 off and on,
                   {"problem", "contender": "eager" | "torch.compile" |
                    "torch.compile max-autotune-no-cudagraphs" | "ours" | "ours, frozen" |
                    "ours + torch.compile", "tf32", "protocol": "steady" | "per_call", "median_ms",
                    "p20_ms", "p80_ms", "tflops", "floor_ms", "pct_of_floor"} and optionally
                   "compile_s" (the first call of a compiled contender) and "max_abs_vs_eager".
                   "ours": the default, nothing derived from the weight kept between calls; "ours,
                   frozen": after freeze() (utils/freezing.py). "steady": calls queued back to back
                   (utils.bench.time_ms); "per_call": a synchronize after every call (KernelBench's
                   per-trial protocol), the CPU's launch cost included.
    training       notebook 09 (utils.chapter.measure_training): a training step (forward and backward,
                   the gradients of the input and every parameter), TF32 off and on, compare() rows of
                   one run {"problem", "contender": "eager" | "torch.compile" |
                    "torch.compile max-autotune-no-cudagraphs" | "ours", "tf32", "protocol": "steady",
                    "median_ms", "p20_ms", "p80_ms"} and "gradients" (the check's verdict before
                   timing), "compile_s" for the compiled contenders.
    autocast       notebook 09 (utils.chapter.measure_autocast): the forward under torch.autocast,
                   compare() rows of one run {"problem", "contender" (as training's), "autocast":
                   "bf16" | "fp16", "tf32", "protocol": "steady", "median_ms", "p20_ms", "p80_ms",
                   "max_abs_vs_eager"}, every contender checked against eager under autocast first.
    scoreboard     python -m utils.scoreboard: every chapter's composition of the four models, one run,
                   TF32 off, {"problem", "stage": "eager" | "torch.compile" |
                    "torch.compile max-autotune-no-cudagraphs" | "02" ... "09", "contender", "median_ms",
                    "p20_ms", "p80_ms", "reps"} and "warmup", "first_call_s", "max_abs_vs_eager".
                   reps differ between entries: a slow contender (rung 1) is timed fewer times.
    tensor_cores   notebook 08 (utils.tensor_core_chapter.measure), one GPU run, {"section", "contender"}, and
                   by section: "accuracy" {"problem", "excess" (largest allclose excess against eager fp32 at
                   1e-4 over the seeds), "excess_by_seed", "max_abs", "seeds", "source": "cuBLAS" (TF32
                   GEMMs on pre-split operands) | "rung 10" (with "promote_k")}; "promotion_k" {"M", "N",
                   "K", "max_abs_err", "strict_ratio"}; "timing" compare() rows with "shape", "tflops",
                   "pct_of_cublas_tf32", "x_cublas_sgemm", "tier".
    whole_model_fusion
                   notebook 08, section 6 (utils.tensor_core_chapter.measure_fusion): each model with its
                   tail in the GEMM's epilogue, compare() rows of one run per problem and tier, {"problem",
                   "tier": "strict" | "tf32", "contender": "eager" | "torch.compile" | "unfused" | "fused" |
                   "fused, atomic fold" (75) | "its GEMM alone", "median_ms", "p20_ms", "p80_ms",
                   "max_abs_vs_eager", "shape": [M, C, K]} and "median_ms_by_round" (two rounds, the second in
                   reverse order; the row is the contender's better round). Every contender was checked
                   against eager at the tier's tolerance before it was timed ("its GEMM alone" against
                   eager's GEMM).

Adding a kind: add a `Kind` to KINDS with its required entry keys and, to show it in the
README, a render function (record -> Markdown). Kinds not in KINDS are still valid
records; the README lists them without rendering them.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from utils import REPO

SCHEMA = 1
README = REPO / "README.md"
RESULTS = REPO / "results"
RECORD_DIR_ENV = "WORKBOOK_RECORD_DIR"  # where writes aimed at results/ go instead (the test session's temp folder)
DEVICE_ENV = "WORKBOOK_RESULTS_DEVICE"  # without a GPU: the device (a slug) whose records the notebooks read
# What a recorded measurement depends on: a record made with any of these differing from HEAD is "-dirty".
CODE_PATHS = ("kernels", "notebooks", "solutions", "utils", "pyproject.toml", "Makefile")
BEGIN = "<!-- results:begin -->"
END = "<!-- results:end -->"
DEVICE_KEYS = ("name", "slug", "cc", "sm_count", "memory_gb", "l2_mb")
TOP_KEYS = ("schema", "kind", "device", "torch", "cuda", "git_commit", "date", "notes", "entries")
_KIND_RE = re.compile(r"[a-z0-9_]+")


# --------------------------------------------------------------------------- metadata

def _device() -> dict:
    from utils import env

    props = env.gpu_properties()
    if props is None:
        return {"name": "cpu", "slug": "cpu", "cc": None, "sm_count": None, "memory_gb": None, "l2_mb": None}
    return {
        "name": props["name"],
        "slug": env.device_slug(props["name"]),
        "cc": props["cc"],
        "sm_count": props["sms"],
        "memory_gb": props["memory_gb"],
        "l2_mb": props["l2_mb"],
    }


def short_commit(commit: str) -> str:
    """A full 40-hex sha shortened to git's 7 characters (a runner may be given either); anything else as is."""
    return commit[:7] if re.fullmatch(r"[0-9a-f]{40}", commit) else commit


def git_commit(repo: Path = REPO) -> str:
    """Short sha of HEAD, "-dirty" if the code (CODE_PATHS: the kernels among them) differs from it,
    untracked files included; "unknown" outside a git checkout.

    $WORKBOOK_GIT_COMMIT wins: a GPU runner that gets a copy of the tree without .git says
    there which commit the copy is of. The copy cannot check itself, so the runner passes what
    the checkout says, dirty mark included: WORKBOOK_GIT_COMMIT=$(python -m utils.results --commit)."""
    if os.environ.get("WORKBOOK_GIT_COMMIT"):
        return short_commit(os.environ["WORKBOOK_GIT_COMMIT"])
    if shutil.which("git") is None:
        return "unknown"
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:  # not a checkout, or no commit yet
        return "unknown"
    # Only the code: results/ is written by recording (it would make every later record dirty), and
    # the docs, tests and experiments/ do not change what a notebook measures.
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--", *CODE_PATHS],
                            capture_output=True, text=True, check=True)
    return head.stdout.strip() + ("-dirty" if status.stdout.strip() else "")


def metadata() -> dict:
    """Everything a record says about where and when it was measured (all but kind, notes, entries)."""
    import torch

    return {
        "device": _device(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "none",
        "git_commit": git_commit(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


# --------------------------------------------------------------------------- kinds

@dataclass(frozen=True)
class Kind:
    title: str
    entry_keys: tuple[str, ...]  # every entry has at least these
    render: Callable[[dict], str] | None = None  # record -> Markdown for the README
    one_entry: bool = False


def _speedup(eager: dict | None, e: dict) -> str:
    return "–" if eager is None else f"{eager['median_ms'] / e['median_ms']:.2f}x"


def _render_ceilings(rec: dict) -> str:
    e = rec["entries"][0]
    return "\n".join([
        "| copy bandwidth | FP32 SGEMM (cuBLAS) | TF32 GEMM (cuBLAS) |",
        "|---:|---:|---:|",
        f"| {e['copy_GBps']:.0f} GB/s | {e['fp32_tflops']:.1f} TFLOP/s | {e['tf32_tflops']:.1f} TFLOP/s |",
    ])


def _render_baselines(rec: dict) -> str:
    from utils.problems import PROBLEMS

    by_problem: dict[int, list[dict]] = {}
    for e in rec["entries"]:
        by_problem.setdefault(e["problem"], []).append(e)
    parts = ["Speedup is against eager PyTorch with TF32 off (KernelBench's reference setting). "
             "% of floor = floor time / median time: 100 % would run at the floor "
             "(memory, or FP32 / TF32 math as the TF32 setting allows)."]
    for pid, entries in by_problem.items():
        eager = next((e for e in entries if e["contender"] == "eager" and not e["tf32"]), None)
        order = list(dict.fromkeys(e["contender"] for e in entries))  # first-appearance order
        entries = sorted(entries, key=lambda e: (order.index(e["contender"]), e["tf32"]))
        name = PROBLEMS[pid].kernelbench_file.removesuffix(".py") if pid in PROBLEMS else f"problem {pid}"
        parts.append("\n".join([
            f"**{name}**",
            "",
            "| contender | TF32 | median ms | speedup vs eager | % of floor |",
            "|---|---|---:|---:|---:|",
            *(f"| {e['contender']} | {'on' if e['tf32'] else 'off'} | {e['median_ms']:.3f} | "
              f"{_speedup(eager, e)} | {e['pct_of_floor']:.0f} % |"
              for e in entries),
        ]))
    return "\n\n".join(parts)


def _render_ladder(rec: dict) -> str:
    shape = rec["entries"][0].get("shape")
    lines = [f"M x N x K = {' x '.join(map(str, shape))}, fp32, TF32 off." if shape else "",
             "", "| rung | median ms | TFLOP/s | % of cuBLAS |", "|---|---:|---:|---:|"]
    cublas = next((e for e in rec["entries"] if e["contender"] == "cuBLAS"), None)
    for e in rec["entries"]:
        pct = f"{100 * cublas['median_ms'] / e['median_ms']:.1f} %" if cublas else "–"
        lines.append(f"| {e['contender']} | {e['median_ms']:.3f} | {e['tflops']:.2f} | {pct} |")
    return "\n".join(lines).lstrip("\n")


def _render_ladder_tuning(rec: dict) -> str:
    shape = rec["entries"][0].get("shape")
    lines = [f"Rung 7 (`{rec['entries'][0].get('kernel', 'gemm_07_pipelined')}`) over slice depth BK and pipeline stages"
             + (f" at {' x '.join(map(str, shape))}" if shape else "") + ", % of cuBLAS SGEMM in the same run.",
             "", "| BK | stages | median ms | TFLOP/s | % of cuBLAS |", "|---:|---:|---:|---:|---:|"]
    for e in rec["entries"]:
        if e.get("bk") is not None:
            mark = " (default)" if e.get("default") else ""
            lines.append(f"| {e['bk']} | {e['stages']}{mark} | {e['median_ms']:.3f} | {e['tflops']:.2f} | "
                         f"{e['pct_of_cublas']:.1f} % |")
    return "\n".join(lines)


def _render_bias_fusion(rec: dict) -> str:
    entries = rec["entries"]
    shape = entries[0]["shape"]
    # Each contender against the same GEMM without a bias, measured in the same run: the first such row
    # of each GEMM is its control (a later one, timed again at the end, shows how far the run drifted).
    base: dict[str, dict] = {}
    for e in entries:
        if e["biases"] == 0 and e["gemm"] != "none":
            base.setdefault(e["gemm"], e)
    lines = [f"M x N x K = {' x '.join(map(str, shape))}, fp32, TF32 off, one run. Extra: the median over "
             "the same GEMM's median without a bias (p20-p80 spread of that GEMM in brackets).",
             "", "| contender | GEMM | biases | passes after the GEMM | median ms | extra over the GEMM alone |",
             "|---|---|---:|---:|---:|---:|"]
    for e in entries:
        ref = base.get(e["gemm"])
        if ref is None:
            extra = "(a separate pass's floor)"
        elif e is ref:
            extra = f"(spread {100 * (ref['p80_ms'] - ref['p20_ms']) / ref['median_ms']:.2f} %)"
        else:
            d = e["median_ms"] - ref["median_ms"]
            extra = f"{1e3 * d:+.1f} us ({100 * d / ref['median_ms']:+.2f} %)"
        lines.append(f"| {e['contender']} | {e['gemm']} | {e['biases']} | {e['separate_passes']} | "
                     f"{e['median_ms']:.3f} | {extra} |")
    return "\n".join(lines)


def _render_memory_bound(rec: dict) -> str:
    by_problem: dict[int, list[dict]] = {}
    for e in rec["entries"]:
        by_problem.setdefault(e["problem"], []).append(e)
    parts = ["One run. GB/s: the least bytes the work must move (inputs read once, outputs written once) over the "
             "median time; % of copy: that over the GB/s of a copy of a tensor of the same size, timed in the same run."]
    for pid, entries in by_problem.items():
        named = {e["contender"]: e for e in entries}
        lines = [f"**Problem {pid}**, shape {' x '.join(map(str, entries[0]['shape']))}", "",
                 "| contender | role | median us | GB/s | % of copy | faster than |", "|---|---|---:|---:|---:|---|"]
        for e in entries:
            against = [f"{named[r]['median_ms'] / e['median_ms']:.2f}x {r}" for r in e.get("replaces", ()) if r in named]
            lines.append(f"| {e['contender']} | {e['role']} | {1e3 * e['median_ms']:.1f} | {e['GBps']:.0f} | "
                         f"{e['pct_of_copy']:.0f} % | {'; '.join(against) or '–'} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _best_compiled(at: dict, pid: int, tf32: bool, protocol: str) -> dict | None:
    """The faster torch.compile row of a problem, TF32 setting and protocol; `at` maps (problem,
    contender, tf32, protocol) to entries."""
    compiled = [e for k, e in at.items() if k[0] == pid and k[2] == tf32 and k[3] == protocol
                and k[1].startswith("torch.compile")]
    return min(compiled, key=lambda e: e["median_ms"]) if compiled else None


def _by_key(entries: list[dict]) -> dict:
    return {(e["problem"], e["contender"], e["tf32"], e["protocol"]): e for e in entries}


def _render_solutions(rec: dict) -> str:
    """Per problem: each contender's steady and per-call medians, its speedup over eager fp32 (TF32 off),
    and ours against the faster torch.compile mode with the same TF32 setting."""
    from utils.problems import PROBLEMS

    entries = rec["entries"]
    at = _by_key(entries)
    parts = ["Speedup is against eager PyTorch with TF32 off (KernelBench's setting), in the same protocol. "
             "steady: calls queued back to back; per call: a synchronize after each call (KernelBench's "
             "per-trial protocol), so the CPU's launch cost counts. vs compile: the faster torch.compile "
             "mode with the same TF32 setting over this contender, same protocol."]
    for pid in dict.fromkeys(e["problem"] for e in entries):
        name = PROBLEMS[pid].kernelbench_file.removesuffix(".py") if pid in PROBLEMS else f"problem {pid}"
        lines = [f"**{name}**", "", "| contender | TF32 | steady ms | per call ms | vs eager fp32 | "
                 "vs compile | vs compile, per call |", "|---|---|---:|---:|---:|---:|---:|"]
        contenders = list(dict.fromkeys(e["contender"] for e in entries if e["problem"] == pid))
        for tf32 in (False, True):
            for c in contenders:
                steady, call = at.get((pid, c, tf32, "steady")), at.get((pid, c, tf32, "per_call"))
                if steady is None:
                    continue
                eager = at.get((pid, "eager", False, "steady"))
                cells = [f"{steady['median_ms']:.3f}", f"{call['median_ms']:.3f}" if call else "–",
                         _speedup(eager, steady)]
                for protocol, mine in (("steady", steady), ("per_call", call)):
                    best = _best_compiled(at, pid, tf32, protocol) if mine else None
                    cells.append(_speedup(best, mine) if best else "–")
                lines.append(f"| {c} | {'on' if tf32 else 'off'} | " + " | ".join(cells) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _render_steady_rows(rec: dict, intro: str, tf32_column: bool) -> str:
    """One table of a steady-state side-by-side record: per problem (and TF32 setting), each contender's
    median against eager and the faster torch.compile mode under the same settings."""
    at = _by_key(rec["entries"])
    tf32_head = ("| TF32 ", "|---") if tf32_column else ("", "")
    lines = [intro, "", f"| problem {tf32_head[0]}| contender | ms | vs eager | vs compile |",
             f"|---{tf32_head[1]}|---|---:|---:|---:|"]
    for (pid, c, tf32, protocol), e in at.items():
        best = _best_compiled(at, pid, tf32, protocol)
        tf32_cell = f"| {'on' if tf32 else 'off'} " if tf32_column else ""
        lines.append(f"| {pid} {tf32_cell}| {c} | {e['median_ms']:.3f} | "
                     f"{_speedup(at.get((pid, 'eager', tf32, protocol)), e)} | {_speedup(best, e) if best else '–'} |")
    return "\n".join(lines)


def _render_training(rec: dict) -> str:
    return _render_steady_rows(rec, "A training step: forward and backward, the gradients of the input and every "
                               "parameter, steady state. vs eager and vs compile: eager's and the faster "
                               "torch.compile mode's time with the same TF32 setting over this contender's.", True)


def _render_autocast(rec: dict) -> str:
    dtypes = ", ".join(sorted({e["autocast"] for e in rec["entries"]}))
    return _render_steady_rows(rec, f"The forward under torch.autocast ({dtypes}), steady state. vs eager and vs "
                               "compile: eager's and the faster torch.compile mode's time under the same autocast "
                               "over this contender's.", False)


def _render_scoreboard(rec: dict) -> str:
    from utils import scoreboard  # its rendering lives with its measurement

    return scoreboard.markdown(rec)


def _render_tensor_cores(rec: dict) -> str:
    from utils import tensor_core_chapter  # its rendering lives with its measurement

    return tensor_core_chapter.render(rec)


def _render_whole_model_fusion(rec: dict) -> str:
    from utils import tensor_core_chapter  # its rendering lives with its measurement

    return tensor_core_chapter.render_fusion(rec)


_MEMORY_BOUND_KEYS = ("problem", "contender", "role", "median_ms", "p20_ms", "p80_ms", "bytes", "GBps", "pct_of_copy",
                      "shape")


KINDS: dict[str, Kind] = {
    "ceilings": Kind("Ceilings", ("copy_GBps", "fp32_tflops", "tf32_tflops"), _render_ceilings, one_entry=True),
    "baselines": Kind("Baselines", ("problem", "contender", "tf32", "median_ms", "p20_ms", "p80_ms", "tflops",
                                    "floor_ms", "pct_of_floor"), _render_baselines),
    "eager_profile": Kind("Where eager spends its time", ("problem", "op", "cuda_ms", "pct")),
    "ladder": Kind("GEMM ladder", ("contender", "median_ms", "tflops"), _render_ladder),
    "ladder_tuning": Kind("GEMM rung 7 tuning", ("contender", "bk", "stages", "median_ms", "tflops", "pct_of_cublas"),
                          _render_ladder_tuning),
    "bias_fusion": Kind("Bias fusion (notebook 04)", ("contender", "gemm", "biases", "separate_passes", "median_ms",
                                                      "p20_ms", "p80_ms", "shape"), _render_bias_fusion),
    "fused_activations": Kind("Fused activations (notebook 05)", _MEMORY_BOUND_KEYS, _render_memory_bound),
    "groupnorm_fusion": Kind("GroupNorm, alone and fused (notebook 06)", _MEMORY_BOUND_KEYS, _render_memory_bound),
    "broadcast_min": Kind("GroupNorm + row min + broadcast, problem 75 (notebook 07)", _MEMORY_BOUND_KEYS,
                          _render_memory_bound),
    "solutions": Kind("The drop-in solutions against eager and torch.compile (notebook 09)",
                      ("problem", "contender", "tf32", "protocol", "median_ms", "p20_ms", "p80_ms", "tflops",
                       "floor_ms", "pct_of_floor"), _render_solutions),
    "training": Kind("A training step against eager and torch.compile (notebook 09)",
                     ("problem", "contender", "tf32", "protocol", "median_ms", "p20_ms", "p80_ms"), _render_training),
    "autocast": Kind("The forward under torch.autocast against eager and torch.compile (notebook 09)",
                     ("problem", "contender", "autocast", "tf32", "protocol", "median_ms", "p20_ms", "p80_ms"),
                     _render_autocast),
    "scoreboard": Kind("Scoreboard: the four models after each chapter (python -m utils.scoreboard)",
                       ("problem", "stage", "contender", "median_ms", "p20_ms", "p80_ms", "reps"), _render_scoreboard),
    "tensor_cores": Kind("Tensor cores: 3xTF32 accuracy and the tensor-core rungs (notebook 08)", ("section", "contender"),
                         _render_tensor_cores),
    "whole_model_fusion": Kind("Whole models in the GEMM's epilogue against the unfused path (notebook 08)",
                               ("problem", "tier", "contender", "median_ms", "p20_ms", "p80_ms", "max_abs_vs_eager"),
                               _render_whole_model_fusion),
}


# --------------------------------------------------------------------------- validate, record, load

def validate(rec: dict) -> dict:
    """Check a record against schema 1 (and its kind's entry keys); return it, or raise ValueError."""
    errors = []
    if not isinstance(rec, dict):
        raise ValueError(f"a record is a JSON object, got {type(rec).__name__}")
    missing, extra = [k for k in TOP_KEYS if k not in rec], [k for k in rec if k not in TOP_KEYS]
    if missing or extra:
        raise ValueError(f"record keys: missing {missing}, unexpected {extra} (schema {SCHEMA} has {list(TOP_KEYS)})")
    if rec["schema"] != SCHEMA:
        errors.append(f"schema is {rec['schema']!r}, this code reads {SCHEMA}")
    if not (isinstance(rec["kind"], str) and _KIND_RE.fullmatch(rec["kind"])):
        errors.append(f"kind {rec['kind']!r} is not a [a-z0-9_]+ name")
    dev = rec["device"]
    if not isinstance(dev, dict) or sorted(dev) != sorted(DEVICE_KEYS):
        errors.append(f"device must have exactly the keys {list(DEVICE_KEYS)}, got {dev!r}")
    elif dev["slug"] == "cpu" or dev["cc"] is None:
        errors.append(f"device {dev!r} is not a GPU: results are GPU recordings")
    for key in ("torch", "cuda", "git_commit", "notes", "date"):
        if not isinstance(rec[key], str):
            errors.append(f"{key} must be a string, got {rec[key]!r}")
    if isinstance(rec["date"], str):
        try:
            when = datetime.fromisoformat(rec["date"])
        except ValueError:
            when = None
        if when is None or when.utcoffset() is None:
            errors.append(f"date {rec['date']!r} is not ISO-8601 with a UTC offset")
    entries = rec["entries"]
    if not (isinstance(entries, list) and entries and all(isinstance(e, dict) for e in entries)):
        errors.append("entries must be a non-empty list of objects")
    elif rec["kind"] in KINDS:
        spec = KINDS[rec["kind"]]
        if spec.one_entry and len(entries) != 1:
            errors.append(f"{rec['kind']} has exactly one entry, got {len(entries)}")
        for i, e in enumerate(entries):
            if lacking := [k for k in spec.entry_keys if k not in e]:
                errors.append(f"entry {i} lacks {lacking} (a {rec['kind']} entry has {list(spec.entry_keys)})")
    if errors:
        raise ValueError(f"invalid {rec.get('kind')!r} record: " + "; ".join(errors))
    return rec


def root_dir(results_dir: str | Path | None = None) -> Path:
    """The results root that records are read from: the argument, else $WORKBOOK_RESULTS_DIR, else REPO/results."""
    return Path(results_dir or os.environ.get("WORKBOOK_RESULTS_DIR") or RESULTS)


def write_root(results_dir: str | Path | None = None) -> Path:
    """Where records and plots aimed at `results_dir` are written: root_dir(results_dir), except
    that while $WORKBOOK_RECORD_DIR is set, the repository's results/ is replaced by that folder.
    Only results/ is redirected: a test that records into its own tmp_path gets its tmp_path."""
    root = root_dir(results_dir)
    redirect = os.environ.get(RECORD_DIR_ENV)
    if redirect and root.resolve() == RESULTS.resolve():
        return Path(redirect)
    return root


def plot_path(kind: str, results_dir: str | Path | None = None, *, on_gpu: bool) -> Path | None:
    """Where a plot of this machine's own measurement is saved: beside its JSON, under write_root
    (under test, a temporary folder). None off the GPU: a replot of a recorded run is not saved."""
    from utils import env

    return write_root(results_dir) / env.device_slug() / f"{kind}.png" if on_gpu else None


def record(kind: str, entries: list[dict], *, notes: str = "", results_dir: str | Path | None = None) -> Path:
    """Write results/<device-slug>/<kind>.json (under write_root) with this machine's metadata; return its path."""
    meta = metadata()
    if meta["device"]["slug"] == "cpu":
        raise RuntimeError(f"not recording {kind!r}: there is no GPU here, and results/ holds GPU recordings only "
                           "(run this on a GPU, or read the recorded runs with utils.results.load)")
    rec = validate({"schema": SCHEMA, **meta, "kind": kind, "notes": notes, "entries": list(entries)})
    rec = {k: rec[k] for k in TOP_KEYS}  # a stable key order in the file
    path = write_root(results_dir) / rec["device"]["slug"] / f"{kind}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=1, allow_nan=False) + "\n")
    return path


def read(path: str | Path) -> dict:
    """A recorded file, validated."""
    return validate(json.loads(Path(path).read_text()))


def recorded_devices(results_root: str | Path | None = None) -> list[str]:
    """The slugs of the devices with at least one record under the results root, sorted."""
    return sorted({p.parent.name for p in root_dir(results_root).glob("*/*.json")})


def reading_device(results_root: str | Path | None = None, *, on_gpu: bool | None = None) -> str | None:
    """The one device whose records a run here reads, for every kind: figures that combine two
    records (an Amdahl bound from a profile and a measurement, a ratio of two runs) must never
    combine two devices.

    - On a GPU: this GPU's slug, whether or not it has records yet (a kind it lacks is missing,
      never taken from another device). on_gpu=None asks utils.env; a notebook passes its
      session's on_gpu, so a GPU machine run as WORKBOOK_MODE=compile-only reads as one without.
    - Without one: $WORKBOOK_RESULTS_DEVICE if set (a slug), else the device that has recorded
      the most kinds, the newer of its records breaking a tie: the most complete recording wins, and
      a device that recorded one kind later does not hide the rest. None when nothing is recorded.
    """
    from utils import env

    slug = env.device_slug()
    if on_gpu is None:
        on_gpu = slug != "cpu"
    if on_gpu and slug != "cpu":
        return slug
    if os.environ.get(DEVICE_ENV):
        return os.environ[DEVICE_ENV]
    root = root_dir(results_root)
    ranked = []
    for device in recorded_devices(root):
        records = [read(p) for p in (root / device).glob("*.json")]
        newest = max(datetime.fromisoformat(r["date"]) for r in records)
        ranked.append((len(records), newest, device))
    return max(ranked)[2] if ranked else None


def latest(kind: str, results_root: str | Path | None = None, *, on_gpu: bool | None = None
           ) -> tuple[dict | None, Path | None]:
    """The record of `kind` that a run here reads, and its path; (None, None) if there is none.
    It comes from reading_device() (this GPU's, or without one the one device chosen for every
    kind), never from whichever device recorded that kind last."""
    device = reading_device(results_root, on_gpu=on_gpu)
    path = root_dir(results_root) / device / f"{kind}.json" if device else None
    return (read(path), path) if path is not None and path.exists() else (None, None)


def recorded(kind: str, results_root: str | Path | None = None, *, on_gpu: bool | None = None) -> dict | None:
    """The record of `kind` a notebook shows: this GPU's, or without a GPU the reading device's
    (reading_device); None when that device has none. What every notebook helper should call."""
    return latest(kind, results_root, on_gpu=on_gpu)[0]


def load(kind: str, device: str | None = None, results_root: str | Path | None = None) -> dict | None:
    """The record of `kind` for `device` (a slug). With device=None: the reading device's
    (reading_device: this GPU's, or without a GPU one device chosen for every kind). None when
    there is no such record."""
    if device is None:
        return recorded(kind, results_root)
    path = root_dir(results_root) / device / f"{kind}.json"
    return read(path) if path.exists() else None


# --------------------------------------------------------------------------- results/ left untouched

def snapshot(root: str | Path) -> dict[str, tuple[int, int, str]]:
    """Every file under `root`: its path relative to root -> (size, mtime in ns, sha256 of its bytes).
    The mtime catches a file rewritten with the same bytes: that is a write into results/ too."""
    root = Path(root)
    return {p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns,
                                             hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file()}


def changes(before: dict, after: dict) -> list[str]:
    """What differs between two snapshots, one line per file ("added x", "removed x", "modified x")."""
    return ([f"added {p}" for p in sorted(after.keys() - before.keys())]
            + [f"removed {p}" for p in sorted(before.keys() - after.keys())]
            + [f"modified {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]])


# --------------------------------------------------------------------------- README table

def _stamp(rec: dict) -> str:
    return (f"{rec['device']['name']}, torch {rec['torch']} (CUDA {rec['cuda']}), "
            f"{rec['date'][:10]}, commit `{short_commit(rec['git_commit'])}`")


def _render_device(records: list[dict]) -> str:
    dev = records[0]["device"]
    l2 = f", L2 {dev['l2_mb']:.0f} MB" if dev["l2_mb"] else ""  # older torch does not report it
    parts = [f"### {dev['name']}",
             f"compute capability {dev['cc']}, {dev['sm_count']} SMs, {dev['memory_gb']:.0f} GB{l2}"]
    known = [r for kind in KINDS for r in records if r["kind"] == kind and KINDS[kind].render]
    for rec in known:
        parts.append(f"**{KINDS[rec['kind']].title}**, recorded on {_stamp(rec)}")
        parts.append(KINDS[rec["kind"]].render(rec))
    if rest := sorted(r["kind"] for r in records if r not in known):
        parts.append("Also recorded (not shown here): " + ", ".join(f"`{k}`" for k in rest) + ".")
    return "\n\n".join(parts)


def render_readme_table(results_root: str | Path | None = None) -> str:
    """Markdown for README.md, generated from results/*/*.json: one section per device."""
    root = root_dir(results_root)
    by_device: dict[str, list[dict]] = {}
    for path in sorted(root.glob("*/*.json")):
        by_device.setdefault(path.parent.name, []).append(read(path))
    header = ("<!-- generated by `python -m utils.results --update-readme` from results/*/*.json: "
              "do not edit by hand -->")
    if not by_device:
        return header + "\n\nNo GPU run recorded yet: on a GPU, `make run` and `make bench` record them under results/<device>/."
    return "\n\n".join([header, *(_render_device(by_device[slug]) for slug in sorted(by_device))])


def update_readme(readme: str | Path = README, check: bool = False, results_root: str | Path | None = None) -> bool:
    """Regenerate the span between the results markers. True if it was already up to date;
    with check=True nothing is written."""
    readme = Path(readme)
    text = readme.read_text()
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ValueError(f"{readme} needs one {BEGIN} line followed by one {END} line around the results table")
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    new = f"{head}{BEGIN}\n{render_readme_table(results_root)}\n{END}{tail}"
    if new == text:
        return True
    if not check:
        readme.write_text(new)
    return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m utils.results",
                                 description="README results table from results/; the commit a record carries")
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--update-readme", action="store_true", help="rewrite the README's results table")
    what.add_argument("--check-readme", action="store_true", help="exit 1 if the README's table is out of date")
    what.add_argument("--show", action="store_true", help="print the table")
    what.add_argument("--commit", action="store_true",
                      help="print the git_commit a record made here carries (a GPU runner's WORKBOOK_GIT_COMMIT)")
    ap.add_argument("--readme", type=Path, default=README)
    ap.add_argument("--results-dir", type=Path, default=None, help="results root (default results/)")
    args = ap.parse_args(argv)
    if args.show:
        print(render_readme_table(args.results_dir))
        return 0
    if args.commit:
        print(git_commit())
        return 0
    current = update_readme(args.readme, check=args.check_readme, results_root=args.results_dir)
    if args.check_readme and not current:
        print(f"{args.readme}: the results table is out of date with results/; "
              "run `python -m utils.results --update-readme` (never edit that span by hand)", file=sys.stderr)
        return 1
    print(f"{args.readme}: results table {'already up to date' if current else 'updated'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
