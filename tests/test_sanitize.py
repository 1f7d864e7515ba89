"""`make sanitize` on the CPU: the target list (utils/sanitize_targets.py) covers every export of every
kernel file and every solution, forward and training step, at edge, tile-crossing and full shapes, with
arguments the launchers take; the driver (utils/sanitize.py) reads compute-sanitizer's summaries right,
takes a crash, a timeout or a budget that ran out for a failure, kills a target's whole process group
at its time limit, and records what it ran without losing what an earlier run recorded."""
from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from utils import REPO, build, env, ops, results
from utils import sanitize as san
from utils import sanitize_targets as st
from utils.problems import Dims, all_problems, get_problem

KERNEL_FOLDERS = (build.KERNELS_DIR, build.KERNELS_DIR / "probes", build.KERNELS_DIR / "exercises")
TILES = (16, 32, 64, 128, 256)  # every block tile and k slice of the ladder, rung 10 and the fused kernels
UNITS = {u.name: u for u in st.kernel_units() + st.solution_units()}
KERNEL_UNITS = [u for u in st.kernel_units()]
H100 = {"name": "NVIDIA H100 80GB HBM3", "slug": "nvidia-h100-80gb-hbm3", "cc": "9.0", "sm_count": 132,
        "memory_gb": 79.1, "l2_mb": 50.0}


def _exports(unit: st.Unit) -> set[str]:
    return {e.name for e in build.exported_functions(unit.path.read_text())}


def _called(unit: st.Unit) -> set[str]:
    return {c.export for c in unit.reduced + unit.full}


# ---- the target list ----------------------------------------------------------------------------

def test_every_kernel_file_is_a_unit():
    files = {str(p.relative_to(build.KERNELS_DIR).with_suffix("")) for d in KERNEL_FOLDERS for p in d.glob("*.cu")}
    assert files == {u.name for u in KERNEL_UNITS}
    assert {u.name for u in st.solution_units()} == {f"solutions/{p.stem}" for p in st.SOLUTIONS_DIR.glob("p*.py")}
    assert len(st.solution_units()) == len(all_problems())


@pytest.mark.parametrize("unit", KERNEL_UNITS, ids=lambda u: u.name)
def test_every_export_is_called_or_excused_with_a_reason(unit):
    exports, called, excused = _exports(unit), _called(unit), st.EXCUSED.get(unit.name, {})
    assert called <= exports, f"{unit.name} calls what its file does not export: {called - exports}"
    assert not called & set(excused), f"{unit.name}: excused yet called: {called & set(excused)}"
    assert set(excused) <= exports, f"{unit.name}: excuses {set(excused) - exports}, which it does not export"
    assert all(len(reason) > 20 for reason in excused.values())
    assert exports == called | set(excused), f"{unit.name}: neither called nor excused: {exports - called - set(excused)}"
    assert unit.reduced, f"{unit.name} has no reduced calls"


def test_the_excuses_are_for_unit_names_that_exist():
    assert set(st.EXCUSED) <= set(UNITS)


def test_every_full_shape_unit_but_the_exercises_has_full_calls():
    """The exercises are the reader's starting points (reduced only); every other unit runs at full size."""
    assert {u.name for u in KERNEL_UNITS if not u.full} == {u.name for u in KERNEL_UNITS if u.name.startswith("exercises/")}
    assert all(u.full for u in st.solution_units())


@pytest.mark.parametrize("unit", st.solution_units(), ids=lambda u: u.name)
def test_every_solution_runs_forward_and_training_at_both_tiers_and_every_size(unit):
    for shape_class in st.CLASSES:
        got = getattr(unit, shape_class)
        for shape in {c.shape for c in got}:
            steps = {(c.export, c.tf32) for c in got if c.shape == shape}
            assert steps == {("forward", False), ("forward", True), ("forward, frozen", False),
                             ("training step", False), ("training step", True)}, (shape_class, shape)
    pid = int(unit.path.stem[1:4])
    d = get_problem(pid).dims("full")
    assert {c.shape for c in unit.full} == {(d.batch, d.in_features, d.out_features, d.groups)}
    reduced = {c.shape for c in unit.reduced}
    assert any(M == 1 for M, *_ in reduced), "batch 1"
    assert any(K % 4 for _, K, _, _ in reduced), "the unfused path (K % 4 != 0)"
    assert any(M > 256 and K % 4 == 0 and C % 128 and C > 512 and C // G == d.channels_per_group
               for M, K, C, G in reduced), "the fused kernel over several tiles, the last one partial"


def test_each_tool_runs_what_it_should():
    for t in st.targets():
        if t.shape_class == "reduced":
            assert t.tools == st.TOOLS, t.name
        elif t.unit.name in st.FULL_UNDER_EVERY_TOOL:
            assert t.tools == st.TOOLS, t.name
        else:
            assert t.tools == st.FAST_TOOLS == ("memcheck", "synccheck"), t.name
    assert set(st.FULL_UNDER_EVERY_TOOL) <= set(UNITS)
    assert not {"fused_gemm_groupnorm", "gemm_10_3xtf32"} & st.FULL_UNDER_EVERY_TOOL  # GEMMs: too slow under racecheck


def _gemm_shapes(unit):
    """(M, N, K) of the calls of a GEMM-like unit, whatever its factory."""
    out = []
    for c in unit.reduced:
        if c.args.func in (st.gemm, st.linear, st.two_biases, st.linear_backward):
            out.append(c.shape)
        elif c.args.func is st.whole_model:
            M, K, C, _ = c.shape
            out.append((M, C, K))
    return out


@pytest.mark.parametrize("unit", [u for u in KERNEL_UNITS if _gemm_shapes(u)], ids=lambda u: u.name)
def test_gemm_units_cross_tiles_and_pipeline_stages(unit):
    shapes = _gemm_shapes(unit)
    # C of a whole model is whole groups of 16, 32 or 64 channels: a multiple of no column tile (128, 256)
    n_tiles = TILES[3:] if unit.name == "fused_gemm_groupnorm" else TILES

    def edge(M, N):
        return all(M % t for t in TILES) and all(N % t for t in n_tiles)

    assert any(edge(M, N) and K % 4 for M, N, K in shapes), "an edge, K % 4 != 0 (the mma.sync paths, the unfused path)"
    assert any(edge(M, N) and K % 4 == 0 for M, N, K in shapes), "an edge, K % 4 == 0 (the TMA paths, the fused kernel)"
    # several tiles of 128 x 256 in each of M and N, more k tiles of 32 than the deepest ring (4 stages)
    # holds, over more than one promotion chunk (256), and no dimension a multiple of a tile
    assert any(M > 2 * 128 and N > 2 * 256 and K > 4 * 32 and K > 256 and edge(M, N) and K % 32
               for M, N, K in shapes), "several tiles and stages"


def test_tails_cross_their_paths():
    for name in ("groupnorm", "min_bias_broadcast", "tail_backward"):
        shapes = {c.shape for c in UNITS[name].reduced}
        widths = {C // G for _, C, G in shapes}
        assert {16, 32, 64} <= widths, name  # the problems' widths (the team paths)
        assert {23, 20} <= widths or name == "min_bias_broadcast", name  # the general path, unequal shares
        assert any(N == 1 for N, _, _ in shapes) or name == "min_bias_broadcast", name
        assert any(N > 256 and C % 256 for N, C, _ in shapes), f"{name}: many rows, a partial column tile"
    assert {C // G for _, C, G in {c.shape for c in UNITS["groupnorm"].reduced}} >= {4, 12, 128, 256, 260, 500, 20000}


def test_full_shapes_are_kernelbenchs():
    gemms = {(d.batch, d.out_features, d.in_features) for d in (p.dims("full") for p in all_problems())}
    assert set(st.GEMM_FULL) == gemms
    tails = {(d.batch, d.out_features, d.groups) for d in (p.dims("full") for p in all_problems())}
    assert set(st.GROUPS_FULL) == tails
    assert {c.shape for c in UNITS["tail_backward"].full} == tails
    assert {(M, C, G) for M, _, C, G in {c.shape for c in UNITS["fused_gemm_groupnorm"].full}} == tails
    assert set(st.ROWS_FULL) == {(M, C) for M, C, _ in tails}


def test_full_calls_share_their_factories_with_reduced_calls():
    """So the argument checks on the reduced calls below hold for the full ones (never built on the CPU)."""
    for unit in UNITS.values():
        reduced = {(c.export, c.args.func, tuple(sorted(c.args.keywords.items(), key=str))) for c in unit.reduced}
        for c in unit.full:
            kinds = {(e, f) for e, f, _ in reduced}
            assert (c.export, c.args.func) in kinds, f"{unit.name}: {c.label} has no reduced counterpart"


def test_targets_are_named_once_and_found_by_name_and_pattern():
    names = [t.name for t in st.targets()]
    assert len(names) == len(set(names))
    assert st.find("gemm_05_blocktile_2d/reduced").calls == UNITS["gemm_05_blocktile_2d"].reduced
    with pytest.raises(KeyError, match="--list"):
        st.find("gemm_05_blocktile_2d")
    assert [t.name for t in st.select(["probes/*"], ["full"])] == ["probes/read_probe/full", "probes/wgmma_peak_probe/full"]
    assert {t.unit.name for t in st.select(["solutions/p094*"])} == {"solutions/p094_gemm_biasadd_hardtanh_mish_groupnorm"}


# ---- the calls' arguments -----------------------------------------------------------------------

_SCHEMA_PARAM = re.compile(r"(?P<type>\w+\??) \w+(?P<default>=\S+)?")


def _schema(unit, export) -> list[tuple[str, bool]]:
    (e,) = [e for e in build.exported_functions(unit.path.read_text()) if e.name == export]
    params = build.op_schema(e).split(") ->")[0].lstrip("(")
    return [(m["type"], bool(m["default"])) for m in _SCHEMA_PARAM.finditer(params)]


def _fits(value, kind: str) -> bool:
    if kind.endswith("?") and value is None:
        return True
    return {"Tensor": isinstance(value, torch.Tensor) and value.dtype == torch.float32 and value.is_contiguous(),
            "float": type(value) is float, "int": type(value) is int, "bool": type(value) is bool}[kind.rstrip("?")]


def _gn(x, G, gamma, beta, eps):
    return F.group_norm(x, G, gamma, beta, eps)


# What each launcher that is no registered op computes, in PyTorch: running it on a reduced call's
# arguments proves they fit each other (shapes, broadcasting); the registered ops run their own CPU path.
EQUIVALENT = {
    "gemm": lambda x, w: x @ w.T, "gemm_split_in_smem": lambda x, w: x @ w.T, "gemm_mma_sync": lambda x, w: x @ w.T,
    "linear_bias": F.linear, "linear_relu": lambda x, w, b: F.relu(F.linear(x, w, b)),
    "linear_two_biases": lambda x, w, b, e: F.linear(x, w, b) + e,
    "vector_add": torch.add, "scale_add": lambda a, b, alpha: alpha * a + b, "bias_gelu": lambda x, b: F.gelu(x + b),
    "bias_hardtanh_mish": lambda x, b, lo, hi: F.mish(F.hardtanh(x + b, lo, hi)),
    "swish_bias": lambda x, b: x * torch.sigmoid(x) + b, "leaky_relu_x2": lambda x, s: 2 * F.leaky_relu(x, s),
    "mish": F.mish, "group_norm_welford": _gn, "group_norm_sumsq": _gn, "group_norm": _gn,
    "group_norm_row_min": lambda *a: _gn(*a).min(1, keepdim=True)[0],
    "min_bias_broadcast": lambda rowmin, bias: rowmin + bias,
    "read_probe": lambda x: torch.tensor(x.numel() % 4 == 0),
    "wgmma_peak_probe": lambda x, w, iters, blocks: (x @ w.T).expand(blocks, 128, 256) * iters,
    "linear_group_norm_min_bias_atomic": lambda *a: torch.ops.workbook.linear_group_norm_min_bias(*a),
}
OUT_SHAPE = {"min_bias_broadcast": lambda rowmin, bias: (1, bias.shape[1], rowmin.shape[0], 1),
             "read_probe": lambda x: ()}


def _cpu(export):
    return getattr(torch.ops.workbook, export) if hasattr(torch.ops.workbook, export) else EQUIVALENT[export]


@pytest.mark.parametrize("unit", KERNEL_UNITS, ids=lambda u: u.name)
def test_reduced_arguments_fit_the_launchers(unit):
    """Each reduced call's arguments: the launcher's schema (count, types, float32 contiguous tensors),
    and what the launcher computes, run on the CPU, takes them."""
    assert ops.ALL  # the workbook ops are registered: their CPU implementations run below
    distinct = {(c.export, c.args.func, c.args.args, tuple(c.args.keywords.items())): c for c in unit.reduced}
    for call in distinct.values():  # a call and its TF32 twin take the same arguments
        args = call.args()
        schema = _schema(unit, call.export)
        # every argument, defaults included: the pybind launcher the worker calls has no defaults (the
        # op's schema does); a call that left one out crashed gemm_10_3xtf32's target on the GPU
        assert len(args) == len(schema), f"{call.label}: {len(args)} arguments for {schema}"
        bad = [(kind, type(a).__name__) for a, (kind, _) in zip(args, schema) if not _fits(a, kind)]
        assert not bad, f"{call.label}: {bad}"
        out = _cpu(call.export)(*args)
        first = out[0] if isinstance(out, tuple) else out
        if call.export in OUT_SHAPE:
            assert tuple(first.shape) == OUT_SHAPE[call.export](*args), call.label


def test_inputs_are_deterministic_and_never_zeros():
    a, b = st.linear(37, 129, 65, kept=True), st.linear(37, 129, 65, kept=True)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert all(t.abs().max() > 0 for t in a)
    assert st.whole_model(37, 68, 160, 5, pid=94, kept=False, save=True)[-2:] == [None, True]


@pytest.mark.parametrize("unit", st.solution_units(), ids=lambda u: u.name)
def test_solution_calls_run_on_the_cpu(unit):
    """The worker's solution steps, on the module's CPU path (the reference math): the model is built at
    the call's sizes, frozen, stepped by the optimizer."""
    for call in unit.reduced:
        if not call.tf32:  # the CPU path has no TF32 (its twin runs the same steps)
            st.run_call(unit, call, "cpu")


def test_the_worker_prints_its_progress_and_done(capsys):
    target = st.find("solutions/p062_matmul_groupnorm_leakyrelu_sum/reduced")
    assert st.main([target.name, "--device", "cpu"]) == 0
    out = capsys.readouterr().out.splitlines()
    n = len(target.calls)
    assert out[0] == f"{st.START} {target.name}: {n} calls"
    assert [line.split(":")[0] for line in out[1:-1]] == [f"{st.CALL} {i}/{n} {c.label}" for i, c in enumerate(target.calls, 1)]
    assert out[-1] == f"{st.DONE} {target.name}: {n} calls"
    assert san.judge("memcheck", "\n".join(out) + "\n========= ERROR SUMMARY: 0 errors\n", 0, False).verdict == "clean"


def test_problems_take_dims_of_the_callers_own():
    p = get_problem(94)
    d = Dims(300, 600, 544, 17)
    assert p.init_inputs(d) == [600, 544, (544,), 17] and p.dims(d) is d
    assert p.output_shape(d) == (300, 544) and get_problem(75).output_shape(d) == (1, 544, 300, 1)


# ---- the verdict --------------------------------------------------------------------------------

def _out(calls=2, done=None, tail=""):
    done = calls if done is None else done
    lines = ["========= COMPUTE-SANITIZER", f"{st.START} t/reduced: {calls} calls"]
    lines += [f"{st.CALL} {i}/{calls} gemm 37x129x65: 0.10 s" for i in range(1, done + 1)]
    if done == calls:
        lines.append(f"{st.DONE} t/reduced: {calls} calls")
    return "\n".join(lines + [tail]) + "\n"


MEMCHECK_ERROR = """========= Invalid __global__ read of size 4 bytes
=========     at gemm_kernel(const float *, const float *, float *, int, int, int)+0x1f0 in kernels/gemm_01_naive.cu:30
=========     by thread (3,0,0) in block (1,0,0)
"""


def test_clean_needs_a_zero_summary_every_call_and_exit_0():
    v = san.judge("memcheck", _out(tail="========= ERROR SUMMARY: 0 errors"), 0, False)
    assert (v.verdict, v.errors, v.calls_done, v.calls) == ("clean", 0, 2, 2)


def test_errors_are_counted_from_the_total_not_the_unprinted_line():
    text = _out(tail=MEMCHECK_ERROR * 2 + "========= ERROR SUMMARY: 257 errors\n"
                "========= ERROR SUMMARY: 207 errors were not printed. Use --print-limit option to adjust the number of printed errors")
    v = san.judge("memcheck", text, san.ERROR_EXITCODE, False)
    assert (v.verdict, v.errors) == ("errors", 257)
    assert v.where == ("gemm_kernel(const float *, const float *, float *, int, int, int)",)
    assert not v.in_libraries_only
    assert san.judge("initcheck", _out(tail="========= ERROR SUMMARY: 1 error"), 0, False).errors == 1


def test_racecheck_hazards_count_errors_and_warnings():
    for summary, errors in [("0 hazards displayed (0 errors, 0 warnings)", 0), ("3 hazards displayed (3 errors, 0 warnings)", 3),
                            ("1 hazard displayed (0 errors, 1 warning)", 1)]:
        v = san.judge("racecheck", _out(tail=f"========= RACECHECK SUMMARY: {summary}"), 0, False)
        assert (v.verdict, v.errors) == ("clean" if not errors else "errors", errors), summary
    both = _out(tail="========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)\n========= ERROR SUMMARY: 1 error")
    assert san.judge("racecheck", both, 0, False).errors == 2


def test_summaries_of_several_processes_add_up():
    text = _out(tail="========= ERROR SUMMARY: 0 errors\n========= ERROR SUMMARY: 2 errors")
    assert san.judge("memcheck", text, san.ERROR_EXITCODE, False).errors == 2


def test_a_crash_is_never_clean():
    # a Python exception after one call: the summary says 0, the target did not finish
    text = _out(done=1, tail="RuntimeError: CUDA error: an illegal memory access was encountered\n"
                "========= ERROR SUMMARY: 0 errors")
    v = san.judge("memcheck", text, 1, False)
    assert v.verdict == "crashed" and v.calls_done == 1 and "illegal memory access" in v.reason
    # exit 0 without the worker's last line; no summary at all (the tool itself died); a signal
    assert san.judge("synccheck", _out(done=1, tail="========= ERROR SUMMARY: 0 errors"), 0, False).verdict == "crashed"
    v = san.judge("memcheck", _out(), -11, False)
    assert (v.verdict, v.errors) == ("crashed", None) and "no summary" in v.reason
    assert san.judge("memcheck", "Traceback ...\nKeyError: 'no target'\n", 1, False).calls is None
    # the tool's exit code for errors wins even where its summary is missing
    assert san.judge("memcheck", _out(), san.ERROR_EXITCODE, False).verdict == "errors"


def test_a_timeout_is_not_finished_never_clean():
    v = san.judge("racecheck", _out(calls=5, done=3, tail="========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"),
                  None, True)
    assert (v.verdict, v.errors, v.calls_done, v.calls) == ("not finished", None, 3, 5)
    assert "time limit after 3/5 calls" in v.reason
    assert "being reported" in san.judge("memcheck", _out(calls=5, done=1, tail=MEMCHECK_ERROR), None, True).reason


def test_errors_inside_pytorchs_kernels_only_are_named_as_such():
    torch_error = ("========= Uninitialized __global__ memory read of size 8 bytes\n=========     at void at::native::"
                   "reduce_kernel<256, 2, at::native::ReduceOp<double>>(T3)+0x10880\n")
    v = san.judge("initcheck", _out(tail=torch_error + "========= ERROR SUMMARY: 1 error"), san.ERROR_EXITCODE, False)
    assert v.verdict == "errors" and v.in_libraries_only and "--exclude" in v.reason


# ---- running: the time limit, the budget, the record ----------------------------------------------

def test_the_time_limit_kills_the_target_and_everything_it_started(tmp_path):
    script = ("import subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
              "print('grandchild', child.pid, flush=True)\n"
              f"print('{st.CALL} 1/3 x: 0.1 s', flush=True)\n"
              "time.sleep(120)\n")
    start = time.monotonic()
    r = san.run_process([sys.executable, "-c", script], san.environment(), timeout=3, cwd=tmp_path)
    assert r.timed_out and r.rc is None and time.monotonic() - start < 30
    assert san.judge("memcheck", r.text, r.rc, r.timed_out).calls_done == 1
    pid = int(re.search(r"grandchild (\d+)", r.text).group(1))
    for _ in range(50):  # killed with its group; its new parent reaps it
        if not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"process {pid}, started by the target, outlived the time limit")


def test_a_process_that_ends_gives_its_status_and_output(tmp_path):
    r = san.run_process([sys.executable, "-c", "import os; print(os.environ['PYTORCH_NO_CUDA_MEMORY_CACHING']); raise SystemExit(3)"],
                        san.environment({"PATH": os.environ["PATH"]}), timeout=60, cwd=tmp_path)
    assert (r.rc, r.timed_out, r.text) == (3, False, "1\n")


def test_command_and_environment():
    cmd = san.command("racecheck", "groupnorm/full", "/opt/cs", ("kns=reduce_kernel",))
    assert cmd[:3] == ["/opt/cs", "--tool", "racecheck"]
    assert cmd[cmd.index("--error-exitcode") + 1] == str(san.ERROR_EXITCODE)
    assert cmd[cmd.index("--kernel-name-exclude") + 1] == "kns=reduce_kernel"
    assert cmd[-4:] == [sys.executable, "-m", "utils.sanitize_targets", "groupnorm/full"]
    assert "--kernel-name-exclude" not in san.command("memcheck", "x/reduced", "cs")
    environ = san.environment({"PYTHONPATH": "/elsewhere"})
    assert environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1"
    assert environ["PYTHONPATH"].split(os.pathsep) == [str(REPO), "/elsewhere"]


def test_the_plan_runs_tool_by_tool_fastest_first():
    pairs = san.plan(["racecheck", "memcheck"], ["gemm_01_naive"])
    assert [(tool, t.name) for tool, t in pairs] == [
        ("memcheck", "gemm_01_naive/reduced"), ("memcheck", "gemm_01_naive/full"), ("racecheck", "gemm_01_naive/reduced")]


class FakeRunner:
    """Stands in for run_process: answers from a table by target, records what it was asked."""

    def __init__(self, answers: dict[str, san.Run], cost: float = 1.5):
        self.answers, self.asked, self.cost, self.now = answers, [], cost, 0.0

    def clock(self) -> float:
        return self.now

    def __call__(self, cmd, environ, timeout):
        target = cmd[-1]
        self.asked.append((cmd[cmd.index("--tool") + 1], target, timeout))
        self.now += self.cost  # each target takes `cost` seconds of the fake clock
        return self.answers.get(target, san.Run(0, False, self.cost, _out(tail="========= ERROR SUMMARY: 0 errors")))


def _run(pairs, runner, lines, **kw):
    options = dict(timeouts=dict.fromkeys(st.TOOLS, 100.0), budget=None, excludes={}, previous=[], resume=False,
                   commit="abc1234", device="nvidia-h100-80gb-hbm3", log_root=None)
    options.update(kw)
    return san.run(pairs, "cs", runner=runner, say=lambda *a, **k: lines.append(a[0]), clock=runner.clock, **options)


def test_a_timed_out_target_is_recorded_not_finished_and_fails_the_run(monkeypatch):
    monkeypatch.setattr(st.Unit, "builds_here", lambda self: True)
    pairs = san.plan(["memcheck"], ["gemm_01_naive", "gemm_02_coalesced"])
    slow = san.Run(None, True, 100.0, _out(calls=3, done=1))  # killed at its time limit
    lines: list[str] = []
    entries = _run(pairs, FakeRunner({"gemm_01_naive/full": slow}), lines)
    verdicts = {e["target"]: e["verdict"] for e in entries}
    assert verdicts == {"gemm_01_naive/reduced": "clean", "gemm_01_naive/full": "not finished",
                        "gemm_02_coalesced/reduced": "clean", "gemm_02_coalesced/full": "clean"}
    late = next(e for e in entries if e["verdict"] == "not finished")
    assert late["errors"] is None and late["calls_done"] == 1 and late["calls"] == 3
    assert lines[0].startswith("[1/4] memcheck  gemm_01_naive/reduced")
    assert any("not finished" in line and "100.0 s" in line for line in lines)
    text, ok = san.report(entries, pairs, "abc1234")
    assert not ok and "NOT FINISHED" in text and "gemm_01_naive/full" in text


def test_the_budget_leaves_the_rest_not_run_and_limits_each_target(monkeypatch):
    monkeypatch.setattr(st.Unit, "builds_here", lambda self: True)
    pairs = san.plan(["memcheck"], ["gemm_0[1-3]_*"], ["reduced"])
    runner, lines = FakeRunner({}, cost=12.0), []
    entries = _run(pairs, runner, lines, budget=30.0)
    assert [e["verdict"] for e in entries] == ["clean", "clean", "not run"]  # 6 s left: less than MIN_LEFT_S
    assert [limit for _, _, limit in runner.asked] == [30.0, 18.0]  # no time limit goes past the budget left
    assert entries[2]["reason"] == "the budget ran out before it started" and entries[2]["errors"] is None
    _, ok = san.report(entries, pairs, "abc1234")
    assert not ok


def test_the_budget_waits_for_a_pair_that_took_longer_than_what_is_left(monkeypatch):
    monkeypatch.setattr(st.Unit, "builds_here", lambda self: True)
    pairs = san.plan(["memcheck"], ["gemm_0[1-2]_*"], ["reduced"])
    slow = san.entry("memcheck", "gemm_01_naive/reduced", san.Verdict("clean", 0, 3, 3), 50.0, "0000000", "d")
    runner = FakeRunner({"gemm_02_coalesced/reduced": san.Run(None, True, 30.0, _out(calls=3, done=2))}, cost=30.0)
    fresh = _run(pairs, runner, [], budget=40.0, previous=[slow])
    assert [a[1] for a in runner.asked] == ["gemm_02_coalesced/reduced"]  # 40 s left; the first took 50 s last time
    (late,) = fresh
    assert late["verdict"] == "not finished" and "the budget's end (40 s)" in late["reason"]
    _, ok = san.report(san.merge([slow], fresh), pairs, "abc1234")
    assert not ok  # the kept entry is of another commit, the other did not finish


def test_resume_skips_the_pairs_clean_at_this_commit_only(monkeypatch):
    monkeypatch.setattr(st.Unit, "builds_here", lambda self: True)
    pairs = san.plan(["memcheck"], ["gemm_01_naive"])
    previous = [san.entry("memcheck", "gemm_01_naive/reduced", san.Verdict("clean", 0, 3, 3), 2.0, "abc1234", "d"),
                san.entry("memcheck", "gemm_01_naive/full", san.Verdict("clean", 0, 2, 2), 2.0, "0000000", "d")]
    runner = FakeRunner({})
    fresh = _run(pairs, runner, [], previous=previous, resume=True)
    assert [a[1] for a in runner.asked] == ["gemm_01_naive/full"]  # clean at another commit: run again
    _, ok = san.report(san.merge(previous, fresh), pairs, "abc1234")
    assert ok
    _, ok = san.report(previous, pairs, "abc1234")  # without the rerun, one entry is stale
    assert not ok


def test_a_kernel_that_does_not_build_here_is_skipped_not_clean(monkeypatch):
    monkeypatch.setattr(st.Unit, "builds_here", lambda self: self.name != "gemm_09_wgmma_tf32")
    pairs = san.plan(["memcheck"], ["gemm_09_wgmma_tf32"], ["reduced"])
    runner = FakeRunner({})
    (e,) = _run(pairs, runner, [])
    assert e["verdict"] == "skipped" and "@arch" in e["reason"] and not runner.asked


def test_merge_replaces_what_ran_and_keeps_the_rest_in_plan_order():
    old = [san.entry(tool, target, san.Verdict("clean", 0, 1, 1), 1.0, "old1234", "d")
           for tool, target in [("racecheck", "vector_add/reduced"), ("memcheck", "gemm_01_naive/reduced"),
                                ("memcheck", "vector_add/reduced")]]
    new = [san.entry("memcheck", "gemm_01_naive/reduced", san.Verdict("errors", 4, 1, 3), 1.0, "new5678", "d")]
    merged = san.merge(old, new)
    assert [(e["tool"], e["target"], e["commit"]) for e in merged] == [
        ("memcheck", "vector_add/reduced", "old1234"), ("memcheck", "gemm_01_naive/reduced", "new5678"),
        ("racecheck", "vector_add/reduced", "old1234")]


def test_scrub_leaves_no_machine_path():
    text = (f"========= at k+0x10 in {REPO}/kernels/common/gemm_wgmma.cuh:300\n"
            f"=========     Host Frame: [0x1] in {sys.prefix}/lib/python3/site-packages/torch/lib/libtorch_cuda.so\n"
            "=========     Host Frame: [0x2] in /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
            f"{st.CALL} 1/2 gemm 37x129x65: 0.10 s\n========= ERROR SUMMARY: 0 errors\n")
    clean = san.scrub(text)
    assert "./kernels/common/gemm_wgmma.cuh:300" in clean and "<venv>/" in clean and "<path>/libcuda.so.1" in clean
    assert not re.search(r"(?<![\w.<>~])/\w", clean.replace("1/2", "")), clean
    assert san.judge("memcheck", clean, 0, False).errors == 0


def test_exclude_takes_the_sanitizers_filters_only():
    assert san._excludes(["initcheck=kns=reduce_kernel", "initcheck=regex=at::native"]) == {
        "initcheck": ["kns=reduce_kernel", "regex=at::native"]}
    for bad in ["reduce_kernel", "initcheck=reduce_kernel", "nocheck=kns=x"]:
        with pytest.raises(SystemExit, match="--exclude takes"):
            san._excludes([bad])


def test_list_and_no_gpu_run_nothing(capsys, monkeypatch):
    assert san.main(["--list", "--tools", "racecheck", "--targets", "tail_backward"]) == 0
    out = capsys.readouterr().out
    assert "racecheck  tail_backward/reduced" in out and "tail_backward/full" in out and "2 (tool, target) pairs" in out
    monkeypatch.setattr(env, "mode", lambda: "compile-only")
    assert san.main(["--targets", "vector_add"]) == 0
    assert "nothing was checked" in capsys.readouterr().out
    assert san.main(["--targets", "no_such_kernel"]) == 1


FAKE_SANITIZER = """#!{python}
# Stands in for compute-sanitizer: prints what the worker and the tool would, by target.
import sys, time
target = sys.argv[-1]
print("========= COMPUTE-SANITIZER")
print("{start} " + target + ": 2 calls")
print("{call} 1/2 gemm 37x129x65: 0.10 s")
if "gemm_02" in target:
    print("========= Invalid __global__ write of size 4 bytes")
    print("=========     at gemm_kernel+0x40 in {repo}/kernels/gemm_02_coalesced.cu:70")
    print("========= ERROR SUMMARY: 1 error")
    sys.exit({code})
if "gemm_03" in target:
    time.sleep(60)
print("{call} 2/2 gemm 37x129x68: 0.10 s")
print("{done} " + target + ": 2 calls")
print("========= ERROR SUMMARY: 0 errors")
"""


def test_main_records_every_verdict_and_a_log_per_target(tmp_path, monkeypatch, capsys):
    fake = tmp_path / "compute-sanitizer"
    fake.write_text(FAKE_SANITIZER.format(python=sys.executable, start=st.START, call=st.CALL, done=st.DONE,
                                          repo=REPO, code=san.ERROR_EXITCODE))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(env, "mode", lambda: "gpu")
    monkeypatch.setattr(env, "device_slug", lambda name=None: H100["slug"])
    monkeypatch.setattr(results, "metadata", lambda: {"device": dict(H100), "torch": "2.14.1", "cuda": "13.0",
                                                      "git_commit": "abc1234", "date": "2026-01-01T00:00:00+00:00"})
    monkeypatch.setattr(results, "git_commit", lambda repo=REPO: "abc1234")
    monkeypatch.setattr(san, "sanitizer_path", lambda: str(fake))
    monkeypatch.setattr(san, "prebuild", lambda pairs: None)
    monkeypatch.setattr(st.Unit, "builds_here", lambda self: True)
    root = tmp_path / "results"
    args = ["--tools", "memcheck", "--classes", "reduced", "--results-dir", str(root), "--timeout", "3"]
    assert san.main(args + ["--targets", "gemm_0[1-3]_*"]) == 1
    out = capsys.readouterr().out
    assert "[1/3] memcheck  gemm_01_naive/reduced ... clean" in out and "3 of 3" not in out
    record = results.read(root / H100["slug"] / "sanitize.json")
    got = {e["target"]: (e["verdict"], e["errors"]) for e in record["entries"]}
    assert got == {"gemm_01_naive/reduced": ("clean", 0), "gemm_02_coalesced/reduced": ("errors", 1),
                   "gemm_03_smem_tiled/reduced": ("not finished", None)}
    assert all(e["commit"] == "abc1234" and e["device"] == H100["slug"] for e in record["entries"])
    log = root / H100["slug"] / "logs/sanitize/memcheck/gemm_02_coalesced.reduced.log"
    assert "./kernels/gemm_02_coalesced.cu:70" in log.read_text() and str(REPO) not in log.read_text()
    # a later run of one target replaces its entry and keeps the others
    assert san.main(args + ["--targets", "gemm_01_naive"]) == 0
    record = results.read(root / H100["slug"] / "sanitize.json")
    assert len(record["entries"]) == 3 and json.loads(json.dumps(record))["kind"] == "sanitize"
