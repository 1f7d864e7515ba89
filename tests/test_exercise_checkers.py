"""The "Your turn" sections of notebooks 00-13: no checker says PASS before the reader acts.

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
from utils.chapters import baselines
from utils.chapters import gemm_exercises as exercises
from utils.chapters import gemm_ladder as lc
from utils.problems import get_problem
from utils.run import SKIP_MARKER

from kernel_tests import notebook_cell

NB00 = "00_setup.ipynb"
NB01, NB02, NB03, NB04 = ("01_models_and_baselines.ipynb", "02_naive_gemm.ipynb", "03_tiled_gemm.ipynb",
                          "04_bias_fusion.ipynb")
THINK = "think"  # a "Think it through": answers, no checker
# notebook -> {exercise number: the tests that run its checker on the starting point ("module::test" for another file)}
EXERCISES = {
    NB00: {"1": ["test_00_scale_add_is_not_yet_until_it_uses_alpha", "test_00_a_kernel_that_fits_one_alpha_is_not_yet"]},
    NB01: {"1": ["test_01_seed000_hardtanh_is_not_yet_until_fixed",
                 "test_01_a_forward_that_is_models_own_is_not_yet_on_the_cpu"], "2": THINK},
    NB02: {"1": ["test_gemm_exercises::test_seed004_leaves_columns_unwritten_until_each_thread_loops"],
           "2": ["test_gemm_exercises::test_warp_per_output_is_wrong_until_the_warp_adds_its_partial_sums",
                 "test_02_the_timing_waits_for_a_guess"]},
    NB03: {"1": ["test_tiled_sgemm_exercise::test_the_starter_fails_the_static_checks",
                 "test_tiled_sgemm_exercise::test_the_answer_passes_the_static_checks",
                 "test_tiled_sgemm_exercise::test_each_shortcut_fails_the_checker_on_a_gpu",
                 "test_tiled_sgemm_exercise::test_the_whole_checker_fails_the_starter_and_passes_the_answer"],
           "2": ["test_03_tile_shapes_wait_for_a_variant_and_a_prediction",
                 "test_03_the_tile_order_is_judged_against_the_measured_times"],
           "3": ["test_03_the_padding_starting_point_conflicts", "test_03_every_conflict_free_row_passes",
                 "test_03_the_padding_table_waits_for_the_readers_attempt",
                 "test_gemm_exercises::test_smem_pad_is_right_but_conflicted_until_padded"],
           "4": ["test_03_pipeline_depths_wait_for_a_prediction",
                 "test_03_the_pipeline_prediction_is_judged_against_the_measured_times"]},
    NB04: {"1": ["test_gemm_epilogue_exercise::test_the_starting_point_forgets_the_relu_and_the_solution_passes"],
           "2": ["test_04_the_prediction_is_not_yet_until_written"], "3": THINK},
    "05_fused_activations.ipynb": {"1": ["test_memory_bound_exercises::test_gelu_starter_fails_and_answer_passes"],
                                   "2": THINK},
    "06_groupnorm_reduction.ipynb": {
        "1": ["test_memory_bound_exercises::test_welford_starter_fails_and_answer_passes",
              "test_memory_bound_exercises::test_welford_shortcuts_fail_before_anything_runs"],
        "2": ["test_memory_bound_exercises::test_tail_checker_refuses_the_starter_before_running_it",
              "test_memory_bound_exercises::test_tail_answer_passes", "test_memory_bound_exercises::test_tail_shortcuts_fail"],
        "3": THINK},
    "07_broadcasting_pitfall.ipynb": {
        "1": ["test_memory_bound_exercises::test_min_bias_checker_refuses_the_starter_before_running_it",
              "test_memory_bound_exercises::test_min_bias_answer_passes",
              "test_memory_bound_exercises::test_min_bias_shortcuts_fail"],
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
    "10_fused_solutions.ipynb": {"1": ["test_solutions_exercises::test_the_backward_starting_point_is_not_yet",
                                       "test_solutions_exercises::test_the_backward_reference_answer_passes",
                                       "test_solutions_exercises::test_the_backward_shortcuts_are_not_yet"],
                                 "2": ["test_chapter::test_the_fake_exercise_fails_until_the_reader_acts",
                                       "test_solutions_exercises::test_the_fake_reference_answer_passes_and_the_starting_point_does_not",
                                       "test_solutions_exercises::test_the_fake_shortcut_of_calling_the_op_is_not_yet"],
                                 "3": THINK},
    "11_every_batch_size.ipynb": {
        "1": ["test_split_k_exercise::test_the_starter_fails_the_static_reading",
              "test_split_k_exercise::test_the_checker_refuses_the_starter_before_running_it",
              "test_split_k_exercise::test_the_whole_checker_passes_the_answers_arithmetic_on_the_cpu",
              "test_split_k_exercise::test_the_whole_checker_fails_each_shortcut_on_the_cpu",
              "test_split_k_exercise::test_the_notebook_launch_cell_fails_the_starter",
              "test_split_k_exercise::test_the_notebook_launch_cell_passes_the_answer",
              "test_split_k_exercise::test_the_notebook_launch_cell_fails_each_shortcut"],
        "2": THINK},
    "12_bf16_and_fp16.ipynb": {
        "1": ["test_bf16x2_exercise::test_the_starter_fails_the_static_reading",
              "test_bf16x2_exercise::test_the_checker_refuses_the_starter_before_running_it",
              "test_bf16x2_exercise::test_the_whole_checker_passes_the_answers_arithmetic_on_the_cpu",
              "test_bf16x2_exercise::test_the_whole_checker_fails_and_names_each_shortcut_on_the_cpu",
              "test_bf16x2_exercise::test_the_notebook_launch_cell_fails_the_starter",
              "test_bf16x2_exercise::test_the_notebook_launch_cell_passes_the_answer",
              "test_bf16x2_exercise::test_the_notebook_launch_cell_fails_each_shortcut"],
        "2": THINK},
    "13_dropins_in_real_code.ipynb": {"1": THINK},
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


# --- 00: alpha * a + b ---------------------------------------------------------------------------

def verdict_00(scale_add) -> str:
    """Notebook 00's checker, as its cell defines it, on a stand-in for the kernel (torch math on the CPU)."""
    namespace = {"torch": torch, "check": check}
    for marker in ("def two_vectors(", "def scale_add_verdict("):  # the definitions, without the cells' GPU steps
        cell = code_cell(NB00, marker)
        exec(compile(cell[:cell.index("\n\nif MODE")], "notebook 00", "exec"), namespace)
    return run("print(scale_add_verdict(kernel))", {**namespace, "kernel": scale_add}).strip().splitlines()[-1]


def test_00_scale_add_is_not_yet_until_it_uses_alpha():
    starter = (build.KERNELS_DIR / "exercises" / "scale_add.cu").read_text()
    assert "out[i] = a[i] + b[i];  // TODO: use alpha" in starter  # what the stand-in below computes
    assert verdict_00(lambda a, b, alpha: a + b).startswith("Not yet: with alpha = 0.5")
    assert verdict_00(lambda a, b, alpha: alpha * a + b).startswith("PASS")  # the answer: out[i] = alpha * a[i] + b[i]


@pytest.mark.parametrize("fits", [lambda a, b, alpha: 0.5 * a + b, lambda a, b, alpha: -1.75 * a + b,
                                  lambda a, b, alpha: (alpha if alpha in (0.5, -1.75) else 1.0) * a + b])
def test_00_a_kernel_that_fits_one_alpha_is_not_yet(fits):
    assert verdict_00(fits).startswith("Not yet"), "the checker tries more than one alpha, one of them at random"


# --- 01: seed 000's Hardtanh through the harness ---------------------------------------------

ANSWERS = REPO / "tests" / "exercise_answers"


def run_01(start: str) -> str:
    namespace = {"torch": torch, "check": check, "get_problem": get_problem, "bl": baselines}
    return run(start + "\n" + code_cell(NB01, "def model_verdict("), namespace)


def test_01_seed000_hardtanh_is_not_yet_until_fixed():
    start = code_cell(NB01, "class YourModelNew94")
    assert "torch.clamp(x, 0.0, 2.0)" in start, "the starting point is seed 000's range"
    printed = run_01(start)
    assert "Not yet: trials failed." in printed and "PASS" not in printed, printed
    assert "PASS: YourModelNew94" in run_01((ANSWERS / "01_your_model_new94.py").read_text())
    assert "PASS: YourModelNew94" in run_01(start.replace("torch.clamp(x, 0.0, 2.0)", "self.hardtanh(x)"))


@pytest.mark.parametrize("shortcut", [
    "",                                            # the forward deleted: Model's runs
    "    def forward(self, x):\n        return super().forward(x)\n",
    "    def forward(self, x):\n        return get_problem(94).Model.forward(self, x)\n",
])
def test_01_a_forward_that_is_models_own_is_not_yet_on_the_cpu(shortcut):
    start = code_cell(NB01, "class YourModelNew94")
    head = start[:start.index("    def forward(self, x):")]
    printed = run_01(head + shortcut)
    assert printed.startswith("Not yet: calling YourModelNew94 runs Model's forward") and "PASS" not in printed, printed


# --- 02: the timing of exercise 2 waits for a guess --------------------------------------------

def test_02_the_timing_waits_for_a_guess():
    cell = code_cell(NB02, "MY_GUESS = ")
    assert starting_value(NB02, "MY_GUESS") is None
    assert "bench.time_interleaved(" in cell and "exercises.guess_verdict(MY_GUESS," in cell
    session = SimpleNamespace(on_gpu=False, scale="small", reps=3)
    namespace = {"exercises": exercises, "S": session, "warp_ex": None, "warp_ok": False, "RUNG2_STEP": {},
                 "skip": __import__("utils.run", fromlist=["skip"]).skip}
    printed = run(cell, dict(namespace))
    assert printed.startswith("Not yet") and SKIP_MARKER not in printed
    solved = re.sub(r"^MY_GUESS = None", "MY_GUESS = 1.3", cell, flags=re.MULTILINE)
    printed = run(solved, namespace)
    assert "Not yet" not in printed and SKIP_MARKER in printed  # on to the timing (here: skipped, no GPU)


def test_02_the_guess_is_set_beside_the_measurement_and_never_passes():
    step = {"lines": 5, "fmas": 128}
    for guess in (0.5, 1.3, 1.6, 4.0):
        text = exercises.guess_verdict(guess, 1.5, step)
        assert "PASS" not in text and "Measured: 1.50x" in text
    assert "within 20%" in exercises.guess_verdict(1.6, 1.5, step)
    assert "outside 20%" in exercises.guess_verdict(4.0, 1.5, step)


def test_02_no_answer_before_exercise_1():
    """Rung 1's kernel is seed 004's, fixed: the notebook shows it only after exercise 1."""
    sources = [source(c) for c in cells(NB02)]
    exercise = next(i for i, s in enumerate(sources) if "### Exercise 1:" in s)
    rung1 = next(i for i, s in enumerate(sources) if 'show.show_kernel("gemm_01_naive"' in s)
    launch = next(i for i, s in enumerate(sources) if "gemm_naive_kernel[" in s)
    assert exercise < rung1 and exercise < launch


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
    times = {label: 1.0 + i for i, label in enumerate(variants)}
    for measured in [None, times]:
        assert verdict(order, variants, measured, {}).startswith("Not yet")
    # Predicting the four given variants is not enough: the exercise asks for one of your own.
    assert verdict(list(variants), variants, times, {}).startswith("Not yet")
    mine = variants | {"BK 16, 4 x 16 per thread": ["-DTILE_BK=16", "-DTILE_TM=4", "-DTILE_TN=16"]}
    guess = list(reversed(mine))
    assert verdict(guess[:-1], mine).startswith("Not yet")  # a label left out
    assert not verdict(guess, mine).startswith(("PASS", "Not yet"))  # complete; the judgement needs a measurement
    assert verdict(guess, mine, {}, {"BK 64": "does not compile"}).startswith("Not yet: BK 64")


def test_03_the_tile_order_is_judged_against_the_measured_times(nb03):
    """Of every order of five variants, PASS only for those the measurement bears out (ties within 2% either
    way), and every wrong order gets a message that names no variant: nothing to bisect."""
    verdict = nb03["order_verdict"]
    labels = ["rung 5 as is", "BK 16", "BK 32", "64 x 64 tile", "mine"]
    variants = dict.fromkeys(labels, [])
    times = {"BK 16": 1.0, "mine": 1.01, "rung 5 as is": 1.2, "BK 32": 1.5, "64 x 64 tile": 2.0}  # BK 16 / mine: a tie
    passed = [order for order in itertools.permutations(labels)
              if verdict(list(order), variants, times, {}).startswith("PASS")]
    assert sorted(passed) == sorted([("BK 16", "mine", "rung 5 as is", "BK 32", "64 x 64 tile"),
                                     ("mine", "BK 16", "rung 5 as is", "BK 32", "64 x 64 tile")])
    wrong = verdict(["64 x 64 tile", "BK 32", "rung 5 as is", "mine", "BK 16"], variants, times, {})
    assert wrong.startswith("Not yet") and not any(label in wrong for label in labels)


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


def test_03_the_padding_table_waits_for_the_readers_attempt():
    """The table of every row length's passes is the answer to exercise 3: it prints only once the checker passed."""
    cell = code_cell(NB03, "for row in range(32, 41):")
    from utils.chapters import gemm_addressing, gemm_diagrams

    namespace = {"addressing": gemm_addressing, "diagrams": gemm_diagrams, "display": lambda *a: None}
    hidden = run(cell, {**namespace, "PAD_PASSED": False})
    assert "LDS" not in hidden and "36" not in hidden and "passes per kk" not in hidden, hidden
    assert "LDS.128" in run(cell, {**namespace, "PAD_PASSED": True})
    sources = [source(c) for c in cells(NB03)]
    assert sources.index(cell) > next(i for i, s in enumerate(sources) if "exercises.pad_exercise(C)" in s)


def test_03_pipeline_depths_wait_for_a_prediction(nb03):
    verdict, pairs = nb03["pair_verdict"], [(8, 2), (8, 3), (16, 2), (16, 3)]
    mine = starting_value(NB03, "MY_BEST")
    times = dict(zip(pairs, (1.3, 1.2, 1.0, 1.1)))
    assert all(verdict(mine, pairs, measured).startswith("Not yet") for measured in [None, times])
    assert verdict((32, 4), pairs).startswith("Not yet")  # not one of the pairs built
    assert not verdict((16, 3), pairs).startswith(("PASS", "Not yet"))  # in; the judgement needs a measurement
    assert verdict((16, 2), pairs, times, ["BK 8, 3 stages"]).startswith("Not yet")


def test_03_the_pipeline_prediction_is_judged_against_the_measured_times(nb03):
    """PASS for the fastest pair (or one within 2% of it) and for no other; the same words for every wrong pair."""
    verdict, pairs = nb03["pair_verdict"], [(8, 2), (8, 3), (16, 2), (16, 3)]
    times = {(8, 2): 1.3, (8, 3): 1.2, (16, 2): 1.0, (16, 3): 1.015}
    assert [p for p in pairs if verdict(p, pairs, times).startswith("PASS")] == [(16, 2), (16, 3)]
    wrong = [verdict(p, pairs, times) for p in [(8, 2), (8, 3)]]
    assert all(w.startswith("Not yet") for w in wrong)
    assert wrong[0].replace("(8, 2)", "X") == wrong[1].replace("(8, 3)", "X")  # nothing to bisect
    assert "(16, 2)" not in "".join(wrong)


def test_03_the_pipeline_prediction_without_a_gpu_is_judged_against_the_recorded_sweep(capsys):
    """Without a GPU the recorded sweep judges; the first prediction of a run is the one judged."""
    from utils.chapters import gemm_ladder as lc

    pairs, _ = exercises.pipeline_pairs()
    entries = [{"contender": f"{p}", "bk": p[0], "stages": p[1], "median_ms": 1.0 + i / 10} for i, p in enumerate(pairs)]
    record = {"device": {"name": "GPU"}, "date": "2026-01-01", "entries": entries}
    session = SimpleNamespace(on_gpu=False, can_compile=True, scale="small", reps=3,
                              recorded=lambda kind: record if kind == "ladder_tuning" else None)
    chapter = lc.LadderChapter(session)
    exercises.pipeline_exercise(pairs[1], chapter)
    exercises.pipeline_exercise(pairs[0], chapter)  # changed after the verdict: the first one stands
    out = capsys.readouterr().out
    assert "PASS" not in out and out.count("Not yet") == 2 and "the first one is judged" in out


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
    for miss in (20.0, 0.5):  # a miss gives away neither the value nor its direction: nothing to bisect
        text = verdict(miss, 2.5, "measured")
        assert text.startswith("Not yet") and "2.5" not in text and "high" not in text and "low" not in text, text


# --- the kernel exercises: the starting points the gpu tests run ----------------------------

def test_the_kernel_starting_points_are_the_ones_the_gpu_tests_know():
    exercises = build.KERNELS_DIR / "exercises"
    gemm = importlib.import_module("test_gemm_exercises")
    memory = importlib.import_module("test_memory_bound_exercises")
    epilogue = importlib.import_module("test_gemm_epilogue_exercise")
    todos = {name: todo for name, (todo, _) in gemm.SOLUTIONS.items()}
    todos |= memory.KERNEL_STARTS
    todos[epilogue.NAME] = epilogue.TODO
    for name, todo in todos.items():
        assert todo in (exercises / f"{name}.cu").read_text(), f"{name}.cu no longer starts where its gpu test expects"
