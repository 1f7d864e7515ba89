"""utils.plots: every plot renders headless and says where its numbers come from."""
from datetime import datetime, timezone

import pytest
import torch

from utils import plots
from utils.bench import DATASHEET_H100

DEVICE = {"name": "NVIDIA H100 80GB HBM3", "slug": "nvidia-h100-80gb-hbm3", "cc": "9.0", "sm_count": 132,
          "memory_gb": 79.1, "l2_mb": 50.0}


def record(kind: str, entries: list[dict]) -> dict:
    return {"schema": 1, "kind": kind, "device": DEVICE, "torch": "2.11.0+cu128", "cuda": "12.8",
            "git_commit": "abc1234", "date": "2025-06-01T12:00:00+00:00", "notes": "", "entries": entries}


def row(problem, contender, tf32, ms) -> dict:
    return {"problem": problem, "contender": contender, "tf32": tf32, "median_ms": ms}


BASELINES = record("baselines", [row(94, "eager", False, 10.0), row(94, "torch.compile", False, 5.0),
                                 row(94, "torch.compile", True, 2.0), row(75, "eager", False, 8.0),
                                 row(75, "torch.compile", False, 8.0)])
PROFILE = record("eager_profile", [{"problem": 94, "op": "aten::addmm", "cuda_ms": 9.0, "pct": 80.0},
                                   {"problem": 94, "op": "aten::native_group_norm", "cuda_ms": 1.0, "pct": 15.0},
                                   {"problem": 75, "op": "aten::addmm", "cuda_ms": 9.0, "pct": 95.0}])
LADDER = [{"contender": "gemm_01_naive", "median_ms": 40.0, "tflops": 2.0},
          {"contender": "gemm_02_coalesced", "median_ms": 10.0, "tflops": 8.0},
          {"contender": "cuBLAS", "median_ms": 2.0, "tflops": 40.0}]
CEILINGS = record("ceilings", [{"copy_GBps": 3000.0, "fp32_tflops": 50.0, "tf32_tflops": 400.0}])
POINTS = [{"label": "94 eager", "flops": 1.4e11, "bytes": 3e8, "ms": 12.0},
          {"label": "elementwise", "flops": 1e7, "bytes": 6.4e7, "ms": 0.03}]


def title(fig) -> str:
    return fig._suptitle.get_text()


@pytest.fixture
def no_gpu_here(monkeypatch):
    from utils import env

    monkeypatch.setattr(env, "device_name", lambda: None)


@pytest.mark.parametrize("make", [
    lambda save: plots.speedup_bars(BASELINES, save=save),
    lambda save: plots.op_breakdown(PROFILE, save=save),
    lambda save: plots.ladder(record("ladder", LADDER), save=save),
    lambda save: plots.roofline(POINTS, DATASHEET_H100, recorded=BASELINES, save=save),
], ids=["speedup_bars", "op_breakdown", "ladder", "roofline"])
def test_recorded_data_say_recorded_on(make, tmp_path):
    png = tmp_path / "sub" / "plot.png"
    fig = make(png)
    assert "recorded on NVIDIA H100 80GB HBM3, 2025-06-01 · torch 2.11.0+cu128" in title(fig)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("make", [
    lambda: plots.speedup_bars(BASELINES["entries"]),
    lambda: plots.op_breakdown(PROFILE["entries"]),
    lambda: plots.ladder(LADDER),
    lambda: plots.roofline(POINTS, CEILINGS),
], ids=["speedup_bars", "op_breakdown", "ladder", "roofline"])
def test_live_data_are_titled_with_this_machine(make, no_gpu_here, tmp_path):
    fig = make()
    today = datetime.now(timezone.utc).date().isoformat()
    assert f"cpu (no GPU) · torch {torch.__version__} · {today}" in title(fig)
    assert "recorded on" not in title(fig)
    fig.savefig(tmp_path / "p.png")


def test_speedup_bars_heights():
    fig = plots.speedup_bars(BASELINES)
    heights = sorted(round(p.get_height(), 3) for p in fig.axes[0].patches)
    assert heights == [1.0, 1.0, 1.0, 2.0, 5.0]  # eager x2, compile on 75, compile on 94, TF32 compile on 94
    assert any(line.get_ydata()[0] == 1.0 for line in fig.axes[0].lines)  # the 1x line


def test_speedup_bars_add_a_panel_over_torch_compile():
    fig = plots.speedup_bars(BASELINES)
    above, below = fig.axes
    assert "torch.compile" in below.get_title(loc="left") and "eager" in above.get_title(loc="left")
    # eager fp32 over the faster compile mode with TF32 off: 5 / 10 on 94, 8 / 8 on 75; compile's own rows left out
    assert sorted(round(p.get_height(), 3) for p in below.patches) == [0.5, 1.0]
    without = plots.speedup_bars(BASELINES, where=lambda r: r["contender"] == "eager")
    assert len(without.axes) == 1  # nothing to compare with


def test_bar_labels_stay_horizontal_where_they_fit():
    few = plots.ratio_bars([ratio(94, "ours", False, 2.5), ratio(75, "ours", False, 2.0)])
    assert [t.get_rotation() for t in plots.bar_labels(few.axes[0])] == [0.0, 0.0]
    many = plots.speedup_bars([row(pid, "eager" if i == 0 else f"contender {i}", False, 10.0 / (1 + i))
                               for pid in (94, 75) for i in range(8)])
    assert {t.get_rotation() for t in plots.bar_labels(many.axes[0])} == {90.0}


def test_op_breakdown_bars_reach_100_percent():
    fig = plots.op_breakdown(PROFILE)
    per_bar = {}
    for p in fig.axes[0].patches:
        per_bar[p.get_y()] = per_bar.get(p.get_y(), 0) + p.get_width()
    assert all(w == pytest.approx(100.0) for w in per_bar.values())


def test_ladder_has_a_log_axis_so_rung_1_is_visible():
    """Rung 1 runs at about 1% of cuBLAS: on a linear axis its bar is a line at the bottom."""
    rows = [{"contender": "gemm_01_naive", "median_ms": 286.0, "tflops": 0.48}, *LADDER[1:]]
    ax = plots.ladder(rows).axes[0]
    assert ax.get_yscale() == "log"
    heights = [p.get_height() for p in ax.patches]
    assert heights == [0.48, 8.0, 40.0]
    low, high = ax.get_ylim()
    assert low < 0.48 and high > 40.0  # every bar, and the labels above the tallest, inside the axes


def test_ladder_needs_its_reference():
    with pytest.raises(ValueError, match="no 'cuBLAS' row"):
        plots.ladder(LADDER[:2])


def test_roofline_uses_the_ceilings_source():
    fig = plots.roofline(POINTS, CEILINGS, recorded=CEILINGS)
    legend = fig.axes[0].get_legend().get_title().get_text()
    assert legend == "ceilings measured on NVIDIA H100 80GB HBM3 2025-06-01"


def test_warp_access_draws_one_panel_per_pattern(tmp_path):
    panels = [{"title": "one column", "row_labels": [f"w[{n}]" for n in range(4)], "cols": 16,
               "used": {(n, 0) for n in range(4)}, "fetched": {(n, k) for n in range(4) for k in range(8)}},
              {"title": "one row", "row_labels": ["x[0]"], "cols": 16,
               "used": {(0, k) for k in range(8)}, "fetched": {(0, k) for k in range(8)}}]
    png = tmp_path / "access.png"
    fig = plots.warp_access(panels, save=png)
    drawn = [ax for ax in fig.axes if ax.get_title(loc="left")]
    assert [ax.get_title(loc="left") for ax in drawn] == ["one column", "one row"]
    image = drawn[0].get_images()[0].get_array()
    assert image[0, 0] == 2 and image[0, 1] == 1 and image[0, 8] == 0  # used, fetched, untouched
    assert "not a measurement" in title(fig)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_figures_display_as_png_in_any_ipython_kernel():
    """Headless runs (papermill, MPLBACKEND=Agg) have no inline backend: utils.plots registers the
    PNG formatter itself, or executed notebooks would hold "<Figure size ...>" text, not plots."""
    import importlib

    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        importlib.reload(plots)  # imported inside IPython, as in a notebook
        bundle, _ = shell.display_formatter.format(plots.ladder([{"contender": "a", "tflops": 1.0, "median_ms": 2.0},
                                                                 {"contender": "cuBLAS", "tflops": 2.0, "median_ms": 1.0}]))
        assert bundle["image/png"][:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        InteractiveShell.clear_instance()


def ratio(problem, contender, tf32, vs_compile, vs_eager=None) -> dict:
    return {"problem": problem, "contender": contender, "tf32": tf32, "vs_compile": vs_compile,
            "vs_eager": vs_compile * 1.1 if vs_eager is None else vs_eager}


RATIOS = [ratio(94, "ours", False, 2.7), ratio(94, "ours", True, 1.1), ratio(94, "ours, frozen", False, 3.0),
          ratio(37, "ours", False, 2.6), ratio(37, "ours", True, 1.5), ratio(37, "ours, frozen", False, 2.9)]


def label_overlaps(fig) -> int:
    """How many pairs of the first axes' bar labels overlap, once drawn."""
    import itertools

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    boxes = [t.get_window_extent(renderer) for t in fig.axes[0].texts if t.get_text()]
    assert boxes, "no bar labels drawn"
    return sum(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))


def test_ratio_bars_draw_each_series_with_its_targets(tmp_path):
    png = tmp_path / "ratios.png"
    fig = plots.ratio_bars(RATIOS, recorded=BASELINES, save=png,
                           targets={"ours": 2.3, "ours · TF32": (1.3, 1.5), "ours, frozen": {94: 2.74, 37: 2.61}})
    ax = fig.axes[0]
    assert sorted(round(p.get_height(), 3) for p in ax.patches) == [1.1, 1.5, 2.6, 2.7, 2.9, 3.0]
    assert "recorded on NVIDIA H100 80GB HBM3" in title(fig) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    levels = sorted(round(float(seg[0][1]), 2) for c in ax.collections for seg in c.get_segments())
    assert levels == [1.3, 1.3, 1.5, 1.5, 2.3, 2.3, 2.61, 2.74]  # per bar: targets, moonshots, per-problem targets
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "target, ours: 2.3x" in legend and "moonshot, ours · TF32: 1.5x" in legend and "target, ours, frozen" in legend
    assert len(legend) == len(set(legend))  # one entry per label, however many bars carry it
    assert any(line.get_ydata()[0] == 1.0 for line in ax.lines)  # the 1x line


def test_ratio_bars_of_two_ratios_colour_by_what_they_are_over():
    fig = plots.ratio_bars(RATIOS, values=("vs_eager", "vs_compile"), label=lambda r: "TF32" if r["tf32"] else "strict")
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend[:4] == ["strict: over eager", "strict: over torch.compile", "TF32: over eager", "TF32: over torch.compile"]
    colour = [bars.patches[0].get_facecolor() for bars in fig.axes[0].containers]
    assert colour[0] == colour[2] != colour[1] == colour[3]  # eager's grey, torch.compile's blue, in both tiers


@pytest.mark.parametrize("make", [
    lambda: plots.speedup_bars([row(pid, "eager" if i == 0 else f"contender {i}", tf32, 10.0 / (1 + i))
                                for pid in (94, 75, 37, 62) for i in range(6) for tf32 in (False, True)]),
    lambda: plots.ratio_bars([ratio(pid, c, tf32, 2.5) for pid in (94, 75, 37, 62) for c in ("ours", "ours, frozen")
                              for tf32 in (False, True)], values=("vs_eager", "vs_compile")),
], ids=["speedup_bars, 12 bars a group", "ratio_bars, 8 bars a group"])
def test_bar_labels_never_overlap(make):
    assert label_overlaps(make()) == 0


def test_a_figure_is_widened_until_its_labels_fit():
    """Long legend entries leave the axes too narrow for 20 labels a group: finish() widens the figure."""
    rows = [row(pid, "eager" if i == 0 else f"a contender with a rather long name, number {i}", tf32, 10.0 / (1 + i))
            for pid in (94, 75, 37, 62) for i in range(10) for tf32 in (False, True)]
    fig = plots.speedup_bars(rows)
    assert fig.get_size_inches()[0] > plots._bars_figsize([94, 75, 37, 62], [None] * 20)[0]
    assert label_overlaps(fig) == 0


def test_sweep_draws_a_line_per_contender_and_the_floor():
    rows = [{"contender": c, "M": m, "median_ms": t * m} for c, t in (("ours", 1.0), ("cuBLAS", 0.8)) for m in (1, 16, 256)]
    fig = plots.sweep(rows, x="M", floor={1: 0.5, 16: 8.0, 256: 100.0}, what="GEMM against M")
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["ours", "cuBLAS", "floor"]
    assert list(ax.get_lines()[1].get_ydata()) == [0.8, 0.8 * 16, 0.8 * 256]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "GEMM against M" in fig._suptitle.get_text()


def test_sweep_takes_a_dataframe_and_needs_rows():
    import pandas as pd

    fig = plots.sweep(pd.DataFrame({"contender": ["a", "a"], "N": [128, 256], "tflops": [1.0, 2.0]}), x="N", y="tflops",
                      logy=False)
    assert [line.get_label() for line in fig.axes[0].get_lines()] == ["a"]
    with pytest.raises(ValueError, match="no rows"):
        plots.sweep([], x="M")
