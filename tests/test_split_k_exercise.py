"""Notebook 11's exercise: split-K's fix-up written from scratch in the notebook (SPLIT_K_SOURCE), out[m, n] =
bias[n] + the sum over s of partials[s, m, n], and its checker (utils/chapters/regime_exercises.py).

- Without a GPU: the starter as committed fails the static reading (an empty body), and the checker refuses it
  before running anything; the reference answer (tests/exercise_answers/split_k_sum.cu, which no chapter renders)
  passes it; of the shortcuts (tests/exercise_answers/shortcuts/split_k_*.cu) the static reading catches those
  that leave a parameter unused (the first slice only never reads S, the one without the bias never reads bias)
  and passes the others. The checker's data tell each shortcut from the answer, its diagnosis names each on
  PyTorch stand-ins, and the whole checker runs on the CPU with NumPy stand-ins (computing outside PyTorch, as a
  kernel does): the answer's arithmetic passes, each shortcut's fails and is named, a launch that lets PyTorch
  compute is refused.
- compile: the starter and the answer compile with build.load_source under the notebook's name (split_k_sum), and
  the module has split_k_sum_kernel to launch; with a GPU, every shortcut too (before the GPU tests run them).
- gpu: the whole checker through the notebook's own launch cell (my_split_k_sum, output poisoned): the starter
  fails, the answer passes, every shortcut fails, the one right only for whole blocks of 256 included.
"""
import re

import pytest
import torch

from kernel_tests import ScratchExercise
from utils import launch
from utils.chapters import regime_exercises as exercises

EXERCISE = ScratchExercise("11_every_batch_size.ipynb", "SPLIT_K_SOURCE", "my_split_k_sum", "split_k_mod", "split_k_sum",
                           "split_k_sum.cu", "split_k_")
NB11, ANSWER, SHORTCUTS, NAME = EXERCISE.notebook, EXERCISE.answer_path, EXERCISE.shortcuts, EXERCISE.name
cells, starter, launch_cell, text, folder, load = (EXERCISE.cells, EXERCISE.starter, EXERCISE.launch_cell,
                                                   EXERCISE.text, EXERCISE.folder, EXERCISE.load)
my_split_k_sum = EXERCISE.launch_fn_for


def answer() -> str:
    return ANSWER.read_text()


# what the compile tests build: the starter and the answer on any machine that compiles, the shortcuts where a GPU
# runs them (as the other chapters' shortcuts: tests/scratch_builds.py), since without one nothing runs them
EVERYWHERE = ("starter", "answer")
SHORTCUT_VARIANTS = tuple(p.stem for p in SHORTCUTS)
VARIANTS = EVERYWHERE + SHORTCUT_VARIANTS

# the shortcuts whose text the static reading refuses, and what it says
CAUGHT_WITHOUT_A_GPU = {"split_k_first_slice": "never uses S", "split_k_no_bias": "never uses bias"}
# what the verdict on a GPU names for the others
NAMED_ON_A_GPU = {
    "split_k_last_slice": "the last slice only",
    "split_k_bias_per_slice": "once per slice",
    "split_k_mean": "the mean over the slices",
    "split_k_multiples_only": "right at the first",
    "split_k_transposed": "read as (S, N, M)",
}


def numpy_stand_in(compute):
    """A launch function that computes outside PyTorch, as a kernel does: `compute` on NumPy views of the inputs,
    written into a fresh torch.empty (the only PyTorch the checker then sees: an allocation)."""
    def fn(partials, bias):
        out = torch.empty(partials.shape[1], partials.shape[2])
        out.numpy()[...] = compute(partials.numpy(), bias.numpy())
        return out
    return fn


def tail_unwritten(compute, block=256):
    """`compute`, but out's elements past the last whole block of `block` are NaN: what the poisoned allocator
    leaves where the last, partial block writes nothing."""
    def partial(p, b):
        out = compute(p, b).copy()
        out.reshape(-1)[out.size // block * block:] = float("nan")
        return out
    return partial


def short(name: str) -> str:
    """A test id: a shortcut's name up to its first colon or comma outside parentheses."""
    return re.split(r":|,(?![^()]*\))", name)[0]


def right(p, b):
    return p.sum(0) + b  # works on tensors and on NumPy arrays alike, as each of SPLIT_K_SHORTCUTS does


def test_the_notebook_checks_the_text_it_compiles():
    """The launch cell builds SPLIT_K_SOURCE under NAME; the check cell reads the same text and runs this checker."""
    assert f'build.load_source("{NAME}", SPLIT_K_SOURCE)' in launch_cell()
    check_cell = next(src for src in cells() if "exercises.split_k_exercise(" in src)
    assert "exercises.split_k_exercise(my_split_k_sum, SPLIT_K_SOURCE)" in check_cell
    assert "exercises.static_verdict(exercises.split_k_static(SPLIT_K_SOURCE))" in check_cell


# --- without a GPU: the starter fails --------------------------------------------------------------------

def test_the_starter_fails_the_static_reading():
    assert exercises.split_k_static(starter()) == [f"{exercises.SPLIT_K_KERNEL} does nothing yet: write its body"]
    assert exercises.static_verdict(exercises.split_k_static(starter())).startswith("Not yet:")


def test_the_checker_refuses_the_starter_before_running_it():
    reports, verdict = exercises.split_k_exercise(lambda *a: pytest.fail("ran the starter"), starter(), device="cpu")
    assert reports == {} and verdict.startswith("Not yet:") and "does nothing yet" in verdict


# --- without a GPU: the answer passes ---------------------------------------------------------------------

def test_the_answer_passes_the_static_reading():
    assert exercises.split_k_static(answer()) == []
    assert "needs a GPU" in exercises.static_verdict([])


def test_the_static_reading_keeps_the_signature_and_the_mark():
    for changed in (answer().replace("int S, int M, int N", "int M, int N, int S"), answer().replace("// @launch\n", "")):
        assert "keep the given signature" in exercises.split_k_static(changed)[0]


def test_the_answers_float32_sum_is_within_the_tier_of_the_reference():
    """The reference is the exact sum rounded once; a float32 sum in slice order (the answer's) differs by rounding
    only, well inside the strict tier that the harness judges by."""
    for S, M, N in exercises.SPLIT_K_SHAPES:
        p, b = exercises.split_k_inputs(S, M, N)(torch.Generator().manual_seed(0))
        in_order = torch.zeros(M, N)
        for s in range(S):
            in_order += p[s]
        ref = exercises.split_k_reference(p, b)
        assert ref.dtype == torch.float32 and ref.shape == (M, N)
        assert (in_order + b - ref).abs().max() < 1e-5


def test_the_whole_checker_passes_the_answers_arithmetic_on_the_cpu():
    reports, verdict = exercises.split_k_exercise(numpy_stand_in(right), answer(), device="cpu")
    assert len(reports) == len(exercises.SPLIT_K_SHAPES) and all(r.ok for r in reports.values()), reports
    assert verdict.startswith("PASS"), verdict


# --- without a GPU: the shortcuts fail --------------------------------------------------------------------

@pytest.mark.parametrize("path", SHORTCUTS, ids=lambda p: p.stem)
def test_each_shortcut_passes_or_fails_the_static_reading_as_it_should(path):
    """split_k_first_slice and split_k_no_bias fail it (a parameter unused); the others pass it, and are the GPU's."""
    EXERCISE.check_static_reading(path, exercises.split_k_static, CAUGHT_WITHOUT_A_GPU, NAMED_ON_A_GPU)


def test_every_shortcut_file_is_expected():
    EXERCISE.check_shortcut_files(CAUGHT_WITHOUT_A_GPU, NAMED_ON_A_GPU)


@pytest.mark.parametrize("shortcut", list(exercises.SPLIT_K_SHORTCUTS), ids=short)
def test_the_checker_data_tell_each_shortcut_from_the_answer(shortcut):
    """At both shapes with S > 1 (and M != N, for the transpose) each shortcut misses the strict tolerance."""
    wrong_at = []
    for S, M, N in exercises.SPLIT_K_SHAPES:
        p, b = exercises.split_k_inputs(S, M, N)(torch.Generator().manual_seed(0))
        out, ref = exercises.SPLIT_K_SHORTCUTS[shortcut](p, b), exercises.split_k_reference(p, b)
        if not torch.allclose(out, ref, atol=1e-4, rtol=1e-4):
            wrong_at.append((S, M, N))
    assert {(3, 7, 1000), (8, 65, 4099)} <= set(wrong_at), (shortcut, wrong_at)


@pytest.mark.parametrize("shortcut", list(exercises.SPLIT_K_SHORTCUTS), ids=short)
def test_the_diagnosis_names_each_shortcut(shortcut):
    fn = exercises.SPLIT_K_SHORTCUTS[shortcut]
    assert exercises.split_k_diagnosis(fn, device="cpu") == f"{shortcut} (at S = 3, M = 7, N = 1000)"


def test_the_diagnosis_names_a_tail_left_unwritten_and_shapes_partly_right():
    tail = numpy_stand_in(tail_unwritten(right))
    text = exercises.split_k_diagnosis(tail, device="cpu")
    assert text.startswith("right at the first 6912 of the 7000 elements") and "(m = 6, n = 912" in text, text
    two_slices = lambda p, b: p[:2].sum(0) + b  # right at S = 1 only
    text = exercises.split_k_diagnosis(two_slices, device="cpu")
    assert text.startswith("right at (S, M, N) = (1, 1, 1) and wrong at (3, 7, 1000), (8, 65, 4099)"), text
    assert exercises.split_k_diagnosis(lambda p, b: torch.zeros(p.shape[1:]), device="cpu") is None


STAND_INS = {**{name: (compute, f"the output is {name} (at S = 3, M = 7, N = 1000)")
                  for name, compute in exercises.SPLIT_K_SHORTCUTS.items()},
             "the tail left unwritten": (tail_unwritten(right), "the output is right at the first 6912 of the 7000")}


@pytest.mark.parametrize("shortcut", list(STAND_INS), ids=short)
def test_the_whole_checker_fails_each_shortcut_on_the_cpu(shortcut):
    compute, named = STAND_INS[shortcut]
    reports, verdict = exercises.split_k_exercise(numpy_stand_in(compute), answer(), device="cpu")
    assert not reports["S=3, M=7, N=1000"].ok and "trials" in reports["S=3, M=7, N=1000"].failed
    assert verdict.startswith("Not yet:") and named in verdict, verdict


def test_the_checker_refuses_a_launch_that_lets_pytorch_compute():
    reports, verdict = exercises.split_k_exercise(exercises.split_k_reference, answer(), device="cpu")
    assert reports == {} and verdict.startswith("Not yet: your function calls PyTorch") and "aten::sum" in verdict


def test_no_chapter_renders_the_answers():
    assert "exercise_answers" not in NB11.read_text()


# --- they compile ------------------------------------------------------------------------------------------

@pytest.mark.compile
@pytest.mark.parametrize("variant", [*EVERYWHERE, *(pytest.param(v, marks=pytest.mark.gpu) for v in SHORTCUT_VARIANTS)])
def test_the_starter_answer_and_shortcuts_compile_as_split_k_sum(variant):
    kernel = getattr(load(variant), exercises.SPLIT_K_KERNEL)
    assert isinstance(kernel, launch.Launcher)  # launched as kernel[grid, block, smem](...)
    assert kernel.kernel.name == exercises.SPLIT_K_KERNEL and len(kernel.kernel.params) == 6


# --- on a GPU: through the notebook's launch cell ------------------------------------------------------------

@pytest.mark.gpu
def test_the_notebook_launch_cell_fails_the_starter():
    reports, verdict = exercises.split_k_exercise(my_split_k_sum(load("starter")), starter())
    assert reports == {} and verdict.startswith("Not yet:") and "does nothing yet" in verdict, verdict


@pytest.mark.gpu
def test_the_notebook_launch_cell_passes_the_answer():
    reports, verdict = exercises.split_k_exercise(my_split_k_sum(load("answer")), answer())
    assert all(r.ok for r in reports.values()) and verdict.startswith("PASS"), (verdict, *map(str, reports.values()))


@pytest.mark.gpu
@pytest.mark.parametrize("path", SHORTCUTS, ids=lambda p: p.stem)
def test_the_notebook_launch_cell_fails_each_shortcut(path):
    EXERCISE.check_launch_cell_fails(path, exercises.split_k_exercise, CAUGHT_WITHOUT_A_GPU, NAMED_ON_A_GPU)


@pytest.mark.gpu
def test_right_only_for_whole_blocks_is_caught_at_shapes_no_block_divides():
    """The multiples-only shortcut is right where M * N is a multiple of 256: only the checker's shapes catch it."""
    fn, ok = my_split_k_sum(load("split_k_multiples_only")), my_split_k_sum(load("answer"))
    p, b = (t.cuda() for t in exercises.split_k_inputs(4, 8, 96)(torch.Generator().manual_seed(0)))
    torch.testing.assert_close(fn(p, b), ok(p, b), atol=0, rtol=0)
    assert all(M * N % 256 for _, M, N in exercises.SPLIT_K_SHAPES)
