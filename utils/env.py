"""What this machine can do, and a one-screen report of it.

Three modes, from most to least capable:

    gpu             a CUDA GPU is visible and kernels compile for it: they compile, run and are measured
    compile-only    no GPU, but nvcc and a CUDA build of torch: kernels compile, nothing runs
    reference-only  no kernel can be compiled here: only the reference PyTorch math runs

A GPU where no kernel can be built (no nvcc, a CUDA mismatch, no ninja, an arch this nvcc cannot
target) is reference-only too: no kernel could run on it. `why()` says so, and the report, the
notebooks' setup and `make run` print it.

$WORKBOOK_MODE may force a lower mode than the machine has (to see what a reader without a
GPU sees); asking for a higher one is an error.

    python -m utils.env           the report
    python -m utils.env --brief   one line
"""
from __future__ import annotations

import os
import platform
import re
import sys

from utils import toolchain

MODES = ("gpu", "compile-only", "reference-only")  # most capable first

WHAT_RUNS = {
    "gpu": "everything runs: kernels compile, run, are checked and measured on this GPU",
    "compile-only": "kernels compile; no kernel runs; timings and plots come from the recorded runs in results/",
    "reference-only": "only the reference PyTorch math runs; kernels neither compile nor run; plots come from results/",
}


def _machine_mode() -> str:
    import torch

    if toolchain.detect().problems:
        return "reference-only"  # with or without a GPU: no kernel can be built, so none runs
    return "gpu" if torch.cuda.is_available() else "compile-only"


def why() -> str | None:
    """Why a visible GPU is not used: the toolchain's problems, when a GPU is visible but no kernel
    can be built for it (the machine's mode is then reference-only). None otherwise."""
    import torch

    problems = toolchain.detect().problems
    if not torch.cuda.is_available() or not problems:
        return None
    return (f"a GPU is visible ({device_name()}) but no kernel can be built here: "
            f"{'; '.join(p.rstrip('.') for p in problems)}; kernels are skipped, and the notebooks run as in "
            "reference-only mode")


def no_build_reason() -> str:
    """Why no kernel is built here, in a few words, for a SKIPPED line or a test's skip reason: what
    keeps the toolchain from compiling ("no nvcc", "a CPU-only torch (2.5.1+cpu)", "nvcc is CUDA 12.4 but
    torch was built with CUDA 13.0", "no ninja", ...), else the WORKBOOK_MODE that lowered the mode."""
    tc = toolchain.detect()
    if tc.blockers or tc.problems:
        return "; ".join(tc.blockers or tc.problems)
    forced = os.environ.get("WORKBOOK_MODE")
    return f"WORKBOOK_MODE={forced}" if forced else f"the mode here is {mode()}"


def no_gpu_reason() -> str:
    """Why nothing runs on a GPU here, in a few words: none is visible, or one is and no kernel can be
    built for it (no_build_reason), or WORKBOOK_MODE lowered the mode."""
    import torch

    return no_build_reason() if torch.cuda.is_available() else "no CUDA GPU is visible"


GPU_DEVICES = ("cuda",)  # what DEVICE may name besides "cpu" and "auto" ("cuda:1" counts as "cuda")


def resolve_device(device: str, current: str | None = None) -> str:
    """A notebook's DEVICE parameter against this machine: "auto" -> "cuda" in gpu mode, else "cpu";
    "cuda" (or "cuda:N") without a visible GPU is an error, raised in the notebook's first cell
    rather than as a driver error deep in a later one."""
    import torch

    if device == "auto":
        return "cuda" if (current or mode()) == "gpu" else "cpu"
    if str(device).split(":")[0] in GPU_DEVICES and not torch.cuda.is_available():
        raise RuntimeError(
            f"DEVICE={device!r} but no CUDA GPU is visible (torch.cuda.is_available() is False): "
            "run with DEVICE='cpu' (or 'auto'), or on a GPU machine."
        )
    return device


def mode() -> str:
    """"gpu", "compile-only" or "reference-only": what this machine can do, or the lower
    mode that $WORKBOOK_MODE asks for. A GPU where no kernel can be built is "reference-only" (why())."""
    actual = _machine_mode()
    forced = os.environ.get("WORKBOOK_MODE")
    if not forced:
        return actual
    if forced not in MODES:
        raise ValueError(f"WORKBOOK_MODE={forced!r} is not a mode; choose one of {', '.join(MODES)}")
    if MODES.index(forced) < MODES.index(actual):
        raise RuntimeError(
            f"WORKBOOK_MODE={forced} asks for more than this machine can do (its mode is {actual}); "
            f"WORKBOOK_MODE can only lower the mode. Unset it, or choose one of "
            f"{', '.join(MODES[MODES.index(actual):])}."
        )
    return forced


def device_name() -> str | None:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


def device_slug(name: str | None = None) -> str:
    """A directory-safe name for a device: "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3";
    "cpu" without a GPU."""
    name = name if name is not None else device_name()
    if not name:
        return "cpu"
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def gpu_properties() -> dict | None:
    """name, cc ("9.0"), sms, memory_gb, l2_mb (None where torch does not say) of the current GPU."""
    import torch

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = getattr(props, "L2_cache_size", None)
    return {
        "name": props.name,
        "cc": f"{props.major}.{props.minor}",
        "sms": props.multi_processor_count,
        "memory_gb": round(props.total_memory / 1e9, 1),
        "l2_mb": round(l2 / 2**20, 1) if l2 else None,
    }


def _torch_line(tc) -> str:
    build = f"CUDA {tc.torch_cuda} build" if tc.torch_cuda else "CPU-only build"
    return f"{tc.torch_version} ({build})"


def _gpu_line(gpu: dict | None) -> str:
    if gpu is None:
        return "none visible"
    l2 = f", L2 {gpu['l2_mb']} MB" if gpu["l2_mb"] else ""
    return f"{gpu['name']} (cc {gpu['cc']}, {gpu['sms']} SMs, {gpu['memory_gb']} GB{l2})"


def report() -> str:
    """One screen: versions, toolkit, GPU, the mode, and what the notebooks do in each mode."""

    tc = toolchain.detect()
    current = mode()
    lines = [
        f"python     {platform.python_version()} ({sys.executable})",
        f"torch      {_torch_line(tc)}",
        f"nvcc       {f'{tc.nvcc} (CUDA {tc.nvcc_version})' if tc.nvcc_version else 'not found'}",
        f"CUDA_HOME  {tc.cuda_home or 'no CUDA toolkit found'}",
        f"ninja      {tc.ninja or 'not found'}",
        f"GPU        {_gpu_line(gpu_properties())}",
        f"mode       {current}" + (" (forced by WORKBOOK_MODE)" if os.environ.get("WORKBOOK_MODE") else ""),
        *([f"           a GPU is visible ({device_name()}) but no kernel can be built here (why: below); "
           "kernels are skipped"] if why() and current == "reference-only" else []),
        "",
        "what the notebooks do in each mode:",
        *(f"  {'->' if m == current else '  '} {m:<15} {WHAT_RUNS[m]}" for m in MODES),
    ]
    if tc.problems:
        lines += ["", "why kernels cannot be compiled here:", *(f"  - {p}" for p in tc.problems)]
    return "\n".join(lines)


def brief() -> str:
    """One line: mode, torch, nvcc, GPU."""

    tc = toolchain.detect()
    return (f"mode {mode()} | torch {_torch_line(tc)} | nvcc {tc.nvcc_version or 'not found'} | "
            f"GPU {tc.gpu_name or 'none'}")


if __name__ == "__main__":
    print(brief() if "--brief" in sys.argv[1:] else report())
