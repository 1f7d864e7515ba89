"""The helpers of the tensor-core chapter (notebook 08): TF32 rounding and the 3xTF32 split emulated with
torch on any device, the four models' accuracy with the GEMM swapped for a variant, a model of the tensor
core's accumulation, the rungs' predictions read from their headers, the chapter's diagrams, its one GPU
measurement (recorded as kind "tensor_cores") and its exercise checkers. Tested in
tests/test_tensor_core_chapter.py.

    big, small = split_tf32(x)                       # x = big + small + (a rest below 2^-22 |x|)
    rows = accuracy([94], cpu_variants(), scale="small", seeds=5, device="cpu")
    entries = measure(reps=30)                       # on an H100: everything the chapter shows, in one run
    display(Markdown(accuracy_table(record)))        # ... and from a record, on any machine

Numbers come from what these functions compute or from a record; nothing here holds a measured number.
"""
from __future__ import annotations

import math
import re
from typing import Callable

import matplotlib
import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, Rectangle
from torch import Tensor

from utils import build, plots
from utils.problems import get_problem
from utils.show import header_section

__all__ = ["KIND", "RUNGS", "RUNG10", "PROMOTE_KS", "SHAPES", "PRODUCTS", "SGEMM", "TF32_CUBLAS", "to_tf32",
           "split_tf32", "bits", "rounding_table", "rounding_stats", "format_figure", "split_figure",
           "split_table", "term_sizes", "split_gemm64", "accuracy_findings", "target_check",
           "promotion_findings", "products_verdict", "cpu_variants", "gpu_variants", "accuracy",
           "accuracy_table", "excess", "fadd_dot", "tensor_core_dot", "adder_example", "accumulation_model",
           "accumulation_figure", "predictions", "prediction_table", "timing_figure", "fragment_layout",
           "fragment_figure", "pipeline_schedule", "pipeline_figure", "paths_label", "quote_paths", "show_excerpt",
           "build_jobs", "runs_here", "measure", "render", "provenance", "promotion_table", "promotion_verdict",
           "default_promote_k", "PATHS", "TARGETS"]

KIND = "tensor_cores"  # utils.results kind of the chapter's one GPU run
RUNGS = ("gemm_08_mma_tf32", "gemm_09_wgmma_tf32", "gemm_10_3xtf32")
RUNG10 = "gemm_10_3xtf32"
PROMOTE_KS = (0, 256, 1024, 4096)  # rung 10's promotion intervals the run builds and measures (0: never promote)
SHAPES = ((1024, 8192, 8192), (32768, 4096, 1024))  # M x N x K of problems 94, 75 and 62; of problem 37
SWEEP_MN = (1024, 2048)  # the error-against-K sweep: M, N
SWEEP_KS = (256, 512, 1024, 2048, 4096, 8192, 16384)
PIDS = (94, 75, 37, 62)
SEEDS = 5
ATOL = RTOL = 1e-4  # the strict tier (utils.check.TIERS["strict"])
MARGIN = 0.5  # exercise 2: a worst excess of at most 0.5 leaves the tier a 2x margin
SGEMM = "cuBLAS SGEMM"
TF32_CUBLAS = "cuBLAS TF32"
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
    TF32. t - big is exact in float32."""
    big = to_tf32(t)
    return big, to_tf32(t - big)


def split_table(values=(0.1, 1 / 3, 0.7234567, -2.7182817, 1e-3)) -> str:
    """Each float32 value, its big and small parts, and what big + small leaves out, relative to the value,
    as a power of 2 (float32's own rounding unit is 2^-24)."""
    t = torch.tensor(values, dtype=torch.float32)
    big, small = split_tf32(t)
    lines = [f"{'value':>14} {'big':>14} {'small':>14} {'|v - big - small| / |v|':>25}"]
    for v, b, sm in zip(t.tolist(), big.tolist(), small.tolist()):
        rest = abs(v - b - sm) / abs(v)
        lines.append(f"{v:>14.8g} {b:>14.8g} {sm:>14.6g} {('0 (exact)' if rest == 0 else f'2^{math.log2(rest):.1f}'):>25}")
    return "\n".join(lines)


def bits(v: float) -> str:
    """A float32's 32 bits as "s eeeeeeee mmmmmmmmmm|mmmmmmmmmmmmm": sign, exponent, and the mantissa
    cut where TF32 ends."""
    word = torch.tensor([v], dtype=torch.float32).view(torch.int32).item() & 0xFFFFFFFF
    b = f"{word:032b}"
    return f"{b[0]} {b[1:9]} {b[9:19]}|{b[19:]}"


def rounding_table(values=(0.1, 1 / 3, math.pi, 1 + 2 ** -11, 1 + 3 * 2 ** -12, -2.7182817)) -> str:
    """Each value as float32, its bits, and TF32 by rounding and by truncation with their relative errors."""
    t = torch.tensor(values, dtype=torch.float32)
    lines = [f"{'float32 value':>16}  {'bits (s exponent mantissa|dropped)':<36} {'TF32, nearest':>15} {'rel. err':>9} "
             f"{'TF32, truncated':>16} {'rel. err':>9}"]
    for v, rn, tr in zip(t.tolist(), to_tf32(t).tolist(), to_tf32(t, "truncate").tolist()):
        lines.append(f"{v:>16.9g}  {bits(v):<36} {rn:>15.9g} {abs(rn - v) / abs(v):>9.1e} {tr:>16.9g} "
                     f"{abs(tr - v) / abs(v):>9.1e}")
    return "\n".join(lines)


def rounding_stats(n: int = 1_000_000, seed: int = 0) -> str:
    """Over n float32 values uniform in [0.5, 1) (every binade behaves alike), the largest relative error of
    each rounding, in powers of 2, and the mean signed error: truncation always errs the same way."""
    v = torch.rand(n, generator=torch.Generator().manual_seed(seed)) * 0.5 + 0.5
    lines = [f"{'rounding':<10} {'largest |rel. err|':>19} {'mean signed rel. err':>21}"]
    for how in ("nearest", "truncate"):
        rel = ((to_tf32(v, how).double() - v.double()) / v.double())
        lines.append(f"{how:<10} {'2^' + format(math.log2(rel.abs().max().item()), '.2f'):>19} {rel.mean().item():>21.2e}")
    return "\n".join(lines)


def _bit_row(ax, y, word_bits, label, fields, dropped=0):
    """32 boxes at height y, coloured by field, each with its bit; the last `dropped` greyed and hatched."""
    colours = {"sign": "#e6550d", "exponent": "#3182bd", "mantissa": "#31a354"}
    i = 0
    for name, width in fields:
        for _ in range(width):
            gone = i >= 32 - dropped
            ax.add_patch(Rectangle((i, y), 1, 1, facecolor="#dddddd" if gone else colours[name], alpha=0.85,
                                   edgecolor="white", hatch="///" if gone else None))
            ax.text(i + 0.5, y + 0.5, word_bits[i], ha="center", va="center", fontsize=7,
                    color="#777777" if gone else "white")
            i += 1
    ax.text(-0.6, y + 0.5, label, ha="right", va="center", fontsize=9)


def format_figure(value: float = 0.1) -> Figure:
    """A drawn diagram: float32's 1 / 8 / 23 bits over TF32's 1 / 8 / 10, with the bits of `value`
    and of its TF32 rounding; the 13 bits a tensor core ignores are greyed."""
    v = torch.tensor([value], dtype=torch.float32)
    r = to_tf32(v)
    raw = [bits(x).replace(" ", "").replace("|", "") for x in (v.item(), r.item())]
    with matplotlib.rc_context(plots.STYLE):
        fig = Figure(figsize=(10.0, 2.8))
        ax = fig.add_subplot()
        _bit_row(ax, 1.6, raw[0], "float32", [("sign", 1), ("exponent", 8), ("mantissa", 23)])
        _bit_row(ax, 0.0, raw[1], "TF32", [("sign", 1), ("exponent", 8), ("mantissa", 23)], dropped=13)
        for start, stop, text, y in ((0, 1, "sign", -0.95), (1, 9, "exponent: 8 bits, the same range", -0.55),
                                     (9, 19, "10 mantissa bits kept", -0.55),
                                     (19, 32, "13 bits: zero (rounded) / ignored", -0.55)):
            ax.annotate("", (start + 0.05, -0.25), (stop - 0.05, -0.25), arrowprops=dict(arrowstyle="<->", lw=0.8))
            ax.text((start + stop) / 2, y, text, ha="center", va="top", fontsize=8)
        rel = abs(r.item() - v.item()) / abs(v.item())
        ax.text(32.6, 2.1, f"{v.item():.10g}", va="center", fontsize=9)
        ax.text(32.6, 0.5, f"{r.item():.10g}\n(rel. error {rel:.1e})", va="center", fontsize=9)
        ax.set_xlim(-6, 40)
        ax.set_ylim(-1.3, 2.8)
        ax.axis("off")
        fig.suptitle(f"float32 and TF32: the bits of {value!r} (a diagram, computed on this machine)")
        fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- the split

def term_sizes(n: int = 200_000, seed: int = 0) -> dict[str, float]:
    """For n random (x, w) pairs like the problems' (x in [0, 1), w in ±1/√8192): the largest size, as a
    power of 2 relative to |x·w|, of each of the four products beyond xb·wb, and of what the split leaves
    out (x·w - (xb + xs)(wb + ws)); and float32's unit roundoff for comparison."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, generator=g).clamp_min(1e-3)
    w = (torch.rand(n, generator=g) * 2 - 1).clamp(min=-1, max=1) / math.sqrt(8192)
    w = torch.where(w.abs() < 1e-6, torch.full_like(w, 1e-6), w)
    (xb, xs), (wb, ws) = split_tf32(x), split_tf32(w)
    d = lambda t: t.double()  # noqa: E731
    exact = d(x) * d(w)
    terms = {"xb·ws": d(xb) * d(ws), "xs·wb": d(xs) * d(wb), "xs·ws": d(xs) * d(ws),
             "left out by the split": exact - (d(xb) + d(xs)) * (d(wb) + d(ws))}
    out = {name: math.log2(max((t.abs() / exact.abs()).max().item(), 2.0 ** -60)) for name, t in terms.items()}
    return out | {"float32 rounding of x·w": -24.0}


def split_figure(sizes: dict[str, float] | None = None) -> Figure:
    """A drawn diagram: float32's 24 significant bits as big's 11, small's 11 and 2 left out; beside it,
    how large each product is against x·w (term_sizes), on a log2 axis, with float32's rounding."""
    sizes = sizes or term_sizes()
    with matplotlib.rc_context(plots.STYLE):
        fig = Figure(figsize=(10.0, 3.4))
        ax, bx = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
        for start, width, colour, text in ((0, 11, "#3182bd", "big: 1 + 10 bits"), (11, 11, "#fd8d3c", "small: 1 + 10 bits"),
                                           (22, 2, "#dddddd", "left out")):
            ax.add_patch(Rectangle((start, 0), width, 1, facecolor=colour, edgecolor="white"))
            ax.text(start + width / 2, 0.5, text, ha="center", va="center", fontsize=8,
                    rotation=90 if width < 4 else 0)
        ax.text(12, 1.35, "float32's 24 significant bits (1 implicit + 23)", ha="center", fontsize=9)
        ax.text(12, -0.45, "small has its own exponent: it starts where big's last bit ends", ha="center", fontsize=8)
        ax.set_xlim(-0.5, 24.5)
        ax.set_ylim(-0.9, 1.8)
        ax.axis("off")
        names = ["xb·wb", *sizes]
        values = [0.0, *sizes.values()]
        colours = ["#3182bd", "#fd8d3c", "#fd8d3c", "#e6550d", "#999999", "#444444"]
        bx.barh(range(len(names)), [v + 30 for v in values], left=-30, color=colours[:len(names)])
        for i, v in enumerate(values):
            bx.text(v + 0.5, i, f"2^{v:.1f}", va="center", fontsize=8)
        bx.set_yticks(range(len(names)), names, fontsize=8)
        bx.invert_yaxis()
        bx.set_xlim(-30, 5)
        bx.set_xlabel("largest size against |x·w|, log2 (bars from 2^-30)")
        fig.suptitle("The 3xTF32 split and the size of each product (a diagram; sizes computed on this machine)")
        fig.tight_layout()
    return fig


def _normalise_products(keep) -> set[str] | None:
    names = {p.replace("·", "*"): p for p in PRODUCTS}
    try:
        return {names[str(k).replace(" ", "").replace("·", "*")] for k in keep}
    except (KeyError, TypeError):
        return None


def split_gemm64(x: Tensor, w: Tensor, keep=PRODUCTS[:3], w_is_tf32: bool = False) -> Tensor:
    """x @ w.T from the split products in `keep`, each product and the sum in float64 (the exact arithmetic a
    tensor core gets for one product of TF32 values), rounded to float32 at the end. With w_is_tf32, w is
    first rounded to TF32 itself (a weight kept in TF32), so that ws = 0."""
    chosen = _normalise_products(keep)
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


def _sample_operands(w_is_tf32: bool, seed: int = 0) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(64, 1024, generator=g)
    w = (torch.rand(96, 1024, generator=g) * 2 - 1) / 32
    return x, (to_tf32(w) if w_is_tf32 else w)


def _normwise_error(out: Tensor, exact: Tensor) -> float:
    return ((out.double() - exact).abs().max() / exact.abs().max()).item()


def products_verdict(keep, *, w_is_tf32: bool = True) -> str:
    """Exercise 1: the split products to keep for x @ w.T at float32's accuracy, with as few products as that
    allows. Checked by float64 emulation on the CPU (split_gemm64) against float32's own GEMM, at a
    K = 1024 sample like the problems'. PASS when the error is within 2x float32's and no smaller set is."""
    chosen = _normalise_products(keep or ())
    if not chosen:
        return f"Not yet: KEEP must name some of the four products {', '.join(PRODUCTS)}."
    x, w = _sample_operands(w_is_tf32)
    exact = x.double() @ w.double().T
    fp32 = _normwise_error(x @ w.T, exact)

    def error(subset) -> float:
        return _normwise_error(split_gemm64(x, w, subset), exact)

    mine = error(chosen)
    sizes = [len(s) for r in range(1, 5) for s in _subsets(r) if error(s) <= 2 * fp32]
    fewest = min(sizes)
    weight = "w already TF32 (ws = 0)" if w_is_tf32 else "w as it is"
    what = f"{len(chosen)} product(s) ({', '.join(sorted(chosen))}), {weight}: error {mine:.1e} of max |x·w|, float32's {fp32:.1e}"
    if mine > 2 * fp32:
        return f"Not yet: {what}. A product you left out is larger than float32's rounding: which parts carry what?"
    if len(chosen) > fewest:
        return (f"Not yet: {what}: as accurate as float32, but each product is a full pass of tensor-core work, and "
                f"{fewest} suffice here. Which of yours adds nothing (or nothing float32 would keep)?")
    return f"PASS: {what}: float32's accuracy with {fewest} products, the fewest that give it."


def _subsets(r: int) -> list[tuple[str, ...]]:
    from itertools import combinations

    return list(combinations(PRODUCTS, r))


# --------------------------------------------------------------------------- the models, GEMM swapped

def excess(out: Tensor, ref: Tensor) -> tuple[float, float]:
    """(largest |out - ref| / (atol + rtol |ref|) at the strict tier, largest |out - ref|): allclose passes
    at <= 1."""
    diff = (out.double() - ref.double()).abs()
    return (diff / (ATOL + RTOL * ref.double().abs())).max().item(), diff.max().item()


def _tf32_linear(x: Tensor, w: Tensor) -> Tensor:
    """cuBLAS's TF32 GEMM (TF32 allowed for this call only)."""
    from utils import precision

    with precision.tf32(True):
        return F.linear(x, w)


def _interleaved(x: Tensor, w: Tensor) -> tuple[Tensor, Tensor]:
    """Operands whose product is xs·wb + xb·ws + xb·wb in one GEMM of 3K: k's three pairs side by side, so
    a chunk of k values is a chunk of columns."""
    (xb, xs), (wb, ws) = split_tf32(x), split_tf32(w)
    return (torch.stack([xs, xb, xb], -1).reshape(x.shape[0], -1),
            torch.stack([wb, ws, wb], -1).reshape(w.shape[0], -1))


def _chunked(chunk: int) -> Callable[[Tensor, Tensor], Tensor]:
    def gemm(x: Tensor, w: Tensor) -> Tensor:
        x3, w3 = _interleaved(x, w)
        out = torch.zeros(x.shape[0], w.shape[0], device=x.device)
        for k0 in range(0, x3.shape[1], 3 * chunk):  # each chunk on the tensor cores, the chunks added with FADD
            out += _tf32_linear(x3[:, k0:k0 + 3 * chunk], w3[:, k0:k0 + 3 * chunk])
        return out
    return gemm


def _exact(x: Tensor, w: Tensor) -> Tensor:
    return F.linear(x.double(), w.double()).float()


def cpu_variants() -> dict[str, Callable[[Tensor, Tensor], Tensor]]:
    """The GEMM variants any device can run: the split's own error, emulated in float64."""
    return {"1xTF32 operands, float64 sums": lambda x, w: split_gemm64(x, w, ["xb·wb"]),
            "3xTF32, products and sums in float64": lambda x, w: split_gemm64(x, w, PRODUCTS[:3]),
            "all four products, float64": lambda x, w: split_gemm64(x, w, PRODUCTS),
            "exact (float64) GEMM": _exact}


def gpu_variants() -> dict[str, Callable[[Tensor, Tensor], Tensor]]:
    """The accuracy table's GEMMs, as cuBLAS TF32 GEMMs on pre-split operands (each product of two TF32
    values is exact on a tensor core; what differs is how the products are added)."""
    return {"1xTF32": lambda x, w: _tf32_linear(to_tf32(x), to_tf32(w)),
            "3xTF32, one accumulator over all of K": lambda x, w: _tf32_linear(*_interleaved(x, w)),
            "3xTF32, products and sums in float64": lambda x, w: split_gemm64(x, w, PRODUCTS[:3]),
            "3xTF32, K in chunks of 256 added in fp32": _chunked(256),
            "3xTF32, K in chunks of 32 added in fp32": _chunked(32),
            "all four products, float64": lambda x, w: split_gemm64(x, w, PRODUCTS),
            "exact (float64) GEMM": _exact}


def _linear_of(model: torch.nn.Module) -> torch.nn.Linear:
    (linear,) = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    return linear


def accuracy(pids, variants: dict, *, scale: str = "full", seeds: int = SEEDS, device: str = "cuda",
             extras: dict | None = None, progress: bool = False) -> list[dict]:
    """Each problem's model with its nn.Linear's GEMM replaced by each variant (the bias added after it in
    float32, the rest of the model eager float32), against eager float32 with TF32 off, over `seeds` seeds
    (fresh torch.rand inputs, random GroupNorm γ/β and biases as utils.check randomises them). Each model is
    built once per seed and runs every variant. One entry per (problem, variant): {"section": "accuracy",
    "contender", "problem", "excess", "excess_by_seed", "max_abs", "seeds", "scale"} and extras[variant]."""
    from utils import check, precision

    rows = []
    for pid in pids:
        p = get_problem(pid)
        found: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
        for seed in range(seeds):
            model = p.make_model(scale, seed=seed)
            check._randomise(model, seed)  # γ = ±U(0.5, 1.5), biases N(0, 0.5²): the harness's hardening
            model = model.to(device).eval()
            x = p.get_inputs(scale, generator=torch.Generator().manual_seed(seed + 1))[0].to(device)
            linear = _linear_of(model)
            with torch.no_grad(), precision.ieee_fp32():
                ref = model(x)
                for name, gemm in variants.items():
                    linear.forward = lambda t, g=gemm, l=linear: g(t, l.weight) + l.bias  # noqa: E741
                    try:
                        found[name].append(excess(model(x), ref))
                    finally:
                        del linear.forward
            if progress:
                print(f"  problem {pid}, seed {seed}: {len(variants)} GEMMs compared", flush=True)
            del model, x, ref
        for name, pairs in found.items():
            rows.append({"section": "accuracy", "contender": name, "problem": pid,
                         "excess": max(e for e, _ in pairs), "excess_by_seed": [e for e, _ in pairs],
                         "max_abs": max(a for _, a in pairs), "seeds": seeds, "scale": scale}
                        | (extras or {}).get(name, {}))
    return rows


def accuracy_findings(rows_or_record, source: str = "cuBLAS") -> str:
    """Computed bullets on an accuracy table: each GEMM's worst excess and how many problems it passes, then
    the split against the exact GEMM and the fourth product against three (where both rows are there)."""
    rows = _accuracy_rows(rows_or_record, source)
    names = list(dict.fromkeys(r["contender"] for r in rows))
    worst = {n: max(r["excess"] for r in rows if r["contender"] == n) for n in names}
    passed = {n: sum(r["excess"] <= 1 for r in rows if r["contender"] == n) for n in names}
    total = len({r["problem"] for r in rows})
    lines = [f"- {n}: worst excess **{worst[n]:.3g}**, inside the tier on {passed[n]} of {total} problems." for n in names]
    by = {(r["contender"], r["problem"]): r["excess"] for r in rows}
    pids = sorted({r["problem"] for r in rows})
    split, exact, four = ("3xTF32, products and sums in float64", "exact (float64) GEMM", "all four products, float64")
    if split in names and exact in names:
        ratio = max(by[(split, p)] / max(by[(exact, p)], 1e-12) for p in pids)
        lines.append(f"- The split with exact arithmetic against an exact GEMM: at most **{ratio:.2f}x** its excess on "
                     "any problem. (An exact GEMM's excess is eager float32's own rounding, seen from the exact result.)")
    if split in names and four in names:
        moved = max(abs(by[(four, p)] - by[(split, p)]) for p in pids)
        lines.append(f"- The fourth product, xs·ws, moves the excess by at most **{moved:.2g}** on any problem.")
    return "\n".join(lines)


def _accuracy_rows(rows_or_record, source: str) -> list[dict]:
    if isinstance(rows_or_record, dict):
        return [r for r in rows_or_record["entries"] if r.get("section") == "accuracy" and r.get("source") == source]
    return [r for r in rows_or_record if r.get("section", "accuracy") == "accuracy"]


def _accuracy_markdown(rows: list[dict]) -> str:
    pids = list(dict.fromkeys(r["problem"] for r in rows))
    at = {(r["contender"], r["problem"]): r for r in rows}
    lines = ["| GEMM | " + " | ".join(map(str, pids)) + " |", "|---|" + "---:|" * len(pids)]
    for name in dict.fromkeys(r["contender"] for r in rows):
        cells = []
        for pid in pids:
            e = at.get((name, pid))
            cells.append("–" if e is None else (f"**{e['excess']:.2f}**" if e["excess"] > 1 else f"{e['excess']:.3g}"))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def accuracy_table(rows_or_record, source: str = "cuBLAS") -> str:
    """Markdown: the largest allclose excess (atol = rtol = 1e-4, over the seeds; 1 or below passes, above in
    bold) per GEMM and problem. From accuracy() rows, or from a record's rows of one source ("cuBLAS": the
    pre-split table, "rung 10": the promotion intervals)."""
    return _accuracy_markdown(_accuracy_rows(rows_or_record, source))


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


def _tensor_core_step(acc: np.ndarray, terms: np.ndarray, bits: int) -> np.ndarray:
    """One step of the modeled adder: acc and the block's exact products aligned to the largest of them, each
    cut to `bits` bits below that one's leading bit (toward zero), added exactly, the sum cut to float32's
    24 bits toward zero."""
    t = np.concatenate([acc[:, None], terms], 1)
    lead = _lead(np.abs(t).max(1))[:, None]
    s = _cut(t, lead, bits).sum(1)
    return _cut(s, _lead(s), 24)


def tensor_core_dot(x: Tensor, w: Tensor, *, block: int = 4, bits: int = 24, promote: int = 0) -> Tensor:
    """Row-wise 3xTF32 dot products through a MODEL of the tensor core's adder (not NVIDIA's
    specification, which is unpublished; a simplification of the published measurements of it): the split
    products are exact; per step, `block` of them and the accumulator are aligned to the largest, cut
    toward zero at `bits` bits below its leading bit, added, and the sum cut to 24 bits toward zero. The
    products come in the kernel's order (per 8 values of k: xs·wb, xb·ws, xb·wb). With promote > 0 the
    accumulator restarts every `promote` k and is added into a float32 total, rounded to nearest (FADD)."""
    (xb, xs), (wb, ws) = split_tf32(x.float()), split_tf32(w.float())
    xb, xs, wb, ws = (t.double().numpy() for t in (xb, xs, wb, ws))
    acc = np.zeros(x.shape[0])
    total = np.zeros(x.shape[0], dtype=np.float32)
    for k8 in range(0, x.shape[1], 8):
        if promote and k8 and k8 % promote == 0:
            total, acc = (total + acc).astype(np.float32), np.zeros_like(acc)
        for a, b in ((xs, wb), (xb, ws), (xb, wb)):
            products = a[:, k8:k8 + 8] * b[:, k8:k8 + 8]
            for j in range(0, products.shape[1], block):
                acc = _tensor_core_step(acc, products[:, j:j + block], bits)
    out = (total + acc).astype(np.float32).astype(np.float64) if promote else acc
    return torch.from_numpy(out)


def adder_example() -> str:
    """The smallest case of what the modeled adder loses: four products of 0.75 float32 ulps each, added to
    1.0 by FADD (each sum rounded to nearest) and by the model (aligned to 1.0, cut toward zero)."""
    ulp = 2.0 ** -23
    p = np.full((1, 4), 0.75 * ulp)
    exact = 1.0 + 4 * 0.75 * ulp
    fadd = np.ones(1, dtype=np.float32)
    for j in range(4):
        fadd = (fadd + p[:, j]).astype(np.float32)
    model = _tensor_core_step(np.ones(1), p, 24)
    lines = [f"{'1.0 + 4 products of 0.75 ulp':<30} {'result - 1, in ulps of 1.0':>26}",
             f"{'exact':<30} {(exact - 1) / ulp:>26g}",
             f"{'FADD, one by one':<30} {(fadd.item() - 1) / ulp:>26g}",
             f"{'modeled tensor-core adder':<30} {(model.item() - 1) / ulp:>26g}"]
    return "\n".join(lines)


def accumulation_model(ks=(256, 512, 1024, 2048, 4096, 8192), outputs: int = 512, seed: int = 0, promote: int = 256) -> list[dict]:
    """The largest error against float64 of `outputs` dot products of length K (x like torch.rand, w like
    nn.Linear's init for in_features = K), summed by FADD (fp32 FFMA), by the modeled tensor-core adder with
    one accumulator over all of K, and with promotion every `promote` k. CPU only: a few seconds."""
    rows = []
    for K in ks:
        g = torch.Generator().manual_seed(seed + K)
        x = torch.rand(outputs, K, generator=g)
        w = (torch.rand(outputs, K, generator=g) * 2 - 1) / math.sqrt(K)
        exact = (x.double() * w.double()).sum(1)
        for how, got in (("FADD (float32 FMA, round to nearest)", fadd_dot(x, w)),
                         ("model: one accumulator over all of K", tensor_core_dot(x, w)),
                         (f"model: promoted every {promote}", tensor_core_dot(x, w, promote=promote))):
            rows.append({"K": K, "how": how, "max_abs_err": (got - exact).abs().max().item()})
    return rows


def _sweep_label(r: dict) -> str:
    return r["contender"]


def accumulation_figure(model_rows: list[dict] | None = None, record: dict | None = None, save=None) -> Figure:
    """Largest |error| against float64 as K grows, log-log: the CPU model (left) and, from a record, rung 10
    at each promotion interval and cuBLAS SGEMM measured on a GPU (right)."""
    sweep = [e for e in (record or {}).get("entries", []) if e.get("section") == "promotion_k"]
    panels = (model_rows is not None) + bool(sweep)
    with matplotlib.rc_context(plots.STYLE):
        fig = Figure(figsize=(6.0 * max(panels, 1), 4.2))
        i = 1
        if model_rows is not None:
            ax = fig.add_subplot(1, max(panels, 1), i)
            i += 1
            for j, how in enumerate(dict.fromkeys(r["how"] for r in model_rows)):
                pts = [(r["K"], r["max_abs_err"]) for r in model_rows if r["how"] == how]
                fadd = how.startswith("FADD")
                ax.plot(*zip(*pts), marker="o", color=plots.COLOURS["cuBLAS"] if fadd else plots.CYCLE[j],
                        ls="--" if fadd else "-", label=how)
            ax.set_title("a model of the adder, on this CPU", fontsize=10)
            _loglog(ax)
        if sweep:
            ax = fig.add_subplot(1, max(panels, 1), i)
            for j, name in enumerate(dict.fromkeys(_sweep_label(r) for r in sweep)):
                pts = sorted((r["K"], r["max_abs_err"]) for r in sweep if _sweep_label(r) == name)
                ax.plot(*zip(*pts), marker="o", color=plots.COLOURS["cuBLAS"] if name == SGEMM else plots.CYCLE[j],
                        ls="--" if name == SGEMM else "-", label=name)
            ax.set_title(f"measured on the GPU: M = {sweep[0]['M']}, N = {sweep[0]['N']}, K as below", fontsize=10)
            _loglog(ax)
        fig.suptitle("Largest |error| against float64 as K grows" + ("" if record is None or not sweep else
                                                                       f"\n{plots.provenance(record)}"))
    return plots.finish(fig, save)


def _loglog(ax) -> None:
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("K (values summed per output)")
    ax.set_ylabel("largest |error| against float64")
    ax.legend(fontsize=8)


def default_promote_k() -> int:
    """Rung 10's default promotion interval, read from its #define."""
    match = re.search(r"#define GEMM10_PROMOTE_K (\d+)", build.kernel_source(RUNG10))
    if match is None:
        raise ValueError("kernels/gemm_10_3xtf32.cu has no `#define GEMM10_PROMOTE_K <n>`")
    return int(match.group(1))


def _promote_label(k: int) -> str:
    return f"{RUNG10} PROMOTE_K={k}" + (" (never)" if k == 0 else "")


def promotion_table(record: dict) -> str:
    """Markdown, from a record: per promotion interval, the four models' worst excess (strict tier, over the
    seeds), the time at the first shape and its ratio to cuBLAS SGEMM."""
    rows = [e for e in record["entries"] if e.get("section") == "accuracy" and e.get("source") == "rung 10"]
    timed = {e["contender"]: e for e in record["entries"] if e.get("section") == "timing"
             and e.get("shape") == list(SHAPES[0])}
    pids = list(dict.fromkeys(r["problem"] for r in rows))
    lines = ["| promotion every | " + " | ".join(map(str, pids)) + f" | ms at {' x '.join(map(str, SHAPES[0]))} | "
             "x cuBLAS SGEMM |", "|---|" + "---:|" * (len(pids) + 2)]
    for k in sorted({r["promote_k"] for r in rows}, key=lambda k: k or 10 ** 9):
        cells = []
        for pid in pids:
            e = next(r for r in rows if r["promote_k"] == k and r["problem"] == pid)
            cells.append(f"**{e['excess']:.2f}**" if e["excess"] > 1 else f"{e['excess']:.3g}")
        t = timed.get(_promote_label(k)) or (timed.get(RUNG10) if k == record_default(record) else None)
        cells += [f"{t['median_ms']:.3f}", f"{t['x_cublas_sgemm']:.2f}x"] if t else ["–", "–"]
        lines.append(f"| {'never' if k == 0 else f'{k} k'} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def record_default(record: dict) -> int | None:
    """The default promotion interval the record's rung 10 was built with."""
    return next((e.get("default_promote_k") for e in record["entries"] if e.get("default_promote_k") is not None), None)


def promotion_verdict(my_k, record: dict | None) -> str:
    """Exercise 2: the largest promotion interval (0, never, being the largest) at which all four models
    keep a 2x margin in the strict tier (worst excess over the seeds <= MARGIN), among those the record
    measured. Not yet until my_k is one of them; no PASS without a record to check it against."""
    rows = [] if record is None else [e for e in record["entries"]
                                      if e.get("section") == "accuracy" and e.get("source") == "rung 10"]
    measured = sorted({r["promote_k"] for r in rows} or set(PROMOTE_KS), key=lambda k: k or 10 ** 9)
    if my_k not in measured:
        return f"Not yet: set MY_PROMOTE_K to one of the intervals {measured} (0 = never promote)."
    if record is None:
        return ("Your answer is in, but there is no recorded run to check it against: on a GPU, "
                "`python -m utils.run --notebooks 08` records one.")
    worst = {k: max(r["excess"] for r in rows if r["promote_k"] == k) for k in measured}
    keeping = [k for k in measured if worst[k] <= MARGIN]
    if not keeping:
        return f"No interval measured keeps a 2x margin (worst excess {worst}); this exercise has no answer on this record."
    best = max(keeping, key=lambda k: k or 10 ** 9)
    if my_k == best:
        return (f"PASS: promoting every {'never' if best == 0 else best} keeps the worst excess at {worst[best]:.2f} "
                f"(a {1 / max(worst[best], 1e-9):.1f}x margin); the next larger interval measured does not.")
    if worst[my_k] > MARGIN:
        return (f"Not yet: at {my_k or 'never'} the worst model is at {worst[my_k]:.2f} of the tolerance, "
                f"{'outside the tier' if worst[my_k] > 1 else 'inside, but without a 2x margin'}. Promote more often.")
    return (f"Not yet: {my_k} keeps the margin (worst {worst[my_k]:.2f}), but a larger interval does too, and each "
            "promotion costs a wait for the tensor cores: promote less often.")


# --------------------------------------------------------------------------- the rungs

_RANGE = r"(\d+(?:\.\d+)?)\s*-\s*(\d+(?:\.\d+)?)"
_SHAPE = r"at (\d+) x (\d+) x (\d+)"
# A rung's kernel paths, as the timing names them: contender -> (rung, export). The words that tie a clause
# of a PREDICTION to one export (a clause naming none speaks for the rung's main path, `gemm`).
PATHS = {name: (name, "gemm") for name in RUNGS} | {
    f"{RUNG10} linear, weight split kept": (RUNG10, "linear"),
    f"{RUNG10} split in shared memory": (RUNG10, "gemm_split_in_smem"),
    f"{RUNG10} mma.sync": (RUNG10, "gemm_mma_sync")}
_EXPORT_WORDS = {"linear": ("linear()",), "gemm_mma_sync": ("mma.sync",),
                 "gemm_split_in_smem": ("shared-memory split", "in-shared-memory", "split in shared memory")}


def _clauses(text: str) -> list[str]:
    """A PREDICTION cut into clauses at ';' and at sentence ends, each a unit that one path's numbers share."""
    return [c for c in re.split(r";|(?<!i\.e)(?<!e\.g)\.\s+", text) if c.strip()]


def _parse_clause(clause: str) -> tuple[dict, tuple[float, float] | None]:
    """({shape or None: (lo, hi)} of % of cuBLAS TF32, (lo, hi) x cuBLAS SGEMM or None) named in one clause."""
    pct: dict = {}
    matches = list(re.finditer(_RANGE + r"%", clause))
    yardstick = False
    for m, nxt in zip(matches, [*matches[1:], None]):
        after = clause[m.end(): nxt.start() if nxt else len(clause)].lstrip()
        shape = re.match(r"[^,(]*?" + _SHAPE, after)
        if after.startswith(("of cuBLAS", "of its rate")) or (yardstick and after.startswith("at")):
            yardstick = True
            pct.setdefault(tuple(int(v) for v in shape.groups()) if shape else None, (float(m[1]), float(m[2])))
        else:
            yardstick = False
    # a range, or one value marked approximate ("~4x"): a plain "1.49x" is a measurement quoted, not a prediction
    x = re.search(_RANGE + r"x cuBLAS SGEMM", clause) or re.search(r"~(\d+(?:\.\d+)?)x cuBLAS SGEMM", clause)
    return pct, None if x is None else (float(x[1]), float(x[2] if x.lastindex == 2 else x[1]))


def predictions(name: str, text: str | None = None, export: str = "gemm") -> dict:
    """The numbers a rung's PREDICTION names for one of its paths (`export`): {"pct": {shape or None: (lo, hi)}}
    (% of cuBLAS TF32, for one shape where the clause says "at M x N x K", else for any) and "x_sgemm": (lo, hi)
    or None (x cuBLAS SGEMM). A clause that names a path (linear(), mma.sync, ...) speaks for that path only;
    the others speak for `gemm`. Read from the header, so the comparison is computed, never typed."""
    text = " ".join((text if text is not None else header_section(name, "PREDICTION") or "").split())
    paths = {e for r, e in PATHS.values() if r == name} or {export}  # the words matter where the rung has the paths
    pct: dict = {}
    x_sgemm = None
    for clause in _clauses(text):
        named = [e for e, words in _EXPORT_WORDS.items() if e in paths and any(w in clause for w in words)]
        if (named and export not in named) or (not named and export != "gemm"):
            continue
        p, x = _parse_clause(clause)
        for key, band in p.items():
            pct.setdefault(key, band)
        x_sgemm = x_sgemm or x
    return {"pct": pct, "x_sgemm": x_sgemm}


def _predicted(contender: str, shape) -> tuple:
    """(% of cuBLAS TF32 band, x SGEMM band) that a timed contender's header predicts at `shape`."""
    if contender not in PATHS:
        return None, None
    want = predictions(*PATHS[contender][:1], export=PATHS[contender][1])
    return want["pct"].get(tuple(shape), want["pct"].get(None)), want["x_sgemm"]


def _band(values: tuple[float, float] | None, unit: str) -> str:
    if values is None:
        return "–"
    lo, hi = values
    return f"{lo:g}{unit}" if lo == hi else f"{lo:g}-{hi:g}{unit}"


def _where(value: float, band) -> str:
    if band is None:
        return ""
    lo, hi = band
    if lo == hi:  # "~4x": within 10%
        lo, hi = 0.9 * lo, 1.1 * hi
    return "inside" if lo <= value <= hi else ("above" if value > hi else "below")


def prediction_table(record: dict) -> str:
    """Markdown: each rung's path at each shape, its header's prediction and the record's measurement, in % of
    cuBLAS TF32 and x cuBLAS SGEMM (both from the same run), and where the measurement falls."""
    timed = [e for e in record["entries"] if e.get("section") == "timing" and e["contender"] in PATHS]
    lines = ["| rung, path | M x N x K | predicted % of cuBLAS TF32 | measured | predicted x cuBLAS SGEMM | measured | "
             "verdict |", "|---|---|---:|---:|---:|---:|---|"]
    for e in sorted(timed, key=lambda e: list(PATHS).index(e["contender"])):
        band, x_band = _predicted(e["contender"], e["shape"])
        verdicts = [f"{what} {where}" for what, where in (("%:", _where(e["pct_of_cublas_tf32"], band)),
                                                         ("x:", _where(e["x_cublas_sgemm"], x_band))) if where]
        lines.append(f"| `{e['contender']}` | {' x '.join(map(str, e['shape']))} | {_band(band, '%')} | "
                     f"{e['pct_of_cublas_tf32']:.1f}% | {_band(x_band, 'x')} | {e['x_cublas_sgemm']:.2f}x | "
                     f"{'; '.join(verdicts) or 'no range in the header to compare'} |")
    return "\n".join(lines)


# the chapter's targets, at both shapes: contender -> (key, at least, unit)
TARGETS = {"gemm_09_wgmma_tf32": ("pct_of_cublas_tf32", 90.0, "% of cuBLAS TF32"),
           "gemm_10_3xtf32": ("x_cublas_sgemm", 2.2, "x cuBLAS SGEMM"),
           f"{RUNG10} linear, weight split kept": ("x_cublas_sgemm", 2.2, "x cuBLAS SGEMM")}


def target_check(record: dict) -> str:
    """Computed bullets: each target of TARGETS at each shape, the record's value, met or missed."""
    lines = []
    for name, (key, target, unit) in TARGETS.items():
        for e in (e for e in record["entries"] if e.get("section") == "timing" and e["contender"] == name):
            value = e[key]
            shown = f"{value:.1f}%" if unit.startswith("%") else f"{value:.2f}x"
            goal = f"{target:g}%" if unit.startswith("%") else f"{target:g}x"
            lines.append(f"- `{name}` at {' x '.join(map(str, e['shape']))}: **{shown}** {unit.lstrip('%x ')}; "
                         f"target at least {goal}: **{'met' if value >= target else 'missed'}**.")
    return "\n".join(lines) or "- (no timing in this record)"


def promotion_findings(record: dict) -> str:
    """Computed sentences on rung 10's promotion: the default interval's and no promotion's worst excess, and
    what promotion costs in time at the first shape."""
    rows = [e for e in record["entries"] if e.get("section") == "accuracy" and e.get("source") == "rung 10"]
    if not rows:
        return "(no rung 10 rows in this record)"
    default = record_default(record)
    worst = {k: max(r["excess"] for r in rows if r["promote_k"] == k) for k in {r["promote_k"] for r in rows}}
    timed = {e["contender"]: e["median_ms"] for e in record["entries"] if e.get("section") == "timing"
             and e.get("shape") == list(SHAPES[0])}
    text = [f"With one accumulator over all of K (never promoting) the worst model is at **{worst.get(0, float('nan')):.2f}** "
            f"of the tolerance; promoting every {default} k (the default), at **{worst.get(default, float('nan')):.2f}**."]
    never, promoted = timed.get(_promote_label(0)), timed.get(RUNG10)
    if never and promoted:
        text.append(f"At {' x '.join(map(str, SHAPES[0]))} the promotion costs **{100 * (promoted / never - 1):.1f}%** "
                    f"of the time ({promoted:.3f} ms against {never:.3f} ms never promoting).")
    return " ".join(text)


def timing_figure(record: dict, save=None) -> Figure:
    """TFLOP/s of every timed contender, one panel per shape, on a log axis; the predicted ranges of the
    rungs (their % of cuBLAS TF32, turned into TFLOP/s with this run's cuBLAS TF32) as brackets."""
    timed = [e for e in record["entries"] if e.get("section") == "timing"]
    shapes = list(dict.fromkeys(tuple(e["shape"]) for e in timed))
    with matplotlib.rc_context(plots.STYLE):
        fig = Figure(figsize=(11.0, 1.2 + 0.42 * max(len([e for e in timed if tuple(e["shape"]) == s]) for s in shapes)))
        for i, shape in enumerate(shapes):
            ax = fig.add_subplot(1, len(shapes), i + 1)
            rows = [e for e in timed if tuple(e["shape"]) == shape]
            ref = next(e for e in rows if e["contender"] == TF32_CUBLAS)
            colours = [plots.COLOURS["cuBLAS"] if e["contender"] in (SGEMM, TF32_CUBLAS) else
                       "#31a354" if e["contender"] in PATHS else "#bdbdbd" for e in rows]
            ax.barh(range(len(rows)), [e["tflops"] for e in rows], color=colours, edgecolor="white", zorder=2)
            for j, e in enumerate(rows):
                ax.text(e["tflops"] * 1.05, j, f"{e['pct_of_cublas_tf32']:.0f}% · {e['x_cublas_sgemm']:.2f}x", va="center",
                        fontsize=7, zorder=3)
                band = _predicted(e["contender"], shape)[0]
                if band:
                    lo, hi = (ref["tflops"] * v / 100 for v in band)
                    ax.plot([lo, hi], [j + 0.38, j + 0.38], color="#e6550d", lw=2.5, zorder=4)
            ax.set_xscale("log")
            ax.set_yticks(range(len(rows)), [e["contender"] for e in rows], fontsize=7)
            ax.invert_yaxis()
            ax.set_xlim(min(e["tflops"] for e in rows) / 2, ref["tflops"] * 4)
            ax.set_xlabel("TFLOP/s, log scale (labels: % of cuBLAS TF32 · x cuBLAS SGEMM)", fontsize=8)
            ax.set_title(" x ".join(map(str, shape)), fontsize=10)
        fig.legend(handles=[Line2D([], [], color="#e6550d", lw=2.5, label="the header's predicted range")],
                   loc="lower right", fontsize=8)
        fig.suptitle(f"The tensor-core rungs against cuBLAS, one run\n{plots.provenance(record)}")
    return plots.finish(fig, save)


# --------------------------------------------------------------------------- diagrams

def fragment_layout() -> dict[str, dict[tuple[int, int], tuple[int, int]]]:
    """mma.sync.m16n8k8 TF32's fragments, as kernels/common/tensor_core.cuh states them: for A (16 x 8),
    B (8 x 8, k x n) and D (16 x 8), {(row, col): (lane, register)}."""
    a, b, d = {}, {}, {}
    for lane in range(32):
        g, t = divmod(lane, 4)
        for r, (row, col) in enumerate(((g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4))):
            a[(row, col)] = (lane, r)
        for r, (row, col) in enumerate(((t, g), (t + 4, g))):
            b[(row, col)] = (lane, r)
        for r, (row, col) in enumerate(((g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1))):
            d[(row, col)] = (lane, r)
    return {"A": a, "B": b, "D": d}


def fragment_figure() -> Figure:
    """A drawn diagram of fragment_layout(): every element of A, B and D labelled with the lane that holds it
    and which of its registers, coloured by the lane's group g = lane / 4."""
    layout = fragment_layout()
    shapes = {"A": (16, 8), "B": (8, 8), "D": (16, 8)}
    titles = {"A": "A = x tile, 16 x 8 (m x k): a[0..3]", "B": "B = w tile as k x n, 8 x 8: b[0..1]",
              "D": "D, 16 x 8 (m x n): d[0..3]"}
    cmap = matplotlib.colormaps["tab10"]
    with matplotlib.rc_context(plots.STYLE):
        fig = Figure(figsize=(12.0, 5.4))
        for i, name in enumerate(("A", "B", "D")):
            ax = fig.add_subplot(1, 3, i + 1)
            rows, cols = shapes[name]
            for (row, col), (lane, reg) in layout[name].items():
                ax.add_patch(Rectangle((col, row), 1, 1, facecolor=cmap((lane // 4) % 10), alpha=0.35 + 0.15 * (lane % 4),
                                       edgecolor="white"))
                ax.text(col + 0.5, row + 0.5, f"{lane}\n{name.lower()}{reg}", ha="center", va="center", fontsize=6)
            ax.set_xlim(0, cols)
            ax.set_ylim(rows, 0)
            ax.set_aspect("equal")
            ax.set_xticks([c + 0.5 for c in range(cols)], range(cols), fontsize=7)
            ax.set_yticks([r + 0.5 for r in range(rows)], range(rows), fontsize=7)
            ax.grid(False)
            ax.set_title(titles[name], fontsize=9)
        fig.suptitle("mma.sync.m16n8k8 (TF32): which lane holds which element, and in which register "
                     "(colour: g = lane / 4; shade: t = lane % 4)")
        fig.tight_layout()
    return fig


def pipeline_schedule(k_tiles: int = 10, stages: int = 4, copy: float = 3.0, compute: float = 1.0) -> list[dict]:
    """A toy schedule of rung 9's ring, in arbitrary time units: the producer issues tile kt's TMA copy as
    soon as its stage kt % stages is empty (the consumers finished tile kt - stages); the copy takes `copy`
    (copies overlap, arriving at most one per compute-time apart); the consumers start tile kt when it has
    arrived (full) and the previous tile is done. {"kt", "stage", "issue", "arrive", "start", "end"}."""
    rows: list[dict] = []
    for kt in range(k_tiles):
        issue = rows[kt - stages]["end"] if kt >= stages else 0.1 * kt
        arrive = max(issue + copy, rows[-1]["arrive"] + compute if rows else 0.0)
        start = max(arrive, rows[-1]["end"] if rows else 0.0)
        rows.append({"kt": kt, "stage": kt % stages, "issue": issue, "arrive": arrive, "start": start,
                     "end": start + compute})
    return rows


def pipeline_figure(stages: int = 4, k_tiles: int = 10) -> Figure:
    """A drawn diagram of the TMA / mbarrier producer-consumer ring (rung 9): on the left the ring of stages
    with its two barriers per stage, on the right pipeline_schedule() as a timeline."""
    sched = pipeline_schedule(k_tiles, stages)
    cmap = matplotlib.colormaps["tab10"]
    with matplotlib.rc_context(plots.STYLE):
        fig = Figure(figsize=(12.0, 4.0))
        ax = fig.add_subplot(1, 2, 1)
        for s in range(stages):
            ax.add_patch(Rectangle((0.3 + 1.6 * s, 0.9), 1.3, 1.0, facecolor=cmap(s), alpha=0.5, edgecolor="black"))
            ax.text(0.95 + 1.6 * s, 1.4, f"stage {s}\nx and w tiles\nfull[{s}], empty[{s}]", ha="center", va="center",
                    fontsize=6.5)
        for x0, text in ((0.0, "producer\n(1 thread of warp group 0)"), (4.2, "consumers\n(warp groups 1 and 2)")):
            ax.add_patch(Rectangle((x0, 3.0), 2.6, 0.8, facecolor="#eeeeee", edgecolor="black"))
            ax.text(x0 + 1.3, 3.4, text, ha="center", va="center", fontsize=7)
        for start, end, text, colour, at in (
                ((1.3, 3.0), (2.25, 1.95), "waits on empty[s], then two TMA copies\ninto stage s (bytes counted on full[s])",
                 "#3182bd", (-0.1, 2.45)),
                ((4.0, 1.95), (5.5, 3.0), "full[s] completes when the bytes\nhave landed: wgmma reads stage s",
                 "#31a354", (5.0, 1.75)),
                ((4.2, 3.55), (2.6, 3.55), "wgmmas done with stage s:\narrive on empty[s]", "#e6550d", (2.75, 3.95))):
            ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color=colour, lw=1.4))
            ax.text(*at, text, fontsize=6.5, color=colour)
        ax.text(0.0, 0.35, "no barrier stops the whole block: each side waits only on the stage it needs next",
                fontsize=7)
        ax.set_xlim(-0.2, 7.0)
        ax.set_ylim(0.1, 4.5)
        ax.axis("off")
        ax.set_title(f"the ring: {stages} stages, two mbarriers each", fontsize=9)
        bx = fig.add_subplot(1, 2, 2)
        for r in sched:
            c = cmap(r["stage"])
            row = 2 + stages - 1 - r["stage"]
            bx.barh(row, r["arrive"] - r["issue"], left=r["issue"], height=0.6, color=c, alpha=0.5, edgecolor="white")
            bx.text((r["issue"] + r["arrive"]) / 2, row, f"{r['kt']}", ha="center", va="center", fontsize=7)
            bx.barh(1, r["end"] - r["start"], left=r["start"], height=0.6, color=c, edgecolor="white")
            bx.text(r["start"] + 0.5, 1, str(r["kt"]), ha="center", va="center", fontsize=7)
        bx.set_yticks([1, *range(2, 2 + stages)], ["consumers: wgmma\non tile kt",
                                                   *[f"TMA copy into\nstage {s}" for s in reversed(range(stages))]],
                      fontsize=7)
        bx.set_xlabel(f"time (a toy model: a copy takes 3 units, a tile's wgmmas 1); tile kt uses stage kt % {stages}",
                      fontsize=7)
        bx.set_title("after the first copies land, the tensor cores never wait", fontsize=9)
        bx.grid(axis="y", visible=False)
        fig.suptitle("Rung 9's producer-consumer ring: TMA copies and mbarriers (a diagram)")
        fig.tight_layout()
    return fig


def paths_label() -> str | None:
    """The first words of the paragraph of rung 10's header that lists its kernel paths ("Two kernels do
    this", "Three kernels do this", ...): the count changes as paths come and go. None if there is none."""
    match = re.search(r"^// ((?:\w+ )?kernels do this)", build.kernel_source(RUNG10), re.MULTILINE | re.IGNORECASE)
    return None if match is None else match.group(1)


def quote_paths() -> None:
    """Show that paragraph (paths_label) as ladder_chapter.quote does, or say that there is none."""
    from utils.ladder_chapter import quote

    label = paths_label()
    if label is None:
        print(f"(no paragraph naming rung 10's kernels in kernels/{RUNG10}.cu's header: see the file)")
    else:
        quote(RUNG10, label)


def show_excerpt(name: str, first: str, last: str):
    """Display the lines of a kernel file (or a "common/....cuh" header) from the first line containing
    `first` to the next line containing `last`, under a line naming the file and line range: an excerpt
    of the source as it is compiled, never a pasted copy. Returns the text, or None (with a line saying so)
    when the markers are no longer in the file."""
    from IPython.display import Code, Markdown, display

    from utils.show import KernelText, source_path

    path = source_path(name)
    lines = path.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if first in line), None)
    end = None if start is None else next((i for i in range(start, len(lines)) if last in lines[i]), None)
    if end is None:
        print(f"(the excerpt from {first!r} to {last!r} is no longer in {build.display_path(path)}: see the file)")
        return None
    text = KernelText("\n".join(lines[start:end + 1]))  # a str that IPython does not print a second time
    text.path, text.first_line, text.last_line = path, start + 1, end + 1
    display(Markdown(f"`{build.display_path(path)}`, lines {start + 1}-{end + 1}"))
    display(Code(str(text), language="cuda"))
    return text


# --------------------------------------------------------------------------- the GPU run

def build_jobs(variants: bool = True) -> dict[str, str | build.Variant]:
    """What the chapter compiles, for build.load_kernels: {label: kernel}, the three rungs and, with
    variants, rung 10 at each promotion interval of PROMOTE_KS other than its default. Only what this
    machine can build (build.builds_here: rungs 9 and 10 are sm_90a)."""
    jobs = {name: name for name in RUNGS if build.builds_here(name)}
    if variants and RUNG10 in jobs:
        jobs |= {_promote_label(k): _promote_variant(k) for k in PROMOTE_KS if k != default_promote_k()}
    return jobs


def runs_here() -> bool:
    """Whether this machine can run the chapter's measurement: a GPU that builds every rung (sm_90)."""
    from utils import env

    return env.mode() == "gpu" and all(build.builds_here(n) for n in RUNGS)


def _promote_variant(k: int) -> str | build.Variant:
    """Rung 10 promoting every k (its plain build at its default interval)."""
    return RUNG10 if k == default_promote_k() else build.Variant(RUNG10, [f"-DGEMM10_PROMOTE_K={k}"])


def _modules() -> tuple[dict, dict]:
    """The rungs' modules by name, and rung 10's by promotion interval: every build of build_jobs(), the
    cold ones side by side (all warm when the notebook's build cell ran first)."""
    built = build.load_kernels(build_jobs())
    promoted = {k: built[RUNG10 if k == default_promote_k() else _promote_label(k)] for k in PROMOTE_KS}
    return {name: built[name] for name in RUNGS}, promoted


def _k_sweep(promoted: dict, progress: bool, device: str = "cuda") -> list[dict]:
    from utils import ladder, precision

    M, N = SWEEP_MN
    fns = {_promote_label(k): promoted[k].gemm for k in PROMOTE_KS} | {SGEMM: F.linear}
    rows = []
    for K in SWEEP_KS:
        x, w = ladder.operands(M, N, K, seed=K, device=device)
        ref = F.linear(x.double(), w.double())
        with precision.ieee_fp32():
            for name, fn in fns.items():
                out = fn(x, w)
                e, err = excess(out, ref)
                rows.append({"section": "promotion_k", "contender": name, "M": M, "N": N, "K": K,
                             "promote_k": next((k for k in PROMOTE_KS if _promote_label(k) == name), None),
                             "max_abs_err": err, "strict_ratio": e})
        if progress:
            print(f"  error against K: K = {K} done", flush=True)
    return rows


def _timing(mods: dict, promoted: dict, reps: int, progress: bool, device: str = "cuda") -> list[dict]:
    from utils import bench, ladder, precision

    rows = []
    for M, N, K in SHAPES:
        x, w = ladder.operands(M, N, K, device=device)
        paths = {}
        for label, (rung, export) in PATHS.items():  # every path the build exports (linear: with a zero bias)
            if export == "linear" and hasattr(mods[rung], "linear"):
                bias = torch.zeros(N, device=x.device)
                paths[label] = (lambda a, b, f=mods[rung].linear, z=bias: f(a, b, z), "strict")
            elif hasattr(mods[rung], export) and export != "linear":
                paths[label] = (getattr(mods[rung], export), ladder.tier_of(rung))
        # the promotion variants are timed for their cost; their accuracy is the models' table
        paths |= {_promote_label(k): (promoted[k].gemm, "tf32") for k in PROMOTE_KS if k != default_promote_k()}
        contenders = {SGEMM: lambda: F.linear(x, w), TF32_CUBLAS: lambda: _tf32_linear(x, w)}
        checked = {}
        with precision.ieee_fp32():
            for name, (fn, tier) in paths.items():
                ok, detail = ladder.verify(fn, x, w, tier)
                if progress:
                    print(f"  {name:<40} {'ok' if ok else 'WRONG'} ({tier} tier): {detail}", flush=True)
                if not ok:
                    raise AssertionError(f"{name} is wrong at {M}x{N}x{K} ({detail}); not timing a wrong kernel")
                contenders[name] = lambda fn=fn: fn(x, w)
                checked[name] = (tier, detail)
            timed = bench.compare(contenders, baseline=None, reps=reps, progress=progress)
        by = {r["contender"]: r for r in timed}
        flops = 2 * M * N * K
        for r in timed:
            tier, detail = checked.get(r["contender"], ("strict" if r["contender"] == SGEMM else "tf32", "cuBLAS"))
            rows.append(r | {"section": "timing", "shape": [M, N, K], "tier": tier, "verified": detail,
                             "tf32": tier == "tf32", "tflops": flops / (r["median_ms"] * 1e-3) / 1e12,
                             "pct_of_cublas_tf32": 100 * by[TF32_CUBLAS]["median_ms"] / r["median_ms"],
                             "x_cublas_sgemm": by[SGEMM]["median_ms"] / r["median_ms"]})
        del x, w
        if device != "cpu":
            torch.cuda.empty_cache()
    return rows


def measure(reps: int = 30, *, seeds: int = SEEDS, progress: bool = True, scale: str = "full",
            device: str = "cuda") -> list[dict]:
    """The chapter's one GPU run (an sm_90 GPU; its builds, build_jobs(), are loaded first, the cold ones side by side):
      1. accuracy: the four models at full size with cuBLAS TF32 GEMMs on pre-split operands (gpu_variants),
         and with rung 10 built at each promotion interval of PROMOTE_KS, `seeds` seeds each;
      2. promotion_k: rung 10 at each interval and cuBLAS SGEMM, largest error against float64 as K grows;
      3. timing: rungs 8, 9, 10 (and rung 10's mma.sync path and promotion variants) against cuBLAS SGEMM and
         cuBLAS TF32 in one bench.compare per shape of SHAPES, each verified at its tier first.
    Entries of kind "tensor_cores" (utils.results), each with its "section". (scale and device are there for
    the tests, which run it on the CPU with the kernels and the timing replaced.)"""
    default = default_promote_k()
    mods, promoted = _modules()
    variants = gpu_variants()
    extras = {name: {"source": "cuBLAS"} for name in variants}
    for k in PROMOTE_KS:
        variants[_promote_label(k)] = promoted[k].gemm
        extras[_promote_label(k)] = {"source": "rung 10", "promote_k": k, "default_promote_k": default}
    if progress:
        print(f"1/3 the four models' accuracy: cuBLAS on pre-split operands, and rung 10 promoting every "
              f"{PROMOTE_KS} k (0: never; default {default})", flush=True)
    entries = accuracy(PIDS, variants, scale=scale, seeds=seeds, device=device, extras=extras, progress=progress)
    if progress:
        print("2/3 error against K", flush=True)
    entries += _k_sweep(promoted, progress, device)
    if progress:
        print("3/3 timing, one run per shape", flush=True)
    entries += _timing(mods, promoted, reps, progress, device)
    return entries


# --------------------------------------------------------------------------- records

def provenance(record: dict | None) -> str:
    """Whose numbers a record holds, to open a sentence; or that there is none."""
    if record is None:
        return "No tensor-core run is recorded yet: on an H100, `python -m utils.run --notebooks 08` records one."
    return f"Recorded on {record['device']['name']} ({record['date'][:10]}, commit `{record['git_commit']}`)"


def render(record: dict) -> str:
    """The README's rendering of a "tensor_cores" record: the pre-split accuracy table and the rungs'
    timing against cuBLAS."""
    parts = ["Largest allclose excess against eager fp32 (atol = rtol = 1e-4, over the seeds; 1 or below passes), "
             "cuBLAS TF32 GEMMs on pre-split operands:", accuracy_table(record, "cuBLAS")]
    if any(e.get("source") == "rung 10" for e in record["entries"]):
        parts += ["Rung 10 by promotion interval:", promotion_table(record)]
    timed = [e for e in record["entries"] if e.get("section") == "timing"]
    if timed:
        lines = ["| contender | M x N x K | median ms | TFLOP/s | % of cuBLAS TF32 | x cuBLAS SGEMM |",
                 "|---|---|---:|---:|---:|---:|"]
        lines += [f"| {e['contender']} | {' x '.join(map(str, e['shape']))} | {e['median_ms']:.3f} | {e['tflops']:.1f} | "
                  f"{e['pct_of_cublas_tf32']:.1f} % | {e['x_cublas_sgemm']:.2f}x |" for e in timed]
        parts += ["\n".join(lines)]
    return "\n\n".join(parts)
