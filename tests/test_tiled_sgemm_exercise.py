"""Notebook 03, exercise 1: a shared-memory tiled SGEMM written from scratch in the notebook (MY_TILED_SGEMM).

- Without a GPU: the starter as committed fails the checker's static reading (no shared tiles, no barriers);
  the reference answer (tests/exercise_answers/my_tiled_sgemm.cu, which no chapter renders) passes it; the
  shortcuts that the static reading catches fail it (no shared memory, tiles declared and never read,
  cuBLAS or ATen through a host launcher, the workbook's own rung 7 included).
- compile: the starter and the answer compile with build.load_source, as the notebook's cell does, and the
  kernel is launchable by the name the launch cell calls.
- gpu: the whole checker (the notebook's launch cell, the harness at shapes no tile divides, output poisoned):
  the starter fails, the answer passes, and every shortcut fails, the one right only for multiples of the
  tile included.
"""
import ast
import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from utils import REPO, build, check
from utils.chapters import gemm_exercises as exercises

NB03 = REPO / "notebooks" / "03_tiled_gemm.ipynb"
ANSWERS = Path(__file__).resolve().parent / "exercise_answers"
SHORTCUTS = sorted((ANSWERS / "shortcuts").glob("tiled_*.cu"))
CAUGHT_WITHOUT_A_GPU = {"tiled_naive", "tiled_unused_shared", "tiled_cublas", "tiled_workbook_kernel"}
SCRATCH = build.build_root_dir().parent / "exercise_answers"  # a fixed path, so the builds are cached
FOLDERS = {"starter": build.SCRATCH_DIR}  # the starter where the chapter builds it (tests/scratch_builds.py)


def cells() -> list[str]:
    return ["".join(c["source"]) for c in json.loads(NB03.read_text())["cells"] if c["cell_type"] == "code"]


def starter() -> str:
    """MY_TILED_SGEMM as the notebook commits it."""
    for src in cells():
        for node in ast.parse(src).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "MY_TILED_SGEMM" for t in node.targets):
                return ast.literal_eval(node.value)
    raise AssertionError("no cell of notebook 03 assigns MY_TILED_SGEMM")


def answer() -> str:
    return (ANSWERS / "my_tiled_sgemm.cu").read_text()


def launch_cell() -> str:
    return next(src for src in cells() if "def my_gemm(" in src)


def my_gemm(module):
    """The notebook's launch cell, run with `module` as the reader's build (`mine`)."""
    namespace = {"torch": torch, "mine": module}
    exec(compile(launch_cell(), "notebook 03's launch cell", "exec"), namespace)
    return namespace["my_gemm"]


def load(source: str, variant: str):
    return build.load_source(exercises.TILED_NAME, source, scratch_dir=FOLDERS.get(variant, SCRATCH / variant))


def whole_checker(source: str, variant: str) -> str:
    """What the notebook's check cell prints last: the verdict, from the static reading and the harness."""
    problems = exercises.tiled_static_problems(source)
    report = check.check_fn(my_gemm(load(source, variant)), F.linear, exercises.operands_tiled,
                            name=exercises.TILED_NAME, contiguous_only=True)
    return exercises.tiled_verdict(problems, report)


def test_the_notebook_checks_the_text_it_compiles():
    check_cell = next(src for src in cells() if "build.load_source(" in src)
    assert "exercises.tiled_static_problems(MY_TILED_SGEMM)" in check_cell
    assert 'build.load_source("my_tiled_sgemm", MY_TILED_SGEMM)' in check_cell
    assert "exercises.operands_tiled" in check_cell and "exercises.tiled_verdict(problems, report)" in check_cell
    # the exercise comes before the workbook's own rung 3 is shown
    sources = cells()
    assert sources.index(check_cell) < next(i for i, s in enumerate(sources) if 'show_kernel("gemm_03_smem_tiled"' in s)


def test_the_starter_fails_the_static_checks():
    problems = exercises.tiled_static_problems(starter())
    assert any("__shared__" in p for p in problems) and any("__syncthreads" in p for p in problems)
    assert exercises.tiled_verdict(problems).startswith("Not yet")


def test_the_answer_passes_the_static_checks():
    assert exercises.tiled_static_problems(answer()) == []
    verdict = exercises.tiled_verdict([])
    assert not verdict.startswith(("PASS", "Not yet"))  # without a GPU: the harness is still to come, never PASS


@pytest.mark.parametrize("path", SHORTCUTS, ids=lambda p: p.stem)
def test_the_shortcuts_a_reading_catches_fail_without_a_gpu(path):
    problems = exercises.tiled_static_problems(path.read_text())
    assert bool(problems) == (path.stem in CAUGHT_WITHOUT_A_GPU), problems


def test_the_operands_fit_no_tile():
    x, w = exercises.operands_tiled(torch.Generator().manual_seed(0))
    M, K = x.shape
    N = w.shape[0]
    assert all(d % t and d > t for d in (M, N, K) for t in (8, 16, 32))


@pytest.mark.compile
@pytest.mark.parametrize("variant", ["starter", "answer"])
def test_starter_and_answer_compile_and_launch_by_name(variant):
    module = load(starter() if variant == "starter" else answer(), variant)
    assert "my_tiled_sgemm[grid, block, smem](x, w, out, M, N, K)" in repr(module.my_tiled_sgemm)


@pytest.mark.gpu
def test_the_whole_checker_fails_the_starter_and_passes_the_answer():
    assert whole_checker(starter(), "starter").startswith("Not yet")
    assert whole_checker(answer(), "answer").startswith("PASS")


@pytest.mark.gpu
@pytest.mark.parametrize("path", SHORTCUTS, ids=lambda p: p.stem)
def test_each_shortcut_fails_the_checker_on_a_gpu(path):
    if path.stem in {"tiled_cublas", "tiled_workbook_kernel"}:
        problems = exercises.tiled_static_problems(path.read_text())
        assert exercises.tiled_verdict(problems).startswith("Not yet")  # refused before it is built
        return
    assert whole_checker(path.read_text(), path.stem).startswith("Not yet")


@pytest.mark.gpu
def test_right_only_for_whole_tiles_is_caught_at_shapes_no_tile_divides():
    """The multiples-only shortcut is right where K is a multiple of the tile: only the odd shapes catch it."""
    module = load((ANSWERS / "shortcuts" / "tiled_multiples_only.cu").read_text(), "tiled_multiples_only")
    fn = my_gemm(module)
    x, w = torch.rand(64, 96, device="cuda"), torch.rand(96, 96, device="cuda")
    torch.testing.assert_close(fn(x, w), F.linear(x, w), atol=1e-4, rtol=1e-4)
    assert not check.check_fn(fn, F.linear, exercises.operands_tiled, name="multiples only", contiguous_only=True).ok
