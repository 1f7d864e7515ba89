"""A solution as one self-contained KernelBench file: `python -m utils.export solutions/<file>.py`.

    python -m utils.export solutions/p094_gemm_biasadd_hardtanh_mish_groupnorm.py      # -> build/export/<same name>
    python -m utils.export solutions/p075_gemm_groupnorm_min_biasadd.py -o /tmp/75_new.py

KernelBench evaluates a file that defines `ModelNew` (next to `get_inputs` and
`get_init_inputs`) and compiles its kernels with `load_inline`. A solution of this workbook
imports its reference Model from utils/kernelbench/ and its kernels from utils/ops.py; the
export replaces both imports with what they stand for:

- the reference module's text (Model, the sizes, get_inputs, get_init_inputs), verbatim;
- for each kernel file the solution's ops live in: its source with every `#include "..."` of
  kernels/ inlined (each header once), compiled by one `load_inline` into a module that exposes
  the same launchers under the same names, so `ops.bias_hardtanh_mish_group_norm(...)` in the
  solution's text calls the kernel directly;
- the solution's own text, less those two imports.

Nothing else of this repository is imported, and no file is read at run time. The exported
ModelNew runs on CUDA only (KernelBench's setting): the CPU path, autograd and torch.compile
support of the registered ops stay in the workbook, and so does their fallback: an exported
whole-model solution calls fused_gemm_groupnorm.cu's launcher directly, so it needs an sm_90 GPU
and inputs that kernel takes (the launcher says which condition failed otherwise).

`kernelbench_eval(path)` runs an exported file as KernelBench's eval does: Model and ModelNew
built under one seed, 5 seeded correctness trials at atol = rtol = 1e-4, then timed trials,
each with events around one call and a synchronize after it.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from utils import REPO, build

EXPORT_DIR = REPO / "build" / "export"
_LOCAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"(?P<file>[^"]+)"[^\n]*$', re.MULTILINE)
_PRAGMA_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once[ \t]*$\n?", re.MULTILINE)


class ExportError(ValueError):
    """A solution this exporter cannot turn into one file, and why."""


def inline_source(path: Path, kernels_dir: Path = build.KERNELS_DIR, _seen: set[Path] | None = None) -> str:
    """A kernel file's text with each `#include "..."` it reaches replaced by that header's text, once.

    Headers are looked up as the build does (the including file's folder, then kernels/); system
    includes (<...>) stay as they are."""
    seen = set() if _seen is None else _seen
    path = Path(path).resolve()

    def replace(match: re.Match) -> str:
        for base in (path.parent, *build.include_dirs(kernels_dir)):
            header = (base / match.group("file")).resolve()
            if header.is_file():
                if header in seen:
                    return f"// (inlined above: {match.group('file')})"
                seen.add(header)
                body = _PRAGMA_ONCE.sub("", inline_source(header, kernels_dir, seen))
                return f"// ---- inlined: {match.group('file')} ----\n{body.rstrip()}\n// ---- end of {match.group('file')} ----"
        raise ExportError(f"{build.display_path(path)}: #include \"{match.group('file')}\" is not in kernels/")

    return _LOCAL_INCLUDE.sub(replace, path.read_text())


@dataclass(frozen=True)
class Solution:
    path: Path
    source: str
    tree: ast.Module
    reference_module: str  # "utils.kernelbench.p094_..."
    ops_used: tuple[str, ...]  # the names called as ops.<name>

    @property
    def kernels(self) -> dict[str, list[str]]:
        """kernel file -> the op names of it that the solution calls, in first-use order."""
        found: dict[str, list[str]] = {}
        for name in self.ops_used:
            found.setdefault(build.op_kernel(f"{build.OP_NAMESPACE}::{name}"), []).append(name)
        return found


def read_solution(path: Path | str) -> Solution:
    """Parse a solution file and check it has what an export needs."""
    import utils.ops  # noqa: F401  registers the ops, so build.op_kernel knows their kernel files

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
    used = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ops":
            if node.attr not in used:
                used.append(node.attr)
    unknown = [n for n in used if not build.is_registered(f"{build.OP_NAMESPACE}::{n}")]
    if unknown:
        raise ExportError(f"{path.name} calls ops.{', ops.'.join(unknown)}, which utils/ops.py does not register")
    return Solution(path, source, tree, reference[0], tuple(used))


def _without_repo_imports(sol: Solution) -> str:
    """The solution's text, less its module docstring and its imports from this repository."""
    lines = sol.source.splitlines(keepends=True)
    drop = set()
    for node in sol.tree.body:
        repo_import = (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "utils") or (
            isinstance(node, ast.Import) and any(a.name.split(".")[0] == "utils" for a in node.names))
        docstring = node is sol.tree.body[0] and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if repo_import or docstring:
            drop.update(range(node.lineno - 1, node.end_lineno))
    return "".join(line for i, line in enumerate(lines) if i not in drop).strip() + "\n"


def _module_text(kernel: str) -> tuple[str, str, list[str], list[str]]:
    """(cuda source, C++ declarations, launcher names, extra nvcc flags) of one kernel file, inlined."""
    path = build.kernel_path(kernel)
    source = path.read_text()
    exports = build.exported_functions(source, build.display_path(path))
    arch = build.required_arch(source, build.display_path(path))
    flags = ["-O3"] + ([build.gencode_flag(arch)] if arch else [])
    return inline_source(path), "\n".join(f"{e.prototype};" for e in exports), [e.name for e in exports], flags


def export_text(path: Path | str) -> str:
    """The self-contained KernelBench file for the solution at `path`."""
    sol = read_solution(path)
    reference_path = REPO / (sol.reference_module.replace(".", "/") + ".py")
    reference = reference_path.read_text()
    docstring = ast.get_docstring(sol.tree) or ""
    parts = [
        f'"""{sol.path.stem}, exported by `python -m utils.export` as one self-contained KernelBench file.\n\n'
        + (docstring.replace('"""', "'''") + "\n\n" if docstring else "")
        + "This file needs nothing of the workbook: the kernels are compiled from the text below with\n"
        "load_inline, and the exported ModelNew runs on CUDA only (KernelBench's setting).\n\"\"\"\n",
        "from types import SimpleNamespace\n\nfrom torch.utils.cpp_extension import load_inline\n",
        "# ---- the reference, verbatim: Model, the sizes, get_inputs, get_init_inputs ----\n"
        + "\n".join(line for line in reference.splitlines() if not line.startswith("# KernelBench level 2")).strip() + "\n",
    ]
    modules = []
    for i, kernel in enumerate(sol.kernels):
        cuda, cpp, functions, flags = _module_text(kernel)
        if "'''" in cuda or cuda.rstrip().endswith("\\"):
            raise ExportError(f"kernels/{kernel}.cu cannot be quoted as a raw string literal")
        name = f"workbook_{kernel}_{hashlib.sha256((cuda + cpp + ' '.join(flags)).encode()).hexdigest()[:12]}"
        var = f"_kernels_{i}"
        modules.append((var, sol.kernels[kernel]))
        parts.append(
            f"# ---- kernels/{kernel}.cu, its headers inlined ----\n"
            f"_CUDA_SOURCE_{i} = r'''\n{cuda.rstrip()}\n'''\n\n"
            f"{var} = load_inline(\n"
            f"    name={name!r},  # named after its text: exports of the same kernels share one build\n"
            f"    cpp_sources=[{cpp!r}],\n"
            f"    cuda_sources=[_CUDA_SOURCE_{i}],\n"
            f"    functions={functions!r},\n"
            f"    extra_cuda_cflags={flags!r},\n"
            f")\n")
    entries = ", ".join(f"{op}={var}.{op}" for var, names in modules for op in names)
    parts.append(f"# the launchers the solution calls as ops.<name>\nops = SimpleNamespace({entries})\n")
    parts.append("# ---- the solution ----\n" + _without_repo_imports(sol))
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


# --- KernelBench's evaluation -----------------------------------------------------------------

KERNELBENCH_TOLERANCE = 1e-4  # atol = rtol, KernelBench's fp32 setting


def _seed(seed: int) -> None:
    import torch

    torch.manual_seed(seed)
    torch.cuda.manual_seed(seed)


def kernelbench_eval(path: Path | str, problem=None, *, trials: int = 5, timing_trials: int = 100,
                     seed: int = 42, tol: float = KERNELBENCH_TOLERANCE) -> dict:
    """Evaluate an exported file the way KernelBench does, on the current CUDA device.

    Model (from utils.kernelbench, as KernelBench takes it from its own file) and ModelNew are
    built from get_init_inputs() under the same seed; `trials` inputs from get_inputs(), each
    under its own seed, must agree at atol = rtol = tol; then `timing_trials` calls of each are
    timed one by one: the L2 cleared, an event before and after the call, a synchronize. Returns
    {"correct", "trials": [max abs diff...], "ms_ref", "ms_new", "speedup"} (medians)."""
    import torch

    from utils import bench
    from utils.problems import get_problem

    exported = load_exported(path)
    reference = get_problem(problem).module if problem is not None else exported
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
    for sol in args.solutions:
        out = args.out if args.out and args.out.suffix == ".py" else (args.out or EXPORT_DIR) / sol.name
        try:
            written = export(sol, out)
        except (ExportError, FileNotFoundError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        print(f"{sol} -> {written} ({written.stat().st_size / 1024:.0f} KB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
