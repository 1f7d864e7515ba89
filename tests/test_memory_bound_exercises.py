"""The exercises of notebooks 05-07 and their checkers (utils/chapters/memory_exercises.py):

- 05: kernels/exercises/bias_gelu.cu (a one-line GELU in a given kernel);
- 06, 1: kernels/exercises/group_norm_stats.cu, Welford's statistics in one pass: the reader writes the summary
  and its push, merge and finish between two marks; the kernel around them reads each value once;
- 06, 2: problem 94's tail, y = GroupNorm(mish(hardtanh(x + bias))), written from scratch in the notebook
  (TAIL_SOURCE), one block per (sample, group);
- 07, 1: problem 75's min + bias, out (1, C, N, 1), written from scratch in the notebook (MIN_BIAS_SOURCE).

For each, three kinds of test: the untouched starting point fails its checker, the reference answer
(tests/exercise_answers/, which no chapter renders) passes, and the known shortcuts fail. Without a GPU the
static checks run (the kernel's text: signature, marks, float64, the given kernel unchanged) and the checkers'
data are shown to tell every shortcut from the answer; the `compile` tests build the starters and the answers;
the `gpu` tests run the whole checkers.
"""

import ast
import json
import re

import pytest
import torch
import torch.nn.functional as F

from utils import REPO, build, check, launch
from utils.chapters import memory as mc
from utils.chapters import memory_exercises as exercises

from kernel_tests import fake_report

EXERCISES = build.KERNELS_DIR / "exercises"
ANSWERS = REPO / "tests" / "exercise_answers"
SCRATCH = build.build_root_dir().parent / "exercise_answers"  # a fixed path, so the answers' builds are cached
EPS = 1e-5
WELFORD = EXERCISES / "group_norm_stats.cu"
NB05, NB06, NB07 = "05_fused_activations.ipynb", "06_groupnorm_reduction.ipynb", "07_broadcasting_pitfall.ipynb"

# 05: (notebook, export, the TODO as committed, what a solution puts there)
GELU = (NB05, "bias_gelu", "  return v;  // TODO: GELU, as F.gelu computes it\n",
        "  return 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f));\n")


# the committed starting points in kernels/exercises/ and a line each keeps (tests/test_exercise_checkers.py reads it)
KERNEL_STARTS = {"bias_gelu": GELU[2], "group_norm_stats": exercises.WELFORD_REGION[0]}


def report(*checks: tuple[str, str]) -> check.CheckReport:
    return fake_report("exercise vs reference", *checks)


FAILED = report(("trials", "fail"), ("stream", "pass"))
PASSED = report(("trials", "pass"), ("stream", "pass"))


def notebook_source(notebook: str, name: str) -> str:
    """The string a code cell of the notebook assigns to `name`, as committed: the reader's starting point."""
    for cell in json.loads((REPO / "notebooks" / notebook).read_text())["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "code" and re.search(rf"^{name} = ", text, re.M):
            tree = ast.parse(text)
            for node in tree.body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
                    return ast.literal_eval(node.value)
    raise AssertionError(f"no code cell of {notebook} assigns {name}")


def welford_with(region: str, text: str | None = None) -> str:
    """The Welford exercise's file with its YOUR CODE region replaced."""
    before, _, after = exercises.welford_parts(text or WELFORD.read_text())
    return before + region + after


WELFORD_ANSWER_REGION = (ANSWERS / "group_norm_stats_region.cu").read_text()
TAIL_ANSWER = (ANSWERS / "tail94.cu").read_text()
MIN_BIAS_ANSWER = (ANSWERS / "min_bias.cu").read_text()


def welford_two_pass() -> str:
    """A shortcut: the answer's region, but the kernel reads the data twice (the mean, then deviations from it)."""
    text = welford_with(WELFORD_ANSWER_REGION)
    one_pass = "  for (int e = threadIdx.x; e < D; e += blockDim.x) s = stats_push(s, seg[e]);  // the one pass over the data\n"
    assert one_pass in text
    return text.replace(one_pass, "  float mean0 = 0.0f;\n  for (int e = 0; e < D; ++e) mean0 += seg[e] / D;\n"
                                  "  for (int e = threadIdx.x; e < D; e += blockDim.x) s = stats_push(s, seg[e] - mean0);\n")


WELFORD_FLOAT64 = """// ---- YOUR CODE: from here ----
struct Stats {
  double n, sum, sumsq;
};
__device__ Stats stats_empty() { return {0.0, 0.0, 0.0}; }
__device__ Stats stats_push(Stats s, float v) { return {s.n + 1.0, s.sum + v, s.sumsq + double(v) * v}; }
__device__ Stats stats_merge(Stats a, Stats b) { return {a.n + b.n, a.sum + b.sum, a.sumsq + b.sumsq}; }
__device__ MeanRstd stats_finish(Stats s, float eps) {
  const double mean = s.sum / s.n;
  return {float(mean), rsqrtf(float(s.sumsq / s.n - mean * mean) + eps)};
}
// ---- YOUR CODE: to here ----
"""


# --- 05: the GELU checker's verdicts, without a GPU ---------------------------------------------

def test_gelu_checker_names_what_the_kernel_computes():
    x, b = mc.x_and_bias(37, 115)(torch.Generator().manual_seed(0))
    assert exercises.gelu_diagnosis(F.gelu(x + b), x, b) == exercises.GELU_GOAL
    assert exercises.gelu_diagnosis(x + b, x, b) == "x + bias, without the GELU"
    assert exercises.gelu_diagnosis(F.gelu(x) + b, x, b).startswith("gelu(x) + bias")
    assert "tanh approximation" in exercises.gelu_diagnosis(F.gelu(x + b, approximate="tanh"), x, b)
    assert exercises.gelu_diagnosis(torch.zeros_like(x), x, b) is None
    assert exercises.gelu_verdict(PASSED, exercises.GELU_GOAL).startswith("PASS")
    text = exercises.gelu_verdict(FAILED, "x + bias, without the GELU")
    assert text.startswith("Not yet: trials failed.") and "without the GELU" in text
    assert "matches none of" in exercises.gelu_verdict(FAILED, None)


# --- 06, 1: Welford in one pass ----------------------------------------------------------------

def test_welford_checker_says_why():
    assert exercises.welford_verdict(PASSED, 1e-6, 3e-5, 3e-5).startswith("PASS")
    text = exercises.welford_verdict(FAILED, 1e-6, 5e-3, 3e-5)
    assert text.startswith("Not yet: trials failed.") and "cancels: use Welford" in text
    assert "wrong even on centred data" in exercises.welford_verdict(FAILED, 0.5, 0.5, 3e-5)


def test_welford_checker_data_defeat_the_sum_of_squares_in_float32():
    """The premise of the numeric check, emulated on the CPU: on its data (randn + 50, D = 64), float32
    E[x^2] - E[x]^2 misses the strict tolerance by far; deviations from the mean do not."""
    x, gamma, beta = mc.gn_inputs(37, 1024, offset=exercises.WELFORD_OFFSET, scale=1.0)(torch.Generator().manual_seed(0))
    ref = F.group_norm(x, 16, gamma, beta, EPS)
    v = x.view(37, 16, 64)
    mean = v.sum(-1, keepdim=True) / 64
    sumsq = torch.clamp((v * v).sum(-1, keepdim=True) / 64 - mean * mean, min=0)
    deviations = ((v - v.mean(-1, keepdim=True)) ** 2).mean(-1, keepdim=True)
    out = lambda var, m: ((v - m) * torch.rsqrt(var + EPS)).view(37, 1024) * gamma + beta
    assert (out(sumsq, mean) - ref).abs().max() > 1e-3
    assert (out(deviations, v.mean(-1, keepdim=True)) - ref).abs().max() < 1e-4


def test_welford_digest_is_the_committed_kernels():
    """The checker's record of the given kernel is the file's: an edit of the kernel updates WELFORD_FIXED_SHA256."""
    assert exercises.welford_fixed_digest(WELFORD.read_text()) == exercises.WELFORD_FIXED_SHA256


def test_welford_static_checks_pass_the_starter_and_the_answer():
    """The starter fails on its numbers (the gpu test), not on its text; the answer passes both."""
    assert exercises.welford_static(WELFORD.read_text()) == []
    assert exercises.welford_static(welford_with(WELFORD_ANSWER_REGION)) == []


def test_welford_shortcuts_fail_before_anything_runs():
    two_pass = exercises.welford_static(welford_two_pass())
    assert len(two_pass) == 1 and "kernel around your functions changed" in two_pass[0]
    float64 = exercises.welford_static(welford_with(WELFORD_FLOAT64))
    assert len(float64) == 1 and "float64" in float64[0]
    assert "double" not in exercises.code_only(WELFORD_ANSWER_REGION)
    assert "marks are gone" in exercises.welford_static(WELFORD.read_text().replace(exercises.WELFORD_REGION[0], ""))[0]


def test_the_welford_check_cell_runs_the_static_check():
    cells = [("".join(c["source"])) for c in json.loads((REPO / "notebooks" / NB06).read_text())["cells"]]
    assert any('M.check_exercise("group_norm_stats", exercises.welford_exercise, static=exercises.welford_static)' in c
               for c in cells)


def test_check_exercise_prints_not_yet_for_a_static_problem(capsys, monkeypatch):
    """MemoryChapter.check_exercise stops at the static problems, on any machine, before compiling."""
    chapter = mc.MemoryChapter.__new__(mc.MemoryChapter)
    monkeypatch.setattr(build, "load_kernel", lambda *a, **k: pytest.fail("compiled despite a static problem"))
    chapter.check_exercise("group_norm_stats", lambda m: pytest.fail("ran"), static=lambda text: ["a problem"])
    assert capsys.readouterr().out.startswith("Not yet:\n  - a problem")


# --- 06, 2: problem 94's tail from scratch -------------------------------------------------------

def tail_starter() -> str:
    return notebook_source(NB06, "TAIL_SOURCE")


def test_tail_static_checks_fail_the_starter_and_pass_the_answer():
    assert exercises.tail_static(tail_starter()) == [f"{exercises.TAIL_KERNEL} does nothing yet: write its body"]
    assert exercises.tail_static(TAIL_ANSWER) == []
    renamed = TAIL_ANSWER.replace("int C, int G, float eps", "int C, int G, double eps")
    assert "keep the given signature" in exercises.tail_static(renamed)[0]
    unmarked = TAIL_ANSWER.replace("// @launch\n", "")
    assert "keep the given signature" in exercises.tail_static(unmarked)[0]


def test_tail_checker_refuses_the_starter_before_running_it():
    reports, text = exercises.tail_exercise(lambda *a: pytest.fail("ran the starter"), tail_starter(), device="cpu")
    assert reports == {} and text.startswith("Not yet:") and "does nothing yet" in text


@pytest.mark.parametrize("shortcut", sorted(exercises.TAIL_SHORTCUTS))
def test_tail_checker_data_tell_each_shortcut_from_the_answer(shortcut):
    """At every shape of the checker, on its random gamma, beta and bias, the shortcut misses the strict tolerance."""
    for N, C, G in exercises.TAIL_SHAPES:
        args = exercises.tail_inputs(N, C)(torch.Generator().manual_seed(0))
        right = exercises.tail_reference(G)(*args)
        wrong = exercises.tail_reference(G, **exercises.TAIL_SHORTCUTS[shortcut])(*args)
        assert not torch.allclose(wrong, right, atol=1e-4, rtol=1e-4), (shortcut, N, C, G)


def test_tail_diagnosis_names_the_shortcut_and_the_shapes():
    for name, kw in exercises.TAIL_SHORTCUTS.items():
        fn = lambda x, b, g_, b_, G, kw=kw: exercises.tail_reference(G, **kw)(x, b, g_, b_)
        assert exercises.tail_diagnosis(fn, device="cpu").startswith(name), name

    def only_at_32(x, b, g_, b_, G):  # right where the group is 32 floats, wrong elsewhere
        y = exercises.tail_reference(G)(x, b, g_, b_)
        return y if x.shape[1] // G == 32 else y + 1
    assert exercises.tail_diagnosis(only_at_32, device="cpu").startswith("right for groups of D = 32 and wrong")


def test_tail_checker_refuses_a_launch_that_lets_pytorch_compute():
    def torch_tail(x, bias, gamma, beta, G):
        return F.group_norm(F.mish(F.hardtanh(x + bias)), G, gamma, beta, EPS)
    reports, text = exercises.tail_exercise(torch_tail, TAIL_ANSWER, device="cpu")
    assert reports == {} and text.startswith("Not yet: your function calls PyTorch") and "group_norm" in text


# --- 07, 1: min + bias from scratch --------------------------------------------------------------

def min_bias_starter() -> str:
    return notebook_source(NB07, "MIN_BIAS_SOURCE")


def test_min_bias_static_checks_fail_the_starter_and_pass_the_answer():
    assert exercises.min_bias_static(min_bias_starter()) == [f"{exercises.MIN_BIAS_KERNEL} does nothing yet: write its body"]
    assert exercises.min_bias_static(MIN_BIAS_ANSWER) == []
    assert "keep the given signature" in exercises.min_bias_static(MIN_BIAS_ANSWER.replace("int N, int C", "int C, int N"))[0]


def test_min_bias_checker_refuses_the_starter_before_running_it():
    reports, text = exercises.min_bias_exercise(lambda *a: pytest.fail("ran"), min_bias_starter(), device="cpu")
    assert reports == {} and "does nothing yet" in text


def test_min_bias_checker_data_tell_each_shortcut_from_the_answer():
    for name, shortcut in exercises.MIN_BIAS_SHORTCUTS.items():
        wrong_somewhere = False
        for N, C in exercises.MIN_BIAS_SHAPES:
            x, b = exercises.min_bias_inputs(N, C)(torch.Generator().manual_seed(0))
            out, ref = shortcut(x, b), exercises.min_bias_reference(x, b)
            wrong_somewhere |= out.shape != ref.shape or not torch.equal(out, ref)
        assert wrong_somewhere, name
        fn = lambda x, b, s=shortcut: s(x, b)
        assert exercises.min_bias_diagnosis(fn, device="cpu").startswith(name), name


def test_min_bias_nan_check_tells_fminf_from_torch_min():
    def drops_nan(x, b):  # fminf's minimum: a NaN loses to any number
        return torch.nan_to_num(x, nan=float("inf")).min(dim=1, keepdim=True)[0] + b
    assert exercises.nan_row_check(drops_nan, device="cpu") is not None
    assert exercises.nan_row_check(exercises.min_bias_reference, device="cpu") is None


def test_min_bias_checker_refuses_a_launch_that_lets_pytorch_compute():
    reports, text = exercises.min_bias_exercise(exercises.min_bias_reference, MIN_BIAS_ANSWER, device="cpu")
    assert reports == {} and text.startswith("Not yet: your function calls PyTorch")


def test_scratch_verdict():
    assert exercises.scratch_verdict({"a": PASSED}, [], set(), None, "PASS: yes") == "PASS: yes"
    text = exercises.scratch_verdict({"a": PASSED, "b": FAILED}, [], set(), "without gamma and beta (at D = 23)", "PASS")
    assert text.startswith("Not yet:") and "b: trials failed" in text and "without gamma and beta" in text
    assert exercises.static_verdict(["x"]).startswith("Not yet:")
    assert "needs a GPU" in exercises.static_verdict([])


@pytest.mark.parametrize("notebook, marker", [(NB05, "exercises.gelu_exercise"), (NB06, "exercises.tail_exercise(my_tail94"),
                                              (NB07, "exercises.min_bias_exercise(my_min_bias")])
def test_each_notebook_checks_its_exercise_with_these_checkers(notebook, marker):
    code = ["".join(c["source"]) for c in json.loads((REPO / "notebooks" / notebook).read_text())["cells"]
            if c["cell_type"] == "code"]
    assert any(marker in c for c in code), notebook


def test_no_chapter_renders_the_answers():
    for path in (REPO / "notebooks").glob("*.ipynb"):
        assert "exercise_answers" not in path.read_text(), path.name


# --- they compile ------------------------------------------------------------------------------

def build_answer(name: str, text: str):
    return build.load_source(name, text, scratch_dir=SCRATCH)


@pytest.mark.compile
def test_gelu_compiles_as_committed():
    assert [e.name for e in build.exported_functions(build.kernel_source("bias_gelu", EXERCISES))] == ["bias_gelu"]
    assert callable(build.load_kernel("bias_gelu", kernels_dir=EXERCISES).bias_gelu)


@pytest.mark.compile
def test_welford_starter_and_answer_compile():
    assert callable(build.load_kernel("group_norm_stats", kernels_dir=EXERCISES).group_norm)
    assert callable(build_answer("group_norm_stats", welford_with(WELFORD_ANSWER_REGION)).group_norm)


@pytest.mark.compile
@pytest.mark.parametrize("notebook, name, kernel, answer", [
    (NB06, "TAIL_SOURCE", exercises.TAIL_KERNEL, TAIL_ANSWER),
    (NB07, "MIN_BIAS_SOURCE", exercises.MIN_BIAS_KERNEL, MIN_BIAS_ANSWER)])
def test_from_scratch_starter_and_answer_compile(notebook, name, kernel, answer):
    # the starter under the chapter's own name and folder, as its cell builds it (tests/scratch_builds.py)
    chapter_name = {"TAIL_SOURCE": "tail94", "MIN_BIAS_SOURCE": "min_bias"}[name]
    starter = build.load_source(chapter_name, notebook_source(notebook, name))
    assert isinstance(getattr(starter, kernel), launch.Launcher)  # launched as kernel[grid, block, smem](...)
    assert isinstance(getattr(build_answer(f"answer_{kernel}", answer), kernel), launch.Launcher)


# --- on a GPU: the starters fail, the answers pass, the shortcuts fail ---------------------------

def solved_gelu():
    notebook, export, todo, solution = GELU
    text = (EXERCISES / "bias_gelu.cu").read_text()
    assert todo in text, "bias_gelu.cu no longer starts where this test expects"
    return build_answer("bias_gelu", text.replace(todo, solution))


@pytest.mark.gpu
def test_gelu_starter_fails_and_answer_passes():
    rep, text = exercises.gelu_exercise(build.load_kernel("bias_gelu", kernels_dir=EXERCISES))
    assert not rep.ok and "trials" in rep.failed and text.startswith("Not yet") and "without the GELU" in text
    rep, text = exercises.gelu_exercise(solved_gelu())
    assert rep.ok and text.startswith("PASS"), text


@pytest.mark.gpu
def test_welford_starter_fails_and_answer_passes():
    rep, text = exercises.welford_exercise(build.load_kernel("group_norm_stats", kernels_dir=EXERCISES))
    assert not rep.ok and "trials" in rep.failed, str(rep)
    assert text.startswith("Not yet") and "cancels: use Welford" in text, text
    rep, text = exercises.welford_exercise(build_answer("group_norm_stats", welford_with(WELFORD_ANSWER_REGION)))
    assert rep.ok and text.startswith("PASS"), text


def tail_launcher(module, threads=128):
    def tail(x, bias, gamma, beta, G):
        y = torch.empty_like(x)
        module.tail94_kernel[(x.shape[0] * G,), (threads,), 3 * (threads // 32) * 4](x, bias, gamma, beta, y, x.shape[1], G, EPS)
        return y
    return tail


TAIL_SHORTCUT_EDITS = {  # a shortcut as an edit of the answer: (old, new, what the verdict names)
    "hardtanh [0, 20]": ("fminf(fmaxf(seg[e] + bias[c0 + e], -1.0f), 1.0f)", "fminf(fmaxf(seg[e] + bias[c0 + e], 0.0f), 20.0f)",
                         "[0, 20]"),
    "gamma and beta ignored": (" * gamma[c0 + e] + beta[c0 + e];", ";", "without gamma and beta"),
    "a value per thread": ("e < D; e += blockDim.x", "e < D && e < blockDim.x; e += blockDim.x", "D = 300"),
}


def shortcut_build(prefix: str, answer: str, edits: dict, shortcut: str) -> tuple[str, str]:
    """(name, text) of a shortcut: the answer with one edit (tests/scratch_builds.py prebuilds them on a GPU)."""
    old, new, _ = edits[shortcut]
    return prefix + re.sub(r"\W+", "_", shortcut), answer.replace(old, new)


@pytest.mark.gpu
def test_tail_answer_passes():
    reports, text = exercises.tail_exercise(tail_launcher(build_answer(f"answer_{exercises.TAIL_KERNEL}", TAIL_ANSWER)),
                                            TAIL_ANSWER)
    assert all(r.ok for r in reports.values()) and text.startswith("PASS"), text


@pytest.mark.gpu
@pytest.mark.parametrize("shortcut", sorted(TAIL_SHORTCUT_EDITS))
def test_tail_shortcuts_fail(shortcut):
    old, new, named = TAIL_SHORTCUT_EDITS[shortcut]
    assert TAIL_ANSWER.count(old) >= 1
    name, text = shortcut_build("tail94_", TAIL_ANSWER, TAIL_SHORTCUT_EDITS, shortcut)
    _, verdict = exercises.tail_exercise(tail_launcher(build_answer(name, text)), text)
    assert verdict.startswith("Not yet") and named in verdict, verdict


def min_bias_launcher(module, threads=256):
    def min_bias(x, bias):
        out = torch.empty(1, x.shape[1], x.shape[0], 1, device=x.device)
        module.min_bias_kernel[(x.shape[0],), (threads,), (threads // 32) * 4](x, bias, out, x.shape[0], x.shape[1])
        return out
    return min_bias


MIN_BIAS_SHORTCUT_EDITS = {
    "(N, C) layout": ("out[static_cast<long long>(c) * N + n]", "out[static_cast<long long>(n) * C + c]", "(N, C)"),
    "fminf drops NaN": ("return (a < b || a != a) ? a : b;", "return fminf(a, b);", "NaN"),
    "a value per thread": ("c < C; c += blockDim.x) m =", "c < C && c < blockDim.x; c += blockDim.x) m =", "Not yet"),
}


@pytest.mark.gpu
def test_min_bias_answer_passes():
    reports, text = exercises.min_bias_exercise(
        min_bias_launcher(build_answer(f"answer_{exercises.MIN_BIAS_KERNEL}", MIN_BIAS_ANSWER)), MIN_BIAS_ANSWER)
    assert all(r.ok for r in reports.values()) and text.startswith("PASS"), text


@pytest.mark.gpu
@pytest.mark.parametrize("shortcut", sorted(MIN_BIAS_SHORTCUT_EDITS))
def test_min_bias_shortcuts_fail(shortcut):
    old, new, named = MIN_BIAS_SHORTCUT_EDITS[shortcut]
    assert old in MIN_BIAS_ANSWER
    name, text = shortcut_build("min_bias_", MIN_BIAS_ANSWER, MIN_BIAS_SHORTCUT_EDITS, shortcut)
    _, verdict = exercises.min_bias_exercise(min_bias_launcher(build_answer(name, text)), text)
    assert verdict.startswith("Not yet") and named in verdict, verdict


@pytest.mark.gpu
def test_the_notebook_launch_cells_run_the_answers():
    """The notebooks' own launch functions (my_tail94, my_min_bias), on the answers' modules, pass the checkers."""
    for notebook, fn, mod_name, answer, kernel, run in [
            (NB06, "my_tail94", "tail_mod", TAIL_ANSWER, f"answer_{exercises.TAIL_KERNEL}", exercises.tail_exercise),
            (NB07, "my_min_bias", "min_bias_mod", MIN_BIAS_ANSWER, f"answer_{exercises.MIN_BIAS_KERNEL}",
             exercises.min_bias_exercise)]:
        namespace = {"torch": torch, "EPS": EPS, "S": type("S", (), {"can_compile": False})(),
                     "build": build, "TAIL_SOURCE": "", "MIN_BIAS_SOURCE": ""}
        source = next("".join(c["source"]) for c in json.loads((REPO / "notebooks" / notebook).read_text())["cells"]
                      if c["cell_type"] == "code" and f"def {fn}(" in "".join(c["source"]))
        exec(compile(source, notebook, "exec"), namespace)
        namespace[mod_name] = build_answer(kernel, answer)
        _, text = run(namespace[fn], answer)
        assert text.startswith("PASS"), (notebook, text)
