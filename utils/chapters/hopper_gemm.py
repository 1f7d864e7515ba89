"""Notebook 09's own helpers (the Hopper GEMM): the shared-memory budget of the wgmma kernel's ring, read from
kernels/common/gemm_wgmma.cuh, exercise 1's checker, which asks how deep each rung's ring can be, and exercise 2's, the GroupNorm epilogue the
reader writes on the given wgmma main loop (kernels/exercises/gemm_wgmma_lanes.cuh). The
chapter's tables and figures of the tensor-core run are tensor_cores.py's and tensor_core_figures.py's, its
section on whole models epilogue_fusion.py's. Tested in tests/test_tensor_core_chapter.py.

    ring_verdict({"rung 9": 4, "rung 10": 3}, {"rung 9": 193.1, "rung 10": 193.0})
    epilogue_verdict(module.linear_groupnorm, "cuda", source)   # exercise 2, the GroupNorm epilogue
"""
from __future__ import annotations

import math
import re

import torch
import torch.nn.functional as F
from torch import Tensor

from utils import build, profile

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


def ring_verdict(mine, kb=None) -> str:
    """Exercise 1: the deepest ring each rung can have, {"rung 9": stages, "rung 10": stages}, with the reader's
    arithmetic: kb gives, per rung, the shared memory in KB that ring asks for (its stages, their barriers and
    the alignment), within 0.5 KB of ring_bytes. PASS when both hold for both rungs. A wrong depth hears only
    that it is not the deepest ring that fits, never whether it is too deep or too shallow, so the messages
    cannot be bisected; the KB must come from the reader's own sum."""
    c = ring_configs()
    mine = mine if isinstance(mine, dict) else {}
    kb = kb if isinstance(kb, dict) else {}
    missing = [r for r in c["rungs"] if not isinstance(mine.get(r), int) or mine[r] < 1]
    if missing:
        return f"Not yet: set MY_STAGES[{missing[0]!r}] to a whole number of stages (1 or more)."
    unsummed = [r for r in c["rungs"] if not isinstance(kb.get(r), (int, float))]
    if unsummed:
        return (f"Not yet: set MY_RING_KB[{unsummed[0]!r}] to the shared memory, in KB, that your ring asks for: "
                "its stages, two 8-byte barriers per stage and 1 KB for the alignment.")
    notes = []
    for rung in c["rungs"]:
        if abs(kb[rung] - ring_bytes(rung, mine[rung], c) / 1024) > 0.5:
            notes.append(f"{rung}: {kb[rung]:g} KB is not what {mine[rung]} stages of this rung ask for")
        elif mine[rung] != deepest_ring(rung, c):
            notes.append(f"{rung}: {mine[rung]} stages is not the deepest ring that fits in what a block may have")
    if notes:
        return "Not yet: " + "; ".join(notes) + "."
    limit_kb = c["limit_bytes"] / 1024
    said = "; ".join(f"{rung}: {mine[rung]} stages of {stage_bytes(rung, c) / 1024:g} KB, {ring_bytes(rung, mine[rung], c) / 1024:.1f} "
                     f"KB with barriers and alignment" for rung in c["rungs"])
    used = all(r["stages"] == mine[name] for name, r in c["rungs"].items())
    return (f"PASS: {said}; one more stage would pass {limit_kb:g} KB. "
            + ("The kernel's configurations use exactly these." if used else
               "The kernel's configurations use fewer: kernels/common/gemm_wgmma.cuh says why."))


# --------------------------------------------------------------------------- exercise 2: the GroupNorm epilogue

# (M, K, N, groups, eps): odd M, K a multiple of 4 (TMA), N past a whole tile or short of one, group widths 8, 16
# and 32, and an eps large against the groups' variance, so that where eps goes shows.
EPILOGUE_TRIALS = ((77, 132, 272, 34, 1e-5), (200, 260, 512, 32, 0.5), (129, 64, 96, 3, 1e-3))
EPILOGUE_TIER = 1e-2  # atol = rtol: the TF32 tier (the given main loop is rung 9's, TF32)
# What a reader's epilogue source must not lean on: the production epilogue or PyTorch's own GroupNorm.
EPILOGUE_FORBIDDEN = ("gemm_epilogue_groupnorm.cuh", "GroupNormEpilogue<", "team_welford", "WelfordStats",
                      "group_norm", "at::", "torch::empty", "torch::zeros")


def epilogue_inputs(trial, device: str = "cpu", seed: int = 0) -> tuple:
    """One trial's (x, w, bias, gamma, beta, groups, eps): x uniform [0, 1) as KernelBench's inputs, w and bias as
    nn.Linear initialises them, gamma and beta random (1 and 0 would hide a missing scale or shift)."""
    M, K, N, groups, eps = trial
    g = torch.Generator().manual_seed(seed)
    bound = 1 / math.sqrt(K)
    x = torch.rand(M, K, generator=g)
    w = (torch.rand(N, K, generator=g) * 2 - 1) * bound
    bias = (torch.rand(N, generator=g) * 2 - 1) * bound
    gamma = torch.randn(N, generator=g)
    beta = torch.randn(N, generator=g)
    return tuple(t.to(device) for t in (x, w, bias, gamma, beta)) + (groups, eps)


def epilogue_reference(x, w, bias, gamma, beta, groups, eps) -> Tensor:
    """PyTorch's GroupNorm of x @ w.T + bias, in float64."""
    d = lambda t: t.double()  # noqa: E731
    return F.group_norm(d(x) @ d(w).T + d(bias), groups, d(gamma), d(beta), eps)


def epilogue_static(source: str) -> list[str]:
    """What the exercise's source must be, read without compiling it: Hopper's arch mark, the epilogue struct and
    the launcher, and none of the shortcuts of EPILOGUE_FORBIDDEN."""
    problems = []
    if not re.search(r"^//\s*@arch:\s*9\.0a\s*$", source, re.MULTILINE):
        problems.append("the source must keep its `// @arch: 9.0a` line (wgmma is Hopper's)")
    if "struct GroupNormEpilogue" not in source or "linear_groupnorm" not in source:
        problems.append("keep `struct GroupNormEpilogue` and the launcher `linear_groupnorm`")
    problems += [f"the epilogue is yours to write: no `{word}`" for word in EPILOGUE_FORBIDDEN if word in source]
    return problems


def epilogue_verdict(linear_groupnorm, device: str = "cuda", source: str | None = None) -> str:
    """Exercise 2: linear_groupnorm(x, w, bias, gamma, beta, groups, eps) against PyTorch's GroupNorm of
    x @ w.T + bias in float64, at the TF32 tier, at each of EPILOGUE_TRIALS. PASS when every trial is inside the
    tier; otherwise Not yet with the first trial that is not and by how much."""
    problems = epilogue_static(source) if source is not None else []
    if problems:
        return "Not yet: " + "; ".join(problems) + "."
    worst = []
    for trial in EPILOGUE_TRIALS:
        args = epilogue_inputs(trial, device)
        ref = epilogue_reference(*args)
        out = linear_groupnorm(*args)
        M, K, N, groups, eps = trial
        shape = f"M={M}, K={K}, N={N}, groups={groups} (width {N // groups}), eps={eps:g}"
        if tuple(out.shape) != tuple(ref.shape) or out.dtype != torch.float32:
            return f"Not yet: at {shape} the output is {tuple(out.shape)} {out.dtype}, not {tuple(ref.shape)} float32."
        if not torch.isfinite(out).all():
            return f"Not yet: at {shape} the output has NaN or inf."
        err = (out.double().cpu() - ref.cpu()).abs()
        excess = (err / (EPILOGUE_TIER + EPILOGUE_TIER * ref.cpu().abs())).max().item()
        if excess > 1:
            return (f"Not yet: at {shape} the largest error is {err.max().item():.2e}, {excess:.1f}x the TF32 tier's "
                    f"tolerance, against PyTorch's GroupNorm of x @ w.T + bias.")
        worst.append(excess)
    return (f"PASS: GroupNorm in the epilogue at {len(EPILOGUE_TRIALS)} shapes, worst at {max(worst):.2f} of the TF32 "
            "tier's tolerance.")


# --------------------------------------------------------------------------- section 5 and the debrief: prose from records

def wave_findings(seen: list[int], predicted: list[int], rows: list[dict], sms: int, tile_n: int) -> str:
    """Markdown bullets on the wave sweep, every number from its arguments: where the tile arithmetic puts the
    waves' boundaries (`predicted`, the first N of each new wave), where the measured time of one contender
    (`rows`: its sweep entries, by N) rises in a step (`seen`), how the two agree, and what each step costs in
    TFLOP/s."""
    by_n = {r["N"]: r for r in rows}
    ns = sorted(by_n)
    lines = [f"- The tile arithmetic ({sms} SMs, tiles {tile_n} columns wide) starts a new wave at N = "
             f"{', '.join(map(str, predicted)) or 'none in this range'}."]
    if not seen:
        lines.append("- The measured time rises in no clear step between neighbouring sizes.")
        return "\n".join(lines)
    lines.append(f"- The measured time rises in a step at N = {', '.join(map(str, seen))}.")
    hit = [n for n in predicted if n in seen]
    lines.append(f"- {len(hit)} of the {len(predicted)} predicted boundaries are among the measured steps"
                 + (f"; measured steps the arithmetic does not predict: {', '.join(map(str, sorted(set(seen) - set(predicted))))}"
                    if set(seen) - set(predicted) else "")
                 + (f"; predicted boundaries without a measured step: {', '.join(map(str, sorted(set(predicted) - set(seen))))}"
                    if set(predicted) - set(seen) else "") + ".")
    for n in seen:
        before = ns[ns.index(n) - 1]
        a, b = by_n[before], by_n[n]
        lines.append(f"- At N = {n}: {a['median_ms']:.3f} ms at N = {before}, {b['median_ms']:.3f} ms one tile wider "
                     f"({b['median_ms'] / a['median_ms']:.2f}x the time for {n / before:.2f}x the work); "
                     f"{a['tflops']:.0f} then {b['tflops']:.0f} TFLOP/s.")
    return "\n".join(lines)


def _metric(entries: list[dict], *words: str) -> dict | None:
    return next((e for e in entries if all(w in str(e["metric"]).lower() for w in words)), None)


def profile_findings(entries: list[dict]) -> str:
    """Markdown bullets from Nsight Compute's entries of one target ({kernel, metric, value, unit}): which of DRAM
    and the tensor pipe is the busier, the achieved occupancy against what one 384-thread block per SM allows,
    and the bank conflicts. Only what the entries hold is said, of the kernel the time goes to (profile.main_kernel:
    the GEMM, not the pass that splits the weight before it)."""
    entries = profile.main_kernel(entries)
    dram, tensor = _metric(entries, "dram"), _metric(entries, "tensor")
    occupancy, bank = _metric(entries, "occupancy"), _metric(entries, "bank")
    lines = []
    if dram and tensor:
        busier, other = (tensor, dram) if tensor["value"] >= dram["value"] else (dram, tensor)
        lines.append(f"- {busier['metric']} at {busier['value']:.1f}{busier['unit']} against {other['metric']} at "
                     f"{other['value']:.1f}{other['unit']}: "
                     + ("the tensor pipe is the busier, as a GEMM with K = 8192 should be: its bytes are few for its FLOPs."
                        if busier is tensor else "memory is the busier resource, which a GEMM with K = 8192 should not be."))
    if occupancy:
        allowed = 100 * 384 / 2048  # one block of 384 threads per SM, of the 2048 threads an SM can hold
        lines.append(f"- {occupancy['metric']}: {occupancy['value']:.1f}{occupancy['unit']}, against {allowed:.2f}% that "
                     "one block of 384 threads per SM allows (its shared memory and registers admit no second block).")
    if bank:
        unit = f" {bank['unit']}" if bank["unit"] else ""
        loads = _metric(entries, "wavefronts", "ld")
        share = (f", {100 * bank['value'] / loads['value']:.0f}% of its {loads['value']:,.0f} shared-load wavefronts"
                 if loads and loads["value"] and "_ld" in str(bank["metric"]) else "")
        lines.append(f"- {bank['metric']}: {bank['value']:,.0f}{unit}"
                     + (": none, the 128-byte swizzle and the staged parameters read without conflicts." if bank["value"] == 0
                        else f"{share}."))
    return "\n".join(lines) or "- The record holds none of the metrics this debrief reads."
