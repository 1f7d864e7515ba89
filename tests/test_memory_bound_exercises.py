"""The exercises of notebooks 05-07 (kernels/exercises/bias_gelu.cu, group_norm_stats.cu,
broadcast_write.cu) and their checkers.

- The checkers are utils.chapters.memory's (gelu_exercise, welford_exercise, layout_exercise), which
  the notebooks' checker cells call; their verdicts are tested here without a GPU: they name what an
  output computes and say PASS or "Not yet" when they should.
- compile: every exercise compiles as committed and exports what its notebook calls.
- gpu: each committed starting point fails its checker the way its notebook says (the GELU left
  out; the sum of squares cancelling on data around 50; the (N, C) layout), and a solved copy
  (the TODO done, built under build/exercise_solutions/) passes, through the same checkers.
"""

import json

import pytest
import torch
import torch.nn.functional as F

from utils import REPO, build, check
from utils.chapters import memory as mc
from utils.chapters import memory_exercises as exercises

from kernel_tests import fake_report

EXERCISES = build.KERNELS_DIR / "exercises"
SOLVED_DIR = build.build_root_dir().parent / "exercise_solutions"  # a fixed path, so solved builds are cached
EPS = 1e-5

# name: (notebook, export, the TODO as committed, what a solution puts there)
EXERCISE = {
    "bias_gelu": ("05_fused_activations.ipynb", "bias_gelu",
                  "  return v;  // TODO: GELU, as F.gelu computes it\n",
                  "  return 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f));\n"),
    "group_norm_stats": ("06_groupnorm_reduction.ipynb", "group_norm",
                         None,  # a span: from the TODO line to the return (see solved())
                         "  Welford w = {0.0f, 0.0f, 0.0f};\n"
                         "  for (int e = threadIdx.x; e < D; e += blockDim.x) w = welford_merge(w, Welford{1.0f, seg[e], 0.0f});\n"
                         "  w = block_welford(w, wscratch);\n"
                         "  return {w.mean, rsqrtf(w.m2 / w.n + eps)};\n"),
    "broadcast_write": ("07_broadcasting_pitfall.ipynb", "min_bias_broadcast",
                        "    const int64_t n = i / C;  // TODO: which (c, n) does flat index i of a (1, C, N, 1) tensor hold?\n"
                        "    const int64_t c = i % C;  // TODO\n",
                        "    const int64_t c = i / N;\n    const int64_t n = i % N;\n"),
}
WELFORD_SPAN = ("  // TODO: Welford instead of sum and sum of squares.\n", "  return {mean, rsqrtf(var + eps)};\n")


def report(*checks: tuple[str, str]) -> check.CheckReport:
    return fake_report("exercise vs reference", *checks)


FAILED = report(("trials", "fail"), ("stream", "pass"))
PASSED = report(("trials", "pass"), ("stream", "pass"))


def starting_point(name: str):
    return build.load_kernel(name, kernels_dir=EXERCISES)


def solved(name: str):
    """The exercise with its TODO done, compiled from build/exercise_solutions/<name>.cu."""
    source = (EXERCISES / f"{name}.cu").read_text()
    _, _, todo, solution = EXERCISE[name]
    if todo is None:
        first, last = WELFORD_SPAN
        assert first in source and last in source, f"{name}'s TODO span changed: update WELFORD_SPAN"
        start, end = source.index(first), source.index(last) + len(last)
        text = source[:start] + solution + source[end:]
    else:
        assert todo in source, f"the starting point of {name} no longer has its TODO as this test knows it"
        text = source.replace(todo, solution)
    SOLVED_DIR.mkdir(parents=True, exist_ok=True)
    path = SOLVED_DIR / f"{name}.cu"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return build.load_kernel(name, kernels_dir=SOLVED_DIR)


# --- the verdicts, without a GPU (the checkers are utils.chapters.memory's, which the notebooks call) ---------

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


def test_welford_checker_says_why():
    assert exercises.welford_verdict(PASSED, 1e-6, 3e-5, 3e-5).startswith("PASS")
    text = exercises.welford_verdict(FAILED, 1e-6, 5e-3, 3e-5)
    assert text.startswith("Not yet: trials failed.") and "cancels: use Welford" in text
    assert "wrong even on centred data" in exercises.welford_verdict(FAILED, 0.5, 0.5, 3e-5)


def test_welford_checker_data_defeat_the_sum_of_squares_in_float32():
    """The premise of notebook 06's checker, emulated on the CPU: on its data (randn + 50, D = 64), float32
    E[x^2] - E[x]^2 misses the strict tolerance by far, the two-pass (Welford) form does not."""
    x, gamma, beta = mc.gn_inputs(37, 1024, offset=exercises.WELFORD_OFFSET, scale=1.0)(torch.Generator().manual_seed(0))
    ref = F.group_norm(x, 16, gamma, beta, EPS)
    v = x.view(37, 16, 64)
    mean = v.sum(-1, keepdim=True) / 64
    sumsq = torch.clamp((v * v).sum(-1, keepdim=True) / 64 - mean * mean, min=0)
    two_pass = ((v - v.mean(-1, keepdim=True)) ** 2).mean(-1, keepdim=True)
    out = lambda var, m: ((v - m) * torch.rsqrt(var + EPS)).view(37, 1024) * gamma + beta
    assert (out(sumsq, mean) - ref).abs().max() > 1e-3
    assert (out(two_pass, v.mean(-1, keepdim=True)) - ref).abs().max() < 1e-4


def test_layout_checker_names_the_layout():
    m, b = mc.rowmin_and_bias(37, 115)(torch.Generator().manual_seed(0))
    assert exercises.layout_diagnosis(m + b, m, b) == exercises.LAYOUT_GOAL
    wrong = (m.view(-1, 1) + b.view(1, -1)).reshape(1, 115, 37, 1)
    assert exercises.layout_diagnosis(wrong, m, b).startswith("the (N, C) layout")
    assert exercises.layout_diagnosis(torch.zeros(1, 115, 37, 1), m, b) is None
    assert exercises.layout_verdict(PASSED, exercises.LAYOUT_GOAL).startswith("PASS")
    assert "c * N + n" in exercises.layout_verdict(FAILED, exercises.layout_diagnosis(wrong, m, b))


@pytest.mark.parametrize("notebook, run", [("05_fused_activations.ipynb", "gelu_exercise"),
                                           ("06_groupnorm_reduction.ipynb", "welford_exercise"),
                                           ("07_broadcasting_pitfall.ipynb", "layout_exercise")])
def test_each_notebook_checks_its_exercise_with_these_checkers(notebook, run):
    code = [c for c in json.loads((REPO / "notebooks" / notebook).read_text())["cells"] if c["cell_type"] == "code"]
    assert any("check_exercise(" in "".join(c["source"]) and run in "".join(c["source"]) for c in code), notebook


# --- they compile -------------------------------------------------------------------------

@pytest.mark.compile
@pytest.mark.parametrize("name", sorted(EXERCISE))
def test_each_exercise_compiles_as_committed(name):
    _, export, _, _ = EXERCISE[name]
    assert [e.name for e in build.exported_functions(build.kernel_source(name, EXERCISES))] == [export]
    assert callable(getattr(starting_point(name), export))


# --- on a GPU: the starting points fail the intended way, the solutions pass --------------

RUNS = {"bias_gelu": (exercises.gelu_exercise, "without the GELU"),
        "group_norm_stats": (exercises.welford_exercise, "cancels: use Welford"),
        "broadcast_write": (exercises.layout_exercise, "the (N, C) layout")}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(EXERCISE))
def test_starting_point_fails_the_intended_way(name):
    run, why = RUNS[name]
    rep, text = run(starting_point(name))
    assert not rep.ok and "trials" in rep.failed, str(rep)
    assert text.startswith("Not yet") and why in text, text


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(EXERCISE))
def test_solution_passes(name):
    run, _ = RUNS[name]
    rep, text = run(solved(name))
    assert rep.ok, str(rep)
    assert text.startswith("PASS"), text
