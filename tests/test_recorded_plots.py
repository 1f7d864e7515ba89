"""The plots the notebooks draw from the committed records (results/*/*.json), drawn here as the notebooks
call them: no two texts of a figure overlap (a label half hidden by its neighbour's reads "0.87x" as "87x"),
every bar label sits inside its axes, and every plot of speedups over eager also shows torch.compile
wherever the record has it."""
import functools
import itertools

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from utils import plots, results
from utils.chapters import bias, epilogue_fusion, memory, scoreboard, tensor_core_figures
from utils.chapters import session as chapter
from utils.report.scoreboard import STAGES

DEVICES = results.recorded_devices(results.RESULTS)


def _record(device: str, kind: str) -> dict | None:
    return results.load(kind, device, results.RESULTS)


def _solutions(rec: dict) -> dict:
    """Notebook 09's forward plots, per protocol: speedup bars, and ours over the faster torch.compile mode."""
    figs = {}
    for protocol in ("steady", "per_call"):
        figs[f"speedup, {protocol}"] = plots.speedup_bars(rec, where=lambda r, p=protocol: r["protocol"] == p)
        ratios = [r for c in ("ours", "ours, frozen") for r in chapter.solution_ratios(rec["entries"], c)
                  if r["protocol"] == protocol]
        figs[f"vs compile, {protocol}"] = plots.ratio_bars(ratios, recorded=rec, targets={"ours": (2.0, 2.5)})
    return figs


def _side_by_side(rec: dict) -> dict:
    """Notebook 09's training and autocast plots: ours over eager and over torch.compile."""
    return {"ratios": plots.ratio_bars(chapter.solution_ratios(rec["entries"]), values=("vs_eager", "vs_compile"),
                                       label=lambda r: "TF32" if r["tf32"] else "strict", recorded=rec)}


# kind -> the figures a notebook draws from that kind's record
DRAWN = {
    "baselines": lambda rec: {"speedup": plots.speedup_bars(rec)},
    "eager_profile": lambda rec: {"op breakdown": plots.op_breakdown(rec)},
    "ladder": lambda rec: {"ladder": plots.ladder(rec)},
    "bias_fusion": lambda rec: {"bias": bias.bias_plot(rec["entries"], recorded_from=rec)},
    "fused_activations": lambda rec: {"bandwidth": memory.bandwidth_plot(rec["entries"], "t", recorded_from=rec)},
    "groupnorm_fusion": lambda rec: {"bandwidth": memory.bandwidth_plot(rec["entries"], "t", recorded_from=rec)},
    "broadcast_min": lambda rec: {"bandwidth": memory.bandwidth_plot(rec["entries"], "t", recorded_from=rec)},
    "tensor_cores": lambda rec: {"timing": tensor_core_figures.timing_figure(rec)},
    "whole_model_fusion": lambda rec: {"fusion": epilogue_fusion.fusion_figure(rec)},
    "scoreboard": lambda rec: {f"after {s}": scoreboard.plot(rec, s) for s in STAGES},
    "solutions": _solutions,
    "training": _side_by_side,
    "autocast": _side_by_side,
}
CASES = [(device, kind) for device in DEVICES for kind in DRAWN if _record(device, kind) is not None]


@functools.cache
def figures(device: str, kind: str) -> dict:
    """The figures of DRAWN[kind] from the device's record, drawn once for every test here."""
    return DRAWN[kind](_record(device, kind))


@functools.cache
def _drawn(fig):
    """The figure laid out as a draw lays it out (no pixel written), once: its renderer, for the texts' extents."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw_without_rendering()
    return renderer


def overlapping_texts(fig) -> list[str]:
    """Pairs of a figure's texts inside its axes (bar labels, annotations) whose boxes overlap once drawn."""
    renderer = _drawn(fig)
    texts = [(ax, t) for ax in fig.axes for t in ax.texts if t.get_visible() and t.get_text()]
    boxes = [(t.get_text(), plots.text_extent(t, renderer)) for _, t in texts]
    return [f"{a!r} and {b!r}" for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2) if box_a.overlaps(box_b)]


def labels_outside_their_axes(fig) -> list[str]:
    renderer = _drawn(fig)
    return [t.get_text() for ax in fig.axes for t in plots.bar_labels(ax)
            if not ax.get_window_extent(renderer).contains(*plots.text_extent(t, renderer).corners().T.max(axis=1))]


@pytest.mark.skipif(not CASES, reason="no record under results/ to draw")
@pytest.mark.parametrize("device, kind", CASES, ids=[f"{d}/{k}" for d, k in CASES])
def test_recorded_plots_have_no_overlapping_labels(device, kind):
    figs = figures(device, kind)
    overlaps = {name: found for name, fig in figs.items() if (found := overlapping_texts(fig))}
    assert not overlaps, f"{device}/{kind}: overlapping texts: {overlaps}"
    outside = {name: found for name, fig in figs.items() if (found := labels_outside_their_axes(fig))}
    assert not outside, f"{device}/{kind}: bar labels past their axes' top: {outside}"


SPEEDUPS_OVER_EAGER = [(d, k) for d, k in CASES if k in ("baselines", "solutions", "scoreboard")]


@pytest.mark.parametrize("device, kind", SPEEDUPS_OVER_EAGER, ids=[f"{d}/{k}" for d, k in SPEEDUPS_OVER_EAGER])
def test_speedups_over_eager_also_show_torch_compile(device, kind):
    """The records of these kinds hold torch.compile: each plot of speedups over eager has a panel over it."""
    rec = _record(device, kind)
    assert any("torch.compile" in (e.get("contender") or "") for e in rec["entries"])
    figs = figures(device, kind)
    over_eager = {name: fig for name, fig in figs.items() if name.startswith(("speedup", "after"))}
    assert over_eager
    for name, fig in over_eager.items():
        titles = [ax.get_title(loc="left") for ax in fig.axes]
        assert any("torch.compile" in t for t in titles), f"{device}/{kind} {name}: panels {titles}"


def test_the_checks_find_labels_that_overlap_and_a_label_past_the_top():
    """The two checks above can fail: wide labels over narrow neighbouring bars, the axes cut at the bars' tops."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(1.5, 2))
    ax = fig.add_subplot()
    bars = ax.bar([0, 1], [1.0, 1.0], width=0.95)
    plots.label_bars(ax, bars, labels=["0.87x, a label far wider than its bar", "0.88x, a label far wider than its bar"])
    ax.set_ylim(0, 1.0)
    assert overlapping_texts(fig) and labels_outside_their_axes(fig)
