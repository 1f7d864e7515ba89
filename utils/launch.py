"""Kernels a notebook launches itself: `kernel[grid, block, smem](args)` from Python.

A launcher in C++ (`// @export`) hides its grid, block and shared memory from the reader. A
`__global__` kernel marked `// @launch` on the line directly above its definition is instead bound
as it is, and Python chooses the launch configuration, as `<<<grid, block, smem>>>` would:

    // @launch
    __global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ out, float a, int n) {...}

    mod = build.load_kernel("scale")   # or build.load_source("scale", SOURCE) for a notebook cell's text
    grid, block = (triton.cdiv(n, 256),), (256,)
    mod.scale_kernel[grid, block](x, out, 2.0, n)          # shared memory 0
    mod.scale_kernel[grid, block, 48 * 1024](x, out, 2.0, n)

A template kernel names its instance in the mark: `// @launch: <128, true>`. The mark sits where the kernel
is defined, in the built file or in a header it includes (kernels/common/...): a comment, so marking a
production kernel changes none of its code.

Each pointer parameter takes a contiguous CUDA tensor of the pointee's dtype, each integer, float
or bool parameter a Python number; the generated C++ checks every argument (device, dtype,
contiguity, range) with a message naming it, launches on PyTorch's current stream on the tensors'
GPU, raises the dynamic shared-memory limit when `smem` asks for more than 48 KiB, and checks the
launch. No launch happens without those checks: a wrong grid or a CPU tensor is a Python error,
never a crash.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

_LAUNCH = re.compile(r"^[ \t]*//[ \t]*@launch\b(?:[ \t]*:[ \t]*(?P<targs><.*>))?[ \t]*$", re.MULTILINE)
_IDENT_BEFORE_PAREN = re.compile(r"([A-Za-z_]\w*)\s*$")
_QUALIFIERS = re.compile(r"\b(?:const|volatile|__restrict__|__restrict|restrict)\b")

# pointee -> (ATen dtype, the C++ type data_ptr<> takes, reinterpreted to the pointee where they differ)
POINTEES = {
    "float": ("at::kFloat", "float"),
    "double": ("at::kDouble", "double"),
    "int": ("at::kInt", "int"),
    "int32_t": ("at::kInt", "int"),
    "int64_t": ("at::kLong", "int64_t"),
    "long long": ("at::kLong", "int64_t"),
    "uint8_t": ("at::kByte", "uint8_t"),
    "unsigned char": ("at::kByte", "uint8_t"),
    "bool": ("at::kBool", "bool"),
    "__half": ("at::kHalf", "at::Half"),
    "__nv_bfloat16": ("at::kBFloat16", "at::BFloat16"),
}
# scalar -> (what pybind takes, the range check, if any)
SCALARS = {
    "int": ("int64_t", "INT32_MIN", "INT32_MAX"),
    "int32_t": ("int64_t", "INT32_MIN", "INT32_MAX"),
    "unsigned": ("int64_t", "0", "UINT32_MAX"),
    "unsigned int": ("int64_t", "0", "UINT32_MAX"),
    "int64_t": ("int64_t", None, None),
    "long long": ("int64_t", None, None),
    "float": ("double", None, None),
    "double": ("double", None, None),
    "bool": ("bool", None, None),
}


class LaunchSourceError(ValueError):
    """A `// @launch` mark that cannot be bound as written."""


@dataclass(frozen=True)
class KernelParam:
    name: str
    ctype: str  # as written, qualifiers dropped: "float*", "int"
    pointee: str | None  # "float" for a pointer parameter, else None

    @property
    def is_tensor(self) -> bool:
        return self.pointee is not None


@dataclass(frozen=True)
class Launchable:
    name: str  # the __global__ function's name
    template_args: str  # "" or "<128, true>"
    params: tuple[KernelParam, ...]
    line: int

    @property
    def wrapper(self) -> str:
        """The bound C++ function's name (Python sees the kernel's own name through Launcher)."""
        return f"workbook_launch_{self.name}"

    @property
    def signature(self) -> str:
        return f"{self.name}[grid, block, smem]({', '.join(p.name for p in self.params)})"


def launchables(source: str, filename: str = "<kernel source>") -> list[Launchable]:
    """The kernels marked `// @launch` in a kernel's source, in order."""
    return read_marks(source, _LAUNCH, _parse, filename, LaunchSourceError, "marked `// @launch` more than once")


def read_marks(source: str, mark: re.Pattern, parse: Callable, filename: str, error: type, twice_says: str) -> list:
    """parse(source, match, filename) for every match of a mark's pattern, in order; a name marked twice is an error."""
    found = [parse(source, m, filename) for m in mark.finditer(source)]
    names = [item.name for item in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise error(f"{filename}: {', '.join(twice)} {twice_says}")
    return found


def _parse(source: str, mark: re.Match, filename: str) -> Launchable:
    line = source.count("\n", 0, mark.start()) + 1
    where = f"{filename}:{line}"
    rest = source[mark.end():]
    brace = rest.find("{")
    head = " ".join(rest[:brace].split()) if brace >= 0 else ""
    if "__global__" not in head or not head.endswith(")"):
        raise LaunchSourceError(f"{where}: `// @launch` must sit directly above a __global__ kernel's definition, e.g.\n"
                                "    // @launch\n    __global__ void my_kernel(const float* x, float* out, int n) {")
    is_template = head.startswith("template")
    targs = mark.group("targs") or ""
    if is_template and not targs:
        raise LaunchSourceError(f"{where}: a template kernel names the instance to launch in its mark, "
                                "e.g. `// @launch: <128, true>`")
    if targs and not is_template:
        raise LaunchSourceError(f"{where}: `// @launch: {targs}` gives template arguments to a kernel that is no template")
    open_paren = _matching_open(head, where)
    name_match = _IDENT_BEFORE_PAREN.search(head[:open_paren])
    if not name_match:
        raise LaunchSourceError(f"{where}: cannot find the kernel's name before its parameters in {head!r}")
    params = tuple(_param(text, name_match.group(1), where) for text in _split_params(head[open_paren + 1:-1]))
    return Launchable(name_match.group(1), targs, params, line)


def _matching_open(head: str, where: str) -> int:
    depth = 0
    for i in range(len(head) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(head[i], 0)
        if depth == 0:
            return i
    raise LaunchSourceError(f"{where}: unbalanced parentheses in {head!r}")


def _split_params(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts if p.strip() and p.strip() != "void"]


def _param(text: str, kernel: str, where: str) -> KernelParam:
    bare = " ".join(_QUALIFIERS.sub(" ", text).split())
    m = re.fullmatch(r"(?P<type>.+?)\s*(?P<stars>\**)\s*(?P<name>[A-Za-z_]\w*)", bare)
    if not m:
        raise LaunchSourceError(f"{where}: {kernel}: cannot read the parameter {text!r}")
    ctype, stars, name = m.group("type").strip(), m.group("stars"), m.group("name")
    if stars == "*" and ctype in POINTEES:
        return KernelParam(name, f"{ctype}*", ctype)
    if not stars and ctype in SCALARS:
        return KernelParam(name, ctype, None)
    known = ", ".join([f"{t}*" for t in POINTEES] + list(SCALARS))
    raise LaunchSourceError(f"{where}: {kernel}: parameter {text!r} cannot come from Python "
                            f"(a launchable kernel takes {known}); launch it from a C++ launcher (`// @export`) instead")


# --- the generated C++ ------------------------------------------------------------------
#
# Two halves, so that a kernel file of plain kernels never parses PyTorch's headers. nvcc compiles the kernel
# file three times over (its device pass, its host pass, then g++ on the host pass's output), and PyTorch's tensor
# headers cost a small kernel file about 13 of its 15 seconds there (experiments/build_time/README.md):
# - the kernel file gets a launch over raw pointers per marked kernel (`trampolines`): the <<<...>>> itself, no
#   tensor in sight;
# - the bindings file, which g++ compiles once with the precompiled prelude (utils/bindings_header.py), gets the
#   launcher Python calls (`wrappers`): every check over the tensors, the device guard, the stream, then the
#   call of the raw launch and the check of what it returns.

def _raw(k: Launchable) -> str:
    """The raw launch's name and parameters: tensors as untyped pointers, numbers as the kernel takes them."""
    args = ["dim3 grid", "dim3 block", "size_t smem", "cudaStream_t stream"]
    args += [f"void* {p.name}" if p.is_tensor else f"{p.ctype} {p.name}" for p in k.params]
    return f"cudaError_t workbook_raw_launch_{k.name}({', '.join(args)})"


def trampolines(kernels: Sequence[Launchable]) -> str:
    """The C++ appended to the kernel's source: one launch over pointers per marked kernel, which returns the
    launch's error (the CUDA runtime's, so the kernel file needs no header of PyTorch's)."""
    if not kernels:
        return ""
    return "\n// ---- generated by utils/launch.py: the launches of the kernels marked `// @launch` ----\n" + \
        "".join(_trampoline(k) for k in kernels)


def _trampoline(k: Launchable) -> str:
    kernel = f"{k.name}{k.template_args}"
    args = ", ".join(f"static_cast<{p.pointee}*>({p.name})" if p.is_tensor else p.name for p in k.params)
    return f"""
{_raw(k)} {{
  if (smem > 48 * 1024) {{  // above 48 KiB a kernel must be allowed its dynamic shared memory first
    const cudaError_t allowed = cudaFuncSetAttribute(reinterpret_cast<const void*>(&{kernel}),
                                                     cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (allowed != cudaSuccess) return allowed;
  }}
  {kernel}<<<grid, block, smem, stream>>>({args});
  return cudaGetLastError();
}}
"""


def wrappers(kernels: Sequence[Launchable]) -> str:
    """The C++ of the bindings file: one checked launch per marked kernel, over tensors and Python numbers."""
    if not kernels:
        return ""
    return WRAPPER_PRELUDE + "".join(f"{_raw(k)};\n" for k in kernels) + "\n".join(_wrapper(k) for k in kernels)


WRAPPER_PRELUDE = r"""
// ---- generated by utils/launch.py: the launches of the kernels marked `// @launch` ----
#include <climits>
#include <cstdint>
#include <vector>
#include "common/check.cuh"

static dim3 workbook_dim3(const std::vector<int64_t>& dims, const char* kernel, const char* what, int64_t limit_x) {
  TORCH_CHECK(!dims.empty() && dims.size() <= 3, kernel, ": ", what, " has 1 to 3 dimensions, got ", num(dims.size()));
  const int64_t limits[3] = {limit_x, 65535, 65535};
  uint32_t d[3] = {1, 1, 1};
  for (size_t i = 0; i < dims.size(); ++i) {
    TORCH_CHECK(dims[i] >= 1 && dims[i] <= limits[i], kernel, ": ", what, " dimension ", num(i), " must be in 1..",
                num(limits[i]), ", got ", num(dims[i]));
    d[i] = static_cast<uint32_t>(dims[i]);
  }
  return dim3(d[0], d[1], d[2]);
}

// in the kernel file: the launches over pointers (utils/launch.py's trampolines)
"""


def _prototype(k: Launchable) -> str:
    args = ["std::vector<int64_t> grid", "std::vector<int64_t> block", "int64_t smem"]
    args += [f"torch::Tensor {p.name}" if p.is_tensor else f"{SCALARS[p.ctype][0]} {p.name}" for p in k.params]
    return f"void {k.wrapper}({', '.join(args)})"


def _wrapper(k: Launchable) -> str:
    tensors = [p for p in k.params if p.is_tensor]
    checks = []
    for p in tensors:
        dtype, _ = POINTEES[p.pointee]
        checks.append(f'  check_cuda({p.name}, "{k.name}: {p.name}");')
        checks.append(f'  TORCH_CHECK({p.name}.scalar_type() == {dtype}, "{k.name}: {p.name} (a {p.pointee}*) must be a '
                      f'tensor of dtype ", {dtype}, ", got ", {p.name}.scalar_type());')
        checks.append(f'  check_contiguous({p.name}, "{k.name}: {p.name}");')
    for p in tensors[1:]:
        checks.append(f'  check_same_device({tensors[0].name}, "{tensors[0].name}", {p.name}, "{p.name}");')
    for p in k.params:
        if not p.is_tensor and SCALARS[p.ctype][1] is not None:
            _, lo, hi = SCALARS[p.ctype]
            checks.append(f'  TORCH_CHECK({p.name} >= {lo} && {p.name} <= {hi}, "{k.name}: {p.name} (a {p.ctype}) must '
                          f'fit its type, got ", num({p.name}));')
    args = [f"{p.name}.data_ptr()" if p.is_tensor else f"static_cast<{p.ctype}>({p.name})" for p in k.params]
    device = f"{tensors[0].name}.device()" if tensors else "c10::Device(c10::DeviceType::CUDA, c10::cuda::current_device())"
    return f"""
{_prototype(k)} {{
  const dim3 grid_dim = workbook_dim3(grid, "{k.name}", "grid", INT32_MAX);
  const dim3 block_dim = workbook_dim3(block, "{k.name}", "block", 1024);
  TORCH_CHECK(smem >= 0 && smem <= 227 * 1024, "{k.name}: smem (dynamic shared memory, bytes) must be in 0..232448, got ", num(smem));
{chr(10).join(checks)}
  const c10::cuda::CUDAGuard guard({device});
  // the launch (in the kernel file) and its check: a bad configuration fails here, not in some later call
  C10_CUDA_CHECK(workbook_raw_launch_{k.name}(grid_dim, block_dim, static_cast<size_t>(smem),
                                             at::cuda::getCurrentCUDAStream(){"".join(", " + a for a in args)}));
}}
"""


# --- the Python side --------------------------------------------------------------------

class Launcher:
    """`kernel[grid, block]` or `kernel[grid, block, smem]`, then the kernel's arguments: one launch.
    grid and block are an int or a tuple of up to three ints, as in CUDA's <<<grid, block, smem>>>."""

    def __init__(self, bound: Callable, kernel: Launchable):
        self._bound = bound
        self.kernel = kernel
        self.__doc__ = f"launch {kernel.signature}"

    def __getitem__(self, config) -> Callable:
        if not isinstance(config, tuple) or len(config) not in (2, 3):
            raise TypeError(f"launch as {self.kernel.name}[grid, block] or {self.kernel.name}[grid, block, smem_bytes], "
                            f"got {self.kernel.name}[{config!r}]")
        grid, block, smem = (*config, 0) if len(config) == 2 else config
        dims = [_dims(grid, "grid", self.kernel.name), _dims(block, "block", self.kernel.name)]

        def launch(*args):
            if len(args) != len(self.kernel.params):
                raise TypeError(f"{self.kernel.signature} takes {len(self.kernel.params)} arguments, got {len(args)}")
            return self._bound(*dims, int(smem), *args)
        return launch

    def __repr__(self) -> str:
        return f"<launchable kernel {self.kernel.signature}>"


def _dims(value, what: str, kernel: str) -> list[int]:
    dims = [value] if isinstance(value, int) else list(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) for d in dims):
        raise TypeError(f"{kernel}: {what} is an int or a tuple of 1 to 3 ints, got {value!r}")
    return dims


def attach(module, kernels: Sequence[Launchable]) -> None:
    """Put a Launcher for each marked kernel on the built module, under the kernel's own name."""
    for k in kernels:
        setattr(module, k.name, Launcher(getattr(module, k.wrapper), k))
