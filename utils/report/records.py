"""Tables of the record kinds that the library's measurements write (utils.results' KINDS): ceilings,
baselines, the GEMM ladder and its tuning, bias fusion, the memory-bound kernels, and notebooks 10 and 13's
solutions, training step and autocast. Tables are pandas DataFrames of the record's values (`*_frame`: what a
notebook displays, as HTML in JupyterLab, and what tests check); `render_*` turns a record into Markdown through
those frames and `to_markdown` (DataFrame.to_markdown): utils.report.readme puts them in the README; the
notebooks display the frames under a caption (utils.chapters.session.record_table, record_caption).
"""
from __future__ import annotations

import math
from typing import Callable, Mapping

import pandas as pd

from utils.problems import PROBLEMS

MISSING = "–"  # a cell with no value, in Markdown


def cell(value, fmt: str | Callable = "{}") -> str:
    """One value as a Markdown cell: `fmt` a format string or a function; None and NaN as MISSING."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return fmt(value) if callable(fmt) else fmt.format(value)


def formatted(frame: pd.DataFrame, formats: Mapping[str, str | Callable] | None = None) -> pd.DataFrame:
    """The frame with each value as the text of its cell (cell(), formats[column], default str), index kept:
    what a notebook displays (as HTML) where the values' full precision would only be noise."""
    formats = formats or {}
    return pd.DataFrame({col: [cell(v, formats.get(col, "{}")) for v in frame[col]] for col in frame.columns},
                        index=frame.index)


def to_markdown(frame: pd.DataFrame, formats: Mapping[str, str | Callable] | None = None, *,
                right: tuple[str, ...] | None = None) -> str:
    """A DataFrame as a Markdown table (DataFrame.to_markdown, a pipe table), a named index as the first
    columns: each column's values through cell() with formats[column] (default str), numbers right-aligned (or
    the columns `right` names), the rest left."""
    named = frame.index.name is not None or any(n is not None for n in frame.index.names)
    flat = frame.reset_index() if named else frame
    shown = formatted(flat, formats).reset_index(drop=True)

    def numeric(col) -> bool:
        return pd.api.types.is_numeric_dtype(flat[col]) and not pd.api.types.is_bool_dtype(flat[col])
    first_is_index = named
    align = [("right" if (col in right if right is not None else numeric(col) and not (first_is_index and i == 0))
              else "left") for i, col in enumerate(flat.columns)]
    return shown.to_markdown(index=False, disable_numparse=True, colalign=align)


NAN = float("nan")


def _ratio(over: dict | None, e: dict | None) -> float:
    """over's median / e's median (e's speedup over it), NaN where either is missing."""
    return NAN if over is None or e is None else over["median_ms"] / e["median_ms"]


def _problem_name(pid: int) -> str:
    return PROBLEMS[pid].kernelbench_file.removesuffix(".py") if pid in PROBLEMS else f"problem {pid}"


def _by_problem(frame: pd.DataFrame) -> dict[int, pd.DataFrame]:
    """A frame indexed by (problem, ...) cut into one frame per problem, problem left out."""
    return {pid: frame.xs(pid, level="problem") for pid in dict.fromkeys(frame.index.get_level_values("problem"))}


X2 = "{:.2f}x"
MS3 = "{:.3f}"


# --------------------------------------------------------------------------- ceilings

def ceilings_frame(rec: dict) -> pd.DataFrame:
    e = rec["entries"][0]
    return pd.DataFrame([{"copy bandwidth": e["copy_GBps"], "FP32 SGEMM (cuBLAS)": e["fp32_tflops"],
                          "TF32 GEMM (cuBLAS)": e["tf32_tflops"]}])


def render_ceilings(rec: dict) -> str:
    return to_markdown(ceilings_frame(rec), {"copy bandwidth": "{:.0f} GB/s", "FP32 SGEMM (cuBLAS)": "{:.1f} TFLOP/s",
                                             "TF32 GEMM (cuBLAS)": "{:.1f} TFLOP/s"})


# --------------------------------------------------------------------------- baselines

def baselines_frame(rec: dict) -> pd.DataFrame:
    """(problem, contender, TF32) -> median ms, speedup over eager fp32 (TF32 off), % of floor; contenders in
    the order they first appear, TF32 off before on."""
    rows = []
    for pid in dict.fromkeys(e["problem"] for e in rec["entries"]):
        entries = [e for e in rec["entries"] if e["problem"] == pid]
        eager = next((e for e in entries if e["contender"] == "eager" and not e["tf32"]), None)
        order = list(dict.fromkeys(e["contender"] for e in entries))  # first-appearance order
        for e in sorted(entries, key=lambda e: (order.index(e["contender"]), e["tf32"])):
            rows.append({"problem": pid, "contender": e["contender"], "TF32": "on" if e["tf32"] else "off",
                         "median ms": e["median_ms"], "speedup vs eager": _ratio(eager, e),
                         "% of floor": e["pct_of_floor"]})
    return pd.DataFrame(rows).set_index(["problem", "contender", "TF32"])


def render_baselines(rec: dict) -> str:
    parts = ["Speedup is against eager PyTorch with TF32 off (KernelBench's reference setting). "
             "% of floor = floor time / median time: 100 % would run at the floor "
             "(memory, or FP32 / TF32 math as the TF32 setting allows)."]
    formats = {"median ms": MS3, "speedup vs eager": X2, "% of floor": "{:.0f} %"}
    for pid, frame in _by_problem(baselines_frame(rec)).items():
        parts.append(f"**{_problem_name(pid)}**\n\n" + to_markdown(frame, formats))
    return "\n\n".join(parts)


# --------------------------------------------------------------------------- the GEMM ladder

def ladder_frame(rec: dict) -> pd.DataFrame:
    """rung -> median ms, TFLOP/s and % of cuBLAS (NaN without a cuBLAS row), in ladder order."""
    cublas = next((e for e in rec["entries"] if e["contender"] == "cuBLAS"), None)
    return pd.DataFrame([{"rung": e["contender"], "median ms": e["median_ms"], "TFLOP/s": e["tflops"],
                          "% of cuBLAS": 100 * _ratio(cublas, e)} for e in rec["entries"]]).set_index("rung")


def render_ladder(rec: dict) -> str:
    shape = rec["entries"][0].get("shape")
    head = f"M x N x K = {' x '.join(map(str, shape))}, fp32, TF32 off.\n\n" if shape else ""
    return head + to_markdown(ladder_frame(rec), {"median ms": MS3, "TFLOP/s": "{:.2f}", "% of cuBLAS": "{:.1f} %"})


def ladder_tuning_frame(rec: dict) -> pd.DataFrame:
    """(BK, stages) -> median ms, TFLOP/s, % of cuBLAS and whether it is the default; rows without a BK left out."""
    rows = [{"BK": e["bk"], "stages": e["stages"], "default": bool(e.get("default")), "median ms": e["median_ms"],
             "TFLOP/s": e["tflops"], "% of cuBLAS": e["pct_of_cublas"]} for e in rec["entries"] if e.get("bk") is not None]
    return pd.DataFrame(rows, columns=["BK", "stages", "default", "median ms", "TFLOP/s", "% of cuBLAS"])


def render_ladder_tuning(rec: dict) -> str:
    shape = rec["entries"][0].get("shape")
    frame = ladder_tuning_frame(rec)
    shown = frame.assign(stages=[f"{s}{' (default)' if d else ''}" for s, d in zip(frame["stages"], frame["default"])])
    head = (f"Rung 7 (`{rec['entries'][0].get('kernel', 'gemm_07_pipelined')}`) over slice depth BK and pipeline stages"
            + (f" at {' x '.join(map(str, shape))}" if shape else "") + ", % of cuBLAS SGEMM in the same run.")
    return head + "\n\n" + to_markdown(shown.drop(columns="default"), {"median ms": MS3, "TFLOP/s": "{:.2f}",
                                                                       "% of cuBLAS": "{:.1f} %"},
                                       right=("BK", "stages", "median ms", "TFLOP/s", "% of cuBLAS"))


# --------------------------------------------------------------------------- bias fusion

def bias_fusion_frame(rec: dict) -> pd.DataFrame:
    """A row per contender: its GEMM, biases, passes after the GEMM, median ms, and against the same GEMM without
    a bias measured in the same run (the first such row of each GEMM is its control; a later one, timed again at
    the end, shows how far the run drifted): "extra us" and "extra %" over it, NaN for the control itself, whose
    "spread %" (p20-p80 over its median) is given instead, and for a row with no GEMM ("none")."""
    base: dict[str, dict] = {}
    for e in rec["entries"]:
        if e["biases"] == 0 and e["gemm"] != "none":
            base.setdefault(e["gemm"], e)
    rows = []
    for e in rec["entries"]:
        ref = base.get(e["gemm"])
        extra = NAN if ref is None or e is ref else e["median_ms"] - ref["median_ms"]
        rows.append({"contender": e["contender"], "GEMM": e["gemm"], "biases": e["biases"],
                     "passes after the GEMM": e["separate_passes"], "median ms": e["median_ms"],
                     "extra us": 1e3 * extra, "extra %": NAN if ref is None else 100 * extra / ref["median_ms"],
                     "spread %": 100 * (ref["p80_ms"] - ref["p20_ms"]) / ref["median_ms"] if e is ref else NAN})
    return pd.DataFrame(rows).set_index("contender")


def render_bias_fusion(rec: dict) -> str:
    shape = rec["entries"][0]["shape"]
    frame = bias_fusion_frame(rec)
    extra = [f"(spread {s:.2f} %)" if s == s else "(a separate pass's floor)" if u != u else f"{u:+.1f} us ({p:+.2f} %)"
             for u, p, s in zip(frame["extra us"], frame["extra %"], frame["spread %"])]
    shown = frame[["GEMM", "biases", "passes after the GEMM", "median ms"]].assign(**{"extra over the GEMM alone": extra})
    return (f"M x N x K = {' x '.join(map(str, shape))}, fp32, TF32 off, one run. Extra: the median over the same "
            "GEMM's median without a bias (p20-p80 spread of that GEMM in brackets).\n\n"
            + to_markdown(shown, {"median ms": MS3}, right=("biases", "passes after the GEMM", "median ms",
                                                            "extra over the GEMM alone")))


# --------------------------------------------------------------------------- the memory-bound kernels

def memory_bound_frame(rec: dict) -> pd.DataFrame:
    """(problem, contender) -> role, median us, GB/s, % of copy, and "faster than": this contender's speedup
    over each row of the same problem it replaces ("replaces"), {contender: ratio}, those of the same run only."""
    rows = []
    for pid in dict.fromkeys(e["problem"] for e in rec["entries"]):
        named = {e["contender"]: e for e in rec["entries"] if e["problem"] == pid}
        for e in named.values():
            rows.append({"problem": pid, "contender": e["contender"], "role": e["role"], "median us": 1e3 * e["median_ms"],
                         "GB/s": e["GBps"], "% of copy": e["pct_of_copy"],
                         "faster than": {r: _ratio(named[r], e) for r in e.get("replaces", ()) if r in named}})
    return pd.DataFrame(rows).set_index(["problem", "contender"])


def render_memory_bound(rec: dict) -> str:
    parts = ["One run. GB/s: the least bytes the work must move (inputs read once, outputs written once) over the "
             "median time; % of copy: that over the GB/s of a copy of a tensor of the same size, timed in the same run."]
    shapes = {e["problem"]: e["shape"] for e in reversed(rec["entries"])}
    formats = {"median us": "{:.1f}", "GB/s": "{:.0f}", "% of copy": "{:.0f} %",
               "faster than": lambda d: "; ".join(f"{v:.2f}x {k}" for k, v in d.items()) or MISSING}
    for pid, frame in _by_problem(memory_bound_frame(rec)).items():
        parts.append(f"**Problem {pid}**, shape {' x '.join(map(str, shapes[pid]))}\n\n" + to_markdown(frame, formats))
    return "\n\n".join(parts)


# --------------------------------------------------------------------------- notebooks 10 and 13

def _best_compiled(at: dict, pid: int, tf32: bool, protocol: str) -> dict | None:
    """The faster torch.compile row of a problem, TF32 setting and protocol; `at` maps (problem,
    contender, tf32, protocol) to entries."""
    compiled = [e for k, e in at.items() if k[0] == pid and k[2] == tf32 and k[3] == protocol
                and k[1].startswith("torch.compile")]
    return min(compiled, key=lambda e: e["median_ms"]) if compiled else None


def _by_key(entries: list[dict]) -> dict:
    return {(e["problem"], e["contender"], e["tf32"], e["protocol"]): e for e in entries}


def solutions_frame(rec: dict) -> pd.DataFrame:
    """(problem, contender, TF32) -> steady and per-call medians, the speedup over eager fp32 (TF32 off, steady),
    and the faster torch.compile mode with the same TF32 setting over this contender in each protocol (NaN where
    the record lacks a row). TF32 off first."""
    at = _by_key(rec["entries"])
    rows = []
    for pid in dict.fromkeys(e["problem"] for e in rec["entries"]):
        contenders = list(dict.fromkeys(e["contender"] for e in rec["entries"] if e["problem"] == pid))
        for tf32 in (False, True):
            for c in contenders:
                steady, call = at.get((pid, c, tf32, "steady")), at.get((pid, c, tf32, "per_call"))
                if steady is None:
                    continue
                rows.append({"problem": pid, "contender": c, "TF32": "on" if tf32 else "off",
                             "steady ms": steady["median_ms"], "per call ms": NAN if call is None else call["median_ms"],
                             "vs eager fp32": _ratio(at.get((pid, "eager", False, "steady")), steady),
                             "vs compile": _ratio(_best_compiled(at, pid, tf32, "steady"), steady),
                             "vs compile, per call": _ratio(_best_compiled(at, pid, tf32, "per_call"), call)})
    return pd.DataFrame(rows).set_index(["problem", "contender", "TF32"])


def solutions_intro(rec: dict) -> str:
    return ("Speedup is against eager PyTorch with TF32 off (KernelBench's setting), in the same protocol. "
            "steady: calls queued back to back; per call: a synchronize after each call (KernelBench's "
            "per-trial protocol), so the CPU's launch cost counts. vs compile: the faster torch.compile "
            "mode with the same TF32 setting over this contender, same protocol.")


def render_solutions(rec: dict) -> str:
    """Per problem: each contender's steady and per-call medians, its speedup over eager fp32 (TF32 off),
    and ours against the faster torch.compile mode with the same TF32 setting."""
    parts = [solutions_intro(rec)]
    formats = {"steady ms": MS3, "per call ms": MS3, "vs eager fp32": X2, "vs compile": X2, "vs compile, per call": X2}
    for pid, frame in _by_problem(solutions_frame(rec)).items():
        parts.append(f"**{_problem_name(pid)}**\n\n" + to_markdown(frame, formats))
    return "\n\n".join(parts)


def steady_frame(rec: dict, tf32_column: bool = True) -> pd.DataFrame:
    """A steady-state side-by-side record (training, autocast): (problem, [TF32,] contender) -> ms, and eager's
    and the faster torch.compile mode's time under the same settings over this contender's."""
    at = _by_key(rec["entries"])
    rows = [{"problem": pid, **({"TF32": "on" if tf32 else "off"} if tf32_column else {}), "contender": c,
             "ms": e["median_ms"], "vs eager": _ratio(at.get((pid, "eager", tf32, protocol)), e),
             "vs compile": _ratio(_best_compiled(at, pid, tf32, protocol), e)} for (pid, c, tf32, protocol), e in at.items()]
    return pd.DataFrame(rows).set_index(["problem", *(["TF32"] if tf32_column else []), "contender"])


def _steady_markdown(frame: pd.DataFrame, intro: str) -> str:
    return intro + "\n\n" + to_markdown(frame, {"ms": MS3, "vs eager": X2, "vs compile": X2})


def training_intro(rec: dict) -> str:
    return ("A training step: forward and backward, the gradients of the input and every parameter, steady state. "
            "vs eager and vs compile: eager's and the faster torch.compile mode's time with the same TF32 setting "
            "over this contender's.")


def render_training(rec: dict) -> str:
    return _steady_markdown(steady_frame(rec), training_intro(rec))


def autocast_intro(rec: dict) -> str:
    dtypes = ", ".join(sorted({e["autocast"] for e in rec["entries"]}))
    return (f"The forward under torch.autocast ({dtypes}), steady state. vs eager and vs compile: eager's and the "
            "faster torch.compile mode's time under the same autocast over this contender's.")


def render_autocast(rec: dict) -> str:
    return _steady_markdown(steady_frame(rec, tf32_column=False), autocast_intro(rec))


# The DataFrame of each kind rendered here (a notebook displays it; render_* writes it in Markdown).
FRAMES = {"ceilings": ceilings_frame, "baselines": baselines_frame, "ladder": ladder_frame,
          "ladder_tuning": ladder_tuning_frame, "bias_fusion": bias_fusion_frame, "fused_activations": memory_bound_frame,
          "groupnorm_fusion": memory_bound_frame, "broadcast_min": memory_bound_frame, "solutions": solutions_frame,
          "training": steady_frame, "autocast": lambda rec: steady_frame(rec, tf32_column=False)}
# The sentence above the table of the kinds whose columns need one (the README's and the notebooks').
INTROS = {"solutions": solutions_intro, "training": training_intro, "autocast": autocast_intro}
