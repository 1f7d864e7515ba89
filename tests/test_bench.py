"""utils.bench: counts, floors, the too-fast flag and the table on the CPU; timing and ceilings on a GPU; the
timer as notebook 01 writes it in a cell, the same code as utils.bench.time_ms."""
import ast
import inspect
import json

import pytest
import torch

from utils import REPO, bench, precision
from utils.bench import DATASHEET_H100, Ceilings, Cost, Timing
from utils.problems import get_problem

B, I, O = 1024, 8192, 8192


# --------------------------------------------------------------------------- counts

def test_problem_cost_94_full():
    c = bench.problem_cost(94)
    gemm = 2 * 1024 * 8192 * 8192
    assert c.flops == gemm + 16 * B * O
    # x, W, then gemm.bias, bias, GroupNorm weight and bias, then the (B, O) output, fp32
    assert c.bytes == 4 * (B * I + O * I + 4 * O + B * O)


def test_problem_cost_75_counts_the_broadcast_output():
    c = bench.problem_cost(75)
    C, N = O, B  # output (1, C, N, 1): C·N elements, not the N of the min alone
    assert c.bytes == 4 * (B * I + O * I + 4 * O + C * N)


@pytest.mark.parametrize("pid, params", [(37, 4096 * 1024 + 4 * 4096), (62, O * I + 3 * O)])
def test_problem_cost_counts_every_parameter_once(pid, params):
    d = get_problem(pid).dims()
    assert bench.problem_cost(pid).bytes == 4 * (d.batch * d.in_features + params + d.batch * d.out_features)


@pytest.mark.parametrize("pid", [94, 75, 37, 62])
def test_epilogue_estimate_is_negligible_next_to_the_gemm(pid):
    d = get_problem(pid).dims()
    gemm = bench.gemm_cost(d.batch, d.out_features, d.in_features).flops
    assert gemm <= bench.problem_cost(pid).flops < 1.01 * gemm


def test_gemm_and_elementwise_cost():
    assert bench.gemm_cost(2, 3, 4) == Cost(2 * 2 * 3 * 4, 4 * (2 * 4 + 4 * 3 + 2 * 3))
    assert bench.elementwise_cost(10, 5, flops_per_element=2) == Cost(10, 4 * 15)
    assert (Cost(1, 2) + Cost(3, 4)) == Cost(4, 6)
    assert Cost(8, 2).intensity == 4


# --------------------------------------------------------------------------- floors and the flag

def test_floors_arithmetic():
    fl = bench.floors(Cost(flops=67e12, bytes=3.35e12), DATASHEET_H100)
    assert fl["fp32_ms"] == pytest.approx(1000)
    assert fl["memory_ms"] == pytest.approx(1000)
    assert fl["tf32_ms"] == pytest.approx(67 / 494.7 * 1000)
    assert bench.floor_ms(fl, tf32_allowed=False) == pytest.approx(1000)


def test_datasheet_tf32_is_half_the_sparse_figure():
    assert DATASHEET_H100.tf32_tflops == pytest.approx(989.4 / 2)


def _timing(ms: float) -> Timing:
    return Timing(median=ms, p20=0.95 * ms, p80=1.05 * ms, min=0.9 * ms, n=50)


def test_too_fast_contender_is_flagged_not_celebrated():
    cost = bench.problem_cost(94)
    fl = bench.floors(cost, DATASHEET_H100)
    lowest = max(fl["memory_ms"], fl["tf32_ms"])
    fake = bench.make_row("cached", _timing(0.5 * lowest), baseline_ms=10.0, cost=cost)
    honest = bench.make_row("honest", _timing(1.2 * fl["fp32_ms"]), baseline_ms=10.0, cost=cost)
    assert fake["flag"] == bench.FLAG_TOO_FAST
    assert honest["flag"] == ""
    # TF32 off: beating the FP32 floor but not the TF32 one is suspicious of a precision
    # downgrade, which utils.check catches; the timing flag only fires below every floor.
    assert bench.make_row("x", _timing(0.95 * lowest), baseline_ms=1, cost=cost)["flag"] == ""


def test_make_row_numbers():
    cost = Cost(flops=2e12, bytes=1e9)
    row = bench.make_row("ours", _timing(20.0), baseline_ms=40.0, cost=cost, ceilings=DATASHEET_H100,
                         tf32_allowed=True)
    assert row["speedup"] == pytest.approx(2.0)
    assert row["tflops"] == pytest.approx(100.0)
    assert row["GBps"] == pytest.approx(50.0)
    fl = bench.floors(cost, DATASHEET_H100)
    assert row["floor_ms"] == pytest.approx(max(fl["tf32_ms"], fl["memory_ms"]))
    assert row["pct_of_floor"] == pytest.approx(100 * row["floor_ms"] / 20.0)
    assert row["tf32"] is True


def test_row_without_cost_has_no_rates():
    row = bench.make_row("a", _timing(1.0), baseline_ms=None)
    assert row["speedup"] is None and "tflops" not in row and row["flag"] == ""


def test_timing_quantiles():
    t = Timing.from_times([5.0, 1.0, 2.0, 3.0, 4.0])
    assert (t.median, t.min, t.n) == (3.0, 1.0, 5)
    assert t.p20 == pytest.approx(1.8) and t.p80 == pytest.approx(4.2)
    assert Timing.from_times([2.0]).median == 2.0
    with pytest.raises(ValueError):
        Timing.from_times([])


def test_format_table():
    cost = bench.problem_cost(94)
    rows = [bench.make_row("eager", _timing(12.0), baseline_ms=12.0, cost=cost),
            bench.make_row("too fast", _timing(0.001), baseline_ms=12.0, cost=cost)]
    table = bench.format_table(rows)
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["contender", "median", "ms"]
    assert "TFLOP/s" in lines[0] and "% of floor" in lines[0]
    assert lines[2].startswith("eager ") and "12.000" in lines[2] and "1.00x" in lines[2]
    assert "too fast !" in lines[3]
    assert lines[-1] == f"! too fast: {bench.FLAG_TOO_FAST}"
    assert len({len(line) for line in lines[:4]}) == 1  # fixed width
    assert "TFLOP/s" not in bench.format_table([bench.make_row("a", _timing(1.0), baseline_ms=None)])


def test_ceilings_entry_and_from_record():
    c = Ceilings(3000.0, 50.0, 400.0, "x")
    assert c.entry() == {"copy_GBps": 3000.0, "fp32_tflops": 50.0, "tf32_tflops": 400.0}
    rec = {"entries": [c.entry()], "device": {"name": "NVIDIA H100 80GB HBM3"}, "date": "2025-06-01T10:00:00+00:00"}
    assert Ceilings.from_record(rec) == Ceilings(3000.0, 50.0, 400.0, "measured on NVIDIA H100 80GB HBM3 2025-06-01")


def test_tf32_context_restores_every_setting():
    before = precision.flags()
    with precision.tf32(True):
        assert precision.tf32_allowed()
    assert precision.flags() == before and not precision.tf32_allowed()


def test_compare_needs_its_baseline_among_the_contenders():
    with pytest.raises(ValueError, match="baseline 'eager' is not a contender"):
        bench.compare({"a": lambda: None}, progress=False)


def test_time_ms_names_the_l2_states_it_knows():
    # Checked before anything touches a GPU, so it holds on the CPU runner too.
    with pytest.raises(ValueError, match=r"l2 must be one of \('clean', 'dirty', 'warm'\), got 'cold'"):
        bench.time_ms(lambda: None, l2="cold")
    with pytest.raises(ValueError, match="l2 must be one of"):
        bench.compare({"eager": lambda: None}, progress=False, l2="flushed")


def test_time_interleaved_checks_its_arguments_first():
    with pytest.raises(ValueError, match="l2 must be one of"):
        bench.time_interleaved({"a": lambda: None}, l2="cold")
    with pytest.raises(ValueError, match="reps must be >= 1"):
        bench.time_interleaved({"a": lambda: None}, reps=0)
    with pytest.raises(ValueError, match="no contenders"):
        bench.time_interleaved({})


class _FakeEvent:
    """torch.cuda.Event's timing surface, on the host: elapsed_time is the number of calls in between."""
    log: list = []

    def __init__(self, enable_timing=True):
        pass

    def record(self):
        self.at = len(self.log)

    def elapsed_time(self, end):
        return float(end.at - self.at)


def test_time_interleaved_times_rep_by_rep_in_a_rotating_order(monkeypatch):
    # No GPU needed: the events, the synchronisation and the flush are stand-ins; what is checked is
    # the order of the timed calls, and that each contender's events enclose its own call alone.
    log = _FakeEvent.log = []
    monkeypatch.setattr(bench, "require_gpu", lambda what: None)
    monkeypatch.setattr(bench, "l2_flush", lambda l2: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    fns = {name: (lambda name=name: log.append(name)) for name in "abc"}
    times = bench.time_interleaved(fns, reps=4, warmup=2, warm_s=0.0)
    timed = log[2 * 3:]  # after two warm-up rounds of all three
    assert log[:6] == list("abcabc")
    assert timed == list("abc" "bca" "cab" "abc")
    assert set(times) == set("abc") and all(t.n == 4 and t.median == 1.0 for t in times.values())


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_without_gpu_timing_says_so_and_cli_exits_0(capsys):
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        bench.time_ms(lambda: None)
    assert bench.main(["--ceilings"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "no CUDA GPU" in out[0]


# --------------------------------------------------------------------------- on a GPU

@pytest.mark.gpu
def test_time_ms_on_a_copy_gives_a_sane_bandwidth():
    src = torch.rand(64 * 2**20, device="cuda")  # 256 MiB, several times any L2
    dst = torch.empty_like(src)
    t = bench.time_ms(lambda: dst.copy_(src), reps=20)
    assert t.n == 20 and t.min <= t.p20 <= t.median <= t.p80
    gbps = 2 * src.numel() * 4 / (t.median * 1e-3) / 1e9
    assert 0.3 * 3000 < gbps < 1.5 * 3350, f"{gbps:.0f} GB/s"


@pytest.mark.gpu
def test_clean_flush_leaves_its_buffer_untouched_and_dirty_zeroes_it():
    # "clean" must only read its buffer (a write would leave dirty lines, the thing it avoids);
    # "dirty" is the zeroing idiom. Both leave the timed call's own result alone.
    dst = torch.empty(2**20, device="cuda")
    src = torch.rand_like(dst)
    device = torch.cuda.current_device()
    bench.time_ms(lambda: dst.copy_(src), reps=3, warmup=1, l2="clean")
    assert torch.equal(dst, src) and bool((bench._l2_flush_buffer(device, "clean") == 1).all())
    bench.time_ms(lambda: dst.copy_(src), reps=3, warmup=1, l2="dirty")
    assert torch.equal(dst, src) and bool((bench._l2_flush_buffer(device, "dirty") == 0).all())
    assert bool((bench._l2_flush_buffer(device, "clean") == 1).all())  # separate buffers


@pytest.mark.gpu
def test_measure_ceilings():
    before = torch.backends.cuda.matmul.allow_tf32
    c = bench.measure_ceilings(reps=5)
    assert c.copy_GBps > 0 and c.fp32_tflops > 0
    assert c.tf32_tflops > c.fp32_tflops
    assert c.source.startswith("measured on ")
    assert torch.backends.cuda.matmul.allow_tf32 is before


@pytest.mark.gpu
def test_compare_runs_contenders_side_by_side(capsys):
    a = torch.rand(2048, 2048, device="cuda")
    b = torch.rand(2048, 2048, device="cuda")
    rows = bench.compare({"eager": lambda: a @ b, "twice": lambda: (a @ b, a @ b)},
                         cost=bench.gemm_cost(2048, 2048, 2048), reps=10)
    assert [r["contender"] for r in rows] == ["eager", "twice"]
    assert rows[0]["speedup"] == 1.0 and rows[1]["speedup"] < 1.0
    assert capsys.readouterr().out.count("ms  (p20") == 2  # one line per contender, as it is timed
    rows = bench.compare({"eager": lambda: a @ b, "twice": lambda: (a @ b, a @ b)}, reps=10, interleave=True)
    assert [r["contender"] for r in rows] == ["eager", "twice"]
    assert rows[0]["speedup"] == 1.0 and 0.3 < rows[1]["speedup"] < 0.8
    assert all(r["flag"] == "" for r in rows)
    out = capsys.readouterr().out
    assert "2 contenders, timed in turn (10 reps each)" in out and out.count("ms  (p20") == 2


# --------------------------------------------------------------------------- the timer, as notebook 01 shows it

def _notebook_01_timer_def() -> ast.FunctionDef:
    nb = json.loads((REPO / "notebooks" / "01_models_and_baselines.ipynb").read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code" and "def time_ms(" in "".join(c["source"])]
    assert len(cells) == 1, "notebook 01 writes the timer in one cell"
    defs = [n for n in ast.parse(cells[0]).body if isinstance(n, ast.FunctionDef) and n.name == "time_ms"]
    assert len(defs) == 1
    return cells[0], defs[0]


def test_notebook_01_writes_the_very_timer_that_utils_bench_runs():
    cell, cell_def = _notebook_01_timer_def()
    module_def = ast.parse(inspect.getsource(bench.time_ms)).body[0]
    assert ast.dump(cell_def) == ast.dump(module_def)  # the same code, docstring included
    # and the same text, comments included: what the reader reads is what runs
    assert ast.get_source_segment(cell, cell_def) == inspect.getsource(bench.time_ms).rstrip("\n")
    assert "utils/bench.py" in cell.splitlines()[0]  # the cell says where the function lives
    assert 15 <= len(inspect.getsource(bench.time_ms).splitlines()) <= 25  # about 15 readable lines, and short


def _timer_of_the_cell(monkeypatch, log):
    """The time_ms notebook 01's cell defines, run on the names it imports (with the stand-ins below)."""
    cell, _ = _notebook_01_timer_def()
    namespace = {"torch": torch}
    exec(compile(cell, "notebook 01", "exec"), namespace)
    monkeypatch.setitem(namespace, "require_gpu", lambda what: None)
    monkeypatch.setitem(namespace, "l2_flush", lambda l2: (lambda: log.append("flush")) if l2 != "warm" else None)
    return namespace["time_ms"]


@pytest.mark.parametrize("where", ["utils.bench", "notebook 01"])
def test_time_ms_warms_up_flushes_outside_the_events_and_times_each_call(monkeypatch, where):
    # No GPU: events, synchronize and the flush are stand-ins that log; each timed call takes 1 "ms".
    log = _FakeEvent.log = []
    monkeypatch.setattr(bench, "require_gpu", lambda what: None)
    monkeypatch.setattr(bench, "l2_flush", lambda l2: (lambda: log.append("flush")) if l2 != "warm" else None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: log.append("sync"))
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    time_ms = bench.time_ms if where == "utils.bench" else _timer_of_the_cell(monkeypatch, log)
    t = time_ms(lambda: log.append("fn"), reps=3, warmup=2)
    assert log == ["fn", "fn", "sync"] + ["flush", "fn"] * 3 + ["sync"]
    assert (t.n, t.median) == (3, 1.0)  # each pair of events encloses one call, not the flush
    log.clear()
    time_ms(lambda: log.append("fn"), reps=2, warmup=0, l2="warm", sync_each=True)
    assert log == ["sync", "sync", "fn", "sync", "fn", "sync"]
