"""The memory-bound chapters' exercise checkers (notebooks 05, 06 and 07): GELU (05), Welford's GroupNorm (06) and
the broadcast layout of 75's min + bias (07). Each diagnoses what the reader's kernel computed and says "Not yet"
until it is right. Tested in tests/test_memory_bound_exercises.py.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from utils import check
from utils.chapters import session as chapter
from utils.chapters.memory import EPS, gn_inputs, rowmin_and_bias, x_and_bias

# --------------------------------------------------------------------------- the exercises' checkers

GELU_CANDIDATES = {
    "gelu(x + bias)": lambda x, b: F.gelu(x + b),
    "x + bias, without the GELU": lambda x, b: x + b,
    "gelu(x) + bias: the GELU before the bias": lambda x, b: F.gelu(x) + b,
    "gelu(x + bias) with the tanh approximation (F.gelu's default is the exact erf form)":
        lambda x, b: F.gelu(x + b, approximate="tanh"),
    "gelu(x), without the bias": lambda x, b: F.gelu(x),
}
GELU_GOAL = "gelu(x + bias)"


def _first_match(out, candidates: dict, inputs: tuple, same) -> str | None:
    """The name of the first candidate whose output on `inputs` has out's shape and is `same` as out."""
    for name, candidate in candidates.items():
        ref = candidate(*inputs)
        if out.shape == ref.shape and same(out, ref):
            return name
    return None


def gelu_diagnosis(out, x, bias):
    """Which GELU_CANDIDATES expression `out` equals at the strict tier (float64 references), or None."""
    out, x, bias = (t.detach().cpu().double() for t in (out, x, bias))
    tier = check.TIERS["strict"]
    return _first_match(out, GELU_CANDIDATES, (x, bias),
                        lambda a, b: torch.allclose(a, b, atol=tier.atol, rtol=tier.rtol))


def gelu_verdict(report, diagnosis):
    """PASS when the harness found nothing wrong; else "Not yet:", what failed, and what the kernel computes."""
    return chapter.diagnosis_verdict(report, diagnosis, goal=GELU_GOAL,
                                     passed="PASS: bias_gelu is gelu(x + bias), every check passed.",
                                     none_matched="the output matches none of: " + "; ".join(GELU_CANDIDATES) + ".",
                                     wrong="your kernel computes {diagnosis}.")


def gelu_exercise(module):
    """Notebook 05's checker: the harness on module.bias_gelu at 37 x 115, and what the kernel computes."""
    report = check.check_fn(module.bias_gelu, lambda x, b: F.gelu(x + b), x_and_bias(37, 115), name="your bias_gelu",
                            contiguous_only=True)
    x, b = (t.cuda() for t in x_and_bias(37, 115)(torch.Generator().manual_seed(0)))
    return report, gelu_verdict(report, gelu_diagnosis(module.bias_gelu(x, b), x, b))


WELFORD_OFFSET = 50.0  # notebook 06's checker data: randn + 50


def welford_verdict(report, err_centred, err_offset, err_torch):
    """PASS when the harness found nothing wrong on data far from zero; else "Not yet:" and why. The errors are
    max |out - float64| of the kernel on centred data, on offset data, and of F.group_norm on the offset data."""
    if report.ok:
        return f"PASS: your statistics survive data around {WELFORD_OFFSET:g} (max error {err_offset:.1e}, F.group_norm {err_torch:.1e})."
    lines = [f"Not yet: {', '.join(report.failed)} failed."]
    if err_offset > 10 * max(err_torch, 1e-7) and err_centred <= 1e-4:
        lines.append(f"  - right on centred data (max error {err_centred:.1e}) but not around {WELFORD_OFFSET:g}: "
                     f"{err_offset:.1e} against F.group_norm's {err_torch:.1e}. E[x^2] - E[x]^2 cancels: use Welford.")
    elif err_centred > 1e-4:
        lines.append(f"  - wrong even on centred data (max error {err_centred:.1e}): check the mean, the variance "
                     "(biased: / D), eps inside the root and gamma/beta per channel.")
    else:
        lines.append(f"  - max error {err_offset:.1e} around {WELFORD_OFFSET:g}, F.group_norm's {err_torch:.1e}: "
                     "see the report above for what failed.")
    return "\n".join(lines)


def welford_exercise(module, N=37, C=1024, G=16):
    """Notebook 06's checker: the harness on module.group_norm on data around WELFORD_OFFSET (D = 64), and the
    errors against float64 on centred and on offset data, next to F.group_norm's."""
    run = lambda x, g_, b_: module.group_norm(x, G, g_, b_, EPS)
    inputs = lambda offset: gn_inputs(N, C, offset=offset, scale=1.0)
    report = check.check_fn(run, lambda x, g_, b_: F.group_norm(x, G, g_, b_, EPS), inputs(WELFORD_OFFSET),
                            name="your group_norm", contiguous_only=True)
    errors = []
    for offset in (0.0, WELFORD_OFFSET):
        x, g_, b_ = (t.cuda() for t in inputs(offset)(torch.Generator().manual_seed(0)))
        exact = F.group_norm(x.double(), G, g_.double(), b_.double(), EPS)
        errors.append((run(x, g_, b_).double() - exact).abs().max().item())
    err_torch = (F.group_norm(x, G, g_, b_, EPS).double() - exact).abs().max().item()
    return report, welford_verdict(report, errors[0], errors[1], err_torch)


LAYOUTS = {
    "(1, C, N, 1): out[0, c, n, 0] = rowmin[n] + bias[c]":
        lambda m, b: m.view(1, 1, -1, 1) + b.view(1, -1, 1, 1),
    "the (N, C) layout, sample-major, reshaped to (1, C, N, 1)":
        lambda m, b: (m.view(-1, 1) + b.view(1, -1)).reshape(1, b.numel(), m.numel(), 1),
}
LAYOUT_GOAL = "(1, C, N, 1): out[0, c, n, 0] = rowmin[n] + bias[c]"


def layout_diagnosis(out, rowmin, bias):
    """Which LAYOUTS entry `out` equals (exactly: the kernel only adds), or None."""
    out, rowmin, bias = (t.detach().cpu() for t in (out, rowmin, bias))
    return _first_match(out, LAYOUTS, (rowmin, bias), torch.equal)


def layout_verdict(report, diagnosis):
    """PASS when the harness found nothing wrong; else "Not yet:", what failed, and which layout was written."""
    return chapter.diagnosis_verdict(report, diagnosis, goal=LAYOUT_GOAL,
                                     passed="PASS: every (c, n) in its place, every check passed.",
                                     none_matched="the values match neither layout: " + "; ".join(LAYOUTS) + ".",
                                     wrong="your kernel writes {diagnosis}: element (c, n) of a contiguous "
                                           "(1, C, N, 1) tensor is at flat index c * N + n.")


def layout_exercise(module):
    """Notebook 07's checker: the harness on module.min_bias_broadcast at N = 37, C = 115, and the layout written."""
    report = check.check_fn(module.min_bias_broadcast, torch.add, rowmin_and_bias(37, 115),
                            name="your min_bias_broadcast", contiguous_only=True)
    m, b = (t.cuda() for t in rowmin_and_bias(37, 115)(torch.Generator().manual_seed(0)))
    return report, layout_verdict(report, layout_diagnosis(module.min_bias_broadcast(m, b), m, b))
