"""The scoreboard's record (kind "scoreboard", measured by utils.chapters.scoreboard) read back: the stages,
each problem's speedup over eager fp32 per stage, and the Markdown table that the README and every chapter show.
"""
from __future__ import annotations

from dataclasses import dataclass

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


def markdown(rec: dict, upto: str | None = None) -> str:
    """Problem x stage: the speedup over eager fp32 of every stage up to `upto` (all: None), the
    faster torch.compile mode last; the `upto` column in bold."""
    table = speedups(rec)
    at = by_stage(rec)
    shown = stages_upto(upto)
    present = [s for s in shown if any(s in row for row in table.values())]
    head = ["problem", "eager fp32 ms", *(f"**{STAGES[s].label}**" if s == upto else STAGES[s].label for s in present),
            "torch.compile (faster mode)"]
    lines = [f"Speedup over eager fp32 (TF32 off) in one run; {_stamp(rec)}.", "",
             "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for pid in ordered(list(table)):
        row = table[pid]
        cells = [str(pid), f"{at[(pid, EAGER)]['median_ms']:.3f}",
                 *((f"**{fmt_x(row[s])}**" if s == upto else fmt_x(row[s])) if s in row else "–" for s in present),
                 fmt_x(row["compile"]) if "compile" in row else "–"]
        lines.append("| " + " | ".join(cells) + " |")
    missing = [s for s in shown if s not in present]
    if missing:
        lines += ["", f"Not in this record: stage {', '.join(missing)}."]
    slow = sorted({(e["stage"], e["reps"]) for e in rec["entries"] if e.get("reps", 0) < max(
        (x.get("reps", 0) for x in rec["entries"]), default=0)})
    if slow:
        lines += ["", "Timed with fewer repetitions (slow): " + ", ".join(f"{s} ({n})" for s, n in slow) + "."]
    return "\n".join(lines)


def _stamp(rec: dict) -> str:
    return f"recorded on {rec['device']['name']}, {rec['date'][:10]}, commit `{short_commit(rec['git_commit'])}`"
