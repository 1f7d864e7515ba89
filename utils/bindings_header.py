"""The bindings file's prelude, precompiled once: what every kernel module's g++ half starts with.

load_inline builds a kernel module from two files side by side: the kernel file (nvcc) and a bindings
file it generates from the `// @export` prototypes (g++). The bindings file is glue, a few lines, but it
starts with PyTorch's tensor type and its pybind11 casters, and parsing those took 40% of a cold build's
compiler time (experiments/build_time/README.md). Here that prelude is a header, `workbook_bindings.h`,
compiled once into a GCC precompiled header (`workbook_bindings.h.gch`) beside it; every bindings file
includes it first, and g++ reads the precompiled form instead of the headers.

- The folder is named after everything the precompiled form depends on: the prelude's text, the flags,
  the torch installation and the compiler (`$CXX --version`, as torch takes `$CXX`). Another torch or
  compiler gets another folder, so a precompiled header never meets a compiler it was not made by.
- Its flags are torch's own for a bindings file: they are read from the ninja file torch writes for one
  (`flags`), so they match on any torch version, less the module's name, which the prelude never uses.
- The bindings are compiled with `-Werror=invalid-pch`: a precompiled header that g++ would have to skip
  (flags that differ after all) fails the build with g++'s reason, rather than making it slow in silence.
  Until the precompiled form exists, g++ reads `workbook_bindings.h` itself: a build never waits for it.
- It lives in build/bindings/ whatever the build root (`$WORKBOOK_BUILD_DIR`): like torch's headers, it is
  an input of every build, not one build's output.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import inspect
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from utils import REPO

HEADER = "workbook_bindings.h"
ROOT = REPO / "build" / "bindings"

# Binding a launcher needs the tensor type, pybind11 with PyTorch's casters, and wrap_pybind_function
# (which raises TORCH_CHECK's errors as the matching Python exception); not <torch/extension.h>, the
# whole C++ frontend.
PRELUDE = """#include <ATen/core/Tensor.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/pybind.h>
namespace torch {
using namespace at;  // NOLINT: torch::Tensor, as in PyTorch's C++ API
}
"""
INCLUDE = f'#include "{HEADER}"  // first: the precompiled prelude (utils/bindings_header.py)\n'
# -O1: the bindings only convert arguments and call the launcher; -O3 took a third longer to compile them.
CFLAGS = ("-O1", "-Winvalid-pch", "-Werror=invalid-pch")


def _compiler() -> list[str]:
    return shlex.split(os.environ.get("CXX") or "c++")  # the compiler torch's ninja file names


@functools.cache
def folder() -> Path:
    """Where the header and its precompiled form live (see the module's docstring for the name)."""
    import torch

    try:
        version = subprocess.run([*_compiler(), "--version"], capture_output=True, text=True).stdout
    except FileNotFoundError:  # a warm load needs no compiler; a cold build says what is missing (utils.toolchain)
        version = "no compiler"
    digest = hashlib.sha256("\0".join([PRELUDE, *CFLAGS, torch.__version__, str(Path(torch.__file__).parent),
                                       version]).encode()).hexdigest()
    return ROOT / digest[:12]


def flags(cuda_cflags: list[str]) -> list[str]:
    """torch's compiler command for a bindings file, up to the file: from the ninja file it writes for one."""
    from torch.utils import cpp_extension

    with tempfile.TemporaryDirectory() as tmp:
        ninja = Path(tmp) / "build.ninja"
        wanted = dict(path=str(ninja), name="workbook_bindings", sources=[f"{tmp}/main.cpp", f"{tmp}/cuda.cu"],
                      extra_cflags=list(CFLAGS), extra_cuda_cflags=cuda_cflags, extra_sycl_cflags=[],
                      extra_ldflags=[], extra_include_paths=[], with_cuda=True, with_sycl=False, is_standalone=False)
        writer = cpp_extension._write_ninja_file_to_build_library
        writer(**{k: v for k, v in wanted.items() if k in inspect.signature(writer).parameters})
        lines = dict(line.split(" = ", 1) for line in ninja.read_text().splitlines() if " = " in line)
    return [*shlex.split(lines["cxx"]),
            *[f for f in shlex.split(lines["cflags"]) if not f.startswith("-DTORCH_EXTENSION_NAME=")],
            *shlex.split(lines.get("post_cflags", ""))]


def ensure(cuda_cflags: list[str]) -> None:
    """Write the header, and precompile it unless that is done or under way in another process (which holds
    the folder's lock: a build then reads the header as it is). Raises with g++'s output if it fails."""
    where = folder()
    where.mkdir(parents=True, exist_ok=True)
    header, compiled = where / HEADER, where / f"{HEADER}.gch"
    if not header.exists():
        _replace(header, PRELUDE.encode())
    if compiled.exists():
        return
    with open(where / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when this process ends, however
        except BlockingIOError:
            return
        if compiled.exists():
            return
        tmp = compiled.with_name(f"{compiled.name}.{os.getpid()}.tmp")
        cmd = [*flags(cuda_cflags), "-x", "c++-header", str(header), "-o", str(tmp)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise RuntimeError(f"precompiling {header} failed:\n{shlex.join(cmd)}\n{done.stderr[-4000:]}")
        os.replace(tmp, compiled)  # whole or absent for any g++ that looks


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
