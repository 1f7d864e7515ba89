"""The workbook's machinery: one module per job.

problems  the four KernelBench problems, at full / small / odd scale
toolchain what can compile CUDA here (nvcc, CUDA_HOME, ninja, torch's CUDA)
build     load_kernel(name): kernels/<name>.cu -> a Python module, cached by source hash
env       the machine's mode (gpu, compile-only, reference-only) and a one-screen report
check     the correctness harness (KernelBench protocol, hardened)
bench     timing, FLOP/byte counts, floors, measured device ceilings
results   the schema of recorded measurements under results/<device>/, the README table
plots     speedup bars, ladders, rooflines, each titled with device, torch and date
run       `make run`: the notebooks, in order, through papermill
ops       the fused kernels solutions/ call, as torch.library operators (namespace `workbook`)
export    a solution as one self-contained KernelBench file; KernelBench's evaluation of it
chapter   what notebooks share: sessions, contenders, side-by-side runs, exercise checkers
"""
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
