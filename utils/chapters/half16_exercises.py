"""Notebook 12's exercise checker: float32 to bf16 by hand, two values packed in one 32-bit word, as the mixed-input
main loop hands them to the tensor cores (BF16X2_SOURCE): out[i] holds x[2i] rounded to bf16 in its low 16 bits and
x[2i + 1] in its high 16 bits, each rounded to nearest, ties to even, a NaN kept a NaN. Written with integer
operations on the float's bits: the intrinsics that do it are what the chapter shows after the exercise. The
from-scratch machinery (the signature, the static verdict, the refusal of a launch that lets PyTorch compute) is
memory_exercises'. Tested in tests/test_bf16x2_exercise.py, against tests/exercise_answers/to_bf16x2.cu and the
shortcuts beside it.
"""
from __future__ import annotations

import re

import numpy as np
import torch

from utils.chapters.memory_exercises import _torch_compute, body_of, code_only, launch_signature, scratch_static
from utils.chapters.memory_exercises import static_verdict  # noqa: F401: the check cell calls exercises.static_verdict

BF16X2_KERNEL = "to_bf16x2_kernel"
BF16X2_PARAMS = "const float* __restrict__ x, int* __restrict__ out, int pairs"
PAIRS = (1, 1000, 4099)  # one pair (less than a warp), and counts no block size divides
# What does the conversion for the reader, and is shown after the exercise instead
INTRINSICS = re.compile(r"__float2bfloat16\w*|__floats2bfloat162\w*|__float22bfloat162\w*|__nv_bfloat16\w*|"
                        r"cuda_bf16\.h|cvt\.rn\.bf16\w*|__float2half\w*|cuda_fp16\.h")
_NEEDED = {"x": "the values to convert are there", "out": "the packed pairs go there",
           "pairs": "no thread past the last pair may read or write"}

# Values whose rounding tells the ways apart (bits of float32):
SPECIAL = np.array([
    0x3F808000,  # 1 + 2^-8: halfway between 1 and 1 + 2^-7; even is 1 (a round-half-up gives 1 + 2^-7)
    0x3F818000,  # 1 + 3 * 2^-8: halfway between 1 + 2^-7 and 1 + 2^-6; even is 1 + 2^-6 (truncation gives 1 + 2^-7)
    0x3F80C000,  # 1 + 3 * 2^-9: above halfway, rounds up (truncation does not)
    0x7F800001,  # a NaN whose payload is all in the low 16 bits: rounding its bits naively gives infinity
    0x7FC00000,  # the quiet NaN
    0xFF800000,  # -infinity
    0x7F7FFFFF,  # the largest float: rounds to infinity
    0x80000000,  # -0
    0x00000001,  # the smallest subnormal: rounds to +0
    0x00018000,  # a subnormal exactly halfway: ties to even
    0xBF7FFFFF,  # just below -1: rounds to -1
], dtype=np.uint32)


def bf16x2_static(source: str) -> list[str]:
    """The kernel's text before anything runs: the given signature, marked `// @launch`, a body, every parameter
    used, and no intrinsic that converts for it."""
    problems = scratch_static(source, BF16X2_KERNEL, BF16X2_PARAMS)
    if problems:
        return problems
    body = body_of(source, launch_signature(BF16X2_KERNEL, BF16X2_PARAMS))
    problems = [f"{BF16X2_KERNEL} never uses {name}: {why}" for name, why in _NEEDED.items()
                if not re.search(rf"\b{name}\b", body)]
    found = sorted(set(INTRINSICS.findall(code_only(source))))
    if found:
        problems.append(f"uses {', '.join(found)}: write the rounding with integer operations on the float's bits "
                        "(__float_as_uint); the cell after the exercise shows the instruction that does it")
    return problems


def _round_nearest_even(bits: np.ndarray) -> np.ndarray:
    """bf16 bits of float32 bits, to nearest, ties to even, every NaN the quiet NaN (PyTorch's rounding on the
    CPU)."""
    bits = bits.astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF
    nan = ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x007FFFFF) != 0)
    return np.where(nan, 0x7FC0, rounded).astype(np.uint32)


def packed(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return (lo.astype(np.uint32) | (hi.astype(np.uint32) << 16)).view(np.int32)


def _halves(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return bits[0::2], bits[1::2]


# What "the output is ..." completes with. Each takes x as a float32 NumPy array (2 * pairs values) and returns the
# packed words (int32), as a kernel computes them.
def _right(x):
    lo, hi = _halves(x)
    return packed(_round_nearest_even(lo), _round_nearest_even(hi))


# The shortcut that is wrong on NaNs alone; the others are recognised whatever the kernel made of a NaN.
NAN_SHORTCUT = "rounded to nearest even, but a NaN turned into infinity: a NaN must stay a NaN"
BF16X2_SHORTCUTS = {
    "truncated, the low 16 bits dropped: round to nearest instead": lambda x: packed(*(h >> 16 for h in _halves(x))),
    "rounded half up, (bits + 0x8000) >> 16: a tie goes to the even neighbour": lambda x: packed(
        *((((h.astype(np.uint64) + 0x8000) >> 16) & 0xFFFF) for h in _halves(x))),
    NAN_SHORTCUT: lambda x: packed(
        *((((h.astype(np.uint64) + 0x7FFF + ((h >> 16) & 1)) >> 16) & 0xFFFF) for h in _halves(x))),
    "the halves swapped: x[2i] belongs in the low 16 bits, x[2i + 1] in the high": lambda x: packed(
        *reversed([_round_nearest_even(h) for h in _halves(x)])),
    "x[2i] alone, the high half left zero: each word holds two values": lambda x: packed(
        _round_nearest_even(_halves(x)[0]), np.zeros_like(_halves(x)[1])),
}


def bf16x2_reference(x: torch.Tensor) -> torch.Tensor:
    """PyTorch's own rounding, the pairs packed as the kernel packs them (x[2i] low): x.to(bfloat16) viewed as int32."""
    return x.detach().cpu().float().to(torch.bfloat16).view(torch.int32)


def bf16x2_inputs(pairs: int, seed: int = 0) -> torch.Tensor:
    """2 * pairs float32 values: SPECIAL first (as many as fit), then random values of every scale, never zeros."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2 * pairs, generator=g) * torch.exp2(torch.randint(-30, 30, (2 * pairs,), generator=g).float())
    special = torch.from_numpy(SPECIAL.view(np.float32).copy())[: 2 * pairs]
    x[: len(special)] = special
    return x


def _is_nan16(h: np.ndarray) -> np.ndarray:
    return ((h & 0x7F80) == 0x7F80) & ((h & 0x007F) != 0)


def _same(out: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Word by word: every half equal, where a NaN half may be any NaN (CUDA's conversion makes 0x7FFF, PyTorch's
    on the CPU 0x7FC0)."""
    o, w = out.view(np.uint32), want.view(np.uint32)
    same = np.ones(o.shape, dtype=bool)
    for shift in (0, 16):
        oh, wh = (o >> shift) & 0xFFFF, (w >> shift) & 0xFFFF
        same &= (oh == wh) | (_is_nan16(oh) & _is_nan16(wh))
    return same


def bf16x2_diagnosis(out: np.ndarray, x: np.ndarray) -> str | None:
    """Which known shortcut the output equals, word for word (but for the words of a NaN: a truncation that keeps
    NaNs is still a truncation); else where it goes wrong first."""
    values = np.ascontiguousarray(x, dtype=np.float32)
    plain = ~(np.isnan(values[0::2]) | np.isnan(values[1::2]))
    for name, shortcut in BF16X2_SHORTCUTS.items():
        same = _same(out, shortcut(x))
        if same.all() or (name != NAN_SHORTCUT and plain.any() and same[plain].all()):
            return name
    same = _same(out, _right(x))
    first = int(np.flatnonzero(~same)[0])
    if same[:first].all() and first >= 32:
        return (f"right for the first {first} of the {len(out)} pairs and wrong from pair {first}: do the threads "
                "cover every pair, those of the last, partial block too?")
    value = x[2 * first: 2 * first + 2]
    return f"wrong at pair {first} (x = {value[0]!r}, {value[1]!r}): out {int(out[first]) & 0xFFFFFFFF:#010x}"


def bf16x2_exercise(fn, source: str, device="cuda"):
    """Notebook 12's from-scratch checker. fn(x) launches the reader's kernel on x (2 * pairs float32 values) and
    returns out (pairs int32); source is the kernel's text. Returns ({pairs: 'ok' or what failed}, verdict)."""
    static = bf16x2_static(source)
    if static:  # nothing runs: a wrong signature would not even launch
        return {}, "Not yet:\n" + "\n".join(f"  - {p}" for p in static)
    ops = _torch_compute(fn, [bf16x2_inputs(PAIRS[0]).to(device)])
    if ops:
        return {}, (f"Not yet: your function calls PyTorch to compute ({', '.join(sorted(ops))}): the kernel must "
                    "compute it; the launch cell only allocates and launches.")
    results, diagnosis = {}, None
    for pairs in PAIRS:  # smallest first; the diagnosis is the largest failing size's, where a pattern is surest
        x = bf16x2_inputs(pairs)
        x_on_device = x.to(device)
        if device != "cpu":  # a block the allocator holds, filled with a pattern no pair here rounds to
            torch.full((pairs,), 0x5A5A5A5A, dtype=torch.int32, device=device)
        out = fn(x_on_device)
        if not isinstance(out, torch.Tensor) or out.dtype != torch.int32 or tuple(out.shape) != (pairs,):
            got = (out.dtype, tuple(out.shape)) if isinstance(out, torch.Tensor) else type(out)
            results[pairs] = f"out must be int32 of shape ({pairs},), got {got}"
            continue
        out_np, x_np = out.cpu().numpy(), x.numpy()
        want = bf16x2_reference(x).numpy()
        same = _same(out_np, want)
        results[pairs] = "ok" if same.all() else f"{int((~same).sum())} of {pairs} words wrong"
        if not same.all():  # a word left unwritten holds what the block held: at 1 pair that can match a pattern
            diagnosis = f"{bf16x2_diagnosis(out_np, x_np)} (at {pairs} pairs)"
    if all(r == "ok" for r in results.values()):
        return results, "PASS: every pair rounded to nearest even and packed, at every size."
    lines = ["Not yet:"] + [f"  - {pairs} pairs: {r}" for pairs, r in results.items() if r != "ok"]
    if diagnosis:
        lines.append(f"  - the output is {diagnosis}")
    return results, "\n".join(lines)
