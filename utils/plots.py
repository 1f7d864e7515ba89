"""The workbook's plots: speedup bars, ratio bars with targets, eager op breakdown, the GEMM ladder, the roofline.

    speedup_bars(results.load("baselines"))     # a record: titled "recorded on <device>, <date>"
    speedup_bars(rows)                          # compare() rows just measured: titled with this machine
    ratio_bars(chapter.solution_ratios(rec["entries"]), recorded=rec,   # ours / the best torch.compile mode,
               targets={"ours": (2.0, 2.5)})                            # with its targets
    roofline([{"label": "94 eager", "flops": c.flops, "bytes": c.bytes, "ms": 12.3}], ceilings)

Bar labels go through label_bars; finish() fits them (fit_bar_labels), so that none runs into another
or out of its axes however many bars there are. speedup_bars adds a panel over torch.compile wherever
its rows hold torch.compile.

Every function returns a matplotlib Figure (and saves it with save=path). Every title says
which device, torch version and date the numbers come from; numbers from a recorded run
(a record passed as the data, or as `recorded=`) say "recorded on <device>, <date>", so a
reader without a GPU knows they are looking at someone else's measurement.

Figures are built with matplotlib.figure.Figure, not pyplot: they need no display (they
draw on an Agg canvas), they do not pile up in pyplot's global state, and a notebook shows
a returned figure once, not twice.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from weakref import WeakKeyDictionary

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from utils import env
from utils.bench import Ceilings

# One style for every plot (applied while a figure is built; global rcParams are left alone).
STYLE = {
    "figure.figsize": (8.0, 4.5),
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "figure.titlesize": 11,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "legend.fontsize": 9,
}
# Fixed colours for the contenders that appear in every chapter; others take the cycle below.
COLOURS = {
    "eager": "#7f7f7f",
    "torch.compile": "#1f77b4",
    "torch.compile max-autotune": "#6a3d9a",
    "torch.compile max-autotune-no-cudagraphs": "#6a3d9a",
    "ours + torch.compile": "#fdae6b",
    "ours, frozen": "#31a354",
    "cuBLAS": "#222222",
    "ours": "#e6550d",
}
CYCLE = ["#e6550d", "#31a354", "#3182bd", "#fdae6b", "#9e9ac8", "#a1d99b", "#fd8d3c", "#6baed6", "#bcbddc", "#74c476"]
REFERENCE = "#444444"


def _show_figures_in_notebooks() -> None:
    """Make display(fig) draw the image in any IPython kernel, whatever matplotlib's backend.

    A Figure built without pyplot is shown by the formatter that the inline backend registers;
    a headless run (papermill with MPLBACKEND=Agg, say) has none, and the executed notebook would
    record only "<Figure size 880x495 with 1 Axes>". Registering a PNG formatter here, once, when
    the module is imported inside IPython, fixes that for every notebook."""
    try:
        from IPython import get_ipython
        from IPython.core.pylabtools import print_figure
    except ImportError:  # plain Python: nothing displays figures
        return
    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.formatters["image/png"].for_type(
            Figure, lambda fig: print_figure(fig, "png", bbox_inches="tight"))


_show_figures_in_notebooks()


# --------------------------------------------------------------------------- titles and data

def _is_record(data) -> bool:
    return isinstance(data, dict) and "entries" in data


def _rows(data) -> list[dict]:
    return data["entries"] if _is_record(data) else list(data)


def provenance(recorded: dict | None = None) -> str:
    """The title's second line: where and when the numbers were measured."""
    if recorded is not None:
        return f"recorded on {recorded['device']['name']}, {recorded['date'][:10]} · torch {recorded['torch']}"
    import torch

    today = datetime.now(timezone.utc).date().isoformat()
    return f"{env.device_name() or 'cpu (no GPU)'} · torch {torch.__version__} · {today}"


def _figure(what: str, recorded: dict | None, **kw) -> Figure:
    with matplotlib.rc_context(STYLE):
        fig = Figure(**kw)
    fig.suptitle(f"{what}\n{provenance(recorded)}")
    return fig


def finish(fig: Figure, save: str | Path | None = None) -> Figure:
    """Lay a figure out in the workbook's style (its bar labels fitted: fit_bar_labels) and, given a path,
    save it there (folders made)."""
    with matplotlib.rc_context(STYLE):
        fig.tight_layout()
        fit_bar_labels(fig)
        if save is not None:
            Path(save).parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(save, bbox_inches="tight")
    return fig


def _colour(name: str, i: int) -> str:
    return COLOURS.get(name, CYCLE[i % len(CYCLE)])


def _name(row: dict) -> str:
    return row["contender"]


def _series(row: dict) -> str:
    """A bar's legend label: the contender, marked when TF32 was allowed."""
    return _name(row) + (" · TF32" if row.get("tf32") else "")


# --------------------------------------------------------------------------- bar labels

# Each bar label's bar (label_bars fills it; fit_bar_labels reads it): a label must fit above its own bar.
_BAR_OF: WeakKeyDictionary = WeakKeyDictionary()
LABEL_GAP_PT = 1.5  # the least room between a label and its neighbours, or the top of its axes
MAX_WIDTH_IN = 40.0  # fit_bar_labels widens a figure up to this, no further
_LABEL_BOX = {"facecolor": "white", "edgecolor": "none", "pad": 0.3}


def label_bars(ax, bars, labels: list[str] | None = None, *, fmt: str = "%.2fx", fontsize: float = 7,
               color: str = "black", fontweight: str = "normal") -> list:
    """Label each bar with its value (`fmt`) or `labels`, above it, in a white box that hides a reference line
    behind it. finish() fits them (fit_bar_labels): horizontal where they fit their bars, else vertical, the
    figure widened until no label reaches past its own bar, and the axes' top raised above the highest."""
    texts = ax.bar_label(bars, labels=labels, fmt=fmt, fontsize=fontsize, padding=2, color=color,
                         fontweight=fontweight, bbox=_LABEL_BOX)
    for text, bar in zip(texts, bars):
        _BAR_OF[text] = bar
    return texts


def bar_labels(ax) -> list:
    """The labels label_bars put on `ax` (those with text)."""
    return [t for t in ax.texts if t in _BAR_OF and t.get_text()]


def text_extent(text, renderer) -> Bbox:
    """Where a drawn text covers the figure, in pixels: its glyphs and, when it has one, its box."""
    box = text.get_window_extent(renderer)
    patch = text.get_bbox_patch()
    return Bbox.union([box, patch.get_window_extent(renderer)]) if patch is not None else box


def fit_bar_labels(fig: Figure, *, passes: int = 8) -> None:
    """Make every label of label_bars readable, whatever the number of bars: a label that runs into its
    neighbour's hides part of it ("0.87x" read as "87x"). Each pass draws the figure and, per axes, turns
    the labels vertical once a horizontal one is wider than its bar, widens the figure until each label
    (with LABEL_GAP_PT) fits over its own bar, and raises the top of the y axis until every label is
    inside the axes. Figures without such labels are left alone."""
    axes = [ax for ax in fig.axes if bar_labels(ax)]
    if not axes:
        return
    canvas = FigureCanvasAgg(fig)
    for _ in range(passes):
        fig.tight_layout()
        renderer = canvas.get_renderer()
        fig.draw_without_rendering()  # every artist placed, as a draw would, with no pixel written
        gap = LABEL_GAP_PT * fig.dpi / 72
        extra_in, changed = 0.0, False
        for ax in axes:
            labels = bar_labels(ax)
            # how much wider each label needs its bar to be
            need = max((text_extent(t, renderer).width + gap) / max(_BAR_OF[t].get_window_extent(renderer).width, 1e-9)
                       for t in labels)
            if need > 1 and labels[0].get_rotation() == 0:
                for t in labels:
                    t.set_rotation(90)
                changed = True
                continue
            if need > 1:
                extra_in = max(extra_in, ax.get_window_extent(renderer).width / fig.dpi * (need - 1) * 1.03)
            changed |= _raise_top(ax, labels, renderer, gap)
        width, height = fig.get_size_inches()
        if extra_in > 0 and width < MAX_WIDTH_IN:
            columns = len({round(ax.get_position().x0, 3) for ax in axes})
            fig.set_size_inches(min(MAX_WIDTH_IN, width + columns * extra_in), height)
            changed = True
        if not changed:
            return
    fig.tight_layout()


def _raise_top(ax, labels, renderer, gap: float) -> bool:
    """Raise the y axis' top so that every label ends `gap` pixels inside the axes; True if it moved."""
    frame = ax.get_window_extent(renderer)
    log = ax.get_yscale() == "log"
    scale = (lambda v: np.log10(v)) if log else (lambda v: v)
    lo, hi = (scale(v) for v in ax.get_ylim())
    span = hi - lo
    for t in labels:
        above = text_extent(t, renderer).y1 - ax.transData.transform((0, t.xy[1]))[1]  # the label's height over its bar
        room = 1 - (above + gap) / frame.height  # the fraction of the axes the bar's top may reach
        if t.xy[1] > 0 and room > 0:
            span = max(span, (scale(t.xy[1]) - lo) / room)
    if span <= (hi - lo) * (1 + 1e-6):
        return False
    top = lo + span * 1.02
    ax.set_ylim(top=10 ** top if log else top)
    return True


# --------------------------------------------------------------------------- plots

def speedup_bars(rows_or_record, baseline: str = "eager", group_by: str = "problem", *,
                 recorded: dict | None = None, save: str | Path | None = None, what: str | None = None,
                 where=None) -> Figure:
    """Speedup over `baseline` (TF32 off, same group) of every contender, grouped by problem.
    Accepts compare() rows or a record ("baselines", "solutions"); a line marks 1x. `where`
    (row -> bool) keeps some rows only; `what` replaces the title's first line. Where the rows hold
    torch.compile (a contender named "torch.compile..."), a second panel shows every other contender
    over the faster torch.compile mode with the same TF32 setting (in the same group)."""
    rows = [r for r in _rows(rows_or_record) if where is None or where(r)]
    recorded = recorded or (rows_or_record if _is_record(rows_or_record) else None)
    groups = list(dict.fromkeys(r.get(group_by) for r in rows))
    others = [r for r in rows if not _is_compiled(r)]
    vs_compile = baseline != "torch.compile" and len(others) < len(rows) and any(
        _fastest_compiled(rows, r, group_by) for r in others)

    def over_baseline(r: dict) -> float:
        base = _baseline_row([x for x in rows if x.get(group_by) == r.get(group_by)], baseline)
        return base["median_ms"] / r["median_ms"]

    def over_compile(r: dict) -> float | None:
        best = _fastest_compiled(rows, r, group_by)
        return best["median_ms"] / r["median_ms"] if best else None

    panels = [(rows, over_baseline, f"speedup over {baseline} with TF32 off (x)", f"over {baseline}, TF32 off")]
    if vs_compile:
        panels.append((others, over_compile, "torch.compile's time / this one's (x)",
                       "over the faster torch.compile mode, same TF32 setting"))
    series = list(dict.fromkeys(_series(r) for r in rows))
    width, height = _bars_figsize(groups, series)
    fig = _figure(what or f"Speedup over {baseline} (TF32 off)", recorded,
                  figsize=(width, height * (1 + 0.8 * (len(panels) - 1))))
    with matplotlib.rc_context(STYLE):
        for i, (shown, value, ylabel, title) in enumerate(panels):
            ax = fig.add_subplot(len(panels), 1, i + 1)
            _grouped_bars(ax, shown, groups, group_by, value)
            ax.set_ylabel(ylabel)
            if len(panels) > 1:
                ax.set_title(title, loc="left", fontsize=10)
    return finish(fig, save)


def _grouped_bars(ax, rows: list[dict], groups: list, group_by: str, value) -> None:
    """A bar per row, value(row) high (no bar where it is None), grouped along x by row[group_by], one labelled
    series per _series(row); a dashed line at 1x; the legend beside the axes."""
    series = list(dict.fromkeys(_series(r) for r in rows))
    width = 0.8 / len(series)
    for j, s in enumerate(series):
        xs, ys = [], []
        for g_i, g in enumerate(groups):
            row = next((r for r in rows if r.get(group_by) == g and _series(r) == s), None)
            v = value(row) if row is not None else None
            if v is not None:
                xs.append(g_i - 0.4 + width * (j + 0.5))
                ys.append(v)
        _labelled_bars(ax, xs, ys, width, s, _colour(s.removesuffix(" · TF32"), j))
    ax.axhline(1.0, color=REFERENCE, lw=1, ls="--")
    ax.set_xticks(range(len(groups)), [_group_label(group_by, g) for g in groups])
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _is_compiled(row: dict) -> bool:
    return _name(row).startswith("torch.compile")


def _fastest_compiled(rows: list[dict], row: dict, group_by: str) -> dict | None:
    """The faster torch.compile row of `row`'s group with its TF32 setting; None if there is none."""
    same = [r for r in rows if _is_compiled(r) and r.get(group_by) == row.get(group_by)
            and bool(r.get("tf32")) == bool(row.get("tf32"))]
    return min(same, key=lambda r: r["median_ms"]) if same else None


def _bars_figsize(groups: list, series: list) -> tuple[float, float]:
    """Wide enough that the vertical labels of side-by-side bars never touch: about 0.16 inch a bar,
    beside the legend, never narrower than the style's 8 inches."""
    return max(STYLE["figure.figsize"][0], 3.0 + 0.16 * len(groups) * len(series)), STYLE["figure.figsize"][1]


def _labelled_bars(ax, xs: list[float], ys: list[float], width: float, series: str, colour: str):
    """One series of bars (hatched when its label says TF32), each labelled with its value (label_bars)."""
    bars = ax.bar(xs, ys, width, label=series, color=colour, hatch="//" if "TF32" in series else None,
                  edgecolor="white")
    label_bars(ax, bars)
    return bars


# ratio_bars' values: a ratio's key in utils.chapters.session.solution_ratios rows -> (what it is over, its colour)
RATIOS = {"vs_compile": ("over torch.compile", COLOURS["torch.compile"]), "vs_eager": ("over eager", COLOURS["eager"])}


def ratio_bars(rows, *, values: tuple[str, ...] = ("vs_compile",), label=None, targets: dict | None = None,
               what: str = "Ours over the faster torch.compile mode, same TF32 setting",
               ylabel: str = "the faster torch.compile mode's time / ours (x)", recorded: dict | None = None,
               save: str | Path | None = None) -> Figure:
    """Ratios per problem, one bar per series: rows such as utils.chapters.session.solution_ratios gives
    ({"problem", "contender", "tf32", and the keys of RATIOS}), a series per label(row) (default: the
    contender, marked " · TF32" when TF32 was allowed) and, with several `values`, per value too
    ("<label>: over eager", coloured by what the ratio is over; one value: coloured by contender). A
    line marks 1x; targets {series: target, (target, moonshot), or {problem: either}} draws each
    series' target (dashed) and moonshot (dotted) across its bars."""
    label = label or _series

    def name(r: dict, v: str) -> str:
        return label(r) if len(values) == 1 else f"{label(r)}: {RATIOS[v][0]}"

    groups = list(dict.fromkeys(r["problem"] for r in rows))
    series = list(dict.fromkeys((name(r, v), v) for r in rows for v in values))
    fig = _figure(what, recorded, figsize=_bars_figsize(groups, series))
    with matplotlib.rc_context(STYLE):
        ax = fig.add_subplot()
        width = 0.8 / len(series)
        for j, (s, v) in enumerate(series):
            at = {r["problem"]: r[v] for r in rows if name(r, v) == s}
            shown = [g for g in groups if g in at]
            xs = [groups.index(g) - 0.4 + width * (j + 0.5) for g in shown]
            colour = _colour(s.split(" · ")[0], j) if len(values) == 1 else RATIOS[v][1]
            _labelled_bars(ax, xs, [at[g] for g in shown], width, s, colour)
            goal = (targets or {}).get(s)
            for x, g in zip(xs, shown):
                levels = goal.get(g) if isinstance(goal, dict) else goal
                for level, style, kind in zip(levels if isinstance(levels, tuple) else (levels,), ("--", ":"),
                                              ("target", "moonshot")):
                    if level is not None:  # black across the series' own bar: its position says whose it is
                        ax.hlines(level, x - width / 2, x + width / 2, colors=REFERENCE, linestyles=style, lw=1.5,
                                  zorder=2.5, label=f"{kind}, {s}" + ("" if isinstance(goal, dict) else f": {level:g}x"))
        ax.axhline(1.0, color=REFERENCE, lw=1, ls="-")
        ax.set_xticks(range(len(groups)), [_group_label("problem", g) for g in groups])
        ax.set_ylabel(ylabel)
        ax.margins(y=0.15)
        handles = dict(zip(*reversed(ax.get_legend_handles_labels())))  # one entry per label
        ax.legend(handles.values(), handles.keys(), loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return finish(fig, save)


def _baseline_row(rows: list[dict], baseline: str) -> dict:
    candidates = [r for r in rows if _name(r) == baseline]
    if not candidates:
        raise ValueError(f"no {baseline!r} row to compare against among {sorted({_name(r) for r in rows})}")
    return min(candidates, key=lambda r: bool(r.get("tf32")))  # TF32 off, when both are there


def _group_label(group_by: str, value) -> str:
    if value is None:
        return ""
    return f"problem {value}" if group_by == "problem" else str(value)


def op_breakdown(profile_record, *, top: int = 6, recorded: dict | None = None,
                 save: str | Path | None = None) -> Figure:
    """Where eager PyTorch spends its CUDA time: one horizontal stacked bar per problem, the
    `top` ops (by total share over all problems) coloured, the rest as "other"."""
    rows = _rows(profile_record)
    recorded = recorded or (profile_record if _is_record(profile_record) else None)
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    totals: dict[str, float] = {}
    for r in rows:
        totals[r["op"]] = totals.get(r["op"], 0.0) + r["pct"]
    shown = sorted(totals, key=totals.get, reverse=True)[:top]
    fig = _figure("Share of eager CUDA time per op", recorded)
    with matplotlib.rc_context(STYLE):
        ax = fig.add_subplot()
        left = [0.0] * len(problems)
        for j, op in enumerate([*shown, "other"]):
            if op == "other":  # the ops not shown, and whatever the profile left unlisted
                widths = [max(0.0, 100.0 - l) for l in left]
            else:
                widths = [sum(r["pct"] for r in rows if r["problem"] == p and r["op"] == op) for p in problems]
            bars = ax.barh(range(len(problems)), widths, left=left, label=op,
                           color="#cccccc" if op == "other" else CYCLE[j % len(CYCLE)], edgecolor="white")
            ax.bar_label(bars, labels=[f"{w:.0f}%" if w >= 5 else "" for w in widths], label_type="center", fontsize=8)
            left = [a + b for a, b in zip(left, widths)]
        ax.set_yticks(range(len(problems)), [f"problem {p}" for p in problems])
        ax.invert_yaxis()
        ax.set_xlim(0, 100)
        ax.set_xlabel("% of eager CUDA time")
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return finish(fig, save)


def ladder(rows, reference: str = "cuBLAS", *, recorded: dict | None = None,
           save: str | Path | None = None) -> Figure:
    """TFLOP/s of each rung of the GEMM ladder, in order, each labelled with its % of `reference`.
    The axis is logarithmic: the rungs span two orders of magnitude (rung 1 runs at about 1% of cuBLAS),
    and on a linear axis the first rung would be invisible."""
    recorded = recorded or (rows if _is_record(rows) else None)
    rows = _rows(rows)
    ref = next((r for r in rows if _name(r) == reference), None)
    if ref is None:
        raise ValueError(f"no {reference!r} row in the ladder: {[_name(r) for r in rows]}")
    fig = _figure(f"GEMM ladder: TFLOP/s and % of {reference}", recorded)
    with matplotlib.rc_context(STYLE):
        ax = fig.add_subplot()
        names = [_name(r) for r in rows]
        bars = ax.bar(range(len(rows)), [r["tflops"] for r in rows],
                      color=[COLOURS.get(n, CYCLE[0]) for n in names], edgecolor="white")
        ax.bar_label(bars, labels=[f"{100 * r['tflops'] / ref['tflops']:.0f}%" for r in rows], fontsize=8, padding=2)
        ax.axhline(ref["tflops"], color=REFERENCE, lw=1, ls="--")
        ax.set_yscale("log")
        lowest, highest = min(r["tflops"] for r in rows), max(r["tflops"] for r in rows)
        ax.set_ylim(lowest / 2, highest * 2.5)  # room below the shortest bar and above the labels
        ax.set_xticks(range(len(rows)), names, rotation=30, ha="right")
        ax.set_ylabel("TFLOP/s, log scale (bar labels: % of " + reference + ")")
    return finish(fig, save)


def warp_access(panels: list[dict], *, sector_floats: int = 8, save: str | Path | None = None) -> Figure:
    """A diagram, not a measurement: which floats of row-major fp32 matrices one warp reads in one
    load step. One panel per access pattern, {"title", "row_labels": [...], "cols": n, "used": {(row, col)},
    "fetched": {(row, col)}}: used cells dark, fetched-but-unused ones (the rest of each 32-byte
    sector the hardware moves) light, sector boundaries as vertical lines."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    colours = ["#f0f0f0", "#fdd0a2", CYCLE[0]]
    with matplotlib.rc_context(STYLE):
        heights = [1.0 + 0.17 * len(p["row_labels"]) for p in panels]
        fig = Figure(figsize=(8.0, 0.8 + sum(heights)))
        axes = fig.subplots(len(panels), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
        for ax, p in zip(axes, panels):
            grid = np.zeros((len(p["row_labels"]), p["cols"]))
            for cells, value in ((p["fetched"], 1), (p["used"], 2)):
                for r, c in cells:
                    grid[r, c] = max(grid[r, c], value)
            ax.imshow(grid, cmap=ListedColormap(colours), vmin=0, vmax=2, aspect="auto", interpolation="nearest")
            for x in range(0, p["cols"] + 1, sector_floats):
                ax.axvline(x - 0.5, color=REFERENCE, lw=0.6)
            for r in range(1, len(p["row_labels"])):
                ax.axhline(r - 0.5, color="white", lw=0.5)
            ax.grid(False)
            ax.set_yticks(range(len(p["row_labels"])), p["row_labels"], fontsize=7)
            ax.set_xlabel(p.get("xlabel", "k: floats along the row (lines: 32-byte sectors)"), fontsize=8)
            ax.set_title(p["title"], fontsize=9, loc="left")
        # Below the figure's bottom edge: out of the axes' way, and inside a tight bounding box.
        fig.legend(handles=[Patch(color=colours[2], label="read by a lane"),
                            Patch(color=colours[1], label="moved with its sector, not used")],
                   loc="upper center", bbox_to_anchor=(0.5, 0.0), ncols=2)
    fig.suptitle("One warp, one load step (a diagram of addresses, not a measurement)", x=0.02, ha="left")
    return finish(fig, save)


def roofline(points: list[dict], ceilings, *, recorded: dict | None = None,
             save: str | Path | None = None) -> Figure:
    """Log-log roofline: the memory roof and the FP32 and TF32 compute roofs of `ceilings`
    (a bench.Ceilings or a "ceilings" record), and each point {"label", "flops", "bytes", "ms"}
    at its arithmetic intensity and achieved TFLOP/s. `recorded`: the record the points come from."""

    c = Ceilings.from_record(ceilings) if _is_record(ceilings) else ceilings
    fig = _figure("Roofline", recorded)
    with matplotlib.rc_context(STYLE):
        ax = fig.add_subplot()
        intensity = [p["flops"] / p["bytes"] for p in points]
        tflops = [p["flops"] / (p["ms"] * 1e-3) / 1e12 for p in points]
        ridge_tf32 = c.tf32_tflops * 1e3 / c.copy_GBps  # FLOP/byte where the TF32 roof meets memory
        lo = min([0.1, *intensity]) / 2
        hi = max([ridge_tf32, *intensity]) * 4
        x = np.geomspace(lo, hi, 200)
        memory = c.copy_GBps * x / 1e3  # GB/s x FLOP/byte = GFLOP/s; /1e3 -> TFLOP/s
        ax.plot(x, np.minimum(memory, c.tf32_tflops), color=REFERENCE, lw=1.5,
                label=f"memory {c.copy_GBps:.0f} GB/s, TF32 {c.tf32_tflops:.0f} TFLOP/s")
        ax.plot(x, np.minimum(memory, c.fp32_tflops), color=REFERENCE, lw=1.5, ls="--",
                label=f"FP32 {c.fp32_tflops:.0f} TFLOP/s")
        for i, (p, xi, yi) in enumerate(zip(points, intensity, tflops)):
            ax.plot(xi, yi, "o", color=_colour(p["label"], i))
            ax.annotate(p["label"], (xi, yi), textcoords="offset points", xytext=(5, 4), fontsize=8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(min([c.fp32_tflops / 1e3, *tflops]) / 2, c.tf32_tflops * 2)
        ax.set_xlabel("arithmetic intensity (FLOP/byte)")
        ax.set_ylabel("TFLOP/s")
        ax.legend(loc="lower right", title=f"ceilings {c.source}", title_fontsize=8)
    return finish(fig, save)


def sweep(rows, *, x: str, y: str = "median_ms", floor=None, floor_label: str = "floor", what: str = "",
          xlabel: str | None = None, ylabel: str | None = None, logx: bool = True, logy: bool = True,
          series: str = "contender", recorded: dict | None = None, save: str | Path | None = None) -> Figure:
    """One line per contender against the size of the problem, in the manner of Triton's perf_report:
    rows (dicts, a record, or a pandas DataFrame) with columns `series` (default "contender"), `x` and
    `y`; `floor` ({x: y} or [(x, y), ...]: the fastest any contender could be at each size, e.g. bytes
    over the measured bandwidth or FLOPs over the measured peak) drawn as a dashed black line. Where a
    regime begins is for the text (and for axvline on the returned figure's axes)."""
    recorded = recorded or (rows if _is_record(rows) else None)
    table = rows.to_dict("records") if hasattr(rows, "to_dict") else _rows(rows)
    if not table:
        raise ValueError("sweep: no rows to plot")
    fig = _figure(what or f"{y} against {x}", recorded)
    with matplotlib.rc_context(STYLE):
        ax = fig.add_subplot()
        names = list(dict.fromkeys(r[series] for r in table))
        for i, name in enumerate(names):
            points = sorted((r[x], r[y]) for r in table if r[series] == name)
            ax.plot([p[0] for p in points], [p[1] for p in points], "o-", ms=3.5, lw=1.5, color=_colour(name, i),
                    label=name)
        if floor is not None:
            points = sorted(floor.items() if isinstance(floor, dict) else floor)
            ax.plot([p[0] for p in points], [p[1] for p in points], color="black", lw=1.2, ls="--", label=floor_label)
        if logx:
            ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel(xlabel or x)
        ax.set_ylabel(ylabel or y)
        ax.legend()
    return finish(fig, save)
