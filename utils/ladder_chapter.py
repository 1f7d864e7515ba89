"""The helpers of the GEMM ladder chapter (notebooks 02 and 03), tested in tests/test_ladder_chapter.py:

    S = chapter.session(DEVICE, SCALE, REPS, RESULTS_DIR); C = LadderChapter(S)
    C.build(["gemm_01_naive"], exercises=["gemm_seed004"])     # compile (in parallel), or say why not
    C.rung_result("gemm_02_coalesced", ["gemm_01_naive", "gemm_02_coalesced"])  # measure, or the record
    quote("gemm_01_naive", "PREDICTION")                       # a header paragraph, as written
    display(Markdown(prediction_table(names, rows, source)))   # every PREDICTION against its measurement

and, without a GPU as well:

- the address arithmetic the chapters reason with: `warp_step` (sectors and cache lines of one warp's
  loads), `load_passes` / `bank_table` (shared-memory passes at the load width the SASS shows: a
  16-byte LDS.128 is served a quarter-warp at a time, an 8-byte LDS.64 a half-warp, a 4-byte LDS
  the whole warp), `tile_table` (each rung's tile, read from its constants);
- the diagrams (matplotlib figures, not measurements): `draw_mapping` (02: which thread computes
  which output and reads which elements), `draw_block_tile`, `draw_kmajor_copy`, `draw_bank_phases`,
  `draw_warp_tile`, `draw_pipeline` (03);
- the exercise checkers' verdicts (`exercise_verdict`, `padding_verdict`, `order_verdict`,
  `pair_verdict`) and the cells that run them (`check_exercise`, `tile_exercise`, `pad_exercise`,
  `pipeline_exercise`, `time_warp_exercise`): each says "Not yet" until the reader has acted.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib
import numpy as np
from IPython.display import Markdown, display
from matplotlib.figure import Figure

from utils import bench, build, env, ladder, plots, precision, results
from utils.ladder import rung_number
from utils.run import skip
from utils.show import header, header_section

__all__ = [
    "SHAPES", "LadderChapter", "quote", "show_excerpt", "global_kernels", "rung_name", "rung_number",
    "header", "header_section", "predicted_pct", "predicted_speedup", "prediction_rows", "prediction_table",
    "provenance", "warp_step", "warp_panel", "l1_model", "fma_lanes", "kernel_constants", "tile_facts",
    "tile_table", "LOAD_NAMES", "conflict_degree", "load_passes", "bank_table", "ws_load_floats", "ws_passes",
    "padding_verdict", "order_verdict", "pair_verdict", "GIVEN_VARIANTS", "exercise_verdict", "operands_odd",
    "operands_n515", "ladder_run", "ladder_checks", "tuning_table", "shared_loads", "time_variants", "pct_table",
    "check_exercise", "time_warp_exercise", "tile_exercise", "pad_exercise", "pipeline_exercise",
    "draw_mapping", "draw_block_tile", "draw_kmajor_copy", "draw_bank_phases", "draw_warp_tile", "draw_pipeline",
]

# The GEMM of problems 94, 75 and 62 at the parameters cell's SCALE; only "full" is recorded.
SHAPES = {"full": ladder.SHAPE, "small": (256, 2048, 2048), "odd": (1000, 4093, 4093)}
F32 = 4  # bytes per float
EXERCISES = build.KERNELS_DIR / "exercises"


# --------------------------------------------------------------------------- kernel text

def quote(name: str, *labels: str, kernels_dir: Path | None = None) -> None:
    """Show header paragraphs of a kernel file as they are written there: what the notebook shows is
    what gets compiled. A label with no paragraph is named, not skipped silently."""
    where = build.display_path(build.kernel_path(name, kernels_dir))
    found = [text for label in labels if (text := header_section(name, label, kernels_dir))]
    missing = [label for label in labels if not header_section(name, label, kernels_dir)]
    body = "\n\n".join(found) if found else "(nothing)"
    note = f"\n\n*(no paragraph starting “{'”, “'.join(missing)}” in this header)*" if missing else ""
    display(Markdown(f"From the header of `{where}`:\n\n```text\n{body}\n```{note}"))


def show_excerpt(name: str, symbol: str, first: str, last: str) -> str:
    """Show the lines of function `symbol` of kernels/<name> (a .cu name or a "common/x.cuh" header)
    from the first line containing `first` to the next containing `last`: a short excerpt of a long
    kernel, read from the file. Returns the text shown."""
    from utils import show

    path = show.source_path(name)
    lines = path.read_text().splitlines()
    span = show.find_definition(path.read_text(), symbol)
    body = range(span.first_line - 1, span.last_line)
    start = next((i for i in body if first in lines[i]), None)
    end = next((i for i in body if start is not None and i >= start and last in lines[i]), None)
    if start is None or end is None:
        raise ValueError(f"{symbol} in {build.display_path(path)} has no line with {first!r} followed by {last!r}")
    text = "\n".join(lines[start:end + 1])
    display(Markdown(f"`{build.display_path(path)}`, lines {start + 1}-{end + 1} (in `{symbol}`):\n\n"
                     f"```cuda\n{text}\n```"))
    return text


def rung_name(number: int) -> str | None:
    """The rung of the FP32 ladder with this number (gemm_03_smem_tiled for 3), None if there is none."""
    return next((n for n in ladder.rungs() if rung_number(n) == number), None)


def global_kernels(source: str) -> list[str]:
    """The names of the __global__ functions defined in a CUDA source."""
    return re.findall(r"__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(", source)


_NUM = r"(\d+(?:\.\d+)?)"


def _prediction(name: str) -> str:
    """A rung's PREDICTION paragraph on one line (whitespace collapsed), "" without one."""
    return " ".join((header_section(name, "PREDICTION") or "").split())


def predicted_pct(name: str) -> tuple[float, float] | None:
    """(low, high) % of cuBLAS that a rung's PREDICTION names ("55-65% of cuBLAS", "of cuBLAS
    SGEMM (5-20%)"); None when it names no such range."""
    text = _prediction(name)
    for pattern in (_NUM + r"\s*-\s*" + _NUM + r"% of cuBLAS", r"of cuBLAS[\w ]*\(" + _NUM + r"\s*-\s*" + _NUM + r"%\)"):
        if match := re.search(pattern, text):
            return float(match[1]), float(match[2])
    return None


def predicted_speedup(name: str) -> tuple[float, float, int] | None:
    """(low, high, earlier rung) from "about 2 to 2.5x rung 3", "about 10x rung 1" or "5-15% over
    rung 5"; None when the PREDICTION names no such factor."""
    text = _prediction(name)
    if match := re.search(_NUM + r"(?:\s*(?:to|-)\s*" + _NUM + r")?x rung (\d+)", text):
        return float(match[1]), float(match[2] or match[1]), int(match[3])
    if match := re.search(_NUM + r"\s*-\s*" + _NUM + r"% over rung (\d+)", text):
        return 1 + float(match[1]) / 100, 1 + float(match[2]) / 100, int(match[3])
    return None


# --------------------------------------------------------------------------- building and measuring

def provenance(record: dict) -> str:
    """Whose numbers a recorded run holds: device, date and commit, to open a sentence that uses them."""
    return f"Recorded on {record['device']['name']} ({record['date'][:10]}, commit `{record['git_commit']}`)"


@dataclass
class LadderChapter:
    """A ladder notebook's session (utils.chapter.Session: on_gpu, can_compile, scale, reps,
    results_dir, recorded(kind)) and every measurement this run of it makes: `measured` holds, per
    contender, its latest row, on this GPU."""
    session: object
    measured: dict = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, int, int]:
        return SHAPES[self.session.scale]

    @property
    def on_gpu(self) -> bool:
        return self.session.on_gpu

    def recorded_ladder(self) -> dict | None:
        """The recorded ladder this run reads: this GPU's, or without a GPU the reading device's."""
        return self.session.recorded("ladder")

    def build(self, rungs: list[str], exercises: list[str] = ()) -> dict:
        """Compile rungs (kernels/) and exercises (kernels/exercises/) side by side; {} with one line
        saying why where this machine cannot compile."""
        if not self.session.can_compile:
            skip("compiling the GEMM kernels", "no nvcc or a CPU-only torch")
            return {}
        modules = build.load_kernels({name: name for name in rungs} |
                                     {name: build.Variant(name, kernels_dir=EXERCISES) for name in exercises})
        print("loaded:", ", ".join(modules))
        return modules

    def measure(self, names: list[str], reps: int | None = None) -> list[dict]:
        """Verify `names` against float64 at the chapter's shape, then time them and cuBLAS side by side
        (utils.ladder.measure); print the rows and keep each in `measured`."""
        rows = ladder.measure(self.shape, reps=reps or self.session.reps, names=names)
        print(ladder.format_ladder(rows))
        self.measured.update({row["contender"]: row for row in rows})
        return rows

    def rung_result(self, name: str, names: list[str], reps: int | None = None) -> None:
        """On a GPU: measure `names` with cuBLAS. Without one: the same rows of the recorded ladder,
        saying whose they are. The comparison with the PREDICTION is the chapter's table."""
        if self.on_gpu:
            self.measure(names, reps)
            return
        skip(f"measuring {name}", "no GPU")
        record = self.recorded_ladder()
        if record is None or name not in {e["contender"] for e in record["entries"]}:
            print(f"no recorded ladder has {name} yet: run this notebook (or `make ladder`) on a GPU")
            return
        print(f"{provenance(record).replace('`', '')}:")
        print(ladder.format_ladder([e for e in record["entries"] if e["contender"] in {*names, ladder.REFERENCE}]))

    def rows(self) -> tuple[list[dict], str] | tuple[None, None]:
        """The rows the chapter's table compares: this run's measurements on a GPU, else the recorded
        ladder; with whose they are. (None, None) when there are none."""
        if self.on_gpu:
            return (list(self.measured.values()), f"Measured on {env.device_name()}") if self.measured else (None, None)
        record = self.recorded_ladder()
        return (record["entries"], provenance(record)) if record else (None, None)

    def cublas_time(self) -> str:
        """A sentence with cuBLAS's time for the problems' GEMM: measured here on a GPU, else the
        recorded ladder's, with whose it is."""
        M, N, K = ladder.SHAPE
        if self.on_gpu:
            x, w = ladder.operands(M, N, K)
            with precision.ieee_fp32():
                import torch.nn.functional as F

                row = bench.compare({ladder.REFERENCE: lambda: F.linear(x, w)}, cost=bench.gemm_cost(M, N, K),
                                    baseline=ladder.REFERENCE, reps=self.session.reps, progress=False)[0]
            self.measured[ladder.REFERENCE] = row
            source = f"Measured on {env.device_name()}"
        else:
            record = self.recorded_ladder()
            if record is None:
                return "No recorded ladder yet, and no GPU here: cuBLAS's time for this GEMM is measured on a GPU."
            row, source = next(e for e in record["entries"] if e["contender"] == ladder.REFERENCE), provenance(record)
        return (f"{source}: cuBLAS does these {bench.gemm_cost(M, N, K).flops / 1e9:.0f} GFLOP in "
                f"**{row['median_ms']:.3f} ms** ({row['tflops']:.1f} TFLOP/s, fp32, TF32 off).")

    def per_cycle(self, name: str, step: dict) -> None:
        """On a GPU: l1_model for a rung this run measured (warp_step's totals); else one line why not."""
        if not self.on_gpu or name not in self.measured:
            skip(f"the per-cycle comparison for {name}", "no GPU" if not self.on_gpu else "not measured in this run")
            return
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        display(Markdown(l1_model(name, step, self.measured[name], props)))

    def two_rungs(self, first: str, second: str, first_step: dict, second_step: dict) -> None:
        """Plot two rungs and cuBLAS (this run's, or the record's) and say how much faster the second is,
        beside how many fewer sectors per FMA it moves (warp_step's totals)."""
        rows, source = self.rows()
        by_name = {r["contender"]: r for r in rows or []}
        if not {first, second, ladder.REFERENCE} <= by_name.keys():
            skip(f"the {first} / {second} comparison", "no GPU and no recorded ladder with both rungs")
            return
        shown = [by_name[n] for n in (first, second, ladder.REFERENCE)]
        display(plots.ladder(shown, recorded=None if self.on_gpu else self.recorded_ladder()))
        speedup = by_name[first]["median_ms"] / by_name[second]["median_ms"]
        sectors = (first_step["sectors"] / first_step["fmas"]) / (second_step["sectors"] / second_step["fmas"])
        display(Markdown(f"{source}: `{second}` is **{speedup:.1f}x** faster than `{first}` for the same "
                         f"{bench.gemm_cost(*ladder.SHAPE).flops / 1e9:.0f} GFLOP; per FMA it moves {sectors:.1f}x "
                         "fewer sectors through the L1."))

    def prediction_table(self, names: list[str], rows: list[dict] | None = None, source: str | None = None) -> None:
        """Display prediction_table for `names`: on the given rows, else this run's measurements on a GPU,
        else the recorded ladder; one line saying why not where there are none."""
        if rows is None:
            rows, source = self.rows()
        if not rows or ladder.REFERENCE not in {r["contender"] for r in rows}:
            skip("the predicted-against-measured table", "no measurement in this run and no recorded ladder")
            return
        display(Markdown(prediction_table(names, rows, source)))


# --------------------------------------------------------------------------- predicted against measured

ABOUT = 0.2  # a point prediction ("about 2x rung 4") counts as met within ±20%

# Why a prediction missed, where the chapter can say: (rung, "pct" or "factor", "above" or "below").
WHY_MISSED = {
    ("gemm_02_coalesced", "factor", "above"):
        "the prediction discounted rung 2's advantage in L1 lines per FMA (the two step tables of notebook 02) "
        "for misses on w; the per-cycle comparison there shows rung 1 at its L1 cap and rung 2 well under its "
        "own, so the measured factor lies between that discount and the full line count.",
    ("gemm_02_coalesced", "factor", "below"):
        "rung 2 reaches only part of its L1 cap (the per-cycle comparison in notebook 02): something other "
        "than the L1's line rate waits.",
}
UNEXPLAINED = ("not explained by the header's model; a profile (Nsight Compute's warp-stall reasons) would say "
               "which resource binds.")


def _verdict(value: float, lo: float, hi: float) -> str:
    if lo == hi:
        return "about right" if abs(value / lo - 1) <= ABOUT else ("above" if value > lo else "below")
    return "inside" if lo <= value <= hi else ("above" if value > hi else "below")


def prediction_rows(names: list[str], rows: list[dict]) -> list[dict]:
    """For each rung of `names` measured in `rows` (ladder rows with cuBLAS): its % of cuBLAS and its
    factor over the earlier rung its PREDICTION names, each with the predicted range and a verdict
    ("inside"/"about right", "above", "below"; None where the PREDICTION names no such number)."""
    by_name = {row["contender"]: row for row in rows}
    cublas = by_name[ladder.REFERENCE]["median_ms"]
    out = []
    for name in [n for n in names if n in by_name]:
        ms = by_name[name]["median_ms"]
        entry = {"rung": name, "ms": ms, "pct": 100 * cublas / ms, "pct_predicted": predicted_pct(name),
                 "factor": None, "factor_predicted": None, "earlier": None, "tuned": bool(header_section(name, "TUNED"))}
        entry["pct_verdict"] = entry["pct_predicted"] and _verdict(entry["pct"], *entry["pct_predicted"])
        if (factor := predicted_speedup(name)) and (earlier := rung_name(factor[2])) in by_name:
            entry.update(factor=by_name[earlier]["median_ms"] / ms, factor_predicted=factor[:2], earlier=factor[2])
            entry["factor_verdict"] = _verdict(entry["factor"], *factor[:2])
        else:
            entry["factor_verdict"] = None
        out.append(entry)
    return out


def _range(lo: float, hi: float, unit: str) -> str:
    return f"about {lo:g}{unit}" if lo == hi else f"{lo:g}–{hi:g}{unit}"


def prediction_table(names: list[str], rows: list[dict], source: str) -> str:
    """Markdown: one row per rung, its PREDICTION (read from the header) against the measurement in
    `rows`, a verdict, and below the table why each miss happened, where the chapter knows."""
    lines = [f"{source}. Each header's PREDICTION was written before the rung was measured; a point prediction "
             f"(\"about 2x\") counts as met within ±{100 * ABOUT:.0f}%.", "",
             "| rung | predicted % of cuBLAS | measured | predicted × earlier rung | measured | verdict |",
             "|---|---:|---:|---:|---:|---|"]
    misses = []
    for e in prediction_rows(names, rows):
        pct_p = _range(*e["pct_predicted"], "%") if e["pct_predicted"] else "–"
        fac_p = f"{_range(*e['factor_predicted'], 'x')} rung {e['earlier']}" if e["factor_predicted"] else "–"
        fac_m = f"{e['factor']:.2f}x" if e["factor"] is not None else "–"
        verdicts = [v for v in (e["pct_verdict"], e["factor_verdict"]) if v]
        lines.append(f"| `{e['rung']}` | {pct_p} | {e['pct']:.1f}% | {fac_p} | {fac_m} | "
                     f"{', '.join(verdicts) or 'nothing to compare'}{' (tuned after)' if e['tuned'] else ''} |")
        for what in ("pct", "factor"):
            if e[f"{what}_verdict"] in ("above", "below"):
                why = WHY_MISSED.get((e["rung"], what, e[f"{what}_verdict"]))
                if why is None and e["tuned"]:
                    why = ("the PREDICTION was written for the first configuration; the kernel measured is the one "
                           "tuned afterwards (its header's TUNED AFTERWARDS paragraph).")
                label = "% of cuBLAS" if what == "pct" else f"factor over rung {e['earlier']}"
                misses.append(f"- `{e['rung']}`, {label} {e[f'{what}_verdict']} the prediction: {why or UNEXPLAINED}")
    if misses:
        lines += ["", "Where a prediction missed:", "", *misses]
    return "\n".join(lines)


# --------------------------------------------------------------------------- notebook 02: a warp's loads

def warp_step(loads: dict[str, list[int]], fmas: int) -> dict:
    """One step of one warp: for each load instruction (its 32 lanes' byte addresses) the distinct
    32-byte sectors and 128-byte lines it touches, bytes moved and bytes used; printed, then the totals
    (returned, with `fmas`)."""
    print(f"{'load (one instruction, 32 lanes)':<34} {'sectors':>7} {'lines':>5} {'bytes moved':>11} {'bytes used':>10}")
    total = Counter()
    for what, addresses in loads.items():
        sectors, lines, used = {a // 32 for a in addresses}, {a // 128 for a in addresses}, F32 * len(set(addresses))
        total.update(sectors=len(sectors), lines=len(lines), moved=32 * len(sectors), used=used)
        print(f"{what:<34} {len(sectors):>7} {len(lines):>5} {32 * len(sectors):>11} {used:>10}")
    print(f"{'one step':<34} {total['sectors']:>7} {total['lines']:>5} {total['moved']:>11} {total['used']:>10}")
    print(f"{fmas} FMAs = {2 * fmas} FLOP per step: {2 * fmas / total['moved']:.2f} FLOP per byte moved; "
          f"{total['lines'] / fmas:.3f} lines per FMA")
    return dict(total, fmas=fmas)


def warp_panel(title: str, reads: list[tuple[str, int]], cols: int) -> dict:
    """A plots.warp_access panel from the (row label, k) pairs one warp reads; each read moves its
    whole sector of 8 floats."""
    labels = list(dict.fromkeys(label for label, _ in reads))
    used = {(labels.index(label), k) for label, k in reads}
    fetched = {(r, k - k % 8 + i) for r, k in used for i in range(8)}
    return {"title": title, "row_labels": labels, "cols": cols, "used": used, "fetched": fetched}


def fma_lanes(props) -> int:
    """FP32 FMAs an SM can issue per cycle: 128 from Ampere's GA10x and Hopper on, 64 before."""
    return 64 if (props.major, props.minor) in {(7, 0), (7, 5), (8, 0)} else 128


def l1_model(name: str, step: dict, row: dict, props) -> str:
    """Markdown: the measured FMAs per SM per cycle of a rung (its ladder row) against the cap that
    "one 128-byte L1 line per cycle" puts on them, given the warp step's lines per FMA. `props`:
    torch.cuda.get_device_properties; its clock_rate (kHz) is the maximum clock."""
    khz = getattr(props, "clock_rate", 0)
    if not khz:
        return "This torch does not report the GPU's clock: no per-cycle comparison."
    rate = row["tflops"] * 1e12 / 2 / (props.multi_processor_count * khz * 1e3)
    cap = step["fmas"] / step["lines"]
    share = rate / cap
    verdict = ("so this L1 model accounts for the time." if share >= 0.75 else
               "so the L1's line rate alone does not explain the time: something else waits.")
    return (f"`{name}`: **{rate:.2f} FMAs per SM per cycle** at the {khz / 1e3:.0f} MHz maximum clock, "
            f"{100 * rate / fma_lanes(props):.1f}% of the {fma_lanes(props)} an SM can issue. One warp step asks the "
            f"L1 for {step['lines']} lines for {step['fmas']} FMAs, so one line per cycle caps it at **{cap:.2f}**: "
            f"the measurement reaches {100 * share:.0f}% of that cap, {verdict}")


# --------------------------------------------------------------------------- notebook 03: tiles and banks

_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+([^\n\\]+)$", re.MULTILINE)
_CONSTEXPR = re.compile(r"constexpr\s+(?:int|int64_t|size_t|unsigned)\s+(\w+)\s*=\s*([^;]+);")


def kernel_constants(name: str) -> dict[str, int]:
    """The integer constants (#define, constexpr) of kernels/<name>.cu and the kernels/ headers it
    includes, evaluated in order; what is not plain arithmetic on earlier ones is left out."""
    path = build.kernel_path(name)
    values: dict[str, int] = {}
    for file in [*reversed(build.included_headers(path, build.KERNELS_DIR)), path]:
        text = file.read_text()
        for pattern in (_DEFINE, _CONSTEXPR):
            for key, expression in pattern.findall(text):
                try:
                    values.setdefault(key, int(eval(expression.replace("/", "//"), {"__builtins__": {}}, dict(values))))
                except Exception:
                    pass
    return values


def tile_facts(name: str) -> dict:
    """A rung's block tile, slice depth, threads, outputs per thread, FLOP per byte copied from global
    memory (BM·BN / 2(BM + BN)), floats read from shared memory per FMA ((TM + TN) / (TM·TN)), stages."""
    c = kernel_constants(name)
    bm, bn = c.get("BM", c.get("kTile")), c.get("BN", c.get("kTile"))
    bk, threads = c.get("BK", c.get("kTile")), c.get("THREADS", c.get("kThreads"))
    per_thread = bm * bn // threads
    tm, tn = c.get("TM"), c.get("TN")
    if tm is None and tn is None and per_thread == 1:
        tm = tn = 1
    elif tn is None and tm:
        tn = per_thread // tm
    return {"tile": f"{bm} x {bn}", "BK": bk, "threads": threads, "per thread": per_thread,
            "FLOP/B global": bm * bn / (2 * (bm + bn)),
            "floats/FMA shared": (tm + tn) / (tm * tn) if tm and tn else None, "stages": c.get("STAGES", 1)}


def tile_table(names: list[str]) -> None:
    """Print tile_facts for each rung: the numbers the rungs trade, read from their constants."""
    print(f"{'rung':<22} {'tile':>9} {'BK':>3} {'threads':>7} {'outputs/thread':>14} {'FLOP/B global':>13} "
          f"{'shared floats/FMA':>17} {'stages':>6}")
    for name in names:
        f = tile_facts(name)
        per_fma = "-" if f["floats/FMA shared"] is None else f"{f['floats/FMA shared']:.3f}"
        print(f"{name:<22} {f['tile']:>9} {f['BK']:>3} {f['threads']:>7} {f['per thread']:>14} "
              f"{f['FLOP/B global']:>13.0f} {per_fma:>17} {f['stages']:>6}")


LOAD_NAMES = {1: "LDS", 2: "LDS.64", 4: "LDS.128"}  # a shared load of 1, 2 or 4 floats per lane


def conflict_degree(words, banks: int = 32) -> int:
    """Passes for one group of lanes reading these word addresses at once: the most distinct words
    any one bank must deliver (lanes that read the same word share it, a broadcast)."""
    return max(Counter(word % banks for word in set(words)).values())


def load_passes(first_words: list[int], load_floats: int = 1) -> list[int]:
    """Passes of one warp-wide shared load in which lane l reads `load_floats` consecutive words from
    first_words[l]. The SM delivers 128 bytes per pass, so a load of w floats per lane is served in w
    phases of 32 / w lanes (LDS.128 a quarter-warp at a time, LDS.64 a half-warp, LDS the whole warp);
    a phase takes as many passes as its busiest bank. One entry per phase; without a conflict, 1 each."""
    n = len(first_words) // load_floats
    return [conflict_degree([w + i for w in first_words[p * n:(p + 1) * n] for i in range(load_floats)])
            for p in range(load_floats)]


def bank_table(accesses: dict[str, tuple[list[int], int]]) -> None:
    """Print each warp-wide shared access {label: (first word of each lane, floats per lane)}: its width,
    the passes it takes (load_passes; a store is served the same way), and the passes the same width
    takes without a conflict (one per phase)."""
    print(f"{'warp-wide shared access (one instruction)':<52} {'bytes/lane':>10} {'passes':>6} {'conflict-free':>13}")
    for label, (words, width) in accesses.items():
        print(f"{label:<52} {F32 * width:>10} {sum(load_passes(words, width)):>6} {width:>13}")


def ws_load_floats(row_floats: int) -> int:
    """Floats per lane in nvcc's load of ws[tx][kk..] in the padding exercise: where rows keep 16 (8)
    bytes of alignment it reads 4 (2) consecutive kk with one LDS.128 (LDS.64), as the SASS shows; else
    one at a time."""
    return 4 if row_floats % 4 == 0 else 2 if row_floats % 2 == 0 else 1


def ws_passes(row_floats: int, load_floats: int | None = None) -> float:
    """Passes per kk of a warp's read of ws[tx][kk] (rows of `row_floats`), at nvcc's load width or
    `load_floats`: a load of w floats per lane delivers w values of kk."""
    w = load_floats or ws_load_floats(row_floats)
    return sum(load_passes([tx * row_floats for tx in range(32)], w)) / w


def padding_verdict(row_floats: int, report=None, load_floats: int | None = None) -> str:
    """Exercise 2 of notebook 03: PASS when the warp reads ws[tx][kk] in one pass per kk at the load
    width nvcc uses for such rows (or `load_floats`) and, when the harness ran, the kernel is right."""
    w = load_floats or ws_load_floats(row_floats)
    passes = ws_passes(row_floats, w)
    if passes > 1:
        return (f"Not yet: with rows of {row_floats} floats, ws[tx][kk] is read with {LOAD_NAMES[w]} and takes "
                f"{passes:g} passes per kk, where a conflict-free read takes 1.")
    if report is not None and not report.ok:
        return exercise_verdict(report, {})
    return (f"PASS: with rows of {row_floats} floats, ws[tx][kk] is read with {LOAD_NAMES[w]}, one pass per kk"
            + (", and the kernel is right." if report is not None else " (the GPU check was skipped here)."))


# --------------------------------------------------------------------------- verdicts

GIVEN_VARIANTS = ("rung 5 as is", "BK 16", "BK 32", "64 x 64 tile")  # notebook 03, exercise 1


def exercise_verdict(report, hints: dict, passed: str = "PASS: every check passed.") -> str:
    """An exercise checker's verdict on a harness report: PASS when the harness found nothing wrong;
    else "Not yet:", the checks that failed and a hint for each one that has a hint."""
    if report.ok:
        return passed
    lines = [f"Not yet: {', '.join(report.failed)} failed."]
    lines += [f"  - {name}: {hints[name]}" for name in report.failed if name in hints]
    return "\n".join(lines)


def order_verdict(my_order, variants, measured=None, problems=None) -> str:
    """Exercise 1 of notebook 03: Not yet until `variants` has one of your own and `my_order` lists each
    label once; given the measured order (fastest first) and {label: why} for the variants that failed,
    PASS when none failed."""
    if not set(variants) - set(GIVEN_VARIANTS):
        return "Not yet: add a variant of your own to TILE_VARIANTS first."
    if my_order is None or sorted(my_order) != sorted(variants):
        return f"Not yet: put every label of TILE_VARIANTS in MY_ORDER, once each, fastest first: {sorted(variants)}."
    if measured is None:
        return "Your prediction is in; the measurement needs a GPU."
    if problems:
        return "Not yet: " + "; ".join(f"{label}: {why}" for label, why in problems.items())
    right = sum(a == b for a, b in zip(measured, my_order))
    return f"PASS: every variant computes x @ w.T; your order has {right} of {len(measured)} places right."


def pair_verdict(my_best, pairs, best=None, problems=()) -> str:
    """Exercise 3 of notebook 03: Not yet until `my_best` is one of the (BK, STAGES) `pairs`; given the
    fastest pair measured and the labels of the pairs that failed, PASS when none failed."""
    pairs = [tuple(p) for p in pairs]
    if my_best is None or tuple(my_best) not in pairs:
        return f"Not yet: write your prediction in MY_BEST first, one of {pairs}."
    if best is None:
        return "Your prediction is in; the measurement needs a GPU."
    if problems:
        return "Not yet: " + "; ".join(problems) + " failed (see above)."
    verdict = "right" if tuple(my_best) == tuple(best) else "not this time"
    return f"PASS: every pair computes x @ w.T; the fastest is {tuple(best)}, you predicted {tuple(my_best)}: {verdict}."


def operands_odd(generator):
    """GEMM operands x (37, 65) and w (129, 65) for the harness: no tile divides M, N or K."""
    import torch

    return [torch.rand(37, 65, generator=generator), torch.rand(129, 65, generator=generator) * 2 - 1]


def operands_n515(generator):
    """x (37, 65) and w (515, 65): N > 256 (seed 004's one column per thread leaves columns out), no tile
    divides M, N or K."""
    import torch

    return [torch.rand(37, 65, generator=generator), torch.rand(515, 65, generator=generator) * 2 - 1]


# --------------------------------------------------------------------------- the whole ladder

def ladder_run(chapter: LadderChapter) -> tuple[list[dict] | None, str | None]:
    """Every rung verified and timed with cuBLAS in one run, recorded at the full shape (kind "ladder")
    and plotted, on a GPU; without one, the recorded ladder. Returns (rows, whose they are)."""
    S = chapter.session
    if S.on_gpu:
        recorded_ceilings = S.recorded("ceilings")
        ceilings = bench.Ceilings.from_record(recorded_ceilings) if recorded_ceilings else None
        rows = ladder.measure(chapter.shape, reps=S.reps, ceilings=ceilings)
        print(ladder.format_ladder(rows))
        save = None
        if S.scale == "full":
            path = results.record("ladder", rows, results_dir=S.results_dir,
                                  notes=f"notebooks/03, shape {list(chapter.shape)}")
            print("recorded", path)
            save = path.with_suffix(".png")
        else:
            print(f"not recorded: scale {S.scale!r} (only the full shape is)")
        display(plots.ladder(rows, save=save))
        return rows, f"Measured on {env.device_name()}"
    record = chapter.recorded_ladder()
    if record is None:
        skip("the ladder", "no GPU and no recorded ladder")
        return None, None
    skip("measuring the ladder", f"no GPU; showing the run recorded on {record['device']['name']}")
    display(plots.ladder(record))
    absent = [name for name in ladder.rungs() if name not in {e["contender"] for e in record["entries"]}]
    if absent:
        print("rungs added since, not in this recording:", ", ".join(absent))
    return record["entries"], provenance(record)


def ladder_checks(rows: list[dict], source: str, target_pct: float = 75) -> str:
    """Markdown: does every rung beat the one before it, and does the best reach `target_pct` of cuBLAS
    (the target is stated for an H100)?"""
    steps = [r for r in rows if r["contender"] != ladder.REFERENCE]
    cublas = next(r for r in rows if r["contender"] == ladder.REFERENCE)
    pct = {r["contender"]: 100 * cublas["median_ms"] / r["median_ms"] for r in steps}
    chain = ", ".join(f"{rung_number(b['contender']):02d}/{rung_number(a['contender']):02d} = "
                      f"{a['median_ms'] / b['median_ms']:.2f}x" for a, b in zip(steps, steps[1:]))
    slower = [f"`{b['contender']}`" for a, b in zip(steps, steps[1:]) if b["median_ms"] >= a["median_ms"]]
    lines = [f"{source}:", f"- **Every rung is faster than the one before it**: {chain}." if not slower else
             f"- Not every rung is faster than the one before it ({chain}): {', '.join(slower)} contradict "
             "their predictions; profile them before building on them."]
    best = max(steps, key=lambda r: pct[r["contender"]])
    met = pct[best["contender"]] >= target_pct
    where = "" if "H100" in source else " This run is not on an H100, for which the target is stated."
    lines.append(f"- Best SIMT rung: `{best['contender']}`, **{pct[best['contender']]:.1f}% of cuBLAS** "
                 f"({best['tflops']:.1f} of {cublas['tflops']:.1f} TFLOP/s): the target of {target_pct:g}% is "
                 f"**{'met' if met else 'not met'}**.{where}")
    return "\n".join(lines)


def tuning_table(record: dict | None, committed: tuple[int, int]) -> str:
    """Markdown: a recorded rung-7 sweep (kind "ladder_tuning") as BK x stages, % of cuBLAS, the best
    in bold, and whether `committed` (the header's defaults) is that best."""
    if record is None:
        return ("No sweep recorded yet: `python -m utils.ladder --tune` on a GPU records one "
                "(results/<device>/ladder_tuning.json).")
    swept = [e for e in record["entries"] if e.get("bk") is not None and e.get("stages") is not None]
    cublas = next(e for e in record["entries"] if e["contender"] == ladder.REFERENCE)
    pct = {(e["bk"], e["stages"]): 100 * cublas["median_ms"] / e["median_ms"] for e in swept}
    best = max(pct, key=pct.get)
    depths = sorted({stages for _, stages in pct})
    table = ["| BK / stages | " + " | ".join(map(str, depths)) + " |", "|---|" + "---:|" * len(depths)]
    for bk in sorted({bk for bk, _ in pct}):
        cells = []
        for st in depths:
            cell = "–" if (bk, st) not in pct else f"{pct[bk, st]:.1f}%" + (" (committed)" if (bk, st) == committed else "")
            cells.append(f"**{cell}**" if (bk, st) == best else cell)
        table.append(f"| {bk} | " + " | ".join(cells) + " |")
    agree = ("the committed defaults are that pair" if best == committed else
             f"the committed defaults, BK = {committed[0]} with {committed[1]} stages, are not: re-tune or explain why")
    return (f"{provenance(record)}, rung 7 at % of cuBLAS:\n\n" + "\n".join(table)
            + f"\n\nFastest: BK = {best[0]} with {best[1]} stages; {agree}.")


# --------------------------------------------------------------------------- the exercises' GPU work

def _first_line(error) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def pct_table(rows: list[dict]) -> None:
    """Print compare() rows fastest first, each with its % of cuBLAS."""
    cublas = next(r for r in rows if r["contender"] == ladder.REFERENCE)
    print(f"{'contender':<28} {'median ms':>9} {'TFLOP/s':>8} {'% of cuBLAS':>11}")
    for r in sorted(rows, key=lambda r: r["median_ms"]):
        print(f"{r['contender']:<28} {r['median_ms']:>9.3f} {r['tflops']:>8.2f} "
              f"{100 * cublas['median_ms'] / r['median_ms']:>10.1f}%")


def time_variants(fns: dict, shape, reps: int) -> tuple[list[dict], dict]:
    """Verify each gemm of {label: fn} at `shape` against float64; time the right ones with cuBLAS in one
    run (TF32 off). Returns (rows, {label: why} for the wrong ones). Needs a GPU."""
    import torch.nn.functional as F

    x, w = ladder.operands(*shape)
    wrong, timed = {}, {}
    for label, fn in fns.items():
        try:
            ok, detail = ladder.verify(fn, x, w)
        except RuntimeError as error:  # a launch the GPU refuses (too much shared memory, say)
            ok, detail = False, f"raised: {_first_line(error)}"
        print(f"{label:<28} {'ok' if ok else 'WRONG'}: {detail}")
        if ok:
            timed[label] = lambda fn=fn: fn(x, w)
        else:
            wrong[label] = detail
    with precision.ieee_fp32():
        rows = bench.compare({**timed, ladder.REFERENCE: lambda: F.linear(x, w)}, cost=bench.gemm_cost(*shape),
                             baseline=ladder.REFERENCE, reps=reps, progress=False)
    return rows, wrong


def check_exercise(chapter: LadderChapter, name: str, operands, hints: dict, passed: str):
    """Build exercise `name` (your edits rebuild it) and, on a GPU, run it through the harness and print
    the verdict. Returns (module or None, whether it passed)."""
    from utils import check
    import torch.nn.functional as F

    S = chapter.session
    if not S.can_compile:
        skip(f"compiling {name}", "no nvcc or a CPU-only torch")
        return None, False
    module = build.load_kernel(name, kernels_dir=EXERCISES)
    if not S.on_gpu:
        skip(f"checking {name}", "no GPU (it compiled)")
        return module, False
    report = check.check_fn(module.gemm, F.linear, operands, name=f"your {name}", contiguous_only=True)
    print(report)
    print(exercise_verdict(report, hints, passed))
    return module, report.ok


def time_warp_exercise(guess, module, passed: bool, chapter: LadderChapter, rung2_step: dict) -> None:
    """Exercise 2 of notebook 02: once the reader has written a guess and the kernel passed, time it
    against rung 2 and cuBLAS and set the guess beside the measurement and the L1-line model."""
    if guess is None:
        print("Not yet: write your guess in MY_GUESS first, then run this cell again.")
        return
    if not chapter.on_gpu:
        skip("timing exercise 2 against rung 2", "no GPU")
        return
    if not passed:
        print("Not yet: the checker above must say PASS first (a wrong kernel is not timed).")
        return
    yours = "one warp per output (yours)"
    rows, _ = time_variants({"gemm_02_coalesced": ladder.load("gemm_02_coalesced"), yours: module.gemm},
                            chapter.shape, chapter.session.reps)
    pct_table(rows)
    ms = {r["contender"]: r["median_ms"] for r in rows}
    measured = ms[yours] / ms["gemm_02_coalesced"]
    model = (2 / 32) / (rung2_step["lines"] / rung2_step["fmas"])
    display(Markdown(
        f"Your guess: {guess:g}x. Measured on {env.device_name()}: **{measured:.2f}x** rung 2's time. The L1-line "
        f"model alone (2 lines per 32 FMAs against {rung2_step['lines']} per {rung2_step['fmas']}) says {model:.2f}x; "
        "compare it with how close rung 2 came to that model's cap before trusting it."))


def tile_exercise(variants: dict, my_order, chapter: LadderChapter) -> None:
    """Exercise 1 of notebook 03: until the prediction is complete, Not yet and nothing built; then each
    variant of kernels/exercises/gemm_tile_shape.cu built (on a GPU all, else the first), and on a GPU
    checked and timed with cuBLAS in one run, and the verdict."""
    S = chapter.session
    prediction = order_verdict(my_order, variants)
    if prediction.startswith("Not yet"):
        print(prediction)
        return
    if not S.can_compile:
        skip("compiling exercise 1", "no nvcc or a CPU-only torch")
        return
    chosen = variants if S.on_gpu else dict(list(variants.items())[:1])
    built = build.load_kernels({label: build.Variant("gemm_tile_shape", flags, EXERCISES)
                                for label, flags in chosen.items()}, on_error="return")
    broken = {label: m for label, m in built.items() if isinstance(m, Exception)}
    for label, module in built.items():
        print(f"{label:<16} " + (f"does not compile: {_first_line(module)}" if label in broken else
                                 "BM, BN, BK, TM, TN, threads, min blocks/SM = " + str(module.tile_shape())))
    if not S.on_gpu:
        skip("timing the tile-shape variants", "no GPU (the first variant compiled)")
        print(prediction)
        return
    rows, wrong = time_variants({l: m.gemm for l, m in built.items() if l not in broken}, chapter.shape, S.reps)
    pct_table(rows)
    order = [r["contender"] for r in sorted(rows, key=lambda r: r["median_ms"]) if r["contender"] != ladder.REFERENCE]
    print("measured, fastest first:", order)
    print("your order:             ", list(my_order))
    problems = {**{l: f"does not compile: {_first_line(e)}" for l, e in broken.items()}, **wrong}
    print(order_verdict(my_order, variants, order, problems))


def shared_loads(module) -> dict | None:
    """How many shared-memory loads of each width (LDS, LDS.64, LDS.128) the compiler put in a built
    kernel's machine code (cuobjdump -sass); None where the toolkit has no cuobjdump."""
    nvcc = shutil.which("nvcc")
    tool = shutil.which("cuobjdump") or (nvcc and str(Path(nvcc).parent / "cuobjdump"))
    try:
        sass = subprocess.run([tool, "-sass", module.__file__], capture_output=True, text=True, check=True).stdout
    except (TypeError, OSError, subprocess.CalledProcessError):
        return None
    return dict(sorted(Counter(re.findall(r"\b(LDS(?:\.[0-9A-Z]+)*)\b", sass)).items()))


def pad_exercise(chapter: LadderChapter) -> None:
    """Exercise 2 of notebook 03: build gemm_smem_pad, show its shared loads in the SASS where the toolkit
    can, run the harness on a GPU, print the verdict (it needs no GPU), and on a GPU time it against rung 3."""
    from utils import check
    import torch.nn.functional as F

    S = chapter.session
    if not S.can_compile:
        skip("compiling exercise 2", "no nvcc or a CPU-only torch")
        return
    module = build.load_kernel("gemm_smem_pad", kernels_dir=EXERCISES)  # your edits rebuild it here
    row = module.ws_row_floats()
    if (sass := shared_loads(module)) is not None:
        print(f"shared loads in the SASS (cuobjdump -sass): {sass}; the checker counts ws[tx][kk] read with "
              f"{LOAD_NAMES[ws_load_floats(row)]}, beside the LDS.128 of xs")
    report = None
    if S.on_gpu:
        report = check.check_fn(module.gemm, F.linear, operands_odd, name="your gemm_smem_pad", contiguous_only=True)
        print(report)
    else:
        skip("running exercise 2 through the harness", "no GPU (it compiled; the layout is checked below)")
    print(padding_verdict(row, report))
    if S.on_gpu and report.ok:
        yours = f"yours (rows of {row} floats)"
        rows, _ = time_variants({"gemm_03_smem_tiled": ladder.load("gemm_03_smem_tiled"), yours: module.gemm},
                                chapter.shape, S.reps)
        pct_table(rows)
        ms = {r["contender"]: r["median_ms"] for r in rows}
        display(Markdown(f"Measured on {env.device_name()}: your kernel takes **{ms[yours] / ms['gemm_03_smem_tiled']:.2f}x** "
                         f"rung 3's time, at {ws_passes(row):g} pass(es) per kk against rung 3's 1."))


def pipeline_pairs() -> tuple[list[tuple[int, int]], tuple[int, int]]:
    """Exercise 3 of notebook 03: rung 7's committed (BK, STAGES), half the slice depth, and one stage more
    of each; and the committed pair."""
    bk0, st0 = ladder.defaults()
    return [(bk, st) for bk in (bk0 // 2, bk0) for st in (st0, st0 + 1)], (bk0, st0)


def pipeline_exercise(my_best, chapter: LadderChapter) -> None:
    """Exercise 3 of notebook 03: until MY_BEST names one of the pairs, Not yet and nothing built; on a GPU,
    the four builds of rung 7 checked and timed with cuBLAS in one run, and the verdict."""
    S = chapter.session
    pairs, committed = pipeline_pairs()
    prediction = pair_verdict(my_best, pairs)
    if prediction.startswith("Not yet"):
        print(prediction)
        return
    if not S.on_gpu:
        skip("exercise 3", "no GPU (the committed rung 7 compiled above; the other pairs are built on a GPU)")
        print(prediction)
        return
    label = {p: f"BK {p[0]}, {p[1]} stages" + (" (committed)" if p == committed else "") for p in pairs}
    built = build.load_kernels({label[p]: build.Variant(ladder.TUNED, [] if p == committed else ladder.tune_flags(*p))
                                for p in pairs}, on_error="return")
    broken = {l: m for l, m in built.items() if isinstance(m, Exception)}
    for l, error in broken.items():
        print(f"{l}: does not compile: {_first_line(error)}")
    rows, wrong = time_variants({l: m.gemm for l, m in built.items() if l not in broken}, chapter.shape, S.reps)
    pct_table(rows)
    timed = {r["contender"]: r["median_ms"] for r in rows}
    best = min((p for p in pairs if label[p] in timed), key=lambda p: timed[label[p]])
    text = f"Measured on {env.device_name()}: fastest **BK = {best[0]} with {best[1]} stages**"
    text += "; that is the committed pair." if best == committed else (
        f", {timed[label[committed]] / timed[label[best]]:.3f}x faster than the committed pair in this run "
        "(differences of a percent or two are within run-to-run noise; the recorded sweep used more repetitions).")
    display(Markdown(text))
    print(pair_verdict(my_best, pairs, best, [*broken, *wrong]))


# --------------------------------------------------------------------------- diagrams

_LANES = matplotlib.colormaps["viridis"]  # lane 0 .. 31
_EMPTY, _LIGHT, _MID = "#f4f4f4", "#fdd0a2", "#9ecae1"


def _axes_grid(ax, rows: int, cols: int, title: str, xlabel: str = "", ylabel: str = "") -> None:
    ax.set_xlim(-0.5, cols - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_aspect("equal")
    ax.grid(False)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=9, loc="left")
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.add_patch(matplotlib.patches.Rectangle((-0.5, -0.5), cols, rows, fill=False, lw=0.8, color="#444444"))


def _cells(ax, cells, colour, **kw) -> None:
    for r, c in cells:
        ax.add_patch(matplotlib.patches.Rectangle((c - 0.5, r - 0.5), 1, 1, color=colour, lw=0, **kw))


def _lane_cells(ax, cells) -> None:
    """cells[i] = (row, col) of lane i, coloured by lane."""
    for lane, (r, c) in enumerate(cells):
        _cells(ax, [(r, c)], _LANES(lane / 31))


def _figure(title: str, size: tuple[float, float]) -> Figure:
    with matplotlib.rc_context(plots.STYLE):
        fig = Figure(figsize=size)
    fig.suptitle(title + "\n(a diagram, not a measurement)", x=0.02, ha="left", fontsize=10)
    return fig


def _finish(fig: Figure) -> Figure:
    return plots.finish(fig)


def draw_mapping() -> Figure:
    """Notebook 02: which outputs one warp computes and which elements of x and w it reads at one step,
    rung 1 (lanes along n: w read down a column, 32 rows apart) against rung 2 (lanes along k: every read a
    run of consecutive floats). Colour: lane 0 (dark) to 31 (light)."""
    fig = _figure("One warp (32 lanes), one step: rung 1 against rung 2", (9.0, 6.2))
    K, N, M = 40, 40, 10
    m, n0, k = 3, 4, 6
    with matplotlib.rc_context(plots.STYLE):
        axes = fig.subplots(2, 3, gridspec_kw={"width_ratios": [K, K, N]})
        for row, (rung, what) in enumerate([("rung 1", "lanes along n"), ("rung 2", "lanes along k")]):
            ax_x, ax_w, ax_out = axes[row]
            _axes_grid(ax_x, M, K, f"{rung} ({what}): x (M x K)", "k →", "m")
            _axes_grid(ax_w, N, K, "w (N x K): each row K-contiguous", "k →", "n")
            _axes_grid(ax_out, M, N, "out (M x N)", "n →", "m")
            if row == 0:  # every lane reads x[m][k]; lane l reads w[n0 + l][k]; computes out[m][n0 + l]
                _cells(ax_x, [(m, k)], _LANES(0.5))
                _lane_cells(ax_w, [(n0 + lane, k) for lane in range(32)])
                _lane_cells(ax_out, [(m, n0 + lane) for lane in range(32)])
                ax_w.annotate("32 rows, K floats apart:\n32 cache lines", (k + 1, n0 + 16), (k + 6, n0 + 16),
                              fontsize=8, va="center", arrowprops={"arrowstyle": "->"})
            else:  # lane l reads x[m][k0 + l] and w[n0 + j][k0 + l], j = 0..3; the warp computes out[m][n0..n0+3]
                _lane_cells(ax_x, [(m, lane) for lane in range(32)])
                for j in range(4):
                    _lane_cells(ax_w, [(n0 + j, lane) for lane in range(32)])
                _cells(ax_out, [(m, n0 + j) for j in range(4)], _LANES(0.5))
                ax_w.annotate("4 rows, 32 consecutive k:\none 128-byte line each", (16, n0 + 4), (8, n0 + 16),
                              fontsize=8, va="center", arrowprops={"arrowstyle": "->"})
    return _finish(fig)


def draw_block_tile() -> Figure:
    """Notebook 03, rung 3 on: a block computes one tile of out from a band of rows of x and one of w,
    walking along K a slice at a time; each slice is copied to shared memory once and used by the whole tile."""
    fig = _figure("One block: a tile of out, from bands of x and w, one K slice at a time", (9.0, 3.4))
    tiles_m, tiles_n, slices = 6, 6, 8
    bm, bn, s = 2, 4, 3  # this block's tile row and column, the slice being computed
    with matplotlib.rc_context(plots.STYLE):
        ax_x, ax_w, ax_out = fig.subplots(1, 3, gridspec_kw={"width_ratios": [slices, slices, tiles_n]})
        for ax, rows, band, label in ((ax_x, tiles_m, bm, "x: BM rows"), (ax_w, tiles_n, bn, "w: BN rows")):
            _axes_grid(ax, rows, slices, f"{label} x K", "K, in slices of BK →")
            _cells(ax, [(band, c) for c in range(s)], _MID)  # done
            _cells(ax, [(band, c) for c in range(s + 1, slices)], _LIGHT)  # to come
            _cells(ax, [(band, s)], plots.CYCLE[0])
        _axes_grid(ax_out, tiles_m, tiles_n, "out: one BM x BN tile per block", "N →", "M")
        _cells(ax_out, [(bm, bn)], plots.CYCLE[0])
        legend = [matplotlib.patches.Patch(color=c, label=t) for c, t in
                  ((_MID, "slices done"), (plots.CYCLE[0], "slice in shared memory now"), (_LIGHT, "slices to come"))]
        fig.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, 0.02), ncols=3, fontsize=8)
    return _finish(fig)


def draw_kmajor_copy(rows: int = 8, bk: int = 16) -> Figure:
    """Notebook 03, rung 4 on: load_tile_kmajor's transposing copy. Thread t reads k = t % 8 of row t / 8
    (a warp: 8 consecutive k, one 32-byte sector, of 4 rows) and writes it to tile[k][row]. Warp 0 in lane
    colours; the first rows and k of the tile only."""
    fig = _figure("The transposing copy: global rows (k-contiguous) → shared tile[k][row] (k-major)", (9.0, 4.4))
    with matplotlib.rc_context(plots.STYLE):
        ax_g, ax_s = fig.subplots(1, 2, gridspec_kw={"width_ratios": [bk, rows]})
        _axes_grid(ax_g, rows, bk, "global: w[row][k], a warp reads 4 sectors", "k →", "row")
        _axes_grid(ax_s, bk, rows, "shared: tile[k][row]", "row →", "k")
        for t in range(32, 64):  # warp 1: the next 4 rows
            _cells(ax_g, [(t // 8, t % 8)], _LIGHT)
            _cells(ax_s, [(t % 8, t // 8)], _LIGHT)
        _lane_cells(ax_g, [(t // 8, t % 8) for t in range(32)])
        _lane_cells(ax_s, [(t % 8, t // 8) for t in range(32)])
        for x in (7.5,):
            ax_g.axvline(x, color="#444444", lw=0.6)
        ax_g.text(bk - 0.5, rows + 0.2, "k 8..15: the same threads, next pass", ha="right", va="top", fontsize=7)
    return _finish(fig)


def draw_bank_phases(cases: dict[str, tuple[list[int], int]], phase: int = 0) -> Figure:
    """For each case {title: (first word of each of 32 lanes, floats per lane)}: the lanes of one phase
    of the load (a quarter-warp for LDS.128, a half-warp for LDS.64, the warp for LDS) against the 32
    banks, each lane's words in its colour; a bank that must deliver more than one distinct word (a
    conflict) is framed in red."""
    heights = [min(32 // width, 12) for _, width in cases.values()]
    fig = _figure("Shared-memory banks: the lanes of one phase of a load (red frame: a bank asked for 2+ words)",
                  (9.0, 1.0 + 0.16 * sum(heights) + 0.45 * len(cases)))
    with matplotlib.rc_context(plots.STYLE):
        axes = fig.subplots(len(cases), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
        for ax, (title, (first_words, width)) in zip(axes, cases.items()):
            n = 32 // width
            lanes = list(range(phase * n, phase * n + n))
            passes = load_passes(first_words, width)[phase]
            _axes_grid(ax, n, 32, f"{title}: {LOAD_NAMES[width]}, lanes {lanes[0]}-{lanes[-1]}: "
                                  f"{passes} pass{'es' if passes > 1 else ''}", "bank →" if ax is axes[-1] else "")
            ax.set_aspect("auto")
            words_of_bank: dict[int, set] = {}
            for i, lane in enumerate(lanes):
                for j in range(width):
                    word = first_words[lane] + j
                    _cells(ax, [(i, word % 32)], _LANES(i / max(1, n - 1)))
                    words_of_bank.setdefault(word % 32, set()).add(word)
            for bank, words in words_of_bank.items():
                if len(words) > 1:
                    ax.add_patch(matplotlib.patches.Rectangle((bank - 0.5, -0.5), 1, n, fill=False, color="#d62728", lw=1.2))
            ax.set_xticks(range(0, 32, 4))
            ax.tick_params(labelsize=7)
    return _finish(fig)


def draw_warp_tile() -> Figure:
    """Notebook 03, rung 7: the 128 x 128 block tile in 8 warp tiles of 32 x 64 (4 x 2); and warp 0's
    tile with the outputs of each lane (lane colours, lane number in each block): a thread's 64 outputs
    are 2 x 2 blocks of 4 x 4, 16 rows and 32 columns apart, and the lanes are 4 (rows) x 8 (columns)."""
    fig = _figure("Rung 7's warp tiling: the block's 8 warps, and the 32 lanes of warp 0", (9.0, 3.8))
    warps_n, warp_m, warp_n = 2, 32, 64
    with matplotlib.rc_context(plots.STYLE):
        ax_block, ax_warp = fig.subplots(1, 2, gridspec_kw={"width_ratios": [128, 128]})
        _axes_grid(ax_block, 128, 128, "block tile: 128 x 128 outputs, 8 warps", "n →", "m")
        for warp in range(8):
            r0, c0 = (warp // warps_n) * warp_m, (warp % warps_n) * warp_n
            shade = _MID if warp == 0 else ("#e8e8e8" if (warp // warps_n + warp % warps_n) % 2 else "#d0d0d0")
            ax_block.add_patch(matplotlib.patches.Rectangle((c0 - 0.5, r0 - 0.5), warp_n, warp_m, color=shade, lw=0))
            ax_block.add_patch(matplotlib.patches.Rectangle((c0 - 0.5, r0 - 0.5), warp_n, warp_m, fill=False, lw=0.8,
                                                            color="#444444"))
            ax_block.text(c0 + warp_n / 2, r0 + warp_m / 2, f"warp {warp}\n32 x 64", ha="center", va="center", fontsize=7)
        _axes_grid(ax_warp, warp_m, warp_n, "warp 0: lane l owns 4 blocks of 4 x 4", "n →", "m")
        ax_warp.set_aspect("auto")
        for lane in range(32):
            tm, tn = (lane // 8) * 4, (lane % 8) * 4
            for dm in (0, 16):
                for dn in (0, 32):
                    ax_warp.add_patch(matplotlib.patches.Rectangle((tn + dn - 0.5, tm + dm - 0.5), 4, 4,
                                                                   color=_LANES(lane / 31), lw=0))
                    ax_warp.text(tn + dn + 1.5, tm + dm + 1.5, str(lane), ha="center", va="center", fontsize=5,
                                 color="white" if lane < 20 else "black")
    return _finish(fig)


def draw_pipeline(slices: int = 4, copy: float = 3.0, compute: float = 4.0) -> Figure:
    """Notebook 03, rungs 6 and 7: one block's timeline. Rung 6 copies a slice, waits at a barrier,
    computes it, waits again, then copies the next. Rung 7 (2 stages) issues slice s + 1's cp.async copy
    and computes slice s meanwhile: one barrier per slice, the copy hidden while it is shorter than the
    arithmetic. Times are schematic."""
    fig = _figure("One block's timeline: copy then compute (rung 6) against a 2-stage pipeline (rung 7)", (9.0, 3.6))
    with matplotlib.rc_context(plots.STYLE):
        axes = fig.subplots(2, 1, sharex=True)
        t, bars6 = 0.0, []
        for s in range(slices):
            bars6.append(("copy", t, copy, s))
            bars6.append(("compute", t + copy, compute, s))
            t += copy + compute
        bars7 = [("copy", 0.0, copy, 0)]
        start = copy
        for s in range(slices):
            if s + 1 < slices:
                bars7.append(("copy", start, copy, s + 1))
            bars7.append(("compute", start, compute, s))
            start += max(compute, copy)
        for ax, bars, title in ((axes[0], bars6, "rung 6: global → registers → shared, 2 barriers per slice"),
                                (axes[1], bars7, "rung 7: cp.async into stage (s + 1) % 2 while computing stage s % 2")):
            for what, x0, width, s in bars:
                y = 1 if what == "copy" else 0
                ax.broken_barh([(x0, width)], (y - 0.35, 0.7), color=_MID if what == "copy" else plots.CYCLE[0])
                ax.text(x0 + width / 2, y, f"{'copy' if y else 'compute'} {s}", ha="center", va="center", fontsize=7)
            ends = sorted({x0 + w for what, x0, w, _ in bars if what == "compute"} |
                          ({x0 + w for what, x0, w, _ in bars if what == "copy"} if bars is bars6 else set()))
            for x in ends:
                ax.axvline(x, color="#444444", lw=0.6, ls=":")
            ax.set_yticks([0, 1], ["compute", "copy"])
            ax.set_title(title, fontsize=9, loc="left")
            ax.grid(False)
        axes[1].set_xlabel("time (schematic; dotted: barriers)")
    return _finish(fig)
