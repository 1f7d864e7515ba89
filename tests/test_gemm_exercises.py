"""The GEMM exercises of notebooks 02 and 03 (kernels/exercises/gemm_*.cu) and their checkers.

- The checkers' verdict logic (utils.chapters.gemm_ladder, which the notebooks' exercise cells call),
  run here without a GPU: it says PASS and "Not yet" when it should.
- compile: every exercise kernel compiles as committed; what a checker reads without a GPU
  (the padding exercise's row length, the tile-shape knobs) is what the notebooks say; a tile
  shape the kernel cannot run stops at compile time with its reason.
- The padding checker counts bank conflicts at the width nvcc loads a row of ws with (LDS,
  LDS.64 or LDS.128: the SASS of rows 32-40), so every conflict-free row length passes.
- gpu: each starting point fails its checker the way its notebook says, and a solved copy (the
  starting point with its TODO done, built under build/exercise_solutions/) passes, on the
  notebooks' inputs (exercises.operands_n515, operands_odd).
"""

import pytest
import torch
import torch.nn.functional as F

from utils import REPO, build, check, ladder
from utils.chapters import gemm_addressing as addressing
from utils.chapters import gemm_exercises as exercises

from kernel_tests import fake_report

EXERCISES = build.KERNELS_DIR / "exercises"
SOLVED_DIR = build.build_root_dir().parent / "exercise_solutions"  # a fixed path, so solved builds are cached
KERNELS = ["gemm_seed004", "gemm_warp_per_output", "gemm_tile_shape", "gemm_smem_pad"]

# The TODO of each starting point, and what a solution puts there.
SOLUTIONS = {
    "gemm_seed004": ("  const int n = threadIdx.x;\n  if (n < N) {",
                     "  for (int n = threadIdx.x; n < N; n += blockDim.x) {"),
    "gemm_warp_per_output": ("  // TODO: add the 32 partial sums of the warp (five __shfl_xor_sync, or warp_sum).\n",
                             "  for (int offset = 16; offset > 0; offset /= 2) {\n"
                             "    partial += __shfl_xor_sync(0xffffffffu, partial, offset);\n  }\n"),
    "gemm_smem_pad": ("constexpr int kWsRowFloats = kTile;", "constexpr int kWsRowFloats = kTile + 1;"),
}


def report(*checks: tuple[str, str]) -> check.CheckReport:
    return fake_report("gemm vs linear", *checks)


operands_n515 = exercises.operands_n515  # notebook 02, exercise 1
operands_odd = exercises.operands_odd  # notebook 02, exercise 2; notebook 03, exercise 2


def harness(fn, operands) -> check.CheckReport:
    return check.check_fn(fn, F.linear, operands, name="exercise", contiguous_only=True)


def starting_point(name: str):
    return build.load_kernel(name, kernels_dir=EXERCISES)


def solved(name: str):
    """The exercise with its TODO done, compiled from build/exercise_solutions/<name>.cu."""
    source = (EXERCISES / f"{name}.cu").read_text()
    todo, solution = SOLUTIONS[name]
    assert todo in source, f"the starting point of {name} no longer has its TODO as this test knows it: update SOLUTIONS"
    SOLVED_DIR.mkdir(parents=True, exist_ok=True)
    path = SOLVED_DIR / f"{name}.cu"
    text = source.replace(todo, solution)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return build.load_kernel(name, kernels_dir=SOLVED_DIR)


# --- the verdicts, without a GPU ----------------------------------------------------------

@pytest.mark.parametrize("notebook", ["02_naive_gemm.ipynb", "03_tiled_gemm.ipynb"])
def test_the_verdict_says_pass_or_not_yet_with_hints(notebook):
    # the notebooks' checkers are utils.chapters.gemm_exercises', not cells of their own
    text = (REPO / "notebooks" / notebook).read_text()
    assert "from utils.chapters import gemm_exercises as exercises" in text and "def exercise_verdict(" not in text
    assert "def padding_verdict(" not in text and "def order_verdict(" not in text
    verdict = exercises.exercise_verdict
    assert verdict(report(("trials", "pass"), ("stream", "skip")), {}, "PASS: done.") == "PASS: done."
    text = verdict(report(("trials", "fail"), ("poisoned_output", "fail"), ("stream", "pass")),
                   {"poisoned_output": "columns never written", "stream": "not shown: it passed"})
    assert text.startswith("Not yet: trials, poisoned_output failed.")
    assert "poisoned_output: columns never written" in text and "not shown" not in text


def test_the_padding_verdict_counts_bank_conflicts_at_the_load_width():
    degree, width, passes, verdict = addressing.conflict_degree, addressing.ws_load_floats, addressing.ws_passes, exercises.padding_verdict
    assert [degree([tx * row for tx in range(32)]) for row in range(32, 41)] == [32, 1, 2, 1, 4, 1, 2, 1, 8]  # 4-byte loads
    assert degree([7] * 32) == 1  # one word for every lane: a broadcast
    # nvcc's loads of ws[tx][kk..] (the SASS of rows 32-40 on sm_90): LDS.128 for rows of 4k floats, LDS.64 for 2k,
    # LDS otherwise; a wide load is served in phases of 8 or 16 lanes.
    assert [width(row) for row in range(32, 41)] == [4, 1, 2, 1, 4, 1, 2, 1, 4]
    assert [passes(row) for row in range(32, 41)] == [8, 1, 1, 1, 1, 1, 1, 1, 2]
    assert passes(34, load_floats=1) == 2 and passes(36, load_floats=1) == 4  # what 4-byte loads would take
    assert verdict(32).startswith("Not yet") and "8 passes per kk" in verdict(32)
    assert verdict(40).startswith("Not yet") and "2 passes per kk" in verdict(40)
    assert verdict(34).startswith("PASS") and "LDS.64" in verdict(34) and "skipped" in verdict(34)
    assert verdict(34, load_floats=1).startswith("Not yet")  # if the SASS showed 4-byte loads
    assert verdict(33, report(("trials", "pass"))).startswith("PASS")
    assert verdict(33, report(("trials", "fail"))).startswith("Not yet: trials failed")


# --- they compile, and say without a GPU what the notebooks say ----------------------------

@pytest.mark.compile
@pytest.mark.parametrize("name", KERNELS)
def test_each_exercise_compiles_as_committed(name):
    (export, *_) = build.exported_functions(build.kernel_source(name, EXERCISES))
    assert export.prototype == "torch::Tensor gemm(torch::Tensor x, torch::Tensor w)"
    assert callable(starting_point(name).gemm)


@pytest.mark.compile
def test_host_functions_answer_without_a_gpu():
    row = starting_point("gemm_smem_pad").ws_row_floats()
    assert row == 32 and exercises.padding_verdict(row).startswith("Not yet")
    assert list(starting_point("gemm_tile_shape").tile_shape()) == [128, 128, 8, 8, 8, 256, 2]  # rung 5's shape


@pytest.mark.compile
def test_a_tile_shape_the_kernel_cannot_run_stops_at_compile_time():
    with pytest.raises(build.KernelCompileError, match="48 KB"):
        build.load_kernel("gemm_tile_shape", kernels_dir=EXERCISES, extra_cuda_cflags=["-DTILE_BK=64"])


# --- on a GPU: the starting points fail as intended, the solutions pass --------------------

@pytest.mark.gpu
def test_seed004_leaves_columns_unwritten_until_each_thread_loops():
    verdict = exercises.exercise_verdict
    start = harness(starting_point("gemm_seed004").gemm, operands_n515)
    assert "poisoned_output" in start.failed, str(start)
    assert verdict(start, {}).startswith("Not yet")
    done = harness(solved("gemm_seed004").gemm, operands_n515)
    assert done.ok, str(done)
    assert verdict(done, {}, "PASS").startswith("PASS")


@pytest.mark.gpu
def test_warp_per_output_is_wrong_until_the_warp_adds_its_partial_sums():
    start_kernel = starting_point("gemm_warp_per_output").gemm
    start = harness(start_kernel, operands_odd)
    assert "trials" in start.failed, str(start)
    x, w = ladder.operands(37, 129, 65, seed=3)
    lane0 = F.linear(x[:, ::32].double(), w[:, ::32].double())  # the terms k = 0, 32, 64: lane 0's, as the notebook says
    assert torch.allclose(start_kernel(x, w).double(), lane0, atol=1e-5, rtol=1e-5)
    done = harness(solved("gemm_warp_per_output").gemm, operands_odd)
    assert done.ok, str(done)


@pytest.mark.gpu
def test_smem_pad_is_right_but_conflicted_until_padded():
    verdict = exercises.padding_verdict
    start = starting_point("gemm_smem_pad")
    first = harness(start.gemm, operands_odd)
    assert first.ok, str(first)  # right, only slow: the checker must still say Not yet
    assert verdict(start.ws_row_floats(), first).startswith("Not yet")
    done = solved("gemm_smem_pad")
    second = harness(done.gemm, operands_odd)
    assert done.ws_row_floats() == 33 and second.ok, str(second)
    assert verdict(done.ws_row_floats(), second).startswith("PASS")


@pytest.mark.gpu
@pytest.mark.parametrize("flags", [[], ["-DTILE_BK=16"], ["-DTILE_BK=32"], ["-DTILE_BM=64", "-DTILE_BN=64"]],
                         ids=["rung5", "bk16", "bk32", "tile64"])
def test_every_tile_shape_of_notebook_03_computes_the_gemm(flags):
    gemm = build.load_kernel("gemm_tile_shape", kernels_dir=EXERCISES, extra_cuda_cflags=flags).gemm
    for shape in [(37, 129, 65), (1000, 1000, 1000)]:
        x, w = ladder.operands(*shape, seed=sum(shape))
        ok, detail = ladder.verify(gemm, x, w)
        assert ok, f"{flags} at {shape}: {detail}"
