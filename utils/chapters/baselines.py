"""The helpers of notebook 01 (the four models and the baselines to beat): each model built and fed
at a scale, eager PyTorch's GPU time per op (the profiler), eager and torch.compile timed side by
side with TF32 off and on, and the predicted-vs-measured table. Tested in
tests/test_baselines_chapter.py.

One definition of speedup throughout, the README's and the scoreboard's: over eager fp32 with TF32
off, the KernelBench reference setting. A TF32-on row is not compared with eager TF32-on.

    rows = profile_eager([94, 75, 37, 62], "cuda", "full")            # on a GPU: ms and % per aten op
    rows = measure_baselines([94, 75, 37, 62], "cuda", "full", 50, ceilings)   # one run per problem
    display(summary_table(rec, profile))                              # floors and bounds vs the run (a DataFrame)
    runs_reference_forward(YourModelNew94, get_problem(94))           # exercise 1: its forward, or Model's?
"""
from __future__ import annotations

import contextlib
import io
import time
from typing import Callable
from unittest import mock

import pandas as pd
import torch

from utils import bench, precision
from utils.problems import get_problem

__all__ = ["COMPILE_MODES", "PROBLEM_IDS", "contender_fn", "contenders", "eager_fp32", "eager_profile", "gemm_shares",
           "measure_baselines", "model_and_input", "profile_eager", "rows_over_eager_fp32",
           "runs_reference_forward", "summary_table", "with_eager_fp32_speedups"]

PROBLEM_IDS = (94, 75, 37, 62)
# torch.compile's modes as notebook 01 times them (each compiled from scratch; its first call is the compile time)
COMPILE_MODES = {"torch.compile": "default", "torch.compile max-autotune": "max-autotune"}
GEMM_OPS = ("aten::addmm", "aten::mm")


def model_and_input(p, device: str, scale: str, seed: int = 0):
    """Problem p's Model at `scale` (seeded) in eval mode on `device`, and one get_inputs() input (seeded)."""
    model = p.make_model(scale, seed=seed).to(device).eval()
    (x,) = p.get_inputs(scale, generator=torch.Generator().manual_seed(seed + 1))
    return model, x.to(device)


def eager_profile(model, x, iters: int = 5) -> list[dict]:
    """GPU time per aten op, in ms per forward pass (the op that launched each kernel), largest first."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        model(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                model(x)
            torch.cuda.synchronize()
    ops = {e.key: e.self_device_time_total / iters / 1e3 for e in prof.key_averages()
           if e.key.startswith("aten::") and e.self_device_time_total > 0}
    total = sum(ops.values())
    return [{"op": op, "cuda_ms": ms, "pct": 100 * ms / total} for op, ms in sorted(ops.items(), key=lambda kv: -kv[1])]


def profile_eager(pids, device: str, scale: str) -> list[dict]:
    """eager_profile of every problem, TF32 off, printing one line per problem; the rows carry "problem"."""
    rows = []
    for pid in pids:
        model, x = model_and_input(get_problem(pid), device, scale)
        with precision.tf32(False):
            ops = eager_profile(model, x)
        print(f"{pid}: " + ", ".join(f"{r['op']} {r['cuda_ms']:.3f} ms ({r['pct']:.1f}%)" for r in ops))
        rows += [{"problem": pid, **r} for r in ops]
        del model, x
    return rows


def contender_fn(model, mode: str | None) -> Callable:
    """The model itself (mode None: eager), or torch.compile of it compiled from scratch."""
    if mode is None:
        return model
    torch._dynamo.reset()
    return torch.compile(model, mode=mode)


def _first_call(fn, x) -> tuple[torch.Tensor, float]:
    """fn(x) once, its compile log set aside; the output and the seconds it took (the compile time)."""
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        out = fn(x)
        torch.cuda.synchronize()
    return out, time.perf_counter() - start


def contenders(model, x, *, compile: bool = True):
    """Yield (name, fn) for eager and (compile) each torch.compile mode of COMPILE_MODES, in the precision settings
    of the caller: each compiled from scratch, its first call (the compile time) timed, its output compared with
    eager's before it is handed over, one line printed. Notebook 01 times each as it comes."""
    reference = model(x)
    for name, mode in {"eager": None, **(COMPILE_MODES if compile else {})}.items():
        fn = contender_fn(model, mode)
        out, first_s = _first_call(fn, x)
        # compared before it is timed: max-autotune replays a CUDA graph, whose next call
        # overwrites the output of the last (reading `out` afterwards raises)
        diff = (out - reference).abs().max().item()
        del out
        print(f"  {name}: first call {first_s:.1f} s, max |diff| vs eager {diff:.1e}", flush=True)
        yield name, fn


def rows_over_eager_fp32(timed: list[dict], ceilings, scale: str) -> list[dict]:
    """The record's rows from [{"problem", "contender", "tf32", "timing"}]: bench.make_row with every speedup over
    the same problem's eager with TF32 off (eager fp32), the one definition the README and the scoreboard use."""
    rows = []
    for pid in dict.fromkeys(t["problem"] for t in timed):
        mine = [t for t in timed if t["problem"] == pid]
        eager_ms = next(t["timing"].median for t in mine if t["contender"] == "eager" and not t["tf32"])
        cost = bench.problem_cost(get_problem(pid), scale)
        rows += [{"problem": pid, **bench.make_row(t["contender"], t["timing"], baseline_ms=eager_ms, cost=cost,
                                                   ceilings=ceilings, tf32_allowed=t["tf32"])} for t in mine]
    return rows


def measure_baselines(pids, device: str, scale: str, reps: int, ceilings, *, compile: bool = True) -> list[dict]:
    """Notebook 01's measuring loop as one call (the notebook writes it out): per problem, eager and the
    torch.compile modes, TF32 off then on, each checked against eager, then timed by bench.time_ms."""
    timed = []
    for pid in pids:
        model, x = model_and_input(get_problem(pid), device, scale)
        for tf32 in (False, True):
            with precision.tf32(tf32), torch.no_grad():
                for name, fn in contenders(model, x, compile=compile):
                    t = bench.time_ms(lambda: fn(x), reps=reps)
                    print(f"{pid} TF32 {'on ' if tf32 else 'off'} {name:<28} {t.median:8.3f} ms", flush=True)
                    timed.append({"problem": pid, "contender": name, "tf32": tf32, "timing": t})
        del model, x
        torch._dynamo.reset()
    return rows_over_eager_fp32(timed, ceilings, scale)


def _entries(rec_or_entries) -> list[dict]:
    return rec_or_entries["entries"] if isinstance(rec_or_entries, dict) else list(rec_or_entries)


def eager_fp32(entries: list[dict], pid: int) -> dict:
    """Problem pid's eager row with TF32 off: the 1x of every speedup."""
    return next(e for e in entries if e["problem"] == pid and e["contender"] == "eager" and not e["tf32"])


def with_eager_fp32_speedups(rec_or_entries) -> list[dict]:
    """The rows with "speedup" over eager fp32 (TF32 off) of the same problem, whatever a recording stored
    (older ones compared a TF32-on row with eager TF32-on)."""
    entries = _entries(rec_or_entries)
    return [{**e, "speedup": eager_fp32(entries, e["problem"])["median_ms"] / e["median_ms"]} for e in entries]


def gemm_shares(profile) -> dict[int, float]:
    """{problem: the GEMM's share of eager GPU time, in %} from an eager_profile record or its rows."""
    return {e["problem"]: e["pct"] for e in _entries(profile) if e["op"] in GEMM_OPS}


def summary_table(baselines, profile) -> pd.DataFrame:
    """Per problem, what was predicted before timing (the FP32 floor; the most fusing the epilogue can save, its
    share of eager time in the profile) against what was measured (eager, the faster torch.compile mode with TF32
    off, and the best with TF32 on, over eager fp32): a DataFrame of the cells as the notebook shows them."""
    entries, shares = _entries(baselines), gemm_shares(profile)
    rows = []
    for pid in dict.fromkeys(e["problem"] for e in entries):
        eager = eager_fp32(entries, pid)
        mine = [e for e in entries if e["problem"] == pid]
        compiled = min((e for e in mine if not e["tf32"] and e["contender"] != "eager"), key=lambda e: e["median_ms"],
                       default=None)
        best_on = min((e for e in mine if e["tf32"]), key=lambda e: e["median_ms"], default=None)
        bound = 100 - shares[pid] if pid in shares else None
        saved = 100 * (1 - compiled["median_ms"] / eager["median_ms"]) if compiled else None
        rows.append({
            "problem": pid,
            "predicted: FP32 floor": f"{eager['floor_ms']:.2f} ms",
            "eager fp32 (% of floor)": f"{eager['median_ms']:.2f} ms ({eager['pct_of_floor']:.0f}%)",
            "predicted: fusing the epilogue saves at most": "–" if bound is None else f"{bound:.0f}%",
            "measured: torch.compile saves, TF32 off": "–" if saved is None else f"{saved:.0f}% ({compiled['contender']})",
            "within the bound": "–" if bound is None or saved is None else ("yes" if saved <= bound
                                                                              else "no: its GEMM beat eager's"),
            "best with TF32 on, over eager fp32": "–" if best_on is None
            else f"{eager['median_ms'] / best_on['median_ms']:.2f}x ({best_on['contender']})",
        })
    return pd.DataFrame(rows).set_index("problem")


def runs_reference_forward(model_class, p, scale: str = "small") -> bool:
    """Whether a call of model_class (a subclass of problem p's Model) runs the reference's own forward: no forward
    of its own, `super().forward(x)` or `Model.forward(self, x)`. On the CPU the harness cannot tell such a model
    from one that computes the steps itself (both run PyTorch's ops), so notebook 01's exercise asks this first."""
    calls = []
    reference = p.Model.forward

    def spy(self, *args, **kwargs):
        calls.append(type(self))
        return reference(self, *args, **kwargs)

    model = model_class(*p.init_inputs(scale))
    (x,) = p.get_inputs(scale, generator=torch.Generator().manual_seed(0))
    with mock.patch.object(p.Model, "forward", spy), torch.no_grad():
        model(x)
    return bool(calls)
