"""The helpers of the memory-bound chapter (notebooks 05, 06 and 07): each fused kernel timed beside a
same-size copy in one run, its GB/s as % of that copy, a table, a bar plot and computed findings
against the kernel header's PREDICTION. Tested in tests/test_memory_chapter.py.

    chapter = MemoryChapter(RESULTS_DIR, ON_GPU, CAN_COMPILE, SCALE, REPS)   # the parameters cell's values
    act = chapter.load("activations")                     # the compiled kernel, or None with a SKIPPED line
    entries = measure(spec, REPS)                         # one bench.compare, GB/s and % of copy per row
    print(table(entries))
    chapter.show_measurement("fused_activations", entries, title, predictions, prediction_text)
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib
from IPython.display import Markdown, display
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from utils import bench, build, env, plots, results
from utils.run import skip
from utils.show import header_section

__all__ = ["ROLE_COLOURS", "TARGET_PCT", "MemoryChapter", "bandwidth_plot", "findings", "header_section", "measure",
           "gn_inputs", "quoted", "stamp", "table", "verdict"]

TARGET_PCT = 80  # the chapter's target: each fused kernel at >= 80% of the copy bandwidth measured at the same size
ROLE_COLOURS = {"ours": plots.COLOURS["ours"], "eager": plots.COLOURS["eager"], "torch": "#3182bd",
                "yardstick": "#a8a8a8", "copy": "#444444"}


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


def table(entries):
    """The rows of measure() (or of a record) as text: one line per contender, speedups against the rows each names."""
    named = {(e["problem"], e["contender"]): e for e in entries}
    lines = [f"{'problem':>7}  {'contender':<44} {'role':<6} {'median us':>10} {'GB/s':>6} {'% copy':>7}  faster than"]
    for e in entries:
        against = [f"{named[(e['problem'], r)]['median_ms'] / e['median_ms']:.2f}x {r}"
                   for r in e.get("replaces", ()) if (e["problem"], r) in named]
        lines.append(f"{e['problem']:>7}  {e['contender']:<44} {e['role']:<6} {1e3 * e['median_ms']:10.1f} "
                     f"{e['GBps']:6.0f} {e['pct_of_copy']:6.0f}%  {'; '.join(against)}")
    return "\n".join(lines)


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
        fig.tight_layout()
        if save is not None:
            Path(save).parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(save, bbox_inches="tight")
    return fig


def quoted(prediction, phrase):
    """`phrase` if the header's PREDICTION says it (whitespace aside), else None: a prediction is only compared
    with a measurement while the header still makes it."""
    return phrase if prediction and phrase in " ".join(prediction.split()) else None


def verdict(value, lo, hi):
    """How a measured value compares with a predicted range [lo, hi], higher being better (GB/s, speedups)."""
    return "within it" if lo <= value <= hi else ("better than predicted" if value > hi else "worse than predicted")


def findings(entries, source, predictions, prediction_text):
    """Computed paragraphs: each fused kernel's time, GB/s, % of copy against the target, speedups, and the
    header's predictions. predictions: {contender: [(what, lo, hi, phrase)]}, what = "pct" (of copy) or the
    name of a replaced contender (a speedup range)."""
    named = {(e["problem"], e["contender"]): e for e in entries}
    paragraphs, misses = [f"{source}."], []
    for e in entries:
        if e["role"] != "ours":
            continue
        copy = next(c for c in entries if c["problem"] == e["problem"] and c["role"] == "copy")
        met = e["pct_of_copy"] >= TARGET_PCT
        if not met:
            misses.append(f"`{e['contender']}` (problem {e['problem']}, {e['pct_of_copy']:.0f}%)")
        text = (f"**{e['contender']}** (problem {e['problem']}, {' x '.join(map(str, e['shape']))}): "
                f"{1e3 * e['median_ms']:.1f} us, {e['GBps']:.0f} GB/s, **{e['pct_of_copy']:.0f}% of the same-size copy** "
                f"({copy['GBps']:.0f} GB/s in this run): it {'meets' if met else '**misses**'} the {TARGET_PCT}% target")
        for r in e.get("replaces", ()):
            if (e["problem"], r) in named:
                s = named[(e["problem"], r)]["median_ms"] / e["median_ms"]
                text += (f"; **{s:.2f}x** {'faster' if s > 1 else 'slower'} than {r}"
                         + ("" if s > 1 else " (**the target says faster: missed**)"))
                if s <= 1 and r.startswith(("eager", "F.")):
                    misses.append(f"`{e['contender']}` against {r}")
        text += "."
        for what, lo, hi, phrase in predictions.get(e["contender"], ()):
            if not quoted(prediction_text, phrase):
                text += f" (The header no longer says \"{phrase}\": not compared.)"
                continue
            if what == "pct":
                text += (f" The header predicted \"{phrase}\": measured {e['pct_of_copy']:.0f}% of the same-size copy, "
                         f"{verdict(e['pct_of_copy'], lo, hi)}.")
            elif (e["problem"], what) in named:
                s = named[(e["problem"], what)]["median_ms"] / e["median_ms"]
                text += f" It predicted \"{phrase}\": measured {s:.2f}x against {what}, {verdict(s, lo, hi)}."
        paragraphs.append(text)
    paragraphs.append("**Where a kernel misses:** " + "; ".join(misses) + "." if misses else
                      f"Every fused kernel here meets the {TARGET_PCT}% target and beats what it replaces in this run.")
    return "\n\n".join(paragraphs)


def stamp(rec: dict) -> str:
    """A record's device, date and commit, to say whose numbers a replot shows."""
    return f"{rec['device']['name']}, {rec['date'][:10]}, commit `{rec['git_commit']}`"


@dataclass(frozen=True)
class MemoryChapter:
    """What the chapter's loading and showing helpers need from the notebook's parameters cell: where
    records are read and plots written, whether this machine has a GPU or can compile, the scale and
    the repetitions."""
    results_dir: str | Path
    on_gpu: bool
    can_compile: bool
    scale: str
    reps: int

    def plot_path(self, kind: str) -> Path | None:
        """results.plot_path for this chapter's parameters."""
        return results.plot_path(kind, self.results_dir, on_gpu=self.on_gpu)

    def recorded(self, kind: str) -> dict | None:
        """This GPU's record of `kind`, else the latest of any device; None when there is none."""
        rec = results.load(kind, results_root=self.results_dir)
        return rec if rec is not None else results.latest(kind, self.results_dir)[0]

    def load(self, name: str, kernels_dir: Path | None = None):
        """The compiled kernel module, printing what it exports; None (with a SKIPPED line) where
        nothing can compile, so the cells after it skip instead of failing."""
        if not self.can_compile:
            skip(f"compiling {name}", "no nvcc or a CPU-only torch")
            return None
        module = build.load_kernel(name, kernels_dir=kernels_dir)
        where = build.display_path(Path(module.__file__))
        print(f"{name}: {', '.join(e.name for e in build.exported_functions(build.kernel_source(name, kernels_dir)))}"
              f"  ({where})")
        return module

    def show_measurement(self, kind: str, entries: list[dict] | None, title: str, predictions: dict,
                         prediction_text: str | None) -> None:
        """On a GPU: the plot and findings of the rows just measured (the plot saved at the full scale).
        Without one (entries None): the latest recorded run's table, plot and findings, or a SKIPPED line."""
        if entries is not None:
            display(bandwidth_plot(entries, title, save=self.plot_path(kind) if self.scale == "full" else None))
            display(Markdown(findings(entries, f"Measured on {env.device_name()}, {self.reps} repetitions per contender",
                                      predictions, prediction_text)))
            return
        rec = self.recorded(kind)
        if rec is None:
            skip(f"the {kind} plot and findings", f"no GPU and no recorded {kind} run")
            return
        print(f"the latest recorded run ({stamp(rec)}, {rec['notes']}):")
        print(table(rec["entries"]))
        display(bandwidth_plot(rec["entries"], title, recorded_from=rec))
        display(Markdown(findings(rec["entries"], f"Recorded on {stamp(rec)}", predictions, prediction_text)))


def gn_inputs(N, C, offset=0.0, scale=2.0, with_bias=False):
    """A harness input factory for GroupNorm kernels: x (N, C) around `offset`, γ (|γ| in [0.5, 1.5],
    random signs) and β ~ N(0, 0.5²), never the defaults 1 and 0; with_bias adds a (1, C, 1, 1) bias."""
    import torch

    def factory(g):
        sign = torch.randint(0, 2, (C,), generator=g) * 2 - 1
        out = [torch.randn(N, C, generator=g) * scale + offset, (torch.rand(C, generator=g) + 0.5) * sign,
               0.5 * torch.randn(C, generator=g)]
        return out + [torch.randn(1, C, 1, 1, generator=g)] if with_bias else out
    return factory

