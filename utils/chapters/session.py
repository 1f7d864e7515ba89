"""What the notebooks share beyond the other modules: building contenders, measuring them side by
side, summarising harness reports, and the exercise checkers' verdicts. A helper that two cells or
two notebooks would otherwise each define lives here, tested (tests/test_chapter.py).

    S = session(DEVICE, SCALE, REPS, RESULTS_DIR)                 # a notebook's parameters, resolved
    ref, new = solution_pair(94, "full", "cuda")                 # Model and ModelNew, the same weights
    rows = measure_solutions([94, 75, 37, 62], reps=50)           # notebook 10's side-by-side run of the forward
    rows = measure_training([94, 75, 37, 62], reps=50)            # 12's of a training step; measure_autocast: autocast
    display(ratio_table(rows, lambda r: ("vs_compile", 2.0, 2.5)))  # ratios, targets and verdicts, a DataFrame
    print(harness_summary(reports))                               # one line per check_model report
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from solutions import solution
from utils import bench, env, ops, precision, results
from utils.check import MOVED_DRAWS, TIERS, autocast_tier, judge_gradients
from utils.problems import get_problem
from utils.report.records import FRAMES, INTROS, to_markdown
from utils.run import skip

# The contenders of notebooks 10 and 13, in timing order. torch.compile's "max-autotune" mode would also
# capture CUDA graphs, which no other contender gets; "-no-cudagraphs" autotunes the same kernels.
COMPILE_MODES = {"torch.compile": "default", "torch.compile max-autotune-no-cudagraphs": "max-autotune-no-cudagraphs"}
PROTOCOLS = {"steady": False, "per_call": True}  # protocol -> bench.time_ms(sync_each=...)
# How every side-by-side run here times its contenders, recorded in each row as "timing": in turn, rep by rep
# (bench.compare(interleave=True), bench.time_interleaved), as the scoreboard does; each row keeps the run's
# spread (p20_ms, p80_ms), from which a ratio's is computed (utils.report.scoreboard.ratio_spread).
TIMING = "interleaved"


@dataclass(frozen=True)
class Session:
    """A notebook's parameters resolved against this machine (utils.env's modes)."""
    mode: str  # "gpu", "compile-only" or "reference-only"
    device: str
    scale: str
    reps: int
    results_dir: Path

    @property
    def on_gpu(self) -> bool:
        return self.mode == "gpu"

    @property
    def can_compile(self) -> bool:
        return self.mode != "reference-only"

    def plot_path(self, kind: str) -> Path | None:
        """results.plot_path for this session."""

        return results.plot_path(kind, self.results_dir, on_gpu=self.on_gpu)

    def recorded(self, kind: str) -> dict | None:
        """The record of `kind` this notebook shows: on a GPU this GPU's; without one, that of the one
        device results.reading_device picks for every kind, so that no figure mixes two devices.
        None when that device has none."""

        return results.recorded(kind, self.results_dir, on_gpu=self.on_gpu)

    def companion(self, kind: str, rec: dict | None) -> dict | None:
        """The record of another kind from the same device as `rec` (this GPU's when rec is None): never a mix."""
        if rec is None:
            return self.recorded(kind) if self.on_gpu else None
        return results.load(kind, device=rec["device"]["slug"], results_root=self.results_dir)

    def measures(self, what: str) -> bool:
        """Whether a timing cell runs here: on a GPU at KernelBench's sizes. Otherwise it prints the
        one SKIPPED line (utils.run.skip) that says why, and returns False."""
        if not self.on_gpu:
            skip(what, "no GPU")
        elif self.scale != "full":
            skip(what, f"scale {self.scale}: only KernelBench's sizes are measured")
        return self.on_gpu and self.scale == "full"

    def measures_unless_recorded(self, kind: str, what: str, by: str) -> bool:
        """measures(what), unless this GPU's record of `kind` in results_dir was made at this commit, `by`
        another process (a whole run records some measurements before the notebooks, spread over several
        cards): then it says so, and the cells below show that record."""
        rec = results.load(kind, env.device_slug(), self.results_dir) if self.on_gpu else None
        if rec is not None and rec["git_commit"] == results.git_commit():
            print(f"{what}: recorded at this commit ({rec['git_commit']}) by {by}; shown below")
            return False
        return self.measures(what)

    def missing(self, kind: str, made_by: str = "") -> str:
        """Why recorded(kind) is None here, as a SKIPPED line gives it: no GPU and no record, or, on a GPU,
        no record of this GPU yet (made_by: what records it, such as an earlier chapter's run)."""
        if not self.on_gpu:
            return "no GPU and no recorded run"
        return f"no {kind} record on this GPU yet" + (f": {made_by} records it" if made_by else "")

    def shown(self, kind: str, what: str) -> dict | None:
        """recorded(kind), or None after the one SKIPPED line saying that there is no record to show."""
        rec = self.recorded(kind)
        if rec is None:
            skip(what, self.missing(kind))
        return rec

    @property
    def reading_device(self) -> str | None:
        """The slug of the device whose records this notebook reads (results.reading_device)."""

        return results.reading_device(self.results_dir, on_gpu=self.on_gpu)

    def __str__(self) -> str:
        return f"mode {self.mode}; device {self.device}; scale {self.scale}; {self.reps} timed repetitions"


def session(device: str = "auto", scale: str = "auto", reps: int = 50, results_dir: str | Path = "../results") -> Session:
    """The parameters cell's values, "auto" resolved: cuda and the full scale on a GPU, else cpu and small.
    DEVICE="cuda" without a visible GPU stops here (env.resolve_device); a GPU where no kernel can be
    built is reference-only, and the reason is printed (env.why)."""

    mode = env.mode()
    gpu = mode == "gpu"
    device = env.resolve_device(device, mode)
    if not gpu and (reason := env.why()):
        print(reason)
    return Session(mode, device, ("full" if gpu else "small") if scale == "auto" else scale, int(reps), Path(results_dir))


def quiet_inductor() -> None:
    """Keep a notebook's output to what it measures: Inductor's autotuner logs every candidate GEMM
    it rejects (hundreds of lines per compile), and torch warns about TF32 and typed storages on
    the way. The results are timed and checked against eager all the same."""
    import logging
    import warnings

    torch._logging.set_logs(inductor=logging.CRITICAL)
    # max-autotune also writes its table of candidates and their stats to stderr, past the logs
    from torch._inductor import config as inductor_config  # a heavy import, for this knob alone

    inductor_config.autotune_num_choices_displayed = 0
    inductor_config.max_autotune_report_choices_stats = False
    for message in ("TensorFloat32 tensor cores", "TypedStorage is deprecated", ".*Profiler clears events"):
        warnings.filterwarnings("ignore", message=message)


def solution_pair(pid: int, scale: str = "small", device: str | torch.device = "cpu", seed: int = 0
                  ) -> tuple[nn.Module, nn.Module]:
    """(the reference Model, solutions' ModelNew) built under one seed, so with the same weights, in eval mode."""

    p = get_problem(pid)
    ref = p.make_model(scale, seed=seed)
    torch.manual_seed(seed)
    new = solution(pid).ModelNew(*p.init_inputs(scale))
    return ref.to(device).eval(), new.to(device).eval()


def _first_call(fn: Callable[[], Tensor]) -> tuple[Tensor, float]:
    """fn() and the seconds it took (a compiled contender compiles in its first call)."""
    start = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, time.perf_counter() - start


def measure_solutions(pids, *, scale: str = "full", reps: int = 50, seed: int = 0, ceilings=None,
                      progress: bool = True) -> list[dict]:
    """Notebook 10's run, on the current GPU: for each problem, with TF32 off and then on, eager,
    torch.compile (both modes of COMPILE_MODES), ours (by default: nothing kept between calls), ours
    frozen (freeze(): the weight's small parts kept) and ours under torch.compile(fullgraph=True),
    each checked against eager at the tier of that TF32 setting before it is timed, then all
    timed in turn (bench.compare with interleave: rep by rep, so that every contender meets the
    GPU's clock under sustained work) in both PROTOCOLS. Rows are bench.compare() rows plus
    problem, protocol, compile_s and max_abs_vs_eager (kind "solutions" of utils.results)."""
    rows = []
    for pid in pids:
        p = get_problem(pid)
        ref, new = solution_pair(pid, scale, "cuda", seed)
        frozen = solution_pair(pid, scale, "cuda", seed)[1].freeze()  # the opt-in: the weight's small parts kept
        (x,) = [t.cuda() for t in p.get_inputs(scale, generator=torch.Generator().manual_seed(seed + 1))]
        cost = bench.problem_cost(p, scale)
        for tf32 in (False, True):
            tier = TIERS["tf32" if tf32 else "strict"]
            torch._dynamo.reset()  # every group compiles afresh: compile times are comparable
            with precision.tf32(tf32), torch.no_grad():
                expected = ref(x)
                models = {"eager": ref, **{name: torch.compile(ref, mode=mode) for name, mode in COMPILE_MODES.items()},
                          "ours": new, "ours, frozen": frozen, "ours + torch.compile": torch.compile(new, fullgraph=True)}
                extra = {}
                for name, model in models.items():
                    if progress:
                        print(f"problem {pid}, TF32 {'on ' if tf32 else 'off'}: first call of {name}", flush=True)
                    out, seconds = _first_call(lambda m=model: m(x))
                    diff = (out - expected).abs().max().item()
                    if not torch.allclose(out, expected, atol=tier.atol, rtol=tier.rtol):  # never time a wrong result
                        raise AssertionError(f"problem {pid}, TF32 {tf32}: {name} differs from eager by {diff:.1e}")
                    extra[name] = {"max_abs_vs_eager": diff} | ({"compile_s": seconds} if name.startswith(
                        ("torch.compile", "ours + torch.compile")) else {})
                for protocol, sync_each in PROTOCOLS.items():
                    if progress:
                        print(f"problem {pid}, TF32 {'on' if tf32 else 'off'}, {protocol}:", flush=True)
                    timed = bench.compare({name: (lambda m=model: m(x)) for name, model in models.items()}, cost=cost,
                                          ceilings=ceilings, reps=reps, progress=progress, sync_each=sync_each,
                                          interleave=True)
                    rows += [r | {"problem": pid, "protocol": protocol, "timing": TIMING} | extra[r["contender"]] for r in timed]
        del ref, new, frozen, x
        torch.cuda.empty_cache()
    return rows


def _training_step(model: nn.Module, x: Tensor, grad: Tensor) -> Callable[[], tuple[Tensor, ...]]:
    """One training step's work, forward and backward: the gradients of the input and of every
    parameter, returned (not accumulated into .grad: every contender does the same work each rep)."""
    params = list(model.parameters())
    x = x.detach().requires_grad_()

    def step():
        out = model(x)
        return torch.autograd.grad(out, [x, *params], grad)
    return step


def _float64_step(model: nn.Module, x: Tensor, grad: Tensor, moved: float = 0.0, draw: int = 0) -> tuple[Tensor, ...]:
    """The training step's gradients in float64, on a float64 copy of the model (the reference); moved:
    the input moved by that relative amount, each element at random, the draw-th draw (check.judge_gradients)."""
    import copy

    g = torch.Generator(x.device).manual_seed(10_901 + 7_919 * draw)  # the same moves in every run
    x64 = x.double() * (1 + moved * (2 * torch.rand(x.shape, device=x.device, dtype=torch.float64, generator=g) - 1))
    grads = _training_step(copy.deepcopy(model).double(), x64, grad.double())()
    return tuple(g.float() for g in grads)


def _gradients_verdict(got: tuple[Tensor, ...], want: tuple[Tensor, ...], model: nn.Module, x: Tensor, grad: Tensor,
                       tf32: bool) -> tuple[str, str]:
    """check.judge_gradients on a training step's gradients against `model`'s (float64 computed only if needed)."""

    def named(grads):
        return {str(i): g for i, g in enumerate(grads)}
    tier = TIERS["tf32" if tf32 else "strict"]
    return judge_gradients(named(got), named(want), lambda: named(_float64_step(model, x, grad)), tier,
                           lambda: [named(_float64_step(model, x, grad, tier.noise, d)) for d in range(MOVED_DRAWS)])


def measure_training(pids, *, scale: str = "full", reps: int = 20, seed: int = 0, progress: bool = True) -> list[dict]:
    """A training step (forward and backward, the gradients of the input and every parameter) of eager,
    torch.compile (both modes of COMPILE_MODES) and ours, TF32 off and on, each contender's gradients
    checked against eager's at the tier first (check.judge_gradients, against float64 where eager's own
    are not determined to the tier), then all timed in turn in steady state (kind "training" of
    utils.results)."""
    rows = []
    for pid in pids:
        p = get_problem(pid)
        ref, new = (m.train() for m in solution_pair(pid, scale, "cuda", seed))
        (x,) = [t.cuda() for t in p.get_inputs(scale, generator=torch.Generator().manual_seed(seed + 1))]
        with torch.no_grad():
            grad = torch.rand_like(ref(x)) * 2 - 1  # the loss's gradient: random, never ones or zeros
        for tf32 in (False, True):
            torch._dynamo.reset()
            with precision.tf32(tf32):
                steps = {"eager": _training_step(ref, x, grad),
                         **{name: _training_step(torch.compile(ref, mode=mode), x, grad)
                            for name, mode in COMPILE_MODES.items()},
                         "ours": _training_step(new, x, grad)}
                expected = steps["eager"]()
                extra = {}
                for name, step in steps.items():
                    if progress:
                        print(f"problem {pid}, TF32 {'on ' if tf32 else 'off'}: first training step of {name}", flush=True)
                    got, seconds = _first_call(step)
                    status, detail = _gradients_verdict(got, expected, ref, x, grad, tf32)
                    if status != "pass":  # never time a wrong result
                        raise AssertionError(f"problem {pid}, TF32 {tf32}: {name}'s gradients: {detail}")
                    extra[name] = {"gradients": detail} | ({"compile_s": seconds} if name.startswith("torch.compile") else {})
                timed = bench.compare(steps, reps=reps, progress=progress, interleave=True)
                rows += [r | {"problem": pid, "protocol": "steady", "timing": TIMING} | extra[r["contender"]] for r in timed]
        del ref, new, x, grad
        torch.cuda.empty_cache()
    return rows


AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def measure_autocast(pids, *, scale: str = "full", reps: int = 20, seed: int = 0, dtype: str = "bf16",
                     progress: bool = True) -> list[dict]:
    """The forward under torch.autocast(dtype) of eager, torch.compile (both modes) and ours, each
    checked against eager's output (same dtype, within the autocast tier of utils.check) first,
    then timed in turn, in steady state (kind "autocast" of utils.results)."""

    rows = []
    tier = autocast_tier(AUTOCAST_DTYPES[dtype])
    for pid in pids:
        p = get_problem(pid)
        ref, new = solution_pair(pid, scale, "cuda", seed)
        (x,) = [t.cuda() for t in p.get_inputs(scale, generator=torch.Generator().manual_seed(seed + 1))]
        torch._dynamo.reset()
        with torch.no_grad(), torch.autocast("cuda", dtype=AUTOCAST_DTYPES[dtype]):
            models = {"eager": ref, **{name: torch.compile(ref, mode=mode) for name, mode in COMPILE_MODES.items()},
                      "ours": new}
            expected = ref(x)
            extra = {}
            for name, model in models.items():
                if progress:
                    print(f"problem {pid}, autocast {dtype}: first call of {name}", flush=True)
                out, seconds = _first_call(lambda m=model: m(x))
                diff = (out.float() - expected.float()).abs().max().item()
                if out.dtype != expected.dtype or not torch.allclose(out.float(), expected.float(), atol=tier.atol,
                                                                     rtol=tier.rtol):
                    raise AssertionError(f"problem {pid}, autocast {dtype}: {name} gives {out.dtype}, differs from "
                                         f"eager ({expected.dtype}) by {diff:.1e}")
                extra[name] = {"max_abs_vs_eager": diff, "autocast": dtype} | (
                    {"compile_s": seconds} if name.startswith("torch.compile") else {})
            timed = bench.compare({name: (lambda m=model: m(x)) for name, model in models.items()}, reps=reps,
                                  progress=progress, interleave=True)
            rows += [r | {"problem": pid, "protocol": "steady", "timing": TIMING} | extra[r["contender"]] for r in timed]
        del ref, new, x
        torch.cuda.empty_cache()
    return rows


def solution_ratios(entries: list[dict], contender: str = "ours") -> list[dict]:
    """Per problem, TF32 setting and protocol of a side-by-side record ("solutions", "training",
    "autocast"), `contender` against eager with the same TF32 setting, eager fp32 (TF32 off) and the
    faster torch.compile mode with the same TF32 setting: {"problem", "tf32", "protocol", "contender",
    "ours_ms", "vs_eager", "vs_eager_fp32", "vs_compile", "compile_mode"}."""
    at = {(e["problem"], e["contender"], e["tf32"], e["protocol"]): e for e in entries}
    out = []
    for (pid, name, tf32, protocol), e in at.items():
        if name != contender:
            continue
        compiled = [v for k, v in at.items() if k[0] == pid and k[2] == tf32 and k[3] == protocol and k[1] in COMPILE_MODES]
        best = min(compiled, key=lambda v: v["median_ms"])
        eager, eager_fp32 = at[(pid, "eager", tf32, protocol)], at[(pid, "eager", False, protocol)]
        out.append({"problem": pid, "tf32": tf32, "protocol": protocol, "contender": contender, "ours_ms": e["median_ms"],
                    "vs_eager": eager["median_ms"] / e["median_ms"], "vs_eager_fp32": eager_fp32["median_ms"] / e["median_ms"],
                    "vs_compile": best["median_ms"] / e["median_ms"], "compile_mode": best["contender"]})
    return out


def record_caption(rec: dict) -> str:
    """Markdown above a record's table in a notebook: where and when it was measured, and what its columns
    mean (utils.report.records.INTROS) where its kind says."""
    intro = INTROS.get(rec["kind"])
    return f"Recorded on {rec['device']['name']}, {rec['date'][:10]}." + (f" {intro(rec)}" if intro else "")


def record_table(rec: dict) -> pd.DataFrame:
    """A record's table as a DataFrame (utils.report.records.FRAMES: what record_markdown writes, its values
    unformatted)."""
    return FRAMES[rec["kind"]](rec)


def verdict(ratio: float, target: float, moonshot: float | None = None) -> str:
    """A measured ratio, read as shown (to 2 decimals, as every table and debrief writes it), against its target
    (and moonshot): "met", "met, moonshot too" or "missed"."""
    shown = round(ratio, 2)
    if shown < target:
        return "missed"
    return "met, moonshot too" if moonshot is not None and shown >= moonshot else "met"


RATIO_NAMES = {"vs_compile": "compile", "vs_eager": "eager"}  # ratio_table's names of what a target is over


def ratio_table(entries: list[dict], target: Callable[[dict], tuple | None], *, predicted: Callable[[dict], str] | None = None,
                contenders=("ours",), protocols=("steady",), tf32_column: bool = True) -> pd.DataFrame:
    """Notebooks 10 and 12's predicted-against-measured tables, a DataFrame: a row per problem, contender and TF32
    setting of a side-by-side record ("solutions", "training", "autocast"; solution_ratios' rows): its ratio to
    the faster torch.compile mode in each of `protocols` (a column each, "× compile, <protocol>"), to eager with
    the same TF32 setting ("× eager"), `predicted(row)` if given, and `target(row)` -> (the ratio it is on,
    "vs_compile" or "vs_eager", target, moonshot or None), or None where there is none, judged by verdict() in
    the first protocol. Ratios as the table shows them, to 2 decimals (verdict() reads them so); ratio_markdown
    writes it in Markdown."""
    ratios = {(r["problem"], r["contender"], r["tf32"], r["protocol"]): r for c in contenders
              for r in solution_ratios(entries, c)}
    rows = []
    for pid in dict.fromkeys(e["problem"] for e in entries):
        for c in contenders:
            for tf32 in sorted({e["tf32"] for e in entries}):
                if (r := ratios.get((pid, c, tf32, protocols[0]))) is None:
                    continue
                goal = target(r)
                rows.append({"problem": pid, **({"TF32": "on" if tf32 else "off"} if tf32_column else {}),
                             "contender": c, **({"predicted": predicted(r)} if predicted else {}),
                             **{f"× compile, {p.replace('_', ' ')}": round(ratios[(pid, c, tf32, p)]["vs_compile"], 2)
                                for p in protocols},
                             "× eager": round(r["vs_eager"], 2),
                             "target": "–" if goal is None else f"≥ {goal[1]:g}x {RATIO_NAMES[goal[0]]}"
                             + (f" (moonshot {goal[2]:g}x)" if goal[2] else ""),
                             "verdict": "–" if goal is None else verdict(r[goal[0]], goal[1], goal[2])})
    columns = ["problem", *(["TF32"] if tf32_column else []), "contender", *(["predicted"] if predicted else []),
               *(f"× compile, {p.replace('_', ' ')}" for p in protocols), "× eager", "target", "verdict"]
    return pd.DataFrame(rows, columns=columns)


def ratio_markdown(table: pd.DataFrame) -> str:
    """A ratio_table in Markdown (DataFrame.to_markdown), the ratios written "2.48x", a miss in bold."""
    return to_markdown(table, {**{c: "{:.2f}x" for c in table.columns if c.startswith("×")},
                               "verdict": lambda v: f"**{v}**" if v == "missed" else v})


def harness_summary(reports) -> str:
    """One line per check_model report: subject, tier, and its counts (with what failed, if anything)."""
    lines = []
    for r in reports:
        counts = ", ".join(f"{sum(c.status == s for c in r.checks)} {s}" for s in ("pass", "fail", "skip"))
        verdict = "OK" if r.ok else "FAILED: " + ", ".join(r.failed)
        skipped = f" (skipped: {', '.join(r.skipped)})" if r.skipped else ""
        lines.append(f"{r.subject:<58} tier {r.tier:<6} {counts}: {verdict}{skipped}")
    return "\n".join(lines)


# --- notebook 10's exercises ----------------------------------------------------------------------

def diagnosis_verdict(report, diagnosis: str | None, *, goal: str, passed: str, none_matched: str,
                      wrong: str) -> str:
    """An exercise's verdict: `passed` when the harness found nothing wrong; else "Not yet:", the checks
    that failed and, from `diagnosis` (which candidate the output equals, None for none), `none_matched`
    or `wrong` (formatted with the diagnosis) unless the diagnosis is the goal."""
    if report.ok:
        return passed
    lines = [f"Not yet: {', '.join(report.failed)} failed."]
    if diagnosis is None:
        lines.append(f"  - {none_matched}")
    elif diagnosis != goal:
        lines.append(f"  - {wrong.format(diagnosis=diagnosis)}")
    return "\n".join(lines)


def _gn_args(N: int, C: int, G: int, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    sign = torch.randint(0, 2, (C,), generator=g) * 2 - 1
    return torch.randn(N, C, generator=g) * 2, (torch.rand(C, generator=g) + 0.5) * sign, 0.5 * torch.randn(C, generator=g)


def backward_verdict(my_backward: Callable, *, shapes=((37, 115, 5), (16, 64, 4)), eps: float = 1e-5,
                     slope: float = 0.01) -> str:
    """Exercise 1: `my_backward(grad, x, num_groups, gamma, beta, eps, negative_slope) -> (dx, dgamma, dbeta)`,
    problem 62's tail y = leaky_relu(group_norm(x)); y + y. PASS when all three match autograd through the
    reference math on every shape; else "Not yet:" and what is off."""
    for N, C, G in shapes:
        x, gamma, beta = _gn_args(N, C, G, seed=N)
        leaves = [t.clone().requires_grad_() for t in (x, gamma, beta)]
        y = F.leaky_relu(F.group_norm(leaves[0], G, leaves[1], leaves[2], eps), slope)
        out = y + y
        grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(C))
        want = torch.autograd.grad(out, leaves, grad)
        try:
            got = my_backward(grad, x, G, gamma, beta, eps, slope)
        except Exception as error:  # the reader's code: a crash is a verdict, not a traceback
            return f"Not yet: my_backward raised {type(error).__name__}: {error}"
        if not (isinstance(got, (tuple, list)) and len(got) == 3 and all(isinstance(t, Tensor) for t in got)):
            return "Not yet: my_backward must return three tensors, (dx, dgamma, dbeta)"
        for label, g_, w in zip(("dx", "dgamma", "dbeta"), got, want):
            if g_.shape != w.shape:
                return f"Not yet: {label} has shape {tuple(g_.shape)}, autograd's {tuple(w.shape)}"
            if not torch.allclose(g_, w, atol=1e-5, rtol=1e-5):
                ratio = (g_ * w).sum() / (w * w).sum()
                hint = " (half of it: how many times does y reach the output in y + y?)" if abs(ratio - 0.5) < 0.01 else ""
                return (f"Not yet: {label} at x {(N, C)}, {G} groups is off by up to {(g_ - w).abs().max():.1e}; "
                        f"it is {ratio:.3f} times autograd's{hint}")
    return f"PASS: dx, dgamma and dbeta match autograd on {len(shapes)} shapes."
