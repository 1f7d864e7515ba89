"""What the notebooks share beyond the other modules: building contenders, measuring them side by
side, summarising harness reports, and the exercise checkers' verdicts. A helper that two cells or
two notebooks would otherwise each define lives here, tested (tests/test_chapter.py).

    S = session(DEVICE, SCALE, REPS, RESULTS_DIR)                 # a notebook's parameters, resolved
    ref, new = solution_pair(94, "full", "cuda")                 # Model and ModelNew, the same weights
    rows = measure_solutions([94, 75, 37, 62], reps=50)           # notebook 09's side-by-side run
    print(harness_summary(reports))                               # one line per check_model report
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from utils import bench, precision
from utils.check import TIERS
from utils.problems import get_problem

# The contenders of notebook 09, in timing order. torch.compile's "max-autotune" mode would also
# capture CUDA graphs, which no other contender gets; "-no-cudagraphs" autotunes the same kernels.
COMPILE_MODES = {"torch.compile": "default", "torch.compile max-autotune-no-cudagraphs": "max-autotune-no-cudagraphs"}
PROTOCOLS = {"steady": False, "per_call": True}  # protocol -> bench.time_ms(sync_each=...)


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
        from utils import results

        return results.plot_path(kind, self.results_dir, on_gpu=self.on_gpu)

    def recorded(self, kind: str) -> dict | None:
        """The record of `kind` this notebook shows: on a GPU this GPU's; without one, that of the one
        device results.reading_device picks for every kind, so that no figure mixes two devices.
        None when that device has none."""
        from utils import results

        return results.recorded(kind, self.results_dir, on_gpu=self.on_gpu)

    @property
    def reading_device(self) -> str | None:
        """The slug of the device whose records this notebook reads (results.reading_device)."""
        from utils import results

        return results.reading_device(self.results_dir, on_gpu=self.on_gpu)

    def __str__(self) -> str:
        return f"mode {self.mode}; device {self.device}; scale {self.scale}; {self.reps} timed repetitions"


def session(device: str = "auto", scale: str = "auto", reps: int = 50, results_dir: str | Path = "../results") -> Session:
    """The parameters cell's values, "auto" resolved: cuda and the full scale on a GPU, else cpu and small."""
    from utils import env

    mode = env.mode()
    gpu = mode == "gpu"
    return Session(mode, ("cuda" if gpu else "cpu") if device == "auto" else device,
                   ("full" if gpu else "small") if scale == "auto" else scale, int(reps), Path(results_dir))


def quiet_inductor() -> None:
    """Keep a notebook's output to what it measures: Inductor's autotuner logs every candidate GEMM
    it rejects (hundreds of lines per compile), and torch warns about TF32 and typed storages on
    the way. The results are timed and checked against eager all the same."""
    import logging
    import warnings

    torch._logging.set_logs(inductor=logging.CRITICAL)
    for message in ("TensorFloat32 tensor cores", "TypedStorage is deprecated", ".*Profiler clears events"):
        warnings.filterwarnings("ignore", message=message)


def solution_pair(pid: int, scale: str = "small", device: str | torch.device = "cpu", seed: int = 0
                  ) -> tuple[nn.Module, nn.Module]:
    """(the reference Model, solutions' ModelNew) built under one seed, so with the same weights, in eval mode."""
    from solutions import solution

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
    """Notebook 09's run, on the current GPU: for each problem, with TF32 off and then on, eager,
    torch.compile (both modes of COMPILE_MODES), ours and ours under torch.compile(fullgraph=True),
    each checked against eager at the tier of that TF32 setting before it is timed, then all
    timed in turn (bench.compare with interleave: rep by rep, so that every contender meets the
    GPU's clock under sustained work) in both PROTOCOLS. Rows are bench.compare() rows plus
    problem, protocol, compile_s and max_abs_vs_eager (kind "solutions" of utils.results)."""
    rows = []
    for pid in pids:
        p = get_problem(pid)
        ref, new = solution_pair(pid, scale, "cuda", seed)
        (x,) = [t.cuda() for t in p.get_inputs(scale, generator=torch.Generator().manual_seed(seed + 1))]
        cost = bench.problem_cost(p, scale)
        for tf32 in (False, True):
            tier = TIERS["tf32" if tf32 else "strict"]
            torch._dynamo.reset()  # every group compiles afresh: compile times are comparable
            with precision.tf32(tf32), torch.no_grad():
                expected = ref(x)
                models = {"eager": ref, **{name: torch.compile(ref, mode=mode) for name, mode in COMPILE_MODES.items()},
                          "ours": new, "ours + torch.compile": torch.compile(new, fullgraph=True)}
                extra = {}
                for name, model in models.items():
                    if progress:
                        print(f"problem {pid}, TF32 {'on ' if tf32 else 'off'}: first call of {name}", flush=True)
                    out, seconds = _first_call(lambda m=model: m(x))
                    diff = (out - expected).abs().max().item()
                    if not torch.allclose(out, expected, atol=tier.atol, rtol=tier.rtol):  # never time a wrong result
                        raise AssertionError(f"problem {pid}, TF32 {tf32}: {name} differs from eager by {diff:.1e}")
                    extra[name] = {"max_abs_vs_eager": diff} | ({"compile_s": seconds} if model is not ref and
                                                                  model is not new else {})
                for protocol, sync_each in PROTOCOLS.items():
                    if progress:
                        print(f"problem {pid}, TF32 {'on' if tf32 else 'off'}, {protocol}:", flush=True)
                    timed = bench.compare({name: (lambda m=model: m(x)) for name, model in models.items()}, cost=cost,
                                          ceilings=ceilings, reps=reps, progress=progress, sync_each=sync_each,
                                          interleave=True)
                    rows += [r | {"problem": pid, "protocol": protocol} | extra[r["contender"]] for r in timed]
        del ref, new, x
        torch.cuda.empty_cache()
    return rows


def solution_ratios(entries: list[dict]) -> list[dict]:
    """Per problem and TF32 setting, ours against eager fp32 and the faster torch.compile mode, in both
    protocols: {"problem", "tf32", "protocol", "ours_ms", "vs_eager_fp32", "vs_compile", "compile_mode"}."""
    at = {(e["problem"], e["contender"], e["tf32"], e["protocol"]): e for e in entries}
    out = []
    for (pid, contender, tf32, protocol), e in at.items():
        if contender != "ours":
            continue
        compiled = [v for k, v in at.items() if k[0] == pid and k[2] == tf32 and k[3] == protocol and k[1] in COMPILE_MODES]
        best = min(compiled, key=lambda v: v["median_ms"])
        eager = at[(pid, "eager", False, protocol)]
        out.append({"problem": pid, "tf32": tf32, "protocol": protocol, "ours_ms": e["median_ms"],
                    "vs_eager_fp32": eager["median_ms"] / e["median_ms"],
                    "vs_compile": best["median_ms"] / e["median_ms"], "compile_mode": best["contender"]})
    return out


def harness_summary(reports) -> str:
    """One line per check_model report: subject, tier, and its counts (with what failed, if anything)."""
    lines = []
    for r in reports:
        counts = ", ".join(f"{sum(c.status == s for c in r.checks)} {s}" for s in ("pass", "fail", "skip"))
        verdict = "OK" if r.ok else "FAILED: " + ", ".join(r.failed)
        skipped = f" (skipped: {', '.join(r.skipped)})" if r.skipped else ""
        lines.append(f"{r.subject:<58} tier {r.tier:<6} {counts}: {verdict}{skipped}")
    return "\n".join(lines)


# --- notebook 09's exercises ----------------------------------------------------------------------

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


def fake_verdict(my_fake: Callable, *, shapes=((37, 115, 5), (1, 64, 4), (0, 64, 4))) -> str:
    """Exercise 2: `my_fake(x, num_groups, gamma, beta, eps, bias)`, problem 75's op on fake CUDA tensors.
    PASS when its output has the real op's shape, dtype and device on every shape (an empty batch too);
    else "Not yet:" and what differs."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from utils import ops

    for N, C, G in shapes:
        x, gamma, beta = _gn_args(N, C, G, seed=C)
        bias = torch.randn(1, C, 1, 1)
        real = ops.group_norm_min_bias(x, G, gamma, beta, 1e-5, bias)  # the CPU implementation: the reference
        with FakeTensorMode() as mode:
            args = [mode.from_tensor(t).to("cuda") for t in (x, gamma, beta, bias)]
            try:
                fake = my_fake(args[0], G, args[1], args[2], 1e-5, args[3])
            except Exception as error:
                return f"Not yet: my_fake raised {type(error).__name__}: {error}"
        if not isinstance(fake, Tensor):
            return f"Not yet: my_fake returned {type(fake).__name__}, not a tensor"
        got = (tuple(fake.shape), fake.dtype, fake.device.type)
        want = (tuple(real.shape), real.dtype, "cuda")
        if got != want:
            return (f"Not yet: for x {(N, C)} your fake says shape {got[0]}, {got[1]} on {got[2]}; the op returns "
                    f"{want[0]}, {want[1]} on {want[2]}. torch.compile would plan the rest of the graph for the wrong "
                    "tensor.")
    return f"PASS: your fake matches the op on {len(shapes)} shapes, the empty batch included."
