"""The workbook's machinery: one module per job.

problems    the four KernelBench problems, at full / small / odd scale
kernelbench the problems' reference files, verbatim as KernelBench has them (a package of data)
toolchain   what can compile CUDA here (nvcc, CUDA_HOME, ninja, torch's CUDA)
build       load_kernel(name): kernels/<name>.cu -> a Python module, cached by source hash;
            load_kernels: several (or variants with flags), the cold builds side by side;
            load_source(name, text): kernel text written in a notebook cell, built into build/scratch/
bindings_header  the bindings file's prelude (the tensor type, pybind11), precompiled once for every module's g++
launch      `// @launch` kernels: kernel[grid, block, smem](args) from Python, every argument checked in C++
env         the machine's mode (gpu, compile-only, reference-only) and a one-screen report
check       the correctness harness (KernelBench protocol, hardened)
precision   PyTorch's fp32 matmul settings (TF32): read, switch for a block, restore exactly
bench       timing, FLOP/byte counts, floors, measured device ceilings
profile     Nsight Compute on a few kernels: the metrics that decide what binds each, recorded
ladder      the GEMM ladder: every rung checked, then timed side by side with cuBLAS; tuning rung 7
show        kernel source in notebooks, rendered from kernels/ (a file, a function, a header's);
            a kernel header's labelled paragraphs ("PREDICTION", ...)
results     the schema of recorded measurements under results/<device>/: record, validate, load
sass_identical  kernel sources changed since a device's records ran that compile to the same SASS, and the logs
plots       speedup bars, ladders, rooflines, each titled with device, torch and date
run         `make run`: the notebooks, in order, through papermill
sanitize    `make sanitize`: compute-sanitizer's four tools over every target, one process each; verdicts recorded
sanitize_targets  what it runs: every kernel file's launchers and every solution, at edge, tile-crossing and
            full shapes, and the worker that runs one target
ops         the fused kernels solutions/ call, as torch.library operators (namespace `workbook`): the
            whole models, the GEMM, the tails, their backward ops and their autocast kernels
op_declaration  what each op is declared with once (its check, math, outputs, example, dtypes): its CPU
            path, its fake and the bad-input matrix's specs derive from it
freezing    a drop-in's opt-in freeze(): the GEMM weight's 3xTF32 small parts kept between calls
export      a solution as one self-contained KernelBench file; KernelBench's evaluation of it
tf32        TF32 emulated with torch: rounding, the 3xTF32 split, split GEMMs, the tensor core's accumulation
report      (a package) records -> Markdown: the READMEs' generated parts (`python -m utils.report
            --update-readme`) and the tables the notebooks show; imports the library only
chapters    (a package) notebook chapter support: one module per chapter (and its parts) plus the shared
            session; may import the library, report and solutions/

The modules above report are the library: they import nothing from report, chapters or solutions/, and
            imports run one way with no cycle (tests/test_layering.py).
"""
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
