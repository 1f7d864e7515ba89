"""What can compile CUDA here: the toolkit (nvcc, libcudart), torch's CUDA build, ninja, the GPU.

Every way a kernel build can fail before the compiler even starts has its own exception,
and each message names the cause and the fix:

    NoNvccError            no CUDA toolkit found
    CpuOnlyTorchError      torch was built without CUDA
    CudaMismatchError      nvcc's CUDA major version differs from torch's
    NinjaMissingError      torch builds extensions with ninja
    UnsupportedArchError   this nvcc cannot compile for the target GPU

    >>> tc = detect()                # cached; detect.cache_clear() re-detects
    >>> tc.problems                  # [] when kernels can be compiled here
    >>> require_compiler()           # raises the first problem, if any

Why find the toolkit ourselves: torch guesses CUDA_HOME as the parent of the directory
holding `nvcc`. When `nvcc` is a wrapper script (/usr/local/bin/nvcc execs the real one),
torch gets /usr/local, and linking fails with "cannot find -lcudart". `nvcc -dryrun`
reports the real toolkit directory (TOP), so we ask nvcc itself. A conda environment
(environment.yml: cuda-nvcc and cuda-cudart-dev from conda-forge) is a toolkit too: its
prefix has bin/nvcc, and its headers and libcudart under targets/<platform>/ (conda-forge's
layout) rather than include/ and lib64/; apply_cuda_home() tells the host compiler where.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_ARCH = "9.0"  # what kernels are compiled for when no GPU is visible (H100)
FALLBACK_CUDA_HOMES: tuple[Path, ...] = (Path("/usr/local/cuda"),)


class ToolchainError(RuntimeError):
    """Something needed to compile CUDA kernels is missing or does not fit. `short` names it in a
    few words, for a skip reason ("no nvcc", "a CPU-only torch"); the message adds the fix."""

    def __init__(self, message: str, short: str | None = None):
        super().__init__(message)
        self.short = short or message


class NoNvccError(ToolchainError):
    pass


class CpuOnlyTorchError(ToolchainError):
    pass


class CudaMismatchError(ToolchainError):
    pass


class NinjaMissingError(ToolchainError):
    pass


class UnsupportedArchError(ToolchainError):
    pass


# --- the CUDA toolkit -------------------------------------------------------------------

def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


# Where a toolkit keeps libcudart and the CUDA headers: /usr/local/cuda has lib64/ and include/;
# conda-forge puts them under targets/x86_64-linux/ (lib/ holds links to the libraries).
CUDART_GLOBS = ("lib64/libcudart.so*", "lib/libcudart.so*", "targets/*/lib/libcudart.so*")
HEADER_DIRS = ("include", "targets/*/include")


def _has_cudart(home: Path) -> bool:
    return any(any(home.glob(pattern)) for pattern in CUDART_GLOBS)


def cuda_include_dir(home: Path) -> Path | None:
    """The directory of the toolkit's cuda_runtime.h: include/, else targets/<platform>/include/."""
    for pattern in HEADER_DIRS:
        for folder in sorted(home.glob(pattern)):
            if (folder / "cuda_runtime.h").is_file():
                return folder
    return None


def not_a_cuda_home(home: Path) -> str | None:
    """Why `home` is no toolkit extensions can be built with (None when it is one): it must have
    the compiler, the CUDA headers and the runtime library extensions link against."""
    if not home.is_dir():
        return "no such directory"
    if not (home / "bin" / "nvcc").is_file():
        return "no bin/nvcc"
    if cuda_include_dir(home) is None:
        return f"no cuda_runtime.h in {' or '.join(d + '/' for d in HEADER_DIRS)}"
    if not _has_cudart(home):
        return f"no libcudart in {', '.join(g.rsplit('/', 1)[0] + '/' for g in CUDART_GLOBS)}"
    return None


def is_cuda_home(home: Path) -> bool:
    return not_a_cuda_home(home) is None


def _nvcc_top(nvcc: str) -> Path | None:
    """The toolkit directory nvcc itself uses: the `#$ TOP=...` line of a dry run."""
    out = _run([nvcc, "-dryrun", "-c", "-x", "cu", os.devnull, "-o", os.devnull])
    match = re.search(r"^#\$ TOP=(.+)$", out.stdout + out.stderr, re.MULTILINE)
    return Path(match.group(1).strip()).resolve() if match else None


def _conda_prefixes() -> list[tuple[str, Path]]:
    """The conda environment that is active ($CONDA_PREFIX), and the one this Python runs in
    (a conda-meta/ folder in sys.prefix) when it was started without activating it."""
    found = [("$CONDA_PREFIX", Path(os.environ["CONDA_PREFIX"]))] if os.environ.get("CONDA_PREFIX") else []
    here = Path(sys.prefix)
    if (here / "conda-meta").is_dir() and all(here.resolve() != p.resolve() for _, p in found):
        found.append(("this Python's conda environment", here))
    return found


def _cuda_home_candidates() -> list[tuple[str, Path]]:
    """Where a toolkit may be, in order of trust, each with where the guess came from."""
    candidates = [(f"${v}", Path(os.environ[v])) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    candidates += _conda_prefixes()
    nvcc = shutil.which("nvcc")
    if nvcc:
        top = _nvcc_top(nvcc)
        if top:
            candidates.append((f"TOP of `{nvcc} -dryrun`", top))
        candidates.append((f"above nvcc's real path ({os.path.realpath(nvcc)})", Path(os.path.realpath(nvcc)).parent.parent))
    candidates += [("the usual place", home) for home in FALLBACK_CUDA_HOMES]
    return candidates


def find_cuda_home() -> Path | None:
    """The CUDA toolkit to compile with: $CUDA_HOME / $CUDA_PATH, the conda environment
    ($CONDA_PREFIX, or this Python's), what `nvcc -dryrun` reports (this sees through wrapper
    scripts), the parent of nvcc's real path, /usr/local/cuda. Only a directory with bin/nvcc,
    cuda_runtime.h and libcudart counts."""
    for _, home in _cuda_home_candidates():
        if is_cuda_home(home):
            return home.resolve()
    return None


def looked_at() -> str:
    """Every place find_cuda_home() tried, and why each is no toolkit: for the messages."""
    tried = [f"{where}: {home} ({not_a_cuda_home(home) or 'a toolkit'})" for where, home in _cuda_home_candidates()]
    return "; ".join(tried) or "nowhere: no $CUDA_HOME, $CUDA_PATH or conda environment, no nvcc on PATH"


def nvcc_version(nvcc: str | Path) -> str:
    """"13.0", from the "release 13.0" in `nvcc --version`."""
    out = _run([str(nvcc), "--version"]).stdout
    match = re.search(r"release (\d+\.\d+)", out)
    if not match:
        raise ToolchainError(f"could not read the CUDA version from `{nvcc} --version`:\n{out}")
    return match.group(1)


def supported_archs(nvcc: str | Path) -> list[str]:
    """Compute capabilities this nvcc compiles for: compute_75 -> "7.5", compute_100 -> "10.0"."""
    out = _run([str(nvcc), "--list-gpu-arch"]).stdout
    return [f"{d[:-1]}.{d[-1]}" for d in re.findall(r"compute_(\d+)", out)]


# --- ninja and the GPU ------------------------------------------------------------------

def _python_scripts_dir() -> Path:
    # `pip install ninja` puts ninja next to this interpreter, which is not on PATH when
    # the venv's python is run without activating the venv.
    return Path(sysconfig.get_path("scripts"))


def find_ninja() -> Path | None:
    found = shutil.which("ninja") or shutil.which("ninja", path=str(_python_scripts_dir()))
    return Path(found) if found else None


def _visible_gpu() -> tuple[str | None, str | None]:
    """(name, "9.0") of the current GPU, or (None, None) without one."""
    import torch

    if not torch.cuda.is_available():
        return None, None
    major, minor = torch.cuda.get_device_capability()
    return torch.cuda.get_device_name(), f"{major}.{minor}"


def arch_code(arch: str) -> str:
    """ "9.0" -> "90", "9.0a" -> "90a" (the XY of compute_XY / sm_XY)."""
    match = re.fullmatch(r"(\d+)\.(\d)([a-z]?)", arch)
    if not match:
        raise ValueError(f"arch must look like '9.0' or '9.0a' (a compute capability), got {arch!r}")
    return "".join(match.groups())


def _base_arch(arch: str) -> str:
    return arch.rstrip("abcdefghijklmnopqrstuvwxyz")


# --- the whole picture ------------------------------------------------------------------

@dataclass
class Toolchain:
    torch_version: str
    torch_cuda: str | None  # torch.version.cuda: None for a CPU-only build
    cuda_home: Path | None
    nvcc: Path | None  # the toolkit's nvcc, or whatever is on PATH when no toolkit was found
    nvcc_version: str | None
    nvcc_archs: list[str]
    ninja: Path | None
    gpu_name: str | None
    gpu_arch: str | None
    problems: list[str] = field(default_factory=list)  # messages of what keeps kernels from compiling
    blockers: list[str] = field(default_factory=list)  # the same, each in a few words (ToolchainError.short)

    def errors(self, arch: str | None = None) -> list[ToolchainError]:
        """What keeps kernels from compiling for `arch` (default: the visible GPU, else 9.0)."""
        errors: list[ToolchainError] = []
        if self.cuda_home is None:
            errors.append(NoNvccError(_no_nvcc_message(self.nvcc), _no_nvcc_short(self.nvcc)))
        if self.torch_cuda is None:
            errors.append(CpuOnlyTorchError(_cpu_only_message(self.torch_version, self.nvcc_version),
                                            f"a CPU-only torch ({self.torch_version})"))
        elif self.nvcc_version and _major(self.nvcc_version) != _major(self.torch_cuda):
            errors.append(CudaMismatchError(_mismatch_message(self), f"nvcc is CUDA {self.nvcc_version} but torch "
                                                                     f"was built with CUDA {self.torch_cuda}"))
        if self.ninja is None:
            errors.append(NinjaMissingError(_NINJA_MESSAGE.format(python=sys.executable), "no ninja"))
        target = arch or self.gpu_arch or DEFAULT_ARCH
        if self.nvcc_version and _base_arch(target) not in self.nvcc_archs:
            errors.append(UnsupportedArchError(_arch_message(self, target, explicit=arch is not None),
                                               f"nvcc {self.nvcc_version} cannot compile for sm_{arch_code(target)}"))
        return errors


def _major(version: str) -> str:
    return version.split(".")[0]


@functools.cache
def detect() -> Toolchain:
    """Look at this machine once; `detect.cache_clear()` makes the next call look again."""
    import torch

    cuda_home = find_cuda_home()
    on_path = shutil.which("nvcc")
    nvcc = cuda_home / "bin" / "nvcc" if cuda_home else (Path(on_path) if on_path else None)
    gpu_name, gpu_arch = _visible_gpu()
    tc = Toolchain(
        torch_version=torch.__version__,
        torch_cuda=torch.version.cuda,
        cuda_home=cuda_home,
        nvcc=nvcc,
        nvcc_version=nvcc_version(nvcc) if cuda_home else None,
        nvcc_archs=supported_archs(nvcc) if cuda_home else [],
        ninja=find_ninja(),
        gpu_name=gpu_name,
        gpu_arch=gpu_arch,
    )
    errors = tc.errors()
    tc.problems = [str(e) for e in errors]
    tc.blockers = [e.short for e in errors]
    return tc


def require_compiler(arch: str | None = None) -> Toolchain:
    """The toolchain, if it can compile kernels for `arch`; else raise the first problem."""
    tc = detect()
    errors = tc.errors(arch)
    if errors:
        raise errors[0]
    return tc


def apply_cuda_home() -> Path:
    """Point torch's extension builder at the toolkit we found, so it links the real libcudart.

    torch.utils.cpp_extension reads its module global CUDA_HOME at build time (it was set from
    its own guess at import), and the environment variable covers anything torch starts later.
    """
    home = detect().cuda_home
    if home is None:
        raise NoNvccError(_no_nvcc_message(detect().nvcc), _no_nvcc_short(detect().nvcc))
    os.environ["CUDA_HOME"] = str(home)  # before the import below, so torch's own guess is right too
    _point_host_compiler_at(home)
    import torch.utils.cpp_extension as cpp_extension

    cpp_extension.CUDA_HOME = str(home)
    return home


def _point_host_compiler_at(home: Path) -> None:
    """torch passes the host compiler CUDA_HOME/include and CUDA_HOME/lib64 (or lib); a conda-forge
    toolkit keeps its headers (and may keep libcudart.so) under targets/<platform>/ alone. nvcc finds
    them through its nvcc.profile, g++ does not: CPATH and LIBRARY_PATH, which gcc reads, name them."""
    include = cuda_include_dir(home)
    if include is not None and include != home / "include":
        _prepend_env("CPATH", include)
    if not any(home.glob("lib64/libcudart.so")) and not any(home.glob("lib/libcudart.so")):
        for lib in sorted(home.glob("targets/*/lib/libcudart.so")):
            _prepend_env("LIBRARY_PATH", lib.parent)


def _prepend_env(var: str, folder: Path) -> None:
    parts = [p for p in os.environ.get(var, "").split(os.pathsep) if p]
    if str(folder) not in parts:
        os.environ[var] = os.pathsep.join([str(folder), *parts])


def apply_ninja_path() -> Path:
    """torch runs `ninja` from PATH: put the one we found there (it may sit only in the venv)."""
    ninja = detect().ninja
    if ninja is None:
        raise NinjaMissingError(_NINJA_MESSAGE.format(python=sys.executable))
    if shutil.which("ninja") is None:
        os.environ["PATH"] = f"{ninja.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return ninja


# --- messages: the cause, then the fix --------------------------------------------------

def _no_nvcc_short(nvcc_on_path: Path | None) -> str:
    return f"nvcc at {nvcc_on_path} but no CUDA toolkit around it" if nvcc_on_path else "no nvcc"


def _no_nvcc_message(nvcc_on_path: Path | None) -> str:
    head = (f"nvcc is at {nvcc_on_path}, but no CUDA toolkit with its headers and libcudart was found"
            if nvcc_on_path else "nvcc not found on PATH and no CUDA toolkit found")
    return (
        f"{head} (looked at: {looked_at()}). Install the CUDA toolkit (nvcc; in the conda environment, "
        "`conda env update -f environment.yml` installs it from conda-forge), or set CUDA_HOME=/path/to/cuda, "
        "the directory that holds bin/nvcc, include/cuda_runtime.h and lib64/libcudart.so."
    )


def _wheel_index(cuda_version: str) -> str:
    return f"https://download.pytorch.org/whl/cu{cuda_version.replace('.', '')}"


def _cpu_only_message(torch_version: str, nvcc_ver: str | None) -> str:
    index = _wheel_index(nvcc_ver) if nvcc_ver else "https://download.pytorch.org/whl/cu130"
    return (
        f"torch {torch_version} is a CPU-only build (torch.version.cuda is None): it cannot compile or run "
        f"CUDA kernels. Install a CUDA build of torch that matches nvcc {nvcc_ver or '(your CUDA version)'}: "
        f"pip install torch --index-url {index}"
    )


def _mismatch_message(tc: Toolchain) -> str:
    return (
        f"CUDA version mismatch: nvcc is CUDA {tc.nvcc_version} ({tc.nvcc}) but torch {tc.torch_version} "
        f"was built with CUDA {tc.torch_cuda}; an extension must be compiled with the same CUDA major version. "
        f"Install a CUDA {_major(tc.torch_cuda)}.x toolkit and set CUDA_HOME to it, or install torch for "
        f"CUDA {tc.nvcc_version}: pip install torch --index-url {_wheel_index(tc.nvcc_version)} "
        "(the cuXY builds that exist are listed on pytorch.org/get-started)."
    )


_NINJA_MESSAGE = (
    "ninja not found: torch builds CUDA extensions with the ninja build tool. "
    "Install it into this environment: {python} -m pip install ninja"
)


def _arch_message(tc: Toolchain, target: str, explicit: bool) -> str:
    what = f"arch={target!r} was requested" if explicit else f"the GPU here, {tc.gpu_name}, is compute capability {target}"
    return (
        f"nvcc {tc.nvcc_version} cannot compile for sm_{arch_code(target)} ({what}); it supports "
        f"{', '.join(tc.nvcc_archs)}. Use a CUDA toolkit (and a matching torch build) that still supports "
        f"compute capability {_base_arch(target)}, or compile for a supported arch."
    )
