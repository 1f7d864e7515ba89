"""The helpers of the tensor-core chapters (notebooks 08 and 09): TF32's rounding and the 3xTF32 split as tables
and verdicts (the emulation itself is utils/tf32.py), the four models' accuracy with the GEMM swapped for a
variant, the tensor core's accumulation modelled, the rungs quoted from their headers, the one GPU measurement
both chapters read (recorded by notebook 08 as kind "tensor_cores"), each chapter's share of it and the
predictions it missed, and notebook 08's exercise checkers. Their figures are tensor_core_figures.py's, notebook
09's own helpers hopper_gemm.py's and epilogue_fusion.py's, and the record's tables utils/report/tensor_cores.py's.
Tested in tests/test_tensor_core_chapter.py.

    rows = accuracy([94], cpu_variants(), scale="small", seeds=5, device="cpu")
    entries = measure(reps=30)                       # on an H100: the rungs and the accuracy, in one run

Numbers come from what these functions compute or from a record; nothing here holds a measured number.
"""
from __future__ import annotations

import math
import re
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from utils import bench, build, check, env, ladder, precision
from utils.chapters.gemm_ladder import quote
from utils.report.tensor_cores import outside  # noqa: F401 (the chapters and tests call it tcc.outside)
from utils.problems import get_problem
from utils.report.tensor_cores import (FUSED_KERNEL, PATHS, RUNG10, RUNGS, SGEMM, SHAPES, TF32_CUBLAS, accuracy_rows,
                                       predicted, promote_label)
from utils.show import KernelText, source_path
from utils.tf32 import (PRODUCTS, bits, fadd_dot, normalise_products, split_gemm64, split_tf32, tensor_core_dot,
                        tensor_core_step, to_tf32)

PROMOTE_KS = (0, 256, 1024, 4096)  # rung 10's promotion intervals the run builds and measures (0: never promote)
SWEEP_MN = (1024, 2048)  # the error-against-K sweep: M, N
SWEEP_KS = (256, 512, 1024, 2048, 4096, 8192, 16384)
PIDS = (94, 75, 37, 62)
SEEDS = 5
ATOL = RTOL = 1e-4  # the strict tier (utils.check.TIERS["strict"])
MARGIN = 0.5  # exercise 2: a worst excess of at most 0.5 leaves the tier a 2x margin
# Each chapter's share of the timed paths (utils/report/tensor_cores.py's PATHS): notebook 08 the mma.sync
# ones (rung 8, rung 10's mma.sync kernel), notebook 09 the wgmma ones (rung 9, rung 10's other kernels).
MMA_SYNC_PATHS = tuple(name for name, (rung, export) in PATHS.items() if rung == RUNGS[0] or export == "gemm_mma_sync")
WGMMA_PATHS = tuple(name for name in PATHS if name not in MMA_SYNC_PATHS)
WGMMA_RUNGS = RUNGS[1:]  # what notebook 09 builds: rungs 9 and 10 (rung 8 is mma.sync only)
PROMOTE_LABELS = tuple(promote_label(k) for k in PROMOTE_KS)  # rung 10's promotion builds, as the timing names them


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


def _sample_operands(w_is_tf32: bool, seed: int = 0) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(64, 1024, generator=g)
    w = (torch.rand(96, 1024, generator=g) * 2 - 1) / 32
    return x, (to_tf32(w) if w_is_tf32 else w)


def _normwise_error(out: Tensor, exact: Tensor) -> float:
    return ((out.double() - exact).abs().max() / exact.abs().max()).item()


FLOAT32_ROUNDING_LOG2 = -24  # float32's unit roundoff, 2^-24: a product below it changes nothing float32 keeps


def product_sizes(w_is_tf32: bool = True) -> dict[str, float | None]:
    """Exercise 1's numbers: for the K = 1024 sample like the problems' (x in [0, 1), w in ±1/32, rounded to TF32
    when w_is_tf32), the largest |product| / |x·w| over all (x, w) pairs of the sample, each of the four split
    products, as a power of 2; None where the product is exactly zero everywhere."""
    x, w = _sample_operands(w_is_tf32)
    (xb, xs), (wb, ws) = split_tf32(x.flatten()), split_tf32(w.flatten()[: x.numel()])
    exact = x.flatten()[: wb.numel()].double() * w.flatten()[: wb.numel()].double()
    parts = {"xb": xb.double(), "xs": xs.double(), "wb": wb.double(), "ws": ws.double()}
    sizes = {}
    for name in PRODUCTS:
        a, b = name.split("·")
        term = parts[a] * parts[b]
        rel = (term.abs() / exact.abs().clamp_min(1e-300)).max().item()
        sizes[name] = None if term.abs().max().item() == 0 else math.log2(rel)
    return sizes


def products_verdict(keep, sizes=None, *, w_is_tf32: bool = True) -> str:
    """Exercise 1: which split products x @ w.T needs when w is already TF32, with the reader's reasons: `sizes`
    gives each of the four products' largest size relative to x·w as a power of 2 (None: exactly zero). Each
    size is judged against product_sizes (within a factor 2, or exactly zero); KEEP must then follow from the
    sizes (a product above float32's rounding, 2^-24, stays; a smaller or zero one goes); and the products kept
    are checked in float64 emulation (split_gemm64) against float32's own GEMM. The messages name which of the
    reader's claims fails, never how many products to keep nor which way a size is off."""
    chosen = normalise_products(keep or ())
    if not chosen:
        return f"Not yet: KEEP must name some of the four products {', '.join(PRODUCTS)}."
    claimed = {normalise_products([k]).pop(): v for k, v in (sizes or {}).items() if normalise_products([k])}
    missing = [p for p in PRODUCTS if p not in claimed or not (claimed[p] is None or isinstance(claimed[p], (int, float)))]
    if missing:
        return (f"Not yet: SIZES gives each product its largest size against x·w as a power of 2 (None for exactly "
                f"zero); missing or not a number: {', '.join(missing)}.")
    measured = product_sizes(w_is_tf32)
    wrong = [p for p in PRODUCTS if (claimed[p] is None) != (measured[p] is None)
             or (claimed[p] is not None and abs(claimed[p] - measured[p]) > 1)]
    if wrong:
        return (f"Not yet: your size of {', '.join(wrong)} is not what the split gives on this sample (more than a "
                "factor 2 away, or zero where it is not, or not zero where it is). Work it out from how big and small "
                "are made, or compute it with split_tf32.")
    follows = {p for p in PRODUCTS if claimed[p] is not None and claimed[p] > FLOAT32_ROUNDING_LOG2}
    if chosen != follows:
        return ("Not yet: your sizes are right, but KEEP does not follow from them: a product larger than float32's "
                "rounding (2^-24 of x·w) changes what float32 would compute and must stay; a smaller or zero one adds "
                "only tensor-core work.")
    x, w = _sample_operands(w_is_tf32)
    exact = x.double() @ w.double().T
    fp32 = _normwise_error(x @ w.T, exact)
    mine = _normwise_error(split_gemm64(x, w, chosen), exact)
    weight = "w already TF32 (ws = 0)" if w_is_tf32 else "w as it is"
    what = f"{', '.join(sorted(chosen))}, {weight}: error {mine:.1e} of max |x·w|, float32's own {fp32:.1e}"
    if mine > 2 * fp32:  # the sizes' rule and the GEMM disagree: say so rather than pass
        return f"Not yet: {what}: the products kept are not as accurate as float32 at this sample."
    return f"PASS: {what}; each product left out is zero or below float32's rounding, by your sizes and the sample's."


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
    rows = accuracy_rows(rows_or_record, source)
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


def adder_example() -> str:
    """The smallest case of what the modeled adder loses: four products of 0.75 float32 ulps each, added to
    1.0 by FADD (each sum rounded to nearest) and by the model (aligned to 1.0, cut toward zero)."""
    ulp = 2.0 ** -23
    p = np.full((1, 4), 0.75 * ulp)
    exact = 1.0 + 4 * 0.75 * ulp
    fadd = np.ones(1, dtype=np.float32)
    for j in range(4):
        fadd = (fadd + p[:, j]).astype(np.float32)
    model = tensor_core_step(np.ones(1), p, 24)
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


def default_promote_k() -> int:
    """Rung 10's default promotion interval (GEMM10_PROMOTE_K's default), read from the wgmma header."""
    match = re.search(r"constexpr int PROMOTE_K = (\d+);", (build.KERNELS_DIR / "common" / "gemm_wgmma.cuh").read_text())
    if match is None:
        raise ValueError("kernels/common/gemm_wgmma.cuh has no `constexpr int PROMOTE_K = <n>;`")
    return int(match.group(1))


def promotion_verdict(my_k, my_excess, record: dict | None) -> str:
    """Exercise 2: the largest promotion interval (0, never, being the largest) at which all four models keep a
    2x margin in the strict tier (worst excess over the seeds <= MARGIN), among those the record measured, with
    its reason: my_excess gives the worst excess over the four models, read from the record, at my_k and at
    every larger interval measured ({interval: excess}, within 10%). Not yet until both hold; the messages never
    say which way to move."""
    rows = [] if record is None else [e for e in record["entries"]
                                      if e.get("section") == "accuracy" and e.get("source") == "rung 10"]
    measured = sorted({r["promote_k"] for r in rows} or set(PROMOTE_KS), key=lambda k: k or 10 ** 9)
    if my_k not in measured:
        return f"Not yet: set MY_PROMOTE_K to one of the intervals {measured} (0 = never promote)."
    if record is None:
        return ("Your answer is in, but there is no recorded run to check it against: on a GPU, "
                "`python -m utils.run --notebooks 08` records one.")
    worst = {k: max(r["excess"] for r in rows if r["promote_k"] == k) for k in measured}
    order = lambda k: k or 10 ** 9  # noqa: E731
    asked = [k for k in measured if order(k) >= order(my_k)]
    mine = my_excess if isinstance(my_excess, dict) else {}
    unread = [k for k in asked if not isinstance(mine.get(k), (int, float))
              or abs(mine[k] - worst[k]) > 0.1 * worst[k]]
    if unread:
        return (f"Not yet: MY_EXCESS gives, for your interval and each larger one measured ({asked}), the worst "
                f"excess of the four models as section 4's table has it; missing, or not the record's, at {unread}.")
    keeping = [k for k in measured if worst[k] <= MARGIN]
    if not keeping:
        return f"No interval measured keeps a 2x margin (worst excess {worst}); this exercise has no answer on this record."
    best = max(keeping, key=order)
    if my_k == best:
        return (f"PASS: promoting every {'never' if best == 0 else best} keeps the worst excess at {worst[best]:.2f} "
                f"(a {1 / max(worst[best], 1e-9):.1f}x margin), and by your numbers no larger interval measured does.")
    return ("Not yet: your numbers are the record's, but your interval is not what they imply: the largest interval "
            f"whose worst excess is at most {MARGIN}, a 2x margin inside the tier.")


def paths_label() -> str | None:
    """The first words of the paragraph of rung 10's header that lists its kernel paths ("Two kernels do
    this", "Three kernels do this", ...): the count changes as paths come and go. None if there is none."""
    match = re.search(r"^// ((?:\w+ )?kernels do this)", build.kernel_source(RUNG10), re.MULTILINE | re.IGNORECASE)
    return None if match is None else match.group(1)


def quote_paths() -> None:
    """Show that paragraph (paths_label) as gemm_ladder.quote does, or say that there is none."""

    label = paths_label()
    if label is None:
        print(f"(no paragraph naming rung 10's kernels in kernels/{RUNG10}.cu's header: see the file)")
    else:
        quote(RUNG10, label)


def show_excerpt(name: str, first: str, last: str, *, after: str | None = None):
    """Display the lines of a kernel file (or a "common/....cuh" header) from the first line containing
    `first` (the first after the line containing `after`, when given) to the next line containing `last`,
    under a line naming the file and line range: an excerpt of the source as it is compiled, never a pasted
    copy. Returns the text, or None (with a line saying so) when the markers are no longer in the file."""
    from IPython.display import Code, Markdown, display

    path = source_path(name)
    lines = path.read_text().splitlines()
    begin = 0 if after is None else next((i for i, line in enumerate(lines) if after in line), len(lines))
    start = next((i for i in range(begin, len(lines)) if first in lines[i]), None)
    end = None if start is None else next((i for i in range(start, len(lines)) if last in lines[i]), None)
    if end is None:
        print(f"(the excerpt from {first!r} to {last!r} is no longer in {build.display_path(path)}: see the file)")
        return None
    text = KernelText("\n".join(lines[start:end + 1]))  # a str that IPython does not print a second time
    text.path, text.first_line, text.last_line = path, start + 1, end + 1
    display(Markdown(f"`{build.display_path(path)}`, lines {start + 1}-{end + 1}"))
    display(Code(str(text), language="cuda"))
    return text


# --------------------------------------------------------------------------- one chapter's share of the run

def timed_view(record: dict, contenders) -> dict:
    """The record with its timing entries cut to `contenders` and the two cuBLAS yardsticks: what one chapter's
    table and plot show of the one run both chapters read. The other sections are left as they are."""
    keep = {SGEMM, TF32_CUBLAS, *contenders}
    return {**record, "entries": [e for e in record["entries"] if e.get("section") != "timing" or e["contender"] in keep]}


def missed(record: dict, contenders) -> str:
    """Markdown bullets, computed from the record and the headers: every prediction of `contenders` (timed
    paths) that the measurement fell outside of, predicted against measured, at each shape."""
    lines = []
    timed = [e for e in record["entries"] if e.get("section") == "timing" and e["contender"] in contenders]
    for e in sorted(timed, key=lambda e: list(contenders).index(e["contender"])):  # path by path
        pct, x = predicted(e["contender"], e["shape"])
        for band, value, unit in ((pct, e["pct_of_cublas_tf32"], "% of cuBLAS TF32"), (x, e["x_cublas_sgemm"], "x cuBLAS SGEMM")):
            if where := outside(value, band):
                said = f"~{band[0]:g}" if band[0] == band[1] else f"{band[0]:g}-{band[1]:g}"
                lines.append(f"- `{e['contender']}` at {' x '.join(map(str, e['shape']))}: predicted {said}{unit}, "
                             f"measured **{value:.3g}{unit}**, {where} the prediction.")
    return "\n".join(lines) or "- Every prediction of these paths held."


def verified(record: dict, contender: str) -> str:
    """Markdown bullets: what the run's check against float64 found for `contender` at each shape, before timing."""
    return "\n".join(f"- at {' x '.join(map(str, e['shape']))}: {e['verified']} ({e['tier']} tier)" for e in record["entries"]
                     if e.get("section") == "timing" and e["contender"] == contender)


def time_ratios(record: dict, slower: str, faster: str) -> str:
    """Markdown bullets: at each timed shape, how many times `faster`'s time `slower` took, from the record."""
    timed = {(e["contender"], tuple(e["shape"])): e["median_ms"] for e in record["entries"] if e.get("section") == "timing"}
    return "\n".join(f"- at {' x '.join(map(str, shape))}: `{slower}` {timed[(slower, shape)]:.3f} ms, `{faster}` "
                     f"{timed[(faster, shape)]:.3f} ms: **{timed[(slower, shape)] / timed[(faster, shape)]:.2f}x** its time"
                     for shape in map(tuple, SHAPES) if (slower, shape) in timed and (faster, shape) in timed)


# --------------------------------------------------------------------------- the GPU run

def build_jobs(variants: bool = True, rungs=RUNGS, fused: bool = True) -> dict[str, str | build.Variant]:
    """What a chapter compiles, for build.load_kernels: {label: kernel}, the `rungs` (notebook 08: all three, which
    its run times; notebook 09: the wgmma ones), with `fused` the whole-model kernel (notebook 09) and, with
    variants, rung 10 at each promotion interval of PROMOTE_KS other than its default. Only what this machine
    can build (build.builds_here: rungs 9 and 10 and the whole-model kernel are sm_90a)."""
    jobs = {name: name for name in (*rungs, *([FUSED_KERNEL] if fused else [])) if build.builds_here(name)}
    if variants and RUNG10 in jobs:
        jobs |= {promote_label(k): _promote_variant(k) for k in PROMOTE_KS if k != default_promote_k()}
    return jobs


def runs_here() -> bool:
    """Whether this machine can run the chapter's measurement: a GPU that builds every rung (sm_90)."""

    return env.mode() == "gpu" and all(build.builds_here(n) for n in RUNGS)


def _promote_variant(k: int) -> str | build.Variant:
    """Rung 10 promoting every k (its plain build at its default interval)."""
    return RUNG10 if k == default_promote_k() else build.Variant(RUNG10, [f"-DGEMM10_PROMOTE_K={k}"])


def _modules() -> tuple[dict, dict]:
    """The rungs' modules by name, and rung 10's by promotion interval: every build of build_jobs(fused=False),
    the cold ones side by side (all warm when notebook 08's build cell ran first)."""
    built = build.load_kernels(build_jobs(fused=False))
    promoted = {k: built[RUNG10 if k == default_promote_k() else promote_label(k)] for k in PROMOTE_KS}
    return {name: built[name] for name in RUNGS}, promoted


def _k_sweep(promoted: dict, progress: bool, device: str = "cuda") -> list[dict]:
    M, N = SWEEP_MN
    fns = {promote_label(k): promoted[k].gemm for k in PROMOTE_KS} | {SGEMM: F.linear}
    rows = []
    for K in SWEEP_KS:
        x, w = ladder.operands(M, N, K, seed=K, device=device)
        ref = F.linear(x.double(), w.double())
        with precision.ieee_fp32():
            for name, fn in fns.items():
                out = fn(x, w)
                e, err = excess(out, ref)
                rows.append({"section": "promotion_k", "contender": name, "M": M, "N": N, "K": K,
                             "promote_k": next((k for k in PROMOTE_KS if promote_label(k) == name), None),
                             "max_abs_err": err, "strict_ratio": e})
        if progress:
            print(f"  error against K: K = {K} done", flush=True)
    return rows


def timed_paths(mods: dict, promoted: dict, w: torch.Tensor) -> dict:
    """{label: (fn(x, w), tier)} for the weight `w`: every path of PATHS the builds export, and the promotion
    variants. `linear` runs with a zero bias and w's small parts kept (made once here, as a frozen drop-in
    keeps them: the path's label). A pybind launcher takes every argument of its prototype, the optional
    w_residual included."""
    paths = {}
    for label, (rung, export) in PATHS.items():
        if export == "linear" and hasattr(mods[rung], "linear"):
            bias, kept = torch.zeros(w.shape[0], device=w.device), mods[rung].tf32_residual(w)
            paths[label] = (lambda a, b, f=mods[rung].linear, z=bias, r=kept: f(a, b, z, r), "strict")
        elif hasattr(mods[rung], export) and export != "linear":
            paths[label] = (getattr(mods[rung], export), ladder.tier_of(rung))
    # the promotion variants are timed for their cost; their accuracy is the models' table
    return paths | {promote_label(k): (promoted[k].gemm, "tf32") for k in PROMOTE_KS if k != default_promote_k()}


def _timing(mods: dict, promoted: dict, reps: int, progress: bool, device: str = "cuda") -> list[dict]:
    rows = []
    for M, N, K in SHAPES:
        x, w = ladder.operands(M, N, K, device=device)
        paths = timed_paths(mods, promoted, w)
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
    """Notebook 08's one GPU run, which notebook 09 reads too (an sm_90 GPU; its builds, build_jobs(fused=False), are
    loaded first, the cold ones side by side):
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
        variants[promote_label(k)] = promoted[k].gemm
        extras[promote_label(k)] = {"source": "rung 10", "promote_k": k, "default_promote_k": default}
    if progress:
        print(f"1/3 the four models' accuracy: cuBLAS on pre-split operands, and rung 10 promoting every "
              f"{PROMOTE_KS} k (0: never)", flush=True)
    entries = accuracy(PIDS, variants, scale=scale, seeds=seeds, device=device, extras=extras, progress=progress)
    if progress:
        print("2/3 error against K", flush=True)
    entries += _k_sweep(promoted, progress, device)
    if progress:
        print("3/3 timing, one run per shape", flush=True)
    entries += _timing(mods, promoted, reps, progress, device)
    return entries
