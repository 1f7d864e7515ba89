"""Tables of the record kinds that the library's measurements write (utils.results' KINDS): ceilings,
baselines, the GEMM ladder and its tuning, bias fusion, the memory-bound kernels, and notebooks 10 and 11's
solutions, training step and autocast. Tables are pandas DataFrames of the record's values (`*_frame`: what a
notebook displays, as HTML in JupyterLab, and what tests check); `render_*` turns a record into Markdown through
those frames and `to_markdown` (DataFrame.to_markdown): utils.report.readme puts them in the README, and the
notebooks show the same tables (utils.chapters.session.record_markdown).
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


def _speedup(eager: dict | None, e: dict) -> str:
    return "–" if eager is None else f"{eager['median_ms'] / e['median_ms']:.2f}x"


def render_ceilings(rec: dict) -> str:
    e = rec["entries"][0]
    return "\n".join([
        "| copy bandwidth | FP32 SGEMM (cuBLAS) | TF32 GEMM (cuBLAS) |",
        "|---:|---:|---:|",
        f"| {e['copy_GBps']:.0f} GB/s | {e['fp32_tflops']:.1f} TFLOP/s | {e['tf32_tflops']:.1f} TFLOP/s |",
    ])


def render_baselines(rec: dict) -> str:

    by_problem: dict[int, list[dict]] = {}
    for e in rec["entries"]:
        by_problem.setdefault(e["problem"], []).append(e)
    parts = ["Speedup is against eager PyTorch with TF32 off (KernelBench's reference setting). "
             "% of floor = floor time / median time: 100 % would run at the floor "
             "(memory, or FP32 / TF32 math as the TF32 setting allows)."]
    for pid, entries in by_problem.items():
        eager = next((e for e in entries if e["contender"] == "eager" and not e["tf32"]), None)
        order = list(dict.fromkeys(e["contender"] for e in entries))  # first-appearance order
        entries = sorted(entries, key=lambda e: (order.index(e["contender"]), e["tf32"]))
        name = PROBLEMS[pid].kernelbench_file.removesuffix(".py") if pid in PROBLEMS else f"problem {pid}"
        parts.append("\n".join([
            f"**{name}**",
            "",
            "| contender | TF32 | median ms | speedup vs eager | % of floor |",
            "|---|---|---:|---:|---:|",
            *(f"| {e['contender']} | {'on' if e['tf32'] else 'off'} | {e['median_ms']:.3f} | "
              f"{_speedup(eager, e)} | {e['pct_of_floor']:.0f} % |"
              for e in entries),
        ]))
    return "\n\n".join(parts)


def render_ladder(rec: dict) -> str:
    shape = rec["entries"][0].get("shape")
    lines = [f"M x N x K = {' x '.join(map(str, shape))}, fp32, TF32 off." if shape else "",
             "", "| rung | median ms | TFLOP/s | % of cuBLAS |", "|---|---:|---:|---:|"]
    cublas = next((e for e in rec["entries"] if e["contender"] == "cuBLAS"), None)
    for e in rec["entries"]:
        pct = f"{100 * cublas['median_ms'] / e['median_ms']:.1f} %" if cublas else "–"
        lines.append(f"| {e['contender']} | {e['median_ms']:.3f} | {e['tflops']:.2f} | {pct} |")
    return "\n".join(lines).lstrip("\n")


def render_ladder_tuning(rec: dict) -> str:
    shape = rec["entries"][0].get("shape")
    lines = [f"Rung 7 (`{rec['entries'][0].get('kernel', 'gemm_07_pipelined')}`) over slice depth BK and pipeline stages"
             + (f" at {' x '.join(map(str, shape))}" if shape else "") + ", % of cuBLAS SGEMM in the same run.",
             "", "| BK | stages | median ms | TFLOP/s | % of cuBLAS |", "|---:|---:|---:|---:|---:|"]
    for e in rec["entries"]:
        if e.get("bk") is not None:
            mark = " (default)" if e.get("default") else ""
            lines.append(f"| {e['bk']} | {e['stages']}{mark} | {e['median_ms']:.3f} | {e['tflops']:.2f} | "
                         f"{e['pct_of_cublas']:.1f} % |")
    return "\n".join(lines)


def render_bias_fusion(rec: dict) -> str:
    entries = rec["entries"]
    shape = entries[0]["shape"]
    # Each contender against the same GEMM without a bias, measured in the same run: the first such row
    # of each GEMM is its control (a later one, timed again at the end, shows how far the run drifted).
    base: dict[str, dict] = {}
    for e in entries:
        if e["biases"] == 0 and e["gemm"] != "none":
            base.setdefault(e["gemm"], e)
    lines = [f"M x N x K = {' x '.join(map(str, shape))}, fp32, TF32 off, one run. Extra: the median over "
             "the same GEMM's median without a bias (p20-p80 spread of that GEMM in brackets).",
             "", "| contender | GEMM | biases | passes after the GEMM | median ms | extra over the GEMM alone |",
             "|---|---|---:|---:|---:|---:|"]
    for e in entries:
        ref = base.get(e["gemm"])
        if ref is None:
            extra = "(a separate pass's floor)"
        elif e is ref:
            extra = f"(spread {100 * (ref['p80_ms'] - ref['p20_ms']) / ref['median_ms']:.2f} %)"
        else:
            d = e["median_ms"] - ref["median_ms"]
            extra = f"{1e3 * d:+.1f} us ({100 * d / ref['median_ms']:+.2f} %)"
        lines.append(f"| {e['contender']} | {e['gemm']} | {e['biases']} | {e['separate_passes']} | "
                     f"{e['median_ms']:.3f} | {extra} |")
    return "\n".join(lines)


def render_memory_bound(rec: dict) -> str:
    by_problem: dict[int, list[dict]] = {}
    for e in rec["entries"]:
        by_problem.setdefault(e["problem"], []).append(e)
    parts = ["One run. GB/s: the least bytes the work must move (inputs read once, outputs written once) over the "
             "median time; % of copy: that over the GB/s of a copy of a tensor of the same size, timed in the same run."]
    for pid, entries in by_problem.items():
        named = {e["contender"]: e for e in entries}
        lines = [f"**Problem {pid}**, shape {' x '.join(map(str, entries[0]['shape']))}", "",
                 "| contender | role | median us | GB/s | % of copy | faster than |", "|---|---|---:|---:|---:|---|"]
        for e in entries:
            against = [f"{named[r]['median_ms'] / e['median_ms']:.2f}x {r}" for r in e.get("replaces", ()) if r in named]
            lines.append(f"| {e['contender']} | {e['role']} | {1e3 * e['median_ms']:.1f} | {e['GBps']:.0f} | "
                         f"{e['pct_of_copy']:.0f} % | {'; '.join(against) or '–'} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _best_compiled(at: dict, pid: int, tf32: bool, protocol: str) -> dict | None:
    """The faster torch.compile row of a problem, TF32 setting and protocol; `at` maps (problem,
    contender, tf32, protocol) to entries."""
    compiled = [e for k, e in at.items() if k[0] == pid and k[2] == tf32 and k[3] == protocol
                and k[1].startswith("torch.compile")]
    return min(compiled, key=lambda e: e["median_ms"]) if compiled else None


def _by_key(entries: list[dict]) -> dict:
    return {(e["problem"], e["contender"], e["tf32"], e["protocol"]): e for e in entries}


def render_solutions(rec: dict) -> str:
    """Per problem: each contender's steady and per-call medians, its speedup over eager fp32 (TF32 off),
    and ours against the faster torch.compile mode with the same TF32 setting."""

    entries = rec["entries"]
    at = _by_key(entries)
    parts = ["Speedup is against eager PyTorch with TF32 off (KernelBench's setting), in the same protocol. "
             "steady: calls queued back to back; per call: a synchronize after each call (KernelBench's "
             "per-trial protocol), so the CPU's launch cost counts. vs compile: the faster torch.compile "
             "mode with the same TF32 setting over this contender, same protocol."]
    for pid in dict.fromkeys(e["problem"] for e in entries):
        name = PROBLEMS[pid].kernelbench_file.removesuffix(".py") if pid in PROBLEMS else f"problem {pid}"
        lines = [f"**{name}**", "", "| contender | TF32 | steady ms | per call ms | vs eager fp32 | "
                 "vs compile | vs compile, per call |", "|---|---|---:|---:|---:|---:|---:|"]
        contenders = list(dict.fromkeys(e["contender"] for e in entries if e["problem"] == pid))
        for tf32 in (False, True):
            for c in contenders:
                steady, call = at.get((pid, c, tf32, "steady")), at.get((pid, c, tf32, "per_call"))
                if steady is None:
                    continue
                eager = at.get((pid, "eager", False, "steady"))
                cells = [f"{steady['median_ms']:.3f}", f"{call['median_ms']:.3f}" if call else "–",
                         _speedup(eager, steady)]
                for protocol, mine in (("steady", steady), ("per_call", call)):
                    best = _best_compiled(at, pid, tf32, protocol) if mine else None
                    cells.append(_speedup(best, mine) if best else "–")
                lines.append(f"| {c} | {'on' if tf32 else 'off'} | " + " | ".join(cells) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _steady_rows(rec: dict, intro: str, tf32_column: bool) -> str:
    """One table of a steady-state side-by-side record: per problem (and TF32 setting), each contender's
    median against eager and the faster torch.compile mode under the same settings."""
    at = _by_key(rec["entries"])
    tf32_head = ("| TF32 ", "|---") if tf32_column else ("", "")
    lines = [intro, "", f"| problem {tf32_head[0]}| contender | ms | vs eager | vs compile |",
             f"|---{tf32_head[1]}|---|---:|---:|---:|"]
    for (pid, c, tf32, protocol), e in at.items():
        best = _best_compiled(at, pid, tf32, protocol)
        tf32_cell = f"| {'on' if tf32 else 'off'} " if tf32_column else ""
        lines.append(f"| {pid} {tf32_cell}| {c} | {e['median_ms']:.3f} | "
                     f"{_speedup(at.get((pid, 'eager', tf32, protocol)), e)} | {_speedup(best, e) if best else '–'} |")
    return "\n".join(lines)


def render_training(rec: dict) -> str:
    return _steady_rows(rec, "A training step: forward and backward, the gradients of the input and every "
                               "parameter, steady state. vs eager and vs compile: eager's and the faster "
                               "torch.compile mode's time with the same TF32 setting over this contender's.", True)


def render_autocast(rec: dict) -> str:
    dtypes = ", ".join(sorted({e["autocast"] for e in rec["entries"]}))
    return _steady_rows(rec, f"The forward under torch.autocast ({dtypes}), steady state. vs eager and vs "
                               "compile: eager's and the faster torch.compile mode's time under the same autocast "
                               "over this contender's.", False)
