"""TF32 emulated with torch, on any device: fp32 rounded to TF32 as the tensor cores read it (to_tf32), the
3xTF32 split of a value into a big and a small TF32 part (split_tf32), a GEMM from a chosen subset of the
split's four products computed in float64 (split_gemm64), and a model of the tensor core's accumulation
(fadd_dot, tensor_core_dot). Notebook 08 teaches with it (utils/chapters/tensor_cores.py); the tests and
experiments/ use it as the reference for the kernels' rounding.

    big, small = split_tf32(x)                       # x = big + small + (a rest below 2^-22 |x|)
    y = split_gemm64(x, w)                           # x @ w.T from xb·wb + xb·ws + xs·wb, exactly
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

PRODUCTS = ("xb·wb", "xb·ws", "xs·wb", "xs·ws")  # the four products of the split, (x part)·(w part)
_LOW13 = 0x1FFF  # the mantissa bits TF32 drops


# --------------------------------------------------------------------------- TF32

def to_tf32(t: Tensor, rounding: str = "nearest") -> Tensor:
    """A float32 tensor's values as TF32 (1 + 10 significant bits), still stored in float32: what
    `cvt.rna.tf32.f32` gives ("nearest": round to nearest, ties away from zero) or what a tensor core
    reading raw fp32 sees ("truncate": the low 13 bits dropped). Inf and NaN pass through."""
    if t.dtype != torch.float32:
        raise TypeError(f"to_tf32 takes float32, got {t.dtype}")
    if rounding not in ("nearest", "truncate"):
        raise ValueError(f"rounding is 'nearest' or 'truncate', got {rounding!r}")
    word = t.contiguous().view(torch.int32)
    if rounding == "nearest":  # add half of the dropped range to the magnitude bits; a carry moves the exponent
        word = word + 0x1000
    out = (word & ~_LOW13).view(torch.float32).view_as(t)
    return torch.where(t.isfinite(), out, t)


def split_tf32(t: Tensor) -> tuple[Tensor, Tensor]:
    """3xTF32's split, as tc::split_tf32 does it: big = t rounded to TF32, small = (t - big) rounded to
    TF32. t - big is exact in float32. Where t is ±inf or NaN, big = ±2^-126 (float32's smallest normal)
    with t's sign and small = t (kernels/common/tensor_core.cuh says why)."""
    big = to_tf32(t)
    small = to_tf32(t - big)
    finite = t.isfinite()
    tiny = torch.copysign(torch.full_like(t, torch.finfo(torch.float32).tiny), t)
    return torch.where(finite, big, tiny), torch.where(finite, small, t)


def bits(v: float) -> str:
    """A float32's 32 bits as "s eeeeeeee mmmmmmmmmm|mmmmmmmmmmmmm": sign, exponent, and the mantissa
    cut where TF32 ends."""
    word = torch.tensor([v], dtype=torch.float32).view(torch.int32).item() & 0xFFFFFFFF
    b = f"{word:032b}"
    return f"{b[0]} {b[1:9]} {b[9:19]}|{b[19:]}"


def normalise_products(keep) -> set[str] | None:
    names = {p.replace("·", "*"): p for p in PRODUCTS}
    try:
        return {names[str(k).replace(" ", "").replace("·", "*")] for k in keep}
    except (KeyError, TypeError):
        return None


def split_gemm64(x: Tensor, w: Tensor, keep=PRODUCTS[:3], w_is_tf32: bool = False) -> Tensor:
    """x @ w.T from the split products in `keep`, each product and the sum in float64 (the exact arithmetic a
    tensor core gets for one product of TF32 values), rounded to float32 at the end. With w_is_tf32, w is
    first rounded to TF32 itself (a weight kept in TF32), so that ws = 0."""
    chosen = normalise_products(keep)
    if chosen is None:
        raise ValueError(f"products are among {PRODUCTS}, got {keep!r}")
    if w_is_tf32:
        w = to_tf32(w)
    (xb, xs), (wb, ws) = split_tf32(x), split_tf32(w)
    parts = {"xb": xb.double(), "xs": xs.double(), "wb": wb.double(), "ws": ws.double()}
    out = torch.zeros(x.shape[0], w.shape[0], dtype=torch.float64, device=x.device)
    for p in chosen:
        a, b = p.split("·")
        out += parts[a] @ parts[b].T
    return out.float()


# --------------------------------------------------------------------------- the accumulation

def fadd_dot(x: Tensor, w: Tensor) -> Tensor:
    """Row-wise dot products sum_k x[:, k] w[:, k] as the FP32 units do them: one fused multiply-add per k,
    rounded to nearest float32 each time (emulated: the product is exact in float64). NumPy, for speed."""
    xs, ws = x.double().numpy(), w.double().numpy()
    acc = np.zeros(x.shape[0], dtype=np.float32)
    for k in range(x.shape[1]):
        acc = (acc + xs[:, k] * ws[:, k]).astype(np.float32)
    return torch.from_numpy(acc.astype(np.float64))


def _cut(s: np.ndarray, lead: np.ndarray, bits: int) -> np.ndarray:
    """s (float64) cut toward zero to multiples of 2^(lead - bits + 1): `bits` bits below a leading bit at 2^lead."""
    return np.trunc(np.ldexp(s, bits - 1 - lead)) * np.ldexp(1.0, lead - bits + 1)


def _lead(a: np.ndarray) -> np.ndarray:
    """The exponent of each value's leading bit (0 for 0): frexp's, exact, unlike floor(log2(.))."""
    return np.frexp(a)[1] - 1


def tensor_core_step(acc: np.ndarray, terms: np.ndarray, bits: int) -> np.ndarray:
    """One step of the modeled adder: acc and the block's exact products aligned to the largest of them, each
    cut to `bits` bits below that one's leading bit (toward zero), added exactly, the sum cut to float32's
    24 bits toward zero."""
    t = np.concatenate([acc[:, None], terms], 1)
    lead = _lead(np.abs(t).max(1))[:, None]
    s = _cut(t, lead, bits).sum(1)
    return _cut(s, _lead(s), 24)


def tensor_core_dot(x: Tensor, w: Tensor, *, block: int = 4, bits: int = 24, promote: int = 0,
                    split=split_tf32) -> Tensor:
    """Row-wise 3xTF32 dot products through a MODEL of the tensor core's adder (not NVIDIA's
    specification, which is unpublished; a simplification of the published measurements of it): the split
    products are exact; per step, `block` of them and the accumulator are aligned to the largest, cut
    toward zero at `bits` bits below its leading bit, added, and the sum cut to 24 bits toward zero. The
    products come in the kernel's order (per 8 values of k: xs·wb, xb·ws, xb·wb). With promote > 0 the
    accumulator restarts every `promote` k and is added into a float32 total, rounded to nearest (FADD).
    split(t) -> (big, small): rung 10's split_tf32, or another (the operands' split of
    common/tf32_operands.cuh, big = the value truncated)."""
    (xb, xs), (wb, ws) = split(x.float()), split(w.float())
    xb, xs, wb, ws = (t.double().numpy() for t in (xb, xs, wb, ws))
    acc = np.zeros(x.shape[0])
    total = np.zeros(x.shape[0], dtype=np.float32)
    for k8 in range(0, x.shape[1], 8):
        if promote and k8 and k8 % promote == 0:
            total, acc = (total + acc).astype(np.float32), np.zeros_like(acc)
        for a, b in ((xs, wb), (xb, ws), (xb, wb)):
            products = a[:, k8:k8 + 8] * b[:, k8:k8 + 8]
            for j in range(0, products.shape[1], block):
                acc = tensor_core_step(acc, products[:, j:j + block], bits)
    out = (total + acc).astype(np.float32).astype(np.float64) if promote else acc
    return torch.from_numpy(out)
