"""Notebooks 08's and 09's records read back, as Markdown: kind "tensor_cores" (the pre-split accuracy, rung 10's
promotion intervals, the rungs' timing against their headers' PREDICTIONs and the chapter's targets) and kind
"whole_model_fusion" (notebook 09, section 4: the whole models in the GEMM's epilogue against the unfused path).
The README shows `render` and `render_fusion`; the notebooks show the same tables. Each table is a pandas DataFrame of
the record's values (`*_frame`), written in Markdown by DataFrame.to_markdown (`*_table`). The numbers come from the
record and from the kernels' headers (utils.show.header_section): nothing here holds a measured number.
"""
from __future__ import annotations

import re

import pandas as pd

from utils.report.records import to_markdown
from utils.show import header_section

KIND = "tensor_cores"  # utils.results kind of the chapter's one GPU run
RUNGS = ("gemm_08_mma_tf32", "gemm_09_wgmma_tf32", "gemm_10_3xtf32")
RUNG10 = "gemm_10_3xtf32"
SHAPES = ((1024, 8192, 8192), (32768, 4096, 1024))  # M x N x K of problems 94, 75 and 62; of problem 37
SGEMM = "cuBLAS SGEMM"
TF32_CUBLAS = "cuBLAS TF32"


def accuracy_rows(rows_or_record, source: str) -> list[dict]:
    if isinstance(rows_or_record, dict):
        return [r for r in rows_or_record["entries"] if r.get("section") == "accuracy" and r.get("source") == source]
    return [r for r in rows_or_record if r.get("section", "accuracy") == "accuracy"]


def _excess(value: float) -> str:
    """An allclose excess as the tables write it: above 1 (a failure) in bold."""
    return f"**{value:.2f}**" if value > 1 else f"{value:.3g}"


def accuracy_frame(rows_or_record, source: str = "cuBLAS") -> pd.DataFrame:
    """GEMM x problem: the largest allclose excess (atol = rtol = 1e-4, over the seeds; 1 or below passes), NaN
    where not measured. From accuracy() rows, or from a record's rows of one source (accuracy_rows)."""
    rows = accuracy_rows(rows_or_record, source)
    pids = list(dict.fromkeys(r["problem"] for r in rows))
    at = {(r["contender"], r["problem"]): r["excess"] for r in rows}
    frame = pd.DataFrame([[at.get((name, pid), float("nan")) for pid in pids]
                          for name in dict.fromkeys(r["contender"] for r in rows)],
                         index=list(dict.fromkeys(r["contender"] for r in rows)), columns=pids)
    frame.index.name = "GEMM"
    return frame


def accuracy_table(rows_or_record, source: str = "cuBLAS") -> str:
    """Markdown: the largest allclose excess (atol = rtol = 1e-4, over the seeds; 1 or below passes, above in
    bold) per GEMM and problem. From accuracy() rows, or from a record's rows of one source ("cuBLAS": the
    pre-split table, "rung 10": the promotion intervals)."""
    frame = accuracy_frame(rows_or_record, source)
    return to_markdown(frame, dict.fromkeys(frame.columns, _excess))


def promote_label(k: int) -> str:
    return f"{RUNG10} PROMOTE_K={k}" + (" (never)" if k == 0 else "")


def promotion_frame(record: dict) -> pd.DataFrame:
    """Per promotion interval (k, the index; 0: never), the four models' worst excess (strict tier, over the seeds),
    then the time at the first shape and its ratio to cuBLAS SGEMM (NaN where not timed); never last."""
    rows = [e for e in record["entries"] if e.get("section") == "accuracy" and e.get("source") == "rung 10"]
    timed = {e["contender"]: e for e in record["entries"] if e.get("section") == "timing"
             and e.get("shape") == list(SHAPES[0])}
    pids = list(dict.fromkeys(r["problem"] for r in rows))
    out = {}
    for k in sorted({r["promote_k"] for r in rows}, key=lambda k: k or 10 ** 9):
        t = timed.get(promote_label(k)) or (timed.get(RUNG10) if k == record_default(record) else None)
        out[k] = {**{pid: next(r["excess"] for r in rows if r["promote_k"] == k and r["problem"] == pid) for pid in pids},
                  "ms": t["median_ms"] if t else float("nan"), "x cuBLAS SGEMM": t["x_cublas_sgemm"] if t else float("nan")}
    frame = pd.DataFrame.from_dict(out, orient="index", columns=[*pids, "ms", "x cuBLAS SGEMM"])
    frame.index.name = "promotion every"
    return frame


def promotion_table(record: dict) -> str:
    """Markdown, from a record: per promotion interval, the four models' worst excess (strict tier, over the
    seeds), the time at the first shape and its ratio to cuBLAS SGEMM."""
    frame = promotion_frame(record)
    shown = frame.rename(index=lambda k: "never" if k == 0 else f"{k} k",
                         columns={"ms": f"ms at {' x '.join(map(str, SHAPES[0]))}"})
    pids = [c for c in frame.columns if c not in ("ms", "x cuBLAS SGEMM")]
    return to_markdown(shown, {**dict.fromkeys(pids, _excess), shown.columns[-2]: "{:.3f}", "x cuBLAS SGEMM": "{:.2f}x"})


def record_default(record: dict) -> int | None:
    """The default promotion interval the record's rung 10 was built with."""
    return next((e.get("default_promote_k") for e in record["entries"] if e.get("default_promote_k") is not None), None)


# --------------------------------------------------------------------------- the rungs

_RANGE = r"(\d+(?:\.\d+)?)\s*-\s*(\d+(?:\.\d+)?)"
_SHAPE = r"at (\d+) x (\d+) x (\d+)"


# A rung's kernel paths, as the timing names them: contender -> (rung, export). The words that tie a clause
# of a PREDICTION to one export (a clause naming none speaks for the rung's main path, `gemm`).
PATHS = {name: (name, "gemm") for name in RUNGS} | {
    f"{RUNG10} linear, weight split kept": (RUNG10, "linear"),
    f"{RUNG10} split in shared memory": (RUNG10, "gemm_split_in_smem"),
    f"{RUNG10} mma.sync": (RUNG10, "gemm_mma_sync")}
_EXPORT_WORDS = {"linear": ("linear()",), "gemm_mma_sync": ("mma.sync",),
                 "gemm_split_in_smem": ("shared-memory split", "in-shared-memory", "split in shared memory")}


def _clauses(text: str) -> list[str]:
    """A PREDICTION cut into clauses at ';' and at sentence ends, each a unit that one path's numbers share."""
    return [c for c in re.split(r";|(?<!i\.e)(?<!e\.g)\.\s+", text) if c.strip()]


def _parse_clause(clause: str) -> tuple[dict, tuple[float, float] | None]:
    """({shape or None: (lo, hi)} of % of cuBLAS TF32, (lo, hi) x cuBLAS SGEMM or None) named in one clause."""
    pct: dict = {}
    matches = list(re.finditer(_RANGE + r"%", clause))
    yardstick = False
    for m, nxt in zip(matches, [*matches[1:], None]):
        after = clause[m.end(): nxt.start() if nxt else len(clause)].lstrip()
        shape = re.match(r"[^,(]*?" + _SHAPE, after)
        if after.startswith(("of cuBLAS", "of its rate")) or (yardstick and after.startswith("at")):
            yardstick = True
            pct.setdefault(tuple(int(v) for v in shape.groups()) if shape else None, (float(m[1]), float(m[2])))
        else:
            yardstick = False
    # a range, or one value marked approximate ("~4x"): a plain "1.49x" is a measurement quoted, not a prediction
    x = re.search(_RANGE + r"x cuBLAS SGEMM", clause) or re.search(r"~(\d+(?:\.\d+)?)x cuBLAS SGEMM", clause)
    return pct, None if x is None else (float(x[1]), float(x[2] if x.lastindex == 2 else x[1]))


def predictions(name: str, text: str | None = None, export: str = "gemm") -> dict:
    """The numbers a rung's PREDICTION names for one of its paths (`export`): {"pct": {shape or None: (lo, hi)}}
    (% of cuBLAS TF32, for one shape where the clause says "at M x N x K", else for any) and "x_sgemm": (lo, hi)
    or None (x cuBLAS SGEMM). A clause that names a path (linear(), mma.sync, ...) speaks for that path only;
    the others speak for `gemm`. Read from the header, so the comparison is computed, never typed."""
    text = " ".join((text if text is not None else header_section(name, "PREDICTION") or "").split())
    paths = {e for r, e in PATHS.values() if r == name} or {export}  # the words matter where the rung has the paths
    pct: dict = {}
    x_sgemm = None
    for clause in _clauses(text):
        named = [e for e, words in _EXPORT_WORDS.items() if e in paths and any(w in clause for w in words)]
        if (named and export not in named) or (not named and export != "gemm"):
            continue
        p, x = _parse_clause(clause)
        for key, band in p.items():
            pct.setdefault(key, band)
        x_sgemm = x_sgemm or x
    return {"pct": pct, "x_sgemm": x_sgemm}


def predicted(contender: str, shape) -> tuple:
    """(% of cuBLAS TF32 band, x SGEMM band) that a timed contender's header predicts at `shape`."""
    if contender not in PATHS:
        return None, None
    want = predictions(*PATHS[contender][:1], export=PATHS[contender][1])
    return want["pct"].get(tuple(shape), want["pct"].get(None)), want["x_sgemm"]


def _band(values: tuple[float, float] | None, unit: str) -> str:
    if values is None:
        return "–"
    lo, hi = values
    return f"{lo:g}{unit}" if lo == hi else f"{lo:g}-{hi:g}{unit}"


def _where(value: float, band) -> str:
    if band is None:
        return ""
    lo, hi = band
    if lo == hi:  # "~4x": within 10%
        lo, hi = 0.9 * lo, 1.1 * hi
    return "inside" if lo <= value <= hi else ("above" if value > hi else "below")


def prediction_frame(record: dict) -> pd.DataFrame:
    """Each rung's path at each shape: its header's prediction and the record's measurement, in % of cuBLAS TF32
    and x cuBLAS SGEMM (both from the same run), and where the measurement falls ("verdict")."""
    timed = [e for e in record["entries"] if e.get("section") == "timing" and e["contender"] in PATHS]
    rows = []
    for e in sorted(timed, key=lambda e: list(PATHS).index(e["contender"])):
        band, x_band = predicted(e["contender"], e["shape"])
        verdicts = [f"{what} {where}" for what, where in (("%:", _where(e["pct_of_cublas_tf32"], band)),
                                                         ("x:", _where(e["x_cublas_sgemm"], x_band))) if where]
        rows.append({"rung, path": e["contender"], "M x N x K": " x ".join(map(str, e["shape"])),
                     "predicted % of cuBLAS TF32": _band(band, "%"), "measured %": e["pct_of_cublas_tf32"],
                     "predicted x cuBLAS SGEMM": _band(x_band, "x"), "measured x": e["x_cublas_sgemm"],
                     "verdict": "; ".join(verdicts) or "no range in the header to compare"})
    return pd.DataFrame(rows, columns=["rung, path", "M x N x K", "predicted % of cuBLAS TF32", "measured %",
                                       "predicted x cuBLAS SGEMM", "measured x", "verdict"])


def prediction_table(record: dict) -> str:
    """Markdown: each rung's path at each shape, its header's prediction and the record's measurement, in % of
    cuBLAS TF32 and x cuBLAS SGEMM (both from the same run), and where the measurement falls."""
    return to_markdown(prediction_frame(record), {"rung, path": "`{}`", "measured %": "{:.1f}%", "measured x": "{:.2f}x"},
                       right=("predicted % of cuBLAS TF32", "measured %", "predicted x cuBLAS SGEMM", "measured x"))


# the chapter's targets, at both shapes: contender -> (key, at least, unit)
TARGETS = {"gemm_09_wgmma_tf32": ("pct_of_cublas_tf32", 90.0, "% of cuBLAS TF32"),
           "gemm_10_3xtf32": ("x_cublas_sgemm", 2.2, "x cuBLAS SGEMM"),
           f"{RUNG10} linear, weight split kept": ("x_cublas_sgemm", 2.2, "x cuBLAS SGEMM")}


def target_check(record: dict) -> str:
    """Computed bullets: each target of TARGETS at each shape, the record's value, met or missed."""
    lines = []
    for name, (key, target, unit) in TARGETS.items():
        for e in (e for e in record["entries"] if e.get("section") == "timing" and e["contender"] == name):
            value = e[key]
            shown = f"{value:.1f}%" if unit.startswith("%") else f"{value:.2f}x"
            goal = f"{target:g}%" if unit.startswith("%") else f"{target:g}x"
            lines.append(f"- `{name}` at {' x '.join(map(str, e['shape']))}: **{shown}** {unit.lstrip('%x ')}; "
                         f"target at least {goal}: **{'met' if value >= target else 'missed'}**.")
    return "\n".join(lines) or "- (no timing in this record)"


def outside(value: float, band) -> str | None:
    """"above" or "below" where `value` falls outside a predicted (lo, hi) band, None inside it or without one.
    A single value ("~4x": lo == hi) stands for a band of +-10%, as the prediction tables read it."""
    if band is None:
        return None
    lo, hi = (0.9 * band[0], 1.1 * band[1]) if band[0] == band[1] else band
    return None if lo <= value <= hi else ("above" if value > hi else "below")


def _timed(record: dict) -> dict:
    return {(e["contender"], tuple(e["shape"])): e for e in record["entries"] if e.get("section") == "timing"}


def rung10_findings(record: dict) -> str:
    """Computed sentences on rung 10 against the record: `linear` (the split kept) over cuBLAS TF32 and over
    rung 9 (three times the work), and `gemm` (splitting both operands on every call) against its predicted range
    and the 2.2x target at the first shape, where its weight is 256 MB."""
    t = _timed(record)
    linear = f"{RUNG10} linear, weight split kept"
    over_tf32 = [t[(linear, s)]["median_ms"] / t[(TF32_CUBLAS, s)]["median_ms"] for s in SHAPES]
    over_rung9 = [t[(linear, s)]["median_ms"] / t[("gemm_09_wgmma_tf32", s)]["median_ms"] for s in SHAPES]
    about_three = all(2.7 <= r <= 3.3 for r in over_tf32 + over_rung9)
    span = f"{min(over_tf32 + over_rung9):.2f}-{max(over_tf32 + over_rung9):.2f}x"
    first = (f"Three times the work in about three times the time ({span} cuBLAS TF32's and rung 9's): the "
             "128-wide tile and the waits cost little." if about_three else
             f"Three times the work in {span} the time of cuBLAS TF32 and rung 9: not the 2.7-3.3x that "
             "\"about three times\" would mean.")
    where = {outside(t[(RUNG10, s)]["x_cublas_sgemm"], predicted(RUNG10, s)[1]) for s in SHAPES}
    versus_range = ("beat its range too" if where == {"above"} else "came in inside its range" if where == {None}
                    else "fell below its range" if where == {"below"} else "came in above its range at one shape")
    shape = SHAPES[0]
    x = t[(RUNG10, shape)]["x_cublas_sgemm"]
    goal = TARGETS[RUNG10][1]
    met = x >= goal
    at = " x ".join(map(str, shape))
    weight = ("at that shape the weight alone is 256 MB, read once and written as two parts, a pass `linear` does "
              "not make with its split kept")
    second = (f"`gemm` {versus_range}, and met the {goal:g}x target at {at} ({x:.2f}x) though it splits both "
              f"operands on every call: {weight}." if met else
              f"`gemm` {versus_range}, yet missed the {goal:g}x target at {at} ({x:.2f}x): it splits both operands "
              f"on every call, and {weight}.") + " The drop-ins call `linear` (chapter 10)."
    return first + "\n" + second


def split_findings(record: dict) -> str:
    """Computed sentence: the split in shared memory's time over the pre-split kernel's at each shape, against
    its header's "about 1.5x" (near: within 15%), and whether it is lower at K = 8192, where `gemm` also
    splits the 256 MB weight on every call."""
    t = _timed(record)
    ratio = {s[2]: t[(f"{RUNG10} split in shared memory", s)]["median_ms"] / t[(RUNG10, s)]["median_ms"] for s in SHAPES}
    shown = " and ".join(f"{r:.2f}x at K = {k}" for k, r in ratio.items())
    near = [k for k, r in ratio.items() if 1.5 * 0.85 <= r <= 1.5 * 1.15]
    head = ("Near the predicted 1.5 times at both shapes" if len(near) == len(ratio) else
            "Near the predicted 1.5 times at K = " + ", ".join(map(str, near)) + " only" if near else
            "Not near the predicted 1.5 times at either shape")
    lower = ratio[8192] < ratio[1024] if {8192, 1024} <= set(ratio) else False
    tail = (", and lower at K = 8192 because `gemm` also pays for splitting the 256 MB weight on every call, a pass "
            "that the split in shared memory never makes." if lower else
            ": at K = 8192 `gemm` also pays for splitting the 256 MB weight on every call, and still the split in "
            "shared memory is not lower there.")
    return f"{head} ({shown}){tail}"


def promotion_findings(record: dict) -> str:
    """Computed sentences on rung 10's promotion: no promotion's and the shortest interval's worst excess, and
    what that promotion costs in time at the first shape. Notebook 08's exercise 2 asks which interval to build
    rung 10 with, so this text names none as the default or as the right one."""
    rows = [e for e in record["entries"] if e.get("section") == "accuracy" and e.get("source") == "rung 10"]
    if not rows:
        return "(no rung 10 rows in this record)"
    worst = {k: max(r["excess"] for r in rows if r["promote_k"] == k) for k in {r["promote_k"] for r in rows}}
    shortest = min((k for k in worst if k), default=None)
    timed = {e["contender"]: e["median_ms"] for e in record["entries"] if e.get("section") == "timing"
             and e.get("shape") == list(SHAPES[0])}
    text = [f"With one accumulator over all of K (never promoting) the worst model is at **{worst.get(0, float('nan')):.2f}** "
            "of the tolerance" + ("." if shortest is None else
                                  f"; promoting at the shortest interval measured, every {shortest} k, at "
                                  f"**{worst[shortest]:.2f}**.")]
    never = timed.get(promote_label(0))
    promoted = None if shortest is None else (
        timed.get(promote_label(shortest)) or (timed.get(RUNG10) if shortest == record_default(record) else None))
    if never and promoted:
        text.append(f"At {' x '.join(map(str, SHAPES[0]))} promoting every {shortest} k costs "
                    f"**{100 * (promoted / never - 1):.1f}%** of the time ({promoted:.3f} ms against {never:.3f} ms "
                    "never promoting).")
    return " ".join(text)



def provenance(record: dict | None) -> str:
    """Whose numbers a record holds, to open a sentence; or that there is none."""
    if record is None:
        return "No tensor-core run is recorded yet: on an H100, `python -m utils.run --notebooks 08` records one."
    return f"Recorded on {record['device']['name']} ({record['date'][:10]}, commit `{record['git_commit']}`)"


def render(record: dict) -> str:
    """The README's rendering of a "tensor_cores" record: the pre-split accuracy table and the rungs'
    timing against cuBLAS."""
    parts = ["Largest allclose excess against eager fp32 (atol = rtol = 1e-4, over the seeds; 1 or below passes), "
             "cuBLAS TF32 GEMMs on pre-split operands:", accuracy_table(record, "cuBLAS")]
    if any(e.get("source") == "rung 10" for e in record["entries"]):
        parts += ["Rung 10 by promotion interval:", promotion_table(record)]
    if len(frame := timing_frame(record)):
        parts += [to_markdown(frame, {"median ms": "{:.3f}", "TFLOP/s": "{:.1f}", "% of cuBLAS TF32": "{:.1f} %",
                                      "x cuBLAS SGEMM": "{:.2f}x"})]
    return "\n\n".join(parts)


def timing_frame(record: dict) -> pd.DataFrame:
    """The record's timing rows: contender, shape, median ms, TFLOP/s, % of cuBLAS TF32 and x cuBLAS SGEMM."""
    return pd.DataFrame([{"contender": e["contender"], "M x N x K": " x ".join(map(str, e["shape"])),
                          "median ms": e["median_ms"], "TFLOP/s": e["tflops"], "% of cuBLAS TF32": e["pct_of_cublas_tf32"],
                          "x cuBLAS SGEMM": e["x_cublas_sgemm"]}
                         for e in record["entries"] if e.get("section") == "timing"],
                        columns=["contender", "M x N x K", "median ms", "TFLOP/s", "% of cuBLAS TF32", "x cuBLAS SGEMM"])


# --------------------------------------------------------------------------- notebook 09, section 4: whole models in the epilogue

FUSED_KERNEL = "fused_gemm_groupnorm"
FUSION_KIND = "whole_model_fusion"  # utils.results kind of measure_fusion's run
COMPILE, UNFUSED, FUSED, ATOMIC, GEMM_ALONE = "torch.compile", "unfused", "fused", "fused, atomic fold", "its GEMM alone"
TIERS = ("strict", "tf32")


def fusion_at(record: dict) -> dict:
    return {(e["problem"], e["tier"], e["contender"]): e for e in record["entries"]}


def fusion_groups(record: dict) -> list[tuple[int, str]]:
    return list(dict.fromkeys((e["problem"], e["tier"]) for e in record["entries"]))


def tier_name(tier: str) -> str:
    return "TF32" if tier == "tf32" else tier


def fusion_frame(record: dict) -> pd.DataFrame:
    """(problem, tier) -> the median ms of eager, torch.compile, the unfused path and the fused kernel, fused's
    speedup over torch.compile and over unfused, and the fused kernel against its own GEMM alone (% it adds:
    what the epilogue costs; NaN where the GEMM alone was not timed)."""
    at = fusion_at(record)
    rows = []
    for pid, tier in fusion_groups(record):
        ms = {c: at[(pid, tier, c)]["median_ms"] for c in ("eager", COMPILE, UNFUSED, FUSED, GEMM_ALONE)
              if (pid, tier, c) in at}
        rows.append({"problem": pid, "tier": tier_name(tier), "eager ms": ms["eager"], "torch.compile ms": ms[COMPILE],
                     "unfused ms": ms[UNFUSED], "fused ms": ms[FUSED], "fused x torch.compile": ms[COMPILE] / ms[FUSED],
                     "fused x unfused": ms[UNFUSED] / ms[FUSED],
                     "fused vs its GEMM alone (a plain store)": 100 * (ms[FUSED] / ms[GEMM_ALONE] - 1)
                     if GEMM_ALONE in ms else float("nan")})
    return pd.DataFrame(rows).set_index(["problem", "tier"])


def fusion_table(record: dict) -> str:
    """Markdown, from a "whole_model_fusion" record: per problem and tier, the median ms of torch.compile, the
    unfused path and the fused kernel, fused's speedup over each, and the fused kernel against its own GEMM
    alone (what the epilogue adds)."""
    ms = dict.fromkeys(("eager ms", "torch.compile ms", "unfused ms", "fused ms"), "{:.3f}")
    return to_markdown(fusion_frame(record), {**ms, "fused x torch.compile": "**{:.2f}x**",
                                              "fused x unfused": "**{:.2f}x**",
                                              "fused vs its GEMM alone (a plain store)": "{:+.1f}%"})


def fusion_findings(record: dict) -> str:
    """Computed bullets on a "whole_model_fusion" record: per tier, fused against unfused at its best and worst
    and whether the two overlap within the run's spread (p20-p80); 75's two folds of the row minimum."""
    at = fusion_at(record)
    lines = []
    for tier in TIERS:
        pids = [pid for pid, t in fusion_groups(record) if t == tier]
        if not pids:
            continue
        ratio = {pid: at[(pid, tier, UNFUSED)]["median_ms"] / at[(pid, tier, FUSED)]["median_ms"] for pid in pids}
        overlap = [pid for pid in pids if at[(pid, tier, FUSED)]["p20_ms"] <= at[(pid, tier, UNFUSED)]["p80_ms"]
                   and at[(pid, tier, UNFUSED)]["p20_ms"] <= at[(pid, tier, FUSED)]["p80_ms"]]
        best, worst = max(ratio, key=ratio.get), min(ratio, key=ratio.get)
        lines.append(f"- {tier_name(tier)} tier: fused against unfused from **{ratio[worst]:.2f}x** (problem {worst}) "
                     f"to **{ratio[best]:.2f}x** (problem {best}); "
                     + (f"the two overlap within the run's p20-p80 spread for problem(s) {', '.join(map(str, overlap))}."
                        if overlap else "no problem's two timings overlap within the run's p20-p80 spread."))
        if (75, tier, ATOMIC) in at:
            part, atom = at[(75, tier, FUSED)]["median_ms"], at[(75, tier, ATOMIC)]["median_ms"]
            lines.append(f"- Problem 75, {tier_name(tier)} tier: partials and a second kernel {part:.3f} ms, the atomic "
                         f"fold {atom:.3f} ms: the {'partials are' if part <= atom else 'atomic fold is'} faster by "
                         f"{100 * abs(atom - part) / max(part, atom):.1f}%.")
    return "\n".join(lines)


_NUM = r"(\d+(?:\.\d+)?)"


def fusion_predictions(text: str | None = None) -> dict[str, dict]:
    """The numbers fused_gemm_groupnorm.cu's PREDICTION names, per tier ("strict", then "tf32" after the words
    "TF32 tier"): {"epilogue": (lo, hi) % the fused kernel adds to its GEMM, or None, "saving": {problem: (lo, hi)
    % it saves against the unfused path}} ("~10%" gives (10, 10); "within +-5%" gives (-5, 5)). Read from the
    header, so the comparison is computed, never typed."""
    text = " ".join((text if text is not None else header_section(FUSED_KERNEL, "PREDICTION") or "").split())
    strict, _, tf32 = text.partition("TF32 tier")
    out = {}
    for tier, part in (("strict", strict), ("tf32", tf32)):
        epilogue = re.search(rf"plus {_NUM}-{_NUM}%", part)
        saving: dict[int, tuple[float, float]] = {}
        for m in re.finditer(rf"(\d+(?:/\d+)*)(?: saves)? ~[\d.]+ ms of ~[\d.]+ \({_NUM}(?:-{_NUM})?%\)", part):
            for pid in m[1].split("/"):
                saving.setdefault(int(pid), (float(m[2]), float(m[3] or m[2])))
        for m in re.finditer(rf"at (\d+(?:/\d+)*) [^;]*?within \+-{_NUM}%", part):
            for pid in m[1].split("/"):
                saving.setdefault(int(pid), (-float(m[2]), float(m[2])))
        out[tier] = {"epilogue": (float(epilogue[1]), float(epilogue[2])) if epilogue else None, "saving": saving}
    return out


def _fusion_band(band) -> str:
    if band is None:
        return "–"
    lo, hi = band
    return f"±{hi:g}%" if lo == -hi else _band(band, "%")


def _versus(value: float, band) -> str:
    """The measured value against a predicted band: inside, above or below a range; off by how many points from
    a single value (a "~" figure has no range to be inside)."""
    if band is None:
        return "no prediction"
    lo, hi = band
    if lo == hi:
        return f"{value - lo:+.1f} points from it"
    return "inside" if lo <= value <= hi else ("above" if value > hi else "below")


def fusion_prediction_frame(record: dict, text: str | None = None) -> pd.DataFrame:
    """(problem, tier) -> the header's predicted epilogue cost (fused against its GEMM alone, % it adds) and
    saving (against the unfused path, % of the unfused time), each beside the record's measurement and verdict."""
    want, at = fusion_predictions(text), fusion_at(record)
    rows = []
    for pid, tier in fusion_groups(record):
        fused, unfused = at[(pid, tier, FUSED)]["median_ms"], at[(pid, tier, UNFUSED)]["median_ms"]
        alone = at.get((pid, tier, GEMM_ALONE))
        epi = float("nan") if alone is None else 100 * (fused / alone["median_ms"] - 1)
        saving = 100 * (unfused - fused) / unfused
        e_band, s_band = want[tier]["epilogue"], want[tier]["saving"].get(pid)
        rows.append({"problem": pid, "tier": tier_name(tier), "predicted epilogue": _fusion_band(e_band),
                     "measured epilogue %": epi, "epilogue verdict": "–" if alone is None else _versus(epi, e_band),
                     "predicted saving": _fusion_band(s_band), "measured saving %": saving,
                     "saving verdict": _versus(saving, s_band)})
    return pd.DataFrame(rows).set_index(["problem", "tier"])


def fusion_prediction_table(record: dict, text: str | None = None) -> str:
    """Markdown: per problem and tier, the header's predicted epilogue cost (fused against its GEMM alone) and
    saving (against the unfused path, % of the unfused time), each beside the record's measurement."""
    frame = fusion_prediction_frame(record, text).rename(columns={
        "measured epilogue %": "measured", "epilogue verdict": "verdict", "measured saving %": "measured ",
        "saving verdict": "verdict "})
    return to_markdown(frame, {"measured": "{:+.1f}%", "measured ": "{:+.1f}%"},
                       right=("predicted epilogue", "measured", "predicted saving", "measured "))


def render_fusion(record: dict) -> str:
    """The README's rendering of a "whole_model_fusion" record: the table and its computed findings."""
    return fusion_table(record) + "\n\n" + fusion_findings(record)
