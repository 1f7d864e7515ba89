"""The GEMM ladder chapter (notebooks 02 and 03), tested in tests/test_ladder_chapter.py.

The lesson itself is in the notebooks' cells: each rung's launch (grid, block, shared memory), its check
against float64 with the output poisoned, and its timing (`bench.time_interleaved`). This module holds what
the cells share and do not teach:

    C = LadderChapter(S)                      # the chapter's shape; the rows this run measured
    display(C.keep(timings))                  # {contender: bench.Timing} -> rows (kept for the tables) and a DataFrame
    C.recorded_rows(["gemm_01_naive"])        # without a GPU: the recorded ladder's rows, and whose they are
    quote("gemm_01_naive", "PREDICTION")      # a header paragraph, as written
    C.prediction_table(names)                 # every PREDICTION against its measurement (a DataFrame), the misses
    tuning_table(record, defaults)            # the recorded rung-7 sweep over BK x stages (a DataFrame)
    sweep_floor / sweep_regimes               # the floor of the sweep over M, and where each regime begins
    profile_prose(record)                     # what a recorded Nsight Compute profile says binds rung 7

Without a GPU as well, the chapter's other parts, each a module of its own:

- gemm_addressing.py, the address arithmetic the chapters reason with: `warp_step` (sectors and cache lines
  of one warp's loads), `load_passes` / `bank_table` (shared-memory passes at the load width the SASS shows:
  a 16-byte LDS.128 is served a quarter-warp at a time, an 8-byte LDS.64 a half-warp, a 4-byte LDS the whole
  warp), `tile_table` and `kernel_constants` (each rung's tile, read from its constants);
- gemm_diagrams.py, the diagrams (matplotlib figures, not measurements): `draw_mapping` (02: which thread
  computes which output and reads which elements), `draw_block_tile`, `draw_kmajor_copy`, `draw_bank_phases`,
  `draw_warp_tile`, `draw_pipeline` (03);
- gemm_exercises.py, the exercise checkers: `exercise_verdict`, `tiled_static_problems` / `tiled_verdict` (03's
  tiled SGEMM written from scratch), `order_verdict` and `pair_verdict` (predictions judged against measured
  times), `padding_verdict`, and the cells that run them (`check_exercise`, `tile_exercise`, `pad_exercise`,
  `pipeline_exercise`): each says "Not yet" until the reader has acted, and PASS only for a right answer.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from IPython.display import Markdown, display

from utils import bench, build, env, ladder, plots, precision, profile, show
from utils.chapters.gemm_addressing import l1_model
from utils.ladder import rung_number
from utils.run import skip
from utils.show import header_section

# The GEMM of problems 94, 75 and 62 at the parameters cell's SCALE; only "full" is recorded.
SHAPES = {"full": ladder.SHAPE, "small": (256, 2048, 2048), "odd": (1000, 4093, 4093)}
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
    """Whose numbers a recorded run holds: device and date, to open a sentence that uses them (no commit:
    the chapters speak of the workbook, not of its history)."""
    return f"Recorded on {record['device']['name']} ({record['date'][:10]})"


@dataclass
class LadderChapter:
    """A ladder notebook's session (utils.chapters.session.Session: on_gpu, can_compile, scale, reps,
    results_dir, recorded(kind)) and every measurement this run of it makes: `measured` holds, per
    contender, its latest row, on this GPU."""
    session: object
    measured: dict = field(default_factory=dict)
    predictions: dict = field(default_factory=dict)  # exercise -> the first prediction judged in this run

    @property
    def shape(self) -> tuple[int, int, int]:
        return SHAPES[self.session.scale]

    @property
    def on_gpu(self) -> bool:
        return self.session.on_gpu

    def recorded_ladder(self) -> dict | None:
        """The recorded ladder this run reads: this GPU's, or without a GPU the reading device's."""
        return self.session.recorded("ladder")

    def keep(self, timings: dict, shape: tuple[int, int, int] | None = None):
        """Rows for the timings a cell measured ({contender: bench.Timing}, cuBLAS among them), kept in
        `measured` for the chapter's tables, and returned as a DataFrame: median, p20, p80, TFLOP/s and
        % of cuBLAS."""
        import pandas as pd

        M, N, K = shape or self.shape
        flops = bench.gemm_cost(M, N, K).flops
        reference = timings[ladder.REFERENCE].median if ladder.REFERENCE in timings else None
        rows = [{"contender": name, "median_ms": t.median, "p20_ms": t.p20, "p80_ms": t.p80,
                 "tflops": flops / (t.median * 1e-3) / 1e12,
                 "pct_of_cublas": 100 * reference / t.median if reference else None, "shape": [M, N, K]}
                for name, t in timings.items()]
        self.measured.update({row["contender"]: row for row in rows})
        return pd.DataFrame(rows).set_index("contender").drop(columns="shape").round(3)

    def recorded_rows(self, names: list[str]) -> None:
        """Without a GPU: display the recorded ladder's rows of `names` and cuBLAS as a DataFrame, after one line
        saying whose they are; or the line saying that no record has them."""
        import pandas as pd

        record = self.recorded_ladder()
        if record is None or not set(names) <= {e["contender"] for e in record["entries"]}:
            skip(f"measuring {', '.join(names)}", "no GPU, and no recorded ladder has them")
            return None
        skip(f"measuring {', '.join(names)}", f"no GPU; {provenance(record)} instead")
        rows = [e for e in record["entries"] if e["contender"] in {*names, ladder.REFERENCE}]
        frame = pd.DataFrame(rows).set_index("contender")
        display(frame[[c for c in ("median_ms", "p20_ms", "p80_ms", "tflops", "pct_of_cublas") if c in frame]].round(3))
        return None

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
        display(Markdown(f"{source}. Each header's PREDICTION was written before the rung was measured; a point "
                         f"prediction (\"about 2x\") counts as met within ±{100 * ABOUT:.0f}%."))
        display(prediction_table(names, rows))
        if misses := prediction_misses(names, rows):
            display(Markdown(misses))


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
UNEXPLAINED = ("not explained by the header's model; a profile of this rung, as the one of rung 7 at the end of "
               "notebook 03, would say which resource binds.")


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


def prediction_table(names: list[str], rows: list[dict]) -> pd.DataFrame:
    """One row per rung, its PREDICTION (read from the header) against the measurement in `rows`, and a
    verdict (prediction_misses says why each miss happened, where the chapter knows)."""
    table = []
    for e in prediction_rows(names, rows):
        pct_p = _range(*e["pct_predicted"], "%") if e["pct_predicted"] else "–"
        fac_p = f"{_range(*e['factor_predicted'], 'x')} rung {e['earlier']}" if e["factor_predicted"] else "–"
        fac_m = f"{e['factor']:.2f}x" if e["factor"] is not None else "–"
        verdicts = [v for v in (e["pct_verdict"], e["factor_verdict"]) if v]
        table.append({"rung": e["rung"], "predicted % of cuBLAS": pct_p, "measured": f"{e['pct']:.1f}%",
                      "predicted × earlier rung": fac_p, "measured ×": fac_m,
                      "verdict": f"{', '.join(verdicts) or 'nothing to compare'}{' (tuned after)' if e['tuned'] else ''}"})
    return pd.DataFrame(table, columns=["rung", "predicted % of cuBLAS", "measured", "predicted × earlier rung",
                                        "measured ×", "verdict"])


def prediction_misses(names: list[str], rows: list[dict]) -> str:
    """Markdown: under prediction_table, why each miss happened, where the chapter knows; "" without a miss."""
    misses = []
    for e in prediction_rows(names, rows):
        for what in ("pct", "factor"):
            if e[f"{what}_verdict"] in ("above", "below"):
                why = WHY_MISSED.get((e["rung"], what, e[f"{what}_verdict"]))
                if why is None and e["tuned"]:
                    why = ("the PREDICTION was written for the first configuration; the kernel measured is the one "
                           "tuned afterwards (its header's TUNED AFTERWARDS paragraph).")
                label = "% of cuBLAS" if what == "pct" else f"factor over rung {e['earlier']}"
                misses.append(f"- `{e['rung']}`, {label} {e[f'{what}_verdict']} the prediction: {why or UNEXPLAINED}")
    return "\n".join(["Where a prediction missed:", "", *misses]) if misses else ""


# --------------------------------------------------------------------------- the whole ladder

def ladder_run(chapter: LadderChapter) -> tuple[list[dict] | None, str | None]:
    """Without a GPU: the recorded ladder, plotted, and (its rows, whose they are); (None, None) and one line
    saying so without a record. (On a GPU notebook 03 measures the ladder in a cell of its own.)"""
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


def tuning_frame(record: dict):
    """A recorded rung-7 sweep (kind "ladder_tuning") as a DataFrame: % of cuBLAS, one row per slice
    depth BK, one column per number of stages."""
    import pandas as pd

    swept = [e for e in record["entries"] if e.get("bk") is not None and e.get("stages") is not None]
    cublas = next(e for e in record["entries"] if e["contender"] == ladder.REFERENCE)
    frame = pd.DataFrame([{"BK": e["bk"], "stages": e["stages"], "pct": 100 * cublas["median_ms"] / e["median_ms"]}
                          for e in swept])
    return frame.pivot(index="BK", columns="stages", values="pct").round(1)


def tuning_missing(where: str = "") -> str:
    """The line a chapter shows where no rung-7 sweep is recorded: the device it looked for (`where`)."""
    return (f"No rung-7 sweep is recorded{f' for {where}' if where else ''}: `python -m utils.ladder --tune` "
            "on that GPU records one (results/<device>/ladder_tuning.json).")


def tuning_table(record: dict, committed: tuple[int, int]) -> pd.DataFrame:
    """A recorded rung-7 sweep (kind "ladder_tuning") as BK (rows) x stages (columns), % of cuBLAS, the
    fastest pair marked "fastest" and `committed` (the header's defaults) "committed", in brackets."""
    frame = tuning_frame(record)
    best = frame.stack().idxmax()
    shown = frame.map(lambda v: "–" if v != v else f"{v:.1f}%").astype(object)
    marks = {tuple(committed): ["committed"]} if committed[0] in shown.index and committed[1] in shown.columns else {}
    marks.setdefault(tuple(best), []).append("fastest")
    for (bk, st), said in marks.items():
        shown.loc[bk, st] += f" ({', '.join(said)})"
    return shown


def tuning_verdict(record: dict, committed: tuple[int, int]) -> str:
    """One sentence: the fastest pair of the recorded sweep, and whether `committed` is that pair."""
    best = tuning_frame(record).stack().idxmax()
    agree = ("the committed defaults are that pair" if tuple(best) == tuple(committed) else
             f"the committed defaults, BK = {committed[0]} with {committed[1]} stages, are not: re-tune or explain why")
    return f"Fastest: BK = {best[0]} with {best[1]} stages; {agree}."


# --------------------------------------------------------------------------- the sweep over M

MATH = {"fp32": ("fp32", "the FMAs"), "tf32": ("TF32 tensor-core", "the tensor cores")}  # a sweep's arithmetic


def sweep_floor(Ms, N: int, K: int, ceilings: bench.Ceilings, math: str = "fp32") -> dict[int, float]:
    """{M: ms}: the least time x (M, K) @ w (N, K).T can take, the slower of its bytes (x and w read once, out
    written once) over the copy bandwidth and its FLOPs over the peak of `math` ("fp32", or "tf32" for the
    tensor cores)."""
    return {M: max(bench.floors(bench.gemm_cost(M, N, K), ceilings)[k] for k in ("memory_ms", f"{math}_ms")) for M in Ms}


def crossover_m(N: int, K: int, ceilings: bench.Ceilings, math: str = "fp32") -> float:
    """The M at which the GEMM's FLOPs at the peak of `math` take as long as its bytes at the copy bandwidth:
    below it the floor is reading the weight, above it the arithmetic. Solved from 2MNK / peak =
    4(MK + NK + MN) / bandwidth."""
    peak, bandwidth = getattr(ceilings, f"{math}_tflops") * 1e12, ceilings.copy_GBps * 1e9
    # 2MNK / peak - 4M(K + N) / bandwidth = 4NK / bandwidth, linear in M
    slope = 2 * N * K / peak - 4 * (K + N) / bandwidth
    return float("inf") if slope <= 0 else 4 * N * K / bandwidth / slope


def sweep_regimes(rows: list[dict], ceilings: bench.Ceilings, contender: str = ladder.REFERENCE,
                  flat: float = 1.25, also: tuple[str, ...] = ("gemm_07_pipelined",), math: str = "fp32") -> str:
    """Markdown: where each regime begins, from the floors and from the measured times of `contender` (and of
    each of `also` that the sweep holds): the largest M whose time stays within `flat` of its smallest M's (one
    read of the weight costs the same for one row or many), the M from which time per row stays within `flat`
    of the largest M's (the compute regime), and the crossover of the two floors. Every number comes from the
    rows and the ceilings."""
    mine = sorted((r["M"], r["median_ms"]) for r in rows if r["contender"] == contender)
    if len(mine) < 3:
        return f"Too few sizes of {contender} in the sweep to say where its regimes begin."
    N, K = next((r["N"], r["K"]) for r in rows)
    cross = crossover_m(N, K, ceilings, math)
    weight_ms = bench.FP32_BYTES * N * K / (ceilings.copy_GBps * 1e9) * 1e3
    arithmetic, units = MATH[math]
    lines = [
        f"- **The floors** ({ceilings.source}): reading the {bench.FP32_BYTES * N * K / 2**20:.0f} MiB weight once "
        f"takes {weight_ms:.3f} ms at {ceilings.copy_GBps:,.0f} GB/s; the {arithmetic} arithmetic "
        f"({getattr(ceilings, f'{math}_tflops'):.1f} TFLOP/s) takes as long at M = {cross:,.0f}. Below that the floor "
        f"is the weight's bandwidth, above it {units}."]
    for name in (contender, *also):
        times = sorted((r["M"], r["median_ms"]) for r in rows if r["contender"] == name)
        if len(times) >= 3:
            lines.append(_regime_line(name, times, flat, weight_ms))
    return "\n".join(lines)


def _regime_line(name: str, times: list[tuple[int, float]], flat: float, weight_ms: float) -> str:
    (m0, t0), (m1, t1) = times[0], times[-1]
    flat_until = max(M for M, t in times if t <= flat * t0)
    per_row = t1 / m1
    compute_from = min(M for M, t in times if all(t2 / M2 <= flat * per_row for M2, t2 in times if M2 >= M))
    if flat_until == m0:
        (m_next, t_next) = times[1]
        small = (f"its time at M = {m0} ({t0:.3f} ms, {t0 / weight_ms:.1f}x the weight's floor) already grows "
                 f"{t_next / t0:.2f}x by M = {m_next:,}: no flat stretch of {flat:g}x")
    else:
        small = (f"its time stays within {flat:g}x of its time at M = {m0} ({t0:.3f} ms, {t0 / weight_ms:.1f}x the "
                 f"weight's floor) up to M = {flat_until:,}: the weight-bandwidth regime, where more rows of x ride "
                 "on the same read of w")
    return (f"- **Measured, {name}**: {small}. From M = {compute_from:,} on, its time per row stays within "
            f"{flat:g}x of its time per row at M = {m1:,} ({per_row * 1e3:.2f} us): the compute regime.")


# --------------------------------------------------------------------------- the profile

PROFILE_METRICS = {  # a substring of Nsight Compute's metric name -> what the table calls it
    "dram__throughput": "DRAM throughput",
    "pipe_fma": "FMA pipe",
    "pipe_tensor": "tensor pipe",
    "warps_active": "achieved occupancy",
    "occupancy": "achieved occupancy",
    "bank_conflicts_pipe_lsu_mem_shared_op_ld": "shared-memory bank conflicts, loads",
    "bank_conflicts_pipe_lsu_mem_shared_op_st": "shared-memory bank conflicts, stores",
    "bank_conflicts": "shared-memory bank conflicts",
    "wavefronts_mem_shared_op_ld": "shared-load wavefronts",
    "time_duration": "kernel time",
}


def _profile_label(metric: str) -> str:
    return next((label for key, label in PROFILE_METRICS.items() if key in metric), metric)


def profile_frame(record: dict):
    """A recorded Nsight Compute profile (kind "profile") as a DataFrame: one row per metric, one column per
    target ("rung 7", "whole model 94", ...), the unit beside the metric's name."""
    import pandas as pd

    entries = [e for t in dict.fromkeys(e["target"] for e in record["entries"])  # each target's main kernel
               for e in profile.main_kernel([e for e in record["entries"] if e["target"] == t])]
    frame = pd.DataFrame(entries)
    frame["metric"] = [f"{_profile_label(m)} ({u})" for m, u in zip(frame["metric"], frame["unit"])]
    return frame.pivot_table(index="metric", columns="target", values="value", aggfunc="first")


def profile_prose(record: dict, target: str = "rung 7", busy: float = 60.0) -> str:
    """What binds `target`, read from its recorded metrics: the FMA (or tensor) pipe busy against DRAM's share
    of its peak (a unit at `busy`% or more of its peak is the one that binds), with occupancy and bank
    conflicts beside them. Every number comes from the record."""
    values = {_profile_label(e["metric"]): (e["value"], e["unit"])
              for e in profile.main_kernel([e for e in record["entries"] if e["target"] == target])}
    if not values:
        return f"The recorded profile has no metrics of {target}."
    pipe = max((k for k in ("FMA pipe", "tensor pipe") if k in values), key=lambda k: values[k][0], default=None)
    dram = values.get("DRAM throughput", (None, None))[0]
    said = []
    if pipe is not None and dram is not None:
        p = values[pipe][0]
        if p >= busy and p >= dram:
            verdict = f"the {pipe} binds: it is busy {p:.0f}% of the time, DRAM at {dram:.0f}% of its peak"
        elif dram >= busy:
            verdict = f"DRAM binds: {dram:.0f}% of its peak, the {pipe} busy {p:.0f}% of the time"
        else:
            verdict = (f"neither unit is busy: the {pipe} at {p:.0f}%, DRAM at {dram:.0f}% of its peak, so the warps "
                       "wait (latency, barriers, issue) more than they compute or load")
        said.append(f"{target}: {verdict}.")
    if "achieved occupancy" in values:
        said.append(f"Achieved occupancy {values['achieved occupancy'][0]:.0f}{values['achieved occupancy'][1]}.")
    for label in ("shared-memory bank conflicts", "shared-memory bank conflicts, loads",
                  "shared-memory bank conflicts, stores"):
        if label in values:
            v, unit = values[label]
            said.append(f"{label[0].upper()}{label[1:]}: {v:,.0f}{' ' + unit if unit else ''}.")
    return f"{provenance(record)}: " + " ".join(said)
