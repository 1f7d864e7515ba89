"""Notebooks 10 and 13's debriefs: a recorded run held against the predictions written before it, in
Markdown. Every figure is computed from the record the notebook shows, or is the named probe's the
predictions started from, so an executed copy agrees with its own tables on any device and any rerun;
the prose around a debrief keeps only what holds on every recorded device. Tested by
tests/test_solution_debriefs.py.

    display(Markdown(forward_debrief(measured, PREDICTED, S.recorded("ceilings"))))  # notebook 10, §5
    display(Markdown(training_debrief(trained, PREDICTED_STEP, STEP_TARGETS)))       # notebook 13, §2
    display(Markdown(autocast_summary(autocast)))                                     # notebook 13, §3
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from utils import results
from utils.chapters import session as chapter
from utils.problems import get_problem

# The H100 probe both chapters' predictions started from (experiments/training/training_probe.py, problem 94,
# one run): the weight's small parts made alone, and each contender's whole training step. A fixed log, not a
# record of the run shown, so it is read from the repository's results/ wherever records are read from.
PROBE = Path("nvidia-h100-80gb-hbm3") / "logs" / "training" / "training_probe_94.json"
SIDES = {-1: "below", 0: "inside", 1: "above"}
MIXED = {frozenset({0, 1}): "at the top of", frozenset({-1, 0}): "at the bottom of"}  # else "around"


def probe(path: Path = results.RESULTS / PROBE) -> dict[tuple[str, bool], float]:
    """{(contender, tf32): median ms} of the probe's log (problem 94); empty where the log is missing."""
    if not path.exists():
        return {}
    return {(r["contender"], r["tf32"]): r["median_ms"] for r in json.loads(path.read_text())["rows"]}


def span(values, fmt: str = "{:.2f}", unit: str = "x") -> str:
    """'lo–hi<unit>' as the prose writes a range, or one value when both ends round alike."""
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return f"{lo}{unit}" if lo == hi else f"{lo}–{hi}{unit}"


def names(pids) -> str:
    """[94, 75, 62] -> "94, 75 and 62"."""
    pids = [str(p) for p in pids]
    return pids[0] if len(pids) == 1 else f"{', '.join(pids[:-1])} and {pids[-1]}"


def predicted_range(text: str) -> tuple[float, float]:
    """A cell's prediction, "2.2-2.4x" (or one value, "1.1x"), as (low, high)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:[-–]\s*(\d+(?:\.\d+)?))?\s*x\s*", text)
    if m is None:
        raise ValueError(f"not a predicted ratio or range of ratios: {text!r}")
    return float(m[1]), float(m[2] or m[1])


def side(value: float, lo: float, hi: float, digits: int = 2) -> int:
    """-1, 0 or 1: `value`, read as shown (rounded to `digits`), below, inside or above [lo, hi]."""
    shown = round(value, digits)
    return -1 if shown < lo else 1 if shown > hi else 0


def position(values, lo: float, hi: float) -> str:
    """Where measured ratios sit against a predicted range: "below", "inside" or "above" when all sit alike;
    "at the top of" (inside and above), "at the bottom of" (inside and below), "around" (below and above)."""
    sides = frozenset(side(v, lo, hi) for v in values)
    return SIDES[next(iter(sides))] if len(sides) == 1 else MIXED.get(sides, "around")


def against(ratios: dict[int, float], predicted: str) -> str:
    """Ratios of some problems that share a prediction, and where they sit against it, in words:
    "2.37–2.43x on 94, 75 and 62, at the top of the 2.2–2.4x predicted (above it on 94)"."""
    lo, hi = predicted_range(predicted)
    where = position(ratios.values(), lo, hi)
    text = f"{span(ratios.values())} on {names(ratios)}, {where} the {predicted.replace('-', '–')} predicted"
    if where not in SIDES.values():
        outside = [(word, [p for p, r in ratios.items() if side(r, lo, hi) == s]) for s, word in SIDES.items() if s]
        text += " (" + ", ".join(f"{word} it on {names(pids)}" for word, pids in outside if pids) + ")"
    return text


def against_each(ratios: dict[int, float], predicted: dict[int, str]) -> str:
    """against() for each group of problems that share a prediction, in the order of `ratios`."""
    groups: dict[str, dict[int, float]] = {}
    for pid, ratio in ratios.items():
        groups.setdefault(predicted[pid], {})[pid] = ratio
    return "; ".join(against(group, text) for text, group in groups.items())


def target_words(ratios: dict[int, float], goal: float, what: str = "target") -> str:
    """"the 2x target met on all four", "... met on 94 and 75, missed on 37 and 62", "... missed on all four"."""
    met = [p for p, r in ratios.items() if round(r, 2) >= goal]
    everywhere = "all four" if len(ratios) == 4 else names(ratios)
    if len(met) in (0, len(ratios)):
        return f"the {goal:g}x {what} {'met' if met else 'missed'} on {everywhere}"
    return f"the {goal:g}x {what} met on {names(met)}, missed on {names(p for p in ratios if p not in met)}"


def head(record: dict, what: str) -> str:
    return (f"**Debrief** of {what} ({record['device']['name']}, {record['date'][:10]}, commit "
            f"`{record['git_commit']}`), every figure from its record")


def _ratios(record: dict, contender: str = "ours", protocol: str = "steady") -> dict[tuple[int, bool], dict]:
    return {(r["problem"], r["tf32"]): r for r in chapter.solution_ratios(record["entries"], contender)
            if r["protocol"] == protocol}


def _medians(record: dict) -> dict[tuple[int, str, bool, str], float]:
    return {(e["problem"], e["contender"], e["tf32"], e["protocol"]): e["median_ms"] for e in record["entries"]}


def _tier(rows: dict[tuple[int, bool], dict], tf32: bool, key: str = "vs_compile") -> dict[int, float]:
    return {pid: r[key] for (pid, t), r in rows.items() if t == tf32}


def per_call_words(steady: dict[int, float], per_call: dict[int, float]) -> str:
    """The per-call ratio's change from steady's, in words, against the prediction (above, on all):
    "0.4–2.4% below steady, not above as predicted", "8–15% above steady, as predicted", or both ways."""
    change = {p: 100 * (per_call[p] / steady[p] - 1) for p in steady}
    down, up = [-c for c in change.values() if c < 0], [c for c in change.values() if c > 0]
    if down and up:
        above = [p for p, c in change.items() if c > 0]
        return f"from {max(down):.1f}% below to {max(up):.1f}% above steady, above it on {names(above)} only"
    if up:
        return f"{span(up, '{:.1f}', '%')} above steady, as predicted"
    return f"{span(down or [0.0], '{:.1f}', '%')} below steady, not above as predicted"


def weight_pass(record: dict, ceilings: dict | None, probe_ms: float | None) -> str:
    """The pass over the weight: the default's strict steady time less the frozen model's, on the problems
    with the largest weight, against the probe's and a copy of the weight's bytes at the recorded bandwidth."""
    ms = _medians(record)
    size = {pid: get_problem(pid).dims("full") for pid in dict.fromkeys(e["problem"] for e in record["entries"])}
    weight = {pid: d.out_features * d.in_features for pid, d in size.items()}
    largest = [pid for pid in weight if weight[pid] == max(weight.values())]
    took = [ms[p, "ours", False, "steady"] - ms[p, "ours, frozen", False, "steady"] for p in largest]
    text = (f"*The pass over the weight*, all that sets the default apart from the frozen model (their strict "
            f"steady times' difference): {span(took, '{:.3f}', ' ms')} on {names(largest)}")
    if probe_ms is not None:
        text += f", against the H100 probe's {probe_ms:.3f} ms (`results/{PROBE.as_posix()}`)"
    if ceilings is not None and ceilings["device"]["slug"] == record["device"]["slug"]:
        gbps = ceilings["entries"][0]["copy_GBps"]
        copy_ms = 2 * 4 * weight[largest[0]] / gbps / 1e6  # the weight read and its small parts written, fp32
        text += (f"; a copy of the weight's size at this device's recorded bandwidth ({gbps:.0f} GB/s, "
                 f"`ceilings.json`) takes {copy_ms:.3f} ms")
    return text


def added_per_call(record: dict) -> dict[int, tuple[float, float]]:
    """At the strict tier, {problem: (ms a synchronized call added to ours, ms it added to the faster
    torch.compile mode per call)}: each one's per-call median less its steady one."""
    ms = _medians(record)
    return {pid: tuple(ms[pid, c, False, "per_call"] - ms[pid, c, False, "steady"] for c in ("ours", r["compile_mode"]))
            for (pid, tf32), r in _ratios(record, protocol="per_call").items() if not tf32}


def per_call_summary(record: dict) -> str:
    """The line above per_call_table: what a synchronized call added to each side at the strict tier, the one
    addition over the other, against the steady ratio."""
    steady, added = _ratios(record), added_per_call(record)
    ours, theirs = ([a[i] for a in added.values()] for i in (0, 1))
    return (f"A synchronized call added {span(ours, '{:.3f}', ' ms')} to ours and {span(theirs, '{:.3f}', ' ms')} to "
            f"`torch.compile` at the strict tier, {span([t / o for o, t in added.values()], '{:.1f}', '')} times as "
            f"much, against a steady ratio of {span([steady[p, False]['vs_compile'] for p in added], '{:.1f}', '')} "
            "between them (`torch.compile` in its faster mode per call):")


def per_call_table(record: dict) -> pd.DataFrame:
    """Per problem (the index), what a synchronized call added (added_per_call) to ours and to the faster
    torch.compile mode, the one addition over the other, and ours over that mode in each protocol."""
    steady, per_call, added = _ratios(record), _ratios(record, protocol="per_call"), added_per_call(record)
    return pd.DataFrame.from_dict({pid: {"added to ours": f"{o:.3f} ms", "added to torch.compile": f"{t:.3f} ms",
                                         "times ours": f"{t / o:.1f}",
                                         "× compile, steady": f"{steady[pid, False]['vs_compile']:.2f}x",
                                         "per call": f"{per_call[pid, False]['vs_compile']:.2f}x"}
                                   for pid, (o, t) in added.items()}, orient="index").rename_axis("problem")


def forward_debrief(record: dict, predicted: dict, ceilings: dict | None = None, probe_ms: float | None = None) -> str:
    """Notebook 10, §5: the forward's record against PREDICTED ({(tf32, contender): {problem: "lo-hi x"}}, steady
    state, ours over the faster torch.compile mode), the pass over the weight against the H100 probe's
    (probe_ms, default: read from PROBE) and `ceilings`' copy bandwidth, and per call against steady."""
    if probe_ms is None:
        probe_ms = probe().get(("weight's small parts", False))
    default, frozen = _ratios(record), _ratios(record, "ours, frozen")
    per_call = _ratios(record, protocol="per_call")
    lines = [head(record, "the forward's run above") + ": ours over the faster `torch.compile` mode with the same "
             "TF32 setting, in steady state unless said.", "",
             f"- *Frozen, strict*: {against_each(_tier(frozen, False), predicted[False, 'ours, frozen'])}.",
             f"- *Default, strict*: {against_each(_tier(default, False), predicted[False, 'ours'])}.",
             f"- {weight_pass(record, ceilings, probe_ms)}.",
             f"- *TF32*, default: {against_each(_tier(default, True), predicted[True, 'ours'])}.",
             f"- *Per call*, predicted a little above steady throughout: at the strict tier the ratio per call is "
             f"{per_call_words(_tier(default, False), _tier(per_call, False))}; with TF32 it is "
             f"{per_call_words(_tier(default, True), _tier(per_call, True))}.", "",
             per_call_summary(record)]
    return "\n".join(lines)


def training_debrief(record: dict, predicted: dict, targets: dict, probe_rows: dict | None = None) -> str:
    """Notebook 13, §2: a training step's record against PREDICTED_STEP ({tf32: {problem: "lo-hi x"}}) and
    STEP_TARGETS ({tf32: (target, moonshot)}), ours over the faster torch.compile mode; problem 94's step in
    ms beside the H100 probe's (probe_rows, default: read from PROBE); and what 1.3x asks of 94's TF32 step."""
    probe_rows = probe() if probe_rows is None else probe_rows
    steady, ms = _ratios(record), _medians(record)
    lines = [head(record, "the training step's run above") + ": ours over the faster `torch.compile` mode with the "
             "same TF32 setting.", ""]
    for tf32, tier in ((False, "Strict"), (True, "TF32")):
        ratio = _tier(steady, tf32)
        goal, moonshot = targets[tf32]
        reached = target_words(ratio, goal)
        if any(round(r, 2) >= goal for r in ratio.values()):  # a moonshot is worth naming where the target was met
            reached += ", " + target_words(ratio, moonshot, "moonshot")
        lines.append(f"- *{tier}*: {against_each(ratio, predicted[tf32])}; {reached}.")
    step = {c: ms[94, c, False, "steady"] for c in ("ours", "eager", "torch.compile")}
    text = (f"- *Problem 94, strict*: ours took {step['ours']:.2f} ms a step, eager {step['eager']:.2f} ms and "
            f"`torch.compile` (default mode) {step['torch.compile']:.2f} ms")
    if all((c, False) in probe_rows for c in step):
        text += (f"; the H100 probe's whole step took {probe_rows['ours', False]:.2f}, {probe_rows['eager', False]:.2f} "
                 f"and {probe_rows['torch.compile', False]:.2f} ms")
    lines.append(text + ".")
    goal = targets[True][0]
    compiled = min(ms[94, mode, True, "steady"] for mode in chapter.COMPILE_MODES)
    lines.append(f"- *Problem 94, TF32*: ours took {ms[94, 'ours', True, 'steady']:.2f} ms a step; {goal:g}x this "
                 f"run's `torch.compile` asks for {compiled / goal:.2f} ms.")
    return "\n".join(lines)


def autocast_summary(record: dict, target: float = 1.0) -> str:
    """Notebook 13, §3: under autocast, ours over eager (the target, `target`x) and over the faster
    torch.compile mode, both under the same autocast."""
    steady = _ratios(record)
    eager, compiled = _tier(steady, False, "vs_eager"), _tier(steady, False)
    ahead = {p: r for p, r in compiled.items() if round(r, 2) >= 1}
    behind = {p: r for p, r in compiled.items() if p not in ahead}
    parts = [f"ahead of it on {names(ahead)} ({span(ahead.values())})"] if ahead else []
    parts += [f"behind it on {names(behind)} ({span(behind.values())})"] if behind else []
    return (f"{head(record, 'the autocast run above')}: ours at {span(eager.values())} eager under the same autocast, "
            f"{target_words(eager, target)}; against the faster `torch.compile` mode, "
            f"{' and '.join(parts)}.")


FINAL_STRICT = (("solutions", False), ("training", False))  # the settings where the GEMM sets the margin


def final_findings(records: dict[str, dict | None]) -> str:
    """Notebook 13, §4, under the final table: what its ratios over the faster torch.compile mode say, from the
    records ({kind: record or None} of the kinds "solutions", "training", "autocast"; ours by default, steady):
    the range with TF32 off (the forward and the training step), the range with TF32 allowed and under autocast,
    and whether every margin of the second kind is smaller than every one of the first."""
    ratios = {(kind, tf32): [r["vs_compile"] for r in chapter.solution_ratios(rec["entries"])
                             if r["protocol"] == "steady" and r["tf32"] == tf32]
              for kind, rec in records.items() if rec is not None for tf32 in (False, True)}
    strict = [v for key in FINAL_STRICT for v in ratios.get(key, [])]
    rest = [v for key, values in ratios.items() if key not in FINAL_STRICT for v in values]
    if not strict or not rest:
        return ""
    what = " and ".join(w for kind, w in (("solutions", "forward"), ("training", "training step"))
                        if ratios.get((kind, False)))
    where = ", ".join(w for kind, tf32, w in (("solutions", True, "the forward with TF32"),
                                              ("training", True, "the training step with TF32"),
                                              ("autocast", False, "the forward under autocast")) if ratios.get((kind, tf32)))
    over = "over" if min(strict) > 1 else "against"
    verdict = ("every one of them smaller than any with TF32 off" if max(rest) < min(strict)
               else "some of them as large as those with TF32 off")
    return (f"Over the faster `torch.compile` mode with the same setting: with TF32 off ({what}), ours runs "
            f"{span(strict)} {over} it; {where}: {span(rest)}, {verdict}.")
