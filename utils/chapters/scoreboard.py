"""The scoreboard: the four models' speedup over eager fp32 (TF32 off) after each chapter, built from
the best kernels so far, with torch.compile as the reference line. One GPU run measures every stage
and records it; each chapter shows the stages up to its own from that record.

    python -m utils.chapters.scoreboard                      # on a GPU: check, time and record every stage
    python -m utils.chapters.scoreboard --reps 20 --stages 02 03 --no-record
    scoreboard.show("03", S)                        # chapter 03's last section: plot and table, from the record
    scoreboard.show_final(S)                        # notebook 13's last table: the drop-ins' forward, training
                                                    # step and autocast against eager and torch.compile

Stages, all at the strict tier (fp32, TF32 off) and KernelBench's full sizes. "Eager rest" is the
reference Model's own modules after the GEMM; y is the GEMM's output with Linear's bias:

    02  rung 1, the naive GEMM (gemm_01_naive), then + Linear's bias and the eager rest
    03  rung 7 (gemm_07_pipelined), then + Linear's bias and the eager rest
    04  rung 7 with the bias in its epilogue (gemm_bias.linear_bias; 94: linear_two_biases, both
        biases), then the eager rest
    05  04's GEMM + chapter 05's fused activations (activations.cu): 94 bias_hardtanh_mish (its
        second bias moves there), 37 swish_bias, 62 leaky_relu_x2 after eager GroupNorm; 75 has
        no activation and stays as in 04
    06  04's GEMM + chapter 06's fused activation + GroupNorm kernels (groupnorm.cu); 75: its
        GroupNorm kernel (group_norm_welford), then eager min and + bias
    07  06, with 75's tail in one kernel: group_norm_min_bias (min_bias_broadcast.cu)
    09  the whole model in one tensor-core GEMM (fused_gemm_groupnorm, strict tier: rung 10's
        3xTF32 with the bias, activations and GroupNorm in its epilogue; 75's row minimum too);
        where it does not apply (K % 4 != 0), rung 10's linear + 07's tails
    10  the solutions' ModelNew (solutions/): the same kernels as 09 through the registered
        workbook:: operators

Each composition runs on the reference Model's own parameters, its GroupNorm γ/β and biases
randomised first as the harness does (the defaults γ = 1, β = 0 would hide an ignored parameter).
Before anything is timed, each is checked against the Model at its tier, on the "odd" scale (tile
edges) and on the very input it is then timed on: a wrong composition gets no number (the run
names it, records the rest and exits 1).

Timing: chapter 10's method (utils.bench.time_interleaved): per problem, eager, torch.compile in both
COMPILE_MODES (TF32 off; the faster is the reference line) and every stage timed in turn, rep by rep,
the order rotating, after a warm-up to the clock the GPU holds under sustained work. Contenders slower
than SLOW_S a call (rung 1: 0.3-0.6 s) are timed in turn in a group of their own with fewer reps (at
least MIN_REPS, about SLOW_BUDGET_S), their ratio over the main group's eager. Kind "scoreboard":

    {"problem", "stage": "eager" | a COMPILE_MODES name | "02" ... "10", "contender", "median_ms", "p20_ms",
     "p80_ms", "reps", "warmup", "first_call_s", "max_abs_vs_eager", "timing": "interleaved", "group"}

p20/p80 are the run's spread (report.scoreboard.ratio_spread). Stage 10 quotes what chapter 10's
"solutions" does (ours, TF32 off, steady), stage 09 what chapter 09's "whole_model_fusion" does (fused,
strict): tests/test_headline_ratios.py holds each pair to agree within both runs' spread.

Tested on the CPU with STAND_INS, PyTorch functions with the kernels' exported names and
signatures (tests/test_scoreboard.py), and with the real kernels on a GPU.
"""
from __future__ import annotations

import argparse
import sys
import time
from types import SimpleNamespace
from typing import Callable, Mapping

import matplotlib
import pandas as pd
import torch
import torch.nn.functional as F
from matplotlib.ticker import FuncFormatter
from torch import Tensor, nn

from solutions import solution
from utils import bench, build, env, plots, precision, results
from utils.chapters import session as chapter
from utils.chapters import solution_debriefs as debriefs
from utils.check import TIERS
from utils.check import _randomise  # the harness's own rule, not a copy of it
from utils.problems import get_problem
from utils.report.records import formatted, to_markdown
from utils.report.scoreboard import (COMPILE_MODES, EAGER, EAGER_COLUMN, KIND, PROBLEM_IDS, STAGES, caption, fmt_x,
                                     footnotes, markdown, ordered, speedups, stages_upto, table)
from utils.results import short_commit
from utils.run import skip

REFERENCES = (EAGER, *COMPILE_MODES)  # the rows every problem has besides the stages
SLOW_S = 0.05  # seconds per call above which a contender is timed with fewer repetitions
SLOW_BUDGET_S = 3.0  # about this much timing for a slow contender
MIN_REPS = 5
TIMING = chapter.TIMING  # every entry's "timing": in turn (utils.bench.time_interleaved), as chapter 10's rows


# One colour per stage in every chapter's plot: earlier stages drawn faded, the chapter's own solid.
STAGE_COLOURS = {"02": "#9e9ac8", "03": "#6baed6", "04": "#31a354", "05": "#fdae6b", "06": "#fd8d3c",
                 "07": "#e6550d", "09": "#a63603", "10": "#7f2704"}
COMPILE_COLOUR = "#1f77b4"


# --------------------------------------------------------------------------- the compositions

def _y(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    return F.linear(x, w, b)


# PyTorch stand-ins for the kernels, with their exported names and signatures (a test compares them
# with the `// @export` lines): the compositions' wiring can be checked on a CPU.
STAND_INS: dict[str, SimpleNamespace] = {
    "gemm_01_naive": SimpleNamespace(gemm=lambda x, w: F.linear(x, w)),
    "gemm_07_pipelined": SimpleNamespace(gemm=lambda x, w: F.linear(x, w)),
    "gemm_bias": SimpleNamespace(linear_bias=lambda x, w, bias: F.linear(x, w, bias),
                                 linear_two_biases=lambda x, w, bias, extra_bias: F.linear(x, w, bias) + extra_bias),
    "activations": SimpleNamespace(
        bias_hardtanh_mish=lambda x, bias, min_val, max_val: F.mish(F.hardtanh(x + bias, min_val, max_val)),
        swish_bias=lambda x, bias: torch.sigmoid(x) * x + bias,
        leaky_relu_x2=lambda x, negative_slope: 2 * F.leaky_relu(x, negative_slope)),
    "groupnorm": SimpleNamespace(
        group_norm_welford=lambda x, num_groups, gamma, beta, eps: F.group_norm(x, num_groups, gamma, beta, eps),
        bias_hardtanh_mish_group_norm=lambda x, bias, min_val, max_val, num_groups, gamma, beta, eps: F.group_norm(
            F.mish(F.hardtanh(x + bias, min_val, max_val)), num_groups, gamma, beta, eps),
        swish_bias_group_norm=lambda x, bias, num_groups, gamma, beta, eps: F.group_norm(
            torch.sigmoid(x) * x + bias, num_groups, gamma, beta, eps),
        group_norm_leaky_relu_x2=lambda x, num_groups, gamma, beta, eps, negative_slope: 2 * F.leaky_relu(
            F.group_norm(x, num_groups, gamma, beta, eps), negative_slope)),
    "min_bias_broadcast": SimpleNamespace(
        group_norm_min_bias=lambda x, num_groups, gamma, beta, eps, bias: torch.min(
            F.group_norm(x, num_groups, gamma, beta, eps), dim=1, keepdim=True)[0] + bias),
    "gemm_10_3xtf32": SimpleNamespace(linear=lambda x, w, bias, w_residual: F.linear(x, w, bias)),
    # each whole model returns (out, the GEMM's output when save_gemm_output, else an empty tensor)
    "fused_gemm_groupnorm": SimpleNamespace(
        fusable=lambda x, w, num_groups: True,
        linear_bias_hardtanh_mish_group_norm=lambda x, w, linear_bias, bias, min_val, max_val, num_groups, gamma, beta,
        eps, w_residual, save_gemm_output: (F.group_norm(F.mish(F.hardtanh(F.linear(x, w, linear_bias) + bias, min_val,
                                                                             max_val)), num_groups, gamma, beta, eps),
                                            x.new_empty(0)),
        linear_swish_bias_group_norm=lambda x, w, linear_bias, bias, num_groups, gamma, beta, eps, w_residual,
        save_gemm_output: (F.group_norm(F.silu(F.linear(x, w, linear_bias)) + bias, num_groups, gamma, beta, eps),
                           x.new_empty(0)),
        linear_group_norm_leaky_relu_x2=lambda x, w, linear_bias, num_groups, gamma, beta, eps, negative_slope,
        w_residual, save_gemm_output: (2 * F.leaky_relu(F.group_norm(F.linear(x, w, linear_bias), num_groups, gamma,
                                                                     beta, eps), negative_slope), x.new_empty(0)),
        linear_group_norm_min_bias=lambda x, w, linear_bias, num_groups, gamma, beta, eps, bias, w_residual,
        save_gemm_output: (torch.min(F.group_norm(F.linear(x, w, linear_bias), num_groups, gamma, beta, eps), dim=1,
                                     keepdim=True)[0] + bias, x.new_empty(0))),
}

def _linear(pid: int, m: nn.Module) -> nn.Linear:
    return {94: lambda: m.gemm, 75: lambda: m.gemm, 37: lambda: m.matmul, 62: lambda: m.fc}[pid]()


def _group_norm(pid: int, m: nn.Module) -> nn.GroupNorm:
    return {94: lambda: m.groupnorm, 75: lambda: m.group_norm, 37: lambda: m.group_norm, 62: lambda: m.gn}[pid]()


def eager_tail(pid: int, m: nn.Module, y: Tensor) -> Tensor:
    """The reference Model's forward after its Linear (y includes Linear's bias), with its own modules."""
    if pid == 94:
        return m.groupnorm(m.mish(m.hardtanh(y + m.bias)))
    if pid == 75:
        return torch.min(m.group_norm(y), dim=1, keepdim=True)[0] + m.bias
    if pid == 37:
        return m.group_norm(torch.sigmoid(y) * y + m.bias)
    z = m.leaky_relu(m.gn(y))  # 62
    return z + z


def _activation_then_eager(pid: int, m: nn.Module, y: Tensor, act) -> Tensor:
    """Stage 05's tail: chapter 05's fused activation where the problem has one, eager GroupNorm."""
    if pid == 94:
        return m.groupnorm(act.bias_hardtanh_mish(y, m.bias, m.hardtanh.min_val, m.hardtanh.max_val))
    if pid == 37:
        return m.group_norm(act.swish_bias(y, m.bias))
    if pid == 62:
        return act.leaky_relu_x2(m.gn(y), m.leaky_relu.negative_slope)
    return eager_tail(pid, m, y)  # 75: no activation


def _fused_tail(pid: int, m: nn.Module, y: Tensor, gn, mb=None) -> Tensor:
    """Stages 06-08: chapter 06's fused kernels; 75 with chapter 07's (mb) when given, else GroupNorm alone."""
    g = _group_norm(pid, m)
    G, gamma, beta, eps = g.num_groups, g.weight, g.bias, g.eps
    if pid == 94:
        return gn.bias_hardtanh_mish_group_norm(y, m.bias, m.hardtanh.min_val, m.hardtanh.max_val, G, gamma, beta, eps)
    if pid == 37:
        return gn.swish_bias_group_norm(y, m.bias, G, gamma, beta, eps)
    if pid == 62:
        return gn.group_norm_leaky_relu_x2(y, G, gamma, beta, eps, m.leaky_relu.negative_slope)
    if mb is not None:
        return mb.group_norm_min_bias(y, G, gamma, beta, eps, m.bias)
    return torch.min(gn.group_norm_welford(y, G, gamma, beta, eps), dim=1, keepdim=True)[0] + m.bias


def _whole_model(pid: int, m: nn.Module, fk) -> Callable[[Tensor], Tensor]:
    """Stage 08: the model in one launch of fused_gemm_groupnorm (fk) on m's parameters."""
    lin, g = _linear(pid, m), _group_norm(pid, m)
    w, b, G, gamma, beta, eps = lin.weight, lin.bias, g.num_groups, g.weight, g.bias, g.eps
    # each launcher also takes the weight's kept small parts (none) and whether to keep the GEMM's
    # output (no: inference), and returns (out, that output)
    if pid == 94:
        return lambda x: fk.linear_bias_hardtanh_mish_group_norm(x, w, b, m.bias, m.hardtanh.min_val,
                                                                 m.hardtanh.max_val, G, gamma, beta, eps, None, False)[0]
    if pid == 37:
        return lambda x: fk.linear_swish_bias_group_norm(x, w, b, m.bias, G, gamma, beta, eps, None, False)[0]
    if pid == 62:
        return lambda x: fk.linear_group_norm_leaky_relu_x2(x, w, b, G, gamma, beta, eps, m.leaky_relu.negative_slope,
                                                            None, False)[0]
    return lambda x: fk.linear_group_norm_min_bias(x, w, b, G, gamma, beta, eps, m.bias, None, False)[0]


def _drop_in(pid: int, model: nn.Module, scale: str) -> nn.Module:
    """Stage 09: the solution's ModelNew with the reference's parameters (the same tensors, not copies)."""

    with torch.device("meta"):  # no weights drawn: they are the model's own
        new = solution(pid).ModelNew(*get_problem(pid).init_inputs(scale))
    new.load_state_dict(model.state_dict(), assign=True)
    return new.eval()


def contender(stage: str, pid: int, model: nn.Module, kernels: Mapping[str, object],
              scale: str = "full") -> Callable[[Tensor], Tensor]:
    """Stage `stage`'s forward of problem `pid` on `model`'s parameters, x -> output, calling the
    kernel modules in `kernels` ({kernel file name: module}: build.load_kernels' result, or STAND_INS).
    `scale`: the model's, for stage 10's ModelNew."""
    if stage not in STAGES:
        raise ValueError(f"no stage {stage!r}; the stages are {', '.join(STAGES)}")
    m, pid = model, get_problem(pid).id
    lin = _linear(pid, m)
    w, b = lin.weight, lin.bias
    k = {name: kernels[name] for name in STAGES[stage].kernels}
    if stage in ("02", "03"):
        gemm = k["gemm_01_naive" if stage == "02" else "gemm_07_pipelined"].gemm
        return lambda x: eager_tail(pid, m, gemm(x, w) + b)
    fused = k.get("gemm_bias")
    if stage == "04":
        if pid == 94:  # both biases in the epilogue
            return lambda x: m.groupnorm(m.mish(m.hardtanh(fused.linear_two_biases(x, w, b, m.bias))))
        return lambda x: eager_tail(pid, m, fused.linear_bias(x, w, b))
    if stage == "05":
        return lambda x: _activation_then_eager(pid, m, fused.linear_bias(x, w, b), k["activations"])
    if stage == "06":
        return lambda x: _fused_tail(pid, m, fused.linear_bias(x, w, b), k["groupnorm"])
    if stage == "07":
        return lambda x: _fused_tail(pid, m, fused.linear_bias(x, w, b), k["groupnorm"], k["min_bias_broadcast"])
    if stage == "09":
        fk = k["fused_gemm_groupnorm"]
        whole = _whole_model(pid, m, fk)
        # inputs the fused kernel does not take (the "odd" scale's K % 4 != 0): rung 10 + 07's tails
        unfused = lambda x: _fused_tail(pid, m, k["gemm_10_3xtf32"].linear(x, w, b, None), k["groupnorm"],
                                        k["min_bias_broadcast"])
        G = _group_norm(pid, m).num_groups
        return lambda x: whole(x) if fk.fusable(x, w, G) else unfused(x)
    return _drop_in(pid, m, scale)  # 10


# --------------------------------------------------------------------------- checking and timing

def verify(out, expected: Tensor, tier: str = "strict") -> tuple[bool, str, float]:
    """Every element of `out` against the reference's at `tier` (utils.check.TIERS), shape and dtype
    included: (all within the tier, what was found, the largest absolute difference)."""
    if not isinstance(out, Tensor) or out.shape != expected.shape or out.dtype != expected.dtype:
        got = f"{tuple(out.shape)} {out.dtype}" if isinstance(out, Tensor) else type(out).__name__
        return False, f"returned {got}, expected {tuple(expected.shape)} {expected.dtype}", float("inf")
    t = TIERS[tier]
    close = torch.isclose(out, expected, atol=t.atol, rtol=t.rtol, equal_nan=True)
    err = (out - expected).abs().nan_to_num(float("inf")).max().item() if out.numel() else 0.0
    off = int((~close).sum())
    return off == 0, f"max abs {err:.1e} vs the reference, {off} of {out.numel()} elements off at the {tier} tier", err


def reps_for(seconds_per_call: float, reps: int) -> tuple[int, int]:
    """(reps, warmup) for a contender that takes `seconds_per_call`: as asked, or fewer for a slow one."""
    if seconds_per_call <= SLOW_S:
        return reps, 10
    return max(MIN_REPS, min(reps, int(SLOW_BUDGET_S / seconds_per_call))), 1


def _time_in_turn(pid: int, timed: dict, reps: int, timer, say) -> list[dict]:
    """The checked contenders of one problem ({key: (label, fn, reps, warmup, first call s, max abs)}) timed in
    turn by `timer` (bench.time_interleaved): those that reps_for left at `reps` in one group ("main"), the slow
    ones in another ("slow") with the fewest reps any of them was given. Entries of kind "scoreboard"."""
    groups = {"main": [k for k, v in timed.items() if v[2] == reps],
              "slow": [k for k, v in timed.items() if v[2] != reps]}
    entries = []
    for group, keys in groups.items():
        if not keys:
            continue
        n, warmup = min(timed[k][2] for k in keys), min(timed[k][3] for k in keys)
        say(f"problem {pid}: {len(keys)} contenders timed in turn ({group} group), {n} reps each")
        timings = timer({k: timed[k][1] for k in keys}, reps=n, warmup=warmup)
        for key in keys:
            label, _, _, _, first, err = timed[key]
            t = timings[key]
            say(f"problem {pid}: {label:<42} {t.median:10.3f} ms (p20 {t.p20:.3f}, p80 {t.p80:.3f}, n={n})")
            entries.append({"problem": pid, "stage": key, "contender": label, "median_ms": t.median,
                            "p20_ms": t.p20, "p80_ms": t.p80, "reps": n, "warmup": warmup, "first_call_s": first,
                            "max_abs_vs_eager": err, "timing": TIMING, "group": group})
    return entries


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed_call(fn: Callable[[], Tensor], device: torch.device) -> tuple[Tensor, float]:
    start = time.perf_counter()
    out = fn()
    _sync(device)
    return out, time.perf_counter() - start


def reference_model(pid: int, scale: str, device, seed: int = 0) -> tuple[nn.Module, Tensor]:
    """The reference Model at `scale` under `seed`, its GroupNorm γ/β and biases randomised as the
    harness does, in eval mode on `device`, and one input drawn like get_inputs."""

    p = get_problem(pid)
    model = p.make_model(scale, seed=seed)
    _randomise(model, seed)
    (x,) = p.get_inputs(scale, generator=torch.Generator().manual_seed(seed + 1))
    return model.to(device).eval(), x.to(device)


def measure(stages=tuple(STAGES), problems=PROBLEM_IDS, *, reps: int = 50, kernels: Mapping[str, object] | None = None,
            compile_modes: Mapping[str, str] = COMPILE_MODES, scale: str = "full", device: str = "cuda", seed: int = 0,
            timer=None, progress: bool = True) -> tuple[list[dict], list[str]]:
    """Check, then time, eager, torch.compile (each of compile_modes) and every stage on each problem,
    TF32 off, all in turn (utils.bench.time_interleaved, as chapter 10 times its contenders; the slow ones,
    SLOW_S, in a second group of their own). Returns (entries of kind "scoreboard", failures): a contender
    that is wrong, or whose kernels do not build for this GPU, is named in failures and gets no entry.
    kernels: {name: module} (default: build.load_kernels of what the stages need, cold builds in
    parallel); timer: utils.bench.time_interleaved (tests pass their own: timer({name: fn}, reps=, warmup=)
    -> {name: bench.Timing})."""

    device = torch.device(device)
    timer = timer or bench.time_interleaved
    start = time.perf_counter()

    def say(text: str) -> None:
        if progress:
            print(f"[{time.perf_counter() - start:6.1f} s] {text}", flush=True)

    stages = [s for s in STAGES if s in set(stages)]  # stage order, whatever order they came in
    failures = []
    if kernels is None:
        wanted = list(dict.fromkeys(k for s in stages for k in STAGES[s].kernels))
        cannot = {k for k in wanted if not build.builds_here(k)}
        for s in [s for s in stages if cannot & set(STAGES[s].kernels)]:
            failures.append(f"stage {s}: {', '.join(sorted(cannot & set(STAGES[s].kernels)))} not built for this GPU")
            stages.remove(s)
        say(f"loading {len(wanted) - len(cannot)} kernel files (cold ones built side by side)")
        kernels = build.load_kernels([k for k in wanted if k not in cannot])
    entries = []
    for pid in problems:
        model, x = reference_model(pid, scale, device, seed)
        odd, x_odd = reference_model(pid, "odd", device, seed)
        torch._dynamo.reset()  # each problem compiles afresh
        with precision.ieee_fp32(), torch.no_grad():
            expected, expected_odd = model(x), odd(x_odd)
            runs = {EAGER: (EAGER, lambda: model(x), None)}
            for name, mode in compile_modes.items():
                compiled = torch.compile(model, mode=mode)
                runs[name] = (name, lambda c=compiled: c(x), None)
            for s in stages:
                runs[s] = (STAGES[s].label, lambda f=contender(s, pid, model, kernels, scale): f(x),
                           lambda s=s: contender(s, pid, odd, kernels, "odd")(x_odd))
            timed = {}
            for key, (label, fn, odd_fn) in runs.items():
                tier = STAGES[key].tier if key in STAGES else "strict"
                if odd_fn is not None:
                    ok, detail, _ = verify(odd_fn(), expected_odd, tier)
                    if not ok:
                        failures.append(f"problem {pid}, {label}: wrong at the odd scale ({detail}); not timed")
                        say(f"problem {pid}: {label}: WRONG at the odd scale, {detail}: not timed")
                        continue
                out, first = _timed_call(fn, device)
                ok, detail, err = verify(out, expected, tier)
                del out
                if not ok:
                    failures.append(f"problem {pid}, {label}: wrong ({detail}); not timed")
                    say(f"problem {pid}: {label}: WRONG, {detail}: not timed")
                    continue
                _, again = _timed_call(fn, device)
                n, warmup = reps_for(again, reps)
                say(f"problem {pid}: {label}: first call {first:.2f} s, {detail}" +
                    (f"; slow ({again:.2f} s a call): {n} reps" if n < reps else ""))
                timed[key] = (label, fn, n, warmup, first, err)
            entries += _time_in_turn(pid, timed, reps, timer, say)
        del model, odd, x, x_odd, runs, timed, expected, expected_odd
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return entries, failures


def plot(rec: dict, stage: str, *, save=None):
    """Per problem, a bar per stage up to `stage` (earlier ones faded, `stage` solid and outlined),
    speedup over eager fp32 on a log axis, the faster torch.compile mode as a dashed line per problem;
    below, where the record has torch.compile, the same stages over the faster torch.compile mode."""
    table = speedups(rec)
    shown = [s for s in stages_upto(stage) if any(s in row for row in table.values())]
    pids = ordered(list(table))
    what = f"Scoreboard after chapter {stage}: speedup over eager fp32 (TF32 off), log scale"
    compiled = any("compile" in row for row in table.values())
    fig = plots._figure(what, rec, figsize=(8.0, 8.1 if compiled else 4.5))
    fig.suptitle(f"{what}\n{plots.provenance(rec)} · commit {short_commit(rec['git_commit'])}")
    with matplotlib.rc_context(plots.STYLE):
        ax = fig.add_subplot(2 if compiled else 1, 1, 1)
        values = _stage_bars(ax, table, pids, shown, stage, over="eager")
        label = "torch.compile, the faster mode"
        for i, p in enumerate(pids):
            if "compile" in table[p]:
                values.append(table[p]["compile"])
                ax.hlines(table[p]["compile"], i - 0.45, i + 0.45, colors=COMPILE_COLOUR, linestyles="--", lw=1.5,
                          label=label, zorder=3)
                label = None  # one legend entry
        ax.axhline(1.0, color=plots.REFERENCE, lw=1, label="eager fp32 (1x)")
        _log_axis(ax, values, pids, "speedup over eager fp32, TF32 off (log scale)")
        if compiled:
            ax.set_title("over eager fp32", loc="left", fontsize=10)
            below = fig.add_subplot(2, 1, 2)
            values = _stage_bars(below, table, pids, shown, stage, over="compile")
            below.axhline(1.0, color=COMPILE_COLOUR, lw=1.5, ls="--", label="torch.compile, the faster mode (1x)")
            _log_axis(below, values, pids, "torch.compile's time / the stage's (log scale)")
            below.set_title("over the faster torch.compile mode, TF32 off", loc="left", fontsize=10)
    return plots.finish(fig, save)


def _stage_bars(ax, table: dict, pids: list[int], shown: list[str], stage: str, over: str) -> list[float]:
    """A bar per stage and problem: its speedup over eager fp32 (over="eager") or over the faster torch.compile
    mode (over="compile", problems without compile left out), labelled; `stage` solid and outlined, earlier
    stages faded. Returns the values drawn, and 1."""
    values = [1.0]
    width = 0.8 / max(1, len(shown))
    for j, s in enumerate(shown):
        at = [(i, table[p][s] / (table[p]["compile"] if over == "compile" else 1.0)) for i, p in enumerate(pids)
              if s in table[p] and (over == "eager" or "compile" in table[p])]
        xs, ys = [i - 0.4 + width * (j + 0.5) for i, _ in at], [v for _, v in at]
        values += ys
        mine = s == stage
        bars = ax.bar(xs, ys, width, color=STAGE_COLOURS[s], alpha=1.0 if mine else 0.35, label=STAGES[s].label,
                      edgecolor="black" if mine else "white", linewidth=1.2 if mine else 0.5)
        plots.label_bars(ax, bars, [fmt_x(v) for v in ys], color="black" if mine else "#555555",
                         fontweight="bold" if mine else "normal")
    return values


def _log_axis(ax, values: list[float], pids: list[int], ylabel: str) -> None:
    ax.set_yscale("log")
    ax.set_ylim(min(values) / 3, max(values) * 4)  # room below the lowest bar; plots.finish raises the top for labels
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.set_xticks(range(len(pids)), [f"problem {p}" for p in pids])
    ax.set_ylabel(ylabel)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))


def show(stage: str, session) -> None:
    """A chapter's scoreboard, from the record of kind "scoreboard": this GPU's on a GPU, without one
    the reading device's (utils.results.reading_device; never a mix of devices). The plot of every
    stage up to `stage`, then the table. `session`: a utils.chapters.session.Session, or any object with
    .on_gpu and .results_dir. Without a record: one line saying so and how to record one."""

    stages_upto(stage)  # an unknown stage is the caller's mistake: say so even without a record
    rec = results.recorded(KIND, session.results_dir, on_gpu=session.on_gpu)
    if rec is None:
        where = "for this GPU" if session.on_gpu else "in the results"
        skip("the scoreboard", f"no {KIND} record {where}; on a GPU, `python -m utils.chapters.scoreboard` measures and "
                               "records every stage in one run")
        return
    _display(markdown(rec, stage), plot(rec, stage), caption(rec), shown_table(rec, stage), footnotes(rec, stage))


def shown_table(rec: dict, stage: str | None = None) -> pd.DataFrame:
    """table(rec, stage) as a notebook displays it: values as markdown() writes them, the stage marked "(this chapter)"."""
    frame = table(rec, stage)
    shown = formatted(frame, {c: "{:.3f}" if c == EAGER_COLUMN else fmt_x for c in frame.columns})
    return shown.rename(columns={STAGES[stage].label: f"{STAGES[stage].label} (this chapter)"} if stage else {})


def _display(text: str, fig, head: str, frame: pd.DataFrame, notes=()) -> None:
    """In a notebook the figure (if any), `head` in Markdown, the DataFrame (as HTML) and `notes`; elsewhere
    `text` (the same table in Markdown) is printed."""
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
    except ImportError:
        get_ipython = None
    if get_ipython is None or get_ipython() is None:
        print(text)
        return
    shown = ([fig] if fig is not None else []) + [Markdown(head), frame] + ([Markdown("\n\n".join(notes))] if notes else [])
    display(*shown)


# --------------------------------------------------------------------------- the final scoreboard

# Notebooks 10 and 13's three side-by-side records, and the columns the workbook's last table makes of them:
# (record kind, TF32 allowed, header). Autocast is timed with TF32 off.
FINAL_COLUMNS = (("solutions", False, "forward, TF32 off"), ("solutions", True, "forward, TF32 on"),
                 ("training", False, "training step, TF32 off"), ("training", True, "training step, TF32 on"),
                 ("autocast", False, "forward under autocast (bf16)"))
FINAL_KINDS = {"solutions": "the forward", "training": "the training step", "autocast": "the forward under autocast"}


RATIO_COLUMNS = ("× eager", "× compile")  # final_table's second column level


def final_table(records: Mapping[str, dict | None]) -> pd.DataFrame:
    """The workbook's last table, from notebooks 10 and 13's records of one device ({kind: record or None}, the
    kinds of FINAL_KINDS): per problem (the index) and setting (FINAL_COLUMNS' header, the columns' first
    level), the solution by default ("ours", steady state) over eager with the same setting ("× eager") and
    over the faster torch.compile mode with the same setting ("× compile"), from session.solution_ratios; NaN
    where a record lacks the row. A setting no record has is left out; raises for no record, or records of
    more than one device."""
    present = {kind: rec for kind, rec in records.items() if rec is not None}
    if not present:
        raise ValueError("no record to tabulate")
    devices = {rec["device"]["name"] for rec in present.values()}
    if len(devices) != 1:  # a table that mixed devices would compare what was never run side by side
        raise ValueError(f"the records come from more than one device: {', '.join(sorted(devices))}")
    ratios = {(kind, r["tf32"], r["problem"]): r for kind, rec in present.items()
              for r in chapter.solution_ratios(rec["entries"]) if r["protocol"] == "steady"}
    columns = [c for c in FINAL_COLUMNS if any(key[:2] == c[:2] for key in ratios)]
    rows = {}
    for pid in ordered(list(dict.fromkeys(key[2] for key in ratios))):
        rows[pid] = {(head, over): ratios[kind, tf32, pid][key] if (kind, tf32, pid) in ratios else float("nan")
                     for kind, tf32, head in columns for over, key in zip(RATIO_COLUMNS, ("vs_eager", "vs_compile"))}
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.columns = pd.MultiIndex.from_tuples(frame.columns)
    frame.index.name = "problem"
    return frame


def final_caption(records: Mapping[str, dict | None]) -> str:
    present = {kind: rec for kind, rec in records.items() if rec is not None}
    (device,) = {rec["device"]["name"] for rec in present.values()}
    stamps = ", ".join(f"{FINAL_KINDS[kind]} {rec['date'][:10]} (`{short_commit(rec['git_commit'])}`)"
                       for kind, rec in present.items())
    text = (f"Ours by default, steady state: × eager · × the faster torch.compile mode, each with the same setting; "
            f"recorded on {device}: {stamps}.")
    missing = ", ".join(FINAL_KINDS[kind] for kind in FINAL_KINDS if kind not in present)
    return text + (f" Not recorded on this device: {missing}." if missing else "")


def final_markdown(records: Mapping[str, dict | None]) -> str:
    """final_table in Markdown under its caption: a column per setting, each cell "× eager · × compile"."""
    frame = final_table(records)
    heads = list(dict.fromkeys(head for head, _ in frame.columns))
    cells = pd.DataFrame({head: [f"{e:.2f}x · {c:.2f}x" if e == e and c == c else "–"
                                 for e, c in zip(frame[head, RATIO_COLUMNS[0]], frame[head, RATIO_COLUMNS[1]])]
                          for head in heads}, index=frame.index)
    return final_caption(records) + "\n\n" + to_markdown(cells, right=tuple(heads))


def show_final(session) -> None:
    """Notebook 13's last table (final_table), from the records of the device a notebook reads
    (this GPU's, or without one results.reading_device's). Without any: one line saying so."""

    records = {kind: results.recorded(kind, session.results_dir, on_gpu=session.on_gpu) for kind in FINAL_KINDS}
    if all(rec is None for rec in records.values()):
        where = "for this GPU" if session.on_gpu else "in the results"
        skip("the final scoreboard", f"no {', '.join(FINAL_KINDS)} record {where}; notebooks 10 and 13 record them on a GPU")
        return
    frame = final_table(records)
    _display(final_markdown(records), None, final_caption(records), formatted(frame, dict.fromkeys(frame.columns, "{:.2f}x")),
             [text] if (text := debriefs.final_findings(records)) else [])


# --------------------------------------------------------------------------- command line

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m utils.chapters.scoreboard", description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=50, help="timed repetitions per contender (slow ones get fewer)")
    ap.add_argument("--stages", nargs="+", choices=list(STAGES), default=list(STAGES), metavar="STAGE",
                    help=f"a selection of {', '.join(STAGES)} (default: all)")
    ap.add_argument("--problems", nargs="+", type=int, choices=PROBLEM_IDS, default=list(PROBLEM_IDS))
    ap.add_argument("--compile-modes", nargs="*", choices=list(COMPILE_MODES), default=list(COMPILE_MODES),
                    help="the torch.compile reference rows (default: both)")
    ap.add_argument("--no-record", action="store_true", help="print only; record nothing")
    ap.add_argument("--results-dir", default=None, help="results root to record under (default results/)")
    args = ap.parse_args(argv)

    if env.mode() != "gpu":
        print("the scoreboard is measured on a GPU; nothing to measure on this machine "
              "(chapters show the recorded one: utils.chapters.scoreboard.show).")
        return 0
    chapter.quiet_inductor()
    entries, failures = measure(args.stages, args.problems, reps=args.reps,
                                compile_modes={m: COMPILE_MODES[m] for m in args.compile_modes})
    notes = (f"python -m utils.chapters.scoreboard --reps {args.reps}: stages {' '.join(args.stages)}; strict tier, TF32 off, "
             f"full sizes; per problem every contender timed in turn (utils.bench.time_interleaved, as notebook 10); "
             f"those slower than {1e3 * SLOW_S:.0f} ms a call in a group of their own with fewer reps (at least "
             f"{MIN_REPS}, about {SLOW_BUDGET_S:.0f} s: see each entry's reps and group)")
    if failures:
        notes += "; not timed: " + "; ".join(failures)
    if not entries:
        print("nothing was timed:", *failures, sep="\n  ")
        return 1
    meta = {"device": {"name": env.device_name()}, "date": "(this run)", "git_commit": results.git_commit()}
    print(markdown({**meta, "entries": entries}))
    if not args.no_record:
        print("recorded", results.record(KIND, entries, notes=notes, results_dir=args.results_dir))
    if failures:
        print("FAILED (not timed):", *failures, sep="\n  ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
