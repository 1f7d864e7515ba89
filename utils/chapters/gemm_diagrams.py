"""The GEMM ladder chapter's diagrams (notebooks 02 and 03): matplotlib figures of which thread computes and
reads what, the block and warp tiles, the k-major copy, shared-memory bank phases and the copy/compute
pipeline. Drawings, not measurements.
"""
from __future__ import annotations

import matplotlib
from matplotlib.figure import Figure

from utils import plots
from utils.chapters.gemm_addressing import LOAD_NAMES, load_passes

# --------------------------------------------------------------------------- diagrams

_LANES = matplotlib.colormaps["viridis"]  # lane 0 .. 31
_EMPTY, _LIGHT, _MID = "#f4f4f4", "#fdd0a2", "#9ecae1"


def _axes_grid(ax, rows: int, cols: int, title: str, xlabel: str = "", ylabel: str = "") -> None:
    ax.set_xlim(-0.5, cols - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_aspect("equal")
    ax.grid(False)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=9, loc="left")
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.add_patch(matplotlib.patches.Rectangle((-0.5, -0.5), cols, rows, fill=False, lw=0.8, color="#444444"))


def _cells(ax, cells, colour, **kw) -> None:
    for r, c in cells:
        ax.add_patch(matplotlib.patches.Rectangle((c - 0.5, r - 0.5), 1, 1, color=colour, lw=0, **kw))


def _lane_cells(ax, cells) -> None:
    """cells[i] = (row, col) of lane i, coloured by lane."""
    for lane, (r, c) in enumerate(cells):
        _cells(ax, [(r, c)], _LANES(lane / 31))


def _figure(title: str, size: tuple[float, float]) -> Figure:
    with matplotlib.rc_context(plots.STYLE):
        fig = Figure(figsize=size)
    fig.suptitle(title + "\n(a diagram, not a measurement)", x=0.02, ha="left", fontsize=10)
    return fig


def _finish(fig: Figure) -> Figure:
    return plots.finish(fig)


def draw_mapping() -> Figure:
    """Notebook 02: which outputs one warp computes and which elements of x and w it reads at one step,
    rung 1 (lanes along n: w read down a column, 32 rows apart) against rung 2 (lanes along k: every read a
    run of consecutive floats). Colour: lane 0 (dark) to 31 (light)."""
    fig = _figure("One warp (32 lanes), one step: rung 1 against rung 2", (9.0, 6.2))
    K, N, M = 40, 40, 10
    m, n0, k = 3, 4, 6
    with matplotlib.rc_context(plots.STYLE):
        axes = fig.subplots(2, 3, gridspec_kw={"width_ratios": [K, K, N]})
        for row, (rung, what) in enumerate([("rung 1", "lanes along n"), ("rung 2", "lanes along k")]):
            ax_x, ax_w, ax_out = axes[row]
            _axes_grid(ax_x, M, K, f"{rung} ({what}): x (M x K)", "k →", "m")
            _axes_grid(ax_w, N, K, "w (N x K): each row K-contiguous", "k →", "n")
            _axes_grid(ax_out, M, N, "out (M x N)", "n →", "m")
            if row == 0:  # every lane reads x[m][k]; lane l reads w[n0 + l][k]; computes out[m][n0 + l]
                _cells(ax_x, [(m, k)], _LANES(0.5))
                _lane_cells(ax_w, [(n0 + lane, k) for lane in range(32)])
                _lane_cells(ax_out, [(m, n0 + lane) for lane in range(32)])
                ax_w.annotate("32 rows, K floats apart:\n32 cache lines", (k + 1, n0 + 16), (k + 6, n0 + 16),
                              fontsize=8, va="center", arrowprops={"arrowstyle": "->"})
            else:  # lane l reads x[m][k0 + l] and w[n0 + j][k0 + l], j = 0..3; the warp computes out[m][n0..n0+3]
                _lane_cells(ax_x, [(m, lane) for lane in range(32)])
                for j in range(4):
                    _lane_cells(ax_w, [(n0 + j, lane) for lane in range(32)])
                _cells(ax_out, [(m, n0 + j) for j in range(4)], _LANES(0.5))
                ax_w.annotate("4 rows, 32 consecutive k:\none 128-byte line each", (16, n0 + 4), (8, n0 + 16),
                              fontsize=8, va="center", arrowprops={"arrowstyle": "->"})
    return _finish(fig)


def draw_block_tile() -> Figure:
    """Notebook 03, rung 3 on: a block computes one tile of out from a band of rows of x and one of w,
    walking along K a slice at a time; each slice is copied to shared memory once and used by the whole tile."""
    fig = _figure("One block: a tile of out, from bands of x and w, one K slice at a time", (9.0, 3.4))
    tiles_m, tiles_n, slices = 6, 6, 8
    bm, bn, s = 2, 4, 3  # this block's tile row and column, the slice being computed
    with matplotlib.rc_context(plots.STYLE):
        ax_x, ax_w, ax_out = fig.subplots(1, 3, gridspec_kw={"width_ratios": [slices, slices, tiles_n]})
        for ax, rows, band, label in ((ax_x, tiles_m, bm, "x: BM rows"), (ax_w, tiles_n, bn, "w: BN rows")):
            _axes_grid(ax, rows, slices, f"{label} x K", "K, in slices of BK →")
            _cells(ax, [(band, c) for c in range(s)], _MID)  # done
            _cells(ax, [(band, c) for c in range(s + 1, slices)], _LIGHT)  # to come
            _cells(ax, [(band, s)], plots.CYCLE[0])
        _axes_grid(ax_out, tiles_m, tiles_n, "out: one BM x BN tile per block", "N →", "M")
        _cells(ax_out, [(bm, bn)], plots.CYCLE[0])
        legend = [matplotlib.patches.Patch(color=c, label=t) for c, t in
                  ((_MID, "slices done"), (plots.CYCLE[0], "slice in shared memory now"), (_LIGHT, "slices to come"))]
        fig.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, 0.02), ncols=3, fontsize=8)
    return _finish(fig)


def draw_kmajor_copy(rows: int = 8, bk: int = 16) -> Figure:
    """Notebook 03, rung 4 on: load_tile_kmajor's transposing copy. Thread t reads k = t % 8 of row t / 8
    (a warp: 8 consecutive k, one 32-byte sector, of 4 rows) and writes it to tile[k][row]. Warp 0 in lane
    colours; the first rows and k of the tile only."""
    fig = _figure("The transposing copy: global rows (k-contiguous) → shared tile[k][row] (k-major)", (9.0, 4.4))
    with matplotlib.rc_context(plots.STYLE):
        ax_g, ax_s = fig.subplots(1, 2, gridspec_kw={"width_ratios": [bk, rows]})
        _axes_grid(ax_g, rows, bk, "global: w[row][k], a warp reads 4 sectors", "k →", "row")
        _axes_grid(ax_s, bk, rows, "shared: tile[k][row]", "row →", "k")
        for t in range(32, 64):  # warp 1: the next 4 rows
            _cells(ax_g, [(t // 8, t % 8)], _LIGHT)
            _cells(ax_s, [(t % 8, t // 8)], _LIGHT)
        _lane_cells(ax_g, [(t // 8, t % 8) for t in range(32)])
        _lane_cells(ax_s, [(t % 8, t // 8) for t in range(32)])
        for x in (7.5,):
            ax_g.axvline(x, color="#444444", lw=0.6)
        ax_g.text(bk - 0.5, rows + 0.2, "k 8..15: the same threads, next pass", ha="right", va="top", fontsize=7)
    return _finish(fig)


def draw_bank_phases(cases: dict[str, tuple[list[int], int]], phase: int = 0) -> Figure:
    """For each case {title: (first word of each of 32 lanes, floats per lane)}: the lanes of one phase
    of the load (a quarter-warp for LDS.128, a half-warp for LDS.64, the warp for LDS) against the 32
    banks, each lane's words in its colour; a bank that must deliver more than one distinct word (a
    conflict) is framed in red."""
    heights = [min(32 // width, 12) for _, width in cases.values()]
    fig = _figure("Shared-memory banks: the lanes of one phase of a load (red frame: a bank asked for 2+ words)",
                  (9.0, 1.0 + 0.16 * sum(heights) + 0.45 * len(cases)))
    with matplotlib.rc_context(plots.STYLE):
        axes = fig.subplots(len(cases), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
        for ax, (title, (first_words, width)) in zip(axes, cases.items()):
            n = 32 // width
            lanes = list(range(phase * n, phase * n + n))
            passes = load_passes(first_words, width)[phase]
            _axes_grid(ax, n, 32, f"{title}: {LOAD_NAMES[width]}, lanes {lanes[0]}-{lanes[-1]}: "
                                  f"{passes} pass{'es' if passes > 1 else ''}", "bank →" if ax is axes[-1] else "")
            ax.set_aspect("auto")
            words_of_bank: dict[int, set] = {}
            for i, lane in enumerate(lanes):
                for j in range(width):
                    word = first_words[lane] + j
                    _cells(ax, [(i, word % 32)], _LANES(i / max(1, n - 1)))
                    words_of_bank.setdefault(word % 32, set()).add(word)
            for bank, words in words_of_bank.items():
                if len(words) > 1:
                    ax.add_patch(matplotlib.patches.Rectangle((bank - 0.5, -0.5), 1, n, fill=False, color="#d62728", lw=1.2))
            ax.set_xticks(range(0, 32, 4))
            ax.tick_params(labelsize=7)
    return _finish(fig)


def draw_warp_tile() -> Figure:
    """Notebook 03, rung 7: the 128 x 128 block tile in 8 warp tiles of 32 x 64 (4 x 2); and warp 0's
    tile with the outputs of each lane (lane colours, lane number in each block): a thread's 64 outputs
    are 2 x 2 blocks of 4 x 4, 16 rows and 32 columns apart, and the lanes are 4 (rows) x 8 (columns)."""
    fig = _figure("Rung 7's warp tiling: the block's 8 warps, and the 32 lanes of warp 0", (9.0, 3.8))
    warps_n, warp_m, warp_n = 2, 32, 64
    with matplotlib.rc_context(plots.STYLE):
        ax_block, ax_warp = fig.subplots(1, 2, gridspec_kw={"width_ratios": [128, 128]})
        _axes_grid(ax_block, 128, 128, "block tile: 128 x 128 outputs, 8 warps", "n →", "m")
        for warp in range(8):
            r0, c0 = (warp // warps_n) * warp_m, (warp % warps_n) * warp_n
            shade = _MID if warp == 0 else ("#e8e8e8" if (warp // warps_n + warp % warps_n) % 2 else "#d0d0d0")
            ax_block.add_patch(matplotlib.patches.Rectangle((c0 - 0.5, r0 - 0.5), warp_n, warp_m, color=shade, lw=0))
            ax_block.add_patch(matplotlib.patches.Rectangle((c0 - 0.5, r0 - 0.5), warp_n, warp_m, fill=False, lw=0.8,
                                                            color="#444444"))
            ax_block.text(c0 + warp_n / 2, r0 + warp_m / 2, f"warp {warp}\n32 x 64", ha="center", va="center", fontsize=7)
        _axes_grid(ax_warp, warp_m, warp_n, "warp 0: lane l owns 4 blocks of 4 x 4", "n →", "m")
        ax_warp.set_aspect("auto")
        for lane in range(32):
            tm, tn = (lane // 8) * 4, (lane % 8) * 4
            for dm in (0, 16):
                for dn in (0, 32):
                    ax_warp.add_patch(matplotlib.patches.Rectangle((tn + dn - 0.5, tm + dm - 0.5), 4, 4,
                                                                   color=_LANES(lane / 31), lw=0))
                    ax_warp.text(tn + dn + 1.5, tm + dm + 1.5, str(lane), ha="center", va="center", fontsize=5,
                                 color="white" if lane < 20 else "black")
    return _finish(fig)


def draw_pipeline(slices: int = 4, copy: float = 3.0, compute: float = 4.0) -> Figure:
    """Notebook 03, rungs 6 and 7: one block's timeline. Rung 6 copies a slice, waits at a barrier,
    computes it, waits again, then copies the next. Rung 7 (2 stages) issues slice s + 1's cp.async copy
    and computes slice s meanwhile: one barrier per slice, the copy hidden while it is shorter than the
    arithmetic. Times are schematic."""
    fig = _figure("One block's timeline: copy then compute (rung 6) against a 2-stage pipeline (rung 7)", (9.0, 3.6))
    with matplotlib.rc_context(plots.STYLE):
        axes = fig.subplots(2, 1, sharex=True)
        t, bars6 = 0.0, []
        for s in range(slices):
            bars6.append(("copy", t, copy, s))
            bars6.append(("compute", t + copy, compute, s))
            t += copy + compute
        bars7 = [("copy", 0.0, copy, 0)]
        start = copy
        for s in range(slices):
            if s + 1 < slices:
                bars7.append(("copy", start, copy, s + 1))
            bars7.append(("compute", start, compute, s))
            start += max(compute, copy)
        for ax, bars, title in ((axes[0], bars6, "rung 6: global → registers → shared, 2 barriers per slice"),
                                (axes[1], bars7, "rung 7: cp.async into stage (s + 1) % 2 while computing stage s % 2")):
            for what, x0, width, s in bars:
                y = 1 if what == "copy" else 0
                ax.broken_barh([(x0, width)], (y - 0.35, 0.7), color=_MID if what == "copy" else plots.CYCLE[0])
                ax.text(x0 + width / 2, y, f"{'copy' if y else 'compute'} {s}", ha="center", va="center", fontsize=7)
            ends = sorted({x0 + w for what, x0, w, _ in bars if what == "compute"} |
                          ({x0 + w for what, x0, w, _ in bars if what == "copy"} if bars is bars6 else set()))
            for x in ends:
                ax.axvline(x, color="#444444", lw=0.6, ls=":")
            ax.set_yticks([0, 1], ["compute", "copy"])
            ax.set_title(title, fontsize=9, loc="left")
            ax.grid(False)
        axes[1].set_xlabel("time (schematic; dotted: barriers)")
    return _finish(fig)
