"""Notebook 09, section 4: whole models in the GEMM's epilogue, and the chapter's scoreboard.

kernels/fused_gemm_groupnorm.cu runs each model in one GEMM kernel: rung 10's (strict) or rung 9's (TF32)
wgmma kernel with the rest of the model in its epilogue (kernels/common/gemm_epilogue_groupnorm.cuh).
What the section computes on any machine (the fit, the quad layout, the bytes), its one GPU run
(measure_fusion, kind "whole_model_fusion"), and what the chapter draws and computes from that record (the plot,
the predictions it missed, the stores 75 saves, the scoreboard); the record's tables are
utils/report/tensor_cores.py's. Tested in tests/test_tensor_core_chapter.py.

    entries = measure_fusion(reps=50)                # on an H100: fused against unfused, eager, torch.compile
"""
from __future__ import annotations

import re
from typing import Callable

import matplotlib
import pandas as pd
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter
from torch import Tensor

from utils import bench, build, check, env, ops, plots, precision
from utils.chapters import session as chapter
from utils.chapters.tensor_cores import PIDS, outside
from utils.problems import get_problem
from utils.report.tensor_cores import (ATOMIC, COMPILE, FUSED, FUSED_KERNEL, GEMM_ALONE, TIERS, UNFUSED, fusion_at,
                                       fusion_groups, fusion_predictions, tier_name)

# problem -> (the tail op of utils.ops that runs after workbook::linear, the whole-model op of ops.WHOLE_MODELS)
FUSION_OPS = {94: ("bias_hardtanh_mish_group_norm", "linear_bias_hardtanh_mish_group_norm"),
              75: ("group_norm_min_bias", "linear_group_norm_min_bias"),
              37: ("swish_bias_group_norm", "linear_swish_bias_group_norm"),
              62: ("group_norm_leaky_relu_x2", "linear_group_norm_leaky_relu_x2")}
_WGMMA_HEADER = "common/gemm_wgmma.cuh"


def tile_widths() -> dict[str, int]:
    """The block tile's width BN of the fused kernel at each tier, read from kernels/common/gemm_wgmma.cuh:
    {"strict": rung 10's PresplitConfig's BN, "tf32": rung 9's Tf32Config's BN}, each as first spelled
    there (the default build's; a -D flag may pick a later spelling)."""
    text = (build.KERNELS_DIR / _WGMMA_HEADER).read_text()
    found = {tier: re.search(rf"using {name}\s*=\s*Config</\*BN\*/\s*(\d+)", text)
             for tier, name in (("strict", "PresplitConfig"), ("tf32", "Tf32Config"))}
    if not all(found.values()):
        raise ValueError(f"kernels/{_WGMMA_HEADER} no longer spells `using PresplitConfig/Tf32Config = Config</*BN*/ n`")
    return {tier: int(m.group(1)) for tier, m in found.items()}


def group_widths(scale: str = "full") -> dict[int, int]:
    """Each problem's GroupNorm group width D = C / G (channels per group), from its definition."""
    return {pid: get_problem(pid).dims(scale).channels_per_group for pid in PIDS}


def fit_table(scale: str = "full") -> pd.DataFrame:
    """Per problem (the index), C, G and D = C / G, and at each tier's tile width whether D divides it (no
    group straddles two blocks) and the groups per tile row, and the values of a group each of a quad's 4
    lanes holds per row (D / 4)."""
    widths = tile_widths()
    rows = {}
    for pid, D in group_widths(scale).items():
        d = get_problem(pid).dims(scale)
        rows[pid] = {"C": d.out_features, "G": d.groups, "D = C/G": D,
                     **{f"BN = {bn} ({tier})": f"fits, {bn // D} groups" if bn % D == 0 else "straddles"
                        for tier, bn in widths.items()},
                     "values per lane": D // 4}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("problem")


def quad_layout(cols: int, rows: int = 16) -> dict[tuple[int, int], tuple[int, int]]:
    """Where a warp's accumulators sit after the wgmma (kernels/common/gemm_wgmma.cuh, the end of the kernel):
    {(row, col): (lane, register)} for the warp's 16 rows and the first `cols` columns of the tile (a multiple
    of 8). Lane 4g + t holds rows g and g + 8, columns 8j + 2t and 8j + 2t + 1 of every n8 block j; its
    register 4j + 2h + e is (g + 8h, 8j + 2t + e)."""
    if cols % 8 or rows != 16:
        raise ValueError(f"cols is a multiple of 8 and a warp has 16 rows, got cols={cols}, rows={rows}")
    layout = {}
    for lane in range(32):
        g, t = divmod(lane, 4)
        for j in range(cols // 8):
            for h in range(2):
                for e in range(2):
                    layout[(g + 8 * h, 8 * j + 2 * t + e)] = (lane, 4 * j + 2 * h + e)
    return layout


def epilogue_figure(pid: int = 75, tier: str = "strict") -> Figure:
    """A drawn diagram of why GroupNorm fits in the epilogue, for one problem's group width D at one tier's
    tile width BN: left, a block's tile (128 rows, 8 consumer warps of 16 rows) cut into groups of D columns,
    no group crossing the tile's edge; right, one warp's 16 rows by two groups, each value labelled with the
    lane holding it (quad_layout): a row's D values of a group sit on the 4 lanes of one quad."""
    D, BN = group_widths()[pid], tile_widths()[tier]
    cols = 2 * D
    layout = quad_layout(cols)
    cmap = matplotlib.colormaps["tab10"]
    with matplotlib.rc_context(plots.STYLE):
        fig = Figure(figsize=(12.0, 4.8))
        ax = fig.add_subplot(1, 3, 1)
        for warp in range(8):  # 2 consumer warp groups x 4 warps, 16 rows each
            ax.add_patch(Rectangle((0, 16 * warp), BN, 16, facecolor="#c6dbef" if warp % 2 else "#eff3ff",
                                   edgecolor="white"))
            ax.text(BN + 2, 16 * warp + 8, f"warp {warp}", va="center", fontsize=7)
        for c in range(0, BN + 1, D):
            ax.plot([c, c], [0, 128], color="#e6550d", lw=0.6 if 0 < c < BN else 2.0)
        ax.add_patch(Rectangle((0, 0), cols, 16, fill=False, edgecolor="black", lw=1.5))
        ax.set_xlim(0, BN * 1.25)
        ax.set_ylim(128, 0)
        ax.set_xticks(range(0, BN + 1, max(D, BN // 8)))
        ax.set_xlabel(f"BN = {BN} columns: {BN // D} groups of D = {D}\nper row (orange); none crosses the tile's edge",
                      fontsize=8)
        ax.set_ylabel("BM = 128 rows: 2 consumer warp groups x 4 warps", fontsize=8)
        ax.set_title(f"a block's tile ({tier} tier); black: drawn at the right", fontsize=9)
        ax.grid(False)
        bx = fig.add_subplot(1, 3, (2, 3))
        for (row, col), (lane, reg) in layout.items():
            g, t = divmod(lane, 4)
            bx.add_patch(Rectangle((col, row), 1, 1, facecolor=cmap(t), alpha=0.25 + 0.06 * (g % 2), edgecolor="white"))
            if cols <= 32:  # wider, the labels would not fit: the colours still say which lane of the quad
                bx.text(col + 0.5, row + 0.5, str(lane), ha="center", va="center", fontsize=6)
        for c in range(0, cols + 1, D):
            bx.plot([c, c], [0, 16], color="#e6550d", lw=2.0)
        bx.add_patch(Rectangle((0, 0), D, 1, fill=False, edgecolor="black", lw=1.8))
        bx.set_xlim(0, cols)
        bx.set_ylim(16, 0)
        bx.set_xticks(range(0, cols + 1, 8))
        bx.set_yticks([r + 0.5 for r in range(16)], range(16), fontsize=6)
        bx.set_ylabel("row of the warp: lane 4g + t holds rows g and g + 8", fontsize=8)
        bx.grid(False)
        bx.set_xlabel(f"column of the tile. Outlined: one row of one group, on lanes 0-3 (a quad), {D // 4} values each:\n"
                      "a Welford summary per lane, then two shuffles (xor 1, xor 2) merge the quad's four", fontsize=8)
        bx.set_title("one warp, 16 rows x 2 groups, each value labelled with the lane that holds it; "
                     "colour: t = lane % 4", fontsize=9)
        fig.suptitle(f"GroupNorm in the GEMM's epilogue: problem {pid}'s groups of {D} inside a tile {BN} wide (a diagram)")
    return plots.finish(fig)


def linear_and_rest(pid: int, model: torch.nn.Module) -> tuple[torch.nn.Linear, list]:
    """(the reference model's nn.Linear, the arguments that follow x, weight, linear_bias in its whole-model op
    and, after the GEMM's output, in its tail op): the model's own parameters, not copies."""
    if pid == 94:
        gn = model.groupnorm
        return model.gemm, [model.bias, model.hardtanh.min_val, model.hardtanh.max_val, gn.num_groups, gn.weight,
                            gn.bias, gn.eps]
    if pid == 37:
        gn = model.group_norm
        return model.matmul, [model.bias, gn.num_groups, gn.weight, gn.bias, gn.eps]
    if pid == 62:
        gn = model.gn
        return model.fc, [gn.num_groups, gn.weight, gn.bias, gn.eps, model.leaky_relu.negative_slope]
    if pid == 75:
        gn = model.group_norm
        return model.gemm, [gn.num_groups, gn.weight, gn.bias, gn.eps, model.bias]
    raise ValueError(f"no whole-model op for problem {pid} (the four are {PIDS})")


def fusion_bytes(pid: int, scale: str = "full", bn: int | None = None) -> dict:
    """What fusion saves in memory traffic for one problem, counting the (M, C) tensors only (reading x and w
    is the same either way). Unfused: the GEMM writes its output, the tail reads it back and writes the
    model's output (75's (1, C, M, 1) broadcast is M x C floats too): 3 x M x C x 4 bytes. Fused: the output,
    written once; for 75 also its row-minimum partials, one float per (row, tile of bn columns), written and
    read (bn: the strict tier's tile width by default). Also the GEMM's FLOPs, 2 M C K."""
    d = get_problem(pid).dims(scale)
    M, C, K = d.batch, d.out_features, d.in_features
    out = M * C * 4
    partials = 2 * -(-C // (bn or tile_widths()["strict"])) * M * 4 if pid == 75 else 0
    return {"problem": pid, "M": M, "C": C, "K": K, "gemm_output_bytes": out, "unfused_bytes": 3 * out,
            "fused_bytes": out + partials, "saved_bytes": 2 * out - partials, "gemm_flops": 2 * M * C * K}


def fusion_bytes_table(ceilings: dict | None = None, scale: str = "full") -> pd.DataFrame:
    """Per problem (the index), the MB of (M, C) tensors moved unfused and fused (fusion_bytes) and what is
    saved; with a "ceilings" record (plots.provenance(ceilings) names it), that saving in ms at its measured
    copy bandwidth beside the GEMM's floor at its measured TF32 rate (the strict tier's 3xTF32 does three times
    that work), and their ratio in %."""
    entry = (ceilings or {}).get("entries", [{}])[0]
    rows = {}
    for pid in PIDS:
        b = fusion_bytes(pid, scale)
        row = {"M x C, K": f"{b['M']} x {b['C']}, {b['K']}", "unfused: MB moved": round(b["unfused_bytes"] / 1e6, 1),
               "fused: MB moved": round(b["fused_bytes"] / 1e6, 1), "saved MB": round(b["saved_bytes"] / 1e6, 1)}
        if entry:
            saved_ms = b["saved_bytes"] / (entry["copy_GBps"] * 1e9) * 1e3
            floor_ms = b["gemm_flops"] / (entry["tf32_tflops"] * 1e12) * 1e3
            row |= {"saved, ms at the copy bandwidth": round(saved_ms, 3), "the GEMM's TF32 floor, ms": round(floor_ms, 3),
                    "saved / that floor, %": round(100 * saved_ms / floor_ms)}
        rows[pid] = row
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("problem")


def fusion_runs_here() -> bool:
    """Whether this machine can run measure_fusion: a GPU that builds and runs the fused kernel (sm_90)."""

    return (env.mode() == "gpu" and build.builds_here(FUSED_KERNEL)
            and torch.cuda.get_device_capability() == (9, 0))


def fusion_contenders(pid: int, model: torch.nn.Module, x: Tensor, *, tf32: bool, compiled, kernels: dict
                      ) -> dict[str, tuple[Callable[[], Tensor], Callable[[], Tensor]]]:
    """{name: (the contender, what it is checked against)} for one problem at one tier: eager, torch.compile
    (`compiled`, the model compiled), unfused (workbook::linear, then the tail op), fused (the whole-model op),
    for 75 the atomic fold, and the fused kernel's GEMM alone (rung 10's `linear` at the strict tier, rung 9's
    `gemm` at the TF32 tier: its epilogue a plain store), checked against eager's GEMM. `kernels`: the loaded
    modules by name (fused_gemm_groupnorm, gemm_09_wgmma_tf32)."""

    linear, rest = linear_and_rest(pid, model)
    w, lb = linear.weight, linear.bias
    tail, whole = getattr(ops, FUSION_OPS[pid][0]), ops.WHOLE_MODELS[FUSION_OPS[pid][1]]
    eager = lambda: model(x)  # noqa: E731
    out = {"eager": (eager, eager), COMPILE: (lambda: compiled(x), eager),
           UNFUSED: (lambda: tail(ops.linear(x, w, lb), *rest), eager), FUSED: (lambda: whole(x, w, lb, *rest), eager)}
    if pid == 75:
        out[ATOMIC] = (lambda: kernels[FUSED_KERNEL].linear_group_norm_min_bias_atomic(x, w, lb, *rest, None, False)[0],
                       eager)
    if tf32:
        out[GEMM_ALONE] = (lambda: kernels["gemm_09_wgmma_tf32"].gemm(x, w), lambda: F.linear(x, w))
    else:
        out[GEMM_ALONE] = (lambda: ops.linear(x, w, lb), lambda: F.linear(x, w, lb))
    return out


def measure_fusion(reps: int = 50, *, pids=PIDS, scale: str = "full", device: str = "cuda", seed: int = 0,
                   progress: bool = True, compiler=None) -> list[dict]:
    """Notebook 09's section 4 GPU run (an sm_90 GPU): for each problem, at both tiers (TF32 off, then on), every contender of
    fusion_contenders checked against eager at that tier's tolerance (utils.check.TIERS; a miss raises, nothing
    wrong is timed), then all timed in turn (bench.compare with interleave, utils.bench.time_interleaved: CUDA
    events, a clean L2, medians, rep by rep after a warm-up) in two rounds, the second in the reverse order, each
    contender keeping its better round: in the study before this run (experiments/fused_models/README.md) a
    contender timed later in a sequence came out a few percent slower, as large as the differences measured
    here. The model is the reference with its GroupNorm γ, β and biases randomised as the harness does. Entries
    of kind "whole_model_fusion": compare() rows with "problem", "tier", "max_abs_vs_eager", "median_ms_by_round",
    "shape" [M, C, K]. (scale, device and compiler are there for the tests, which run it on the CPU.)"""

    compiler = compiler or torch.compile  # default mode
    chapter.quiet_inductor()
    kernels = build.load_kernels([FUSED_KERNEL, "gemm_09_wgmma_tf32", "gemm_10_3xtf32", "groupnorm",
                                  "min_bias_broadcast"])
    sync = torch.cuda.synchronize if device != "cpu" else (lambda: None)
    rows = []
    for pid in pids:
        p = get_problem(pid)
        model = p.make_model(scale, seed=seed)
        check._randomise(model, seed)  # γ = 1 and β = 0 would hide an ignored affine parameter
        model = model.to(device).eval()
        x = p.get_inputs(scale, generator=torch.Generator().manual_seed(seed + 1))[0].to(device)
        d = p.dims(scale)
        if not kernels[FUSED_KERNEL].fusable(x, linear_and_rest(pid, model)[0].weight, d.groups):
            raise RuntimeError(f"problem {pid}: the fused kernel does not take these inputs here; "
                               "its op would run the unfused path and the comparison would be void")
        for tier in TIERS:
            tol = check.TIERS[tier]
            torch._dynamo.reset()  # each tier compiles afresh, under its own fp32 setting
            with precision.tf32(tier == "tf32"), torch.no_grad():
                contenders = fusion_contenders(pid, model, x, tf32=tier == "tf32", compiled=compiler(model),
                                               kernels=kernels)
                diffs = {}
                for name, (fn, reference) in contenders.items():  # the first call of torch.compile compiles
                    out, want = fn(), reference()
                    sync()
                    diffs[name] = (out - want).abs().max().item()
                    if out.shape != want.shape or not torch.allclose(out, want, atol=tol.atol, rtol=tol.rtol):
                        raise AssertionError(f"problem {pid}, {tier} tier: {name} differs from eager by "
                                             f"{diffs[name]:.2e} (atol = rtol = {tol.atol:g}); not timing it")
                    del out, want
                if progress:
                    print(f"problem {pid}, {tier} tier: all {len(contenders)} checked against eager", flush=True)
                # A contender timed late in a sequence runs on a GPU the earlier ones have heated: the second
                # round reverses the order, so that each contender is timed early once.
                rounds: dict[str, list[dict]] = {name: [] for name in contenders}
                for order in (list(contenders), list(contenders)[::-1]):
                    for r in bench.compare({n: contenders[n][0] for n in order}, baseline=None, reps=reps,
                                           progress=progress, interleave=True):
                        rounds[r["contender"]].append(r)
            for name, rs in rounds.items():
                best = min(rs, key=lambda r: r["median_ms"])
                rows.append(best | {"problem": pid, "tier": tier, "max_abs_vs_eager": diffs[name],
                                    "median_ms_by_round": [r["median_ms"] for r in rs],
                                    "shape": [d.batch, d.out_features, d.in_features]})
        del model, x
        if device != "cpu":
            torch.cuda.empty_cache()
    return rows


def fusion_figure(record: dict, save=None) -> Figure:
    """Grouped bars from a "whole_model_fusion" record: the fused kernel's speedup over the unfused path and over
    torch.compile, per problem, one panel per tier; a line at 1x."""
    at = fusion_at(record)
    groups = fusion_groups(record)
    with matplotlib.rc_context(plots.STYLE):
        fig = Figure(figsize=(11.0, 4.2))
        tiers = [t for t in TIERS if any(g[1] == t for g in groups)]
        for i, tier in enumerate(tiers):
            ax = fig.add_subplot(1, len(tiers), i + 1)
            pids = [pid for pid, t in groups if t == tier]
            for j, (over, colour) in enumerate(((UNFUSED, plots.CYCLE[1]), (COMPILE, plots.COLOURS["torch.compile"]))):
                ys = [at[(pid, tier, over)]["median_ms"] / at[(pid, tier, FUSED)]["median_ms"] for pid in pids]
                bars = ax.bar([k - 0.2 + 0.4 * j for k in range(len(pids))], ys, 0.4, color=colour, edgecolor="white",
                              label=f"fused over {over}" + (" (workbook::linear, then the tail op)"
                                                            if over == UNFUSED else " (default mode)"))
                ax.bar_label(bars, fmt="%.2fx", fontsize=7, padding=2)
            ax.axhline(1.0, color=plots.REFERENCE, lw=1, ls="--")
            ax.set_xticks(range(len(pids)), [f"problem {pid}" for pid in pids])
            ax.set_ylabel("the fused kernel's speedup (x)")
            ax.set_title(f"{tier_name(tier)} tier", fontsize=10)
            ax.set_ylim(0, 1.5 * max(max(b.get_height() for b in c) for c in ax.containers))  # room for the legend
            if i == 0:
                ax.legend(loc="upper left", fontsize=8)
        fig.suptitle(f"The whole model in the GEMM's epilogue: fused over unfused and over torch.compile\n"
                     f"{plots.provenance(record)}")
    return plots.finish(fig, save)


# --------------------------------------------------------------------------- read from the record

def epilogue_price(record: dict, pid: int) -> dict[str, float]:
    """{tier: % the fused kernel takes over its own GEMM alone (a plain store)} for one problem of the record."""
    at = fusion_at(record)
    return {tier: 100 * (at[(pid, tier, FUSED)]["median_ms"] / at[(pid, tier, GEMM_ALONE)]["median_ms"] - 1)
            for p, tier in fusion_groups(record) if p == pid and (pid, tier, GEMM_ALONE) in at}


def stores_findings(record: dict) -> str:
    """A computed sentence on problem 75, whose fused kernel writes one float per row and column tile where its
    GEMM alone writes the whole M x C matrix: whether, in the record, that saving outweighs the epilogue."""
    price = epilogue_price(record, 75)
    if not price:
        return "(no problem 75 in this record)"
    said = " and ".join(f"{v:+.1f}% at the {tier_name(t)} tier" for t, v in price.items())
    if all(v > 0 for v in price.values()):
        verdict = "the epilogue's arithmetic costs more than the stores it saves"
    elif all(v <= 0 for v in price.values()):
        verdict = "the stores it saves outweigh the epilogue's arithmetic"
    else:
        verdict = "the stores it saves outweigh the epilogue at one tier and not at the other"
    return (f"Problem 75's fused kernel writes one float per row and column tile, where its GEMM alone writes the "
            f"whole M x C matrix. Against that GEMM it takes {said}: {verdict}.")


def fusion_missed(record: dict, text: str | None = None) -> str:
    """Markdown bullets, computed from the record and fused_gemm_groupnorm.cu's PREDICTION: each predicted
    epilogue cost and saving that the measurement fell outside of (a single predicted value counts as +-10%)."""
    want, at = fusion_predictions(text), fusion_at(record)
    lines = []
    for pid, tier in fusion_groups(record):
        fused, unfused = at[(pid, tier, FUSED)]["median_ms"], at[(pid, tier, UNFUSED)]["median_ms"]
        measured = {"epilogue": epilogue_price(record, pid).get(tier), "saving": 100 * (unfused - fused) / unfused}
        bands = {"epilogue": want[tier]["epilogue"], "saving": want[tier]["saving"].get(pid)}
        for what, value in measured.items():
            band = bands[what]
            if value is not None and (where := outside(value, band)):
                said = f"~{band[0]:g}%" if band[0] == band[1] else f"{band[0]:g} to {band[1]:g}%"
                lines.append(f"- problem {pid}, {tier_name(tier)} tier, the {what}: predicted {said}, measured "
                             f"**{value:+.1f}%**, {where} the prediction.")
    return "\n".join(lines) or "- Every prediction held."


SCOREBOARD = (("strict", COMPILE), ("strict", UNFUSED), ("strict", FUSED),
              ("tf32", "eager"), ("tf32", COMPILE), ("tf32", UNFUSED), ("tf32", FUSED))


def scoreboard(record: dict) -> dict[int, dict]:
    """{problem: {"eager_ms": eager fp32's median, (tier, contender): speedup over eager fp32}} for SCOREBOARD's
    contenders, all from the one "whole_model_fusion" record (eager fp32 is the strict tier's eager: TF32 off)."""
    at = fusion_at(record)
    out = {}
    for pid in dict.fromkeys(p for p, _ in fusion_groups(record)):
        eager = at[(pid, "strict", "eager")]["median_ms"]
        out[pid] = {"eager_ms": eager} | {key: eager / at[(pid, *key)]["median_ms"] for key in SCOREBOARD
                                          if (pid, *key) in at}
    return out


def scoreboard_table(record: dict) -> pd.DataFrame:
    """The scoreboard (speedup over eager fp32, TF32 off) of torch.compile, the unfused path and the fused
    kernel at each tier, and eager with TF32 on: per problem (the index), eager's fp32 ms and each ratio
    written "2.31x" ("–" where the record lacks it)."""
    board = scoreboard(record)
    rows = {pid: {"eager fp32 ms": round(row["eager_ms"], 3),
                  **{f"{c}, {tier_name(t)}": f"{row[(t, c)]:.2f}x" if (t, c) in row else "–" for t, c in SCOREBOARD}}
            for pid, row in board.items()}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("problem")


def scoreboard_figure(record: dict, save=None) -> Figure:
    """Per problem, the speedup over eager fp32 (TF32 off) of torch.compile, the unfused path and the fused kernel,
    one panel per tier (the TF32 panel with eager, TF32 on, too), log scale, all from the one record."""
    board = scoreboard(record)
    pids = list(board)
    colours = {"eager": plots.COLOURS["eager"], COMPILE: plots.COLOURS["torch.compile"], UNFUSED: plots.CYCLE[1],
               FUSED: plots.CYCLE[0]}
    labels = {"eager": "eager, TF32 on", COMPILE: "torch.compile (default mode)",
              UNFUSED: "unfused: workbook::linear, then the tail op", FUSED: "fused: the whole model in one kernel"}
    with matplotlib.rc_context(plots.STYLE):
        fig = Figure(figsize=(11.0, 4.4))
        for i, tier in enumerate(TIERS):
            ax = fig.add_subplot(1, len(TIERS), i + 1)
            shown = [c for t, c in SCOREBOARD if t == tier]
            width = 0.8 / len(shown)
            for j, c in enumerate(shown):
                xs = [k - 0.4 + width * (j + 0.5) for k, pid in enumerate(pids) if (tier, c) in board[pid]]
                ys = [board[pid][(tier, c)] for pid in pids if (tier, c) in board[pid]]
                bars = ax.bar(xs, ys, width, color=colours[c], edgecolor="black" if c == FUSED else "white",
                              label=labels[c])
                ax.bar_label(bars, fmt="%.2fx", fontsize=7, padding=2, rotation=90)
            ax.axhline(1.0, color=plots.REFERENCE, lw=1, label="eager fp32 (1x)")
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
            ax.set_ylim(0.8, 4 * max(max(b.get_height() for b in c) for c in ax.containers))
            ax.set_xticks(range(len(pids)), [f"problem {pid}" for pid in pids])
            ax.set_ylabel("speedup over eager fp32, TF32 off (log scale)")
            ax.set_title(f"{tier_name(tier)} tier", fontsize=10)
            ax.legend(loc="upper left", fontsize=7)
        fig.suptitle(f"Scoreboard after chapter 09: the whole model in one GEMM kernel, against PyTorch\n"
                     f"{plots.provenance(record)}")
    return plots.finish(fig, save)
