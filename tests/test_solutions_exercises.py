"""Notebook 10's exercises (utils.chapters.solution_exercises): the untouched starting point, read from the
notebook, is Not yet; the reference answer in tests/exercise_answers/ passes; the known shortcuts fail.

Exercise 1 asks for problem 62's tail backward written from scratch: autograd (torch.autograd, torch.func),
PyTorch's and the workbook's backward ops, the workbook's op itself, a float32 detour and finite differences
are each a shortcut the checker refuses. Exercise 2 asks for problem 75's fake implementation: the op's own
(called on the fake tensors) is the shortcut. No cell before an exercise shows its answer."""
import json

import pytest
import torch
import torch.nn.functional as F

from utils import REPO, ops
from utils.chapters import solution_exercises as exercises

from kernel_tests import notebook_cell

NB10 = "10_fused_solutions.ipynb"
ANSWERS = REPO / "tests" / "exercise_answers"


def answer(name: str, function: str):
    namespace: dict = {}
    exec(compile((ANSWERS / name).read_text(), name, "exec"), namespace)
    return namespace[function]


def cells() -> list[str]:
    nb = json.loads((REPO / "notebooks" / NB10).read_text())
    return ["".join(c["source"]) for c in nb["cells"]]


# --- exercise 1: the tail's backward, from scratch ----------------------------------------------------------

def test_the_backward_starting_point_is_not_yet():
    draft = notebook_cell(NB10, "my_backward")["my_backward"]
    verdict = exercises.backward_verdict(draft)
    assert verdict.startswith("Not yet") and "off by" in verdict, verdict
    assert draft.__code__.co_code != answer("10_my_backward.py", "my_backward").__code__.co_code


def test_the_backward_reference_answer_passes():
    assert exercises.backward_verdict(answer("10_my_backward.py", "my_backward")).startswith("PASS")


def test_each_todo_left_undone_is_not_yet():
    """The answer with any one of its three steps put back to the starting point's is still Not yet."""
    source = (ANSWERS / "10_my_backward.py").read_text()
    for step, undone in (("dy = grad + grad", "dy = grad"),
                         ("dn = torch.where(n > 0, dy, negative_slope * dy)", "dn = dy"),
                         ("dx = rstd * (dxhat", "dx = rstd * dxhat + 0 * (dxhat")):
        assert step in source
        namespace: dict = {}
        exec(source.replace(step, undone), namespace)
        assert exercises.backward_verdict(namespace["my_backward"]).startswith("Not yet"), step


def _autograd(grad, x, G, gamma, beta, eps, slope):
    with torch.enable_grad():
        leaves = [t.clone().requires_grad_() for t in (x, gamma, beta)]
        y = F.leaky_relu(F.group_norm(leaves[0], G, leaves[1], leaves[2], eps), slope)
        return torch.autograd.grad(y + y, leaves, grad)


def _backward_call(grad, x, G, gamma, beta, eps, slope):
    with torch.enable_grad():
        leaves = [t.clone().requires_grad_() for t in (x, gamma, beta)]
        y = F.leaky_relu(F.group_norm(leaves[0], G, leaves[1], leaves[2], eps), slope)
        (y + y).backward(grad)
        return tuple(t.grad for t in leaves)


def _torch_func(grad, x, G, gamma, beta, eps, slope):
    def tail(x, g, b):
        y = F.leaky_relu(F.group_norm(x, G, g, b, eps), slope)
        return y + y

    with torch.enable_grad():
        return torch.func.vjp(tail, x, gamma, beta)[1](grad)


def _aten_backward_ops(grad, x, G, gamma, beta, eps, slope):  # the chapter's first draft: PyTorch's backward ops
    n = F.group_norm(x, G, gamma, beta, eps)
    dn = torch.ops.aten.leaky_relu_backward(grad + grad, n, slope, False)
    N, C = x.shape
    _, mean, rstd = torch.ops.aten.native_group_norm(x, gamma, beta, N, C, 1, G, eps)
    return torch.ops.aten.native_group_norm_backward(dn, x, mean, rstd, gamma, N, C, 1, G, [True] * 3)


def _the_ops_reference(grad, x, G, gamma, beta, eps, slope):
    out = ops.GROUP_NORM_LEAKY_RELU_X2_BACKWARD.reference(grad.float(), x.float(), G, gamma.float(), beta.float(),
                                                           eps, slope)
    return tuple(t.double() for t in out[:3])


def _the_op(grad, x, G, gamma, beta, eps, slope):
    out = torch.ops.workbook.group_norm_leaky_relu_x2_backward(grad.float(), x.float(), G, gamma.float(),
                                                               beta.float(), eps, slope)
    return tuple(t.double() for t in out[:3])


def _float32(grad, x, G, gamma, beta, eps, slope):
    mine = answer("10_my_backward.py", "my_backward")
    return tuple(t.double() for t in mine(grad.float(), x.float(), G, gamma.float(), beta.float(), eps, slope))


def _finite_differences(grad, x, G, gamma, beta, eps, slope, h=1e-3):
    """A five-point difference quotient of <grad, out> for every element: accurate, and thousands of forwards."""
    def loss(args):
        y = F.leaky_relu(F.group_norm(args[0], G, args[1], args[2], eps), slope)
        return ((y + y) * grad).sum()

    args, grads = [x, gamma, beta], []
    for i, t in enumerate(args):
        d = torch.zeros_like(t)
        for k in range(t.numel()):
            def at(step):
                moved = list(args)
                e = torch.zeros_like(t)
                e.view(-1)[k] = step
                moved[i] = t + e
                return loss(moved)
            d.view(-1)[k] = (-at(2 * h) + 8 * at(h) - 8 * at(-h) + at(-2 * h)) / (12 * h)
        grads.append(d)
    return tuple(grads)


@pytest.mark.parametrize("shortcut, says", [
    (_autograd, "autograd"), (_backward_call, "autograd"), (_torch_func, "autograd"),
    (_aten_backward_ops, "aten::leaky_relu_backward"), (_the_ops_reference, "backward"),
    (_the_op, "workbook::group_norm_leaky_relu_x2_backward"), (_float32, "off by"),
    (_finite_differences, "over 2000 operators"),
], ids=lambda v: getattr(v, "__name__", "")[1:] or None)
def test_the_backward_shortcuts_are_not_yet(shortcut, says):
    verdict = exercises.backward_verdict(shortcut)
    assert verdict.startswith("Not yet") and says in verdict, verdict


def test_the_backward_checker_says_what_is_off_without_the_formula():
    draft = notebook_cell(NB10, "my_backward")["my_backward"]
    verdict = exercises.backward_verdict(draft)
    assert not any(word in verdict for word in ("grad + grad", "2 * grad", "twice", "torch.where", "mean(")), verdict
    assert exercises.backward_verdict(lambda *a: None).startswith("Not yet: my_backward must return three tensors")
    assert "raised ZeroDivisionError" in exercises.backward_verdict(lambda *a: 1 / 0)
    assert "keep the float64" in exercises.backward_verdict(lambda g, x, G, ga, b, e, s: (x.float(), ga.float(), b.float()))


def test_the_ops_own_reference_still_matches_what_the_checker_holds_answers_to():
    """The checker's float64 reference and the op's CPU implementation agree (in float32): the exercise asks for
    what the op computes."""
    x, gamma, beta, grad = (t.float() for t in exercises._tail_args(16, 64, seed=1))
    want = exercises.tail_gradients(x, 4, gamma, beta, 1e-5, 0.01, grad)
    got = ops.GROUP_NORM_LEAKY_RELU_X2_BACKWARD.reference(grad, x, 4, gamma, beta, 1e-5, 0.01)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_no_cell_before_the_exercises_shows_the_backward_they_ask_for():
    """Neither the op's backward reference nor the kernel's tail (LeakyReluX2Tail) is rendered anywhere in the
    chapter, and nothing before the exercise says what y + y does to the gradient."""
    text = cells()
    exercise = next(i for i, c in enumerate(text) if c.startswith("## Your turn"))
    assert not any("_group_norm_leaky_relu_x2_backward_reference" in c for c in text)
    before = "\n".join(text[:exercise])
    assert "LeakyReluX2Tail" not in before and "grad + grad" not in before and "twice, LeakyReLU" not in before


# --- exercise 2: the fake, and the op's own as its shortcut --------------------------------------------------

def test_the_fake_reference_answer_passes_and_the_starting_point_does_not():
    assert exercises.fake_verdict(answer("10_my_fake.py", "my_fake")).startswith("PASS")
    assert exercises.fake_verdict(notebook_cell(NB10, "my_fake")["my_fake"]).startswith("Not yet")


@pytest.mark.parametrize("call", [
    lambda x, G, gamma, beta, eps, bias: ops.group_norm_min_bias(x, G, gamma, beta, eps, bias),
    lambda x, G, gamma, beta, eps, bias: torch.ops.workbook.group_norm_min_bias(x, G, gamma, beta, eps, bias),
])
def test_the_fake_shortcut_of_calling_the_op_is_not_yet(call):
    verdict = exercises.fake_verdict(call)
    assert verdict.startswith("Not yet: my_fake must say the shape itself") and "workbook::" in verdict, verdict
