"""The helpers of the tensor-core chapter (notebook 08): TF32 rounding and the 3xTF32 split emulated with
torch on any device, the four models' accuracy with the GEMM swapped for a variant, a model of the tensor
core's accumulation, the rungs' predictions read from their headers, the chapter's diagrams, its GPU
measurements (recorded as kind "tensor_cores", and section 6's whole models in the GEMM's epilogue as kind
"whole_model_fusion") and its exercise checkers. Tested in tests/test_tensor_core_chapter.py.

    big, small = split_tf32(x)                       # x = big + small + (a rest below 2^-22 |x|)
    rows = accuracy([94], cpu_variants(), scale="small", seeds=5, device="cpu")
    entries = measure(reps=30)                       # on an H100: the rungs and the accuracy, in one run
    display(Markdown(accuracy_table(record)))        # ... and from a record, on any machine
    entries = measure_fusion(reps=50)                # on an H100: fused against unfused, eager, torch.compile

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
           "default_promote_k", "PATHS", "TARGETS", "FUSED_KERNEL", "FUSION_KIND", "FUSION_OPS", "tile_widths",
           "group_widths", "fit_table", "quad_layout", "epilogue_figure", "linear_and_rest", "fusion_bytes",
           "fusion_bytes_table", "fusion_runs_here", "fusion_contenders", "measure_fusion", "fusion_table",
           "fusion_findings", "fusion_figure", "fusion_predictions", "fusion_prediction_table", "render_fusion"]

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
    """Rung 10's default promotion interval (GEMM10_PROMOTE_K's default), read from the wgmma header."""
    match = re.search(r"constexpr int PROMOTE_K = (\d+);", (build.KERNELS_DIR / "common" / "gemm_wgmma.cuh").read_text())
    if match is None:
        raise ValueError("kernels/common/gemm_wgmma.cuh has no `constexpr int PROMOTE_K = <n>;`")
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
    """What the chapter compiles, for build.load_kernels: {label: kernel}, the three rungs, section 6's
    whole-model kernel and, with variants, rung 10 at each promotion interval of PROMOTE_KS other than its
    default. Only what this machine can build (build.builds_here: rungs 9 and 10 and the whole-model kernel
    are sm_90a)."""
    jobs = {name: name for name in (*RUNGS, FUSED_KERNEL) if build.builds_here(name)}
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
            timed = bench.compare(contenders, baseline=None, reps=reps, progress=progress, interleave=True)
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
         cuBLAS TF32 in one bench.compare per shape of SHAPES, each verified at its tier first, all timed in turn
         (interleave: every contender at the clock the GPU holds under sustained work).
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


# --------------------------------------------------------------------------- section 6: whole models in the epilogue
#
# kernels/fused_gemm_groupnorm.cu runs each model in one GEMM kernel: rung 10's (strict) or rung 9's (TF32)
# wgmma kernel with the rest of the model in its epilogue (kernels/common/gemm_epilogue_groupnorm.cuh).
# What the section computes on any machine (the fit, the quad layout, the bytes), its one GPU run
# (measure_fusion, kind "whole_model_fusion") and the tables and plot drawn from that record.

FUSED_KERNEL = "fused_gemm_groupnorm"
FUSION_KIND = "whole_model_fusion"  # utils.results kind of measure_fusion's run
# problem -> (the tail op of utils.ops that runs after workbook::linear, the whole-model op of ops.WHOLE_MODELS)
FUSION_OPS = {94: ("bias_hardtanh_mish_group_norm", "linear_bias_hardtanh_mish_group_norm"),
              75: ("group_norm_min_bias", "linear_group_norm_min_bias"),
              37: ("swish_bias_group_norm", "linear_swish_bias_group_norm"),
              62: ("group_norm_leaky_relu_x2", "linear_group_norm_leaky_relu_x2")}
COMPILE, UNFUSED, FUSED, ATOMIC, GEMM_ALONE = "torch.compile", "unfused", "fused", "fused, atomic fold", "its GEMM alone"
TIERS = ("strict", "tf32")
_WGMMA_HEADER = "common/gemm_wgmma.cuh"


def tile_widths() -> dict[str, int]:
    """The block tile's width BN of the fused kernel at each tier, read from kernels/common/gemm_wgmma.cuh:
    {"strict": rung 10's PresplitConfig's BN, "tf32": rung 9's Tf32Config's BN}, each as first spelled
    there (the default build's; a -D flag may pick a later spelling)."""
    text = (build.KERNELS_DIR / _WGMMA_HEADER).read_text()
    found = {tier: re.search(rf"using {name}\s*=\s*Config</\*BN\*/\s*(\d+)", text)
             for tier, name in (("strict", "PresplitConfig"), ("tf32", "Tf32Config"))}
    if not all(found.values()):
        raise ValueError(f"kernels/{_WGMMA_HEADER} no longer spells `using PresplitConfig/Tf32Config = Config</*BN*/ n`")
    return {tier: int(m.group(1)) for tier, m in found.items()}


def group_widths(scale: str = "full") -> dict[int, int]:
    """Each problem's GroupNorm group width D = C / G (channels per group), from its definition."""
    return {pid: get_problem(pid).dims(scale).channels_per_group for pid in PIDS}


def fit_table(scale: str = "full") -> str:
    """Plain text: per problem, C, G and D = C / G, and at each tier's tile width whether D divides it (no
    group straddles two blocks), the groups per tile row, and the values of a group each of a quad's 4 lanes
    holds per row (D / 4)."""
    widths = tile_widths()
    lines = [f"{'problem':>7} {'C':>6} {'G':>5} {'D = C/G':>8} " + " ".join(
        f"{f'BN = {bn} ({tier})':>18}" for tier, bn in widths.items()) + f" {'values per lane':>16}"]
    for pid, D in group_widths(scale).items():
        d = get_problem(pid).dims(scale)
        cells = [f"{(f'fits, {bn // D} groups' if bn % D == 0 else 'straddles'):>18}" for bn in widths.values()]
        lines.append(f"{pid:>7} {d.out_features:>6} {d.groups:>5} {D:>8} " + " ".join(cells) + f" {D // 4:>16}")
    return "\n".join(lines)


def quad_layout(cols: int, rows: int = 16) -> dict[tuple[int, int], tuple[int, int]]:
    """Where a warp's accumulators sit after the wgmma (kernels/common/gemm_wgmma.cuh, the end of the kernel):
    {(row, col): (lane, register)} for the warp's 16 rows and the first `cols` columns of the tile (a multiple
    of 8). Lane 4g + t holds rows g and g + 8, columns 8j + 2t and 8j + 2t + 1 of every n8 block j; its
    register 4j + 2h + e is (g + 8h, 8j + 2t + e)."""
    if cols % 8 or rows != 16:
        raise ValueError(f"cols is a multiple of 8 and a warp has 16 rows, got cols={cols}, rows={rows}")
    layout = {}
    for lane in range(32):
        g, t = divmod(lane, 4)
        for j in range(cols // 8):
            for h in range(2):
                for e in range(2):
                    layout[(g + 8 * h, 8 * j + 2 * t + e)] = (lane, 4 * j + 2 * h + e)
    return layout


def epilogue_figure(pid: int = 75, tier: str = "strict") -> Figure:
    """A drawn diagram of why GroupNorm fits in the epilogue, for one problem's group width D at one tier's
    tile width BN: left, a block's tile (128 rows, 8 consumer warps of 16 rows) cut into groups of D columns,
    no group crossing the tile's edge; right, one warp's 16 rows by two groups, each value labelled with the
    lane holding it (quad_layout): a row's D values of a group sit on the 4 lanes of one quad."""
    D, BN = group_widths()[pid], tile_widths()[tier]
    cols = 2 * D
    layout = quad_layout(cols)
    cmap = matplotlib.colormaps["tab10"]
    with matplotlib.rc_context(plots.STYLE):
        fig = Figure(figsize=(12.0, 4.8))
        ax = fig.add_subplot(1, 3, 1)
        for warp in range(8):  # 2 consumer warp groups x 4 warps, 16 rows each
            ax.add_patch(Rectangle((0, 16 * warp), BN, 16, facecolor="#c6dbef" if warp % 2 else "#eff3ff",
                                   edgecolor="white"))
            ax.text(BN + 2, 16 * warp + 8, f"warp {warp}", va="center", fontsize=7)
        for c in range(0, BN + 1, D):
            ax.plot([c, c], [0, 128], color="#e6550d", lw=0.6 if 0 < c < BN else 2.0)
        ax.add_patch(Rectangle((0, 0), cols, 16, fill=False, edgecolor="black", lw=1.5))
        ax.set_xlim(0, BN * 1.25)
        ax.set_ylim(128, 0)
        ax.set_xticks(range(0, BN + 1, max(D, BN // 8)))
        ax.set_xlabel(f"BN = {BN} columns: {BN // D} groups of D = {D}\nper row (orange); none crosses the tile's edge",
                      fontsize=8)
        ax.set_ylabel("BM = 128 rows: 2 consumer warp groups x 4 warps", fontsize=8)
        ax.set_title(f"a block's tile ({tier} tier); black: drawn at the right", fontsize=9)
        ax.grid(False)
        bx = fig.add_subplot(1, 3, (2, 3))
        for (row, col), (lane, reg) in layout.items():
            g, t = divmod(lane, 4)
            bx.add_patch(Rectangle((col, row), 1, 1, facecolor=cmap(t), alpha=0.25 + 0.06 * (g % 2), edgecolor="white"))
            if cols <= 32:  # wider, the labels would not fit: the colours still say which lane of the quad
                bx.text(col + 0.5, row + 0.5, str(lane), ha="center", va="center", fontsize=6)
        for c in range(0, cols + 1, D):
            bx.plot([c, c], [0, 16], color="#e6550d", lw=2.0)
        bx.add_patch(Rectangle((0, 0), D, 1, fill=False, edgecolor="black", lw=1.8))
        bx.set_xlim(0, cols)
        bx.set_ylim(16, 0)
        bx.set_xticks(range(0, cols + 1, 8))
        bx.set_yticks([r + 0.5 for r in range(16)], range(16), fontsize=6)
        bx.set_ylabel("row of the warp: lane 4g + t holds rows g and g + 8", fontsize=8)
        bx.grid(False)
        bx.set_xlabel(f"column of the tile. Outlined: one row of one group, on lanes 0-3 (a quad), {D // 4} values each:\n"
                      "a Welford summary per lane, then two shuffles (xor 1, xor 2) merge the quad's four", fontsize=8)
        bx.set_title("one warp, 16 rows x 2 groups, each value labelled with the lane that holds it; "
                     "colour: t = lane % 4", fontsize=9)
        fig.suptitle(f"GroupNorm in the GEMM's epilogue: problem {pid}'s groups of {D} inside a tile {BN} wide (a diagram)")
    return plots.finish(fig)


def linear_and_rest(pid: int, model: torch.nn.Module) -> tuple[torch.nn.Linear, list]:
    """(the reference model's nn.Linear, the arguments that follow x, weight, linear_bias in its whole-model op
    and, after the GEMM's output, in its tail op): the model's own parameters, not copies."""
    if pid == 94:
        gn = model.groupnorm
        return model.gemm, [model.bias, model.hardtanh.min_val, model.hardtanh.max_val, gn.num_groups, gn.weight,
                            gn.bias, gn.eps]
    if pid == 37:
        gn = model.group_norm
        return model.matmul, [model.bias, gn.num_groups, gn.weight, gn.bias, gn.eps]
    if pid == 62:
        gn = model.gn
        return model.fc, [gn.num_groups, gn.weight, gn.bias, gn.eps, model.leaky_relu.negative_slope]
    if pid == 75:
        gn = model.group_norm
        return model.gemm, [gn.num_groups, gn.weight, gn.bias, gn.eps, model.bias]
    raise ValueError(f"no whole-model op for problem {pid} (the four are {PIDS})")


def fusion_bytes(pid: int, scale: str = "full", bn: int | None = None) -> dict:
    """What fusion saves in memory traffic for one problem, counting the (M, C) tensors only (reading x and w
    is the same either way). Unfused: the GEMM writes its output, the tail reads it back and writes the
    model's output (75's (1, C, M, 1) broadcast is M x C floats too): 3 x M x C x 4 bytes. Fused: the output,
    written once; for 75 also its row-minimum partials, one float per (row, tile of bn columns), written and
    read (bn: the strict tier's tile width by default). Also the GEMM's FLOPs, 2 M C K."""
    d = get_problem(pid).dims(scale)
    M, C, K = d.batch, d.out_features, d.in_features
    out = M * C * 4
    partials = 2 * -(-C // (bn or tile_widths()["strict"])) * M * 4 if pid == 75 else 0
    return {"problem": pid, "M": M, "C": C, "K": K, "gemm_output_bytes": out, "unfused_bytes": 3 * out,
            "fused_bytes": out + partials, "saved_bytes": 2 * out - partials, "gemm_flops": 2 * M * C * K}


def fusion_bytes_table(ceilings: dict | None = None, scale: str = "full") -> str:
    """Markdown: per problem, the bytes of (M, C) tensors moved unfused and fused (fusion_bytes) and what is
    saved; with a "ceilings" record, that saving in ms at its measured copy bandwidth beside the GEMM's floor
    at its measured TF32 rate (the strict tier's 3xTF32 does three times that work)."""
    entry = (ceilings or {}).get("entries", [{}])[0]
    head = "| problem | M x C, K | unfused: MB moved | fused: MB moved | saved MB |"
    if entry:
        head += " saved, ms at the copy bandwidth | the GEMM's TF32 floor, ms | saved / that floor |"
    lines = [head, "|---|---|---:|---:|---:|" + ("---:|---:|---:|" if entry else "")]
    for pid in PIDS:
        b = fusion_bytes(pid, scale)
        line = (f"| {pid} | {b['M']} x {b['C']}, {b['K']} | {b['unfused_bytes'] / 1e6:.1f} | {b['fused_bytes'] / 1e6:.1f} | "
                f"{b['saved_bytes'] / 1e6:.1f} |")
        if entry:
            saved_ms = b["saved_bytes"] / (entry["copy_GBps"] * 1e9) * 1e3
            floor_ms = b["gemm_flops"] / (entry["tf32_tflops"] * 1e12) * 1e3
            line += f" {saved_ms:.3f} | {floor_ms:.3f} | {100 * saved_ms / floor_ms:.0f}% |"
        lines.append(line)
    if entry:
        lines.append(f"\nCopy bandwidth {entry['copy_GBps']:.0f} GB/s (bytes read + written) and TF32 "
                     f"{entry['tf32_tflops']:.0f} TFLOP/s as {plots.provenance(ceilings)}.")
    return "\n".join(lines)


def fusion_runs_here() -> bool:
    """Whether this machine can run measure_fusion: a GPU that builds and runs the fused kernel (sm_90)."""
    from utils import env

    return (env.mode() == "gpu" and build.builds_here(FUSED_KERNEL)
            and torch.cuda.get_device_capability() == (9, 0))


def fusion_contenders(pid: int, model: torch.nn.Module, x: Tensor, *, tf32: bool, compiled, kernels: dict
                      ) -> dict[str, tuple[Callable[[], Tensor], Callable[[], Tensor]]]:
    """{name: (the contender, what it is checked against)} for one problem at one tier: eager, torch.compile
    (`compiled`, the model compiled), unfused (workbook::linear, then the tail op), fused (the whole-model op),
    for 75 the atomic fold, and the fused kernel's GEMM alone (rung 10's `linear` at the strict tier, rung 9's
    `gemm` at the TF32 tier: its epilogue a plain store), checked against eager's GEMM. `kernels`: the loaded
    modules by name (fused_gemm_groupnorm, gemm_09_wgmma_tf32)."""
    from utils import ops

    linear, rest = linear_and_rest(pid, model)
    w, lb = linear.weight, linear.bias
    tail, whole = getattr(ops, FUSION_OPS[pid][0]), ops.WHOLE_MODELS[FUSION_OPS[pid][1]]
    eager = lambda: model(x)  # noqa: E731
    out = {"eager": (eager, eager), COMPILE: (lambda: compiled(x), eager),
           UNFUSED: (lambda: tail(ops.linear(x, w, lb), *rest), eager), FUSED: (lambda: whole(x, w, lb, *rest), eager)}
    if pid == 75:
        out[ATOMIC] = (lambda: kernels[FUSED_KERNEL].linear_group_norm_min_bias_atomic(x, w, lb, *rest, None, False)[0],
                       eager)
    if tf32:
        out[GEMM_ALONE] = (lambda: kernels["gemm_09_wgmma_tf32"].gemm(x, w), lambda: F.linear(x, w))
    else:
        out[GEMM_ALONE] = (lambda: ops.linear(x, w, lb), lambda: F.linear(x, w, lb))
    return out


def measure_fusion(reps: int = 50, *, pids=PIDS, scale: str = "full", device: str = "cuda", seed: int = 0,
                   progress: bool = True, compiler=None) -> list[dict]:
    """Section 6's GPU run (an sm_90 GPU): for each problem, at both tiers (TF32 off, then on), every contender of
    fusion_contenders checked against eager at that tier's tolerance (utils.check.TIERS; a miss raises, nothing
    wrong is timed), then all timed in turn (bench.compare with interleave, utils.bench.time_interleaved: CUDA
    events, a clean L2, medians, rep by rep after a warm-up) in two rounds, the second in the reverse order, each
    contender keeping its better round: in the study before this run (experiments/fused_models/README.md) a
    contender timed later in a sequence came out a few percent slower, as large as the differences measured
    here. The model is the reference with its GroupNorm γ, β and biases randomised as the harness does. Entries
    of kind "whole_model_fusion": compare() rows with "problem", "tier", "max_abs_vs_eager", "median_ms_by_round",
    "shape" [M, C, K]. (scale, device and compiler are there for the tests, which run it on the CPU.)"""
    from utils import bench, chapter, check, precision

    compiler = compiler or torch.compile  # default mode
    chapter.quiet_inductor()
    kernels = build.load_kernels([FUSED_KERNEL, "gemm_09_wgmma_tf32", "gemm_10_3xtf32", "groupnorm",
                                  "min_bias_broadcast"])
    sync = torch.cuda.synchronize if device != "cpu" else (lambda: None)
    rows = []
    for pid in pids:
        p = get_problem(pid)
        model = p.make_model(scale, seed=seed)
        check._randomise(model, seed)  # γ = 1 and β = 0 would hide an ignored affine parameter
        model = model.to(device).eval()
        x = p.get_inputs(scale, generator=torch.Generator().manual_seed(seed + 1))[0].to(device)
        d = p.dims(scale)
        if not kernels[FUSED_KERNEL].fusable(x, linear_and_rest(pid, model)[0].weight, d.groups):
            raise RuntimeError(f"problem {pid}: the fused kernel does not take these inputs here; "
                               "its op would run the unfused path and the comparison would be void")
        for tier in TIERS:
            tol = check.TIERS[tier]
            torch._dynamo.reset()  # each tier compiles afresh, under its own fp32 setting
            with precision.tf32(tier == "tf32"), torch.no_grad():
                contenders = fusion_contenders(pid, model, x, tf32=tier == "tf32", compiled=compiler(model),
                                               kernels=kernels)
                diffs = {}
                for name, (fn, reference) in contenders.items():  # the first call of torch.compile compiles
                    out, want = fn(), reference()
                    sync()
                    diffs[name] = (out - want).abs().max().item()
                    if out.shape != want.shape or not torch.allclose(out, want, atol=tol.atol, rtol=tol.rtol):
                        raise AssertionError(f"problem {pid}, {tier} tier: {name} differs from eager by "
                                             f"{diffs[name]:.2e} (atol = rtol = {tol.atol:g}); not timing it")
                    del out, want
                if progress:
                    print(f"problem {pid}, {tier} tier: all {len(contenders)} checked against eager", flush=True)
                # A contender timed late in a sequence runs on a GPU the earlier ones have heated: the second
                # round reverses the order, so that each contender is timed early once.
                rounds: dict[str, list[dict]] = {name: [] for name in contenders}
                for order in (list(contenders), list(contenders)[::-1]):
                    for r in bench.compare({n: contenders[n][0] for n in order}, baseline=None, reps=reps,
                                           progress=progress, interleave=True):
                        rounds[r["contender"]].append(r)
            for name, rs in rounds.items():
                best = min(rs, key=lambda r: r["median_ms"])
                rows.append(best | {"problem": pid, "tier": tier, "max_abs_vs_eager": diffs[name],
                                    "median_ms_by_round": [r["median_ms"] for r in rs],
                                    "shape": [d.batch, d.out_features, d.in_features]})
        del model, x
        if device != "cpu":
            torch.cuda.empty_cache()
    return rows


def _fusion_at(record: dict) -> dict:
    return {(e["problem"], e["tier"], e["contender"]): e for e in record["entries"]}


def _fusion_groups(record: dict) -> list[tuple[int, str]]:
    return list(dict.fromkeys((e["problem"], e["tier"]) for e in record["entries"]))


def _tier_name(tier: str) -> str:
    return "TF32" if tier == "tf32" else tier


def fusion_table(record: dict) -> str:
    """Markdown, from a "whole_model_fusion" record: per problem and tier, the median ms of torch.compile, the
    unfused path and the fused kernel, fused's speedup over each, and the fused kernel against its own GEMM
    alone (what the epilogue adds)."""
    at = _fusion_at(record)
    lines = ["| problem | tier | eager ms | torch.compile ms | unfused ms | fused ms | fused x torch.compile | "
             "fused x unfused | fused vs its GEMM alone (a plain store) |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for pid, tier in _fusion_groups(record):
        ms = {c: at[(pid, tier, c)]["median_ms"] for c in ("eager", COMPILE, UNFUSED, FUSED, GEMM_ALONE)
              if (pid, tier, c) in at}
        epi = f"{100 * (ms[FUSED] / ms[GEMM_ALONE] - 1):+.1f}%" if GEMM_ALONE in ms else "–"
        lines.append(f"| {pid} | {_tier_name(tier)} | {ms['eager']:.3f} | {ms[COMPILE]:.3f} | {ms[UNFUSED]:.3f} | "
                     f"{ms[FUSED]:.3f} | **{ms[COMPILE] / ms[FUSED]:.2f}x** | **{ms[UNFUSED] / ms[FUSED]:.2f}x** | {epi} |")
    return "\n".join(lines)


def fusion_findings(record: dict) -> str:
    """Computed bullets on a "whole_model_fusion" record: per tier, fused against unfused at its best and worst
    and whether the two overlap within the run's spread (p20-p80); 75's two folds of the row minimum."""
    at = _fusion_at(record)
    lines = []
    for tier in TIERS:
        pids = [pid for pid, t in _fusion_groups(record) if t == tier]
        if not pids:
            continue
        ratio = {pid: at[(pid, tier, UNFUSED)]["median_ms"] / at[(pid, tier, FUSED)]["median_ms"] for pid in pids}
        overlap = [pid for pid in pids if at[(pid, tier, FUSED)]["p20_ms"] <= at[(pid, tier, UNFUSED)]["p80_ms"]
                   and at[(pid, tier, UNFUSED)]["p20_ms"] <= at[(pid, tier, FUSED)]["p80_ms"]]
        best, worst = max(ratio, key=ratio.get), min(ratio, key=ratio.get)
        lines.append(f"- {_tier_name(tier)} tier: fused against unfused from **{ratio[worst]:.2f}x** (problem {worst}) "
                     f"to **{ratio[best]:.2f}x** (problem {best}); "
                     + (f"the two overlap within the run's p20-p80 spread for problem(s) {', '.join(map(str, overlap))}."
                        if overlap else "no problem's two timings overlap within the run's p20-p80 spread."))
        if (75, tier, ATOMIC) in at:
            part, atom = at[(75, tier, FUSED)]["median_ms"], at[(75, tier, ATOMIC)]["median_ms"]
            lines.append(f"- Problem 75, {_tier_name(tier)} tier: partials and a second kernel {part:.3f} ms, the atomic "
                         f"fold {atom:.3f} ms: the {'partials are' if part <= atom else 'atomic fold is'} faster by "
                         f"{100 * abs(atom - part) / max(part, atom):.1f}%.")
    return "\n".join(lines)


def fusion_figure(record: dict, save=None) -> Figure:
    """Grouped bars from a "whole_model_fusion" record: the fused kernel's speedup over the unfused path and over
    torch.compile, per problem, one panel per tier; a line at 1x."""
    at = _fusion_at(record)
    groups = _fusion_groups(record)
    with matplotlib.rc_context(plots.STYLE):
        fig = Figure(figsize=(11.0, 4.2))
        tiers = [t for t in TIERS if any(g[1] == t for g in groups)]
        for i, tier in enumerate(tiers):
            ax = fig.add_subplot(1, len(tiers), i + 1)
            pids = [pid for pid, t in groups if t == tier]
            for j, (over, colour) in enumerate(((UNFUSED, plots.CYCLE[1]), (COMPILE, plots.COLOURS["torch.compile"]))):
                ys = [at[(pid, tier, over)]["median_ms"] / at[(pid, tier, FUSED)]["median_ms"] for pid in pids]
                bars = ax.bar([k - 0.2 + 0.4 * j for k in range(len(pids))], ys, 0.4, color=colour, edgecolor="white",
                              label=f"fused over {over}" + (" (workbook::linear, then the tail op)"
                                                            if over == UNFUSED else " (default mode)"))
                ax.bar_label(bars, fmt="%.2fx", fontsize=7, padding=2)
            ax.axhline(1.0, color=plots.REFERENCE, lw=1, ls="--")
            ax.set_xticks(range(len(pids)), [f"problem {pid}" for pid in pids])
            ax.set_ylabel("the fused kernel's speedup (x)")
            ax.set_title(f"{_tier_name(tier)} tier", fontsize=10)
            ax.set_ylim(0, 1.5 * max(max(b.get_height() for b in c) for c in ax.containers))  # room for the legend
            if i == 0:
                ax.legend(loc="upper left", fontsize=8)
        fig.suptitle(f"The whole model in the GEMM's epilogue: fused over unfused and over torch.compile\n"
                     f"{plots.provenance(record)}")
    return plots.finish(fig, save)


_NUM = r"(\d+(?:\.\d+)?)"


def fusion_predictions(text: str | None = None) -> dict[str, dict]:
    """The numbers fused_gemm_groupnorm.cu's PREDICTION names, per tier ("strict", then "tf32" after the words
    "TF32 tier"): {"epilogue": (lo, hi) % the fused kernel adds to its GEMM, or None, "saving": {problem: (lo, hi)
    % it saves against the unfused path}} ("~10%" gives (10, 10); "within +-5%" gives (-5, 5)). Read from the
    header, so the comparison is computed, never typed."""
    text = " ".join((text if text is not None else header_section(FUSED_KERNEL, "PREDICTION") or "").split())
    strict, _, tf32 = text.partition("TF32 tier")
    out = {}
    for tier, part in (("strict", strict), ("tf32", tf32)):
        epilogue = re.search(rf"plus {_NUM}-{_NUM}%", part)
        saving: dict[int, tuple[float, float]] = {}
        for m in re.finditer(rf"(\d+(?:/\d+)*)(?: saves)? ~[\d.]+ ms of ~[\d.]+ \({_NUM}(?:-{_NUM})?%\)", part):
            for pid in m[1].split("/"):
                saving.setdefault(int(pid), (float(m[2]), float(m[3] or m[2])))
        for m in re.finditer(rf"at (\d+(?:/\d+)*) [^;]*?within \+-{_NUM}%", part):
            for pid in m[1].split("/"):
                saving.setdefault(int(pid), (-float(m[2]), float(m[2])))
        out[tier] = {"epilogue": (float(epilogue[1]), float(epilogue[2])) if epilogue else None, "saving": saving}
    return out


def _fusion_band(band) -> str:
    if band is None:
        return "–"
    lo, hi = band
    return f"±{hi:g}%" if lo == -hi else _band(band, "%")


def _versus(value: float, band) -> str:
    """The measured value against a predicted band: inside, above or below a range; off by how many points from
    a single value (a "~" figure has no range to be inside)."""
    if band is None:
        return "no prediction"
    lo, hi = band
    if lo == hi:
        return f"{value - lo:+.1f} points from it"
    return "inside" if lo <= value <= hi else ("above" if value > hi else "below")


def fusion_prediction_table(record: dict, text: str | None = None) -> str:
    """Markdown: per problem and tier, the header's predicted epilogue cost (fused against its GEMM alone) and
    saving (against the unfused path, % of the unfused time), each beside the record's measurement."""
    want, at = fusion_predictions(text), _fusion_at(record)
    lines = ["| problem | tier | predicted epilogue | measured | verdict | predicted saving | measured | verdict |",
             "|---|---|---:|---:|---|---:|---:|---|"]
    for pid, tier in _fusion_groups(record):
        fused, unfused = at[(pid, tier, FUSED)]["median_ms"], at[(pid, tier, UNFUSED)]["median_ms"]
        alone = at.get((pid, tier, GEMM_ALONE))
        epi = None if alone is None else 100 * (fused / alone["median_ms"] - 1)
        saving = 100 * (unfused - fused) / unfused
        e_band, s_band = want[tier]["epilogue"], want[tier]["saving"].get(pid)
        lines.append(f"| {pid} | {_tier_name(tier)} | {_fusion_band(e_band)} | {'–' if epi is None else f'{epi:+.1f}%'} | "
                     f"{'–' if epi is None else _versus(epi, e_band)} | {_fusion_band(s_band)} | {saving:+.1f}% | "
                     f"{_versus(saving, s_band)} |")
    return "\n".join(lines)


def render_fusion(record: dict) -> str:
    """The README's rendering of a "whole_model_fusion" record: the table and its computed findings."""
    return fusion_table(record) + "\n\n" + fusion_findings(record)
