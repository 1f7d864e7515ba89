"""utils/chapters/batch_sweep.py on the CPU: the points' sizes, floors and where the weight-bandwidth regime ends."""
import json

import pytest

from utils import bench, results
from utils.chapters import batch_sweep as sweep

H100 = bench.Ceilings(3000.0, 50.0, 400.0, "test")


def test_dims_keep_the_problem_and_change_the_batch():
    d = sweep.dims_at(94, 7)
    assert (d.batch, d.in_features, d.out_features, d.groups) == (7, 8192, 8192, 256)
    assert sweep.MS[0] == 1 and sweep.MS[-1] == 16384


def test_at_small_batch_the_floor_is_one_read_of_the_weight():
    f = sweep.floor_of(94, 1, H100, "strict")
    weight_ms = 8192 * 8192 * 4 / 3000e9 * 1e3
    assert f["floor_ms"] == f["bytes_ms"] == pytest.approx(weight_ms, rel=0.01)
    big = sweep.floor_of(94, 16384, H100, "strict")
    assert big["floor_ms"] == big["flops_ms"] > big["bytes_ms"]


@pytest.mark.parametrize("tier", ["strict", "tf32"])
def test_the_crossover_is_where_bytes_and_flops_take_as_long(tier):
    m = sweep.crossover_M(62, H100, tier)
    below, above = sweep.floor_of(62, int(m * 0.9), H100, tier), sweep.floor_of(62, int(m * 1.1) + 1, H100, tier)
    assert below["bytes_ms"] > below["flops_ms"] and above["flops_ms"] > above["bytes_ms"]
    assert sweep.crossover_M(62, H100, "tf32") > sweep.crossover_M(62, H100, "strict")  # TF32's faster math: later


def test_the_record_kind_has_the_keys_the_sweep_writes():
    assert sweep.KIND in results.KINDS
    assert set(results.KINDS[sweep.KIND].entry_keys) <= {"problem", "shape", "K", "C", "tier", "M", "contender",
                                                         "median_ms", "p20_ms", "p80_ms", "floor_ms", "bytes_ms",
                                                         "flops_ms"}


def test_the_strict_floor_counts_3xtf32_where_it_beats_sgemm():
    """37 at M = 4096: 3xTF32 (a third of 400 TFLOP/s) beats SGEMM's 50, so the strict floor uses 133."""
    f = sweep.floor_of(37, 4096, H100, "strict")
    flops = bench.problem_cost(37, sweep.dims_at(37, 4096)).flops
    assert f["flops_ms"] == pytest.approx(flops / (400e12 / 3) * 1e3)
    slow_tc = bench.Ceilings(3000.0, 50.0, 120.0, "tensor cores slower than 3x SGEMM")
    assert sweep.floor_of(37, 4096, slow_tc, "strict")["flops_ms"] == pytest.approx(flops / 50e12 * 1e3)


def test_the_other_shapes_keep_the_problems_groups_where_they_divide_c():
    assert set(sweep.SHAPES) == {"own", "4096x4096", "4096x11008"}
    d = sweep.dims_at(94, 8, "4096x11008")
    assert (d.batch, d.in_features, d.out_features, d.groups) == (8, 4096, 11008, 256)
    assert sweep.shapes_of(94) == ["own", "4096x4096", "4096x11008"]
    assert sweep.shapes_of(75) == ["own", "4096x4096"]  # 512 groups do not divide 11,008
    with pytest.raises(ValueError, match="512 groups do not divide C = 11008"):
        sweep.dims_at(62, 1, "4096x11008")


def test_a_shapes_floor_is_its_own_weight():
    f = sweep.floor_of(37, 1, H100, "strict", "4096x11008")
    assert f["floor_ms"] == pytest.approx(4096 * 11008 * 4 / 3000e9 * 1e3, rel=0.01)
    assert sweep.crossover_M(37, H100, "strict", "4096x11008") != sweep.crossover_M(37, H100, "strict")


def test_make_sweep_runs_the_sweep():
    from utils import REPO

    make = (REPO / "Makefile").read_text()
    assert "sweep: $(SETUP)" in make and "-m utils.chapters.batch_sweep" in make


def test_shares_measured_on_several_cards_merge_into_one_sweep(tmp_path):
    row = {"problem": 94, "shape": "own", "tier": "strict", "M": 1, "contender": "ours", "median_ms": 1.0}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"device": "gpu-a", "ceilings": "c", "rows": [row]}))
    b.write_text(json.dumps({"device": "gpu-a", "ceilings": "c", "rows": [{**row, "problem": 75}]}))
    rows, sources = results.merged_rows([a, b], "gpu-a", sweep.ROW_KEY)
    assert [r["problem"] for r in rows] == [94, 75] and "a.json: 1 rows, ceilings c" in sources
    with pytest.raises(ValueError, match="in another file too"):
        results.merged_rows([a, a], "gpu-a", sweep.ROW_KEY)
    with pytest.raises(ValueError, match="not gpu-b"):
        results.merged_rows([a], "gpu-b", sweep.ROW_KEY)
