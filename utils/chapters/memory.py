"""The helpers of the memory-bound chapters (notebooks 05, 06 and 07): each fused kernel timed beside a
same-size copy in one run, its GB/s as % of that copy, a table, a bar plot, the kernel header's
PREDICTION against the measurement as one table, the harness cases and timed contenders of each
chapter. The exercises' checkers are memory_exercises.py's, the chapters' diagrams memory_diagrams.py's.
Tested in tests/test_memory_chapter.py (and the exercise checkers in tests/test_memory_bound_exercises.py).

    S = chapter.session(DEVICE, SCALE, REPS, RESULTS_DIR)  # the parameters cell's values, resolved
    M = MemoryChapter(S)                                  # S's records, loading, measuring, showing
    act = M.load("activations")                           # the compiled kernel, or None with a SKIPPED line
    run_checks(activation_cases(act, 37, 115), "(37, 115)")
    entries = M.run("fused_activations", lambda: activation_spec(act, SHAPES), "notebooks/05")
    M.show_measurement("fused_activations", entries, title, PREDICTIONS, PREDICTION)  # PREDICTION: the header's

A run on one device reads that device's records only: M.recorded is the session's (utils.chapters.session).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

import matplotlib
import pandas as pd
import torch
import torch.nn.functional as F
from IPython.display import Markdown, display
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from utils import bench, build, check, env, plots, results
from utils.report.tail_sweeps import sweep_regimes, width_regimes  # noqa: F401: the chapters call them as mc.
from utils.run import skip

TARGET_PCT = 80  # the chapter's target: each fused kernel at >= 80% of the copy bandwidth measured at the same size
ROLE_COLOURS = {"ours": plots.COLOURS["ours"], "eager": plots.COLOURS["eager"], "torch": "#3182bd",
                "yardstick": "#a8a8a8", "copy": "#444444"}
EPS = 1e-5  # GroupNorm's eps in problems 37, 62, 75 and 94 (nn.GroupNorm's default)
EXERCISES = build.KERNELS_DIR / "exercises"  # the chapters' "Your turn" kernels


# --------------------------------------------------------------------------- measuring

def measure(spec, reps):
    """spec: [(problem, contender, role, fn, bytes, shape, replaces)], in timing order. One bench.compare over all
    of them (one run); each row gets GB/s = bytes / median and % of its problem's "copy" row."""
    fns = {f"{p}: {name}": fn for p, name, _, fn, _, _, _ in spec}
    rows = bench.compare(fns, baseline=None, reps=reps)
    entries = []
    for (p, name, role, _, nbytes, shape, replaces), r in zip(spec, rows):
        e = {"problem": p, "contender": name, "role": role, "median_ms": r["median_ms"], "p20_ms": r["p20_ms"],
             "p80_ms": r["p80_ms"], "bytes": nbytes, "GBps": nbytes / (r["median_ms"] * 1e-3) / 1e9,
             "shape": list(shape)}
        if replaces:
            e["replaces"] = list(replaces)
        entries.append(e)
    for e in entries:
        copy = next(c for c in entries if c["problem"] == e["problem"] and c["role"] == "copy")
        e["pct_of_copy"] = 100 * e["GBps"] / copy["GBps"]
    return entries


def table(entries) -> pd.DataFrame:
    """The rows of measure() (or of a record) as a DataFrame: one row per contender, with its speedups against the
    rows it names ("faster than")."""
    named = {(e["problem"], e["contender"]): e for e in entries}
    rows = []
    for e in entries:
        against = [f"{named[(e['problem'], r)]['median_ms'] / e['median_ms']:.2f}x {r}"
                   for r in e.get("replaces", ()) if (e["problem"], r) in named]
        rows.append({"problem": e["problem"], "contender": e["contender"], "role": e["role"],
                     "median us": round(1e3 * e["median_ms"], 1), "GB/s": round(e["GBps"]),
                     "% copy": round(e["pct_of_copy"]), "faster than": "; ".join(against)})
    return pd.DataFrame(rows)


def bandwidth_plot(entries, title, recorded_from=None, save=None):
    """Each contender's GB/s as % of the same-size copy in the same run; the 80% target dashed."""
    shown = [e for e in entries if e["role"] != "copy"]
    with matplotlib.rc_context(plots.STYLE):
        fig = Figure(figsize=(10.0, 1.8 + 0.36 * len(shown)))
        ax = fig.add_subplot()
        pct = [e["pct_of_copy"] for e in shown]
        ax.barh(range(len(shown)), pct, color=[ROLE_COLOURS[e["role"]] for e in shown], edgecolor="white", zorder=2)
        for i, e in enumerate(shown):
            ax.text(e["pct_of_copy"] + 1, i, f"{1e3 * e['median_ms']:.1f} us, {e['GBps']:.0f} GB/s", va="center",
                    fontsize=8, zorder=3)
        ax.axvline(100, color=plots.REFERENCE, lw=1)
        ax.axvline(TARGET_PCT, color=plots.REFERENCE, lw=1, ls="--")
        ax.set_yticks(range(len(shown)), [f"{e['problem']}: {e['contender']}" for e in shown], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, max([110, *pct]) * 1.3)
        ax.set_xlabel("GB/s (least bytes / median time) as % of a same-size copy in the same run")
        roles = {e["role"] for e in shown}
        handles = [Patch(color=ROLE_COLOURS[role], label=label) for role, label in
                   (("ours", "fused kernel (ours)"), ("eager", "eager op chain"), ("torch", "a PyTorch op alone"),
                    ("yardstick", "a yardstick of ours (not held to the target)")) if role in roles]
        handles.append(Line2D([], [], color=plots.REFERENCE, lw=1, label="the same-size copy (100%)"))
        handles.append(Line2D([], [], color=plots.REFERENCE, lw=1, ls="--", label=f"target {TARGET_PCT}%"))
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
        fig.suptitle(f"{title}\n{plots.provenance(recorded_from)}")
    return plots.finish(fig, save)


# --------------------------------------------------------------------------- predicted against measured

@dataclass(frozen=True)
class Prediction:
    """One claim of a kernel header's PREDICTION paragraph, as a range the measurement can fall in.

    against: None, the kernel's GB/s as % of the same-size copy; "us", its median time (lower is better);
    else the contender it is compared with: that row's time over the kernel's (a speedup), or, with
    percent=True, the kernel's GB/s as % of that row's."""
    kernel: str
    phrase: str  # the header's words, quoted; compared only while the header still says them
    lo: float
    hi: float
    against: str | None = None
    percent: bool = False


def quoted(prediction, phrase):
    """`phrase` if the header's PREDICTION says it (whitespace aside), else None: a prediction is only compared
    with a measurement while the header still makes it."""
    return phrase if prediction and phrase in " ".join(prediction.split()) else None


def verdict(value, lo, hi, lower_is_better=False):
    """How a measured value compares with a predicted range [lo, hi] (higher is better unless said otherwise)."""
    if lo <= value <= hi:
        return "within it"
    return "better than predicted" if (value > hi) != lower_is_better else "worse than predicted"


def _measured(p: Prediction, e: dict, named: dict) -> tuple[float, str] | None:
    """The measured value of one prediction and how to say it; None if the row it needs is missing."""
    if p.against is None:
        return e["pct_of_copy"], f"{e['pct_of_copy']:.0f}% of the same-size copy"
    if p.against == "us":
        return 1e3 * e["median_ms"], f"{1e3 * e['median_ms']:.1f} us"
    other = named.get((e["problem"], p.against))
    if other is None:
        return None
    if p.percent:
        v = 100 * e["GBps"] / other["GBps"]
        return v, f"{v:.0f}% of the GB/s of \"{p.against}\""
    v = other["median_ms"] / e["median_ms"]
    return v, f"{v:.2f}x against \"{p.against}\""


def prediction_rows(entries, predictions, prediction_text):
    """One dict per (prediction, measured kernel): problem, kernel, phrase, measured (words), verdict."""
    named = {(e["problem"], e["contender"]): e for e in entries}
    rows = []
    for p in predictions:
        for e in (e for e in entries if e["contender"] == p.kernel):
            row = {"problem": e["problem"], "kernel": p.kernel, "phrase": p.phrase}
            got = _measured(p, e, named)
            if not quoted(prediction_text, p.phrase):
                row |= {"measured": "–", "verdict": "no longer in the header: not compared"}
            elif got is None:
                row |= {"measured": "–", "verdict": f"no row {p.against!r} in this run"}
            else:
                row |= {"measured": got[1], "verdict": verdict(got[0], p.lo, p.hi, p.against == "us")}
            rows.append(row)
    return rows


def prediction_table(entries, predictions, prediction_text) -> pd.DataFrame:
    """The chapter's predicted-against-measured table: each claim quoted once, its rows below it."""
    rows, said = [], None
    for r in prediction_rows(entries, predictions, prediction_text):
        claim, said = ("" if r["phrase"] == said else f"\"{r['phrase']}\""), r["phrase"]
        rows.append({"the header predicted": claim, "problem": r["problem"], "kernel": r["kernel"],
                     "measured": r["measured"], "verdict": r["verdict"]})
    columns = ["the header predicted", "problem", "kernel", "measured", "verdict"]
    return pd.DataFrame(rows, columns=columns)


def row_min_budget(entries):
    """Problem 75's row minimum, its % of the copy split into two factors: what a pure read of the same bytes
    reaches at this size, and the row minimum's share of that read. Markdown; "" without those rows."""
    e = {r["contender"]: r for r in entries}
    rm, rd = e.get("group_norm_row_min"), e.get("read_probe: a pure read")
    if rm is None or rd is None:
        return ""
    share = rm["GBps"] / rd["GBps"]
    return (f"The row minimum at **{rm['pct_of_copy']:.0f}%** of the copy = a pure read of the same bytes at "
            f"**{rd['pct_of_copy']:.0f}%** of the copy × the row minimum at **{100 * share:.0f}%** of the pure "
            f"read's GB/s ({1e3 * rd['median_ms']:.1f} us against {1e3 * rm['median_ms']:.1f} us).")


def copy_against_ceiling(entries, ceilings):
    """Each problem's same-size copy against the 1 GiB copy of a "ceilings" record of the same device, in words."""
    if not entries or not ceilings:
        return "(no ceilings record of this device to compare the same-size copies with)"
    big = ceilings["entries"][0]["copy_GBps"]
    parts = [f"problem {e['problem']}'s {e['GBps']:.0f} GB/s ({100 * e['GBps'] / big:.0f}% of it)"
             for e in entries if e["role"] == "copy"]
    return f"The 1 GiB copy of the ceilings record ran at {big:.0f} GB/s; the same-size copies: " + "; ".join(parts) + "."


def launch_gap(entries):
    """What launching the broadcast as a programmatic dependent saved against two plain launches, in words."""
    e = {r["contender"]: r for r in entries or ()}
    two, one = e.get("row minimum, then broadcast: two launches"), e.get("group_norm_min_bias")
    if two is None or one is None:
        return "(no run with both launches to compare)"
    saved = 1e3 * (two["median_ms"] - one["median_ms"])
    return (f"Two plain launches {1e3 * two['median_ms']:.1f} us, the broadcast as a dependent "
            f"{1e3 * one['median_ms']:.1f} us: {saved:.1f} us {'saved' if saved >= 0 else 'lost'}, "
            f"{two['median_ms'] / one['median_ms']:.2f}x.")


def stamp(rec: dict) -> str:
    """A record's device, date and commit, to say whose numbers a replot shows."""
    return f"{rec['device']['name']}, {rec['date'][:10]}, commit `{results.short_commit(rec['git_commit'])}`"


# --------------------------------------------------------------------------- the chapter

@dataclass(frozen=True)
class MemoryChapter:
    """A notebook's session (utils.chapters.session.Session: mode, device, scale, reps, results_dir) and what the
    memory-bound chapters do with it: load kernels, measure and record, show a run or the record of one.
    It has the session's on_gpu, results_dir and recorded, so it stands in for the session anywhere."""
    session: object

    on_gpu = property(lambda self: self.session.on_gpu)
    can_compile = property(lambda self: self.session.can_compile)
    device = property(lambda self: self.session.device)
    scale = property(lambda self: self.session.scale)
    reps = property(lambda self: self.session.reps)
    results_dir = property(lambda self: self.session.results_dir)

    def recorded(self, kind: str) -> dict | None:
        """The session's record of `kind`: on a GPU, this GPU's only; without one, the latest of any device."""
        return self.session.recorded(kind)

    def plot_path(self, kind: str) -> Path | None:
        """results.plot_path for this chapter's session."""
        return results.plot_path(kind, self.results_dir, on_gpu=self.on_gpu)

    def load(self, name: str, kernels_dir: Path | None = None):
        """The compiled kernel module, printing what it exports; None (with a SKIPPED line) where
        nothing can compile, so the cells after it skip instead of failing."""
        if not self.can_compile:
            skip(f"compiling {name}", env.no_build_reason())
            return None
        module = build.load_kernel(name, kernels_dir=kernels_dir)
        where = build.display_path(Path(module.__file__))
        print(f"{name}: {', '.join(e.name for e in build.exported_functions(build.kernel_source(name, kernels_dir)))}"
              f"  ({where})")
        return module

    def run(self, kind: str, make_spec: Callable[[], list], notes: str) -> list[dict] | None:
        """On a GPU at the full scale: measure make_spec()'s contenders in one run, print the table and record
        them as `kind`. Elsewhere: None, with a SKIPPED line saying why."""
        if not self.on_gpu:
            skip(f"measuring {kind}", "no GPU")
            return None
        if self.scale != "full":
            skip(f"measuring {kind}", f"scale {self.scale}: only the problems' full shapes are measured")
            return None
        entries = measure(make_spec(), self.reps)
        display(table(entries))
        print("recorded", results.record(kind, entries, results_dir=self.results_dir,
                                         notes=f"{notes}, reps {self.reps}"))
        return entries

    def rows(self, kind: str, entries: list[dict] | None) -> tuple[list[dict] | None, dict | None]:
        """(entries, None) when measured here; else (the record's entries, the record); (None, None) if neither."""
        if entries is not None:
            return entries, None
        rec = self.recorded(kind)
        return (rec["entries"], rec) if rec is not None else (None, None)

    def companion(self, kind: str, rec: dict | None) -> dict | None:
        """The session's companion (chapter.Session.companion): the same device's record of another kind."""
        return self.session.companion(kind, rec)

    def show_measurement(self, kind: str, entries: list[dict] | None, title: str, predictions: list[Prediction],
                         prediction_text: str | None) -> list[dict] | None:
        """The bar plot and the predicted-against-measured table (against the header's PREDICTION paragraph) of the
        rows just measured (the plot saved at the full scale) or, without them, of this session's record (its table
        printed first). Returns the rows shown, None (with a SKIPPED line) when there are none."""
        shown, rec = self.rows(kind, entries)
        if shown is None:
            skip(f"the {kind} plot and table", f"no GPU and no recorded {kind} run")
            return None
        if rec is not None:
            print(f"the recorded run ({stamp(rec)}, {rec['notes']}):")
            display(table(shown))
        save = self.plot_path(kind) if rec is None and self.scale == "full" else None
        display(bandwidth_plot(shown, title, recorded_from=rec, save=save))
        source = (f"Recorded on {stamp(rec)}" if rec is not None
                  else f"Measured on {env.device_name()}, {self.reps} repetitions per contender")
        display(Markdown(f"{source}."))
        display(prediction_table(shown, predictions, prediction_text))
        return shown

    def check_exercise(self, name: str, run: Callable, static: Callable[[str], list] | None = None) -> None:
        """Recompile kernels/exercises/<name>.cu (your edits included) and print run(module)'s report and verdict.
        static(text) lists what is wrong with the file's text before anything runs (on any machine): "Not yet"."""
        problems = static((EXERCISES / f"{name}.cu").read_text()) if static else []
        if problems:
            print("Not yet:\n" + "\n".join(f"  - {p}" for p in problems))
            return
        if not self.can_compile:
            skip("compiling the exercise", env.no_build_reason())
            return
        module = build.load_kernel(name, kernels_dir=EXERCISES)
        if not self.on_gpu:
            skip("checking the exercise", "no GPU (it compiled)")
            return
        report, text = run(module)
        print(report)
        print(text)


# --------------------------------------------------------------------------- inputs and harness cases

def x_and_bias(rows, cols, scale=2.0):
    """A harness input factory: GEMM-output-like x (never zeros) and a random bias (cols,), on the generator's
    device: Hardtanh clamps some elements on both sides."""
    return lambda g: [torch.randn(rows, cols, generator=g, device=g.device) * scale,
                      0.5 * torch.randn(cols, generator=g, device=g.device)]


def gn_inputs(N, C, offset=0.0, scale=2.0, with_bias=False, bias_before=False):
    """A harness input factory for GroupNorm kernels, on the generator's device: x (N, C) around `offset`, γ
    (|γ| in [0.5, 1.5], random signs) and β ~ N(0, 0.5²), never the defaults 1 and 0. with_bias adds a
    (1, C, 1, 1) bias at the end (problem 75); bias_before a (C,) bias after x (the activation's, 94 and 37)."""
    def factory(g):
        d = g.device
        sign = torch.randint(0, 2, (C,), generator=g, device=d) * 2 - 1
        x = torch.randn(N, C, generator=g, device=d) * scale + offset
        gamma, beta = (torch.rand(C, generator=g, device=d) + 0.5) * sign, 0.5 * torch.randn(C, generator=g, device=d)
        if bias_before:
            return [x, 0.5 * torch.randn(C, generator=g, device=d), gamma, beta]
        return [x, gamma, beta] + ([torch.randn(1, C, 1, 1, generator=g, device=d)] if with_bias else [])
    return factory


def rowmin_and_bias(N, C):
    """A harness input factory for the broadcast: a row minimum (N, 1) and problem 75's bias (1, C, 1, 1)."""
    return lambda g: [torch.randn(N, 1, generator=g, device=g.device), torch.randn(1, C, 1, 1, generator=g, device=g.device)]


def _leaky_relu_x2(x, slope=0.01):
    y = F.leaky_relu(x, slope)  # once, as problem 62's model does, then the sum
    return y + y


ACTIVATION_KERNELS = {94: "bias_hardtanh_mish", 37: "swish_bias", 62: "leaky_relu_x2"}  # each problem's fused chain


def activation_cases(k, rows, cols):
    """Notebook 05's kernels: name -> (kernel, eager reference, input factory), all called as f(x, bias)."""
    inputs = x_and_bias(rows, cols)
    return {
        "bias_hardtanh_mish": (lambda x, b: k.bias_hardtanh_mish(x, b, -1.0, 1.0),
                               lambda x, b: F.mish(F.hardtanh(x + b)), inputs),
        "swish_bias": (lambda x, b: k.swish_bias(x, b), lambda x, b: torch.sigmoid(x) * x + b, inputs),
        "leaky_relu_x2": (lambda x, b: k.leaky_relu_x2(x, 0.01), lambda x, b: _leaky_relu_x2(x), inputs),
        "mish": (lambda x, b: k.mish(x), lambda x, b: F.mish(x), inputs),
    }


FUSED_GROUPNORMS = {94: "bias_hardtanh_mish_group_norm", 37: "swish_bias_group_norm", 62: "group_norm_leaky_relu_x2"}


def groupnorm_cases(k, N, C, G, eps=EPS):
    """Notebook 06's kernels: name -> (kernel, eager reference, input factory)."""
    plain, biased = gn_inputs(N, C), gn_inputs(N, C, bias_before=True)
    gn = partial(F.group_norm, num_groups=G, eps=eps)
    return {
        "group_norm_welford": (lambda x, g_, b_: k.group_norm_welford(x, G, g_, b_, eps),
                               lambda x, g_, b_: gn(x, weight=g_, bias=b_), plain),
        "group_norm_sumsq": (lambda x, g_, b_: k.group_norm_sumsq(x, G, g_, b_, eps),
                             lambda x, g_, b_: gn(x, weight=g_, bias=b_), plain),
        "bias_hardtanh_mish_group_norm": (
            lambda x, bias, g_, b_: k.bias_hardtanh_mish_group_norm(x, bias, -1.0, 1.0, G, g_, b_, eps),
            lambda x, bias, g_, b_: gn(F.mish(F.hardtanh(x + bias)), weight=g_, bias=b_), biased),
        "swish_bias_group_norm": (lambda x, bias, g_, b_: k.swish_bias_group_norm(x, bias, G, g_, b_, eps),
                                  lambda x, bias, g_, b_: gn(torch.sigmoid(x) * x + bias, weight=g_, bias=b_), biased),
        "group_norm_leaky_relu_x2": (lambda x, g_, b_: k.group_norm_leaky_relu_x2(x, G, g_, b_, eps, 0.01),
                                     lambda x, g_, b_: _leaky_relu_x2(gn(x, weight=g_, bias=b_)), plain),
    }


def _row_min(x, G, gamma, beta, eps=EPS):
    return torch.min(F.group_norm(x, G, gamma, beta, eps), dim=1, keepdim=True)[0]


def tail_cases(mb, N, C, G, eps=EPS):
    """Notebook 07's kernels (problem 75's tail): name -> (kernel, eager reference, input factory)."""
    return {
        "group_norm_row_min": (lambda x, g_, b_: mb.group_norm_row_min(x, G, g_, b_, eps),
                               lambda x, g_, b_: _row_min(x, G, g_, b_, eps), gn_inputs(N, C)),
        "min_bias_broadcast": (lambda m, bias: mb.min_bias_broadcast(m, bias), torch.add, rowmin_and_bias(N, C)),
        "group_norm_min_bias": (lambda x, g_, b_, bias: mb.group_norm_min_bias(x, G, g_, b_, eps, bias),
                                lambda x, g_, b_, bias: _row_min(x, G, g_, b_, eps) + bias,
                                gn_inputs(N, C, with_bias=True)),
    }


def run_checks(cases: dict, where: str) -> None:
    """The harness (utils.check.check_fn) on each case: one line each; raises on the first that fails."""
    for name, (fn, ref, factory) in cases.items():
        report = check.check_fn(fn, ref, factory, name=f"{name} {where}", contiguous_only=True)
        print(f"{name:<32} {where:<16} {'OK' if report.ok else 'FAILED: ' + ', '.join(report.failed)}")
        report.raise_if_failed()


# --------------------------------------------------------------------------- the timed contenders

def _inputs(factory, seed, device):
    return factory(torch.Generator(device=device).manual_seed(seed))


def _copy_row(p, x, shape):
    """The yardstick of every problem: a copy of a tensor of x's size, timed in the same run."""
    dst = torch.empty_like(x)
    return (p, f"copy ({' x '.join(map(str, x.shape))})", "copy", partial(dst.copy_, x), 2 * 4 * x.numel(), shape, None)


def _checked(fn, ref, args):
    torch.testing.assert_close(fn(*args), ref(*args), rtol=1e-4, atol=1e-4)  # never time a wrong kernel
    return partial(fn, *args), partial(ref, *args)


def activation_spec(k, shapes, device="cuda"):
    """Notebook 05's one run: per problem {p: (rows, cols)}, a same-size copy, the eager chain, the fused kernel."""
    spec = []
    for p, (rows, cols) in shapes.items():
        name = ACTIVATION_KERNELS[p]
        fn, ref, factory = activation_cases(k, rows, cols)[name]
        args = _inputs(factory, p, device)
        ours, eager = _checked(fn, ref, args)
        nbytes, shape = 2 * 4 * rows * cols, (rows, cols)
        spec += [_copy_row(p, args[0], shape), (p, "eager chain", "eager", eager, nbytes, shape, None),
                 (p, name, "ours", ours, nbytes, shape, ["eager chain"])]
    return spec


def groupnorm_spec(k, shapes, device="cuda", eps=EPS):
    """Notebook 06's one run: per problem {p: (N, C, G)}, a same-size copy, the eager chain, F.group_norm alone,
    the fused kernel, and the plain GroupNorm kernels with both statistics policies."""
    spec = []
    for p, (N, C, G) in shapes.items():
        cases, name = groupnorm_cases(k, N, C, G, eps), FUSED_GROUPNORMS[p]
        fn, ref, factory = cases[name]
        args = _inputs(factory, p, device)
        x, gamma, beta = args[0], args[-2], args[-1]
        ours, eager = _checked(fn, ref, args)
        nbytes, shape = 2 * 4 * N * C, (N, C, G)
        spec += [_copy_row(p, x, shape), (p, "eager chain", "eager", eager, nbytes, shape, None),
                 (p, "F.group_norm", "torch", partial(F.group_norm, x, G, gamma, beta, eps), nbytes, shape, None),
                 (p, name, "ours", ours, nbytes, shape, ["eager chain", "F.group_norm"])]
        for plain in ("group_norm_welford", "group_norm_sumsq"):
            spec.append((p, plain, "ours", partial(cases[plain][0], x, gamma, beta), nbytes, shape, ["F.group_norm"]))
    return spec


def tail_spec(mb, probe, N, C, G, device="cuda", eps=EPS):
    """Notebook 07's one run at problem 75's shape: a same-size copy, two pure reads (ours and x.amax()), each part
    of the tail against what it replaces, and the whole tail against eager's and against two plain launches."""
    x, gamma, beta, bias = _inputs(gn_inputs(N, C, with_bias=True), 75, device)
    eager_min = partial(_row_min, x, G, gamma, beta, eps)
    rowmin = eager_min()
    _checked(lambda: mb.group_norm_min_bias(x, G, gamma, beta, eps, bias), lambda: rowmin + bias, ())
    read, write, both = 4 * N * C + 4 * N, 4 * N * C + 4 * N + 4 * C, 8 * N * C + 4 * C  # the least bytes of each
    s = (N, C, G)
    return [
        _copy_row(75, x, s),
        (75, "read_probe: a pure read", "yardstick", partial(probe.read_probe, x), 4 * N * C, s, None),
        (75, "x.amax(): PyTorch's pure read", "torch", x.amax, 4 * N * C, s, None),
        (75, "eager GroupNorm + min", "eager", eager_min, read, s, None),
        (75, "F.group_norm", "torch", partial(F.group_norm, x, G, gamma, beta, eps), read, s, None),
        (75, "group_norm_row_min", "ours", partial(mb.group_norm_row_min, x, G, gamma, beta, eps), read, s,
         ["eager GroupNorm + min", "F.group_norm"]),
        (75, "eager add: rowmin + bias", "eager", partial(torch.add, rowmin, bias), write, s, None),
        (75, "min_bias_broadcast", "ours", partial(mb.min_bias_broadcast, rowmin, bias), write, s,
         ["eager add: rowmin + bias"]),
        (75, "eager tail", "eager", lambda: eager_min() + bias, both, s, None),
        (75, "row minimum, then broadcast: two launches", "yardstick",
         lambda: mb.min_bias_broadcast(mb.group_norm_row_min(x, G, gamma, beta, eps), bias), both, s, None),
        (75, "group_norm_min_bias", "ours", partial(mb.group_norm_min_bias, x, G, gamma, beta, eps, bias), both, s,
         ["eager tail", "F.group_norm", "row minimum, then broadcast: two launches"]),
    ]


# --------------------------------------------------------------------------- broadcasting

def broadcast_steps(a, b):
    """Print PyTorch's broadcasting of shapes a and b one step at a time; return the result (or None: an error)."""
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    print(f"1. align from the right, pad with leading 1s: {tuple(a)} -> {pa}, {tuple(b)} -> {pb}")
    out = []
    for i, (x, y) in enumerate(zip(pa, pb)):
        if x != y and 1 not in (x, y):
            print(f"   dim {i}: {x:>5} vs {y:>5}: neither is 1 -> error")
            return None
        out.append(max(x, y))
        print(f"   dim {i}: {x:>5} vs {y:>5}: {'equal: kept' if x == y else f'a 1 stretches to {max(x, y)}'}")
    print(f"2. result: {tuple(out)}")
    return tuple(out)


# --------------------------------------------------------------------------- why the fast tails do not move the scoreboard

def tail_share_text(df: pd.DataFrame) -> str:
    """Notebook 06's lines on why fast tails barely move the scoreboard, from its table (a row per problem: "tail
    speedup", "tail saves", "GEMM costs more", "GEMM share of ours", "model speedup"; times in ms), itself computed
    from the scoreboard and groupnorm_fusion records of one device: every number here comes from them."""
    if df.empty:
        return "No scoreboard and groupnorm_fusion records of one device to compare."
    lines = []
    for p, r in df.iterrows():
        lines.append(f"- **{p}**: the tail runs {r['tail speedup']:.1f}x faster than eager's and saves "
                     f"{1e3 * r['tail saves']:.0f} us; our GEMM is {1e3 * r['GEMM costs more']:.0f} us "
                     f"{'slower' if r['GEMM costs more'] > 0 else 'faster'} than eager's and is "
                     f"{100 * r['GEMM share of ours']:.0f}% of our model's time, which runs at "
                     f"{r['model speedup']:.2f}x eager.")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the sweep of the tails (kind sweep_tails)

def sweep_entries(sweep: str, rows: int, channels: int, groups: int | None, times: dict, nbytes: int) -> list[dict]:
    """sweep_tails, sweep_min_bias and sweep_activations entries from bench.time_interleaved's {contender: Timing} at
    one size (groups None: an elementwise chain, which has no group width)."""
    width = {} if groups is None else {"group_width": channels // groups}
    return [{"contender": name, "sweep": sweep, "rows": rows, "channels": channels, **width,
             "median_ms": t.median, "p20_ms": t.p20, "p80_ms": t.p80, "GBps": nbytes / t.median / 1e6}
            for name, t in times.items()]
