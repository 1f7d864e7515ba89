"""utils.memory_chapter, the helpers of notebooks 05-07, without a GPU: GB/s and % of copy from timed
rows, the table, the findings text and its verdicts, the bar plot, and the no-GPU paths of the
chapter object. Timing itself is utils.bench's (tests/test_bench.py)."""

from matplotlib.figure import Figure

from utils import memory_chapter as mc
from utils.run import SKIP_MARKER

RECORD = {"device": {"name": "NVIDIA H100"}, "date": "2024-05-01T12:00:00+00:00", "git_commit": "abc1234",
          "torch": "2.3.0", "notes": "full scale"}


def entries(ours_ms=0.12, eager_ms=0.5):
    """Problem 94's rows as measure() makes them: a copy of 1e8 bytes in 0.1 ms, eager, and ours."""
    spec = [(94, "copy", "copy", None, 10**8, (1000, 25000), None),
            (94, "eager chain", "eager", None, 10**8, (1000, 25000), None),
            (94, "fused", "ours", None, 10**8, (1000, 25000), ["eager chain"])]
    times = {"94: copy": 0.1, "94: eager chain": eager_ms, "94: fused": ours_ms}
    rows = [{"median_ms": times[f"{p}: {name}"], "p20_ms": 0.0, "p80_ms": 0.0} for p, name, *_ in spec]
    return spec, rows


def measured(monkeypatch, **times):
    spec, rows = entries(**times)
    monkeypatch.setattr(mc.bench, "compare", lambda fns, baseline, reps: rows)
    return mc.measure(spec, reps=3)


def test_measure_adds_gbps_and_percent_of_copy(monkeypatch):
    copy, eager, ours = measured(monkeypatch)
    assert copy["GBps"] == 1000 and copy["pct_of_copy"] == 100
    assert abs(ours["pct_of_copy"] - 100 / 1.2) < 1e-9 and ours["replaces"] == ["eager chain"]
    assert "replaces" not in eager and ours["shape"] == [1000, 25000]


def test_table_has_a_line_per_row_and_the_speedups(monkeypatch):
    text = mc.table(measured(monkeypatch))
    lines = text.splitlines()
    assert len(lines) == 4 and lines[0].split()[:2] == ["problem", "contender"]
    assert lines[3].rstrip().endswith("4.17x eager chain")


def test_findings_meet_the_target_and_compare_with_the_prediction(monkeypatch):
    rows = measured(monkeypatch)
    predictions = {"fused": [("pct", 80, 90, "80-90% of a copy"), ("eager chain", 3, 5, "3-5x the eager chain"),
                             ("pct", 95, 100, "95% of a copy")]}
    text = mc.findings(rows, "Measured here", predictions, "It should reach 80-90% of\n a copy, 3-5x the eager chain.")
    assert text.startswith("Measured here.")
    assert "**83% of the same-size copy** (1000 GB/s in this run): it meets the 80% target" in text
    assert "**4.17x** faster than eager chain" in text
    assert 'predicted "80-90% of a copy": measured 83% of the same-size copy, within it.' in text
    assert 'measured 4.17x against eager chain, within it.' in text
    assert '(The header no longer says "95% of a copy": not compared.)' in text
    assert text.endswith("Every fused kernel here meets the 80% target and beats what it replaces in this run.")


def test_findings_name_every_miss(monkeypatch):
    text = mc.findings(measured(monkeypatch, ours_ms=0.6), "Recorded", {}, None)
    assert "it **misses** the 80% target" in text and "(**the target says faster: missed**)" in text
    assert text.endswith("**Where a kernel misses:** `fused` (problem 94, 17%); `fused` against eager chain.")


def test_quoted_and_verdict():
    assert mc.quoted("about 2x\n   faster", "2x faster") == "2x faster"
    assert mc.quoted("about 3x", "2x faster") is None and mc.quoted(None, "2x") is None
    assert [mc.verdict(v, 2, 3) for v in (2.5, 4, 1)] == ["within it", "better than predicted", "worse than predicted"]


def test_bandwidth_plot_returns_a_figure_and_saves_it(monkeypatch, tmp_path):
    rows = measured(monkeypatch)
    fig = mc.bandwidth_plot(rows, "Test", recorded_from=RECORD, save=tmp_path / "sub" / "plot.png")
    assert isinstance(fig, Figure) and (tmp_path / "sub" / "plot.png").is_file()
    assert len(fig.axes[0].patches) == 2  # the copy row is the 100% line, not a bar
    assert "recorded on NVIDIA H100" in fig._suptitle.get_text()


def test_stamp():
    assert mc.stamp(RECORD) == "NVIDIA H100, 2024-05-01, commit `abc1234`"


def test_the_chapter_without_a_gpu_or_a_compiler(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(mc.env, "device_slug", lambda: "cpu")
    chapter = mc.MemoryChapter(tmp_path, on_gpu=False, can_compile=False, scale="small", reps=3)
    assert chapter.plot_path("x") is None and chapter.recorded("x") is None
    assert chapter.load("activations") is None
    chapter.show_measurement("x", None, "Title", {}, None)
    out = capsys.readouterr().out
    assert f"{SKIP_MARKER} compiling activations (no nvcc or a CPU-only torch)" in out
    assert f"{SKIP_MARKER} the x plot and findings (no GPU and no recorded x run)" in out


def test_the_chapter_on_a_gpu_saves_its_plot_beside_its_records(tmp_path, monkeypatch):
    monkeypatch.setattr(mc.env, "device_slug", lambda: "h100")
    chapter = mc.MemoryChapter(tmp_path, on_gpu=True, can_compile=True, scale="full", reps=3)
    assert chapter.plot_path("fused_activations") == tmp_path / "h100" / "fused_activations.png"


def test_gn_inputs_are_never_the_defaults():
    import torch

    x, gamma, beta = mc.gn_inputs(5, 16, offset=3.0)(torch.Generator().manual_seed(0))
    assert x.shape == (5, 16) and abs(x.mean().item() - 3.0) < 2.0
    assert gamma.abs().min() >= 0.5 and (gamma < 0).any() and (gamma > 0).any() and beta.abs().max() > 0
    *_, bias = mc.gn_inputs(5, 16, with_bias=True)(torch.Generator().manual_seed(0))
    assert bias.shape == (1, 16, 1, 1)
