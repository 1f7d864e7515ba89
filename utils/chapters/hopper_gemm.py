"""Notebook 09's own helpers (the Hopper GEMM): the shared-memory budget of the wgmma kernel's ring, read from
kernels/common/gemm_wgmma.cuh, and exercise 1's checker, which asks how deep each rung's ring can be. The
chapter's tables and figures of the tensor-core run are tensor_cores.py's and tensor_core_figures.py's, its
section on whole models epilogue_fusion.py's. Tested in tests/test_tensor_core_chapter.py.

    ring_verdict({"rung 9": 4, "rung 10": 3})
"""
from __future__ import annotations

import re

from utils import build

_HEADER = "common/gemm_wgmma.cuh"
ALIGN_BYTES = 1024  # the kernel aligns its tiles to 1024 bytes (the 128-byte swizzle's atom): up to 1 KB more
BARRIER_BYTES = 2 * 8  # two mbarriers of 8 bytes per stage (full and empty)


def _header() -> str:
    return (build.KERNELS_DIR / _HEADER).read_text()


def _constant(text: str, name: str) -> int:
    match = re.search(rf"constexpr int {name} = (\d+);", text)
    if match is None:
        raise ValueError(f"kernels/{_HEADER} no longer spells `constexpr int {name} = <n>;`")
    return int(match.group(1))


def ring_configs() -> dict:
    """What the wgmma kernel's ring is made of, as kernels/common/gemm_wgmma.cuh spells it: the tile's rows BM,
    the k values per stage BK, the shared memory a block may have, and per rung its tile width BN, ring depth
    and whether a stage holds the small parts too (rung 10's pre-split operands: four boxes, not two)."""
    text = _header()
    limit = re.search(r"static_assert\(SMEM_BYTES <= (\d+) \* 1024", text)
    rungs = {}
    for rung, name in (("rung 9", "Tf32Config"), ("rung 10", "PresplitConfig")):
        m = re.search(rf"using {name}\s*=\s*Config</\*BN\*/\s*(\d+),\s*/\*STAGES\*/\s*(\d+),", text)
        if m is None or limit is None:
            raise ValueError(f"kernels/{_HEADER} no longer spells `using {name} = Config</*BN*/ n, /*STAGES*/ n, ...`")
        rungs[rung] = {"BN": int(m.group(1)), "stages": int(m.group(2)), "presplit": name == "PresplitConfig"}
    return {"BM": _constant(text, "BM"), "BK": _constant(text, "BK"), "limit_bytes": int(limit.group(1)) * 1024,
            "rungs": rungs}


def stage_bytes(rung: str, configs: dict | None = None) -> int:
    """One stage of the ring: an x tile (BM x BK floats) and a w tile (BN x BK), twice for pre-split operands."""
    c = configs or ring_configs()
    r = c["rungs"][rung]
    return (c["BM"] + r["BN"]) * c["BK"] * 4 * (2 if r["presplit"] else 1)


def ring_bytes(rung: str, stages: int, configs: dict | None = None) -> int:
    """The shared memory a block asks for with a ring of `stages`: the stages, their barriers, the alignment."""
    return ALIGN_BYTES + stages * (stage_bytes(rung, configs) + BARRIER_BYTES)


def deepest_ring(rung: str, configs: dict | None = None) -> int:
    """The most stages whose ring fits in the shared memory a block may have."""
    c = configs or ring_configs()
    return (c["limit_bytes"] - ALIGN_BYTES) // (stage_bytes(rung, c) + BARRIER_BYTES)


def ring_verdict(mine) -> str:
    """Exercise 1: the deepest ring each rung can have, {"rung 9": stages, "rung 10": stages}. PASS when both are
    the deepest that fit; otherwise Not yet, saying for each wrong one whether it does not fit or a deeper one
    would, without the number."""
    c = ring_configs()
    mine = mine if isinstance(mine, dict) else {}
    missing = [r for r in c["rungs"] if not isinstance(mine.get(r), int) or mine[r] < 1]
    if missing:
        return f"Not yet: set MY_STAGES[{missing[0]!r}] to a whole number of stages (1 or more)."
    limit_kb = c["limit_bytes"] / 1024
    notes = []
    for rung in c["rungs"]:
        n, best = mine[rung], deepest_ring(rung, c)
        if n > best:
            notes.append(f"{rung}: {n} stages ask for {ring_bytes(rung, n, c) / 1024:.1f} KB, more than the "
                         f"{limit_kb:g} KB a block may have")
        elif n < best:
            notes.append(f"{rung}: {n} stages fit, and so does a deeper ring, which lets the producer run further ahead")
    if notes:
        return "Not yet: " + "; ".join(notes) + "."
    said = "; ".join(f"{rung}: {mine[rung]} stages of {stage_bytes(rung, c) / 1024:g} KB, {ring_bytes(rung, mine[rung], c) / 1024:.1f} "
                     f"KB with barriers and alignment" for rung in c["rungs"])
    used = all(r["stages"] == mine[name] for name, r in c["rungs"].items())
    return (f"PASS: {said}; one more stage would pass {limit_kb:g} KB. "
            + ("The kernel's configurations use exactly these." if used else
               "The kernel's configurations use fewer: kernels/common/gemm_wgmma.cuh says why."))
