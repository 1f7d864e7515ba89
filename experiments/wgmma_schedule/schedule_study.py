"""The wgmma GEMM's schedule (common/gemm_wgmma.cuh): one tile per block, as rungs 9 and 10 first
ran, against 2-block clusters that multicast w's tile, a persistent block per SM, and both. Each
schedule is a build of the same kernel files from a patched copy of kernels/ whose Config picks
the schedule by type (schedule_kernels: its default Schedule, CLUSTER and Store).

In one run, on the current GPU:
  1. every schedule checked: rung 9's and rung 10's exports against float64 on the GEMM tests'
     shapes (multiples of no tile; one M tile, so a cluster's second tile is all zero fill) and at
     the full sizes, and the four whole-model kernels at both tiers on the fused tests' shapes,
     every element over NaN-poisoned memory;
  2. timed in turn (utils.bench.time_interleaved: rep by rep, the order rotating, after a warm-up
     that brings the GPU to the clock it holds under sustained work; until run 7, two rounds, the
     second in reverse order, each contender keeping its better median, which favoured whichever
     contender came first after a pause: variance_probe.py):
     rung 9 against cuBLAS TF32 and rung 10's `linear` (weight split kept) against cuBLAS SGEMM at
     1024 x 8192 x 8192 and 32768 x 4096 x 1024; each whole model at both tiers against
     torch.compile (default mode) at KernelBench's size.

Writes $OUT/o/schedule_study.json and prints the tables.

    python -m experiments.wgmma_schedule.schedule_study [--reps 30] [--schedules 1,0 2,1] [--baseline DIR]

--baseline DIR adds the same kernel files from another kernels folder (e.g. `git archive <commit>
kernels | tar -x -C DIR/..`), built as they are, as the contender "baseline".
"""
import argparse
import json
import os
import shutil
import time

from pathlib import Path

import torch

from tests.kernel_tests import poisoned
from tests.test_fused_models import SHAPES as FUSED_SHAPES, TIERS, _args, _double, _model_math
from tests.test_gemm_tensor_cores import FULL, SHAPES as GEMM_SHAPES, misaligned_copy
from utils import bench, build, ladder, precision
from utils.chapters import session as chapter
from utils import check as check_tiers
from utils.problems import get_problem
from utils.chapters.epilogue_fusion import linear_and_rest

SCHEDULES = {(1, 0): "one tile per block", (2, 0): "cluster of 2", (1, 1): "persistent",
             (2, 1): "persistent, cluster of 2"}
# A third number picks how the epilogue's tile reaches `out` (Config's Store: StoreStaged<n> of
# kernels/probes/gemm_wgmma_staged_writer.cuh, or 0, StoreDirect): "1,0,0" is one tile per block
# with direct stores from registers. A fourth, 1, runs rung 9 and the whole models' TF32 path
# ping-pong (SchedulePingpong: persistent, a 128 x 128 tile per consumer warp group); rung 10 and the
# strict path keep the first two numbers.
STORES = {0: "direct stores", 1: "TMA store at the end", 2: "TMA store per slab", 3: "copied from shared memory"}
KERNELS = ["gemm_09_wgmma_tf32", "gemm_10_3xtf32", "fused_gemm_groupnorm"]
FUSED = {94: "linear_bias_hardtanh_mish_group_norm", 75: "linear_group_norm_min_bias",
         37: "linear_swish_bias_group_norm", 62: "linear_group_norm_leaky_relu_x2"}


# The wgmma GEMM's headers, which the probes patch in a copy of kernels/ (each patch matching once).
HEADERS = ("common/gemm_wgmma.cuh", "common/gemm_wgmma_writers.cuh", "common/gemm_wgmma_host.cuh",
           "common/hopper.cuh")
WORK = Path("/tmp/wgmma_schedules")  # where the schedules' copies of kernels/ go
# The Config defaults every wgmma build takes, and rung 9's TF32 configuration (common/gemm_wgmma.cuh).
DEFAULTS = "class SCHEDULE_ = SchedulePersistent, int CLUSTER_ = 1, class STORE_ = StoreDirect>"
TF32_CONFIG = "using Tf32Config = Config</*BN*/ 256, /*STAGES*/ 4, /*SPLIT*/ false, /*PROMOTE*/ 0>;"
PINGPONG_CONFIG = ("using Tf32Config = Config</*BN*/ 128, /*STAGES*/ 6, /*SPLIT*/ false, /*PROMOTE*/ 0, "
                   "/*PRESPLIT*/ false, SchedulePingpong>;")
STAGED_INCLUDE = ('#include "common/gemm_wgmma_writers.cuh"\n',
                  '#include "common/gemm_wgmma_writers.cuh"\n#include "probes/gemm_wgmma_staged_writer.cuh"\n')


def patched_kernels(name: str, patches: list[tuple[str, str]], root: Path) -> Path:
    """A copy of kernels/ with `patches` applied to the GEMM's headers; each must match once in them."""
    dst = root / name.replace(" ", "_").replace(",", "") / "kernels"
    shutil.rmtree(dst.parent, ignore_errors=True)
    shutil.copytree(build.KERNELS_DIR, dst)
    texts = {h: (dst / h).read_text() for h in HEADERS}
    for old, new in patches:
        where = [h for h in HEADERS if old in texts[h]]
        if len(where) != 1 or texts[where[0]].count(old) != 1:
            raise SystemExit(f"probe {name!r}: {old!r} does not occur exactly once in {', '.join(HEADERS)}")
        texts[where[0]] = texts[where[0]].replace(old, new)
    for h, text in texts.items():
        (dst / h).write_text(text)
    return dst


def schedule_patches(schedule) -> list[tuple[str, str]]:
    """The patches that make every wgmma Config of a copy of kernels/ take `schedule` (cluster,
    persistent[, store[, ping-pong]]) by default: none for the workbook's own (1, 1)."""
    cluster, persistent, store, pingpong = (*schedule, 0, 0)[:4]
    kind = "SchedulePersistent" if persistent else "ScheduleCooperative"
    writer = f"StoreStaged<{store}>" if store else "StoreDirect"
    defaults = f"class SCHEDULE_ = {kind}, int CLUSTER_ = {cluster}, class STORE_ = {writer}>"
    patches = [(DEFAULTS, defaults)] if defaults != DEFAULTS else []
    if store:
        patches.append(STAGED_INCLUDE)
    if pingpong:
        patches.append((TF32_CONFIG, PINGPONG_CONFIG))
    return patches


def schedule_kernels(schedule, root: Path = WORK) -> Path:
    """A copy of kernels/ whose wgmma GEMM runs `schedule` (see schedule_patches)."""
    return patched_kernels(f"schedule {key(schedule)}", schedule_patches(schedule), root)


def key(schedule) -> str:
    return schedule if isinstance(schedule, str) else ",".join(str(v) for v in schedule)


def schedule_name(schedule) -> str:
    """The schedule's label in tables: SCHEDULES', and the store's when one was picked."""
    if isinstance(schedule, str) or len(schedule) == 2:
        return SCHEDULES[schedule]
    if len(schedule) == 4 and schedule[3]:
        return f"ping-pong (TF32), {STORES[schedule[2]]}"
    return f"{SCHEDULES[schedule[:2]]}, {STORES[schedule[2]]}"


def check(mods, schedule, full: bool = True) -> list[str]:
    """Every failure of one schedule's builds, as text (empty: all passed); full=False leaves out the
    full-size GEMMs and the fused tests' K = 8192 shape (for compute-sanitizer)."""
    fails = []
    rung9, rung10, fused = (mods[(k, schedule)] for k in KERNELS)
    paths = [("rung 9 gemm", rung9.gemm, "tf32"), ("rung 10 gemm", rung10.gemm, "strict")]
    for M, N, K, misaligned in GEMM_SHAPES + ([(m, n, k, None) for m, n, k in FULL] if full else []):
        x, w = ladder.operands(M, N, K, seed=M + N + K)
        if misaligned == "x":
            x = misaligned_copy(x)
        elif misaligned == "w":
            w = misaligned_copy(w)
        for label, fn, tier in paths:
            ok, detail = ladder.verify(fn, x, w, tier)
            if not ok:
                fails.append(f"{label} {M}x{N}x{K} {misaligned or ''}: {detail}")
        # rung 10's linear (the kept weight split, the bias in the epilogue), twice: the second call
        # takes the kept split
        bias = torch.rand(N, device="cuda") - 0.5
        ref = torch.nn.functional.linear(x.double(), w.double(), bias.double())
        tol = check_tiers.TIERS["strict"]
        for call in range(2):
            out = poisoned(rung10.linear, x, w, bias, None)
            if not torch.allclose(out.double(), ref, atol=tol.atol, rtol=tol.rtol):
                fails.append(f"rung 10 linear {M}x{N}x{K} {misaligned or ''} call {call}: max diff "
                             f"{(out.double() - ref).abs().max():.2e}, {int(out.isnan().sum())} NaN")
    for pid, name in FUSED.items():
        launch = getattr(fused, name)
        for M, K, C, G in FUSED_SHAPES if full else [sh for sh in FUSED_SHAPES if sh[1] < 8192]:
            for tier, (allow_tf32, tol) in TIERS.items():
                for seed in range(2):
                    args = _args(name, M, K, C, G, "cuda", seed)
                    ref = _model_math(name, _double(args)).float()
                    with precision.tf32(allow_tf32):
                        out = poisoned(launch, *args)
                    if not torch.allclose(out, ref, atol=tol, rtol=tol):
                        fails.append(f"{pid} {tier} {M}x{K}x{C}/{G} seed {seed}: max diff "
                                     f"{(out - ref).abs().max():.2e}, {int(out.isnan().sum())} NaN")
    return fails


def report_checks(mods, schedules, full: bool = True) -> dict:
    """check() of every schedule, printed; {schedule key: its failures}."""
    found = {}
    for s in schedules:
        found[key(s)] = fails = check(mods, s, full)
        print(f"checks, {schedule_name(s)}: {'all passed' if not fails else f'{len(fails)} FAILED'}", flush=True)
        for f in fails[:10]:
            print("   ", f)
    return found


def keep(section: dict, label: str, ms: dict) -> None:
    section[label] = ms
    print(label, {n: round(v, 4) for n, v in ms.items()}, flush=True)


def output_dir() -> str:
    """$OUT/o (./o without $OUT), created: where the studies and probes write their JSON."""
    path = os.path.join(os.environ.get("OUT", "."), "o")
    os.makedirs(path, exist_ok=True)
    return path


def timed(contenders: dict, reps: int) -> dict:
    """{name: median ms}, every contender timed in turn (bench.time_interleaved)."""
    return {name: t.median for name, t in bench.time_interleaved(contenders, reps=reps).items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--schedules", nargs="*", default=[f"{c},{p}" for c, p in SCHEDULES],
                    help="cluster,persistent[,store[,pingpong]] each (STORES: the epilogue's store; default the header's)")
    ap.add_argument("--baseline", type=Path, help="a kernels folder whose builds run as the contender 'baseline'")
    ap.add_argument("--check-only", action="store_true",
                    help="only the checks, without the full sizes (for compute-sanitizer), nothing timed or written")
    a = ap.parse_args()
    schedules = [tuple(int(v) for v in s.split(",")) for s in a.schedules]
    out_dir = output_dir()
    chapter.quiet_inductor()
    t0 = time.time()
    wanted = {(k, s): build.Variant(k, kernels_dir=schedule_kernels(s)) for k in KERNELS for s in schedules}
    if a.baseline:
        SCHEDULES["baseline"] = "baseline"
        schedules.append("baseline")
        wanted.update({(k, "baseline"): build.Variant(k, kernels_dir=a.baseline.resolve()) for k in KERNELS})
    mods = build.load_kernels(wanted)
    print(f"built {len(mods)} modules in {time.time() - t0:.0f} s", flush=True)
    if a.check_only:
        report_checks(mods, schedules, full=False)
        return
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "reps": a.reps,
           "schedules": {key(s): schedule_name(s) for s in schedules}, "baseline": str(a.baseline or ""),
           "checks": {}, "gemm": {}, "models": {}}

    res["checks"] = report_checks(mods, schedules)

    for M, N, K in FULL:
        x, w = ladder.operands(M, N, K, seed=0)
        for tf32 in (True, False):
            with precision.tf32(tf32), torch.no_grad():
                bias = torch.rand(N, device="cuda") - 0.5
                if tf32:
                    c = {"cuBLAS TF32": lambda: torch.mm(x, w.t())}
                    c.update({schedule_name(s): (lambda m=mods[(KERNELS[0], s)]: m.gemm(x, w)) for s in schedules})
                else:
                    c = {"cuBLAS SGEMM": lambda: torch.nn.functional.linear(x, w, bias)}
                    c.update({schedule_name(s): (lambda m=mods[(KERNELS[1], s)]: m.linear(x, w, bias, None))
                              for s in schedules})
                ms = timed(c, a.reps)
            keep(res["gemm"], f"{M}x{N}x{K} {'tf32' if tf32 else 'strict'}", ms)
        del x, w
        torch.cuda.empty_cache()

    for pid, name in FUSED.items():
        p = get_problem(pid)
        ref = p.make_model("full", seed=0).cuda().eval()
        (x,) = [t.cuda() for t in p.get_inputs("full", generator=torch.Generator().manual_seed(1))]
        lin, rest = linear_and_rest(pid, ref)
        for tf32 in (False, True):
            torch._dynamo.reset()
            tol = 1e-2 if tf32 else 1e-4
            with precision.tf32(tf32), torch.no_grad():
                want = ref(x)
                c = {"compile": (lambda cm=torch.compile(ref): cm(x))}
                c.update({schedule_name(s): (lambda f=getattr(mods[(KERNELS[2], s)], name): f(x, lin.weight, lin.bias, *rest, None,
                                                                                                False)[0])
                          for s in schedules})
                for n, f in c.items():
                    out = f()
                    assert torch.allclose(out, want, atol=tol, rtol=tol), (pid, tf32, n, (out - want).abs().max())
                ms = timed(c, a.reps)
            keep(res["models"], f"{pid} {'tf32' if tf32 else 'strict'}", ms)
        del ref, x
        torch.cuda.empty_cache()

    json.dump(res, open(os.path.join(out_dir, "schedule_study.json"), "w"), indent=1)
    names = [schedule_name(s) for s in schedules]
    print("\nGEMMs: % of cuBLAS (TF32 rows: cuBLAS TF32; strict rows: x cuBLAS SGEMM)")
    for label, ms in res["gemm"].items():
        base = ms.get("cuBLAS TF32") or ms["cuBLAS SGEMM"]
        cells = [f"{100 * base / ms[n]:6.1f}%" if "tf32" in label else f"{base / ms[n]:6.2f}x" for n in names]
        print(f"  {label:28s} " + "  ".join(f"{n}: {c}" for n, c in zip(names, cells)))
    print("Whole models: x torch.compile (default mode, same TF32 setting)")
    for label, ms in res["models"].items():
        print(f"  {label:10s} compile {ms['compile']:.4f} ms  " +
              "  ".join(f"{n}: {ms[n]:.4f} ms {ms['compile'] / ms[n]:.3f}x" for n in names))
    print(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
