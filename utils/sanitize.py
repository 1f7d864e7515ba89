"""`make sanitize`: the kernels' GPU tests under compute-sanitizer's four tools.

    python -m utils.sanitize                  # memcheck, racecheck, initcheck, synccheck
    python -m utils.sanitize --tools memcheck --log-dir /tmp/logs
    python -m utils.sanitize -k gemm            # only the tests whose names match

Runs `pytest -m "gpu and not large"` over the kernel tests once per tool, with
PYTORCH_NO_CUDA_MEMORY_CACHING=1 so that every tensor is its own cudaMalloc (with the
caching allocator an out-of-bounds access lands inside a cached block and memcheck
cannot see it). The tests at KernelBench's full sizes (`large`) are left out: under
the sanitizer they would take hours. The harness and benchmark tests are left out
too: they exercise PyTorch's own kernels, not ours.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from utils import REPO, env

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
NOT_KERNEL_TESTS = ("tests/test_check.py", "tests/test_bench.py")


def command(tool: str, sanitizer: str, select: str | None = None) -> list[str]:
    pytest = [sys.executable, "-m", "pytest", "tests", "-q", "-m", "gpu and not large", "-p", "no:cacheprovider"]
    pytest += [f"--ignore={p}" for p in NOT_KERNEL_TESTS]
    if select:
        pytest += ["-k", select]
    # No --leak-check: Python does not free every object at exit, so tensors still referenced
    # then (test fixtures, module globals) are reported as leaked cudaMallocs. Seen on the H200:
    # 13 such reports, every one allocated by at::empty_like, none by a kernel. The kernels here
    # allocate nothing themselves; what memcheck must find are bad accesses, and it still does.
    return [sanitizer, "--tool", tool, "--error-exitcode", "99", "--target-processes", "all", *pytest]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m utils.sanitize", description=__doc__.splitlines()[0])
    ap.add_argument("--tools", nargs="*", default=list(TOOLS), choices=TOOLS)
    ap.add_argument("--log-dir", type=Path, default=REPO / "build" / "sanitize")
    ap.add_argument("-k", dest="select", help="pytest -k expression: sanitize only the matching tests")
    args = ap.parse_args(argv)

    if env.mode() != "gpu":
        print("compute-sanitizer needs a GPU; nothing to do on this machine.")
        return 0
    sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not Path(sanitizer).exists():
        print("compute-sanitizer not found: it ships with the CUDA toolkit (bin/compute-sanitizer).")
        return 1
    args.log_dir.mkdir(parents=True, exist_ok=True)
    # WORKBOOK_PREBUILD=0: a selection builds what it uses, not every kernel (tests/conftest.py)
    environ = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1", WORKBOOK_PREBUILD="0")
    results = []
    for tool in args.tools:
        log = args.log_dir / f"{tool}.log"
        print(f"== {tool} (log: {log})", flush=True)
        start = time.monotonic()
        with log.open("w") as fh:
            rc = subprocess.call(command(tool, sanitizer, args.select), cwd=REPO, env=environ, stdout=fh, stderr=subprocess.STDOUT)
        tail = log.read_text().strip().splitlines()[-3:]
        results.append((tool, rc, time.monotonic() - start, tail))
        print("\n".join(tail), flush=True)
    print("\n== compute-sanitizer summary")
    for tool, rc, seconds, tail in results:
        verdict = {0: "clean", 99: "ERRORS (see log)"}.get(rc, f"pytest exit {rc}")
        print(f"{tool:<10} {verdict:<18} {seconds:6.1f}s  {tail[-1] if tail else ''}")
    return 0 if all(rc == 0 for _, rc, _, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
