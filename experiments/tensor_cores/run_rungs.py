#!/usr/bin/env python3
"""Exploration run for the tensor-core rungs: build, verify, time, resources.

    python3 experiments/tensor_cores/run_rungs.py --out OUT [--reps 20] [--budget-s 230] [--build-timeout-s 150]
                                                  [--commit SHA]

From the repository root, on an H100 (sm_90a: rungs 9 and 10 use wgmma):
  1. builds rungs 7-10 and two variants of rung 10 (GEMM10_PROMOTE_K = 0, 1024) in parallel
     processes (spawn), each with -Xptxas=-v, the compiler's output captured per build;
  2. dumps each build's resources (ptxas: registers, spills, stack; cuobjdump --dump-resource-usage)
     and counts the tensor-core instructions in its SASS (HMMA for mma.sync, HGMMA for wgmma);
  3. verifies every kernel path against float64 (every element, output poisoned first) at odd,
     misaligned and full shapes, reporting the max abs error, the strict tier's worst ratio
     |err| / (1e-4 + 1e-4 |ref|) and elements off at 1e-4 (for the TF32 rungs too), and the verdict
     at the rung's own tier (utils.ladder.tier_of);
  4. times, in one utils.bench.compare run per shape (1024 x 8192 x 8192, 32768 x 4096 x 1024):
     cuBLAS SGEMM (TF32 off), cuBLAS TF32, rung 7, 8, 9, 10 (both its kernels) and rung 10 without
     promotion: ms, TFLOP/s, % of cuBLAS TF32, x cuBLAS SGEMM;
  5. writes OUT/results.json (updated after every phase), OUT/summary.txt, the build logs and the
     SASS tensor-core lines.

An exploration script: a kernel that fails to build, crashes or hangs is recorded and the run goes
on. Verification and timing run in child processes (a crashed or deadlocked kernel takes its
child down, not the run; a hang is killed at its timeout). A path is timed only if it verified at
its tier at that shape (variants of rung 10: at the tf32 tier, so that the cost of promotion can be
seen even where the unpromoted variant misses the strict tier). The commit is recorded (git, or
--commit) together with a hash of the kernel sources.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

PTXAS_VERBOSE = ["-Xptxas=-v"]

# label -> (kernel, extra nvcc flags); every build also gets PTXAS_VERBOSE.
BUILDS = {
    "rung 7": ("gemm_07_pipelined", []),
    "rung 8": ("gemm_08_mma_tf32", []),
    "rung 9": ("gemm_09_wgmma_tf32", []),
    "rung 10": ("gemm_10_3xtf32", []),
    "rung 10 PROMOTE_K=0": ("gemm_10_3xtf32", ["-DGEMM10_PROMOTE_K=0"]),
    "rung 10 PROMOTE_K=1024": ("gemm_10_3xtf32", ["-DGEMM10_PROMOTE_K=1024"]),
}

# Kernel paths: label -> (build label, export, variant). A variant is timed if it meets the tf32 tier.
PATHS = {
    "rung 7": ("rung 7", "gemm", False),
    "rung 8": ("rung 8", "gemm", False),
    "rung 10 mma.sync": ("rung 10", "gemm_mma_sync", False),
    "rung 9": ("rung 9", "gemm", False),
    "rung 10": ("rung 10", "gemm", False),
    "rung 10 PROMOTE_K=0": ("rung 10 PROMOTE_K=0", "gemm", True),
    "rung 10 mma.sync PROMOTE_K=0": ("rung 10 PROMOTE_K=0", "gemm_mma_sync", True),
    "rung 10 PROMOTE_K=1024": ("rung 10 PROMOTE_K=1024", "gemm", True),
    "rung 10 mma.sync PROMOTE_K=1024": ("rung 10 PROMOTE_K=1024", "gemm_mma_sync", True),
}

FULL_SHAPES = [(1024, 8192, 8192), (32768, 4096, 1024)]
# (M, N, K, which operand starts one float past a 16-byte boundary: None, "x" or "w")
ODD_SHAPES = [
    (37, 129, 65, None),      # K % 4 != 0: rungs 9 and 10 fall back to the mma.sync kernels
    (37, 129, 68, None),      # the TMA path with M and N multiples of nothing
    (64, 64, 4, None),        # K smaller than one stage
    (1, 8192, 8192, None),    # one row
    (1000, 1000, 1000, None),
    (130, 257, 1027, None),   # K % 4 != 0
    (130, 257, 1028, "x"),    # K % 4 == 0 but x misaligned: the 4-byte / fallback path
    (130, 257, 1028, "w"),
]
# Which paths are checked at the odd shapes (the variants only at the full shapes and one odd shape).
VARIANT_SHAPES = [(37, 129, 68, None)]

# Verification children: the paths that cannot hang on an mbarrier first, then each wgmma path alone.
VERIFY_GROUPS = [
    ["rung 7", "rung 8", "rung 10 mma.sync", "rung 10 mma.sync PROMOTE_K=0", "rung 10 mma.sync PROMOTE_K=1024"],
    ["rung 9"],
    ["rung 10", "rung 10 PROMOTE_K=0", "rung 10 PROMOTE_K=1024"],
]
TIMED = ["rung 7", "rung 8", "rung 9", "rung 10", "rung 10 mma.sync", "rung 10 PROMOTE_K=0"]
SGEMM, TF32 = "cuBLAS SGEMM", "cuBLAS TF32"
DEVICE = os.environ.get("RUN_RUNGS_DEVICE", "cuda")  # "cpu" only for a dry run of the script's own logic
STRICT_TOL = 1e-4


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def shape_label(shape) -> str:
    M, N, K, *rest = shape
    misaligned = rest[0] if rest else None
    return f"{M}x{N}x{K}" + (f" ({misaligned} misaligned)" if misaligned else "")


# --------------------------------------------------------------------------- provenance

def provenance(commit: str | None) -> dict:
    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10).stdout.strip()
        except Exception:
            return ""

    sources = sorted([*(REPO / "kernels").glob("gemm_*.cu"), *(REPO / "kernels" / "common").glob("*.cuh")])
    digest = hashlib.sha256()
    for p in sources:
        digest.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    info = {
        "commit": commit or git("rev-parse", "HEAD") or None,
        "git_dirty": bool(git("status", "--porcelain", "--", "kernels", "utils", "experiments")) if not commit else None,
        "kernel_sources_sha256": digest.hexdigest(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "argv": sys.argv,
    }
    try:
        import torch

        from utils import toolchain

        tc = toolchain.detect()
        info.update(torch=torch.__version__, torch_cuda=torch.version.cuda, nvcc=str(tc.nvcc_version),
                    gpu_arch=tc.gpu_arch)
    except Exception as e:  # noqa: BLE001 - recorded, not fatal
        info["toolchain_error"] = f"{type(e).__name__}: {e}"
    return info


# --------------------------------------------------------------------------- builds

def _build_child(name: str, flags: list[str], log_path: str, result_path: str) -> None:
    """In a spawned process: load_kernel with the compiler's output (ptxas -v) captured in log_path."""
    os.setsid()  # its own process group, so that a timeout can stop nvcc and ptxas with it
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    result = {"ok": False}
    start = time.monotonic()
    try:
        from utils import build

        module = build.load_kernel(name, extra_cuda_cflags=[*PTXAS_VERBOSE, *flags], verbose=True)
        result = {"ok": True, "library": module.__file__}
    except Exception as e:  # noqa: BLE001
        result = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:4000]}"}
    result["seconds"] = round(time.monotonic() - start, 1)
    Path(result_path).write_text(json.dumps(result))


def build_all(out: Path, deadline: float) -> dict:
    ctx = multiprocessing.get_context("spawn")  # as utils.ladder.tune: no CUDA state is forked
    logs = out / "build_logs"
    logs.mkdir(parents=True, exist_ok=True)
    jobs = {}
    for label, (name, flags) in BUILDS.items():
        slug = re.sub(r"\W+", "_", label).strip("_")
        log_path, result_path = logs / f"{slug}.log", logs / f"{slug}.result.json"
        result_path.unlink(missing_ok=True)
        p = ctx.Process(target=_build_child, args=(name, flags, str(log_path), str(result_path)), daemon=False)
        p.start()
        jobs[label] = (p, log_path, result_path)
    log(f"building {len(jobs)} kernels in parallel: {', '.join(jobs)}")
    results, pending = {}, dict(jobs)
    while pending:
        for label, (p, log_path, result_path) in list(pending.items()):
            if not p.is_alive():
                p.join()
                res = json.loads(result_path.read_text()) if result_path.is_file() else {
                    "ok": False, "error": f"build process exited with code {p.exitcode} and no result"}
                res["log"] = str(log_path.relative_to(out))
                results[label] = res
                del pending[label]
                log(f"  {label:<24} {'built' if res['ok'] else 'FAILED'} ({res.get('seconds', '?')} s)"
                    + ("" if res["ok"] else f": {res['error'].splitlines()[0][:200]}"))
        if pending and time.monotonic() > deadline:
            for label, (p, log_path, _) in pending.items():
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                results[label] = {"ok": False, "error": "build timed out (killed)", "log": str(log_path.relative_to(out))}
                log(f"  {label:<24} TIMED OUT (killed)")
            break
        time.sleep(0.5)
    return results


_ENTRY = re.compile(r"Compiling entry function '(\S+)' for '(\S+)'")
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?")


def parse_ptxas(text: str) -> list[dict]:
    """One entry per compiled kernel: registers, barriers, static smem, stack, spills."""
    kernels, current = [], None
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            current = {"kernel": m.group(1), "arch": m.group(2)}
            kernels.append(current)
        elif current is not None and (m := _PROPS.search(line)):
            current.update(stack_bytes=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        elif current is not None and (m := _USED.search(line)):
            current.update(registers=int(m.group(1)), barriers=int(m.group(2) or 0),
                           static_smem_bytes=int(m.group(3) or 0))
    return kernels


def demangle(names: list[str]) -> dict[str, str]:
    """Mangled kernel name -> its template (argument list dropped), via c++filt where there is one."""
    tool = shutil.which("c++filt")
    if not tool or not names:
        return {}
    try:
        text = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=30).stdout
    except Exception:  # noqa: BLE001
        return {}
    return {n: re.sub(r"^void ", "", d.split(">(")[0] + ">") if ">(" in d else d
            for n, d in zip(names, text.splitlines())}


def find_cuobjdump() -> str | None:
    candidates = [shutil.which("cuobjdump")]
    try:
        from utils import toolchain

        home = toolchain.find_cuda_home()
        if home:
            candidates.append(str(Path(home) / "bin" / "cuobjdump"))
    except Exception:  # noqa: BLE001
        pass
    try:
        import triton

        candidates.append(str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"))
    except Exception:  # noqa: BLE001
        pass
    return next((c for c in candidates if c and Path(c).is_file() and os.access(c, os.X_OK)), None)


def resources(builds: dict, out: Path) -> dict:
    tool = find_cuobjdump()
    sass_dir = out / "sass"
    sass_dir.mkdir(exist_ok=True)
    report = {"cuobjdump": tool}
    for label, res in builds.items():
        entry: dict = {}
        if res.get("log") and (out / res["log"]).is_file():
            entry["ptxas"] = parse_ptxas((out / res["log"]).read_text(errors="replace"))
            names = demangle([k["kernel"] for k in entry["ptxas"]])
            for k in entry["ptxas"]:
                k["name"] = names.get(k["kernel"], k["kernel"])
        if res.get("ok") and tool:
            lib = res["library"]
            try:
                usage = subprocess.run([tool, "--dump-resource-usage", lib], capture_output=True, text=True, timeout=60)
                entry["resource_usage"] = [line.strip() for line in usage.stdout.splitlines()
                                           if "Function" in line or "REG:" in line]
                sass = subprocess.run([tool, "-sass", lib], capture_output=True, text=True, timeout=120).stdout
                ops = re.findall(r"\b(HGMMA\.\S+|HMMA\.\S+)", sass)
                entry["tensor_core_instructions"] = {op: ops.count(op) for op in sorted(set(ops))}
                entry["HGMMA"] = sum(1 for op in ops if op.startswith("HGMMA"))
                entry["HMMA"] = sum(1 for op in ops if op.startswith("HMMA"))
                slug = re.sub(r"\W+", "_", label).strip("_")
                (sass_dir / f"{slug}_tensor_core_lines.txt").write_text(
                    "\n".join(line.strip() for line in sass.splitlines()
                              if "GMMA" in line or "HMMA" in line or "Function" in line))
            except Exception as e:  # noqa: BLE001
                entry["cuobjdump_error"] = f"{type(e).__name__}: {e}"
        report[label] = entry
    return report


# --------------------------------------------------------------------------- child processes

def operands(M, N, K, misaligned, seed):
    import torch

    from utils import ladder

    x, w = ladder.operands(M, N, K, seed=seed, device=DEVICE)
    if misaligned:  # the same values, starting one float past a 16-byte boundary (still contiguous)
        t = x if misaligned == "x" else w
        flat = torch.empty(t.numel() + 1, device=t.device)
        view = flat[1:].view_as(t)
        view.copy_(t)
        x, w = (view, w) if misaligned == "x" else (x, view)
    return x, w


def stats(out, ref) -> dict:
    import torch

    out64 = out.double()
    err = (out64 - ref).abs()
    finite = bool(out.isfinite().all())
    bound = STRICT_TOL + STRICT_TOL * ref.abs()
    return {
        "max_abs_err": err.max().item(),
        "mean_abs_err": err.mean().item(),
        "strict_worst_ratio": (err / bound).max().item(),  # <= 1 meets the strict tier
        "strict_off": int((err > bound).sum()),
        "tf32_off": int((err > 1e-2 + 1e-2 * ref.abs()).sum()),
        "all_finite": finite,
        "numel": out.numel(),
        "max_abs_ref": ref.abs().max().item(),
    }


def verify_child(job: dict) -> None:
    """Verifies `job["paths"]` at `job["shapes"]`, one JSON line per (path, shape) into job["out"]."""
    import torch

    from utils import build, check, ladder

    sink = open(job["out"], "a", buffering=1)
    mods = {}
    for path in job["paths"]:
        build_label, export, variant = PATHS[path]
        name, flags = BUILDS[build_label]
        try:
            mods[path] = getattr(build.load_kernel(name, extra_cuda_cflags=[*PTXAS_VERBOSE, *flags]), export)
        except Exception as e:  # noqa: BLE001
            sink.write(json.dumps({"path": path, "error": f"load: {type(e).__name__}: {e}"}) + "\n")
    for shape in job["shapes"]:
        M, N, K, misaligned = shape
        x, w = operands(M, N, K, misaligned, seed=M + N + K)
        ref = torch.nn.functional.linear(x.double(), w.double())
        for path, fn in mods.items():
            if PATHS[path][2] and tuple(shape) not in [tuple(s) for s in job["variant_shapes"]]:
                continue
            tier = ladder.tier_of(BUILDS[PATHS[path][0]][0])
            rec = {"path": path, "shape": shape_label(shape), "tier": tier}
            print(f"  verifying {path:<32} {shape_label(shape):<28}", end="", flush=True)
            try:
                torch.full((M, N), float("nan"), device=DEVICE)  # freed at once: NaN where the output will land
                t0 = time.monotonic()
                out = fn(x, w)
                if DEVICE == "cuda":
                    torch.cuda.synchronize()
                rec["seconds"] = round(time.monotonic() - t0, 3)
                if out.shape != ref.shape or out.dtype != torch.float32:
                    rec["error"] = f"shape {tuple(out.shape)} {out.dtype}"
                else:
                    rec.update(stats(out, ref))
                    tol = check.TIERS[tier]
                    rec["ok"] = bool(torch.isclose(out.double(), ref, atol=tol.atol, rtol=tol.rtol).all())
                del out
            except Exception as e:  # noqa: BLE001
                rec["error"] = f"{type(e).__name__}: {str(e)[:1000]}"
                sink.write(json.dumps(rec) + "\n")
                print(f" ERROR {rec['error'][:150]}", flush=True)
                try:  # a refusal (TORCH_CHECK) leaves CUDA usable; a kernel fault does not: end this child then
                    torch.ones(1, device=DEVICE).sum().item()
                except Exception:  # noqa: BLE001
                    print("  CUDA is unusable after that error: ending this verification child", flush=True)
                    raise SystemExit(3)
                continue
            sink.write(json.dumps(rec) + "\n")
            verdict = "ok" if rec.get("ok") else "WRONG"
            print(f" {verdict:<5} ({tier}) max abs {rec.get('max_abs_err', float('nan')):.2e}, "
                  f"strict ratio {rec.get('strict_worst_ratio', float('nan')):.2f}, "
                  f"{rec.get('strict_off', '?')} off at 1e-4", flush=True)
        del ref, x, w
        if DEVICE == "cuda":
            torch.cuda.empty_cache()


def time_child(job: dict) -> None:
    """One bench.compare run at job["shape"] over cuBLAS (TF32 off and on) and job["paths"]."""
    import torch
    import torch.nn.functional as F

    from utils import bench, build, precision

    M, N, K = job["shape"]
    x, w = operands(M, N, K, None, seed=0)
    contenders = {}

    def cublas_tf32():
        torch.backends.cuda.matmul.allow_tf32 = True  # one flag, set and reset inside the call: cheap next to ms
        try:
            return F.linear(x, w)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False

    contenders[SGEMM] = lambda: F.linear(x, w)
    contenders[TF32] = cublas_tf32
    for path in job["paths"]:
        build_label, export, _ = PATHS[path]
        name, flags = BUILDS[build_label]
        fn = getattr(build.load_kernel(name, extra_cuda_cflags=[*PTXAS_VERBOSE, *flags]), export)
        contenders[path] = lambda fn=fn: fn(x, w)
    with precision.ieee_fp32():  # TF32 off for everything but the one contender that turns it on
        rows = bench.compare(contenders, cost=bench.gemm_cost(M, N, K), baseline=TF32, reps=job["reps"])
    by = {r["contender"]: r for r in rows}
    for r in rows:
        r["tf32"] = r["contender"] in (TF32, "rung 8", "rung 9")  # what the contender computes in
        r["pct_of_cublas_tf32"] = 100 * by[TF32]["median_ms"] / r["median_ms"]
        r["x_cublas_sgemm"] = by[SGEMM]["median_ms"] / r["median_ms"]
        r["shape"] = [M, N, K]
    Path(job["out"]).write_text(json.dumps(rows))


def run_child(kind: str, job: dict, timeout: float, out: Path, progress: Path | None = None,
              stall_s: float = 30.0) -> dict:
    """Runs this script as `--child kind --job file`; kills it (its whole process group) at `timeout`,
    or when `progress` (a file the child appends to) has not grown for `stall_s` seconds: a kernel
    that deadlocks on an mbarrier never returns, and waiting for the full timeout would eat the budget."""
    job_path = out / f"job_{kind}_{int(time.monotonic() * 1000)}.json"
    job_path.write_text(json.dumps(job))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--job", str(job_path)]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True)
    size, last_change, status = -1, start, None
    while status is None:
        rc = proc.poll()
        now = time.monotonic()
        if rc is not None:
            status = "ok" if rc == 0 else f"exited with code {rc}"
            break
        if progress is not None:
            current = progress.stat().st_size if progress.is_file() else 0
            if current != size:
                size, last_change = current, now
        if now - start > max(5.0, timeout):
            status = f"timed out after {timeout:.0f} s (killed)"
        elif progress is not None and now - last_change > stall_s:
            status = f"no progress for {stall_s:.0f} s (killed: a hang?)"
        else:
            time.sleep(0.25)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    job_path.unlink(missing_ok=True)
    return {"status": status, "seconds": round(time.monotonic() - start, 1)}


# --------------------------------------------------------------------------- report

def format_timing(rows: list[dict]) -> str:
    lines = [f"{'contender':<32} {'median ms':>10} {'TFLOP/s':>8} {'% cuBLAS TF32':>14} {'x cuBLAS SGEMM':>15}"]
    for r in rows:
        lines.append(f"{r['contender']:<32} {r['median_ms']:10.3f} {r.get('tflops', float('nan')):8.1f} "
                     f"{r['pct_of_cublas_tf32']:13.1f}% {r['x_cublas_sgemm']:14.2f}x")
    return "\n".join(lines)


def format_verify(records: list[dict]) -> str:
    lines = [f"{'path':<32} {'shape':<28} {'tier':<6} {'verdict':<7} {'max abs err':>11} {'strict ratio':>12} "
             f"{'off@1e-4':>9}"]
    for r in records:
        if "error" in r:
            lines.append(f"{r['path']:<32} {r.get('shape', ''):<28} {r.get('tier', ''):<6} ERROR   {r['error'][:80]}")
            continue
        lines.append(f"{r['path']:<32} {r['shape']:<28} {r['tier']:<6} {'ok' if r['ok'] else 'WRONG':<7} "
                     f"{r['max_abs_err']:11.2e} {r['strict_worst_ratio']:12.3f} {r['strict_off']:9d}")
    return "\n".join(lines)


def format_resources(res: dict) -> str:
    lines = [f"{'build':<24} {'kernel (ptxas -v)':<72} {'regs':>4} {'spill st/ld':>11} {'stack':>5}  tensor-core SASS"]
    for label, entry in res.items():
        if label == "cuobjdump":
            continue
        tc = ", ".join(f"{k} x{v}" for k, v in entry.get("tensor_core_instructions", {}).items()) or "-"
        for k in entry.get("ptxas", []) or [{}]:
            lines.append(f"{label:<24} {k.get('name', k.get('kernel', '?'))[-72:]:<72} {k.get('registers', '?'):>4} "
                         f"{str(k.get('spill_stores', '?')) + '/' + str(k.get('spill_loads', '?')):>11} "
                         f"{k.get('stack_bytes', '?'):>5}  {tc}")
            tc = ""
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="folder for results.json, summary.txt and logs")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--budget-s", type=float, default=230.0, help="stop starting new work after this many seconds")
    ap.add_argument("--build-timeout-s", type=float, default=150.0,
                    help="builds still running after this many seconds are killed and recorded as failed")
    ap.add_argument("--commit", help="the commit this tree is at (default: git rev-parse HEAD)")
    ap.add_argument("--child", choices=("verify", "time"), help=argparse.SUPPRESS)
    ap.add_argument("--job", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        job = json.loads(args.job.read_text())
        (verify_child if args.child == "verify" else time_child)(job)
        return 0
    if args.out is None:
        ap.error("--out is required")

    t0 = time.monotonic()
    deadline = t0 + args.budget_s
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    result: dict = {"meta": provenance(args.commit), "builds": {}, "resources": {}, "verify": [], "timing": {},
                    "children": [], "phases_skipped": []}

    def save():
        result["elapsed_s"] = round(time.monotonic() - t0, 1)
        (out / "results.json").write_text(json.dumps(result, indent=1, default=str))

    def left() -> float:
        return deadline - time.monotonic()

    log(f"commit {result['meta'].get('commit')}, torch {result['meta'].get('torch')}, "
        f"nvcc {result['meta'].get('nvcc')}, arch {result['meta'].get('gpu_arch')}")
    save()

    # 1-2. builds and resources
    try:
        result["builds"] = build_all(out, deadline=t0 + min(args.build_timeout_s, args.budget_s - 60))
    except Exception:  # noqa: BLE001
        result["builds_error"] = traceback.format_exc()
    save()
    try:
        result["resources"] = resources(result["builds"], out)
        print(format_resources(result["resources"]), flush=True)
    except Exception:  # noqa: BLE001
        result["resources_error"] = traceback.format_exc()
    save()

    built = {label for label, r in result["builds"].items() if r.get("ok")}
    usable = [p for p in PATHS if PATHS[p][0] in built]

    # 3. verification, in children: mma.sync paths first, then each wgmma path on its own
    verify_file = out / "verify.jsonl"
    verify_file.unlink(missing_ok=True)
    odd = [list(s) for s in ODD_SHAPES]
    full = [[*s, None] for s in FULL_SHAPES]
    for group in VERIFY_GROUPS:
        paths = [p for p in group if p in usable]
        if not paths:
            continue
        if left() < 30:
            result["phases_skipped"].append(f"verify {paths}: out of budget")
            continue
        log(f"verifying {', '.join(paths)}")
        job = {"paths": paths, "shapes": odd + full, "variant_shapes": [list(s) for s in VARIANT_SHAPES] + full,
               "out": str(verify_file)}
        child = run_child("verify", job, timeout=min(120.0, left() - 20), out=out, progress=verify_file)
        result["children"].append({"verify": paths, **child})
        if child["status"] != "ok":
            log(f"  verification child for {paths}: {child['status']}")
        result["verify"] = [json.loads(line) for line in verify_file.read_text().splitlines()] if verify_file.is_file() else []
        save()
    print(format_verify(result["verify"]), flush=True)

    # 4. timing: one compare run per full shape, over the paths that verified there
    for M, N, K in FULL_SHAPES:
        label = f"{M}x{N}x{K}"
        ok_here = {r["path"] for r in result["verify"]
                   if r.get("shape") == label and "error" not in r
                   and (r.get("ok") or (PATHS[r["path"]][2] and r.get("tf32_off") == 0))}
        paths = [p for p in TIMED if p in ok_here]
        left_out = [p for p in TIMED if p not in ok_here]
        if left() < 25:
            result["phases_skipped"].append(f"timing {label}: out of budget")
            continue
        log(f"timing at {label}: cuBLAS SGEMM, cuBLAS TF32, {', '.join(paths)}"
            + (f" (not verified here, left out: {', '.join(left_out)})" if left_out else ""))
        rows_file = out / f"timing_{label}.json"
        rows_file.unlink(missing_ok=True)
        child = run_child("time", {"shape": [M, N, K], "paths": paths, "reps": args.reps, "out": str(rows_file)},
                          timeout=min(90.0, left() - 10), out=out)
        result["children"].append({"time": label, **child})
        if rows_file.is_file():
            rows = json.loads(rows_file.read_text())
            result["timing"][label] = {"rows": rows, "left_out": left_out}
            print(format_timing(rows), flush=True)
        else:
            result["timing"][label] = {"error": child["status"], "left_out": left_out}
            log(f"  timing child at {label}: {child['status']}")
        save()

    summary = [f"commit {result['meta'].get('commit')} (kernel sources sha256 "
               f"{result['meta']['kernel_sources_sha256'][:16]}), {result['meta'].get('date')}",
               "", "== resources", format_resources(result["resources"]) if result["resources"] else "(none)",
               "", "== verification", format_verify(result["verify"])]
    for label, t in result["timing"].items():
        summary += ["", f"== timing {label}", format_timing(t["rows"]) if "rows" in t else t["error"]]
    if result["phases_skipped"]:
        summary += ["", "== skipped", *result["phases_skipped"]]
    (out / "summary.txt").write_text("\n".join(summary) + "\n")
    save()
    log(f"done in {time.monotonic() - t0:.0f} s: {out / 'results.json'}, {out / 'summary.txt'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
