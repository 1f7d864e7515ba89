"""The memory-bound chapters' exercise checkers (notebooks 05, 06 and 07): GELU (05), Welford's GroupNorm and
problem 94's tail written from scratch (06), and problem 75's min + bias broadcast written from scratch (07). Each
diagnoses what the reader's kernel computed and says "Not yet" until it is right; the static checks (the kernel's
text) run without a GPU. Tested in tests/test_memory_bound_exercises.py, against the reference answers of
tests/exercise_answers/ (which no chapter renders) and against the shortcuts each checker must refuse.
"""
from __future__ import annotations

import hashlib
import re

import torch
import torch.nn.functional as F

from utils import check
from utils.chapters import session as chapter
from utils.chapters.memory import EPS, gn_inputs, x_and_bias

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
WELFORD_REGION = ("// ---- YOUR CODE: from here ----\n", "// ---- YOUR CODE: to here ----\n")
# sha256 of kernels/exercises/group_norm_stats.cu outside the YOUR CODE marks, as committed: the kernel that reads
# each value once (tests/test_memory_bound_exercises.py recomputes it from the file)
WELFORD_FIXED_SHA256 = "f716896dcb97802d09c0b296f9c9811f27c64cf0db111a6db0b0281503837ee1"
FLOAT64 = re.compile(r"\bdouble\b|\b__d(?:add|sub|mul|div|sqrt)_r[nduz]\b|\b__fma_r[nduz]\b|\b__ll2double|\bfloat64")


def code_only(text: str) -> str:
    """CUDA text without its comments (// to the end of the line, /* ... */)."""
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))


def welford_parts(text: str) -> tuple[str, str, str] | None:
    """(before, your region, after) of the exercise's text, split at WELFORD_REGION's marks; None without them."""
    first, last = WELFORD_REGION
    if text.count(first) != 1 or text.count(last) != 1 or text.index(first) > text.index(last):
        return None
    a, b = text.index(first), text.index(last) + len(last)
    return text[:a], text[a:b], text[b:]


def welford_fixed_digest(text: str) -> str | None:
    parts = welford_parts(text)
    return None if parts is None else hashlib.sha256((parts[0] + parts[2]).encode()).hexdigest()


def welford_static(text: str) -> list[str]:
    """What is wrong with the exercise's text before anything runs: the marks gone, the given kernel changed (it
    reads each value once: a second pass over the data is a change there), float64 in the statistics."""
    parts = welford_parts(text)
    if parts is None:
        return ["the two YOUR CODE marks are gone: put them back around Stats and the stats_ functions"]
    problems = []
    if welford_fixed_digest(text) != WELFORD_FIXED_SHA256:
        problems.append("the kernel around your functions changed: it reads each value once (one pass over the "
                        "data); only the marked part is yours")
    if FLOAT64.search(code_only(parts[1])):
        problems.append("your statistics use float64: the exercise is to make float32 statistics accurate")
    return problems


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




# --------------------------------------------------------------------------- the kernels written from scratch

def launch_signature(name: str, params: str) -> re.Pattern:
    """The `// @launch` mark directly above `__global__ void name(params...)`, whitespace aside."""
    words = [re.escape(w) for w in params.split()]
    return re.compile(r"@LAUNCH[ \t]*\n[ \t]*__global__\s+void\s+" + re.escape(name) + r"\s*\(\s*"
                      + r"\s*".join(words) + r"\s*\)\s*\{")


def body_of(text: str, signature: re.Pattern) -> str | None:
    """The kernel's body (between its braces, comments dropped), or None where the signature is not found."""
    code = code_only(re.sub(r"//[ \t]*@launch[ \t]*(?=\n)", "@LAUNCH", text))  # the mark survives the comments
    m = signature.search(code)
    if not m:
        return None
    depth, i = 1, m.end()
    while i < len(code) and depth:
        depth += {"{": 1, "}": -1}.get(code[i], 0)
        i += 1
    return code[m.end():i - 1]


def scratch_static(text: str, name: str, params: str) -> list[str]:
    """The static checks of a from-scratch kernel: its signature as given, marked `// @launch`, and a body."""
    body = body_of(text, launch_signature(name, params))
    if body is None:
        return [f"the kernel must keep the given signature, `// @launch` on the line above: "
                f"__global__ void {name}({' '.join(params.split())})"]
    statements = [s for s in re.split(r"[;{}]", body) if s.strip() and not s.strip().startswith("extern __shared__")]
    return [] if statements else [f"{name} does nothing yet: write its body"]


def static_verdict(problems: list[str]) -> str:
    """The verdict on a kernel's text alone: "Not yet:" and each problem, or that the text passed."""
    if problems:
        return "Not yet:\n" + "\n".join(f"  - {p}" for p in problems)
    return "The text passes the static checks; what it computes needs a GPU to check."


def _torch_compute(fn, args) -> set[str]:
    return check.torch_ops_called(fn, *args) - check.IGNORED_OPS


def _first_failures(reports: dict) -> list[str]:
    return [f"  - {where}: {', '.join(r.failed)} failed" for where, r in reports.items() if not r.ok]


def scratch_verdict(reports: dict, static: list[str], torch_ops: set[str], diagnosis: str | None, passed: str) -> str:
    """PASS when the static checks, the PyTorch-free check and every shape's harness report pass; else "Not yet:" and
    what failed, with what the first failing output computes where it matches a known shortcut."""
    if static:
        return "Not yet:\n" + "\n".join(f"  - {p}" for p in static)
    if torch_ops:
        return (f"Not yet: your function calls PyTorch to compute ({', '.join(sorted(torch_ops))}): the kernel must "
                "compute it; the launch cell only allocates and launches.")
    if all(r.ok for r in reports.values()):
        return passed
    lines = ["Not yet:"] + _first_failures(reports)
    if diagnosis:
        lines.append(f"  - the output is {diagnosis}")
    return "\n".join(lines)


# ---- 06: problem 94's tail, y = GroupNorm(mish(hardtanh(x + bias))), one block per (sample, group)

TAIL_KERNEL = "tail94_kernel"
TAIL_PARAMS = ("const float* __restrict__ x, const float* __restrict__ bias, const float* __restrict__ gamma, "
               "const float* __restrict__ beta, float* __restrict__ y, int C, int G, float eps")
# (N, C, G): D = 23 (fewer than a warp, no multiple of anything), 32 (problem 94's), 300 (more than a block of 128)
TAIL_SHAPES = ((37, 115, 5), (37, 1024, 32), (6, 1200, 4))


def tail_static(source: str) -> list[str]:
    return scratch_static(source, TAIL_KERNEL, TAIL_PARAMS)


def tail_reference(G: int, lo: float = -1.0, hi: float = 1.0, affine: bool = True, per_sample: bool = True):
    """Problem 94's tail at G groups, or a shortcut of it: another Hardtanh range, gamma and beta left out, or the
    statistics over the whole batch (seeds 000, 003, 004)."""
    def tail(x, bias, gamma, beta):
        a = F.mish(torch.clamp(x + bias, lo, hi))
        if per_sample:
            return F.group_norm(a, G, gamma if affine else None, beta if affine else None, EPS)
        N, C = a.shape
        v = a.view(N, G, C // G)
        mean, var = v.mean(dim=(0, 2), keepdim=True), v.var(dim=(0, 2), unbiased=False, keepdim=True)
        y = ((v - mean) / torch.sqrt(var + EPS)).view(N, C)
        return y * gamma + beta if affine else y
    return tail


TAIL_SHORTCUTS = {
    "GroupNorm over the whole batch: statistics per group must be per sample": dict(per_sample=False),
    "without gamma and beta": dict(affine=False),
    "with Hardtanh clamped to [0, 20]: nn.Hardtanh() is not that": dict(lo=0.0, hi=20.0),
    "with Hardtanh clamped to [0, 2]: nn.Hardtanh() is not that": dict(lo=0.0, hi=2.0),
}


def tail_inputs(N: int, C: int):
    """x (a GEMM output: both of Hardtanh's sides clamp), bias (C,), gamma (random signs), beta: never 1s and 0s."""
    return gn_inputs(N, C, bias_before=True)


def _matches(out, ref) -> bool:
    return out.shape == ref.shape and torch.allclose(out.double(), ref.double(), atol=1e-4, rtol=1e-4)


def tail_diagnosis(fn, shapes=TAIL_SHAPES, device="cuda") -> str | None:
    """Which shortcut the first shape the output is wrong at matches, or that only some shapes are wrong."""
    wrong_at, right_at = [], []
    for N, C, G in shapes:
        args = [t.to(device) for t in tail_inputs(N, C)(torch.Generator().manual_seed(1))]
        out = fn(*args, G)
        if _matches(out, tail_reference(G)(*args)):
            right_at.append(C // G)
            continue
        wrong_at.append(C // G)
        for name, kw in TAIL_SHORTCUTS.items():
            if _matches(out, tail_reference(G, **kw)(*args)):
                return f"{name} (at D = {C // G})"
    if wrong_at and right_at:
        return (f"right for groups of D = {', '.join(map(str, right_at))} and wrong for D = "
                f"{', '.join(map(str, wrong_at))}: does every thread cover its share of any D?")
    return None


def tail_exercise(fn, source: str, device="cuda"):
    """Notebook 06's from-scratch checker. fn(x, bias, gamma, beta, G) launches the reader's kernel; source is its text.
    Returns ({shape: harness report}, verdict)."""
    static = tail_static(source)
    if static:
        return {}, scratch_verdict({}, static, set(), None, "")
    args = [t.to(device) for t in tail_inputs(*TAIL_SHAPES[1][:2])(torch.Generator().manual_seed(0))]
    ops = _torch_compute(fn, args + [TAIL_SHAPES[1][2]])
    reports = {}
    if not ops:
        for N, C, G in TAIL_SHAPES:
            reports[f"N={N}, C={C}, G={G} (D = {C // G})"] = check.check_fn(
                lambda x, b, g_, b_, G=G: fn(x, b, g_, b_, G), tail_reference(G), tail_inputs(N, C),
                name=f"your tail at ({N}, {C}), G = {G}", contiguous_only=True)
    diagnosis = None if ops or all(r.ok for r in reports.values()) else tail_diagnosis(fn, device=device)
    return reports, scratch_verdict(reports, [], ops, diagnosis,
                                    "PASS: problem 94's tail, every check passed at every shape.")


# ---- 07: problem 75's last step from the GroupNorm output h (N, C): out (1, C, N, 1) = min over row n + bias[c]

MIN_BIAS_KERNEL = "min_bias_kernel"
MIN_BIAS_PARAMS = "const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ out, int N, int C"
MIN_BIAS_SHAPES = ((37, 115), (5, 1000), (1, 1))  # C below, around and above a block of 256; N and C odd


def min_bias_static(source: str) -> list[str]:
    return scratch_static(source, MIN_BIAS_KERNEL, MIN_BIAS_PARAMS)


def min_bias_reference(x, bias):
    return torch.min(x, dim=1, keepdim=True)[0] + bias


MIN_BIAS_SHORTCUTS = {
    "laid out (N, C), sample-major: element (c, n) is not where a (1, C, N, 1) tensor keeps it":
        lambda x, b: (torch.min(x, 1)[0].view(-1, 1) + b.view(1, -1)).reshape(1, b.numel(), x.shape[0], 1),
    "without the bias": lambda x, b: torch.min(x, dim=1, keepdim=True)[0].view(1, 1, -1, 1).expand(1, b.numel(), -1, 1),
    "the row's maximum, not its minimum": lambda x, b: torch.max(x, dim=1, keepdim=True)[0] + b,
}


def min_bias_inputs(N: int, C: int):
    return lambda g: [torch.randn(N, C, generator=g, device=g.device) * 2,
                      torch.randn(1, C, 1, 1, generator=g, device=g.device)]


def min_bias_diagnosis(fn, shapes=MIN_BIAS_SHAPES, device="cuda") -> str | None:
    wrong_at, right_at = [], []
    for N, C in shapes:
        args = [t.to(device) for t in min_bias_inputs(N, C)(torch.Generator().manual_seed(1))]
        out = fn(*args)
        if out.shape == (1, C, N, 1) and torch.equal(out, min_bias_reference(*args)):
            right_at.append((N, C))
            continue
        wrong_at.append((N, C))
        for name, ref in MIN_BIAS_SHORTCUTS.items():
            r = ref(*args)
            if out.shape == r.shape and torch.equal(out, r):
                return f"{name} (at N = {N}, C = {C})"
    if wrong_at and right_at:
        return (f"right at (N, C) = {', '.join(map(str, right_at))} and wrong at {', '.join(map(str, wrong_at))}: "
                "does every thread cover its share of any C?")
    return None


def nan_row_check(fn, device="cuda") -> str | None:
    """torch.min propagates NaN: a NaN in row 1 makes sample 1's outputs NaN and leaves the others alone."""
    x, b = (t.to(device) for t in min_bias_inputs(9, 300)(torch.Generator().manual_seed(2)))
    x[1, 257] = float("nan")
    out, ref = fn(x, b), min_bias_reference(x, b)
    if out.shape == ref.shape and torch.equal(out.isnan(), ref.isnan()) and torch.equal(out.nan_to_num(), ref.nan_to_num()):
        return None
    return "a NaN in row 1 does not come out as torch.min gives it (a NaN in every value of sample 1, only there)"


def min_bias_exercise(fn, source: str, device="cuda"):
    """Notebook 07's from-scratch checker. fn(x, bias) launches the reader's kernel; source is its text.
    Returns ({shape: harness report}, verdict)."""
    static = min_bias_static(source)
    if static:
        return {}, scratch_verdict({}, static, set(), None, "")
    args = [t.to(device) for t in min_bias_inputs(37, 115)(torch.Generator().manual_seed(0))]
    ops = _torch_compute(fn, args)
    reports = {}
    if not ops:
        for N, C in MIN_BIAS_SHAPES:
            reports[f"N={N}, C={C}"] = check.check_fn(fn, min_bias_reference, min_bias_inputs(N, C),
                                                      name=f"your min + bias at ({N}, {C})", contiguous_only=True)
    diagnosis = None if ops or all(r.ok for r in reports.values()) else min_bias_diagnosis(fn, device=device)
    text = scratch_verdict(reports, [], ops, diagnosis, "PASS: (1, C, N, 1), every check passed at every shape.")
    nan = None if ops or not text.startswith("PASS") else nan_row_check(fn, device)
    return reports, (f"Not yet:\n  - {nan}" if nan else text)
