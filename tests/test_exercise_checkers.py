"""The "Your turn" sections of notebooks 01-11: no checker says PASS before the reader acts.

- Every exercise heading of a "Your turn" section is known here (EXERCISES), so a new exercise
  cannot arrive without a test of its checker.
- Each checker that runs without a GPU is run on its exercise's untouched starting point, read
  from the notebook (or, for 03's padding, from the kernel file the checker reads), and must not
  say PASS; a solved starting point must.
- The kernel exercises need a GPU to run a kernel: their starting points are run by the gpu
  tests EXERCISES names, and here shown to be the ones those tests know.
- Every "Think it through" question has its answer in a collapsed <details> block.
"""
import ast
import contextlib
import importlib
import io
import itertools
import json
import re
from types import SimpleNamespace

import pytest
import torch

from utils import REPO, build, check
from utils.chapters import gemm_exercises as exercises
from utils.chapters import gemm_ladder as lc
from utils.problems import get_problem
from utils.run import SKIP_MARKER

from kernel_tests import notebook_cell

NB01, NB02, NB03, NB04 = ("01_models_and_baselines.ipynb", "02_naive_gemm.ipynb", "03_tiled_gemm.ipynb",
                          "04_bias_fusion.ipynb")
THINK = "think"  # a "Think it through": answers, no checker
# notebook -> {exercise number: the tests that run its checker on the starting point ("module::test" for another file)}
EXERCISES = {
    NB01: {"1": ["test_01_seed000_hardtanh_is_not_yet_until_fixed"], "2": THINK},
    NB02: {"1": ["test_gemm_exercises::test_seed004_leaves_columns_unwritten_until_each_thread_loops"],
           "2": ["test_gemm_exercises::test_warp_per_output_is_wrong_until_the_warp_adds_its_partial_sums",
                 "test_02_the_timing_waits_for_a_guess"]},
    NB03: {"1": ["test_03_tile_shapes_wait_for_a_variant_and_a_prediction"],
           "2": ["test_03_the_padding_starting_point_conflicts", "test_03_every_conflict_free_row_passes",
                 "test_gemm_exercises::test_smem_pad_is_right_but_conflicted_until_padded"],
           "3": ["test_03_pipeline_depths_wait_for_a_prediction"]},
    NB04: {"1": ["test_gemm_epilogue_exercise::test_the_starting_point_forgets_the_relu_and_the_solution_passes"],
           "2": ["test_04_the_prediction_is_not_yet_until_written"], "3": THINK},
    "05_fused_activations.ipynb": {"1": ["test_memory_bound_exercises::test_starting_point_fails_the_intended_way"],
                                   "2": THINK},
    "06_groupnorm_reduction.ipynb": {"1": ["test_memory_bound_exercises::test_starting_point_fails_the_intended_way"],
                                     "2": THINK},
    "07_broadcasting_pitfall.ipynb": {"1": ["test_memory_bound_exercises::test_starting_point_fails_the_intended_way"],
                                      "2": THINK},
    "08_tensor_cores_and_precision.ipynb": {
        "1": ["test_tensor_core_chapter::test_exercise_1_is_not_yet_at_the_start_and_passes_with_the_two_products",
              "test_tensor_core_chapter::test_exercise_1_cannot_be_passed_by_trying_subsets",
              "test_tensor_core_chapter::test_exercise_1_shortcuts_fail"],
        "2": ["test_tensor_core_chapter::test_exercise_2_is_not_yet_at_the_start_and_passes_on_the_largest_interval_with_a_margin",
              "test_tensor_core_chapter::test_exercise_2_cannot_be_bisected"],
        "3": THINK},
    "09_hopper_gemm_and_epilogue.ipynb": {
        "1": ["test_hopper_chapter::test_exercise_1_is_not_yet_at_the_start_and_passes_on_the_deepest_rings",
              "test_hopper_chapter::test_a_wrong_ring_hears_neither_the_answer_nor_the_direction"],
        "2": ["test_groupnorm_epilogue_exercise::test_every_shortcut_fails_the_checker",
              "test_groupnorm_epilogue_exercise::test_the_starter_and_the_answer_compile_for_hopper",
              "test_groupnorm_epilogue_exercise::test_the_starter_fails_and_the_answer_passes_on_the_gpu",
              "test_groupnorm_epilogue_exercise::test_each_shortcut_kernel_fails_on_the_gpu"],
        "3": THINK},
    "10_fused_solutions.ipynb": {"1": ["test_chapter::test_the_backward_exercise_fails_until_the_reader_acts"],
                                 "2": ["test_chapter::test_the_fake_exercise_fails_until_the_reader_acts"], "3": THINK},
    "11_dropins_in_real_code.ipynb": {"1": THINK},
}


def cells(notebook: str) -> list[dict]:
    return json.loads((REPO / "notebooks" / notebook).read_text())["cells"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def code_cell(notebook: str, marker: str) -> str:
    """The source of the first code cell of the notebook that contains `marker`."""
    found = [source(c) for c in cells(notebook) if c["cell_type"] == "code" and marker in source(c)]
    assert found, f"no code cell of {notebook} contains {marker!r}"
    return found[0]


def starting_value(notebook: str, name: str):
    """The value the notebook assigns to `name` at the top level of a code cell, as committed (a literal)."""
    for cell in cells(notebook):
        if cell["cell_type"] != "code":
            continue
        tree = ast.parse("\n".join(l for l in source(cell).splitlines() if not l.lstrip().startswith(("%", "!"))))
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return ast.literal_eval(node.value)
    raise AssertionError(f"no code cell of {notebook} assigns {name}")


def run(code: str, namespace: dict) -> str:
    """What running `code` in `namespace` prints."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "a notebook cell", "exec"), namespace)
    return out.getvalue()


def your_turn(notebook: str) -> str:
    """The markdown of the notebook's "Your turn" section, up to its summary."""
    text = "\n".join(source(c) for c in cells(notebook) if c["cell_type"] == "markdown")
    start = text.index("## Your turn")
    end = text.find("## Summary", start)
    return text[start:end if end != -1 else None]


# --- the inventory ------------------------------------------------------------------------

@pytest.mark.parametrize("notebook", sorted(EXERCISES))
def test_every_exercise_is_known_here(notebook):
    headings = re.findall(r"^### (?:Exercise )?(\d+)[.:] (.+)$", your_turn(notebook), re.MULTILINE)
    assert {n for n, _ in headings} == set(EXERCISES[notebook]), f"{notebook}: {headings}"
    for number, title in headings:
        assert ("Think it through" in title) == (EXERCISES[notebook][number] == THINK), f"{notebook}: {title}"


def test_every_named_checker_test_exists():
    for tests in EXERCISES.values():
        for name in itertools.chain.from_iterable(t for t in tests.values() if t != THINK):
            module, _, test = name.rpartition("::")
            owner = importlib.import_module(module) if module else globals()
            assert callable(owner.get(test) if isinstance(owner, dict) else getattr(owner, test, None)), name


@pytest.mark.parametrize("notebook", [nb for nb, ex in EXERCISES.items() if THINK in ex.values()])
def test_every_think_it_through_question_has_a_hidden_answer(notebook):
    section = your_turn(notebook)
    think = section[section.index("Think it through"):]
    questions = re.findall(r"^- ", think, re.MULTILINE)
    answers = re.findall(r"^  <details><summary>Answer</summary>\n(?:.*\n)+?  </details>$", think, re.MULTILINE)
    assert questions and len(answers) == len(questions), f"{notebook}: {len(questions)} questions, {len(answers)} answers"


# --- 01: seed 000's Hardtanh through the harness ---------------------------------------------

def run_01(start: str) -> str:
    namespace = {"torch": torch, "check": check, "get_problem": get_problem}
    return run(start + "\n" + code_cell(NB01, "def model_verdict("), namespace)


def test_01_seed000_hardtanh_is_not_yet_until_fixed():
    start = code_cell(NB01, "class YourModelNew94")
    assert "torch.clamp(x, 0.0, 2.0)" in start, "the starting point is seed 000's range"
    printed = run_01(start)
    assert "Not yet: trials failed." in printed and "PASS" not in printed, printed
    assert "PASS: YourModelNew94" in run_01(start.replace("torch.clamp(x, 0.0, 2.0)", "self.hardtanh(x)"))


# --- 02: the timing of exercise 2 waits for a guess --------------------------------------------

def test_02_the_timing_waits_for_a_guess():
    cell = code_cell(NB02, "MY_GUESS = ")
    assert starting_value(NB02, "MY_GUESS") is None
    assert "exercises.time_warp_exercise(MY_GUESS," in cell
    chapter = lc.LadderChapter(SimpleNamespace(on_gpu=False, scale="small", reps=3))
    namespace = {"exercises": exercises, "C": chapter, "warp_ex": None, "warp_ok": False, "RUNG2_STEP": {}}
    printed = run(cell, dict(namespace))
    assert printed.startswith("Not yet") and SKIP_MARKER not in printed
    solved = re.sub(r"^MY_GUESS = None", "MY_GUESS = 1.3", cell, flags=re.MULTILINE)
    printed = run(solved, namespace)
    assert "Not yet" not in printed and SKIP_MARKER in printed  # on to the timing (here: skipped, no GPU)


# --- 03: the tile shapes, the padding, the pipeline depths ----------------------------------

@pytest.fixture(scope="module")
def nb03():
    """Notebook 03's checkers: utils.chapters.gemm_exercises's, called by the exercise cells as committed."""
    for call in ("exercises.tile_exercise(TILE_VARIANTS, MY_ORDER, C)", "exercises.pad_exercise(C)", "exercises.pipeline_exercise(MY_BEST, C)"):
        assert code_cell(NB03, call)
    return vars(exercises)


def test_03_tile_shapes_wait_for_a_variant_and_a_prediction(nb03):
    verdict = nb03["order_verdict"]
    variants, order = starting_value(NB03, "TILE_VARIANTS"), starting_value(NB03, "MY_ORDER")
    for measured in [None, *itertools.permutations(variants)]:
        assert verdict(order, variants, None if measured is None else list(measured), {}).startswith("Not yet")
    # Predicting the four given variants is not enough: the exercise asks for one of your own.
    assert verdict(list(variants), variants, list(variants), {}).startswith("Not yet")
    mine = variants | {"BK 16, 4 x 16 per thread": ["-DTILE_BK=16", "-DTILE_TM=4", "-DTILE_TN=16"]}
    guess = list(reversed(mine))
    assert verdict(guess[:-1], mine).startswith("Not yet")  # a label left out
    assert not verdict(guess, mine).startswith(("PASS", "Not yet"))  # complete; the timing needs a GPU
    assert verdict(guess, mine, guess, {}).startswith("PASS") and f"{len(mine)} of {len(mine)}" in verdict(guess, mine, guess, {})
    assert verdict(guess, mine, guess, {"BK 64": "does not compile"}).startswith("Not yet: BK 64")


def committed_ws_row_floats() -> int:
    """kWsRowFloats as kernels/exercises/gemm_smem_pad.cu defines it (what its ws_row_floats() returns)."""
    text = build.kernel_source("gemm_smem_pad", build.KERNELS_DIR / "exercises")
    constants = dict(re.findall(r"constexpr int (\w+) = ([^;]+);", text))
    return int(eval(constants["kWsRowFloats"], {}, {k: v for k, v in constants.items() if k != "kWsRowFloats"}))


def test_03_the_padding_starting_point_conflicts(nb03):
    row = committed_ws_row_floats()
    assert row == 32
    assert nb03["padding_verdict"](row).startswith("Not yet")


def test_03_every_conflict_free_row_passes(nb03):
    """The row lengths measured on an H100 (rung 3 with each, at the problems' shape): 33-39 as fast as 33
    (34 and 38 read with LDS.64, 36 with LDS.128, per the SASS), 40 1.47x slower, 32 4.6x."""
    verdict = nb03["padding_verdict"]
    assert [row for row in range(32, 41) if verdict(row).startswith("PASS")] == list(range(33, 40))
    assert verdict(40).startswith("Not yet") and verdict(48).startswith("Not yet")


def test_03_pipeline_depths_wait_for_a_prediction(nb03):
    verdict, pairs = nb03["pair_verdict"], [(8, 2), (8, 3), (16, 2), (16, 3)]
    mine = starting_value(NB03, "MY_BEST")
    assert all(verdict(mine, pairs, best).startswith("Not yet") for best in [None, *pairs])
    assert verdict((32, 4), pairs).startswith("Not yet")  # not one of the pairs built
    assert verdict((16, 3), pairs, (8, 2)).startswith("PASS") and "not this time" in verdict((16, 3), pairs, (8, 2))
    assert verdict([16, 3], pairs, (16, 3)).endswith(": right.")
    assert verdict((16, 3), pairs, (16, 3), ["BK 8, 3 stages"]).startswith("Not yet")


# --- 04: the prediction at problem 37's shape -------------------------------------------------

def test_04_the_prediction_is_not_yet_until_written():
    from utils.chapters.bias import exercise_37, prediction_verdict as verdict

    cell = code_cell(NB04, "MY_PREDICTION_PCT = ")
    assert "bc.exercise_37(MY_PREDICTION_PCT," in cell  # the cell hands its value to the checker tested here
    mine = starting_value(NB04, "MY_PREDICTION_PCT")
    assert run("exercise_37(mine, None, {}, False, 1, (32768, 4096, 1024))",
               {"exercise_37": exercise_37, "mine": mine}).startswith("Not yet")
    assert all(verdict(mine, actual, "measured").startswith("Not yet") for actual in (0.0, 0.5, 2.5, 40.0))
    assert verdict(2.0, 2.5, "measured").startswith("PASS")
    assert "too high" in verdict(20.0, 2.5, "measured") and "too low" in verdict(0.5, 2.5, "measured")


# --- the kernel exercises: the starting points the gpu tests run ----------------------------

def test_the_kernel_starting_points_are_the_ones_the_gpu_tests_know():
    exercises = build.KERNELS_DIR / "exercises"
    gemm = importlib.import_module("test_gemm_exercises")
    memory = importlib.import_module("test_memory_bound_exercises")
    epilogue = importlib.import_module("test_gemm_epilogue_exercise")
    todos = {name: todo for name, (todo, _) in gemm.SOLUTIONS.items()}
    todos |= {name: spec[2] or memory.WELFORD_SPAN[0] for name, spec in memory.EXERCISE.items()}
    todos[epilogue.NAME] = epilogue.TODO
    for name, todo in todos.items():
        assert todo in (exercises / f"{name}.cu").read_text(), f"{name}.cu no longer starts where its gpu test expects"
