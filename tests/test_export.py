"""utils.export: each solution as one self-contained KernelBench file.

On the CPU (CI): the exported text imports nothing of this repository and includes no file,
keeps the reference verbatim, and every export builds (load_inline; 94, 37 and 62 share one
build of kernels/groupnorm.cu). On the GPU: each export passes KernelBench's own evaluation,
5 seeded trials at atol = rtol = 1e-4, then timing.
"""
import ast
import os

import pytest
import torch

from utils import REPO, export, toolchain
from utils.problems import all_problems, get_problem

SOLUTIONS = {p.id: REPO / "solutions" / f"{p.slug}.py" for p in all_problems()}
ALLOWED_IMPORTS = {"types", "torch", "torch.nn", "torch.utils.cpp_extension"}


def _imports(text: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module)
    return found


@pytest.mark.parametrize("pid", SOLUTIONS)
def test_the_export_is_self_contained(pid):
    text = export.export_text(SOLUTIONS[pid])
    assert _imports(text) <= ALLOWED_IMPORTS, _imports(text) - ALLOWED_IMPORTS
    assert '#include "' not in text  # every header of kernels/ inlined
    assert "open(" not in text and "Path(" not in text  # reads no file at run time
    top = {n.name for n in ast.parse(text).body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    assert {"Model", "ModelNew", "get_inputs", "get_init_inputs"} <= top
    reference = get_problem(pid).module
    assert (REPO / "utils" / "kernelbench" / f"{get_problem(pid).slug}.py").read_text().split("\n", 1)[1].strip() in text
    # one build: the whole model's kernel file (kernels/fused_gemm_groupnorm.cu)
    assert text.count("load_inline(") == 1 and reference.__name__ not in text


def test_headers_are_inlined_once_each():
    text = export.inline_source(REPO / "kernels" / "groupnorm.cu")
    assert text.count("---- inlined: common/check.cuh ----") == 1
    assert "(inlined above: common/check.cuh)" in text  # groupnorm.cuh includes it again


def test_the_command_line(tmp_path, capsys):
    assert export.main([str(SOLUTIONS[62]), "-o", str(tmp_path / "62.py")]) == 0
    assert (tmp_path / "62.py").is_file() and "62.py" in capsys.readouterr().out
    assert export.main([str(SOLUTIONS[94]), str(SOLUTIONS[75]), "-o", str(tmp_path)]) == 0
    assert (tmp_path / SOLUTIONS[94].name).is_file() and (tmp_path / SOLUTIONS[75].name).is_file()
    assert export.main([str(tmp_path / "nothing.py")]) == 1
    assert "no solution file" in capsys.readouterr().err


def test_a_solution_without_modelnew_or_with_an_unknown_op_is_refused(tmp_path):
    base = SOLUTIONS[62].read_text()
    (tmp_path / "a.py").write_text(base.replace("class ModelNew(", "class Other("))
    with pytest.raises(export.ExportError, match="no class ModelNew"):
        export.read_solution(tmp_path / "a.py")
    (tmp_path / "b.py").write_text(base.replace("ops.linear_group_norm_leaky_relu_x2", "ops.not_an_op"))
    with pytest.raises(export.ExportError, match="ops.not_an_op"):
        export.read_solution(tmp_path / "b.py")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Every solution exported and imported: its kernels built by the export's own load_inline."""
    folder = tmp_path_factory.mktemp("export")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCH_EXTENSIONS_DIR", str(REPO / "build" / "export-cache"))
        if not torch.cuda.is_available():  # load_inline takes the arch from the GPU, or from this
            mp.setenv("TORCH_CUDA_ARCH_LIST", toolchain.DEFAULT_ARCH)
        toolchain.require_compiler()
        toolchain.apply_cuda_home()
        toolchain.apply_ninja_path()
        return {pid: export.load_exported(export.export(path, folder / path.name)) for pid, path in SOLUTIONS.items()}


@pytest.mark.compile
@pytest.mark.parametrize("pid", SOLUTIONS)
def test_every_export_builds(exported, pid):
    module = exported[pid]
    p = get_problem(pid)
    assert module.get_init_inputs() == p.module.get_init_inputs()
    torch.manual_seed(0)
    new = module.ModelNew(*p.init_inputs("small"))
    ref = p.make_model("small", seed=0)
    assert all(torch.equal(a, b) for a, b in zip(ref.state_dict().values(), new.state_dict().values()))
    assert all(callable(op) for op in vars(module.ops).values())


@pytest.mark.gpu
@pytest.mark.large
@pytest.mark.parametrize("pid", SOLUTIONS)
def test_every_export_passes_kernelbenchs_evaluation(exported, pid, tmp_path):
    path = tmp_path / f"{pid}.py"
    export.export(SOLUTIONS[pid], path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCH_EXTENSIONS_DIR", str(REPO / "build" / "export-cache"))
        result = export.kernelbench_eval(path, pid, trials=5, timing_trials=20)
    assert result["correct"], result
    assert len(result["trials"]) == 5 and max(result["trials"]) < 1e-3
    assert result["ms_new"] > 0 and result["speedup"] > 0
