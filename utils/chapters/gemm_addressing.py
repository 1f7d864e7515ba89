"""The GEMM ladder chapter's address arithmetic (notebooks 02 and 03), on any machine: one warp's loads in
sectors and cache lines (`warp_step`, `l1_model`), each rung's tile read from its constants (`tile_table`), and
shared-memory bank conflicts at the load width the SASS shows (`load_passes`, `bank_table`, `ws_passes`,
`padding_verdict`). Tested in tests/test_ladder_chapter.py.
"""
from __future__ import annotations

import re
from collections import Counter

import pandas as pd

from utils import build

F32 = 4  # bytes per float


# --------------------------------------------------------------------------- notebook 02: a warp's loads

def warp_step(loads: dict[str, list[int]], fmas: int) -> dict:
    """One step of one warp: for each load instruction (its 32 lanes' byte addresses) the distinct
    32-byte sectors and 128-byte lines it touches, bytes moved and bytes used, displayed as a DataFrame with
    the step's totals, and one line of FLOP per byte; returns the totals (with `fmas`)."""
    from IPython.display import display

    rows, total = {}, Counter()
    for what, addresses in loads.items():
        sectors, lines, used = {a // 32 for a in addresses}, {a // 128 for a in addresses}, F32 * len(set(addresses))
        rows[what] = {"sectors": len(sectors), "lines": len(lines), "bytes moved": 32 * len(sectors), "bytes used": used}
        total.update(sectors=len(sectors), lines=len(lines), moved=32 * len(sectors), used=used)
    rows["one step"] = {"sectors": total["sectors"], "lines": total["lines"], "bytes moved": total["moved"],
                        "bytes used": total["used"]}
    display(pd.DataFrame.from_dict(rows, orient="index").rename_axis("load (one instruction, 32 lanes)"))
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


def tile_table(names: list[str]) -> pd.DataFrame:
    """tile_facts for each rung (the index): the numbers the rungs trade, read from their constants."""
    rows = {}
    for name in names:
        f = tile_facts(name)
        rows[name] = {"tile": f["tile"], "BK": f["BK"], "threads": f["threads"], "outputs/thread": f["per thread"],
                      "FLOP/B global": round(f["FLOP/B global"]),
                      "shared floats/FMA": "-" if f["floats/FMA shared"] is None else f"{f['floats/FMA shared']:.3f}",
                      "stages": f["stages"]}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("rung")


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


def bank_table(accesses: dict[str, tuple[list[int], int]]) -> pd.DataFrame:
    """Each warp-wide shared access {label: (first word of each lane, floats per lane)} (the index): its
    width, the passes it takes (load_passes; a store is served the same way), and the passes the same width
    takes without a conflict (one per phase)."""
    rows = {label: {"bytes/lane": F32 * width, "passes": sum(load_passes(words, width)), "conflict-free": width}
            for label, (words, width) in accesses.items()}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("warp-wide shared access (one instruction)")


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
