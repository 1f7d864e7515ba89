"""The scoreboard's record (kind "scoreboard", measured by utils.chapters.scoreboard) read back: the stages,
each problem's speedup over eager fp32 per stage, the table every chapter shows (a DataFrame; Markdown for the
README), and the headline ratios it shares with chapters 09 and 10's records, each with the spread of its run.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

from utils.report.records import to_markdown
from utils.results import short_commit

KIND = "scoreboard"
PROBLEM_IDS = (94, 75, 37, 62)
EAGER = "eager"
# torch.compile's modes, as notebook 10 times them: "max-autotune" would also capture CUDA graphs,
# which no other contender gets; "-no-cudagraphs" autotunes the same kernels without them.
COMPILE_MODES = {"torch.compile": "default", "torch.compile max-autotune-no-cudagraphs": "max-autotune-no-cudagraphs"}


@dataclass(frozen=True)
class Stage:
    id: str  # the chapter that adds it, "02" ... "10"
    label: str  # legend and table header
    kernels: tuple[str, ...]  # the kernel files (kernels/<name>.cu) it calls
    tier: str = "strict"


STAGES: dict[str, Stage] = {s.id: s for s in (
    Stage("02", "02 naive GEMM", ("gemm_01_naive",)),
    Stage("03", "03 rung 7", ("gemm_07_pipelined",)),
    Stage("04", "04 + bias epilogue", ("gemm_bias",)),
    Stage("05", "05 + fused activations", ("gemm_bias", "activations")),
    Stage("06", "06 + fused GroupNorm", ("gemm_bias", "groupnorm")),
    Stage("07", "07 + 75's fused tail", ("gemm_bias", "groupnorm", "min_bias_broadcast")),
    Stage("09", "09 whole model in the 3xTF32 GEMM", ("fused_gemm_groupnorm", "gemm_10_3xtf32", "groupnorm",
                                                     "min_bias_broadcast")),
    Stage("10", "10 the drop-ins", ("fused_gemm_groupnorm",)),
)}


def by_stage(rec_or_entries) -> dict[tuple[int, str], dict]:
    entries = rec_or_entries["entries"] if isinstance(rec_or_entries, dict) else rec_or_entries
    return {(e["problem"], e["stage"]): e for e in entries}


def speedups(rec_or_entries) -> dict[int, dict[str, float]]:
    """{problem: {stage or "compile": speedup over eager fp32}}; "compile" is the faster of the
    compile modes, and "compile_mode" (a name) says which. Problems without an eager row are left out."""
    at = by_stage(rec_or_entries)
    out: dict[int, dict] = {}
    for pid in dict.fromkeys(p for p, _ in at):
        eager = at.get((pid, EAGER))
        if eager is None:
            continue
        row = {s: eager["median_ms"] / at[(pid, s)]["median_ms"] for s in STAGES if (pid, s) in at}
        compiled = [at[(pid, c)] for c in COMPILE_MODES if (pid, c) in at]
        if compiled:
            best = min(compiled, key=lambda e: e["median_ms"])
            row |= {"compile": eager["median_ms"] / best["median_ms"], "compile_mode": best["stage"]}
        out[pid] = row
    return out


def stages_upto(upto: str | None) -> list[str]:
    if upto is not None and upto not in STAGES:
        raise ValueError(f"no stage {upto!r}; the stages are {', '.join(STAGES)}")
    return [s for s in STAGES if upto is None or s <= upto]


def ordered(pids) -> list[int]:
    return [p for p in PROBLEM_IDS if p in pids] + [p for p in pids if p not in PROBLEM_IDS]


def fmt_x(v: float) -> str:
    return f"{v:.3f}x" if v < 0.1 else f"{v:.2f}x"


COMPILE_COLUMN = "torch.compile (faster mode)"
EAGER_COLUMN = "eager fp32 ms"


def table(rec: dict, upto: str | None = None) -> pd.DataFrame:
    """Problem x column, from the record: eager fp32's median ms, the speedup over eager fp32 of every stage up
    to `upto` (all: None) that the record has, column named by its label, then the faster torch.compile mode's;
    NaN where a problem lacks a stage. Indexed by problem, in PROBLEM_IDS' order."""
    speed, at = speedups(rec), by_stage(rec)
    present = [s for s in stages_upto(upto) if any(s in row for row in speed.values())]
    rows = {pid: {EAGER_COLUMN: at[(pid, EAGER)]["median_ms"],
                  **{STAGES[s].label: speed[pid].get(s, float("nan")) for s in present},
                  COMPILE_COLUMN: speed[pid].get("compile", float("nan"))} for pid in ordered(list(speed))}
    frame = pd.DataFrame.from_dict(rows, orient="index",
                                   columns=[EAGER_COLUMN, *(STAGES[s].label for s in present), COMPILE_COLUMN])
    frame.index.name = "problem"
    return frame


def interleaved(rec: dict) -> bool:
    """Whether every entry was timed in turn with the others (utils.bench.time_interleaved, "timing":
    "interleaved"), as chapters 09 and 10 time theirs; a record made before that timed them one after another."""
    return all(e.get("timing") == "interleaved" for e in rec["entries"])


def caption(rec: dict) -> str:
    how = "every contender timed in turn" if interleaved(rec) else "the contenders timed one after another"
    return f"Speedup over eager fp32 (TF32 off) in one run, {how}; {_stamp(rec)}."


def footnotes(rec: dict, upto: str | None = None) -> list[str]:
    """What the table leaves out: stages the record lacks, and the contenders timed with fewer repetitions."""
    speed = speedups(rec)
    notes = []
    missing = [s for s in stages_upto(upto) if not any(s in row for row in speed.values())]
    if missing:
        notes.append(f"Not in this record: stage {', '.join(missing)}.")
    slow = sorted({(e["stage"], e["reps"]) for e in rec["entries"] if e.get("reps", 0) < max(
        (x.get("reps", 0) for x in rec["entries"]), default=0)})
    if slow:
        apart = any(e.get("group") == "slow" for e in rec["entries"])
        notes.append("Timed with fewer repetitions (slow" + ("; in turn in a group of their own, over the others' eager"
                                                             if apart else "") + "): "
                     + ", ".join(f"{s} ({n})" for s, n in slow) + ".")
    return notes


def markdown(rec: dict, upto: str | None = None) -> str:
    """table() in Markdown under its caption, the `upto` column in bold, and footnotes()."""
    frame = table(rec, upto)
    mine = STAGES[upto].label if upto is not None and upto in STAGES else None
    formats = {c: (lambda v: f"**{fmt_x(v)}**") if c == mine else fmt_x for c in frame.columns}
    formats[EAGER_COLUMN] = "{:.3f}"
    if mine in frame.columns:
        frame = frame.rename(columns={mine: f"**{mine}**"})
        formats[f"**{mine}**"] = formats.pop(mine)
    parts = [caption(rec), to_markdown(frame, formats), *footnotes(rec, upto)]
    return "\n\n".join(parts)


# --------------------------------------------------------------------------- one figure for one fact

def ratio_spread(numerator: dict, denominator: dict) -> tuple[float, float, float]:
    """The ratio of two entries' medians (numerator's time over denominator's: a speedup of the denominator)
    and its spread in the run that measured them: (ratio, numerator's p20 / denominator's p80, numerator's p80
    / denominator's p20)."""
    return (numerator["median_ms"] / denominator["median_ms"], numerator["p20_ms"] / denominator["p80_ms"],
            numerator["p80_ms"] / denominator["p20_ms"])


@dataclass(frozen=True)
class Quote:
    """Where a record quotes a headline ratio: the entry of the contender and the entries it is over."""
    kind: str  # the record's kind
    contender: Callable  # entries of one problem -> the contender's entry or None
    over: dict  # {"eager" | "compile": entries of one problem -> the entry it is over, or None}


def _one(entries: list[dict], **match) -> dict | None:
    found = [e for e in entries if all(e.get(k) == v for k, v in match.items())]
    return found[0] if len(found) == 1 else None


def _faster(entries: list[dict]) -> dict | None:
    return min(entries, key=lambda e: e["median_ms"]) if entries else None


# Each headline: the records that quote it, at the strict tier (TF32 off), steady state. The drop-ins' forward
# (scoreboard's stage 10, chapter 10's "ours"), over eager and over the faster torch.compile mode; the whole
# model in one kernel (stage 09, chapter 09's "fused"), over eager and over torch.compile's default mode, the
# one chapter 09 times.
HEADLINES: dict[str, tuple[Quote, Quote]] = {
    "the drop-ins' forward": (
        Quote(KIND, lambda es: _one(es, stage="10"),
              {"eager": lambda es: _one(es, stage=EAGER),
               "compile": lambda es: _faster([e for e in es if e["stage"] in COMPILE_MODES])}),
        Quote("solutions", lambda es: _one(es, contender="ours", tf32=False, protocol="steady"),
              {"eager": lambda es: _one(es, contender="eager", tf32=False, protocol="steady"),
               "compile": lambda es: _faster([e for e in es if e["contender"] in COMPILE_MODES and not e["tf32"]
                                              and e["protocol"] == "steady"])})),
    "the whole model in one kernel": (
        Quote(KIND, lambda es: _one(es, stage="09"),
              {"eager": lambda es: _one(es, stage=EAGER), "compile": lambda es: _one(es, stage="torch.compile")}),
        Quote("whole_model_fusion", lambda es: _one(es, contender="fused", tier="strict"),
              {"eager": lambda es: _one(es, contender="eager", tier="strict"),
               "compile": lambda es: _one(es, contender="torch.compile", tier="strict")})),
}


def quoted(rec: dict, quote: Quote) -> dict[tuple[int, str], tuple[float, float, float]]:
    """{(problem, "eager" | "compile"): ratio_spread} of what `rec` (of quote.kind) says of a headline."""
    out = {}
    for pid in dict.fromkeys(e["problem"] for e in rec["entries"]):
        entries = [e for e in rec["entries"] if e["problem"] == pid]
        mine = quote.contender(entries)
        for over, find in quote.over.items():
            base = find(entries)
            if mine is not None and base is not None:
                out[pid, over] = ratio_spread(base, mine)
    return out


def headline_rows(records: dict[str, dict | None]) -> pd.DataFrame:
    """Every headline ratio that two of `records` ({kind: record}, one device) both quote: a row per headline,
    problem and what it is over, each record's ratio with the spread of its run, and whether the two agree (their
    spreads overlap). Empty where no two records quote the same headline."""
    rows = []
    for headline, (a, b) in HEADLINES.items():
        ra, rb = records.get(a.kind), records.get(b.kind)
        if ra is None or rb is None:
            continue
        qa, qb = quoted(ra, a), quoted(rb, b)
        for key in [k for k in qa if k in qb]:
            (x, x_lo, x_hi), (y, y_lo, y_hi) = qa[key], qb[key]
            rows.append({"headline": headline, "problem": key[0], "over": key[1], "first": a.kind, "ratio": x,
                         "lo": x_lo, "hi": x_hi, "second": b.kind, "ratio_2": y, "lo_2": y_lo, "hi_2": y_hi,
                         "agree": x_lo <= y_hi and y_lo <= x_hi})
    return pd.DataFrame(rows, columns=["headline", "problem", "over", "first", "ratio", "lo", "hi", "second",
                                       "ratio_2", "lo_2", "hi_2", "agree"])


def _stamp(rec: dict) -> str:
    return f"recorded on {rec['device']['name']}, {rec['date'][:10]}, commit `{short_commit(rec['git_commit'])}`"
