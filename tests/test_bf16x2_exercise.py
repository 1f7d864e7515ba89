"""Notebook 12's exercise: float32 to bf16 by hand, two values packed in one 32-bit word (BF16X2_SOURCE), and its
checker (utils/chapters/half16_exercises.py).

- Without a GPU: the starter as committed fails the static reading (an empty body), and the checker refuses it
  before running anything; the reference answer (tests/exercise_answers/to_bf16x2.cu, which no chapter renders)
  passes it; the intrinsic shortcut fails it; the others pass it. The checker's data tell each shortcut from the
  answer and its diagnosis names each, on NumPy stand-ins (computing outside PyTorch, as a kernel does); a launch
  that lets PyTorch round is refused.
- compile: the starter and the answer compile with build.load_source under the notebook's name (to_bf16x2), and the
  module has to_bf16x2_kernel to launch; with a GPU, every shortcut too.
- gpu: the whole checker through the notebook's own launch cell: the starter fails, the answer passes, every
  shortcut fails and is named, the one right only for whole blocks included.
"""
import numpy as np
import pytest
import torch

from kernel_tests import ScratchExercise
from utils import launch
from utils.chapters import half16_exercises as exercises

EXERCISE = ScratchExercise("12_bf16_and_fp16.ipynb", "BF16X2_SOURCE", "my_to_bf16x2", "bf16x2_mod", "to_bf16x2",
                           "to_bf16x2.cu", "bf16x2_")
NB, ANSWER, SHORTCUTS, NAME = EXERCISE.notebook, EXERCISE.answer_path, EXERCISE.shortcuts, EXERCISE.name
cells, starter, launch_cell, text, folder, load = (EXERCISE.cells, EXERCISE.starter, EXERCISE.launch_cell,
                                                   EXERCISE.text, EXERCISE.folder, EXERCISE.load)
my_to_bf16x2 = EXERCISE.launch_fn_for

EVERYWHERE = ("starter", "answer")
SHORTCUT_VARIANTS = tuple(p.stem for p in SHORTCUTS)

CAUGHT_WITHOUT_A_GPU = {"bf16x2_intrinsic": "write the rounding with integer operations"}
NAMED_ON_A_GPU = {
    "bf16x2_truncated": "truncated",
    "bf16x2_half_up": "rounded half up",
    "bf16x2_nan_to_inf": "a NaN turned into infinity",
    "bf16x2_swapped": "the halves swapped",
    "bf16x2_low_only": "x[2i] alone",
    "bf16x2_multiples_only": "right for the first",
}


def numpy_stand_in(compute):
    """A launch function that computes outside PyTorch: `compute` on a NumPy view of x, written into a torch.empty."""
    def fn(x):
        out = torch.empty(x.numel() // 2, dtype=torch.int32)
        out.numpy()[...] = compute(x.numpy())
        return out
    return fn


def test_the_notebook_checks_the_text_it_compiles():
    assert f'build.load_source("{NAME}", BF16X2_SOURCE)' in launch_cell()
    check_cell = next(src for src in cells() if "exercises.bf16x2_exercise(" in src)
    assert "exercises.bf16x2_exercise(my_to_bf16x2, BF16X2_SOURCE)" in check_cell
    assert "exercises.static_verdict(exercises.bf16x2_static(BF16X2_SOURCE))" in check_cell


# --- without a GPU: the starter fails --------------------------------------------------------------------

def test_the_starter_fails_the_static_reading():
    assert exercises.bf16x2_static(starter()) == [f"{exercises.BF16X2_KERNEL} does nothing yet: write its body"]


def test_the_checker_refuses_the_starter_before_running_it():
    results, verdict = exercises.bf16x2_exercise(lambda x: pytest.fail("ran the starter"), starter(), device="cpu")
    assert results == {} and verdict.startswith("Not yet:") and "does nothing yet" in verdict


# --- without a GPU: the answer passes ---------------------------------------------------------------------

def test_the_answer_passes_the_static_reading():
    assert exercises.bf16x2_static(ANSWER.read_text()) == []


def test_the_checkers_own_rounding_is_pytorchs():
    """_right (the answer's arithmetic in NumPy) gives PyTorch's x.to(bfloat16) on every special value and 10^5
    random ones, a NaN for a NaN."""
    x = exercises.bf16x2_inputs(50_000)
    assert exercises._same(exercises._right(x.numpy()), exercises.bf16x2_reference(x).numpy()).all()


def test_the_whole_checker_passes_the_answers_arithmetic_on_the_cpu():
    results, verdict = exercises.bf16x2_exercise(numpy_stand_in(exercises._right), ANSWER.read_text(), device="cpu")
    assert set(results) == set(exercises.PAIRS) and all(r == "ok" for r in results.values()), results
    assert verdict.startswith("PASS"), verdict


# --- without a GPU: the shortcuts fail --------------------------------------------------------------------

@pytest.mark.parametrize("path", SHORTCUTS, ids=lambda p: p.stem)
def test_each_shortcut_passes_or_fails_the_static_reading_as_it_should(path):
    EXERCISE.check_static_reading(path, exercises.bf16x2_static, CAUGHT_WITHOUT_A_GPU, NAMED_ON_A_GPU)


def test_every_shortcut_file_is_expected():
    EXERCISE.check_shortcut_files(CAUGHT_WITHOUT_A_GPU, NAMED_ON_A_GPU)


@pytest.mark.parametrize("shortcut", list(exercises.BF16X2_SHORTCUTS), ids=lambda s: s.split(",")[0].split(":")[0])
def test_the_whole_checker_fails_and_names_each_shortcut_on_the_cpu(shortcut):
    results, verdict = exercises.bf16x2_exercise(numpy_stand_in(exercises.BF16X2_SHORTCUTS[shortcut]),
                                                 ANSWER.read_text(), device="cpu")
    assert any(r != "ok" for r in results.values()) and verdict.startswith("Not yet:"), verdict
    assert f"the output is {shortcut}" in verdict, verdict


def test_the_diagnosis_names_a_tail_left_unwritten():
    def tail(x):
        out = exercises._right(x).copy()
        out[out.size // 256 * 256:] = 0x5A5A5A5A
        return out
    x = exercises.bf16x2_inputs(1000).numpy()
    assert exercises.bf16x2_diagnosis(tail(x), x).startswith("right for the first 768 of the 1000 pairs")


def test_a_word_left_unwritten_that_matches_a_pattern_by_chance_does_not_decide_the_diagnosis():
    """A kernel whose last, partial block writes nothing leaves at 1 pair whatever the block held; there it can
    read as a known shortcut (here x[2i] alone, as a previous launch left it). The verdict is the largest failing
    size's, where the unwritten tail shows."""
    def tail_unwritten(x):
        pairs = x.size // 2
        if pairs == 1:
            return exercises.BF16X2_SHORTCUTS["x[2i] alone, the high half left zero: each word holds two values"](x)
        out = exercises._right(x).copy()
        out[pairs // 256 * 256:] = 0x5A5A5A5A
        return out
    _, verdict = exercises.bf16x2_exercise(numpy_stand_in(tail_unwritten), ANSWER.read_text(), device="cpu")
    assert "right for the first 4096 of the 4099 pairs" in verdict and "x[2i] alone" not in verdict, verdict


def _keeping_nans(shortcut):
    """The shortcut as a kernel that handles NaNs first would compute it (the shortcut files under shortcuts/ do)."""
    def fn(x):
        out = shortcut(x).view(np.uint32).copy()
        lo, hi = exercises._halves(x)
        for shift, half in ((0, lo), (16, hi)):
            nan = ((half & 0x7F800000) == 0x7F800000) & ((half & 0x007FFFFF) != 0)
            out[nan] = (out[nan] & ~np.uint32(0xFFFF << shift)) | np.uint32(0x7FC0 << shift)
        return out.view(np.int32)
    return fn


@pytest.mark.parametrize("shortcut", [s for s in exercises.BF16X2_SHORTCUTS if s != exercises.NAN_SHORTCUT],
                         ids=lambda s: s.split(",")[0].split(":")[0])
def test_a_shortcut_that_keeps_nans_is_still_named_at_every_size(shortcut):
    """A truncation (or half-up rounding, ...) whose kernel keeps a NaN a NaN differs from the plain one on the NaN
    words alone; at 1,000 and 4,099 pairs, where the special values include a NaN whose truncation would be
    infinity, it is still named."""
    _, verdict = exercises.bf16x2_exercise(numpy_stand_in(_keeping_nans(exercises.BF16X2_SHORTCUTS[shortcut])),
                                           ANSWER.read_text(), device="cpu")
    assert f"the output is {shortcut}" in verdict and "(at 4099 pairs)" in verdict, verdict


def test_an_unrecognised_output_is_described_at_its_first_wrong_pair():
    x = exercises.bf16x2_inputs(1000).numpy()
    out = exercises._right(x).copy()
    out[5] = -1  # 0xffffffff: a negative int32
    assert exercises.bf16x2_diagnosis(out, x).startswith("wrong at pair 5 (x = "), exercises.bf16x2_diagnosis(out, x)
    assert "out 0xffffffff" in exercises.bf16x2_diagnosis(out, x)


def test_the_checker_refuses_a_launch_that_lets_pytorch_round():
    results, verdict = exercises.bf16x2_exercise(lambda x: x.to(torch.bfloat16).view(torch.int32), ANSWER.read_text(),
                                                 device="cpu")
    assert results == {} and verdict.startswith("Not yet: your function calls PyTorch"), verdict


def test_the_special_values_tell_the_roundings_apart():
    """Each special value is there for a reason its comment gives: without the ties, rounding half up would pass; without
    the NaN's low payload, the NaN-to-infinity shortcut would."""
    bits = exercises.SPECIAL
    x = bits.view(np.float32)
    right = exercises._round_nearest_even(bits)
    assert right[0] == 0x3F80 and right[1] == 0x3F82 and right[2] == 0x3F81  # ties to even; above half: up
    assert (right[3] & 0x7F80) == 0x7F80 and (right[3] & 0x7F) != 0  # the NaN stays a NaN
    assert right[6] == 0x7F80  # the largest float rounds to infinity
    assert np.isnan(x[3]) and right[7] == 0x8000


def test_no_chapter_renders_the_answers():
    assert "exercise_answers" not in NB.read_text()


# --- they compile ------------------------------------------------------------------------------------------

@pytest.mark.compile
@pytest.mark.parametrize("variant", [*EVERYWHERE, *(pytest.param(v, marks=pytest.mark.gpu) for v in SHORTCUT_VARIANTS)])
def test_the_starter_answer_and_shortcuts_compile_as_to_bf16x2(variant):
    kernel = getattr(load(variant), exercises.BF16X2_KERNEL)
    assert isinstance(kernel, launch.Launcher)
    assert kernel.kernel.name == exercises.BF16X2_KERNEL and len(kernel.kernel.params) == 3


# --- on a GPU: through the notebook's launch cell ------------------------------------------------------------

@pytest.mark.gpu
def test_the_notebook_launch_cell_fails_the_starter():
    results, verdict = exercises.bf16x2_exercise(my_to_bf16x2(load("starter")), starter())
    assert results == {} and "does nothing yet" in verdict, verdict


@pytest.mark.gpu
def test_the_notebook_launch_cell_passes_the_answer():
    results, verdict = exercises.bf16x2_exercise(my_to_bf16x2(load("answer")), ANSWER.read_text())
    assert verdict.startswith("PASS"), (verdict, results)


@pytest.mark.gpu
@pytest.mark.parametrize("path", SHORTCUTS, ids=lambda p: p.stem)
def test_the_notebook_launch_cell_fails_each_shortcut(path):
    EXERCISE.check_launch_cell_fails(path, exercises.bf16x2_exercise, CAUGHT_WITHOUT_A_GPU, NAMED_ON_A_GPU)
