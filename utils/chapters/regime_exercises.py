"""Notebook 11's exercise checker: split-K's fix-up, out[m, n] = bias[n] + the sum over s of partials[s, m, n],
written from scratch (SPLIT_K_SOURCE). The from-scratch machinery (the signature, the static verdict, the refusal of
a launch that lets PyTorch compute) is memory_exercises'. Tested in tests/test_split_k_exercise.py, against
tests/exercise_answers/split_k_sum.cu and the shortcuts beside it.
"""
from __future__ import annotations

import re

import torch

from utils import check
from utils.chapters.memory_exercises import _torch_compute, body_of, launch_signature, scratch_static, scratch_verdict
from utils.chapters.memory_exercises import static_verdict  # noqa: F401: the check cell calls exercises.static_verdict

SPLIT_K_KERNEL = "split_k_sum_kernel"
SPLIT_K_PARAMS = ("const float* __restrict__ partials, const float* __restrict__ bias, float* __restrict__ out, "
                  "int S, int M, int N")
# (S, M, N): M * N = 7000 and 266435 are multiples of no warp, so of no block a launch uses (a partial last block
# whatever its size), and 1 (less than a warp); S = 1, 3 and 8 (a thread that adds one slice is right at S = 1 only);
# M > 1 (a grid that covers one row is wrong past it); M != N (the transpose differs from the answer)
SPLIT_K_SHAPES = ((3, 7, 1000), (1, 1, 1), (8, 65, 4099))

# What a right kernel cannot do without: each parameter, and why (the static reading names the missing ones)
_NEEDED = {
    "partials": "out is the sum of its slices",
    "bias": "out[m, n] has bias[n] added",
    "out": "the result goes there",
    "S": "every one of the S slices belongs to the sum",
    "M": "the slices are M * N floats apart, and no thread past the M * N elements of out may write",
    "N": "element (m, n) of a slice is at m * N + n, and its bias is bias[n]",
}


def split_k_static(source: str) -> list[str]:
    """The kernel's text before anything runs: the given signature, marked `// @launch`, a body, and every
    parameter used (a kernel that never reads bias, or never looks at S, cannot be right)."""
    problems = scratch_static(source, SPLIT_K_KERNEL, SPLIT_K_PARAMS)
    if problems:
        return problems
    body = body_of(source, launch_signature(SPLIT_K_KERNEL, SPLIT_K_PARAMS))
    return [f"{SPLIT_K_KERNEL} never uses {name}: {why}" for name, why in _NEEDED.items()
            if not re.search(rf"\b{name}\b", body)]


def split_k_reference(partials, bias):
    """The exact sum rounded once: in float64, returned in the inputs' dtype. The reader's float32 sum, in
    another order, differs from it by rounding (a few ulps), which the strict tier's 1e-4 leaves room for;
    for the harness's float64 inputs (its precision check) this is the float64 reference itself."""
    return (partials.double().sum(dim=0) + bias.double()).to(partials.dtype)


# What "the output is ..." completes with. Each takes (partials, bias) of any float dtype, as tensors or as NumPy
# arrays (axes given by position, swapaxes: the tests' stand-ins compute outside PyTorch, as a kernel does).
SPLIT_K_SHORTCUTS = {
    "the first slice only, partials[0] + bias: the sum runs over every slice s < S":
        lambda p, b: p[0] + b,
    "the last slice only, partials[S - 1] + bias: is each slice added to the sum (+=), or does it replace it (=)?":
        lambda p, b: p[-1] + b,
    "the sum without the bias": lambda p, b: p.sum(0),
    "the sum with the bias added once per slice (S times): bias[n] belongs to out once":
        lambda p, b: p.sum(0) + p.shape[0] * b,
    "the mean over the slices, not their sum: each slice holds the products of its own range of k, all of which count":
        lambda p, b: p.mean(0) + b,
    "partials read as (S, N, M), element (m, n) from partials[s, n, m]: slice s is (M, N) row-major, element (m, n) "
    "at s * M * N + m * N + n": lambda p, b: p.reshape(p.shape[0], p.shape[2], p.shape[1]).swapaxes(1, 2).sum(0) + b,
}


def split_k_inputs(S: int, M: int, N: int):
    """partials (S, M, N) and bias (N,): random, never zeros, on the generator's device."""
    return lambda g: [torch.randn(S, M, N, generator=g, device=g.device),
                      torch.randn(N, generator=g, device=g.device)]


def _close(out, ref):
    """Elementwise within the strict tier, as check.check_fn judges trials (NaN never close)."""
    tier = check.TIERS["strict"]
    return torch.isclose(out, ref, atol=tier.atol, rtol=tier.rtol)


def split_k_diagnosis(fn, shapes=SPLIT_K_SHAPES, device="cuda") -> str | None:
    """What the first shape the output is wrong at computes: a known shortcut, or right on a first part of out
    only (a grid that misses the tail, a thread that covers one row); else that only some shapes are wrong."""
    wrong_at, right_at = [], []
    for S, M, N in shapes:
        args = [t.to(device) for t in split_k_inputs(S, M, N)(torch.Generator().manual_seed(1))]
        out = fn(*args)
        args64 = [t.detach().cpu().double() for t in args]
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (M, N):
            wrong_at.append((S, M, N))
            continue
        out = out.detach().cpu().double()
        close = _close(out, split_k_reference(*args64)).flatten()
        if close.all():
            right_at.append((S, M, N))
            continue
        wrong_at.append((S, M, N))
        where = f"at S = {S}, M = {M}, N = {N}"
        for name, shortcut in SPLIT_K_SHORTCUTS.items():
            if _close(out, shortcut(*args64)).all():
                return f"{name} ({where})"
        first = int((~close).nonzero()[0])
        if first >= 32:  # a warp or more right before the first wrong element: the layout is right, the cover is not
            return (f"right at the first {first} of the {M * N} elements of out (row-major) and wrong at element "
                    f"{first} (m = {first // N}, n = {first % N}; {where}): do the threads cover every element, "
                    "those of the last, partial block too?")
    if wrong_at and right_at:
        return (f"right at (S, M, N) = {', '.join(map(str, right_at))} and wrong at {', '.join(map(str, wrong_at))}: "
                "does every thread sum all S slices, and the grid cover all M * N elements?")
    return None


def split_k_exercise(fn, source: str, device="cuda"):
    """Notebook 11's from-scratch checker. fn(partials, bias) launches the reader's kernel; source is its text.
    Returns ({shape: harness report}, verdict)."""
    static = split_k_static(source)
    if static:  # nothing runs: a wrong signature would not even launch
        return {}, scratch_verdict({}, static, set(), None, "")
    args = [t.to(device) for t in split_k_inputs(*SPLIT_K_SHAPES[0])(torch.Generator().manual_seed(0))]
    ops = _torch_compute(fn, args)  # the launch cell allocates and launches; a sum in PyTorch is no kernel
    reports = {}
    if not ops:
        for S, M, N in SPLIT_K_SHAPES:  # the harness poisons the output's memory on a GPU: unwritten elements show
            reports[f"S={S}, M={M}, N={N}"] = check.check_fn(
                fn, split_k_reference, split_k_inputs(S, M, N), name=f"your split-K sum at ({S}, {M}, {N})",
                contiguous_only=True, device=device)
    diagnosis = None if ops or all(r.ok for r in reports.values()) else split_k_diagnosis(fn, device=device)
    return reports, scratch_verdict(reports, [], ops, diagnosis,
                                    "PASS: bias + the sum of the S slices, every check passed at every shape.")
