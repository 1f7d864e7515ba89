"""Notebook 04's exercise: an epilogue of your own (kernels/exercises/gemm_epilogue_relu.cu) and its checker.

- The checker's logic is the notebook's own cell, run here without a GPU: it names the expression
  an output computes (the ReLU forgotten, the ReLU before the bias, ...) and says PASS or "Not yet".
- compile: the exercise compiles as committed, exporting linear_relu.
- gpu: the committed starting point fails the checker the intended way (it computes
  x @ w.T + bias, without the ReLU), and a solved copy (the TODO done, built under
  build/exercise_solutions/) passes. The inputs repeat the notebook's checker cell (odd_operands).
"""
import math

import pytest
import torch
import torch.nn.functional as F

from utils import build, check

from kernel_tests import fake_report, notebook_cell

EXERCISES = build.KERNELS_DIR / "exercises"
NAME = "gemm_epilogue_relu"
NOTEBOOK = "04_bias_fusion.ipynb"
SOLVED_DIR = build.build_root_dir().parent / "exercise_solutions"  # a fixed path, so the solved build is cached
TODO = "    return v;  // TODO: the ReLU\n"
SOLUTION = "    return fmaxf(v, 0.0f);\n"


def odd_operands(generator, M=37, N=129, K=65):  # notebook 04's checker inputs
    return [torch.rand(M, K, generator=generator), (torch.rand(N, K, generator=generator) * 2 - 1) / math.sqrt(K),
            (torch.rand(N, generator=generator) * 2 - 1) / math.sqrt(K), torch.randn(N, generator=generator)]


def report(*checks: tuple[str, str]) -> check.CheckReport:
    return fake_report("linear_relu vs relu(linear)", *checks)


def harness(fn) -> check.CheckReport:
    return check.check_fn(fn, lambda x, w, b: F.relu(F.linear(x, w, b)), lambda g: odd_operands(g)[:3],
                          name="exercise", contiguous_only=True)


def solved():
    """The exercise with its TODO done, compiled from build/exercise_solutions/gemm_epilogue_relu.cu."""
    source = (EXERCISES / f"{NAME}.cu").read_text()
    assert TODO in source, "the starting point no longer has its TODO as this test knows it: update TODO/SOLUTION"
    SOLVED_DIR.mkdir(parents=True, exist_ok=True)
    path = SOLVED_DIR / f"{NAME}.cu"
    text = source.replace(TODO, SOLUTION)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return build.load_kernel(NAME, kernels_dir=SOLVED_DIR)


# --- the checker, without a GPU -----------------------------------------------------------

def test_the_diagnosis_names_each_expression():
    cell = notebook_cell(NOTEBOOK, "relu_diagnosis")
    diagnose, candidates = cell["relu_diagnosis"], cell["RELU_CANDIDATES"]
    x, w, b, _ = odd_operands(torch.Generator().manual_seed(0))
    lin = (x.double() @ w.double().T)
    assert (lin + b.double() < 0).any() and (lin + b.double() > 0).any()  # the ReLU matters on these inputs
    for name, expression in candidates.items():
        assert diagnose(expression(lin, b.double()).float(), x, w, b) == name
    assert diagnose(torch.zeros(37, 129), x, w, b) is None
    assert diagnose(torch.zeros(37, 128), x, w, b) is None  # a wrong shape matches nothing


def test_the_verdict_says_pass_or_not_yet_with_what_the_kernel_computes():
    cell = notebook_cell(NOTEBOOK, "relu_verdict")
    verdict, goal = cell["relu_verdict"], cell["RELU_GOAL"]
    assert verdict(report(("trials", "pass"), ("stream", "skip")), goal).startswith("PASS")
    text = verdict(report(("trials", "fail"), ("precision", "fail")), "x @ w.T + bias, without the ReLU")
    assert text.startswith("Not yet: trials, precision failed.") and "computes x @ w.T + bias, without the ReLU" in text
    assert "matches none of" in verdict(report(("trials", "fail")), None)
    # The harness failed for another reason (a stream, say) while the values are right: no wrong expression named.
    assert verdict(report(("stream", "fail")), goal) == "Not yet: stream failed."


# --- it compiles ----------------------------------------------------------------------------

def test_exports():
    (export,) = build.exported_functions(build.kernel_source(NAME, EXERCISES))
    assert export.prototype == "torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor bias)"


@pytest.mark.compile
def test_compiles_as_committed():
    assert callable(build.load_kernel(NAME, kernels_dir=EXERCISES).linear_relu)


# --- on a GPU: the starting point fails as intended, the solution passes --------------------

@pytest.mark.gpu
def test_the_starting_point_forgets_the_relu_and_the_solution_passes(cuda):
    cell = notebook_cell(NOTEBOOK, "relu_verdict")
    verdict, diagnose, goal = cell["relu_verdict"], cell["relu_diagnosis"], cell["RELU_GOAL"]
    x, w, b = [t.to(cuda) for t in odd_operands(torch.Generator().manual_seed(0))[:3]]

    start = build.load_kernel(NAME, kernels_dir=EXERCISES).linear_relu
    first = harness(start)
    assert "trials" in first.failed, str(first)
    assert diagnose(start(x, w, b), x, w, b) == "x @ w.T + bias, without the ReLU"
    assert verdict(first, diagnose(start(x, w, b), x, w, b)).startswith("Not yet")

    done = solved().linear_relu
    second = harness(done)
    assert second.ok, str(second)
    assert diagnose(done(x, w, b), x, w, b) == goal
    assert verdict(second, goal).startswith("PASS")


@pytest.mark.gpu
def test_the_launcher_refuses_a_bad_bias(cuda):
    fn = build.load_kernel(NAME, kernels_dir=EXERCISES).linear_relu
    x, w = torch.rand(4, 8, device=cuda), torch.rand(5, 8, device=cuda)
    for bad, message in [(torch.rand(4, device=cuda), r"bias must have shape \[N\] = \[5\]"),
                         (torch.rand(5, device=cuda).double(), "float32"), (torch.rand(5), "CUDA")]:
        with pytest.raises(RuntimeError, match=message):
            fn(x, w, bad)
