"""The tensor-core chapters' figures: TF32's bits, the 3xTF32 split's products, the accumulation's error against K,
mma.sync's fragments (notebook 08), the wgmma pipeline (notebook 09) and the rungs' timing against their
predictions, from a record (both, each with its own rungs).
"""
from __future__ import annotations

import matplotlib
import torch
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, Rectangle

from utils import plots
from utils.chapters.tensor_cores import term_sizes
from utils.report.tensor_cores import PATHS, SGEMM, TF32_CUBLAS, predicted
from utils.tf32 import bits, to_tf32

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


def timing_figure(record: dict, save=None, title: str = "The tensor-core rungs against cuBLAS, one run") -> Figure:
    """TFLOP/s of every timed contender, one panel per shape, on a log axis; the predicted ranges of the
    rungs (their % of cuBLAS TF32, turned into TFLOP/s with this run's cuBLAS TF32) as brackets. A chapter
    shows its own rungs: tensor_cores.timed_view cuts the record to them."""
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
                band = predicted(e["contender"], shape)[0]
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
        fig.suptitle(f"{title}\n{plots.provenance(record)}")
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
