"""The memory-bound chapters' diagrams (notebooks 05, 06 and 07): the passes over memory of each chain, a
GroupNorm's groups, and the broadcast of 75's row minimum and bias. Drawings, not measurements.
"""
from __future__ import annotations

import matplotlib
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle

from utils import plots

# --------------------------------------------------------------------------- diagrams

_READ, _WRITE, _GRID = "#3182bd", "#e6550d", "#bbbbbb"


def _diagram(figsize) -> Figure:
    with matplotlib.rc_context(plots.STYLE):
        return Figure(figsize=figsize)


def _blank(ax, xlim, ylim, title):
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title, fontsize=9)


def passes_figure(chains: dict[int, tuple[str, list[int]]]) -> Figure:
    """Notebook 05: what crosses DRAM for each problem, eager against fused, one bar segment per tensor pass.
    chains: {problem: (the eager chain in words, tensors each eager kernel reads)}; every kernel writes one."""
    fig = _diagram((9.0, 0.5 + 0.9 * len(chains)))
    ax = fig.add_subplot()
    y, labels = 0, []
    for p, (chain, reads) in chains.items():
        for label, kernels in ((f"{p} eager: {chain}", reads), (f"{p} fused: one kernel", [1])):
            x = 0
            for k, r in enumerate(kernels):
                for _ in range(r):
                    ax.add_patch(Rectangle((x, y - 0.35), 1, 0.7, facecolor=_READ, edgecolor="white"))
                    x += 1
                ax.add_patch(Rectangle((x, y - 0.35), 1, 0.7, facecolor=_WRITE, edgecolor="white"))
                x += 1
                if k < len(kernels) - 1:
                    ax.plot([x, x], [y - 0.45, y + 0.45], color="black", lw=1.5)  # a kernel boundary
            ax.text(x + 0.2, y, f"{x} passes", va="center", fontsize=8)
            labels.append(label)
            y += 1
        y += 0.4
    ax.set_yticks([i + 0.4 * (i // 2) for i in range(len(labels))], labels, fontsize=8)
    ax.set_xlim(0, 10)
    ax.set_ylim(y - 0.5, -0.6)
    ax.set_xlabel("passes over the tensor through DRAM (one pass = the whole tensor read or written once)")
    ax.grid(False)
    ax.legend(handles=[Patch(color=_READ, label="a tensor read"), Patch(color=_WRITE, label="a tensor written"),
                       Line2D([], [], color="black", lw=1.5, label="the next kernel starts")],
              loc="lower right", fontsize=8)
    fig.suptitle("Eager runs one kernel per operator, each a round trip to DRAM; fused, the chain is one")
    fig.tight_layout()
    return fig


def groupnorm_figure(N=4, G=3, D=4) -> Figure:
    """Notebook 06: what GroupNorm reduces over on (N, C = G * D), against the seeds' whole-batch groups, and how a
    team of two lanes holds one group of 16 floats (two float4s each) in the kernels' team path."""
    fig = _diagram((10.0, 6.4))
    grid = fig.add_gridspec(2, 2, height_ratios=[1, 1])
    colours = plots.CYCLE
    panels = ((fig.add_subplot(grid[0, 0]), True, "GroupNorm: statistics per (sample, group)"),
              (fig.add_subplot(grid[0, 1]), False, "Seeds 000, 003, 004: per group,\nover the whole batch (wrong)"))
    for ax, per_sample, title in panels:
        _blank(ax, (-2.2, G * D + 0.2), (-1.0, N + 0.9), title)
        for n in range(N):
            for c in range(G * D):
                ax.add_patch(Rectangle((c, N - 1 - n), 1, 1, facecolor=colours[c // D], alpha=0.35, edgecolor="white"))
        for g in range(G):
            boxes = [(N - 1 - n, 1) for n in range(N)] if per_sample else [(0, N)]
            for y, h in boxes:
                ax.add_patch(Rectangle((g * D, y), D, h, fill=False, edgecolor="black", lw=1.6))
            ax.text(g * D + D / 2, N + 0.25, f"group {g}", ha="center", fontsize=8)
        for n in range(N):
            ax.text(-0.3, N - 0.5 - n, f"n = {n}", ha="right", va="center", fontsize=8)
        ax.text(G * D / 2, -0.7, f"{'N x G' if per_sample else 'G'} black boxes: one mean and variance each",
                ha="center", fontsize=8)
    ax = fig.add_subplot(grid[1, :])
    _blank(ax, (-1, 17), (-1.4, 5.0), "The team path: 2 lanes own one group of D = 16 floats, two float4s each")
    for f4 in range(4):
        lane = f4 % 2
        ax.add_patch(Rectangle((4 * f4, 3), 4, 1, facecolor=colours[lane], alpha=0.6, edgecolor="black"))
        ax.text(4 * f4 + 2, 3.5, f"float4 {f4}: lane {lane}", ha="center", va="center", fontsize=8)
    ax.text(8, 4.35, "one group, x[n, gD : gD + 16]: 64 contiguous bytes, loaded once", ha="center", fontsize=8)
    for lane, (x0, x1) in enumerate(((1, 6), (10, 15))):
        ax.add_patch(Rectangle((x0, 0), x1 - x0, 1, facecolor=colours[lane], alpha=0.6, edgecolor="black"))
        ax.text((x0 + x1) / 2, 0.5, f"lane {lane}: its 8 values", ha="center", va="center", fontsize=8)
        for f4 in (lane, lane + 2):
            ax.add_patch(FancyArrowPatch((4 * f4 + 2, 2.95), ((x0 + x1) / 2, 1.05), arrowstyle="->", lw=0.8,
                                         mutation_scale=9))
    ax.add_patch(FancyArrowPatch((6.1, 0.5), (9.9, 0.5), arrowstyle="<->", lw=1.4, mutation_scale=10))
    ax.text(8, -0.6, "one register shuffle (__shfl_xor_sync, offset 1) merges the two summaries:\n"
            "both lanes hold the group's mean and variance, normalise their 8 values, store them", ha="center",
            va="top", fontsize=8)
    fig.tight_layout()
    return fig


def broadcast_figure(N=8, C=5) -> Figure:
    """Notebook 07: rowmin (N, 1) + bias (1, C, 1, 1) -> out (1, C, N, 1), drawn as the (C, N) grid it is in memory
    (n fastest), with one thread's float4 of n walking down the channels, and the minimum it is computed from."""
    fig = _diagram((11.0, 3.6))
    axes = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.5]})
    ax = axes[0]
    _blank(ax, (-3.5, 7.5), (-1.0, 5.2), "Shapes aligned from the right")
    rows = [("rowmin", ["", "", "N", "1"]), ("bias", ["1", "C", "1", "1"]), ("sum", ["1", "C", "N", "1"])]
    for i, (name, dims) in enumerate(rows):
        y = 4 - 1.5 * i
        ax.text(-0.4, y + 0.4, name, ha="right", va="center", fontsize=9)
        for j, d in enumerate(dims):
            if d:
                stretched = name == "sum" and (j == 1 or j == 2)
                ax.add_patch(Rectangle((1.6 * j, y), 1.4, 0.8, facecolor=_WRITE if stretched else "white",
                                       alpha=0.35 if stretched else 1, edgecolor="black"))
                ax.text(1.6 * j + 0.7, y + 0.4, d, ha="center", va="center", fontsize=9)
    ax.text(3, -0.7, "each 1 stretches to the other's size: (N, 1) is read as (1, 1, N, 1)", ha="center", fontsize=7)
    ax = axes[1]
    _blank(ax, (-2.6, N + 3.2), (-1.9, C + 1.6), "The output in memory: (C, N), n fastest")
    for c in range(C):
        for n in range(N):
            owned = 4 <= n < 8
            ax.add_patch(Rectangle((n, C - 1 - c), 1, 1, facecolor=_WRITE if owned else "white",
                                   alpha=0.45 if owned else 1, edgecolor=_GRID))
        ax.text(-0.2, C - 0.5 - c, f"c={c}: +bias[{c}]", ha="right", va="center", fontsize=7)
    for n in range(N):
        ax.add_patch(Rectangle((n, -1.5), 1, 0.8, facecolor=_READ, alpha=0.35 if 4 <= n < 8 else 0.12,
                               edgecolor=_GRID))
    ax.text(N / 2, -1.8, "rowmin[0 .. N-1]: one float4 per thread, loaded once", ha="center", fontsize=7)
    ax.add_patch(FancyArrowPatch((N + 0.4, C - 0.5), (N + 0.4, 0.5), arrowstyle="->", lw=1.2, mutation_scale=10))
    ax.text(N + 0.6, C / 2, "one thread\nowns 4 n,\nwalks down\nchannels\nc = blockIdx.y,\n+ gridDim.y, ...:\na float4 store\neach", va="center",
            fontsize=7)
    ax.add_patch(FancyArrowPatch((0, C + 0.3), (N, C + 0.3), arrowstyle="->", lw=1.0, mutation_scale=8))
    ax.text(N / 2, C + 0.55, "addresses increase: out[0, c, n, 0] is at c * N + n", ha="center", fontsize=7)
    fig.tight_layout()
    return fig
