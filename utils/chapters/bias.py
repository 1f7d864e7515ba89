"""The helpers of notebook 04 (bias fusion): seed 000's parameters and seed 001's count, the Amdahl bound
from notebook 01's profile, the side-by-side measurement of the bias epilogue, its plot and tables, and the
exercise checkers (the diagram of where a bias goes is bias_diagram.py's). Tested in
tests/test_bias_chapter.py.

    bound = amdahl(S.recorded("eager_profile"), S.recorded("ceilings"), SHAPE_94)  # one device's records
    display(amdahl_table(bound))                          # what fusing can buy, from the profile (a DataFrame)
    rows = measure(modules, shape, reps)                  # on a GPU: every contender, one run
    display(cost_table(rows), Markdown(resolution(rows)))  # each row over its own GEMM without a bias
    display(prediction_table(rows, bound, prediction()))  # the header's PREDICTION against the run

Every contender is compared with the same GEMM without any bias (its *control*, measured in the same
run): rung 7's `gemm` for the rung-7 rows, cuBLAS's `F.linear(x, w)` for the cuBLAS rows. The plot and
the cost table use only that control; where a number takes another one (eager 94's second bias,
over `F.linear(x, w, bias)`), its label names it.
"""
from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import matplotlib
import pandas as pd
import torch
import torch.nn.functional as F
from IPython.display import display
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from torch.utils._python_dispatch import TorchDispatchMode

from utils import bench, build, check, env, ladder, plots, precision
from utils.chapters import session as chapter
from utils.run import skip
from utils.show import find_definition, header_section, source_path

HEADER = "common/gemm_pipelined.cuh"  # rung 7's kernel, with the epilogue as a template parameter
EXERCISES = build.KERNELS_DIR / "exercises"
SHAPES = {"full": ladder.SHAPE, "small": (256, 2048, 2048), "odd": (1000, 4093, 4093)}  # M, N, K; only full is recorded


# The contenders of the measurement, in timing order.
RUNG7, FUSED1, FUSED2 = "gemm (rung 7, no bias)", "linear_bias (epilogue)", "linear_two_biases (epilogue)"
SEP1, SEP2 = "gemm, then + bias", "gemm, then + bias + extra_bias"
CUB0, CUB1 = "cuBLAS F.linear(x, w)", "cuBLAS F.linear(x, w, bias)"
EAGER94, FOLDED = "eager 94: F.linear(x, w, bias) + extra_bias", "F.linear(x, w, bias + extra_bias)"
COPY = "one (M, N) copy"
AGAIN = "gemm (rung 7, no bias), timed again last"


# --------------------------------------------------------------------------- records

def stamp(rec: dict) -> str:
    """A record's device, date and commit, to say whose numbers a table holds."""
    return f"{rec['device']['name']}, {rec['date'][:10]}, commit `{rec['git_commit']}`"


# --------------------------------------------------------------------------- the seeds' parameters

def state_dict_report(model: torch.nn.Module, reference: torch.nn.Module) -> str:
    """Whether `model` loads the reference's state dict with strict=True, and if not, why (PyTorch's words)."""
    try:
        model.load_state_dict(reference.state_dict(), strict=True)
        return "load_state_dict(strict=True): loaded"
    except RuntimeError as error:
        return "\n".join(["load_state_dict(strict=True) fails:", *("    " + line.strip() for line in str(error).splitlines()[1:])])


def linear_bias_init(linear: torch.nn.Linear) -> str:
    """What nn.Linear's bias starts as: not zeros, but uniform in ±1/sqrt(in_features)."""
    b, bound = linear.bias.detach(), 1 / math.sqrt(linear.in_features)
    return (f"nn.Linear's bias is zeros: {bool((b == 0).all())}; it lies in ±1/sqrt(in_features) = ±{bound:.4f}: "
            f"{bool((b.abs() <= bound).all())}, spread over it (min {b.min().item() / bound:+.2f}, "
            f"max {b.max().item() / bound:+.2f} of the bound)")


class _OpTraffic(TorchDispatchMode):
    """Records (op, output shape, bytes of tensor inputs, bytes of output) for every non-view op run inside it."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view:
            tensors = [a for a in [*args, *(kwargs or {}).values()] if isinstance(a, torch.Tensor)]
            self.ops.append((str(func.overloadpacket), tuple(out.shape), sum(t.numel() * t.element_size() for t in tensors),
                             out.numel() * out.element_size()))
        return out


def traffic(fn: Callable[[], object]) -> list[tuple[str, tuple, int, int]]:
    """The ops `fn` runs (views left out): (op, output shape, bytes its tensor inputs hold, bytes it writes).
    Works on meta tensors: shapes at any size, no memory, no GPU."""
    with torch.no_grad(), _OpTraffic() as seen:
        fn()
    return seen.ops


def traffic_table(variants: dict[str, Callable[[], object]]) -> pd.DataFrame:
    """A row per op each variant runs, in order: the variant, the op, the shape it writes, and the MB it reads
    and writes."""
    rows = [{"variant": label, "op": op, "writes shape": str(shape), "MB read": round(read / 1e6, 3),
             "MB written": round(written / 1e6, 3)}
            for label, fn in variants.items() for op, shape, read, written in traffic(fn)]
    return pd.DataFrame(rows, columns=["variant", "op", "writes shape", "MB read", "MB written"])


# --------------------------------------------------------------------------- reading the kernel

def show_epilogue() -> None:
    """Display the end of rung 7's block code (gemm_pipelined_block, which gemm_pipelined_kernel runs), from the
    last cp.async wait to its closing brace: the only place the epilogue is called."""
    from IPython.display import Code, Markdown, display

    path = source_path(HEADER)
    text = path.read_text()
    span = find_definition(text, "gemm_pipelined_block")
    lines = text.splitlines()
    first = next(i + 1 for i in range(span.first_line - 1, span.last_line) if "cp_async_wait<0>()" in lines[i])
    display(Markdown(f"`{build.display_path(path)}`, lines {first}-{span.last_line} "
                     "(gemm_pipelined_block: after the K loop, the epilogue)"))
    display(Code("\n".join(lines[first - 1:span.last_line]), language="cuda"))


def epilogue_counts(shape: tuple[int, int, int]) -> str:
    """What the epilogue adds per thread against the main loop, from the kernel's own constants."""
    consts = {k: int(v) for k, v in re.findall(r"constexpr int (\w+) = (\d+);", source_path(HEADER).read_text())}
    BM, BN, THREADS = consts["BM"], consts["BN"], consts["THREADS"]
    M, N, K = shape
    per_thread = BM * BN // THREADS
    return "\n".join([
        f"rung 7 at M x N x K = {M} x {N} x {K}: {BM} x {BN} outputs per block of {THREADS} threads, {per_thread} per thread",
        f"  main loop, per thread:  {per_thread} x K = {per_thread * K:,} FMAs",
        f"  bias epilogue, per thread: {per_thread} adds and at most {per_thread} loads of bias[n] "
        f"({100 / K:.4f}% of the FMAs); a block reads {BN} bias values ({4 * BN} bytes), from L1/L2",
        f"  a separate `+ bias` pass instead: reads and writes all {M * N:,} outputs: {2 * 4 * M * N / 1e6:.1f} MB of DRAM traffic",
    ])


def prediction() -> str | None:
    """kernels/gemm_bias.cu's PREDICTION paragraph, as written there."""
    return header_section("gemm_bias", "PREDICTION")


_NUM = r"(\d+(?:\.\d+)?)"


def predicted(text: str | None) -> dict[str, float]:
    """The numbers a PREDICTION states, by what they predict; a number it does not state is absent:
    target_pct ("costs < 1%"), noise_pct ("noise of about 0.3%"), per_bias_us ("about 20 us more per
    bias"), gemm_ms ("of the 3.1 ms GEMM"), gain_pct ("buys ~1%"), gemm_share_pct ("over 90% of")."""
    flat = " ".join((text or "").split())
    patterns = {"target_pct": r"costs < " + _NUM + "%", "noise_pct": r"noise of about " + _NUM + "%",
                "per_bias_us": r"about " + _NUM + " us more per bias", "gemm_ms": r"of the " + _NUM + " ms GEMM",
                "gain_pct": r"buys ~" + _NUM + "%", "gemm_share_pct": r"over " + _NUM + "% of"}
    return {key: float(m[1]) for key, pattern in patterns.items() if (m := re.search(pattern, flat))}


# --------------------------------------------------------------------------- Amdahl first

def amdahl(profile: dict | None, ceilings: dict | None, shape: tuple[int, int, int]) -> dict | None:
    """The bound notebook 01's profile sets on fusing anything after problem 94's GEMM, with one bias
    pass at the copy bandwidth of the same device (the datasheet's only where that device has no
    recorded ceilings). None without a profile."""
    if profile is None:
        return None
    ops = [e for e in profile["entries"] if e["problem"] == 94]
    gemm = next(e for e in ops if e["op"] in ("aten::addmm", "aten::mm"))
    add = next((e for e in ops if e["op"] == "aten::add"), None)
    if ceilings is not None and ceilings["device"]["slug"] != profile["device"]["slug"]:
        raise ValueError(f"the ceilings ({ceilings['device']['name']}) and the profile ({profile['device']['name']}) "
                         "come from different devices: read both through one session (Session.recorded)")
    ceil = bench.Ceilings.from_record(ceilings) if ceilings else bench.DATASHEET_H100
    M, N, _ = shape
    pass_bytes = bench.elementwise_cost(M * N + N, M * N).bytes  # read the output and the bias, write the output
    pass_ms = pass_bytes / (ceil.copy_GBps * 1e9) * 1e3
    shares = {e["problem"]: e["pct"] for e in profile["entries"] if e["op"] in ("aten::addmm", "aten::mm")}
    return {"device": profile["device"]["name"], "slug": profile["device"]["slug"], "source": stamp(profile),
            "gemm_op": gemm["op"], "gemm_ms": gemm["cuda_ms"], "gemm_pct": gemm["pct"], "max_speedup": 100 / gemm["pct"],
            "pass_MB": pass_bytes / 1e6, "copy_GBps": ceil.copy_GBps, "copy_source": ceil.source,
            "pass_us": 1e3 * pass_ms, "pass_pct_of_gemm": 100 * pass_ms / gemm["cuda_ms"],
            "add_us": 1e3 * add["cuda_ms"] if add else None, "add_pct": add["pct"] if add else None,
            "gemm_shares": shares}


def amdahl_table(a: dict) -> pd.DataFrame:
    """The bound as a table (what, how much, from), each number with where it comes from; its source is
    a["source"], the record's device and date."""
    rows = [
        ("problem 94's GEMM", f"{a['gemm_pct']:.1f}% of eager GPU time ({a['gemm_ms']:.3f} ms)",
         f"{a['gemm_op']} in notebook 01's profile (nn.Linear's own bias included)"),
        ("everything after it", f"{100 - a['gemm_pct']:.1f}%", "the rest of the profile"),
        ("fusing all of it, perfectly", f"at most {a['max_speedup']:.3f}x", "1 / the GEMM's share"),
        ("one bias pass, estimated", f"{a['pass_us']:.1f} us, {a['pass_pct_of_gemm']:.2f}% of the GEMM",
         f"{a['pass_MB']:.1f} MB at the copy bandwidth {a['copy_source']} ({a['copy_GBps']:.0f} GB/s)"),
    ]
    if a["add_us"] is not None:
        rows.append(("that pass, profiled", f"{a['add_us']:.1f} us, {a['add_pct']:.2f}% of eager time "
                     f"({a['add_us'] / a['pass_us']:.2f}x the estimate)", "aten::add in the profile"))
    return pd.DataFrame(rows, columns=["what", "how much", "from"])


# --------------------------------------------------------------------------- compile and check

def load(can_compile: bool) -> dict:
    """The bias kernels, rung 7 without a bias (the control) and the exercise, built side by side
    where there are cores for it; {} with a SKIPPED line where nothing can compile."""
    if not can_compile:
        skip("compiling the bias kernels and the exercise", env.no_build_reason())
        return {}
    modules = dict(build.load_kernels(["gemm_bias", "gemm_07_pipelined"]))
    modules["gemm_epilogue_relu"] = build.load_kernel("gemm_epilogue_relu", kernels_dir=EXERCISES)
    for label, module in modules.items():
        print(f"{label:<20} {build.display_path(Path(module.__file__))}")
    return modules


def find_cuobjdump() -> str | None:
    """cuobjdump: on PATH, in CUDA_HOME/bin, or the copy that Triton (a torch dependency) ships; None if none."""
    candidates = [shutil.which("cuobjdump"), Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "cuobjdump"]
    try:
        import triton.backends.nvidia as triton_nvidia

        candidates.append(Path(triton_nvidia.__file__).parent / "bin" / "cuobjdump")
    except ImportError:
        pass
    return next((str(c) for c in candidates if c and Path(c).is_file()), None)


def instantiations(dump: str) -> list[tuple[str, int, int]]:
    """[(epilogue, registers, local bytes)] of every gemm_pipelined_kernel<Epilogue> in the text of
    `cuobjdump --dump-resource-usage`."""
    found, name = [], None
    for line in dump.splitlines():
        if line.strip().startswith("Function "):
            name = line.strip()[len("Function "):].rstrip(":")
        elif name and (usage := re.search(r"REG:(\d+).*LOCAL:(\d+)", line)):
            # The Itanium mangling names the template argument as <length><name> (NS_ before one in a namespace).
            if m := re.search(r"gemm_pipelined_kernelI(?:NS_)?(\d+)", name):
                found.append((name[m.end():m.end() + int(m[1])], int(usage[1]), int(usage[2])))
            name = None
    return found


def register_table(modules: dict) -> None:
    """Print the registers and spills of each rung-7 instantiation the built libraries hold."""
    tool = find_cuobjdump() if modules else None
    if not modules:
        return skip("reading the kernels' register counts", "nothing was compiled")
    if tool is None:
        return skip("reading the kernels' register counts", "no cuobjdump here (CUDA toolkit or Triton)")
    rows = []
    for label in ("gemm_07_pipelined", "gemm_bias", "gemm_epilogue_relu"):
        dump = subprocess.run([tool, "--dump-resource-usage", modules[label].__file__], capture_output=True, text=True).stdout
        rows += [{"kernel instantiation": f"gemm_pipelined_kernel<{epilogue}>", "registers": regs,
                  "local (spill) bytes": local, "library": label} for epilogue, regs, local in instantiations(dump)]
    display(pd.DataFrame(rows))


def odd_operands(generator, M=37, N=129, K=65):
    """x like get_inputs (uniform [0, 1)), w and a bias like nn.Linear's init, an extra bias like 94's randn;
    no tile, vector width or warp divides M, N or K."""
    return [torch.rand(M, K, generator=generator), (torch.rand(N, K, generator=generator) * 2 - 1) / math.sqrt(K),
            (torch.rand(N, generator=generator) * 2 - 1) / math.sqrt(K), torch.randn(N, generator=generator)]


def harness_reports(fused) -> list:
    """The harness on both exports at the odd shape: the strict tier, every element, random biases."""
    return [check.check_fn(fused.linear_bias, F.linear, lambda g: odd_operands(g)[:3], name="linear_bias",
                           contiguous_only=True),
            check.check_fn(fused.linear_two_biases, lambda x, w, b, e: F.linear(x, w, b) + e, odd_operands,
                           name="linear_two_biases", contiguous_only=True)]


def check_against_model(fused, problem, device="cuda") -> str:
    """linear_two_biases with problem 94's own parameters (scale odd) against the model's first two lines
    and float64; raises if they differ at the strict tier."""
    model = problem.make_model("odd", seed=0).to(device)
    (x,) = [t.to(device) for t in problem.get_inputs("odd", generator=torch.Generator().manual_seed(0))]
    with torch.no_grad(), precision.ieee_fp32():
        eager = model.gemm(x) + model.bias
        ours = fused.linear_two_biases(x, model.gemm.weight, model.gemm.bias, model.bias)
        exact = F.linear(x.double(), model.gemm.weight.double(), model.gemm.bias.double()) + model.bias.double()
    tier = check.TIERS["strict"]
    same = torch.allclose(ours, eager, atol=tier.atol, rtol=tier.rtol)
    text = "\n".join([
        f"problem 94 at scale odd, x {tuple(x.shape)}, parameters "
        f"{[tuple(p.shape) for p in model.gemm.parameters()]} + {tuple(model.bias.shape)}",
        f"  max |ours - float64|  = {(ours.double() - exact).abs().max().item():.2e}",
        f"  max |eager - float64| = {(eager.double() - exact).abs().max().item():.2e}",
        f"  ours vs model.gemm(x) + model.bias at the strict tier: {'equal' if same else 'DIFFERENT'}"])
    if not same:
        raise AssertionError(text)
    return text


# --------------------------------------------------------------------------- the measurement

def contenders(x, w, b1, b2, gemm, fused, src, dst) -> dict[str, tuple[str, int, int, Callable]]:
    """{name: (GEMM underneath, biases, separate passes after the GEMM, the call)}, in timing order."""
    return {
        RUNG7: ("rung 7", 0, 0, lambda: gemm(x, w)),
        FUSED1: ("rung 7", 1, 0, lambda: fused.linear_bias(x, w, b1)),
        FUSED2: ("rung 7", 2, 0, lambda: fused.linear_two_biases(x, w, b1, b2)),
        SEP1: ("rung 7", 1, 1, lambda: gemm(x, w) + b1),
        SEP2: ("rung 7", 2, 2, lambda: gemm(x, w) + b1 + b2),
        CUB0: ("cuBLAS", 0, 0, lambda: F.linear(x, w)),
        CUB1: ("cuBLAS", 1, 0, lambda: F.linear(x, w, b1)),
        EAGER94: ("cuBLAS", 2, 1, lambda: F.linear(x, w, b1) + b2),
        FOLDED: ("cuBLAS", 2, 0, lambda: F.linear(x, w, b1 + b2)),
        COPY: ("none", 0, 0, lambda: dst.copy_(src)),
        AGAIN: ("rung 7", 0, 0, lambda: gemm(x, w)),  # the control once more: how far the run drifted
    }


def measure(modules: dict, shape: tuple[int, int, int], reps: int, device: str = "cuda") -> list[dict]:
    """Check both fused kernels against float64 at `shape`, then time every contender side by side in
    one bench.compare, TF32 off. Rows carry the GEMM underneath, the biases, the separate passes, the shape."""
    M, N, K = shape
    x, w = ladder.operands(M, N, K, seed=0, device=device)
    g = torch.Generator().manual_seed(1)
    b1 = ((torch.rand(N, generator=g) * 2 - 1) / math.sqrt(K)).to(device)  # nn.Linear's bias init
    b2 = torch.randn(N, generator=g).to(device)  # problem 94's self.bias init
    src, dst = torch.rand(M, N, device=device), torch.empty(M, N, device=device)
    fused, gemm = modules["gemm_bias"], modules["gemm_07_pipelined"].gemm
    with precision.ieee_fp32():
        exact, tier = F.linear(x.double(), w.double(), b1.double()), check.TIERS["strict"]
        for name, out, ref in [(FUSED1, fused.linear_bias(x, w, b1), exact),
                               (FUSED2, fused.linear_two_biases(x, w, b1, b2), exact + b2.double())]:
            ok = torch.allclose(out.double(), ref, atol=tier.atol, rtol=tier.rtol)
            print(f"{name:<30} vs float64 at {M} x {N} x {K}: max abs err {(out.double() - ref).abs().max().item():.1e}, "
                  f"{'ok' if ok else 'WRONG'}")
            if not ok:
                raise AssertionError(f"{name} is wrong at this shape: not timing a wrong kernel")
        del exact, out, ref
        spec = contenders(x, w, b1, b2, gemm, fused, src, dst)
        rows = bench.compare({name: fn for name, (*_, fn) in spec.items()}, baseline=RUNG7, reps=reps)
    return [{**row, "gemm": spec[row["contender"]][0], "biases": spec[row["contender"]][1],
             "separate_passes": spec[row["contender"]][2], "shape": [M, N, K]} for row in rows]


@dataclass(frozen=True)
class Run:
    """The rows the chapter reads its numbers from: measured in this run, or a record (and whose)."""
    entries: list[dict]
    source: str
    record: dict | None = None


def this_run(rows: list[dict] | None, record: dict | None) -> Run | None:
    """The rows just measured on this GPU; else the record (of this GPU on a GPU, of one device without
    one); None when there are neither."""
    if rows is not None:
        return Run(rows, f"Measured on {env.device_name()} in this run")
    if record is not None:
        return Run(record["entries"], f"Recorded on {stamp(record)} ({record['notes']})", record)
    return None


# --------------------------------------------------------------------------- reading the measurement

def pct_over(row: dict, ref: dict) -> float:
    return 100 * (row["median_ms"] / ref["median_ms"] - 1)


def us_over(row: dict, ref: dict) -> float:
    return 1e3 * (row["median_ms"] - ref["median_ms"])


def spread_pct(row: dict) -> float:
    """A row's p20-p80 spread in % of its median."""
    return 100 * (row["p80_ms"] - row["p20_ms"]) / row["median_ms"]


def controls(entries: list[dict]) -> dict[str, dict]:
    """{GEMM: its control}: the first row without a bias on each GEMM (rung 7's gemm, cuBLAS's F.linear(x, w))."""
    found = {}
    for r in entries:
        if r["biases"] == 0 and r["gemm"] != "none":
            found.setdefault(r["gemm"], r)
    return found


def bias_plot(entries: list[dict], recorded_from: dict | None = None, save=None) -> Figure:
    """Each contender's median over its control (the same GEMM without a bias), in us; whiskers: its
    p20-p80; band: the rung-7 control's spread; dashed lines: one and two copies of the output."""
    bases = controls(entries)
    shown = [r for r in entries if r["gemm"] in bases and r is not bases[r["gemm"]]]
    copy = next((r for r in entries if r["gemm"] == "none"), None)
    colour = {0: plots.COLOURS["ours"], 1: plots.CYCLE[2], 2: "#08519c"}
    with matplotlib.rc_context(plots.STYLE):
        fig = Figure(figsize=(10.0, 4.8))
        ax = fig.add_subplot()
        extra = [us_over(r, bases[r["gemm"]]) for r in shown]
        whiskers = [[1e3 * (r["median_ms"] - r["p20_ms"]) for r in shown], [1e3 * (r["p80_ms"] - r["median_ms"]) for r in shown]]
        ax.barh(range(len(shown)), extra, xerr=whiskers, capsize=3, edgecolor="white", zorder=2,
                color=["#999999" if r["biases"] == 0 else colour.get(r["separate_passes"], "#333333") for r in shown])
        for i, (e, r) in enumerate(zip(extra, shown)):  # the label right of the bar and its whisker
            ax.text(max(e, 0) + whiskers[1][i] + 1, i, f"{e:+.1f} us ({pct_over(r, bases[r['gemm']]):+.2f}%)",
                    va="center", fontsize=8, zorder=3, bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5})
        handles = [Patch(color=colour[0], label="no pass after the GEMM"), Patch(color=colour[1], label="one separate pass"),
                   Patch(color=colour[2], label="two separate passes"), Patch(color="#999999", label="the control, again")]
        if ref := bases.get("rung 7"):
            handles.append(ax.axvspan(1e3 * (ref["p20_ms"] - ref["median_ms"]), 1e3 * (ref["p80_ms"] - ref["median_ms"]),
                                      color="#dddddd", zorder=0, label="rung 7 without bias: p20-p80"))
        if copy:
            for k, style in ((1, "--"), (2, ":")):
                handles.append(ax.axvline(k * 1e3 * copy["median_ms"], color=plots.REFERENCE, lw=1, ls=style, zorder=1,
                                          label=f"{k} x one (M, N) copy ({k * 1e3 * copy['median_ms']:.1f} us)"))
        ax.axvline(0, color=plots.REFERENCE, lw=0.8)
        ax.set_yticks(range(len(shown)), [f"{r['contender']}  [vs {bases[r['gemm']]['contender']}]" for r in shown],
                      fontsize=8)
        ax.invert_yaxis()
        ax.margins(x=0.25)
        ax.set_xlabel("time over the same GEMM without a bias (the row's control, in brackets), us")
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
        fig.suptitle(f"What the bias costs, M x N x K = {' x '.join(map(str, entries[0]['shape']))}, TF32 off\n"
                     f"{plots.provenance(recorded_from)}")
    return plots.finish(fig, save)


def cost_table(entries: list[dict]) -> pd.DataFrame:
    """Every contender's median and its cost over its control, the control named (resolution() says
    what difference the run resolves)."""
    bases = controls(entries)
    rows = []
    for r in entries:
        base = bases.get(r["gemm"])
        over = ("–" if base is None or r is base else f"{us_over(r, base):+.1f} us ({pct_over(r, base):+.2f}%)")
        control = "–" if base is None or r is base else base["contender"]
        rows.append({"contender": r["contender"], "median ms": round(r["median_ms"], 3), "control": control,
                     "over the control": over})
    return pd.DataFrame(rows, columns=["contender", "median ms", "control", "over the control"])


def resolution(entries: list[dict]) -> str:
    """One sentence: the rung-7 control's p20-p80 spread, and how far it moved when timed again last;
    "" without that control."""
    by = {r["contender"]: r for r in entries}
    if RUNG7 not in by:
        return ""
    drift = f", timed again last it moved {pct_over(by[AGAIN], by[RUNG7]):+.2f}%" if AGAIN in by else ""
    return f"Resolution: the rung-7 control's p20-p80 spread is {spread_pct(by[RUNG7]):.2f}% of its median{drift}."


def resolution_pct(entries: list[dict]) -> float:
    """The smallest difference the run resolves: the larger of the control's spread and its drift."""
    by = {r["contender"]: r for r in entries}
    drift = abs(pct_over(by[AGAIN], by[RUNG7])) if AGAIN in by else 0.0
    return max(spread_pct(by[RUNG7]), drift)


def _within(measured: float, expected: float, factor: float = 1.25) -> str:
    """'held' within the factor either way, else 'missed (measured/predicted = r)'."""
    ratio = measured / expected if expected else float("inf")
    return "held" if 1 / factor <= ratio <= factor else f"missed ({ratio:.2f}x the prediction)"


def prediction_table(entries: list[dict], bound: dict | None, text: str | None) -> pd.DataFrame:
    """Each number the header's PREDICTION (and the Amdahl bound) states, against this run: a row per
    number (the PREDICTION says, predicted, measured, verdict); no rows where the text states none."""
    p, e = predicted(text), {r["contender"]: r for r in entries}
    base, res = e[RUNG7], resolution_pct(entries)
    rows = []
    if "target_pct" in p:
        for name in (FUSED1, FUSED2):
            got = pct_over(e[name], base)
            rows.append((f"{name} over {RUNG7}", f"< {p['target_pct']:g}%", f"{got:+.2f}%",
                         "held" if got < p["target_pct"] else "missed"))
    if "noise_pct" in p:
        worst = max(abs(pct_over(e[FUSED1], base)), abs(pct_over(e[FUSED2], base)))
        rows.append(("the fused biases, against the run's resolution", f"below the noise, about {p['noise_pct']:g}%",
                     f"resolution {res:.2f}%; the epilogues differ by up to {worst:.2f}%",
                     "held" if worst <= res else "missed: the differences exceed the noise"))
    if "per_bias_us" in p:
        for what, row, ref in (("first", e[SEP1], base), ("second", e[SEP2], e[SEP1])):
            got = us_over(row, ref)
            rows.append((f"a separate pass, the {what} bias ({row['contender']} over {ref['contender']})",
                         f"about {p['per_bias_us']:g} us", f"{got:.1f} us", _within(got, p["per_bias_us"])))
    second = us_over(e[EAGER94], e[CUB1])
    if bound is not None and bound["add_us"] is not None:
        rows.append((f"eager 94's second bias ({EAGER94} over {CUB1})",
                     f"{bound['add_us']:.1f} us (notebook 01's profile)", f"{second:.1f} us", _within(second, bound["add_us"])))
    if "gain_pct" in p:
        got = 100 * (e[EAGER94]["median_ms"] - e[CUB1]["median_ms"]) / e[EAGER94]["median_ms"]
        rows.append(("what a perfect fusion buys problem 94's first two ops (the same, in % of eager)",
                     f"~{p['gain_pct']:g}%", f"{got:.2f}%", _within(got, p["gain_pct"], 2.0)))
    if "gemm_ms" in p:
        rows.append((f"{RUNG7} at this shape", f"{p['gemm_ms']:g} ms", f"{base['median_ms']:.3f} ms",
                     _within(base["median_ms"], p["gemm_ms"], 1.1)))
    if "gemm_share_pct" in p and bound is not None:
        shares = bound["gemm_shares"]
        low = [pid for pid, s in shares.items() if s <= p["gemm_share_pct"]]
        rows.append(("the GEMM's share of eager time (notebook 01's profile)", f"over {p['gemm_share_pct']:g}%",
                     ", ".join(f"{pid}: {s:.0f}%" for pid, s in sorted(shares.items())),
                     "held" if not low else f"missed for {', '.join(map(str, sorted(low)))}"))
    return pd.DataFrame(rows, columns=["the PREDICTION says", "predicted", "measured", "verdict"])


# --------------------------------------------------------------------------- the exercises

def expression_diagnosis(out, x, w, bias, candidates: dict[str, Callable]) -> str | None:
    """Which of `candidates` ({name: f(x @ w.T, bias)}) `out` equals at the strict tier, computed in
    float64; None when it matches none (or has another shape)."""
    x, w, bias, out = (t.detach().cpu().double() for t in (x, w, bias, out))
    lin, tier = x @ w.T, check.TIERS["strict"]
    for name, expression in candidates.items():
        ref = expression(lin, bias)
        if out.shape == ref.shape and torch.allclose(out, ref, atol=tier.atol, rtol=tier.rtol):
            return name
    return None


def expression_verdict(report, diagnosis: str | None, goal: str, candidates: dict, passed: str) -> str:
    """PASS when the harness found nothing wrong; else "Not yet:", what failed, and what the kernel computes."""
    return chapter.diagnosis_verdict(
        report, diagnosis, goal=goal, passed=passed,
        none_matched="the output matches none of " + "; ".join(candidates) + ".",
        wrong="your kernel computes {diagnosis}: the checks that compare values fail for this one reason.")


def prediction_verdict(predicted_pct: float | None, actual: float, what: str) -> str:
    """PASS when the prediction (in %) is within a factor of 2 of `actual`; Not yet before there is one. A miss
    says neither the value nor its direction (a reader could bisect the answer from either)."""
    if predicted_pct is None:
        return "Not yet: write your prediction in MY_PREDICTION_PCT first, then run this cell again."
    ratio = predicted_pct / actual if actual > 0 else float("inf")
    if 0.5 <= ratio <= 2:
        return f"PASS: you predicted {predicted_pct:g}%, {what} {actual:.2f}% (a factor of {max(ratio, 1 / ratio):.2f})."
    source = "the estimate" if "estimate" in what else "the measurement"
    return (f"Not yet: {predicted_pct:g}% is more than a factor of 2 from {source}. Count the bytes of the pass and the FLOPs of the GEMM at this shape, and the rates of each "
            "from the measurement above.")


def estimate_37(entries: list[dict], shape37: tuple[int, int, int]) -> tuple[float, str]:
    """(% that a separate bias pass adds to rung 7's GEMM at problem 37's shape, how it was counted):
    rung 7's FLOP rate and the (M, N) copy's bandwidth, both from the rows at 94's shape."""
    rec = {r["contender"]: r for r in entries}
    Mr, Nr, Kr = rec[RUNG7]["shape"]
    tflops = bench.gemm_cost(Mr, Nr, Kr).flops / (rec[RUNG7]["median_ms"] * 1e-3) / 1e12
    copy_GBps = 2 * 4 * Mr * Nr / (rec[COPY]["median_ms"] * 1e-3) / 1e9
    M, N, K = shape37
    gemm_ms = bench.gemm_cost(M, N, K).flops / (tflops * 1e12) * 1e3
    pass_ms = bench.elementwise_cost(M * N + N, M * N).bytes / (copy_GBps * 1e9) * 1e3
    estimate = 100 * pass_ms / gemm_ms
    return estimate, (f"rung 7 at {tflops:.1f} TFLOP/s, the (M, N) copy at {copy_GBps:.0f} GB/s -> at {M} x {N} x {K}: "
                      f"GEMM {gemm_ms:.2f} ms, pass {1e3 * pass_ms:.0f} us, {estimate:.2f}%")


def exercise_37(mine: float | None, run: Run | None, modules: dict, on_gpu: bool, reps: int, shape37) -> None:
    """Exercise 2: the verdict on a prediction against the count-based estimate (from the run's rates),
    and on a GPU against a measurement at problem 37's shape."""
    if mine is None:
        print(prediction_verdict(None, 0, ""))
        return
    if run is None:
        skip("the count-based estimate", "no bias_fusion rows to take rates from")
    else:
        estimate, how = estimate_37(run.entries, shape37)
        verdict = prediction_verdict(mine, estimate, "the estimate says")
        print(verdict)
        if verdict.startswith("PASS"):  # the count is the answer: shown once the prediction holds
            print(f"count-based estimate, rates from: {run.source}: {how}")
    if not on_gpu:
        return skip("measuring at problem 37's shape", "no GPU")
    M, N, K = shape37
    x, w = ladder.operands(M, N, K, seed=37)
    b = torch.rand(N, device="cuda") - 0.5
    gemm, fused = modules["gemm_07_pipelined"].gemm, modules["gemm_bias"]
    with precision.ieee_fp32():
        rows = bench.compare({RUNG7: lambda: gemm(x, w), SEP1: lambda: gemm(x, w) + b,
                              FUSED1: lambda: fused.linear_bias(x, w, b)}, baseline=RUNG7, reps=reps)
    by = {r["contender"]: r for r in rows}
    verdict = prediction_verdict(mine, pct_over(by[SEP1], by[RUNG7]), "measured")
    print(verdict)
    if not verdict.startswith("PASS"):  # the times are the answer: shown once the prediction holds
        return
    print(bench.format_table(rows))
    print(f"and the fused epilogue at this shape: {pct_over(by[FUSED1], by[RUNG7]):+.2f}% "
          f"(run-to-run spread of the control {spread_pct(by[RUNG7]):.2f}%)")
