"""Notebook 04's diagram of where a bias goes: the tile of rung 7 with the bias in its epilogue, against the
separate passes over memory that an unfused bias costs. A drawing, not a measurement.
"""
from __future__ import annotations

import matplotlib
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle

from utils import plots

# --------------------------------------------------------------------------- the diagram

def epilogue_diagram() -> Figure:
    """Two panels. Left: rung 7's block tile, the K loop streaming x and w through shared memory
    into registers, and the epilogue adding both biases of problem 94 on the way to the one store.
    Right: the passes over the (M, N) output that each way of adding problem 94's two biases makes."""
    with matplotlib.rc_context(plots.STYLE):
        fig = Figure(figsize=(11.0, 4.2))
        left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.0, 1.25]})
    for ax in (left, right):
        ax.set_axis_off()
    _tile_panel(left)
    _passes_panel(right)
    fig.suptitle("Where the bias goes: in the epilogue, after the K loop, before the one store")
    with matplotlib.rc_context(plots.STYLE):
        fig.tight_layout()
    return fig


def _box(ax, x, y, w, h, text, colour, fontsize=8, **kw):
    ax.add_patch(Rectangle((x, y), w, h, facecolor=colour, edgecolor="#333333", lw=0.8, **kw))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, start, end, text="", colour="#333333"):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, color=colour, lw=1))
    if text:
        ax.text((start[0] + end[0]) / 2 + 0.1, (start[1] + end[1]) / 2, text, fontsize=7, va="center")


def _tile_panel(ax):
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10)
    ax.set_title("one block of rung 7: a 128 x 128 tile of out", fontsize=9)
    _box(ax, 3.2, 7.6, 4.0, 1.4, "w: 128 rows n0..n0+127\n(all K, one BK slice at a time)", "#deebf7")
    _box(ax, 0.2, 3.2, 2.6, 4.0, "x: 128 rows\nm0..m0+127\n(all K, one\nBK slice\nat a time)", "#deebf7")
    _box(ax, 3.2, 3.2, 4.0, 4.0, "the K loop:\nacc += x[m][k] · w[n][k]\n\n64 accumulators per thread,\nin registers", "#fdd0a2")
    _arrow(ax, (5.2, 3.2), (5.2, 1.85), "after the K loop")
    _box(ax, 0.6, 0.2, 6.8, 1.6, "epilogue, once per output, in registers:\nout[m][n] = (acc + gemm.bias[n]) + bias[n]\n"
         "then one store to DRAM", "#a1d99b")
    for y, name in ((1.15, "gemm.bias[n]"), (0.3, "bias[n]")):
        _box(ax, 8.0, y, 1.9, 0.55, name, "#c7e9c0")
        _arrow(ax, (8.0, y + 0.27), (7.45, y + 0.27))


def _passes_panel(ax):
    ax.set_xlim(0, 12)
    ax.set_ylim(0, 10)
    ax.set_title("passes over the (M, N) output in DRAM", fontsize=9)
    lanes = [
        ("eager 94 (seed 001's final code)", [("addmm:\nx @ W.T + gemm.bias", "w"), ("+ bias:\nread, add, write", "rw")]),
        ("seed 001's dropped variant", [("(N,) add:\ngemm.bias + bias", "n"), ("addmm with\nthe summed bias", "w")]),
        ("our epilogue (linear_two_biases)", [("rung 7 + epilogue:\nboth biases in registers", "w")]),
    ]
    traffic = {"w": "writes it once", "rw": "reads it, writes it", "n": "touches N floats only"}
    colour = {"w": "#fdd0a2", "rw": "#fc9272", "n": "#c7e9c0"}
    for i, (name, steps) in enumerate(lanes):
        y = 7.4 - 3.0 * i
        ax.text(0.0, y + 1.55, name, fontsize=8.5, weight="bold")
        x = 0.0
        for text, kind in steps:
            _box(ax, x, y, 3.6, 1.2, text, colour[kind], fontsize=7.5)
            ax.text(x + 1.8, y - 0.3, traffic[kind], ha="center", fontsize=7, color="#555555")
            if x > 0:
                _arrow(ax, (x - 0.55, y + 0.6), (x - 0.05, y + 0.6))
            x += 4.2
        passes = sum({"w": 1, "rw": 2, "n": 0}[k] for _, k in steps)
        ax.text(11.9, y + 0.6, f"{passes} x M·N\nfloats moved", ha="right", va="center", fontsize=8)
