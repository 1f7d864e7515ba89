"""load_kernel("vector_add"): kernels/vector_add.cu -> a Python module, compiled once and cached.

(Over 600 lines: everything between a .cu file and a callable launcher, in one place: parsing the
exports, planning and locking a build, nvcc's errors made readable, and the launchers registered as
torch.library operators, whose schemas and C++ registration come from the same parsed prototypes.)

The .cu file is the single source of truth. Host launchers that Python may call are marked
in it by a comment line directly above their definition:

    // @export: out = a + b for float32 CUDA tensors
    torch::Tensor vector_add(torch::Tensor a, torch::Tensor b) { ... }

From those marks this module derives the C++ declarations and the Python bindings, and
hands everything to torch.utils.cpp_extension.load_inline with -O3, -lineinfo and the
visible GPU's arch (sm_90 without a GPU). A kernel that needs an arch-specific target
(wgmma and setmaxnreg exist only on sm_90a) says so in a line of its own:

    // @arch: 9.0a

Builds are cached under build/kernels/<name>-<hash>/ by a hash of everything that goes
into them (the kernel, every header it includes from kernels/, the flags, the arch, the
torch and nvcc versions). A warm load imports the built library directly, without
torch's build machinery, and takes a fraction of a second.

Every failure says what happened and what to do: toolchain problems (utils.toolchain),
KernelSourceError (the .cu cannot be bound as written), KernelCompileError (nvcc's first
error at kernels/<name>.cu:<line>), BuildLockTimeout (another build holds the lock).
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import os
import pickle
import re
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Iterator, Mapping, Sequence

from utils import REPO, bindings_header, launch, toolchain

KERNELS_DIR = REPO / "kernels"
SCRATCH_DIR = REPO / "build" / "scratch"  # kernels written in a notebook cell (load_source); git ignores build/
LOCK_FILE = ".workbook.lock"  # ours: holds the pid of the process that is building
TORCH_LOCK_FILE = "lock"  # torch's own; some torch versions wait forever on one left by a killed build
DONE_FILE = ".workbook.done"  # written once a build has finished: its library is complete
TICK_SECONDS = 10.0

_loaded: dict[str, ModuleType] = {}  # module name -> module: a second load in one process is free


# --- errors -----------------------------------------------------------------------------

class KernelSourceError(ValueError):
    """A kernel file that cannot be bound as written (no `// @export`, a mark on a non-function, ...)."""


class BuildLockTimeout(TimeoutError):
    """Another live process held the build lock for longer than `lock_timeout`."""


class KernelCompileError(RuntimeError):
    """nvcc (or the host compiler) rejected the kernel. str() starts with `file:line: error: ...`."""

    def __init__(self, name: str, path: Path, line: int | None, message: str, nvcc_output: str):
        self.name, self.path, self.line, self.message, self.nvcc_output = name, path, line, message, nvcc_output
        super().__init__(self._render())

    def __reduce__(self):  # whole (file, line, nvcc's output) from load_kernels' worker processes to the parent
        return KernelCompileError, (self.name, self.path, self.line, self.message, self.nvcc_output)

    def _render(self) -> str:
        where = f"{display_path(self.path)}:{self.line}" if self.line else display_path(self.path)
        excerpt = "\n".join("    " + line for line in _relevant_lines(self.nvcc_output))
        return (
            f"{where}: error: {self.message}\n"
            f"compiling kernel '{self.name}' failed; the compiler said:\n{excerpt}\n"
            "(the whole build log is in this exception's .nvcc_output)"
        )


def display_path(path: Path) -> str:
    """kernels/x.cu for files of this repository, the full path for others."""
    path = Path(path)
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


# --- reading a kernel file --------------------------------------------------------------

@dataclass(frozen=True)
class Export:
    name: str
    prototype: str  # "torch::Tensor vector_add(torch::Tensor a, torch::Tensor b)"
    doc: str


_EXPORT = re.compile(r"^[ \t]*//[ \t]*@export\b(?:[ \t]*:(?P<doc>.*))?$", re.MULTILINE)
_ARCH_MARK = re.compile(r"^[ \t]*//[ \t]*@arch:[ \t]*(?P<arch>\S+)[ \t]*$", re.MULTILINE)
_OPS_MARK = re.compile(r"^[ \t]*//[ \t]*@ops\b", re.MULTILINE)
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"(?P<file>[^"]+)"', re.MULTILINE)
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_PROTOTYPE = re.compile(r"(?P<type>\S.*?[ *&])(?P<name>[A-Za-z_]\w*) ?\((?P<params>.*)\)")


def exported_functions(source: str, filename: str = "<kernel source>") -> list[Export]:
    """The launchers marked `// @export` (or `// @export: docstring`) in a kernel's source."""
    return launch.read_marks(source, _EXPORT, _parse_export, filename, KernelSourceError,
                             "exported more than once; export one definition per name")


def _parse_export(source: str, mark: re.Match, filename: str) -> Export:
    line_no = source.count("\n", 0, mark.start()) + 1
    rest = source[mark.end():].lstrip()  # the definition follows, after the newline
    end = min((i for i in (rest.find("{"), rest.find(";")) if i >= 0), default=-1)
    head = " ".join(rest[:end].split()) if end >= 0 and rest[end] == "{" else ""  # up to the body's `{`
    prototype = _PROTOTYPE.fullmatch(head)
    if not prototype or head.startswith(("//", "/*", "#")):
        raise KernelSourceError(
            f"{filename}:{line_no}: `// @export` must sit directly above a function definition "
            "(return type, name, parameters, then `{`), e.g.\n"
            "    // @export\n    torch::Tensor my_op(torch::Tensor x) {"
        )
    if "__global__" in prototype.group("type"):
        raise KernelSourceError(
            f"{filename}:{line_no}: `// @export` marks a __global__ kernel; Python cannot call a kernel directly. "
            "Export the host launcher that takes torch::Tensor arguments and launches it."
        )
    name = prototype.group("name")
    return Export(name, head, (mark.group("doc") or "").strip() or name)


@dataclass(frozen=True)
class Parameter:
    ctype: str  # "torch::Tensor", "c10::optional<torch::Tensor>", "int64_t", ... (const and & dropped)
    name: str
    default: str  # as written ("c10::nullopt", "false"), or ""
    text: str  # the whole declaration

    @property
    def is_tensor(self) -> bool:
        return "Tensor" in self.ctype


def parameters(export: Export) -> list[Parameter]:
    """A launcher's parameters, in order, from its prototype."""
    found = []
    for text in filter(None, (p.strip() for p in _PROTOTYPE.fullmatch(export.prototype).group("params").split(","))):
        declaration, _, default = (part.strip() for part in text.partition("="))
        ctype, _, name = declaration.rpartition(" ")
        found.append(Parameter(ctype.replace("const ", "").replace("&", "").strip(), name.lstrip("&*"), default, text))
    return found


def required_arch(source: str, filename: str = "<kernel source>") -> str | None:
    """The arch a kernel's `// @arch: 9.0a` line asks for, or None (it builds for any GPU)."""
    marks = {m.group("arch") for m in _ARCH_MARK.finditer(source)}
    if len(marks) > 1:
        raise KernelSourceError(f"{filename}: more than one `// @arch:` line ({', '.join(sorted(marks))}); keep one")
    if not marks:
        return None
    (arch,) = marks
    toolchain.arch_code(arch)  # a ValueError that says what an arch looks like
    return arch


def _target_arch(needed: str | None, gpu_arch: str | None, filename: str) -> str:
    """The kernel's own arch when it names one (its family must be the visible GPU's), else the GPU's, else 9.0."""
    if needed is None:
        return gpu_arch or toolchain.DEFAULT_ARCH
    if not _arch_fits(needed, gpu_arch):
        raise toolchain.UnsupportedArchError(
            f"{filename} is built for sm_{toolchain.arch_code(needed)} only (its `// @arch: {needed}` line: it uses "
            f"instructions of that GPU family alone, such as wgmma), and this GPU is sm_{toolchain.arch_code(gpu_arch)}. "
            "Run it on a GPU of that family; the other kernels of the workbook run here."
        )
    return needed


def _arch_fits(needed: str | None, gpu_arch: str | None) -> bool:
    """A kernel that names its arch builds for that GPU family only; without a GPU, anything builds."""
    return needed is None or gpu_arch is None or toolchain._base_arch(needed) == gpu_arch


def builds_here(name: str, kernels_dir: Path | None = None) -> bool:
    """Whether load_kernel(name) can build for this machine: false only for a kernel whose
    `// @arch` line names another GPU family than the visible GPU's (wgmma kernels on an A100)."""
    path = kernel_path(name, kernels_dir)
    return _arch_fits(required_arch(path.read_text(), display_path(path)), toolchain.detect().gpu_arch)


def kernel_path(name: str, kernels_dir: Path | None = None) -> Path:
    """kernels/<name>.cu, or a clear error listing the kernels that exist."""
    kernels_dir = Path(kernels_dir or KERNELS_DIR)
    if not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"a kernel name is a C identifier such as 'vector_add', got {name!r}")
    path = kernels_dir / f"{name}.cu"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in kernels_dir.glob("*.cu"))) or "none"
        raise FileNotFoundError(f"no kernel {name!r}: {path} does not exist (kernels in {kernels_dir}: {known})")
    return path


def kernel_source(name: str, kernels_dir: Path | None = None) -> str:
    return kernel_path(name, kernels_dir).read_text()


def include_dirs(kernels_dir: Path) -> tuple[Path, ...]:
    """Where `#include "..."` looks: the kernel's own directory, then the workbook's kernels/
    (so a kernel elsewhere, such as an exercise, can include "common/check.cuh" too)."""
    return tuple(dict.fromkeys((Path(kernels_dir).resolve(), KERNELS_DIR.resolve())))


def included_headers(path: Path, kernels_dir: Path) -> list[Path]:
    """Every file `path` includes with #include "..." (recursively) that lives in its own
    directory or on the include path: the headers whose changes must rebuild it."""
    found: list[Path] = []

    def visit(file: Path) -> None:
        for match in _INCLUDE.finditer(file.read_text()):
            for base in (file.parent, *include_dirs(kernels_dir)):
                header = (base / match.group("file")).resolve()
                if header.is_file() and header not in found:
                    found.append(header)
                    visit(header)
                    break

    visit(Path(path))
    return found


# --- what a build is made of ------------------------------------------------------------

@dataclass(frozen=True)
class BuildPlan:
    name: str
    path: Path
    exports: tuple[Export, ...]
    launchables: tuple[launch.Launchable, ...]
    arch: str
    cuda_source: str
    cpp_source: str
    cflags: tuple[str, ...]
    cuda_cflags: tuple[str, ...]
    include_dirs: tuple[Path, ...]
    key: str
    build_dir: Path

    @property
    def module_name(self) -> str:
        return f"{self.name}_{self.key[:12]}"

    @property
    def library(self) -> Path:
        return self.build_dir / f"{self.module_name}.so"


def cache_key(*parts: str) -> str:
    """sha256 over the parts, each kept distinct (so ("ab", "c") and ("a", "bc") differ)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def build_root_dir(root: Path | str | None = None) -> Path:
    """Where builds go: `root`, else $WORKBOOK_BUILD_DIR, else <repo>/build/kernels."""
    return Path(root or os.environ.get("WORKBOOK_BUILD_DIR") or REPO / "build" / "kernels")


def gencode_flag(arch: str) -> str:
    code = toolchain.arch_code(arch)
    return f"-gencode=arch=compute_{code},code=sm_{code}"


def plan(name: str, *, extra_cuda_cflags: Sequence[str] = (), arch: str | None = None,
         kernels_dir: Path | None = None, build_root: Path | str | None = None) -> BuildPlan:
    """Everything load_kernel will compile, and where: no compiling, no checks of the toolchain."""
    kernels_dir = Path(kernels_dir or KERNELS_DIR).resolve()
    path = kernel_path(name, kernels_dir)
    source = path.read_text()
    exports = exported_functions(source, display_path(path))
    headers = included_headers(path, kernels_dir)
    try:  # a kernel is marked where it is defined: in the file, or in a header the file includes
        kernels = launch.launchables(source, display_path(path))
        kernels += [k for h in headers for k in launch.launchables(h.read_text(), display_path(h))]
    except launch.LaunchSourceError as err:
        raise KernelSourceError(str(err)) from None
    if not exports and not kernels:
        raise KernelSourceError(
            f"{display_path(path)} exports nothing to Python: put a line `// @export` (or "
            "`// @export: what it does`) directly above each host launcher Python should call, e.g.\n"
            f"    // @export\n    torch::Tensor {name}(torch::Tensor x) {{\n"
            "or a line `// @launch` directly above a __global__ kernel that Python launches itself "
            "(kernel[grid, block, smem](args): utils/launch.py)"
        )
    tc = toolchain.detect()
    arch = arch or _target_arch(required_arch(source, display_path(path)), tc.gpu_arch, display_path(path))
    # An explicit -gencode also keeps torch from deriving arch flags itself (which, without a
    # GPU, fails). #line makes nvcc report errors at kernels/<name>.cu:<line>, not in a copy.
    cuda_cflags = ("-O3", "-lineinfo", gencode_flag(arch), *extra_cuda_cflags)
    # The bindings file (g++) starts with the precompiled prelude where load_inline leaves its own
    # <torch/extension.h> out (utils/bindings_header.py); else with the prelude's text, below torch's.
    precompiled = bool(_light_bindings())
    cflags = bindings_header.CFLAGS if precompiled else ("-O3",)
    # a `// @launch` kernel's launch over pointers goes into the kernel file, its checks over tensors into the
    # bindings file (utils/launch.py): a file of plain kernels then compiles without PyTorch's headers
    cuda_source = f'#line 1 "{path}"\n{source}' + launch.trampolines(kernels)
    cpp_source = ((bindings_header.INCLUDE if precompiled else bindings_header.PRELUDE)
                  + "\n".join(f"{e.prototype};" for e in exports)
                  + launch.wrappers(kernels)
                  + (registration_source(exports) if registers_ops(source) else ""))
    key = cache_key(
        cuda_source, cpp_source, bindings_header.PRELUDE, *cuda_cflags, *cflags, str(kernels_dir), arch,
        tc.torch_version, str(tc.nvcc_version),
        *(f"{h}\n{h.read_text()}" for h in headers),
    )
    return BuildPlan(
        name=name, path=path, exports=tuple(exports), launchables=tuple(kernels), arch=arch, cuda_source=cuda_source,
        cpp_source=cpp_source, cflags=cflags, cuda_cflags=cuda_cflags,
        include_dirs=include_dirs(kernels_dir) + ((bindings_header.folder(),) if precompiled else ()),
        key=key, build_dir=build_root_dir(build_root) / f"{name}-{key[:12]}",
    )


# --- loading ----------------------------------------------------------------------------

def load_kernel(name: str, *, extra_cuda_cflags: Sequence[str] = (), arch: str | None = None,
                kernels_dir: Path | None = None, build_root: Path | str | None = None,
                verbose: bool = False, lock_timeout: float = 600.0) -> ModuleType:
    """Compile kernels/<name>.cu (once; later loads reuse the build) and return it as a
    module whose functions are the launchers marked `// @export`."""
    p = plan(name, extra_cuda_cflags=extra_cuda_cflags, arch=arch, kernels_dir=kernels_dir, build_root=build_root)
    if p.module_name not in _loaded:
        module = _import(p) if _is_built(p) else _build(p, verbose, lock_timeout)
        launch.attach(module, p.launchables)
        _loaded[p.module_name] = module
    return _loaded[p.module_name]


def load_source(name: str, source: str, *, extra_cuda_cflags: Sequence[str] = (), arch: str | None = None,
                scratch_dir: Path | str | None = None, verbose: bool = False) -> ModuleType:
    """Compile kernel text written in a notebook cell, as load_kernel compiles a file: `source` is
    saved as <scratch_dir>/<name>.cu (default build/scratch/, which git ignores; kernels/ is never
    written) and built with the same marks (`// @export`, `// @launch`, `// @arch`), includes
    ("common/check.cuh" and the rest of kernels/) and cache. Compiler errors point at
    build/scratch/<name>.cu:<line>, the line of the cell's text."""
    folder = write_source(name, source, scratch_dir)
    return load_kernel(name, extra_cuda_cflags=extra_cuda_cflags, arch=arch, kernels_dir=folder, verbose=verbose)


def write_source(name: str, source: str, scratch_dir: Path | str | None = None) -> Path:
    """Save `source` as <scratch_dir>/<name>.cu (default build/scratch/), as load_source does before it
    builds; returns the folder, the kernels_dir of its build. Unchanged text keeps its file (and its build)."""
    folder = Path(scratch_dir or SCRATCH_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    path = kernel_path_for_writing(name, folder)
    if not path.is_file() or path.read_text() != source:
        path.write_text(source)
    return folder


def kernel_path_for_writing(name: str, folder: Path) -> Path:
    if not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"a kernel name is a C identifier such as 'my_tiled_gemm', got {name!r}")
    if Path(folder).resolve() == KERNELS_DIR.resolve():
        raise ValueError("load_source writes its text into a scratch folder, never into kernels/")
    return Path(folder) / f"{name}.cu"


@dataclass(frozen=True)
class Variant:
    """One build of a kernel file, for load_kernels: <kernels_dir>/<name>.cu (default kernels/)
    compiled with extra nvcc flags, e.g. Variant("gemm_07_pipelined", ["-DGEMM07_BK=16"]).
    Frozen and hashable (the flags are kept as a tuple), so it can key a dict; str() names it."""
    name: str
    extra_cuda_cflags: tuple[str, ...] = ()
    kernels_dir: Path | None = None

    def __post_init__(self):
        if isinstance(self.extra_cuda_cflags, str):
            raise TypeError(f"extra_cuda_cflags is a sequence of flags, e.g. [{self.extra_cuda_cflags!r}]")
        object.__setattr__(self, "extra_cuda_cflags", tuple(self.extra_cuda_cflags))
        if self.kernels_dir is not None:
            object.__setattr__(self, "kernels_dir", Path(self.kernels_dir))

    def __str__(self) -> str:
        text = " ".join([self.name, *self.extra_cuda_cflags])
        return f"{text} (in {display_path(self.kernels_dir)})" if self.kernels_dir else text

    def plan(self) -> BuildPlan:
        return plan(self.name, extra_cuda_cflags=self.extra_cuda_cflags, kernels_dir=self.kernels_dir)

    def load(self) -> ModuleType:
        return load_kernel(self.name, extra_cuda_cflags=self.extra_cuda_cflags, kernels_dir=self.kernels_dir)


def as_variant(item: str | Variant | tuple) -> Variant:
    """What an item of load_kernels names: a kernel name, a Variant, or a tuple (name, flags) or
    (name, flags, kernels_dir), read as Variant(*item)."""
    if isinstance(item, Variant):
        return item
    if isinstance(item, str):
        return Variant(item)
    if isinstance(item, tuple) and 2 <= len(item) <= 3:
        return Variant(*item)
    raise TypeError(f"a kernel to load is a name, a build.Variant or a tuple (name, flags[, kernels_dir]); got {item!r}")


def _build_only(item: Variant, max_jobs: int) -> str:
    # a worker of load_kernels (a spawned process): compile and return; importing the library is
    # the parent's job. Its share of the cores: each build runs ninja, which would otherwise take them all.
    os.environ["MAX_JOBS"] = str(max_jobs)
    try:
        p = item.plan()
        if not _is_built(p):
            _build(p, verbose=False, lock_timeout=600.0)
    except Exception as error:
        # the parent receives the exception pickled: one that would not unpickle there would break the pool
        try:
            pickle.loads(pickle.dumps(error))
        except Exception:
            raise RuntimeError(f"{type(error).__name__}: {error}") from None
        raise
    return str(item)


def every_kernel_file() -> list[Variant]:
    """Every kernel file of kernels/, kernels/probes/ and kernels/exercises/ (as committed) that builds for
    this machine, the way the tests and the chapters load them: what a prebuild builds."""
    found = []
    for folder in (KERNELS_DIR, KERNELS_DIR / "probes", KERNELS_DIR / "exercises"):
        found += [Variant(name, kernels_dir=None if folder == KERNELS_DIR else folder)
                  for name in sorted(p.stem for p in folder.glob("*.cu")) if builds_here(name, folder)]
    return found


def load_kernels(kernels: Sequence[str | Variant | tuple] | Mapping[object, str | Variant | tuple],
                 jobs: int | None = None, *, kernels_dir: Path | None = None, build_only: bool = False,
                 on_error: str = "raise") -> dict:
    """load_kernel for several kernels, the cold builds side by side: nvcc uses one core per kernel
    file, so a machine with several cores builds several kernels in the time of one.

    kernels: a list of kernel names ("gemm_01_naive"), Variants (a kernel with extra nvcc flags, or
        from another folder) or tuples (name, flags[, kernels_dir]); returns {item: module} in the
        order given, a name keyed by itself and a tuple by its Variant. Or a dict {label: item};
        returns {label: module}. A Variant without a kernels_dir, and a name, is looked for in
        `kernels_dir` (default kernels/). The same build asked for twice is built once.
    jobs: cold builds at a time (default: one per core, at most one per cold build), each in a worker
        process (spawned) with its share of the cores; one line is printed as each finishes
        ("built <label>" or "FAILED <label>: <the error's first line>"). A single cold build, or
        jobs=1, builds in this process.
    build_only: build in the workers and import nothing here (returns {}, or only the failures):
        later loads are warm.
    on_error: "raise" (default) raises the first failure, in the order given, once the other builds
        have finished; "return" maps each item that failed to its exception (a KernelCompileError
        names nvcc's first error at file:line). A kernel that does not exist, or that cannot be
        planned, fails before anything is built.
    """
    if on_error not in ("raise", "return"):
        raise ValueError(f"on_error is 'raise' or 'return', got {on_error!r}")
    if isinstance(kernels, (str, Variant)):
        raise TypeError(f"load_kernels takes a list (or dict) of kernels, e.g. [{kernels!r}]; load_kernel loads one")
    pairs = kernels.items() if isinstance(kernels, Mapping) else (
        (item if isinstance(item, str) else as_variant(item), item) for item in kernels)
    wanted: dict[object, Variant] = {}  # key -> the build it names, in the order given
    for key, item in pairs:
        variant = as_variant(item)
        if variant.kernels_dir is None and kernels_dir is not None:
            variant = dataclasses.replace(variant, kernels_dir=kernels_dir)
        wanted.setdefault(key, variant)
    failed: dict[Variant, Exception] = {}
    cold: dict[Variant, str] = {}  # each cold build once, with the label it is announced by
    for key, variant in wanted.items():
        if variant in cold or variant in failed:
            continue
        try:
            if not _is_built(variant.plan()):
                cold[variant] = str(key)
        except Exception as error:  # no such kernel, no `// @export`, an @arch of another GPU, ...
            if on_error == "raise":
                raise
            failed[variant] = error
    jobs = max(1, min(len(cold), jobs or os.cpu_count() or 1))
    if cold and (build_only or (len(cold) > 1 and jobs > 1)):
        failed |= _build_side_by_side(cold, jobs)
    modules = {}
    for key, variant in wanted.items():
        if variant not in failed and not build_only:
            try:
                modules[key] = variant.load()  # warm now: an import (or, in this process, the one cold build)
            except Exception as error:
                print(f"  FAILED {key}: {_first_line(error)}", flush=True)
                failed[variant] = error
        if variant in failed:
            modules[key] = failed[variant]
    if on_error == "raise" and failed:
        raise next(failed[v] for v in wanted.values() if v in failed)
    return modules


def _build_side_by_side(cold: dict[Variant, str], jobs: int) -> dict[Variant, Exception]:
    """Build `cold` ({variant: label}) `jobs` at a time in spawned worker processes; {variant: error} of those that failed."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    print(f"building {len(cold)} kernels, {jobs} at a time: {', '.join(cold.values())}", flush=True)
    failed = {}
    share = max(1, (os.cpu_count() or 1) // jobs)
    # spawn, not fork: a forked child of a process that has initialised CUDA cannot use CUDA
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(_build_only, variant, share): variant for variant in cold}
        for future in as_completed(futures):
            variant = futures[future]
            try:
                future.result()
                print(f"  built {cold[variant]}", flush=True)
            except Exception as error:  # nvcc's error, or a worker that died (BrokenProcessPool)
                print(f"  FAILED {cold[variant]}: {_first_line(error)}", flush=True)
                failed[variant] = error
    return failed


def _first_line(error: BaseException) -> str:
    return next(iter(str(error).splitlines()), type(error).__name__)


def _is_built(p: BuildPlan) -> bool:
    return (p.build_dir / DONE_FILE).is_file() and p.library.is_file()


def _import(p: BuildPlan) -> ModuleType:
    """Import a built library directly: no ninja, no compiler checks (that is what makes a warm load fast)."""
    import torch  # noqa: F401  the library links against torch's libraries, which must be loaded first

    spec = importlib.util.spec_from_file_location(p.module_name, p.library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(p: BuildPlan, verbose: bool, lock_timeout: float) -> ModuleType:
    toolchain.require_compiler(p.arch)
    toolchain.apply_cuda_home()
    toolchain.apply_ninja_path()
    p.build_dir.mkdir(parents=True, exist_ok=True)
    with _build_lock(p.build_dir, lock_timeout):
        if _is_built(p):  # another process built it while we waited for the lock
            return _import(p)
        _remove_stale_torch_lock(p.build_dir)
        try:
            module = _compile(p, verbose)
        finally:
            # torch leaves its lock file behind (newer versions) or removes it (older ones);
            # either way none may remain, so that one found later means a build was killed.
            (p.build_dir / TORCH_LOCK_FILE).unlink(missing_ok=True)
        (p.build_dir / DONE_FILE).write_text(f"{p.module_name}\n")
        return module


def _compile(p: BuildPlan, verbose: bool) -> ModuleType:
    from torch.utils import cpp_extension

    print(f"building kernel '{p.name}' for sm_{toolchain.arch_code(p.arch)} "
          "(cold build: 5-70 s on 2 cores; later loads reuse it)...", flush=True)
    # torch remembers the sources of each extension name per process and skips the build when
    # they did not change, even if the last build failed; forget them so a retry really builds.
    cpp_extension.JIT_EXTENSION_VERSIONER.entries.pop(p.module_name, None)
    start = time.monotonic()
    if bindings_header.INCLUDE in p.cpp_source:
        bindings_header.ensure(list(p.cuda_cflags))
    # torch hands $MAX_JOBS to ninja; without it ninja picks its own number of parallel jobs.
    with _ticker(p.name, start), _env("MAX_JOBS", os.environ.get("MAX_JOBS") or str(os.cpu_count() or 1)):
        try:
            module = cpp_extension.load_inline(
                name=p.module_name,
                cpp_sources=[p.cpp_source],
                cuda_sources=[p.cuda_source],
                functions={e.name: _c_string(e.doc) for e in p.exports} | _registration_binding(p)
                | {k.wrapper: _c_string(f"launch {k.signature}") for k in p.launchables},
                extra_cflags=list(p.cflags),
                extra_cuda_cflags=list(p.cuda_cflags),
                extra_include_paths=[str(d) for d in p.include_dirs],
                build_directory=str(p.build_dir),
                verbose=verbose,
                **_light_bindings(),
            )
        except RuntimeError as err:
            if not str(err).startswith("Error building extension"):
                raise
            raise _compile_error(p, str(err)) from None
    print(f"built '{p.name}' in {time.monotonic() - start:.1f} s", flush=True)
    return module


@functools.cache
def _light_bindings() -> dict[str, bool]:
    """load_inline's argument that leaves <torch/extension.h> out of the bindings file, where this
    torch has it; an older one includes it as well (the prelude is harmless beside it, but then not
    precompiled: a precompiled header must come first)."""
    import inspect

    from torch.utils import cpp_extension

    has = "no_implicit_headers" in inspect.signature(cpp_extension.load_inline).parameters
    return {"no_implicit_headers": True} if has else {}


def _c_string(text: str) -> str:
    # load_inline pastes each docstring into a C string literal.
    return text.replace("\\", "\\\\").replace('"', '\\"')


@contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


@contextmanager
def _ticker(name: str, start: float) -> Iterator[None]:
    """A line every TICK_SECONDS while the compiler runs, so a long cold build does not look hung."""
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(TICK_SECONDS):
            print(f"  ... still compiling '{name}' ({time.monotonic() - start:.0f} s)", flush=True)

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


# --- compile errors ---------------------------------------------------------------------

_NVCC_ERROR = re.compile(r"^(?P<file>\S[^\n(]*)\((?P<line>\d+)\): (?:catastrophic )?error: (?P<msg>.*)$", re.MULTILINE)
_GCC_ERROR = re.compile(r"^(?P<file>\S[^\n:]*):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: (?P<msg>.*)$", re.MULTILINE)
_NOISE = re.compile(r"^(\[\d+/\d+\] |FAILED: |ninja: |Error building extension|\S*(nvcc|c\+\+|g\+\+|gcc|clang\+\+) -)")


def _compile_error(p: BuildPlan, output: str) -> KernelCompileError:
    matches = [m for m in (_NVCC_ERROR.search(output), _GCC_ERROR.search(output)) if m]
    if not matches:  # e.g. a link error: no file and line to point at
        first = next((line for line in _relevant_lines(output) if re.search("error|fatal", line, re.I)), "the build failed")
        return KernelCompileError(p.name, p.path, None, first.strip(), output)
    first = min(matches, key=lambda m: m.start())
    return KernelCompileError(p.name, Path(first.group("file")), int(first.group("line")), first.group("msg").strip(), output)


def _relevant_lines(output: str, limit: int = 20) -> list[str]:
    """The compiler's messages without ninja's progress lines and the echoed command lines."""
    lines = [line for line in output.splitlines() if line.strip() and not _NOISE.match(line)]
    return lines[:limit]


# --- the build lock ---------------------------------------------------------------------

@contextmanager
def _build_lock(build_dir: Path, timeout: float) -> Iterator[None]:
    """Hold <build dir>/.workbook.lock (it contains our pid) while building. A lock whose
    process is gone is stale and removed, with torch's; a live one is waited for."""
    lock = build_dir / LOCK_FILE
    deadline = time.monotonic() + timeout
    announced = None
    while not _try_lock(lock):
        holder = _lock_holder(lock)
        if holder is None:  # released between our attempt and the read
            continue
        if not _pid_alive(holder):
            _remove_stale(build_dir, f"process {holder} is no longer running")
            continue
        if time.monotonic() >= deadline:
            raise BuildLockTimeout(
                f"waited {timeout:.0f} s for {lock}, held by process {holder}, which is still running. "
                f"Wait for that build to finish, or stop it (kill {holder}) and load again."
            )
        if holder != announced:
            print(f"waiting for process {holder}, which is building in {build_dir} (lock: {lock})...", flush=True)
            announced = holder
        time.sleep(0.2)
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


def _try_lock(lock: Path) -> bool:
    """Create `lock` with our pid in it, atomically: a hard link either appears complete or
    fails because the lock exists, so a lock file is never seen empty."""
    draft = lock.with_name(f"{lock.name}.{os.getpid()}.{threading.get_ident()}")
    draft.write_text(str(os.getpid()))
    try:
        os.link(draft, lock)
        return True
    except FileExistsError:
        return False
    finally:
        draft.unlink()


def _lock_holder(lock: Path) -> int | None:
    """The pid in a lock file; None when there is no lock; 0 (no process) when it holds no pid."""
    try:
        text = lock.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else 0


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, it is just not ours
        return True
    return True


def _remove_stale(build_dir: Path, reason: str) -> list[Path]:
    removed = [f for f in (build_dir / LOCK_FILE, build_dir / TORCH_LOCK_FILE) if f.exists()]
    for f in removed:
        f.unlink(missing_ok=True)
    print(f"removed a stale build lock ({reason}): {', '.join(display_path(f) for f in removed)}", flush=True)
    return removed


def _remove_stale_torch_lock(build_dir: Path) -> None:
    # Every build goes through our lock, which we hold: a torch lock here was left by a build
    # that was killed, and some torch versions would wait on it forever.
    torch_lock = build_dir / TORCH_LOCK_FILE
    if torch_lock.exists():
        torch_lock.unlink()
        print(f"removed torch's stale build lock {display_path(torch_lock)} (left by a build that was stopped)", flush=True)


def clear_stale_locks(build_root: Path | str | None = None) -> list[Path]:
    """Remove the lock files that builds killed midway left under build_root; return them.
    Locks of builds that are still running are kept."""
    removed: list[Path] = []
    root = build_root_dir(build_root)
    for build_dir in sorted(d for d in root.glob("*") if d.is_dir()):
        holder = _lock_holder(build_dir / LOCK_FILE)
        if holder is not None and _pid_alive(holder):
            continue
        if holder is not None:
            removed += _remove_stale(build_dir, f"process {holder} is no longer running")
        elif (build_dir / TORCH_LOCK_FILE).exists():
            removed += _remove_stale(build_dir, "torch's lock of a build that was stopped")
    return removed


# --- registered operators -----------------------------------------------------------------
#
# A pybind function from load_inline is opaque to PyTorch: torch.compile breaks its graph at
# it, autograd stops there, and nothing knows its output's shape without running it. The
# launchers that solutions/ call are therefore also registered as torch.library operators, in
# one namespace, the way pytorch/extension-cpp does it: a schema, a CUDA implementation (the
# kernel), a CPU implementation (the reference PyTorch math), a fake implementation (shape,
# dtype and device only, for tracing) and an autograd formula. The schema is derived from the
# launcher's C++ prototype, so the .cu file stays the one place the signature is written.

OP_NAMESPACE = "workbook"

_SCHEMA_TYPES = {"torch::Tensor": "Tensor", "at::Tensor": "Tensor", "double": "float", "int64_t": "int", "bool": "bool",
                 "c10::optional<torch::Tensor>": "Tensor?", "std::optional<torch::Tensor>": "Tensor?",
                 "c10::optional<at::Tensor>": "Tensor?", "std::optional<at::Tensor>": "Tensor?"}
_SCHEMA_DEFAULTS = {"c10::nullopt": "None", "std::nullopt": "None", "false": "False", "true": "True"}
_TENSOR_TUPLE = re.compile(r"std::tuple<(?P<items>(?:(?:torch|at)::Tensor, ?)*(?:torch|at)::Tensor)>")
_registered: dict[str, object] = {}  # qualified name -> the op, so a second registration in one process is free
_op_kernels: dict[str, str] = {}  # qualified name -> the kernel file (kernels/<kernel>.cu) its launcher lives in
_libraries: list = []  # torch.library.Library objects must stay alive for their definitions to stay


def op_schema(export: Export) -> str:
    """The torch.library schema of an exported launcher, e.g. "(Tensor x, int num_groups) -> Tensor".
    Tensors, double, int64_t, bool and optional tensors map to Tensor, float, int, bool and Tensor?, with
    the defaults nullopt, false and true written in the prototype; the launcher returns one tensor, or a
    std::tuple of tensors ("-> (Tensor, Tensor)")."""
    prototype = _PROTOTYPE.fullmatch(export.prototype)
    returns = " ".join(prototype.group("type").split())
    if returns in ("torch::Tensor", "at::Tensor"):
        result = "Tensor"
    elif (tuple_ := _TENSOR_TUPLE.fullmatch(returns)) is not None:
        result = f"({', '.join('Tensor' for _ in tuple_.group('items').split(','))})"
    else:
        raise KernelSourceError(f"{export.name}: an operator returns new tensors (a tensor or a std::tuple of "
                                f"tensors); this launcher returns {returns!r}")
    params = []
    for param in parameters(export):
        if param.ctype not in _SCHEMA_TYPES:
            raise KernelSourceError(f"{export.name}: parameter {param.text!r} has a type an operator schema cannot "
                                    f"take (known: {', '.join(_SCHEMA_TYPES)})")
        if param.default and param.default not in _SCHEMA_DEFAULTS:
            raise KernelSourceError(f"{export.name}: parameter {param.text!r} has a default an operator schema "
                                    f"cannot take (known: {', '.join(_SCHEMA_DEFAULTS)})")
        params.append(f"{_SCHEMA_TYPES[param.ctype]} {param.name}"
                      + (f"={_SCHEMA_DEFAULTS[param.default]}" if param.default else ""))
    return f"({', '.join(params)}) -> {result}"


@dataclass(frozen=True)
class Backward:
    """What an op's backward formula gets besides the op's arguments: the gradients of its outputs
    (`grad`, the first), the outputs the op keeps for the backward (`saved`, by keep_outputs), and
    which arguments need a gradient (`needs`, one bool per argument, as ctx.needs_input_grad)."""
    grads: tuple
    saved: tuple
    needs: tuple

    @property
    def grad(self):
        return self.grads[0]


REGISTER_CUDA = "workbook_register_cuda"  # the bindings' function that registers a launcher as an op's CUDA kernel


def _op_ready(export: Export) -> bool:
    """Whether the launcher can be an op's C++ kernel: its prototype maps to a schema (op_schema) and
    takes every argument by value or const reference (a mutable reference would be a different schema)."""
    try:
        op_schema(export)
    except KernelSourceError:
        return False
    params = _PROTOTYPE.fullmatch(export.prototype).group("params")
    return all("*" not in p and ("&" not in p or "const " in p) for p in params.split(","))


def registration_source(exports) -> str:
    """The C++ that makes a build's launchers the CUDA kernels of their ops, appended to the bindings
    file: workbook_register_cuda(namespace, name) registers the launcher `name` with PyTorch's
    dispatcher (TORCH_LIBRARY_IMPL's API, called at run time rather than at load). register_op calls
    it on the op's first CUDA call; nothing else does, so a build loaded for its launchers alone (a
    notebook's, a variant with other flags) registers nothing. Empty when no launcher can be an op."""
    ready = [e.name for e in exports if _op_ready(e)]
    if not ready:
        return ""
    cases = "\n".join(f'  {"else " if i else ""}if (name == "{n}") library->impl("{n}", TORCH_FN({n}));'
                      for i, n in enumerate(ready))
    return f"""
#include <torch/library.h>
void {REGISTER_CUDA}(const std::string& ns, const std::string& name) {{
  static std::vector<std::unique_ptr<torch::Library>> kept;  // a registration lasts while its Library does
  auto library = std::make_unique<torch::Library>(torch::Library::IMPL, ns, c10::DispatchKey::CUDA, __FILE__, __LINE__);
{cases}
  else TORCH_CHECK(false, "no launcher ", name, " to register as an op's CUDA kernel");
  kept.push_back(std::move(library));
}}
"""


def registers_ops(source: str) -> bool:
    """Whether a kernel file's launchers are operators' kernels (register_op): its line `// @ops`. Only such a
    file's bindings carry registration_source, since <torch/library.h> and the dispatcher's wrappers take a
    third of the bindings' compile time (3 of 11.5 s on one core), which every other build (the rungs, the
    probes, the exercises, a chapter's variants) would pay for nothing."""
    return _OPS_MARK.search(source) is not None


def _registration_binding(p: BuildPlan) -> dict[str, str]:
    registers = f"void {REGISTER_CUDA}(" in p.cpp_source
    return {REGISTER_CUDA: "register a launcher as the CUDA kernel of the op of its name"} if registers else {}


def register_op(kernel: str, name: str, *, reference, fake, backward=None, keep_outputs: tuple = (),
                elsewhere=None, namespace: str = OP_NAMESPACE):
    """Register the launcher `name` of kernels/<kernel>.cu as the operator `namespace::name`; return it.

    reference(*args): the same computation in PyTorch ops; the CPU implementation, so a module
        holding the op moves between devices like any nn.Module.
    fake(*args): an empty output of the right shape, dtype and device (and the argument checks
        that can be made without data), for torch.compile's tracing.
    backward(bw, *args): the gradients of the tensor arguments, in their order (None where there is
        none), from bw (Backward: the outputs' gradients, the kept outputs, which are needed); None:
        the op has no autograd formula (a backward op itself).
    keep_outputs: the indices of outputs the backward reads (bw.saved); an op returning several
        tensors differentiates its first only, the others are marked non-differentiable.
    elsewhere(*args): the CUDA implementation on a GPU the kernel file cannot be built for (its
        `// @arch` names another family: wgmma kernels on an sm_80); by default `reference`.

    The CUDA kernel is the launcher itself, registered in C++ (registration_source), so that a call
    reaches it without passing through Python. The kernel file is compiled on the op's first CUDA
    call: until then a Python stand-in is registered, which builds and loads it, registers the
    launcher in its place and runs it. On a GPU the file cannot be built for, the stand-in stays and
    runs `elsewhere`. Whatever the CUDA path must decide (which GEMM on which GPU,
    whether the fused kernel applies) the launcher decides, in C++.
    """
    import torch

    qualname = f"{namespace}::{name}"
    if qualname in _registered:
        return _registered[qualname]
    source = kernel_source(name=kernel)
    if not registers_ops(source):
        raise KernelSourceError(f"kernels/{kernel}.cu has no line `// @ops`: add one (after its header comment) so "
                                "that its bindings can register its launchers as operators' kernels")
    (export,) = [e for e in exported_functions(source) if e.name == name] or [None]
    if export is None:
        raise KernelSourceError(f"kernels/{kernel}.cu exports no launcher {name!r} to register")
    if not _op_ready(export):
        raise KernelSourceError(f"{name}: an op's launcher takes its arguments by value or const reference")
    schema = op_schema(export)
    library = torch.library.Library(namespace, "FRAGMENT")
    library.define(f"{name}{schema}")
    _libraries.append(library)

    op = getattr(getattr(torch.ops, namespace), name)
    # The dispatcher hands a Python implementation its arguments without the trailing ones that equal
    # their defaults; every part here gets them all, as the launcher needs them.
    defaults = [a.default_value for a in op.default._schema.arguments]

    def whole(args: tuple) -> tuple:
        return (*args, *defaults[len(args):])

    torch.library.impl(qualname, "CUDA", _cuda_stand_in(kernel, name, namespace, elsewhere or reference, whole),
                       lib=library)
    torch.library.impl(qualname, "CPU", lambda *args: reference(*whole(args)), lib=library)
    torch.library.register_fake(qualname, lambda *args: fake(*whole(args)), lib=library)
    if backward is not None:
        _register_autograd(qualname, schema, backward, keep_outputs, library, whole)
    _registered[qualname] = op
    _op_kernels[qualname] = kernel
    return op


def _cuda_stand_in(kernel: str, name: str, namespace: str, elsewhere, whole):
    """The op's CUDA implementation until its first call: where the kernel file builds for this GPU,
    it builds and loads it, registers the launcher in C++ in its own place (it stays registered
    beneath, inactive) and runs it; elsewhere it stays, and runs `elsewhere` on every call."""
    def call(*args):
        if not _builds_here_once(kernel):
            return elsewhere(*whole(args))
        launch = launcher(kernel, name)  # builds the kernel file if need be
        with warnings.catch_warnings():  # PyTorch may warn that a kernel is overridden: that is the point
            warnings.filterwarnings("ignore", message=".*[Oo]verrid")
            getattr(load_kernel(kernel), REGISTER_CUDA)(namespace, name)
        return launch(*whole(args))
    return call


def _register_autograd(qualname: str, schema: str, backward, keep_outputs: tuple, library, whole) -> None:
    import torch

    is_tensor = [t.strip().startswith("Tensor") for t in schema[1:schema.index(")")].split(",")]

    def setup_context(ctx, inputs, output):
        inputs = whole(tuple(inputs))
        outputs = output if isinstance(output, tuple) else (output,)
        ctx.mark_non_differentiable(*outputs[1:])
        ctx.save_for_backward(*(a for a, t in zip(inputs, is_tensor) if t), *(outputs[i] for i in keep_outputs))
        ctx.others = [None if t else a for a, t in zip(inputs, is_tensor)]

    def autograd_backward(ctx, *grads):
        saved = iter(ctx.saved_tensors)
        args = [next(saved) if t else a for a, t in zip(ctx.others, is_tensor)]
        bw = Backward(grads, tuple(saved), tuple(ctx.needs_input_grad))
        results = iter(backward(bw, *args))
        return tuple(next(results) if t else None for t in is_tensor)

    torch.library.register_autograd(qualname, autograd_backward, setup_context=setup_context, lib=library)


@functools.cache
def _builds_here_once(kernel: str) -> bool:
    return builds_here(kernel)


@functools.cache
def launcher(kernel: str, name: str):
    """The bound launcher behind an op, loaded on its first call and kept: load_kernel re-reads and
    hashes the kernel's sources to find its build (about 2 ms of CPU), which on every call of an op
    would cost more than the whole tail kernel takes on the GPU."""
    return getattr(load_kernel(kernel), name)


def is_registered(qualname: str) -> bool:
    """Whether register_op has registered the op `namespace::name` in this process."""
    return qualname in _op_kernels


def registered_ops() -> list[str]:
    """The qualified names of the ops register_op has registered in this process, sorted."""
    return sorted(_op_kernels)


def op_kernel(qualname: str) -> str:
    """The kernel file whose launcher the registered op `namespace::name` is ("groupnorm" for kernels/groupnorm.cu)."""
    if qualname not in _op_kernels:
        raise KeyError(f"no registered op {qualname!r}; registered: {sorted(_op_kernels)}")
    return _op_kernels[qualname]


def main(argv: Sequence[str] | None = None) -> int:
    """python -m utils.build: every kernel file, built side by side; --variants FILE: the Variants listed there
    instead (a JSON list of [name, extra_cuda_cflags, kernels_dir or null]), as the test session's background
    prebuild hands them over (tests/conftest.py)."""
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="python -m utils.build", description=main.__doc__.splitlines()[0])
    ap.add_argument("--variants", type=Path, help="build these instead of every kernel file")
    ap.add_argument("--jobs", type=int, default=None, help="builds at once (default: one per core)")
    args = ap.parse_args(argv)
    items = every_kernel_file() if args.variants is None else [
        Variant(name, tuple(flags), None if folder is None else Path(folder))
        for name, flags, folder in json.loads(args.variants.read_text())]
    failures = load_kernels(items, jobs=args.jobs, build_only=True, on_error="return")
    for item, error in failures.items():
        print(f"prebuild: {item} did not build ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})")
    return 1 if failures else 0


if __name__ == "__main__":
    import sys
    sys.exit(main())
