"""utils.chapters.gemm_ladder, the helpers of notebooks 02 and 03, without a GPU: the numbers in a rung's
PREDICTION and the table that sets them against a measurement, the address arithmetic (sectors,
lines, shared-memory passes at the load width), the tile constants, the diagrams, the ladder's
checks and tuning table, the no-GPU paths of the measuring helpers and the exercise cells.
Measuring itself is covered by tests/test_gemm_ladder.py; the exercise verdicts on the notebooks'
starting points by tests/test_exercise_checkers.py and tests/test_gemm_exercises.py."""
from types import SimpleNamespace

import pandas as pd
import pytest
from matplotlib.figure import Figure

from utils import ladder
from utils.chapters import gemm_addressing as addressing
from utils.chapters import gemm_diagrams as diagrams
from utils.chapters import gemm_exercises as exercises
from utils.chapters import gemm_ladder as lc
from utils.run import SKIP_MARKER

RECORD = {"device": {"name": "NVIDIA H100"}, "date": "2024-05-01T12:00:00+00:00", "git_commit": "abc1234",
          "torch": "2.5.0"}


@pytest.fixture
def prediction(monkeypatch):
    """Give every kernel the header paragraphs set here, {first words: text}, found by label as the real
    header_section finds them (the paragraph that starts with the label)."""
    sections = {}
    monkeypatch.setattr(lc, "header_section", lambda name, label, kernels_dir=None:
                        next((text for start, text in sections.items() if start.startswith(label)), None))
    return sections


class FakeSession:
    """What LadderChapter reads from utils.chapters.session.Session, without a GPU; records from a dict."""

    def __init__(self, records=None, mode="reference-only", scale="small"):
        self.records, self.mode, self.scale, self.reps, self.results_dir = records or {}, mode, scale, 3, "nowhere"

    on_gpu = property(lambda self: self.mode == "gpu")
    can_compile = property(lambda self: self.mode != "reference-only")

    def recorded(self, kind):
        return self.records.get(kind)


def rows(**ms):
    """Ladder rows with these median times (and pct_of_cublas, as ladder.measure writes it)."""
    cublas = ms.get(ladder.REFERENCE, 1.0)
    return [{"contender": name, "median_ms": t, "tflops": 1.0, "pct_of_cublas": 100 * cublas / t} for name, t in ms.items()]


# --------------------------------------------------------------------------- kernel text

def test_global_kernels_finds_every_kernel_launch_bounds_included():
    source = ("__global__ void a(float* x) {}\n__device__ void helper() {}\n"
              "__global__ void __launch_bounds__(256, 2) b_kernel(int n) {}\n")
    assert lc.global_kernels(source) == ["a", "b_kernel"]


@pytest.mark.parametrize("text, band", [
    ("About 55-65% of cuBLAS.", (55.0, 65.0)),
    ("Slow: of cuBLAS SGEMM (5-20%), since every\n   FMA loads.", (5.0, 20.0)),
    ("Twice as fast as before.", None),
])
def test_predicted_pct_reads_a_range_of_cublas(prediction, text, band):
    prediction["PREDICTION"] = text
    assert lc.predicted_pct("any") == band


@pytest.mark.parametrize("text, factor", [
    ("about 2 to 2.5x rung 3", (2.0, 2.5, 3)),
    ("about 10x rung 1", (10.0, 10.0, 1)),
    ("5-15% over rung 5", (1.05, 1.15, 5)),
    ("55-65% of cuBLAS", None),
])
def test_predicted_speedup_reads_a_factor_over_an_earlier_rung(prediction, text, factor):
    prediction["PREDICTION"] = text
    assert lc.predicted_speedup("any") == (pytest.approx(factor) if factor else None)


def test_no_prediction_reads_as_none(prediction):
    assert lc.predicted_pct("any") is None and lc.predicted_speedup("any") is None


@pytest.mark.parametrize("rung", ladder.all_rungs())
def test_every_rung_prediction_parses_without_error(rung):
    band, factor = lc.predicted_pct(rung), lc.predicted_speedup(rung)
    assert band is None or band[0] <= band[1]
    assert factor is None or factor[2] < ladder.rung_number(rung)


def test_rung_name_is_the_inverse_of_rung_number():
    for rung in ladder.rungs():
        assert lc.rung_name(lc.rung_number(rung)) == rung
    assert lc.rung_name(99) is None


def test_quote_shows_the_sections_and_names_a_missing_one(monkeypatch):
    shown = []
    monkeypatch.setattr(lc, "display", lambda obj: shown.append(obj.data))
    lc.quote("gemm_01_naive", "PREDICTION", "No such paragraph")
    assert "From the header of `kernels/gemm_01_naive.cu`" in shown[0]
    assert lc.header_section("gemm_01_naive", "PREDICTION") in shown[0]
    assert "no paragraph starting “No such paragraph”" in shown[0]


def test_show_excerpt_shows_the_lines_between_two_markers(monkeypatch):
    shown = []
    monkeypatch.setattr(lc, "display", lambda obj: shown.append(obj.data))
    text = lc.show_excerpt("common/gemm_pipelined.cuh", "gemm_pipelined_block", "for (int slice = 0", "const Stage& s =")
    lines = text.splitlines()
    assert "for (int slice = 0" in lines[0] and "const Stage& s =" in lines[-1]
    assert "cp_async_wait<STAGES - 2>()" in text and "__syncthreads()" in text and "issue(slice + STAGES - 1)" in text
    assert "kernels/common/gemm_pipelined.cuh" in shown[0] and "```cuda" in shown[0]
    with pytest.raises(ValueError, match="no line"):
        lc.show_excerpt("common/gemm_pipelined.cuh", "gemm_pipelined_block", "no such text", "issue(")


def test_provenance_names_device_and_date_but_no_commit():
    assert lc.provenance(RECORD) == "Recorded on NVIDIA H100 (2024-05-01)"


# --------------------------------------------------------------------------- predicted against measured

def test_prediction_rows_compare_ranges_and_factors(prediction):
    prediction["PREDICTION"] = "55-65% of cuBLAS, about 2x rung 3"
    earlier = lc.rung_name(3)
    (row,) = lc.prediction_rows(["gemm_04_blocktile_1d", "not measured"],
                                rows(**{ladder.REFERENCE: 1.0, "gemm_04_blocktile_1d": 2.0, earlier: 3.0}))
    assert row["pct"] == pytest.approx(50.0) and row["pct_verdict"] == "below"
    assert row["factor"] == pytest.approx(1.5) and row["factor_verdict"] == "below"  # 0.75 of "about 2x"
    assert not row["tuned"]


@pytest.mark.parametrize("value, lo, hi, verdict", [
    (1.9, 2, 2, "about right"), (2.4, 2, 2, "about right"), (2.5, 2, 2, "above"), (1.5, 2, 2, "below"),
    (60, 55, 65, "inside"), (65.2, 55, 65, "above"), (50, 55, 65, "below"),
])
def test_verdicts(value, lo, hi, verdict):
    assert lc._verdict(value, lo, hi) == verdict


def test_the_table_lists_every_rung_and_explains_each_miss(prediction):
    prediction["PREDICTION"] = "about 10x rung 1, 5-20% of cuBLAS"
    measured = rows(**{ladder.REFERENCE: 1.0, "gemm_01_naive": 100.0, "gemm_02_coalesced": 8.0})
    table = lc.prediction_table(["gemm_01_naive", "gemm_02_coalesced"], measured).set_index("rung")
    assert list(table.index) == ["gemm_01_naive", "gemm_02_coalesced"]
    assert list(table.loc["gemm_02_coalesced"])[:4] == ["5–20%", "12.5%", "about 10x rung 1", "12.50x"]
    assert table.loc["gemm_01_naive", "verdict"] .startswith("below")
    # rung 1 at 1%: below its (here shared) 5-20%; no explanation known: the list under the table says so
    misses = lc.prediction_misses(["gemm_01_naive", "gemm_02_coalesced"], measured)
    assert "`gemm_01_naive`, % of cuBLAS below the prediction: not explained" in misses
    assert "`gemm_02_coalesced`, factor over rung 1 above the prediction: the prediction discounted" in misses


def test_a_tuned_rung_says_so(prediction):
    prediction["PREDICTION"] = "75-85% of cuBLAS"
    prediction["TUNED AFTERWARDS"] = "retuned"
    measured = rows(**{ladder.REFERENCE: 1.0, "r": 1.1})
    assert lc.prediction_table(["r"], measured)["verdict"].tolist() == ["above (tuned after)"]
    assert "the one tuned afterwards" in lc.prediction_misses(["r"], measured)


def test_a_table_without_misses_has_no_miss_list(prediction):
    prediction["PREDICTION"] = "no numbers at all"
    measured = rows(**{ladder.REFERENCE: 1.0, "r": 2.0})
    assert lc.prediction_table(["r"], measured)["verdict"].tolist() == ["nothing to compare"]
    assert lc.prediction_misses(["r"], measured) == ""


# --------------------------------------------------------------------------- the address arithmetic

def test_warp_step_counts_sectors_and_lines(capsys):
    K = 8192
    rung1 = addressing.warp_step({"x": [4 * 3 * K] * 32, "w": [4 * (64 + lane) * K for lane in range(32)]}, fmas=32)
    assert (rung1["sectors"], rung1["lines"], rung1["moved"], rung1["used"], rung1["fmas"]) == (33, 33, 1056, 132, 32)
    rung2 = addressing.warp_step({f"row {j}": [4 * (j * K + lane) for lane in range(32)] for j in range(5)}, fmas=128)
    assert (rung2["sectors"], rung2["lines"], rung2["moved"], rung2["used"]) == (20, 5, 640, 640)
    assert "0.40 FLOP per byte moved; 0.039 lines per FMA" in capsys.readouterr().out


def test_warp_panel_marks_whole_sectors_as_fetched():
    panel = addressing.warp_panel("t", [("x", 0), ("w", 9)], cols=16)
    assert panel["row_labels"] == ["x", "w"] and panel["used"] == {(0, 0), (1, 9)}
    assert panel["fetched"] == {(0, i) for i in range(8)} | {(1, i) for i in range(8, 16)}


def test_l1_model_compares_the_rate_with_the_line_cap():
    props = SimpleNamespace(major=9, minor=0, multi_processor_count=100, clock_rate=1_000_000)  # 1 GHz
    # 2 FMAs per SM per cycle: 0.4 TFLOP/s over 100 SMs at 1 GHz
    text = addressing.l1_model("r", {"fmas": 32, "lines": 16}, {"tflops": 0.4}, props)
    assert "**2.00 FMAs per SM per cycle**" in text and "caps it at **2.00**" in text and "accounts for the time" in text
    assert "does not explain" in addressing.l1_model("r", {"fmas": 32, "lines": 4}, {"tflops": 0.4}, props)
    assert "does not report the GPU's clock" in addressing.l1_model("r", {}, {}, SimpleNamespace(clock_rate=0))
    assert addressing.fma_lanes(SimpleNamespace(major=8, minor=0)) == 64 and addressing.fma_lanes(props) == 128


def test_load_passes_serve_wide_loads_a_quarter_or_half_warp_at_a_time():
    same_bank = [32 * lane for lane in range(32)]
    assert addressing.load_passes(same_bank, 1) == [32]  # 4-byte loads: the whole warp at once
    assert addressing.load_passes(same_bank, 2) == [16, 16]  # LDS.64: two half-warps of 16 lanes
    assert addressing.load_passes(same_bank, 4) == [8, 8, 8, 8]  # LDS.128: four quarter-warps of 8 lanes
    assert addressing.load_passes([7] * 32, 4) == [1, 1, 1, 1]  # a broadcast
    # rung 6's reads of ws (float4 32 bytes apart) against rung 7's (consecutive float4)
    assert addressing.load_passes([8 * (t % 16) for t in range(32)], 4) == [2, 2, 2, 2]
    assert addressing.load_passes([4 * (lane % 8) for lane in range(32)], 4) == [1, 1, 1, 1]


def test_the_padding_model_is_the_load_width_the_sass_shows():
    """nvcc's loads of ws[tx][kk..] in rows of 32-40 floats (the SASS on sm_90): LDS.128 for rows of 4k
    floats, LDS.64 for 2k, LDS otherwise. Measured on an H100 (rung 3 with each row length): 36 as fast
    as 33, 40 slower, 32 several times slower: what one pass per kk for 33-39 and more for 32 and 40 say."""
    assert [addressing.ws_load_floats(row) for row in range(32, 41)] == [4, 1, 2, 1, 4, 1, 2, 1, 4]
    assert [addressing.ws_passes(row) for row in range(32, 41)] == [8, 1, 1, 1, 1, 1, 1, 1, 2]
    assert addressing.ws_passes(36, load_floats=1) == 4  # what a 4-byte model would have said


def test_bank_table_gives_width_passes_and_fewest():
    table = addressing.bank_table({"a": ([32 * t for t in range(32)], 4), "b": (list(range(32)), 1)})
    assert list(table.columns) == ["bytes/lane", "passes", "conflict-free"]
    assert list(table.loc["a"]) == [16, 32, 4] and list(table.loc["b"]) == [4, 1, 1]


def test_tile_table_gives_each_rungs_facts():
    table = addressing.tile_table(["gemm_03_smem_tiled", "gemm_07_pipelined"])
    assert list(table.index) == ["gemm_03_smem_tiled", "gemm_07_pipelined"]
    assert table.loc["gemm_03_smem_tiled", "tile"] == "32 x 32" and table.loc["gemm_03_smem_tiled", "threads"] == 1024
    assert table.loc["gemm_07_pipelined", "stages"] == ladder.defaults()[1]


def test_tile_facts_read_each_rung_from_its_constants():
    assert addressing.tile_facts("gemm_03_smem_tiled") == {"tile": "32 x 32", "BK": 32, "threads": 1024, "per thread": 1,
                                                   "FLOP/B global": 8.0, "floats/FMA shared": 2.0, "stages": 1}
    r5 = addressing.tile_facts("gemm_05_blocktile_2d")
    assert (r5["tile"], r5["BK"], r5["per thread"], r5["FLOP/B global"], r5["floats/FMA shared"]) == (
        "128 x 128", 8, 64, 32.0, 0.25)
    assert addressing.tile_facts("gemm_07_pipelined")["stages"] == ladder.defaults()[1]
    assert addressing.kernel_constants("gemm_04_blocktile_1d")["GEMM_SMEM_PAD"] == 4


# --------------------------------------------------------------------------- diagrams

@pytest.mark.parametrize("draw, axes", [
    (diagrams.draw_mapping, 6), (diagrams.draw_block_tile, 3), (diagrams.draw_kmajor_copy, 2), (diagrams.draw_warp_tile, 2),
    (diagrams.draw_pipeline, 2),
])
def test_each_diagram_is_a_titled_figure(draw, axes):
    fig = draw()
    assert isinstance(fig, Figure) and len(fig.axes) == axes
    assert "a diagram, not a measurement" in fig._suptitle.get_text()


def test_the_bank_diagram_titles_each_case_with_its_passes():
    fig = diagrams.draw_bank_phases({f"rows of {r}": ([tx * r for tx in range(32)], addressing.ws_load_floats(r)) for r in (32, 33, 40)})
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert titles == ["rows of 32: LDS.128, lanes 0-7: 8 passes", "rows of 33: LDS, lanes 0-31: 1 pass",
                      "rows of 40: LDS.128, lanes 0-7: 2 passes"]


# --------------------------------------------------------------------------- the ladder

LADDER = {**RECORD, "entries": rows(**{"gemm_01_naive": 100.0, "gemm_02_coalesced": 10.0, ladder.REFERENCE: 1.0})}


def test_ladder_checks_say_whether_each_rung_is_faster_and_the_target_met():
    text = lc.ladder_checks(LADDER["entries"], "Measured on NVIDIA H100")
    assert "**Every rung is faster than the one before it**: 02/01 = 10.00x" in text
    assert "`gemm_02_coalesced`, **10.0% of cuBLAS**" in text and "**not met**" in text and "not on an H100" not in text
    slower = lc.ladder_checks(rows(**{"gemm_01_naive": 1.0, "gemm_02_coalesced": 1.2, ladder.REFERENCE: 1.0}), "On X")
    assert "Not every rung" in slower and "`gemm_02_coalesced` contradict" in slower
    assert "**met**" in slower and "not on an H100" in slower


def test_tuning_table_marks_the_best_and_the_committed_pair():
    entries = [{"contender": "a", "median_ms": 2.0, "bk": 16, "stages": 2},
               {"contender": "b", "median_ms": 1.25, "bk": 32, "stages": 2},
               {"contender": "c", "median_ms": 1.6, "bk": 32, "stages": 3},
               {"contender": ladder.REFERENCE, "median_ms": 1.0}]
    table = lc.tuning_table({**RECORD, "entries": entries}, (32, 2))
    assert list(table.index) == [16, 32] and list(table.columns) == [2, 3]
    assert list(table.loc[32]) == ["80.0% (committed, fastest)", "62.5%"] and list(table.loc[16]) == ["50.0%", "–"]
    text = lc.tuning_verdict({**RECORD, "entries": entries}, (32, 2))
    assert "the committed defaults are that pair" in text and "commit" not in text.replace("committed", "")
    assert "are not: re-tune" in lc.tuning_verdict({**RECORD, "entries": entries}, (16, 2))
    assert lc.tuning_table({**RECORD, "entries": entries}, (16, 2)).loc[16, 2] == "50.0% (committed)"
    # Without a record it says where it looked, not that nothing was ever recorded.
    missing = lc.tuning_missing("nvidia-h100-80gb-hbm3")
    assert "No rung-7 sweep is recorded for nvidia-h100-80gb-hbm3" in missing and "yet" not in missing


def test_the_recorded_tuning_sweep_is_found_where_the_chapter_looks():
    """The rung-7 sweep committed under results/ is what notebook 03's cell reads, with or without a GPU of
    that kind: never "no sweep" while one is recorded."""
    from utils import REPO, results

    for device in results.recorded_devices(REPO / "results"):
        record = results.load("ladder_tuning", device, REPO / "results")
        if record is not None:
            assert lc.provenance(record).startswith(f"Recorded on {record['device']['name']}")
            assert lc.tuning_table(record, ladder.defaults()).map(lambda c: "fastest)" in c).sum().sum() == 1
            assert (lc.tuning_frame(record).max().max() > 0)


# --------------------------------------------------------------------------- the chapter without a GPU

def test_the_chapter_without_a_gpu_or_a_record_says_so(capsys, monkeypatch):
    shown = []
    monkeypatch.setattr(lc, "display", shown.append)
    chapter = lc.LadderChapter(FakeSession())
    assert chapter.shape == lc.SHAPES["small"] and chapter.recorded_ladder() is None and chapter.rows() == (None, None)
    chapter.recorded_rows(["gemm_01_naive"])
    chapter.per_cycle("gemm_01_naive", {})
    chapter.two_rungs("gemm_01_naive", "gemm_02_coalesced", {}, {})
    chapter.prediction_table(["gemm_01_naive"])
    out = capsys.readouterr().out
    for line in (f"{SKIP_MARKER} measuring gemm_01_naive (no GPU, and no recorded ladder has them)",
                 f"{SKIP_MARKER} the per-cycle comparison for gemm_01_naive (no GPU)",
                 f"{SKIP_MARKER} the gemm_01_naive / gemm_02_coalesced comparison",
                 f"{SKIP_MARKER} the predicted-against-measured table"):
        assert line in out
    assert chapter.measured == {} and not shown
    assert "No recorded ladder yet" in chapter.cublas_time()
    assert lc.ladder_run(chapter) == (None, None)


def test_the_chapter_without_a_gpu_reads_the_record(capsys, monkeypatch):
    shown = []
    monkeypatch.setattr(lc, "display", shown.append)
    chapter = lc.LadderChapter(FakeSession({"ladder": LADDER}))
    assert chapter.cublas_time() == ("Recorded on NVIDIA H100 (2024-05-01): cuBLAS does these "
                                     "137 GFLOP in **1.000 ms** (1.0 TFLOP/s, fp32, TF32 off).")
    chapter.recorded_rows(["gemm_02_coalesced"])
    out = capsys.readouterr().out
    assert "Recorded on NVIDIA H100 (2024-05-01)" in out and "abc1234" not in out
    assert list(shown[-1].index) == ["gemm_02_coalesced", ladder.REFERENCE]
    shown.clear()
    chapter.two_rungs("gemm_01_naive", "gemm_02_coalesced", {"sectors": 33, "fmas": 32}, {"sectors": 20, "fmas": 128})
    assert isinstance(shown[0], Figure) and "is **10.0x** faster" in shown[1].data and "6.6x fewer sectors" in shown[1].data
    chapter.prediction_table(["gemm_01_naive", "gemm_02_coalesced"])
    table = next(s for s in shown if isinstance(s, pd.DataFrame) and "verdict" in s.columns)
    assert table["rung"].tolist() == ["gemm_01_naive", "gemm_02_coalesced"]


# --------------------------------------------------------------------------- the exercise cells without a GPU

def test_the_exercise_cells_say_not_yet_before_the_reader_acts(capsys):
    chapter = lc.LadderChapter(FakeSession(mode="compile-only"))
    exercises.tile_exercise(dict.fromkeys(exercises.GIVEN_VARIANTS, []), None, chapter)
    exercises.pipeline_exercise(None, chapter)
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["Not yet"] * 2, out


def test_the_exercise_cells_say_what_they_skip_without_a_gpu(capsys):
    chapter = lc.LadderChapter(FakeSession(mode="reference-only"))
    variants = {**dict.fromkeys(exercises.GIVEN_VARIANTS, []), "mine": ["-DTILE_BK=16"]}
    exercises.tile_exercise(variants, list(variants), chapter)
    _, committed = exercises.pipeline_pairs()
    exercises.pipeline_exercise(committed, chapter)
    assert exercises.check_exercise(chapter, "gemm_seed004", exercises.operands_n515, {}, "PASS") == (None, False)
    exercises.pad_exercise(chapter)
    out = capsys.readouterr().out
    for what in ("compiling exercise 2", "exercise 4's builds and timing",
                 "compiling gemm_seed004", "compiling exercise 3"):
        assert f"{SKIP_MARKER} {what}" in out
    assert "Not yet" not in out and "PASS" not in out


def test_pipeline_pairs_halve_the_slice_and_add_a_stage():
    pairs, committed = exercises.pipeline_pairs()
    bk, st = ladder.defaults()
    assert committed == (bk, st) and pairs == [(bk // 2, st), (bk // 2, st + 1), (bk, st), (bk, st + 1)]
    assert all(ladder.stage_bytes(b) * s <= ladder.SMEM_PER_SM for b, s in pairs)


def test_the_operands_fit_no_tile():
    import torch

    x, w = exercises.operands_odd(torch.Generator().manual_seed(0))
    assert x.shape == (37, 65) and w.shape == (129, 65) and w.min() < 0 < w.max()
    x, w = exercises.operands_n515(torch.Generator().manual_seed(0))
    assert x.shape == (37, 65) and w.shape == (515, 65)


# --------------------------------------------------------------------------- building (build.load_kernels, faked)

@pytest.fixture
def fake_load_kernels(monkeypatch):
    """build.load_kernels recorded, not run: each call's (kernels, keyword arguments); every build fails
    with the exception in `fail`, if any, else is a stand-in module."""
    calls, fail = [], {}

    def load_kernels(kernels, jobs=None, **kw):
        calls.append((dict(kernels), kw))
        return {key: fail.get(key, object()) for key in kernels}

    monkeypatch.setattr(lc.build, "load_kernels", load_kernels)
    return calls, fail


def test_a_tile_variant_that_does_not_compile_says_why(fake_load_kernels, capsys):
    calls, fail = fake_load_kernels
    variants = {**dict.fromkeys(exercises.GIVEN_VARIANTS, []), "mine": ["-DTILE_BK=16"]}
    first = next(iter(variants))
    fail[first] = lc.build.KernelCompileError("gemm_tile_shape", lc.EXERCISES / "gemm_tile_shape.cu", 7, "too big", "")
    exercises.tile_exercise(variants, list(variants), lc.LadderChapter(FakeSession(mode="compile-only")))
    # without a GPU only the first variant is built, and a failure is shown, not raised
    assert calls == [({first: lc.build.Variant("gemm_tile_shape", [], lc.EXERCISES)}, {"on_error": "return"})]
    out = capsys.readouterr().out
    assert f"{first:<16} does not compile: kernels/exercises/gemm_tile_shape.cu:7: error: too big" in out


# --------------------------------------------------------------------------- rows from visible timings

def test_keep_turns_the_cells_timings_into_rows_for_the_tables():
    from utils import bench

    chapter = lc.LadderChapter(FakeSession())
    timings = {"gemm_01_naive": bench.Timing(100.0, 99.0, 101.0, 98.0, 10),
               ladder.REFERENCE: bench.Timing(1.0, 0.9, 1.1, 0.8, 10)}
    frame = chapter.keep(timings, shape=(1024, 8192, 8192))
    assert list(frame.index) == ["gemm_01_naive", ladder.REFERENCE]
    assert frame.loc["gemm_01_naive", "pct_of_cublas"] == 1.0
    assert chapter.measured["gemm_01_naive"]["median_ms"] == 100.0
    assert chapter.rows()[0] is None  # not on a GPU: the tables read the record, never these rows


# --------------------------------------------------------------------------- the sweep over M

CEILINGS = SimpleNamespace(copy_GBps=3000.0, fp32_tflops=50.0, tf32_tflops=400.0, source="measured on X")


def test_the_sweep_floor_is_the_weight_at_small_m_and_the_flops_at_large_m():
    from utils import bench

    N = K = 8192
    floor = lc.sweep_floor([1, 16384], N, K, CEILINGS)
    assert floor[1] == pytest.approx(bench.gemm_cost(1, N, K).bytes / 3000e9 * 1e3)
    assert floor[16384] == pytest.approx(2 * 16384 * N * K / 50e12 * 1e3)
    cross = lc.crossover_m(N, K, CEILINGS)
    assert 2 * cross * N * K / 50e12 == pytest.approx(4 * (cross * K + N * K + cross * N) / 3000e9)


def test_the_regimes_are_read_from_the_measured_times():
    N = K = 8192
    weight_ms, per_row_ms = 0.1, 0.001
    ms = {M: max(weight_ms, per_row_ms * M) for M in [2**i for i in range(15)]}  # flat to M = 100, then linear
    rows = [{"contender": ladder.REFERENCE, "M": M, "N": N, "K": K, "median_ms": t} for M, t in ms.items()]
    text = lc.sweep_regimes(rows, CEILINGS)
    assert "up to M = 64" in text and "From M = 128 on" in text
    assert f"at M = {lc.crossover_m(N, K, CEILINGS):,.0f}" in text
    assert "Too few sizes" in lc.sweep_regimes(rows[:2], CEILINGS)


# --------------------------------------------------------------------------- the profile

PROFILE = {**RECORD, "entries": [
    {"target": "rung 7", "kernel": "gemm_pipelined_plain_kernel", "metric": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
     "value": 12.0, "unit": "%"},
    {"target": "rung 7", "kernel": "gemm_pipelined_plain_kernel", "metric": "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
     "value": 81.0, "unit": "%"},
    {"target": "rung 7", "kernel": "gemm_pipelined_plain_kernel", "metric": "sm__warps_active.avg.pct_of_peak_sustained_active",
     "value": 24.5, "unit": "%"},
    {"target": "rung 7", "kernel": "gemm_pipelined_plain_kernel", "metric": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
     "value": 1024.0, "unit": "conflicts"},
    {"target": "whole model 94", "kernel": "fused", "metric": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
     "value": 70.0, "unit": "%"},
]}


def test_the_profile_table_and_prose_come_from_the_record():
    frame = lc.profile_frame(PROFILE)
    assert set(frame.columns) == {"rung 7", "whole model 94"} and frame.loc["FMA pipe (%)", "rung 7"] == 81.0
    text = lc.profile_prose(PROFILE)
    assert "the FMA pipe binds: it is busy 81% of the time, DRAM at 12% of its peak" in text
    assert "Achieved occupancy 24%" in text or "Achieved occupancy 25%" in text
    assert "1,024 conflicts" in text and "abc1234" not in text
    memory = {**PROFILE, "entries": [{**e, "value": 90.0} if "dram" in e["metric"] else
                                     {**e, "value": 30.0} if "fma" in e["metric"] else e for e in PROFILE["entries"]]}
    assert "DRAM binds: 90% of its peak" in lc.profile_prose(memory)
    assert "no metrics of rung 9" in lc.profile_prose(PROFILE, "rung 9")


def test_a_contender_with_no_flat_stretch_is_said_so_and_rung_7_gets_its_line():
    N = K = 8192
    ms = [2**i for i in range(15)]
    cublas = {M: 0.114 if M == 1 else max(0.16, 0.0026 * M) for M in ms}  # rises at once, as fp32 cuBLAS did
    rung7 = {M: max(0.82, 0.003 * M) for M in ms}  # flat to M = 256
    rows = [{"contender": c, "M": M, "N": N, "K": K, "median_ms": t}
            for c, times in ((ladder.REFERENCE, cublas), ("gemm_07_pipelined", rung7)) for M, t in times.items()]
    text = lc.sweep_regimes(rows, CEILINGS)
    assert "already grows 1.40x by M = 2: no flat stretch" in text and "up to M = 1:" not in text
    assert "**Measured, gemm_07_pipelined**: its time stays within 1.25x of its time at M = 1" in text
    assert "up to M = 256" in text


def test_pct_table_puts_the_fastest_first_with_its_share_of_cublas():
    rows = [{"contender": "slow", "median_ms": 4.0, "tflops": 1.0}, {"contender": ladder.REFERENCE, "median_ms": 1.0,
            "tflops": 4.0}, {"contender": "fast", "median_ms": 2.0, "tflops": 2.0}]
    table = exercises.pct_table(rows)
    assert list(table.index) == [ladder.REFERENCE, "fast", "slow"]
    assert table["% of cuBLAS"].tolist() == [100.0, 50.0, 25.0] and list(table.columns) == ["median ms", "TFLOP/s",
                                                                                           "% of cuBLAS"]
