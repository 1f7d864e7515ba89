"""A solution as one self-contained KernelBench file: `python -m utils.export solutions/<file>.py`.

(Over 600 lines: one job, with KernelBench's static checker re-implemented beside it so that every
export is checked by the rules it will be judged by, and the evaluation KernelBench runs.)

    python -m utils.export solutions/p094_gemm_biasadd_hardtanh_mish_groupnorm.py      # -> build/export/<same name>
    python -m utils.export solutions/p075_gemm_groupnorm_min_biasadd.py -o /tmp/75_new.py

KernelBench evaluates a file that defines `ModelNew` (next to `get_inputs` and
`get_init_inputs`) against its own reference file, and compiles the file's kernels with
`load_inline`. A solution of this workbook imports its reference Model from utils/kernelbench/
and its kernels from utils/ops.py; the export writes, in this order:

- a docstring of what the file needs: an sm_90 GPU (the kernels are built for sm_90a), CUDA
  tensors, float32, forward only, the inputs the fused kernel takes (its launcher's checks, which
  a test reads in the kernel), the toolkit and ninja, the cold build time;
- the reference module less its Model: its imports, sizes, get_inputs and get_init_inputs,
  verbatim (KernelBench checks ModelNew against the Model of its own file);
- a few lines of plain Python that find the CUDA toolkit as utils.toolchain does and give it to
  torch before it builds, or raise an error that says why they cannot (`CUDA_TOOLKIT_TEXT`);
- for each kernel file the solution's ops live in: its source with every `#include "..."` of
  kernels/ inlined (each header once), compiled by one `load_inline`; then a namespace `ops` in
  which `ops.<name>` calls the launcher <name> through a function that takes what the workbook's
  ops.<name> takes (OpCall). Where that is the registered op itself, the function has the
  launcher's parameter names and C++ defaults, so the solution's forward calls it by position or
  by name. Where it is a whole model (a utils.ops.WholeModel: `(x, weight, linear_bias, *tail,
  weight_residual=None)`, the op's first output), the function takes the tail's arguments by
  position and weight_residual by name, and returns the launcher's
  `(..., weight_residual, False)[0]`: forward only, so the GEMM's output is never kept;
- `ModelNew`, a plain nn.Module: the reference Model's `__init__` (its docstring dropped, its
  `super(Model, self).__init__()` made `super().__init__()`), so the parameters have the
  reference's names, shapes and creation order and the same seed gives the same weights; then
  the solution's ModelNew body less its docstring and `allow_torch_ops` (a note to the workbook's
  harness about a cuBLAS path the exported launcher does not have). Of the solution's bases, only
  Model is kept (as its constructor) and utils.freezing's Freezable is left out (DROPPED_BASES): the
  export has no freezing, and a class attribute `weight_residual = None` stands in for it, so the
  forward that hands the op `weight_residual=self.weight_residual` runs unchanged and the weight's
  small parts are made on every call.

Nothing else of this repository is imported, and no file is read at run time. The exported
ModelNew runs on CUDA only (KernelBench's setting) and forward only: the CPU path, autograd,
torch.compile support and fallbacks of the registered ops stay in the workbook. What the export
cannot carry over as the workbook runs it is refused with an ExportError that names it: a
ModelNew with bases besides Model and Freezable, or an __init__ of its own; code that uses
anything of utils/ besides `ops`, or the reference Model, or super(), or what Freezable gives
besides weight_residual (freeze(), unfreeze(), frozen); an `ops.<name>` that utils/ops.py defines
as a Python function around the op other than a WholeModel of it (the export would skip what it
does), or a WholeModel whose call or launcher no longer looks as the export's function expects; a
call whose arguments do not fit what ops.<name> takes.

`static_check(text)` applies KernelBench's static checker (src/kernelbench/kernel_static_checker.py,
`validate_kernel_static(code, backend="cuda", precision="fp32")`) rule by rule, re-implemented
here: the strict rules (errors) and the warnings, each finding naming its rule and the line. Every
export is held to no finding at all (tests/test_export.py); the command line prints any.

`kernelbench_eval(path, problem)` runs an exported file as KernelBench's eval does: the reference
Model (from utils.kernelbench, the problem's, or the one the file's name says, as KernelBench takes
it from its own file) and the file's ModelNew built under one seed, 5 seeded correctness trials at
atol = rtol = 1e-4, then timed trials, each with events around one call and a synchronize after it.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import keyword
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import inspect

import torch

from utils import REPO, bench, bindings_header, build, ops, toolchain
from utils.problems import all_problems, get_problem

EXPORT_DIR = REPO / "build" / "export"
_LOCAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"(?P<file>[^"]+)"[^\n]*$', re.MULTILINE)
_PRAGMA_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once[ \t]*$\n?", re.MULTILINE)
_HARNESS_ONLY = ("allow_torch_ops",)  # ModelNew attributes that speak to the workbook's harness, not to KernelBench


class ExportError(ValueError):
    """A solution this exporter cannot turn into one file, and why."""


# The headers a float32 drop-in's export takes in place of others: the 16-bit writers and the mixed-input GEMM hold
# conversions to a narrower type, which KernelBench's static rules refuse in a float32 solution (the stand-ins
# build no 16-bit kernel).
FLOAT32_ONLY = {"common/gemm_wgmma_writers16.cuh": "common/gemm_wgmma_float32_only.cuh",
                "common/gemm_mixed_input.cuh": "common/gemm_mixed_input_float32_only.cuh"}


def inline_source(path: Path, kernels_dir: Path = build.KERNELS_DIR, _seen: set[Path] | None = None,
                  substitute: dict[str, str] | None = None) -> str:
    """A kernel file's text with each `#include "..."` it reaches replaced by that header's text, once;
    substitute: {header: the header inlined in its place}.

    Headers are looked up as the build does (the including file's folder, then kernels/); system
    includes (<...>) stay as they are."""
    seen = set() if _seen is None else _seen
    path = Path(path).resolve()
    substitute = substitute or {}

    def replace(match: re.Match) -> str:
        for base in (path.parent, *build.include_dirs(kernels_dir)):
            header = (base / substitute.get(match.group("file"), match.group("file"))).resolve()
            if header.is_file():
                if header in seen:
                    return f"// (inlined above: {match.group('file')})"
                seen.add(header)
                body = _PRAGMA_ONCE.sub("", inline_source(header, kernels_dir, seen, substitute))
                return f"// ---- inlined: {match.group('file')} ----\n{body.rstrip()}\n// ---- end of {match.group('file')} ----"
        raise ExportError(f"{build.display_path(path)}: #include \"{match.group('file')}\" is not in kernels/")

    return _LOCAL_INCLUDE.sub(replace, path.read_text())


# --- reading a solution -----------------------------------------------------------------------

@dataclass(frozen=True)
class Solution:
    path: Path
    source: str
    tree: ast.Module
    reference_module: str  # "utils.kernelbench.p094_..."
    ops_name: str  # the name utils.ops is bound to in the solution ("ops")
    ops_used: tuple[str, ...]  # the names called as ops.<name>

    @property
    def kernels(self) -> dict[str, list[str]]:
        """kernel file -> the op names of it that the solution calls, in first-use order."""
        found: dict[str, list[str]] = {}
        for name in self.ops_used:
            found.setdefault(build.op_kernel(f"{build.OP_NAMESPACE}::{name}"), []).append(name)
        return found

    @property
    def model_new(self) -> ast.ClassDef:
        return next(n for n in self.tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")


def _is_repo_import(node: ast.stmt) -> bool:
    return (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "utils") or (
        isinstance(node, ast.Import) and any(a.name.split(".")[0] == "utils" for a in node.names))


def _ops_binding(tree: ast.Module) -> str | None:
    """The name `utils.ops` is bound to by `from utils import ops [as name]` or `import utils.ops as name`."""
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "utils":
            for alias in node.names:
                if alias.name == "ops":
                    return alias.asname or "ops"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "utils.ops" and alias.asname:
                    return alias.asname
    return None


def read_solution(path: Path | str) -> Solution:
    """Parse a solution file and check it has what an export needs."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no solution file {path}; the solutions are {sorted(p.name for p in (REPO / 'solutions').glob('p*.py'))}")
    source = path.read_text()
    tree = ast.parse(source, str(path))
    reference = [n.module for n in tree.body if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("utils.kernelbench.")]
    if len(reference) != 1:
        raise ExportError(f"{path.name}: a solution imports its reference Model from exactly one utils.kernelbench module")
    defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    if "ModelNew" not in defined:
        raise ExportError(f"{path.name} defines no class ModelNew")
    ops_name = _ops_binding(tree) or "ops"
    used = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == ops_name:
            if node.attr not in used:
                used.append(node.attr)
    unknown = [n for n in used if not build.is_registered(f"{build.OP_NAMESPACE}::{n}")]
    if unknown:
        raise ExportError(f"{path.name} calls ops.{', ops.'.join(unknown)}, which utils/ops.py does not register")
    return Solution(path, source, tree, reference[0], ops_name, tuple(used))


# --- the launchers behind the ops -------------------------------------------------------------

def _split_top_level(text: str) -> list[str]:
    """`a, std::tuple<b, c>, d` -> ["a", "std::tuple<b, c>", "d"]: commas outside <>, () and []."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


@dataclass(frozen=True)
class LauncherSignature:
    params: list[str]  # the parameter names, in order
    defaults: dict[str, str]  # parameter -> its C++ default as Python text ("None", "False", "0.5")
    returns: int  # tensors returned: 1, or a std::tuple's count


_CPP_DEFAULTS = {"c10::nullopt": "None", "std::nullopt": "None", "nullopt": "None", "true": "True", "false": "False"}


def launcher_signature(export: build.Export) -> LauncherSignature:
    """The parameters, their defaults and the returned tensors of a kernel's exported launcher, from its prototype."""
    match = re.fullmatch(rf"(?P<returns>.*?)\b{re.escape(export.name)} ?\((?P<params>.*)\)", export.prototype)
    if match is None:
        raise ExportError(f"cannot read the launcher prototype {export.prototype!r}")
    params, defaults = [], {}
    for param in _split_top_level(match.group("params")):
        declaration, _, default = (part.strip() for part in param.partition("="))
        name = re.split(r"[\s*&]+", declaration)[-1]
        params.append(name)
        if default:
            number = re.fullmatch(r"-?\d+(?:\.\d*)?(?:e-?\d+)?", default.rstrip("fFlL"))
            if default not in _CPP_DEFAULTS and number is None:
                raise ExportError(f"{export.prototype}: the default {default!r} of {name} has no Python spelling here")
            defaults[name] = _CPP_DEFAULTS.get(default) or number.group(0)
    returns = " ".join(match.group("returns").split())
    tuple_ = re.fullmatch(r"std::tuple<(?P<items>.*)>", returns)
    return LauncherSignature(params, defaults, len(_split_top_level(tuple_.group("items"))) if tuple_ else 1)


# utils.ops.WholeModel.__call__, which the export's function of a whole model mirrors: it returns
# self.op(x, weight, linear_bias, *rest, weight_residual, save)[0]. A change to it shows here as a
# refusal instead of an export that calls the launcher another way.
WHOLE_MODEL_CALL = "(x, weight, linear_bias, *rest, weight_residual=None)"


@dataclass(frozen=True)
class OpCall:
    """What the solution's ops.<name> takes, and how the export's function of that name calls the launcher.

    A registered op (torch.ops.workbook.<name>) takes the launcher's parameters, by position or by
    name, with its defaults, and returns what the launcher returns. A utils.ops.WholeModel takes the
    launcher's parameters but its last two, by position, and weight_residual by name, and returns the
    op's first output; its function calls the launcher with (..., weight_residual, False)[0]: the
    export is forward only, so the GEMM's output is never kept (save_gemm_output=False)."""
    name: str
    launcher: build.Export
    params: tuple[str, ...]  # the launcher's parameters the call passes, in order
    defaults: dict[str, str]  # of those, the ones with a default -> it, as Python text
    by_name: bool  # whether params may be passed by name as well as by position
    keywords: tuple[str, ...] = ()  # keyword-only parameters (default None), the launcher's next arguments
    fixed: tuple[str, ...] = ()  # the launcher's last arguments, as Python text
    item: str = ""  # what is taken of the launcher's result ("[0]"), or "" for all of it

    @property
    def takes(self) -> str:
        """What the call is checked against, in an error message."""
        if self.by_name:
            return f"its launcher {self.launcher.prototype}"
        return (f"ops.{self.name} (a utils.ops.WholeModel: {', '.join(self.params)} by position, "
                f"{', '.join(self.keywords)} by name)")


def _op_call(sol: Solution, name: str, launcher: build.Export) -> OpCall:
    """How the solution's ops.<name> reaches the launcher <name>, or an ExportError where the export cannot
    say: what the solution calls is the registered op itself or a utils.ops.WholeModel of it (not another
    Python function around it, whose extra work the export would not do), and it takes the launcher's
    arguments and returns what the launcher returns."""
    signature = launcher_signature(launcher)
    op = getattr(getattr(torch.ops, build.OP_NAMESPACE), name)
    called = getattr(ops, name, None)
    whole_model = isinstance(called, ops.WholeModel)
    if not (called is op or (whole_model and called.op is op)):
        raise ExportError(
            f"{sol.path.name}: ops.{name} is {type(called).__name__} {getattr(called, '__qualname__', '')}".rstrip()
            + f" of utils/ops.py, a Python wrapper around the op {build.OP_NAMESPACE}::{name}, not the op itself or "
            f"a utils.ops.WholeModel of it. The export maps ops.{name} to the launcher {launcher.prototype}, so it "
            "would not do what the wrapper does around it (its own arguments, its choice of outputs); call the op "
            "as the launcher takes it, or teach utils/export.py the wrapper")
    schema = op.default._schema
    if len(schema.arguments) != len(signature.params) or len(schema.returns) != signature.returns:
        raise ExportError(
            f"{sol.path.name}: ops.{name} takes {len(schema.arguments)} arguments and returns {len(schema.returns)} "
            f"tensor(s), but its launcher {launcher.prototype} takes {len(signature.params)} and returns "
            f"{signature.returns}; the export calls the launcher")
    if any(keyword.iskeyword(p) for p in signature.params):
        raise ExportError(f"{launcher.prototype}: a parameter named after a Python keyword cannot be "
                          "passed by name; rename it in the kernel")
    if not whole_model:
        return OpCall(name, launcher, tuple(signature.params), signature.defaults, by_name=True)
    call = str(inspect.signature(called.__call__))
    last = [signature.defaults.get(p) for p in signature.params[-2:]]
    if call != WHOLE_MODEL_CALL or last != ["None", "False"] or signature.returns != 2:
        raise ExportError(
            f"{sol.path.name}: ops.{name} is a utils.ops.WholeModel{call} around the launcher {launcher.prototype}; "
            f"the export's function of a whole model mirrors WholeModel{WHOLE_MODEL_CALL} around a launcher that "
            "ends (..., w_residual = None, save_gemm_output = false) and returns (out, saved): teach utils/export.py "
            "what changed")
    params = tuple(signature.params[:-2])
    return OpCall(name, launcher, params, {p: d for p, d in signature.defaults.items() if p in params},
                  by_name=False, keywords=("weight_residual",), fixed=("False",), item="[0]")


def _check_ops_calls(sol: Solution, calls: dict[str, OpCall]) -> None:
    """Each ops.<name>(...) of the solution passes what ops.<name> takes (OpCall): every parameter
    without a default once, by position, or by name where the op takes names."""
    for node in ast.walk(sol.tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == sol.ops_name):
            continue
        call, where = calls[node.func.attr], f"{sol.path.name}:{node.lineno}: ops.{node.func.attr}"
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            continue  # *args or **kwargs: counted at run time
        by_name = [k.arg for k in node.keywords]
        named = [*(call.params[len(node.args):] if call.by_name else ()), *call.keywords]
        unknown = [k for k in by_name if k not in named]
        if unknown:
            raise ExportError(f"{where} is called with {', '.join(k + '=' for k in unknown)}, which {call.takes} "
                              f"does not take after {len(node.args)} positional arguments")
        given = set(call.params[:len(node.args)]) | set(by_name)
        missing = [p for p in call.params if p not in given and p not in call.defaults]
        if len(node.args) > len(call.params) or missing:
            raise ExportError(f"{where} is called with {len(node.args)} arguments by position and {len(by_name)} "
                              f"by name; {call.takes} takes {len(call.params)}"
                              + ("" if call.by_name else " by position")
                              + (f" ({', '.join(missing)} missing)" if missing else ""))


def _wrapped(first: str, args: list[str], last: str, indent: str = "") -> str:
    """`first` + args joined by commas + `last`, its lines cut at 119 characters after a comma."""
    return textwrap.fill(first + ", ".join(args) + last, 119, initial_indent=indent,
                         subsequent_indent=" " * (len(indent) + len(first)), break_long_words=False,
                         break_on_hyphens=False)


def _ops_text(sol: Solution, calls: dict[str, OpCall], modules: dict[str, str]) -> str:
    """The namespace the solution's forward calls: ops.<name> calls the launcher <name> through a function
    that takes what the workbook's ops.<name> takes (OpCall; load_inline binds the launcher without its
    parameter names and defaults)."""
    functions, entries = [], []
    for name, call in calls.items():
        params = [f"{p}={call.defaults[p]}" if p in call.defaults else p for p in call.params]
        params += ["*", *(f"{k}=None" for k in call.keywords)] if call.keywords else []
        note = ("# the whole model's output alone, forward only: the GEMM's output is never kept "
                "(save_gemm_output=False)\n" if call.item else "")
        functions.append(note + _wrapped(f"def _{name}(", params, "):") + "\n"
                         + _wrapped(f"{modules[name]}.{name}(", [*call.params, *call.keywords, *call.fixed],
                                    f"){call.item}", "    return ") + "\n")
        entries.append(f"{name}=_{name}")
    return (f"# ---- the launchers behind {sol.ops_name}.<name>: each function takes what the workbook's "
            f"{sol.ops_name}.<name> takes ----\n"
            + "\n\n".join(functions) + f"\n\n{sol.ops_name} = SimpleNamespace({', '.join(entries)})\n")


def _module_text(kernel: str) -> tuple[str, str, list[build.Export], str | None, list[str]]:
    """(cuda source, C++ declarations, launchers, the arch it needs, extra nvcc flags) of one kernel file, inlined."""
    path = build.kernel_path(kernel)
    source = path.read_text()
    exports = build.exported_functions(source, build.display_path(path))
    arch = build.required_arch(source, build.display_path(path))
    flags = ["-O3"] + ([build.gencode_flag(arch)] if arch else [])
    return (inline_source(path, substitute=FLOAT32_ONLY), "\n".join(f"{e.prototype};" for e in exports), exports, arch,
            flags)


# --- what the export needs, in its docstring --------------------------------------------------

FUSED_KERNEL = "fused_gemm_groupnorm"


def fused_conditions() -> tuple[int, int, tuple[int, ...]]:
    """(the multiple K must be for float32 x, for 16-bit x, the group widths) as
    kernels/fused_gemm_groupnorm.cu's launcher checks them, read from its source: the one place they are
    written."""
    source = build.kernel_source(FUSED_KERNEL)
    k32 = re.findall(r"kKMultipleFloat32 = (\d+);", source)
    k16 = re.findall(r"kKMultiple16 = (\d+);", source)
    widths = re.findall(r"kGroupWidths\[\] = \{([\d, ]+)\}", source)
    if len(k32) != 1 or len(k16) != 1 or len(widths) != 1:
        raise ExportError(f"kernels/{FUSED_KERNEL}.cu no longer states its conditions as this exporter reads them "
                          "(`kKMultipleFloat32 = N;`, `kKMultiple16 = N;`, `kGroupWidths[] = {...}`): "
                          "update utils/export.py")
    return int(k32[0]), int(k16[0]), tuple(int(w) for w in widths[0].split(","))
COLD_BUILD = ("a minute or two on 2 CPU cores (47 s measured on an idle one); later imports load torch's cached "
              "build")


def _problem(sol: Solution):
    """The workbook's Problem whose reference the solution imports, or None."""
    return {p.slug: p for p in all_problems()}.get(sol.reference_module.rsplit(".", 1)[-1])


def _docstring(sol: Solution, kernels: dict[str, list[str]], archs: dict[str, str | None]) -> str:
    """The exported file's docstring: what it is and what it needs, read from the kernels and the problem."""
    problem = _problem(sol)
    needs = []
    arch_codes = sorted({toolchain.arch_code(a) for a in archs.values() if a})
    if arch_codes:
        needs.append(f"an NVIDIA GPU of compute capability 9.0 (H100, H200): the kernels are built for "
                     f"{', '.join('sm_' + c for c in arch_codes)} (wgmma) and run on no other GPU;")
    needs += ["CUDA tensors: this ModelNew has no CPU path;",
              "float32 input and parameters: the launchers refuse other dtypes;",
              "forward only: the launchers are called directly, so nothing is recorded for autograd;"]
    if FUSED_KERNEL in kernels:
        k32, _, group_widths = fused_conditions()
        widths = f"{', '.join(map(str, group_widths[:-1]))} or {group_widths[-1]}"
        sizes = ""
        if problem is not None:
            d = problem.dims("full")
            sizes = (f" This file's sizes have K = {d.in_features} and groups of {d.channels_per_group} channels "
                     f"({d.out_features} in {d.groups} groups).")
        needs.append(f"inputs the fused kernel takes: x (N, K) with K % {k32} == 0, out_features "
                     f"divisible by num_groups, groups of {widths} channels.{sizes} Other inputs raise an error "
                     "that names the condition; there is no fallback in this file;")
    needs.append("a CUDA toolkit (nvcc and libcudart) of torch's CUDA major version, found by the lines after "
                 "the sizes below, and ninja on PATH: the first import compiles the kernels, a cold build taking "
                 f"{COLD_BUILD}.")
    title = f"KernelBench level 2, {problem.kernelbench_file}: ModelNew" if problem is not None else "ModelNew"
    launchers = ", ".join(n for names in kernels.values() for n in names)
    files = ", ".join(f"kernels/{k}.cu" for k in kernels)
    paragraphs = [
        f"{title} from the workbook's solutions/{sol.path.name}, exported by `python -m utils.export` as one "
        "self-contained file.",
        "ModelNew keeps the reference Model's parameters (names, shapes, creation order); its forward calls "
        f"{launchers} ({files}), compiled from the text below by load_inline.",
        "It needs:\n" + "\n".join(textwrap.fill(n, 99, initial_indent="- ", subsequent_indent="  ") for n in needs),
    ]
    if FUSED_KERNEL in kernels:
        paragraphs.append("Precision follows PyTorch's fp32 matmul setting, read on every call: at the default "
                          "(IEEE fp32) the GEMM is 3xTF32 with promoted accumulation, as accurate as fp32, the small "
                          "parts of x and of the weight made on every call (nothing derived from a parameter is "
                          "kept between calls, so every write to one is seen); with TF32 allowed it is 1xTF32.")
    text = "\n\n".join(p if p.startswith("It needs") else textwrap.fill(p, 99) for p in paragraphs)
    return '"""' + text.replace('"""', "'''") + '\n"""\n'


# --- the CUDA toolkit, as utils.toolchain finds it ---------------------------------------------

# Run by the exported file before load_inline: plain Python (os, shutil, pathlib), nothing that
# KernelBench's static rules object to. It tries what utils.toolchain.find_cuda_home tries, in the
# same order, except `nvcc -dryrun` (which would need a subprocess) and the conda environment of an
# unactivated Python; where those alone would find the toolkit, the error below says to set CUDA_HOME.
CUDA_TOOLKIT_TEXT = '''\
# ---- the CUDA toolkit, found as the workbook's loader finds it (utils/toolchain.py) ----
# torch guesses CUDA_HOME as the folder above the `nvcc` on PATH. Where that nvcc is a wrapper
# script (/usr/local/bin/nvcc), the guess is /usr/local and the link fails: "cannot find -lcudart".
# So take the first of $CUDA_HOME, $CUDA_PATH, the active conda environment, the folder above
# nvcc's real path and the usual places that holds bin/nvcc, cuda_runtime.h and libcudart (conda-forge
# keeps the last two under targets/<platform>/), and give it to torch before it builds.
def _find_cuda_home(usual=FALLBACKS):
    nvcc = shutil.which("nvcc")
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), os.environ.get("CONDA_PREFIX")]
    candidates += [str(Path(os.path.realpath(nvcc)).parent.parent) if nvcc else None, *usual]
    for home in [Path(c) for c in candidates if c]:
        cudart = [*home.glob("lib64/libcudart.so*"), *home.glob("lib/libcudart.so*"),
                  *home.glob("targets/*/lib/libcudart.so*")]
        headers = [*home.glob("include/cuda_runtime.h"), *home.glob("targets/*/include/cuda_runtime.h")]
        if (home / "bin" / "nvcc").is_file() and cudart and headers:
            return home.resolve()
    raise RuntimeError(
        f"no CUDA toolkit found: none of {[c for c in candidates if c]} holds bin/nvcc, cuda_runtime.h and "
        "libcudart. "
        "Set CUDA_HOME to the toolkit folder (the one with bin/nvcc and lib64/libcudart.so): where nvcc "
        "on PATH is a wrapper script, run `nvcc -dryrun -c -x cu /dev/null` and take its TOP= line.")


_CUDA_HOME = str(_find_cuda_home())
os.environ["CUDA_HOME"] = _CUDA_HOME  # for what torch starts later
cpp_extension.CUDA_HOME = _CUDA_HOME  # torch read its guess at import; it builds with this one
'''


def cuda_toolkit_text() -> str:
    """CUDA_TOOLKIT_TEXT with utils.toolchain's usual places filled in."""
    return CUDA_TOOLKIT_TEXT.replace("FALLBACKS", repr(tuple(str(p) for p in toolchain.FALLBACK_CUDA_HOMES)))


# load_inline puts <torch/extension.h> above the bindings it generates and <torch/types.h> above the kernels,
# unless told not to (`no_implicit_headers`, in newer torch versions). Where it can be told, the exported file
# does what utils.build does: the kernels bring their own light includes (common/check.cuh) and the bindings
# start with the light prelude, which compiles in half the time (experiments/build_time/README.md). An older torch
# takes the default headers; the kernels compile under them too.
LIGHT_HEADERS_TEXT = f'''\
# ---- the headers load_inline adds, left out where this torch can be told (utils/build.py does the same) ----
_LIGHT = "no_implicit_headers" in inspect.signature(load_inline).parameters
_BINDINGS_PRELUDE = {bindings_header.PRELUDE!r} if _LIGHT else ""
_HEADERS = {{"no_implicit_headers": True}} if _LIGHT else {{}}
'''


# --- the parts of the export ------------------------------------------------------------------

def _lines(source: str, first: int, last: int) -> list[str]:
    """Lines first..last (1-based, inclusive) of source."""
    return source.splitlines()[first - 1:last]


def _first_line(node: ast.stmt) -> int:
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])


def _reindent(lines: list[str], col: int, indent: str = "    ") -> list[str]:
    return [indent + line[col:] if line[:col].strip() == "" and line.strip() else line.rstrip() for line in lines]


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _is_super_init(node: ast.stmt) -> bool:
    call = node.value if isinstance(node, ast.Expr) else None
    return (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "__init__"
            and isinstance(call.func.value, ast.Call) and isinstance(call.func.value.func, ast.Name)
            and call.func.value.func.id == "super")


def _reference_parts(reference_path: Path) -> tuple[list[str], str, list[str]]:
    """(import lines, everything else but the Model class verbatim, Model.__init__ as ModelNew's)."""
    source = reference_path.read_text()
    tree = ast.parse(source, str(reference_path))
    model = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"]
    if len(model) != 1:
        raise ExportError(f"{build.display_path(reference_path)} defines no class Model")
    init = [n for n in model[0].body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
    if len(init) != 1:
        raise ExportError(f"{build.display_path(reference_path)}: Model has no __init__ to give ModelNew")
    init = init[0]
    imports, left_out = [], set()  # import lines; the 1-based lines of the rest left out: imports, Model
    for node in tree.body:
        lines = range(_first_line(node), node.end_lineno + 1)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports += _lines(source, lines.start, lines.stop - 1)
        if isinstance(node, (ast.Import, ast.ImportFrom)) or node is model[0]:
            left_out.update(lines)
    rest = "\n".join(line for i, line in enumerate(source.splitlines(), 1)
                     if i not in left_out and not line.startswith("# KernelBench level 2"))
    body: list[str] = []
    for node in init.body:
        if _is_docstring(node) and node is init.body[0]:
            continue
        lines = _lines(source, _first_line(node), node.end_lineno)
        if _is_super_init(node):
            call = node.value
            args = ", ".join(ast.get_source_segment(source, a) for a in [*call.args, *call.keywords])
            lines = [" " * node.col_offset + f"super().__init__({args})"]
        body += _reindent(lines, init.body[0].col_offset, "        ")
    if init.body[0].lineno == init.lineno:
        raise ExportError(f"{build.display_path(reference_path)}: Model.__init__'s body starts on its def line")
    head = _reindent(_lines(source, init.lineno, init.body[0].lineno - 1), init.col_offset)
    head = [line for line in head if line.strip()]
    return imports, re.sub(r"\n{3,}", "\n\n\n", rest).strip(), head + body


def _top_level_names(tree: ast.Module) -> set[str]:
    """The names a module's top level binds: imports, assignments, functions and classes."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)}
    return names


def _names_loaded(nodes: list[ast.AST]) -> set[str]:
    return {n.id for root in nodes for n in ast.walk(root) if isinstance(n, ast.Name)}


# The one base of a solution's ModelNew besides Model that the export leaves out (named as the
# solution imports it), and the class attribute that stands in for it: Freezable's freeze() keeps the
# GEMM weight's small parts between calls and hands them to the op as self.weight_residual, None
# unless frozen. The export has no freezing, so its ModelNew's weight_residual is always None and the
# solution's forward runs unchanged. Anything else Freezable gives (freeze(), unfreeze(), frozen) is
# refused where the kept code uses it.
DROPPED_BASES = {
    "utils.freezing.Freezable": (
        "weight_residual = None  # the export never keeps the weight's small parts: they are made on every call"),
}


def _qualified_name(node: ast.expr, tree: ast.Module) -> str | None:
    """`Freezable` or `freezing.Freezable` as the module's imports bind it ("utils.freezing.Freezable"); None
    where the module binds the name itself or no import does."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.insert(0, node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id in _top_level_names(
            ast.Module([n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))], [])):
        return None
    for imp in tree.body:
        for alias in getattr(imp, "names", []) if isinstance(imp, (ast.Import, ast.ImportFrom)) else []:
            bound = alias.asname or alias.name.split(".")[0]
            if bound != node.id:
                continue
            if isinstance(imp, ast.ImportFrom) and imp.module and not imp.level:
                return ".".join([imp.module, alias.name, *attrs])
            if isinstance(imp, ast.Import):
                return ".".join([alias.name if alias.asname else node.id, *attrs])
    return None


def _dropped_bases(sol: Solution) -> list[str]:
    """The bases of the solution's ModelNew that the export leaves out (DROPPED_BASES), in order; an
    ExportError where its bases are anything but those and Model."""
    model_new = sol.model_new
    bases = [ast.get_source_segment(sol.source, b) for b in [*model_new.bases, *model_new.keywords]]
    qualified = [_qualified_name(b, sol.tree) for b in model_new.bases]
    dropped = [q for q in qualified if q in DROPPED_BASES]
    kept = [b for b, q in zip(bases, qualified) if q not in DROPPED_BASES] + bases[len(qualified):]  # keywords too
    if kept != ["Model"]:
        raise ExportError(f"{sol.path.name}:{model_new.lineno}: ModelNew's bases are {', '.join(bases) or 'none'}; the "
                          "export gives ModelNew the reference Model's constructor and nn.Module alone, so a solution "
                          "inherits Model and nothing else but " + ", ".join(DROPPED_BASES)
                          + " (what another base adds would be missing)")
    return dropped


def _solution_parts(sol: Solution, reference_names: set[str]) -> tuple[str, str, list[str]]:
    """(the solution's own top-level code besides ModelNew, ModelNew's body less what the export replaces,
    the class attributes that stand in for the bases it leaves out)."""
    model_new = sol.model_new
    dropped = _dropped_bases(sol)
    own_init = [n for n in model_new.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
    if own_init:
        raise ExportError(f"{sol.path.name}:{own_init[0].lineno}: ModelNew defines __init__; the export gives ModelNew "
                          "the reference Model's constructor, so a solution keeps it (inherits it) unchanged")
    drop: set[int] = set()  # 1-based line numbers of the solution's top level left out
    kept: list[ast.stmt] = []
    for node in sol.tree.body:
        if _is_repo_import(node) or (node is sol.tree.body[0] and _is_docstring(node)) or node is model_new:
            drop.update(range(_first_line(node), node.end_lineno + 1))
        else:
            kept.append(node)
    drop_in_class: set[int] = set()  # and of ModelNew's body
    body_kept: list[ast.stmt] = []
    for node in model_new.body:
        targets = [t for t in getattr(node, "targets", [getattr(node, "target", None)]) if t is not None]
        harness_only = any(isinstance(t, ast.Name) and t.id in _HARNESS_ONLY for t in targets)
        if (node is model_new.body[0] and _is_docstring(node)) or harness_only:
            drop_in_class.update(range(_first_line(node), node.end_lineno + 1))
        else:
            body_kept.append(node)
    # what the kept code may not use: names from utils/ other than ops, the reference Model, super()
    repo_names = {(a.asname or a.name).split(".")[0] for n in sol.tree.body if _is_repo_import(n) for a in n.names}
    missing = sorted((_names_loaded(kept + body_kept) & (repo_names - {sol.ops_name} - reference_names)) | (
        _names_loaded(kept + body_kept) & {"Model", "super"}))
    if missing:
        raise ExportError(
            f"{sol.path.name}: ModelNew or its module uses {', '.join(missing)}; the export has none of utils/ but the "
            "ops' launchers, and its ModelNew is a plain nn.Module (no reference Model, no super() beyond __init__). "
            "Inline what it needs into the solution, or leave it out of the path the export takes")
    stand_ins = [DROPPED_BASES[base] for base in dropped]
    for base, stand_in in zip(dropped, stand_ins):
        module, _, name = base.rpartition(".")
        given = {n for n in vars(getattr(importlib.import_module(module), name)) if not n.startswith("__")}
        lost = sorted({n.attr for root in kept + body_kept for n in ast.walk(root) if isinstance(n, ast.Attribute)
                       and isinstance(n.value, ast.Name) and n.value.id == "self" and n.attr in given}
                      - _top_level_names(ast.parse(stand_in)))
        if lost:
            raise ExportError(
                f"{sol.path.name}: ModelNew uses self.{', self.'.join(lost)}, which {base} gives; the export leaves "
                f"that base out and gives ModelNew `{stand_in.split('  #')[0]}` instead, so only that stays")
    source_lines = sol.source.splitlines()
    top = "\n".join(line for i, line in enumerate(source_lines, 1) if i not in drop)
    class_lines = ""
    if body_kept:
        first = min(_first_line(n) for n in body_kept)
        kept_lines = [line for i, line in enumerate(source_lines[first - 1:model_new.end_lineno], first)
                      if i not in drop_in_class]
        class_lines = "\n".join(_reindent(kept_lines, body_kept[0].col_offset))
        class_lines = re.sub(r"\n{2,}(?=\n)", "\n", class_lines).strip("\n")  # one blank line at most
    return re.sub(r"\n{3,}", "\n\n\n", top).strip(), class_lines, stand_ins


def export_text(path: Path | str) -> str:
    """The self-contained KernelBench file for the solution at `path`."""
    sol = read_solution(path)
    reference_path = REPO / (sol.reference_module.replace(".", "/") + ".py")
    imports, reference_rest, init_lines = _reference_parts(reference_path)
    reference_names = _top_level_names(ast.parse(reference_path.read_text())) - {"Model"}
    if "nn" not in reference_names:
        raise ExportError(f"{build.display_path(reference_path)} does not import torch.nn as nn, "
                          "which ModelNew's base needs")
    solution_top, class_body, stand_ins = _solution_parts(sol, reference_names)

    kernels = sol.kernels
    modules, archs, launchers = [], {}, {}
    for i, kernel in enumerate(kernels):
        cuda, cpp, exports, archs[kernel], flags = _module_text(kernel)
        if "'''" in cuda or cuda.rstrip().endswith("\\"):
            raise ExportError(f"kernels/{kernel}.cu cannot be quoted as a raw string literal")
        by_name = {e.name: e for e in exports}
        absent = [n for n in kernels[kernel] if n not in by_name]
        if absent:
            raise ExportError(f"{sol.path.name} calls ops.{', ops.'.join(absent)}, but kernels/{kernel}.cu exports no "
                              "launcher of that name; the export maps ops.<name> to the launcher <name>")
        launchers |= by_name
        name = f"workbook_{kernel}_{hashlib.sha256((cuda + cpp + ' '.join(flags)).encode()).hexdigest()[:12]}"
        modules.append(
            f"# ---- kernels/{kernel}.cu, its headers inlined ----\n"
            f"_CUDA_SOURCE_{i} = r'''\n{cuda.rstrip()}\n'''\n\n"
            f"_kernels_{i} = load_inline(\n"
            f"    name={name!r},  # named after its text: exports of the same kernels share one build\n"
            f"    cpp_sources=[_BINDINGS_PRELUDE + {cpp!r}],\n"
            f"    cuda_sources=[_CUDA_SOURCE_{i}],\n"
            f"    functions={[e.name for e in exports]!r},\n"
            f"    extra_cuda_cflags={flags!r},\n"
            f"    **_HEADERS,\n"
            f")\n")
    calls = {name: _op_call(sol, name, launchers[name]) for name in sol.ops_used}
    _check_ops_calls(sol, calls)

    model_new = (
        "# ---- the model: the reference Model's constructor, the solution's forward ----\n"
        "class ModelNew(nn.Module):\n"
        '    """The reference Model\'s parameters, created as its __init__ creates them; the workbook\'s forward."""\n\n'
        + "".join(f"    {line}\n\n" for line in stand_ins)
        + "\n".join(init_lines) + "\n" + (f"\n{class_body}\n" if class_body else ""))
    parts = [
        _docstring(sol, kernels, archs),
        "import os\nimport shutil\nfrom pathlib import Path\nfrom types import SimpleNamespace\n\n"
        + "\n".join(imports) + "\n"
        + "import inspect\nfrom torch.utils import cpp_extension\nfrom torch.utils.cpp_extension import load_inline\n",
        "# ---- the reference's sizes and inputs, verbatim (KernelBench checks ModelNew against its own Model) ----\n"
        + reference_rest + "\n",
        cuda_toolkit_text(),
        LIGHT_HEADERS_TEXT,
        *modules,
        _ops_text(sol, calls, {op: f"_kernels_{i}" for i, names in enumerate(kernels.values()) for op in names}),
        *(["# ---- the solution's own code ----\n" + solution_top + "\n"] if solution_top else []),
        model_new,
    ]
    return "\n\n".join(p.rstrip() + "\n" for p in parts)


def export(path: Path | str, out: Path | str | None = None) -> Path:
    """Write the export of the solution at `path` to `out` (default build/export/<its name>); return where."""
    text = export_text(path)
    out = Path(out) if out else EXPORT_DIR / Path(path).name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return out


def load_exported(path: Path | str) -> ModuleType:
    """Import an exported file as a module (this compiles its kernels on first use)."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"kernelbench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- KernelBench's static checker, rule by rule -------------------------------------------------
#
# KernelBench (ScalingIntelligence/KernelBench, src/kernelbench/kernel_static_checker.py) screens a
# submitted file with regular expressions before it runs it: validate_kernel_static(code,
# backend="cuda", precision="fp32") returns (valid, errors, warnings). Written again here from its
# source, in this module's terms, so a CPU test can hold every export to it:
#
# - Each line is cut at its first `#` and its first `//` (strings included, as KernelBench does),
#   and the patterns are searched in what is left, across line ends.
# - Strict rules make the file invalid: code_bypass, timing_event_patch, thread_injection,
#   lazy_eval, and for the CUDA backend cuda_impl (its three requirements are three rules here).
# - Warning rules are reported beside a valid file: pytorch_wrap, torch_computation_ops,
#   stream_injection, and precision_downgrade (asked for fp32).
# KernelBench stops at a rule's first match; this reports each line a rule matches.

@dataclass(frozen=True)
class StaticRule:
    name: str  # KernelBench's check ("code_bypass"), with what part of it after a colon where it has several
    strict: bool  # an error (the file is invalid) or a warning
    message: str
    patterns: tuple[str, ...]
    required: bool = False  # the rule fires when none of its patterns occurs, instead of when one does


@dataclass(frozen=True)
class Finding:
    rule: StaticRule
    line: int  # 1-based; 0 for a required pattern missing from the whole file
    text: str  # that line of the file, as written
    match: str  # what matched
    origin: str = ""  # where an export took that line from: "kernels/common/tf32_operands.cuh"

    def __str__(self) -> str:
        kind = "strict" if self.rule.strict else "warning"
        if not self.line:
            return f"{kind} rule {self.rule.name} ({self.rule.message}): nowhere in the file"
        origin = f" (from {self.origin})" if self.origin else ""
        return (f"{kind} rule {self.rule.name} ({self.rule.message}) at line {self.line}{origin}: "
                f"{self.text.strip()[:160]!r}, matched {self.match!r}")


def _words(*names: str) -> str:
    """torch.<name>, for each name, as KernelBench matches them: followed by `(`, white space or the end."""
    return r"\b(?:" + "|".join(re.escape(f"torch.{n}") for n in names) + r")(?=\s*\(|\s|$)"


_COMPUTATION_OPS = (
    "mm bmm matmul einsum "  # products
    "conv1d conv2d conv3d conv conv_transpose1d conv_transpose2d conv_transpose3d "  # convolutions
    "avg_pool1d avg_pool2d avg_pool3d max_pool1d max_pool2d max_pool3d adaptive_avg_pool1d adaptive_avg_pool2d "
    "adaptive_avg_pool3d adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d "  # pooling
    "relu hardtanh elu selu leaky_relu gelu softsign softplus softmax log_softmax tanh sigmoid hardsigmoid silu "
    "mish "  # activations
    "batch_norm group_norm layer_norm instance_norm rms_norm normalize "  # normalisations
    "linear cross_entropy kl_div mse_loss huber_loss triplet_margin_loss cosine_similarity "  # linear, losses
    "logsumexp clamp dropout"  # the rest
).split()

STATIC_RULES: tuple[StaticRule, ...] = (
    StaticRule("code_bypass", True, "a try/except fallback", (r"\btry\s*:", r"\bexcept\s*:", r"\bexcept\s+\w+")),
    StaticRule("code_bypass", True, "the word pass (an inherited forward)", (r"\bpass\b",)),
    StaticRule("timing_event_patch", True, "a timing function reassigned", (
        r"torch\.cuda\.Event\.(?:record|elapsed_time)\s*=", r"torch\.cuda\.synchronize\s*=", r"torch\.cuda\.Event\s*=",
        r"time\.(?:perf_counter|time)\s*=")),
    StaticRule("thread_injection", True, "threads or processes", (
        r"threading\.Thread\s*\(", r"import\s+threading", r"from\s+threading\s+import",
        r"multiprocessing\.(?:Process|Pool|Manager|Queue|Pipe)", r"import\s+multiprocessing", r"concurrent\.futures",
        r"ThreadPoolExecutor", r"ProcessPoolExecutor")),
    StaticRule("lazy_eval", True, "a tensor subclass or hand-made tensor", (
        r"_make_subclass", r"class\s+\w+.*\(torch\.Tensor\)", r"class\s+\w+.*\(Tensor\)", r"torch\.Tensor\.__new__")),
    StaticRule("cuda_impl: __global__", True, "no __global__ kernel", ("__global__",), required=True),
    StaticRule("cuda_impl: compiled inline", True, "neither load_inline nor cpp_extension",
               ("load_inline", "cpp_extension"), required=True),
    StaticRule("cuda_impl: kernel features", True,
               "no thread index, __syncthreads, __shared__, __device__ or atomics", (
        r"\bthreadIdx\.", r"\bblockIdx\.", r"\bblockDim\.", r"\bgridDim\.", r"__syncthreads\s*\(", r"__shared__\s+",
        r"__device__\s+", r"atomic(?:Add|Max|Min)\s*\("), required=True),
    StaticRule("pytorch_wrap", False, "a torch.nn compute layer (containers, Parameter and init are allowed)", (
        r"torch\.nn\.(?!(?:Module|parameter|Parameter|ParameterList|ParameterDict|ModuleList|ModuleDict|init)\b)",)),
    StaticRule("torch_computation_ops", False, "a torch computation op", (
        _words(*_COMPUTATION_OPS), r"torch\.nn\.functional\.\w+", r"\bnn\.functional\.\w+",
        r"\bF\.(?:conv|linear|relu|gelu|softmax|batch_norm|layer_norm|dropout|max_pool|avg_pool)")),
    StaticRule("stream_injection", False, "CUDA streams or stream synchronisation", (
        r"torch\.cuda\.Stream\s*\(", r"cuda\.Stream\s*\(", r"with\s+torch\.cuda\.stream", r"\.wait_stream\s*\(",
        r"\.record_stream\s*\(")),
    StaticRule("precision_downgrade", False, "float32 turned into float16", (
        r"__float2half(?:_rn)?\s*\(", r"\(\s*__half\s*\)\s*[\w\->\.]+", r"static_cast\s*<\s*(?:__half|half)\s*>\s*\(",
        r"tl\.astype\s*\(\s*[^,]+,\s*tl\.float16\s*\)", r"NumericConverter\s*<\s*half_t\s*,\s*float\s*>",
        r"LinearCombination\s*<\s*half_t", r"type_convert\s*<\s*half_t\s*>\s*\(", r"tk::half\s*\(", r"\.half\s*\(",
        r"\.float16\s*\(", r"\.to\s*\(\s*torch\.(?:float16|half)\b",
        r"\.to\s*\(\s*dtype\s*=\s*torch\.(?:float16|half)\b")),
)


def without_comments(text: str) -> str:
    """Each line cut at its first `#` and its first `//`, as KernelBench reads a file."""
    return "\n".join(re.split(r"#|//", line, maxsplit=1)[0] for line in text.split("\n"))


def _origins(lines: list[str]) -> list[str]:
    """For each line of an export, the file of kernels/ it was inlined from ("" for the export's own lines)."""
    origins, stack = [], []
    for line in lines:
        if (start := re.match(r"# ---- (kernels/\S+\.cu), its headers inlined ----", line)) is not None:
            stack = [start.group(1)]
        elif (header := re.match(r"// ---- inlined: (\S+) ----", line)) is not None:
            stack.append(f"kernels/{header.group(1)}")
        elif stack and line == "'" * 3:
            stack = []  # the end of the kernel's text
        origins.append(stack[-1] if stack else "")
        if re.match(r"// ---- end of \S+ ----", line) and len(stack) > 1:
            stack.pop()
    return origins


def static_check(text: str) -> list[Finding]:
    """Every finding of KernelBench's static rules in a file's text (cuda backend, fp32), strict ones first."""
    code = without_comments(text)
    lines = text.split("\n")
    origins = _origins(lines)
    findings = []
    for rule in sorted(STATIC_RULES, key=lambda r: not r.strict):
        matches = [m for p in rule.patterns for m in re.finditer(p, code)]
        if rule.required:
            if not matches:
                findings.append(Finding(rule, 0, "", ""))
            continue
        seen = set()  # one finding per line and rule, however many of its patterns match there
        for m in sorted(matches, key=lambda m: m.start()):
            line = code.count("\n", 0, m.start()) + 1
            if line not in seen:
                seen.add(line)
                findings.append(Finding(rule, line, lines[line - 1], m.group(0), origins[line - 1]))
    return findings


# --- KernelBench's evaluation -----------------------------------------------------------------

KERNELBENCH_TOLERANCE = 1e-4  # atol = rtol, KernelBench's fp32 setting


def _seed(seed: int) -> None:
    torch.manual_seed(seed)
    torch.cuda.manual_seed(seed)


def _reference_of(path: Path, problem) -> ModuleType:
    """The reference module an export is evaluated against: the problem's (by id, or by the export's
    file name, which is its solution's), as KernelBench takes Model from its own file."""
    if problem is not None:
        return get_problem(problem).module
    by_slug = {p.slug: p for p in all_problems()}
    if Path(path).stem not in by_slug:
        raise ValueError(f"{path}: name the problem (kernelbench_eval(path, 94)); the file name is no solution's")
    return by_slug[Path(path).stem].module


def kernelbench_eval(path: Path | str, problem=None, *, trials: int = 5, timing_trials: int = 100,
                     seed: int = 42, tol: float = KERNELBENCH_TOLERANCE) -> dict:
    """Evaluate an exported file the way KernelBench does, on the current CUDA device.

    Model (from utils.kernelbench: the problem's, by id, or the one the file name says) and the
    file's ModelNew are built from get_init_inputs() under the same seed; `trials` inputs from
    get_inputs(), each under its own seed, must agree at atol = rtol = tol; then `timing_trials`
    calls of each are timed one by one: the L2 cleared, an event before and after the call, a
    synchronize. Returns {"correct", "trials": [max abs diff...], "ms_ref", "ms_new", "speedup"}
    (medians)."""
    reference = _reference_of(Path(path), problem)
    exported = load_exported(path)
    device = torch.device("cuda")
    init = reference.get_init_inputs()
    _seed(seed)
    model = reference.Model(*init).to(device)
    _seed(seed)
    model_new = exported.ModelNew(*init).to(device)
    diffs, correct = [], True
    trial_seeds = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _ in range(trials):
            _seed(int(torch.randint(0, 2**31 - 1, (1,), generator=trial_seeds)))
            inputs = [t.to(device) for t in reference.get_inputs()]
            out, out_new = model(*inputs), model_new(*inputs)
            ok = out.shape == out_new.shape and torch.allclose(out, out_new, atol=tol, rtol=tol)
            diffs.append(float((out - out_new).abs().max()) if out.shape == out_new.shape else float("inf"))
            correct &= bool(ok)
        result = {"correct": correct, "trials": diffs, "tolerance": tol}
        if correct and timing_trials:
            inputs = [t.to(device) for t in reference.get_inputs()]
            ref_t = bench.time_ms(lambda: model(*inputs), reps=timing_trials, warmup=3, sync_each=True)
            new_t = bench.time_ms(lambda: model_new(*inputs), reps=timing_trials, warmup=3, sync_each=True)
            result |= {"ms_ref": ref_t.median, "ms_new": new_t.median, "speedup": ref_t.median / new_t.median}
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m utils.export", description=__doc__.splitlines()[0])
    ap.add_argument("solutions", nargs="+", type=Path, help="solution files, e.g. solutions/p094_*.py")
    ap.add_argument("-o", "--out", type=Path, help="output file (one solution) or folder (several); default build/export/")
    args = ap.parse_args(argv)
    if args.out and len(args.solutions) > 1 and args.out.suffix == ".py":
        ap.error("-o names a file, but several solutions were given: name a folder")
    status = 0
    for sol in args.solutions:
        out = args.out if args.out and args.out.suffix == ".py" else (args.out or EXPORT_DIR) / sol.name
        try:
            written = export(sol, out)
        except (ExportError, FileNotFoundError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        findings = static_check(written.read_text())
        print(f"{sol} -> {written} ({written.stat().st_size / 1024:.0f} KB); KernelBench's static rules: "
              + (f"{len(findings)} finding(s)" if findings else "no finding"))
        for finding in findings:
            print(f"  {finding}", file=sys.stderr)
        status |= any(f.rule.strict for f in findings)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
