"""utils.ladder_chapter, the helpers of notebooks 02 and 03, without a GPU: reading the numbers in a
rung's PREDICTION, the computed sentence comparing a measurement with it, quoting header sections,
and the no-GPU path of rung_result. Measuring itself is covered by tests/test_gemm_ladder.py."""

import pytest

from utils import ladder, ladder_chapter as lc
from utils.run import SKIP_MARKER

RECORD = {"device": {"name": "NVIDIA H100"}, "date": "2024-05-01T12:00:00+00:00", "git_commit": "abc1234"}


@pytest.fixture
def prediction(monkeypatch):
    """Give every kernel the header paragraphs set here, {first words: text}, found by label as the real
    header_section finds them (the paragraph that starts with the label)."""
    sections = {}
    monkeypatch.setattr(lc, "header_section", lambda name, label, kernels_dir=None:
                        next((text for start, text in sections.items() if start.startswith(label)), None))
    return sections


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


def rows(**ms):
    return [{"contender": name, "median_ms": t, "tflops": 1.0} for name, t in ms.items()]


def test_the_sentence_compares_with_the_predicted_range(prediction):
    prediction["PREDICTION"] = "55-65% of cuBLAS, about 2x rung 3"
    earlier = lc.rung_name(3)
    text = lc.prediction_sentence("gemm_04_blocktile_1d", rows(**{ladder.REFERENCE: 1.0, "gemm_04_blocktile_1d": 2.0,
                                                                     earlier: 3.0}), "Measured on X")
    assert text.startswith("Measured on X: `gemm_04_blocktile_1d` takes **2.00 ms**")
    assert "**50.0% of cuBLAS**" in text and "**below** that range" in text
    assert "predicted about 2x rung 3; measured **1.50x** (measured / predicted = 0.75)" in text
    assert "TUNED" not in text


def test_the_sentence_says_when_there_is_nothing_to_compare(prediction):
    prediction["TUNED AFTERWARDS"] = "retuned"
    text = lc.prediction_sentence("r", rows(**{ladder.REFERENCE: 1.0, "r": 1.0}), "S")
    assert "gives no range in % of cuBLAS" in text and "TUNED AFTERWARDS" in text and "It predicted" not in text


def test_provenance_names_device_date_and_commit():
    assert lc.provenance(RECORD) == "Recorded on NVIDIA H100 (2024-05-01, commit `abc1234`)"


def test_quote_shows_the_sections_and_names_a_missing_one(monkeypatch):
    shown = []
    monkeypatch.setattr(lc, "display", lambda obj: shown.append(obj.data))
    lc.quote("gemm_01_naive", "PREDICTION", "No such paragraph")
    assert "From the header of `kernels/gemm_01_naive.cu`" in shown[0]
    assert lc.header_section("gemm_01_naive", "PREDICTION") in shown[0]
    assert "no paragraph starting “No such paragraph”" in shown[0]


def test_rung_result_without_a_gpu_or_a_record_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(lc.env, "device_slug", lambda: "cpu")  # results.load: the latest record of any device
    chapter = lc.LadderChapter((8, 8, 8), 3, tmp_path, on_gpu=False)
    assert chapter.recorded_ladder() is None
    chapter.rung_result("gemm_01_naive", ["gemm_01_naive"])
    out = capsys.readouterr().out
    assert f"{SKIP_MARKER} measuring gemm_01_naive (no GPU)" in out
    assert "no recorded ladder has gemm_01_naive yet" in out
    assert chapter.measured == {}


def test_operands_odd_fit_no_tile():
    import torch

    x, w = lc.operands_odd(torch.Generator().manual_seed(0))
    assert x.shape == (37, 65) and w.shape == (129, 65) and w.min() < 0 < w.max()
