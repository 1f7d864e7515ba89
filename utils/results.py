"""One schema for recorded measurements: results/<device-slug>/<kind>.json (the README table that
shows them is utils/report/).

    path = record("baselines", entries, notes="notebook 01", results_dir=RESULTS_DIR)
    rec = load("baselines")            # this GPU's record; without a GPU, that of the one device
                                       # reading_device() picks for every kind (never mixed)
    python -m utils.results --commit          # the git_commit a record made here carries (for a GPU runner)
    python -m utils.results --stale           # the records whose kernel sources changed since they were made

A record (schema 2) is one JSON object:

    {"schema": 2,
     "kind": "baselines",                       # [a-z0-9_]+, also the file name
     "device": {"name": "NVIDIA H100 80GB HBM3", "slug": "nvidia-h100-80gb-hbm3",
                "cc": "9.0", "sm_count": 132, "memory_gb": 85.0, "l2_mb": 50.0},  # l2_mb may be null
     "torch": "2.11.0+cu128", "cuda": "12.8",
     "git_commit": "1a2b3c4" | "1a2b3c4-dirty" | "unknown",
     "kernels": {"sha256": "...",               # the kernel sources it ran (kernel_sources): over every file,
                 "files": {"kernels/activations.cu": "<sha256>", ...}},   # and file by file
     "date": "2025-06-01T12:34:56+00:00",       # ISO-8601, UTC
     "notes": "free text",
     "entries": [{...}, ...]}

Schema 1, the records made before records carried "kernels", is the same without that key: still read,
of unknown provenance (kernel_drift says None). A record's kernels are hashed from the files that ran,
not from git: a runner without .git records them too, and a record stays checkable when git_commit
is "-dirty". `python -m utils.results --stale` (and tests/test_record_provenance.py) names the records
whose kernel sources have changed since: a file modified or removed since the record ran, unless git still
holds the file the record ran (at its commit, with its hash) and the two differ only in comments and
layout; a file added since changes nothing the record measured.

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
    solutions      notebook 10: the drop-ins against eager and torch.compile, TF32 off and on,
                   {"problem", "contender": "eager" | "torch.compile" |
                    "torch.compile max-autotune-no-cudagraphs" | "ours" | "ours, frozen" |
                    "ours + torch.compile", "tf32", "protocol": "steady" | "per_call", "median_ms",
                    "p20_ms", "p80_ms", "tflops", "floor_ms", "pct_of_floor"} and optionally
                   "compile_s" (the first call of a compiled contender) and "max_abs_vs_eager".
                   "ours": the default, nothing derived from the weight kept between calls; "ours,
                   frozen": after freeze() (utils/freezing.py). "steady": calls queued back to back
                   (utils.bench.time_ms); "per_call": a synchronize after every call (KernelBench's
                   per-trial protocol), the CPU's launch cost included. "timing": "interleaved" where the row
                   says how its contenders were timed (in turn, utils.bench.time_interleaved; training and autocast too).
    training       notebook 13 (utils.chapters.session.measure_training): a training step (forward and backward,
                   the gradients of the input and every parameter), TF32 off and on, compare() rows of
                   one run {"problem", "contender": "eager" | "torch.compile" |
                    "torch.compile max-autotune-no-cudagraphs" | "ours", "tf32", "protocol": "steady",
                    "median_ms", "p20_ms", "p80_ms"} and "gradients" (the check's verdict before
                   timing), "compile_s" for the compiled contenders.
    autocast       notebook 13 (utils.chapters.session.measure_autocast): the forward under torch.autocast,
                   compare() rows of one run {"problem", "contender" (as training's), "autocast":
                   "bf16" | "fp16", "tf32", "protocol": "steady", "median_ms", "p20_ms", "p80_ms",
                   "max_abs_vs_eager"}, every contender checked against eager under autocast first.
    scoreboard     python -m utils.chapters.scoreboard: every chapter's composition of the four models, one run,
                   TF32 off, {"problem", "stage": "eager" | "torch.compile" |
                    "torch.compile max-autotune-no-cudagraphs" | "02" ... "10", "contender", "median_ms",
                    "p20_ms", "p80_ms", "reps"} and "warmup", "first_call_s", "max_abs_vs_eager", and since the
                   contenders are timed in turn as notebook 10's, "timing": "interleaved" and "group": "main" |
                   "slow" (utils.bench.time_interleaved per problem; the slow ones in a group of their own).
                   reps differ between entries: a slow contender (rung 1) is timed fewer times.
    tensor_cores   notebooks 08 and 09 (utils.chapters.tensor_cores.measure), one GPU run,
                   {"section", "contender"}, and by section: "accuracy" {"problem", "excess" (largest
                   allclose excess against eager fp32 at 1e-4 over the seeds), "excess_by_seed", "max_abs",
                   "seeds", "source": "cuBLAS" (TF32 GEMMs on pre-split operands) | "rung 10" (with
                   "promote_k")}; "promotion_k" {"M", "N", "K", "max_abs_err", "strict_ratio"}; "timing"
                   compare() rows with "shape", "tflops", "pct_of_cublas_tf32", "x_cublas_sgemm", "tier".
    whole_model_fusion
                   notebook 09, section 4 (utils.chapters.epilogue_fusion.measure_fusion): each model with its
                   tail in the GEMM's epilogue, compare() rows of one run per problem and tier, {"problem",
                   "tier": "strict" | "tf32", "contender": "eager" | "torch.compile" | "unfused" | "fused" |
                   "fused, atomic fold" (75) | "its GEMM alone", "median_ms", "p20_ms", "p80_ms",
                   "max_abs_vs_eager", "shape": [M, C, K]} and "median_ms_by_round" (two rounds, the second in
                   reverse order; the row is the contender's better round). Every contender was checked
                   against eager at the tier's tolerance before it was timed ("its GEMM alone" against
                   eager's GEMM).
    sanitize       python -m utils.sanitize: one entry per (tool, target), {"tool": "memcheck" | ..., "target":
                   "gemm_05_blocktile_2d/reduced" | ..., "verdict": "clean" | "errors" | "crashed" |
                   "not finished" | "not run" | "skipped", "errors" (the tool's count; null without its
                   summary), "seconds", "commit", "device"} and the calls run, the filters used, the log's path.

Adding a kind: add a `Kind` to KINDS with its required entry keys and, to show it in the
README, a render function in utils/report/ (utils.report.readme.RENDERERS). Kinds not in KINDS are still valid
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
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from utils import REPO, env

SCHEMA = 2  # what record() writes; validate() reads SCHEMAS
README = REPO / "README.md"
RESULTS = REPO / "results"
RECORD_DIR_ENV = "WORKBOOK_RECORD_DIR"  # where writes aimed at results/ go instead (the test session's temp folder)
DEVICE_ENV = "WORKBOOK_RESULTS_DEVICE"  # without a GPU: the device (a slug) whose records the notebooks read
# What a recorded measurement depends on: a record made with any of these differing from HEAD is "-dirty".
CODE_PATHS = ("kernels", "notebooks", "solutions", "utils", "pyproject.toml", "Makefile")
DEVICE_KEYS = ("name", "slug", "cc", "sm_count", "memory_gb", "l2_mb")
TOP_KEYS = ("schema", "kind", "device", "torch", "cuda", "git_commit", "kernels", "date", "notes", "entries")
SCHEMAS = {1: tuple(k for k in TOP_KEYS if k != "kernels"), 2: TOP_KEYS}  # schema -> its top-level keys
KERNEL_SUFFIXES = (".cu", ".cuh")  # the files under kernels/ whose contents a record's hash covers
_KIND_RE = re.compile(r"[a-z0-9_]+")


# --------------------------------------------------------------------------- metadata

def _device() -> dict:
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


def kernel_sources(repo: Path | None = None) -> dict:
    """The kernel sources as they are now: {"sha256": one hash over every file, "files": {path: its sha256}},
    over every kernels/**/*.cu and *.cuh (paths relative to `repo`, sorted). All of them, not only the
    files a kind loads: a build includes kernels/common/ headers, and one file's set is hard to state
    soundly; a change to the code of any file under kernels/ makes every record stale (kernel_drift).
    `repo`: REPO by default."""
    repo = repo or REPO
    files = {p.relative_to(repo).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in (repo / "kernels").rglob("*") if p.suffix in KERNEL_SUFFIXES and p.is_file()}
    files = dict(sorted(files.items()))
    return {"sha256": _combined(files), "files": files}


def _combined(files: dict[str, str]) -> str:
    """One hash over the files' paths and hashes, in sorted path order."""
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(f"{path}\0{files[path]}\n".encode())
    return h.hexdigest()


def kernel_drift(rec: dict, repo: Path | None = None) -> list[str] | None:
    """How the kernel sources under `repo` differ from those the record ran: [] when they are the same, else
    one line per file ("modified kernels/x.cu", "added ...", "removed ...", as changes() writes them);
    None for a record that does not say (schema 1: unknown provenance)."""
    if "kernels" not in rec:
        return None
    now = kernel_sources(repo)
    if now["sha256"] == rec["kernels"]["sha256"]:
        return []
    return [line for line in changes(rec["kernels"]["files"], now["files"])
            if not _unmeasured_change(line, rec, repo or REPO)]


_SHOWN: dict[tuple[str, str, str], subprocess.CompletedProcess] = {}


def _unmeasured_change(line: str, rec: dict, repo: Path) -> bool:
    """A change that cannot have altered what the record measured: a file added since (nothing the record
    ran included it, or the file that does would show as modified), or a file whose code is the same as the
    one the record ran once comments and layout are set aside (a launch mark, a reworded comment): checked
    against the file at the record's commit in git, whose hash must be the one the record carries."""
    change, _, path = line.partition(" ")
    if change == "added":
        return True
    if change != "modified" or not re.fullmatch(r"[0-9a-f]{7,40}", rec.get("git_commit", "")):
        return False
    key = (str(repo), rec["git_commit"], path)  # a commit's files never change: one `git show` each per process
    if key not in _SHOWN:
        _SHOWN[key] = subprocess.run(["git", "-C", key[0], "show", f"{key[1]}:{path}"], capture_output=True)
    shown = _SHOWN[key]
    if shown.returncode != 0 or hashlib.sha256(shown.stdout).hexdigest() != rec["kernels"]["files"][path]:
        return False  # the record's version of the file is not at hand: count it as a change
    return code_of(shown.stdout.decode()) == code_of((repo / path).read_text())


_COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.DOTALL)


def code_of(source: str) -> str:
    """CUDA/C++ source without its comments, its white space folded: what the compiler sees of it."""
    text = _COMMENT_OR_STRING.sub(lambda m: m.group(0) if m.group(0).startswith('"') else " ", source)
    return re.sub(r"\s*([^\w\s])\s*", r"\1", " ".join(text.split()))  # a space matters between two words only


def provenance(results_root: str | Path | None = None, repo: Path | None = None
               ) -> tuple[dict[str, list[str]], list[str]]:
    """Every record under the results root against the kernel sources under `repo`: ({record: its
    kernel_drift} for the stale ones, [records that do not say]). Records are named device/kind.json."""
    root = root_dir(results_root)
    stale, unknown = {}, []
    for path in sorted(root.glob("*/*.json")):
        name = path.relative_to(root).as_posix()
        drift = kernel_drift(read(path), repo)
        if drift is None:
            unknown.append(name)
        elif drift:
            stale[name] = drift
    return stale, unknown


def full_run_devices(results_root: str | Path | None = None) -> list[str]:
    """The devices whose folder holds a scoreboard: `make run` measured every chapter there, and all of
    its records must be of the kernels the tree holds. Another device's records may be of one chapter's
    run; a stale one is named (the README flags it, tests/test_record_provenance.py lists it)."""
    return sorted(p.parent.name for p in root_dir(results_root).glob("*/scoreboard.json"))


# --------------------------------------------------------------------------- kinds

@dataclass(frozen=True)
class Kind:
    title: str
    entry_keys: tuple[str, ...]  # every entry has at least these
    one_entry: bool = False


_MEMORY_BOUND_KEYS = ("problem", "contender", "role", "median_ms", "p20_ms", "p80_ms", "bytes", "GBps", "pct_of_copy",
                      "shape")

# The entries of the sweeps over a size: a GEMM's (notebooks 02-04, 09) and a memory-bound tail's (05-07).
_GEMM_SWEEP_KEYS = ("contender", "M", "N", "K", "median_ms", "p20_ms", "p80_ms", "tflops")
_TAIL_SWEEP_KEYS = ("contender", "sweep", "rows", "channels", "group_width", "median_ms", "p20_ms", "p80_ms", "GBps")

KINDS: dict[str, Kind] = {
    "ceilings": Kind("Ceilings", ("copy_GBps", "fp32_tflops", "tf32_tflops"), one_entry=True),
    "baselines": Kind("Baselines", ("problem", "contender", "tf32", "median_ms", "p20_ms", "p80_ms", "tflops",
                                    "floor_ms", "pct_of_floor")),
    "eager_profile": Kind("Where eager spends its time", ("problem", "op", "cuda_ms", "pct")),
    "timer": Kind("The timer against one cold call, the CPU's clock and no L2 flush (notebook 01)",
                  ("what", "how", "median_ms", "p20_ms", "p80_ms", "reps")),
    "ladder": Kind("GEMM ladder", ("contender", "median_ms", "tflops")),
    "ladder_tuning": Kind("GEMM rung 7 tuning", ("contender", "bk", "stages", "median_ms", "tflops", "pct_of_cublas")),
    "bias_fusion": Kind("Bias fusion (notebook 04)", ("contender", "gemm", "biases", "separate_passes", "median_ms",
                                                      "p20_ms", "p80_ms", "shape")),
    "fused_activations": Kind("Fused activations (notebook 05)", _MEMORY_BOUND_KEYS),
    "groupnorm_fusion": Kind("GroupNorm, alone and fused (notebook 06)", _MEMORY_BOUND_KEYS),
    "broadcast_min": Kind("GroupNorm + row min + broadcast, problem 75 (notebook 07)", _MEMORY_BOUND_KEYS),
    "solutions": Kind("The drop-in solutions against eager and torch.compile (notebook 10)",
                      ("problem", "contender", "tf32", "protocol", "median_ms", "p20_ms", "p80_ms", "tflops",
                       "floor_ms", "pct_of_floor")),
    "training": Kind("A training step against eager and torch.compile (notebook 13)",
                     ("problem", "contender", "tf32", "protocol", "median_ms", "p20_ms", "p80_ms")),
    "autocast": Kind("The forward under torch.autocast against eager and torch.compile (notebook 13)",
                     ("problem", "contender", "autocast", "tf32", "protocol", "median_ms", "p20_ms", "p80_ms")),
    "scoreboard": Kind("Scoreboard: the four models after each chapter (python -m utils.chapters.scoreboard)",
                       ("problem", "stage", "contender", "median_ms", "p20_ms", "p80_ms", "reps")),
    "tensor_cores": Kind("Tensor cores: 3xTF32 accuracy and the tensor-core rungs (notebooks 08 and 09)",
                         ("section", "contender")),
    "sanitize": Kind("compute-sanitizer over every kernel and solution (make sanitize)",
                     ("tool", "target", "verdict", "errors", "seconds", "commit", "device")),
    "sweep_naive_m": Kind("Rungs 1 and 2 and cuBLAS against M at N = K = 8192 (notebook 02)", _GEMM_SWEEP_KEYS),
    "sweep_gemm_m": Kind("The GEMM ladder and cuBLAS against M at N = K = 8192 (notebook 03)", _GEMM_SWEEP_KEYS),
    "sweep_tensor_cores_m": Kind("Rungs 8 and 10 (mma.sync) and cuBLAS, TF32 off and on, against M at N = K = 8192 "
                                 "(notebook 08)", _GEMM_SWEEP_KEYS),
    "sweep_tails": Kind("The tails against rows and group width (notebook 06)", _TAIL_SWEEP_KEYS),
    "sweep_bias_k": Kind("The bias, in rung 7's epilogue and as a separate pass, and cuBLAS against K (notebook 04)",
                         _GEMM_SWEEP_KEYS),
    "sweep_activations": Kind("Problem 94's fused activations against the rows (notebook 05)",
                              tuple(k for k in _TAIL_SWEEP_KEYS if k != "group_width")),
    "sweep_min_bias": Kind("Problem 75's tail against the rows (notebook 07)", _TAIL_SWEEP_KEYS),
    "sweep_waves": Kind("Wave quantization: the Hopper GEMM against N (notebook 09)", _GEMM_SWEEP_KEYS),
    "sweep_regimes": Kind("`linear`, cuBLAS and problem 94's drop-in against M, both tiers (notebook 11)",
                          ("tier", *_GEMM_SWEEP_KEYS)),
    "batch_sweep": Kind("Every batch size: the drop-ins, their GEMM and cuBLAS against eager and torch.compile over M "
                        "(python -m utils.chapters.batch_sweep)",
                        ("problem", "shape", "K", "C", "tier", "M", "contender", "median_ms", "p20_ms", "p80_ms",
                         "floor_ms", "bytes_ms", "flops_ms")),
    "profile": Kind("Nsight Compute: the metrics that decide, per kernel (notebooks 03 and 09)",
                    ("target", "kernel", "metric", "value", "unit")),
    "whole_model_fusion": Kind("Whole models in the GEMM's epilogue against the unfused path (notebook 09)",
                               ("problem", "tier", "contender", "median_ms", "p20_ms", "p80_ms", "max_abs_vs_eager")),
}


# --------------------------------------------------------------------------- validate, record, load

def validate(rec: dict) -> dict:
    """Check a record against its schema (SCHEMAS) and its kind's entry keys; return it, or raise ValueError."""
    errors = []
    if not isinstance(rec, dict):
        raise ValueError(f"a record is a JSON object, got {type(rec).__name__}")
    if rec.get("schema") not in SCHEMAS:
        raise ValueError(f"schema is {rec.get('schema')!r}, this code reads {sorted(SCHEMAS)}")
    keys = SCHEMAS[rec["schema"]]
    missing, extra = [k for k in keys if k not in rec], [k for k in rec if k not in keys]
    if missing or extra:
        raise ValueError(f"record keys: missing {missing}, unexpected {extra} "
                         f"(schema {rec['schema']} has {list(keys)})")
    if "kernels" in rec:
        errors += _kernels_errors(rec["kernels"])
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


def _kernels_errors(kernels) -> list[str]:
    if not (isinstance(kernels, dict) and sorted(kernels) == ["files", "sha256"] and isinstance(kernels["files"], dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in kernels["files"].items())):
        return [f"kernels must be {{'sha256': str, 'files': {{path: sha256}}}}, got {kernels!r}"]
    if kernels["sha256"] != _combined(kernels["files"]):
        return ["kernels.sha256 is not the hash of kernels.files (edited by hand?)"]
    return []


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

    return write_root(results_dir) / env.device_slug() / f"{kind}.png" if on_gpu else None


def record(kind: str, entries: list[dict], *, notes: str = "", results_dir: str | Path | None = None) -> Path:
    """Write results/<device-slug>/<kind>.json (under write_root) with this machine's metadata; return its path."""
    meta = metadata()
    if meta["device"]["slug"] == "cpu":
        raise RuntimeError(f"not recording {kind!r}: there is no GPU here, and results/ holds GPU recordings only "
                           "(run this on a GPU, or read the recorded runs with utils.results.load)")
    rec = validate({"schema": SCHEMA, **meta, "kind": kind, "kernels": kernel_sources(), "notes": notes,
                    "entries": list(entries)})
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


def write_rows(path: str | Path, rows: list[dict], **about) -> None:
    """One card's share of a measurement run on several (a --rows-out file): its rows, this device, and `about`
    (what merged_rows' sources repeat, such as the ceilings it used)."""
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps({"device": _device()["slug"], **about, "rows": rows}))
    os.replace(tmp, path)  # whole or absent for a merge that waits for it on another card


def add_share_options(parser: argparse.ArgumentParser, measured: str) -> None:
    """--rows-out and --merge, for a command whose measurement runs on several cards of one machine, each card
    its share (write_rows), recorded as one (merged_rows). `measured`: what one record holds ("sweep")."""
    parser.add_argument("--rows-out", type=Path, help=f"write the rows to this JSON file and record nothing (one "
                        f"card's share of a {measured} run on several, e.g. --problems 94 with CUDA_VISIBLE_DEVICES)")
    parser.add_argument("--merge", type=Path, nargs="+", help=f"record the rows of these --rows-out files as one "
                        f"{measured}, measuring nothing (every file of this device, none of them overlapping)")


def merged_rows(paths, device: str, key: Sequence[str]) -> tuple[list[dict], str]:
    """The rows of several write_rows files, one measurement: every file measured on `device` (cards of one
    kind: two kinds' figures never meet in one record), no row's `key` fields in two files; and where they
    came from, for the record's notes."""
    rows, seen, sources = [], set(), []
    for path in paths:
        part = json.loads(Path(path).read_text())
        if part["device"] != device:
            raise ValueError(f"{path}: measured on {part['device']}, not {device}: a record compares one device's cards")
        for row in part["rows"]:
            k = tuple(row[f] for f in key)
            if k in seen:
                raise ValueError(f"{path}: {k} is in another file too")
            seen.add(k)
            rows.append(row)
        about = "".join(f", {name} {value}" for name, value in part.items() if name not in ("device", "rows"))
        sources.append(f"{Path(path).name}: {len(part['rows'])} rows{about}")
    return rows, "; ".join(sources)


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m utils.results", description="what records carry, and which are stale")
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--commit", action="store_true",
                      help="print the git_commit a record made here carries (a GPU runner's WORKBOOK_GIT_COMMIT)")
    what.add_argument("--stale", action="store_true",
                      help="list the records whose kernel sources changed since they were recorded (exit 1 if any)")
    args = ap.parse_args(argv)
    if args.commit:
        print(git_commit())
        return 0
    stale, unknown = provenance()
    for name, drift in stale.items():
        print(f"stale: {name}: {', '.join(drift)}")
    if unknown:
        print(f"unknown provenance (recorded before records carried their kernels' hash): {', '.join(unknown)}")
    if not stale:
        print("no record is stale")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
