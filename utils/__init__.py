"""The workbook's machinery: one module per job.

problems    the four KernelBench problems, at full / small / odd scale
kernelbench the problems' reference files, verbatim as KernelBench has them (a package of data)
toolchain   what can compile CUDA here (nvcc, CUDA_HOME, ninja, torch's CUDA)
build       load_kernel(name): kernels/<name>.cu -> a Python module, cached by source hash;
            load_kernels: several (or variants with flags), the cold builds side by side
env         the machine's mode (gpu, compile-only, reference-only) and a one-screen report
check       the correctness harness (KernelBench protocol, hardened)
precision   PyTorch's fp32 matmul settings (TF32): read, switch for a block, restore exactly
bench       timing, FLOP/byte counts, floors, measured device ceilings
ladder      the GEMM ladder: every rung checked, then timed side by side with cuBLAS; tuning rung 7
show        kernel source in notebooks, rendered from kernels/ (a file, a function, a header's);
            a kernel header's labelled paragraphs ("PREDICTION", ...)
results     the schema of recorded measurements under results/<device>/, the README table
plots       speedup bars, ladders, rooflines, each titled with device, torch and date
run         `make run`: the notebooks, in order, through papermill
sanitize    `make sanitize`: the kernels' GPU tests under compute-sanitizer's tools
ops         the fused kernels solutions/ call, as torch.library operators (namespace `workbook`): the
            whole models, the GEMM, the tails, their backward ops and their autocast kernels
freezing    a drop-in's opt-in freeze(): the GEMM weight's 3xTF32 small parts kept between calls
export      a solution as one self-contained KernelBench file; KernelBench's evaluation of it
chapter     what notebooks share: sessions, contenders, side-by-side runs, exercise checkers
ladder_chapter  notebooks 02-03: quoting rungs' headers, their PREDICTIONs against measurements, exercise checkers
memory_chapter  notebooks 05-07: kernels timed beside a same-size copy, tables, plots, findings
baselines_chapter  notebook 01: eager's profile, eager and torch.compile timed, speedups over eager fp32
bias_chapter    notebook 04: the epilogue diagram, the Amdahl bound, the bias measurement, exercise checkers
tensor_core_chapter  notebook 08: TF32 and the 3xTF32 split emulated, the models with the GEMM swapped,
            a model of the tensor-core adder, the chapter's GPU run (kind tensor_cores), exercise checkers
scoreboard  the four models' speedup over eager fp32 after each chapter: one GPU run records it,
            every chapter shows it
"""
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
