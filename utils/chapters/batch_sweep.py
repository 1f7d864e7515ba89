"""Every batch size: the drop-ins, their GEMM and cuBLAS against eager and torch.compile, over M.

    make sweep                                                    # the same as the next line
    python -m utils.chapters.batch_sweep                          # on a GPU: every problem, both tiers, M = 1 .. 16384,
                                                                  # at each problem's own K and C and two other shapes
    python -m utils.chapters.batch_sweep --problems 94 --ms 1 64 4096 --tiers strict --shapes own
    python -m utils.chapters.batch_sweep --no-record              # print the table, record nothing
    CUDA_VISIBLE_DEVICES=1 python -m utils.chapters.batch_sweep --problems 75 --rows-out 75.json   # one card's share
    python -m utils.chapters.batch_sweep --merge 94.json 75.json 37.json 62.json          # ... recorded as one sweep

KernelBench times each problem at one batch size; a model in use runs at many, and inference at small
ones. For each problem, tier (strict: IEEE fp32, TF32 off; tf32: TF32 allowed) and M (the batch) this
times, side by side (bench.time_interleaved, a clean L2 before each call, medians):

    eager             the reference Model
    torch.compile     the Model under torch.compile in each of session.COMPILE_MODES
    ours              the solution's ModelNew (the cacheless default)
    cuBLAS GEMM       F.linear alone, the library GEMM of the same shape: what the whole model costs at least
                      in eager's hands
    ours, GEMM        workbook::linear alone (the drop-ins' GEMM when the whole model cannot fuse)

and records each point with its floor: the model's minimum bytes (x, every parameter, the output) over the
measured copy bandwidth, and its FLOPs over the measured peak of the tier (floor_of: for the strict tier,
3xTF32's third of the TF32 peak where that beats SGEMM's). At
small M the floor is one read of the weight; past the M where the FLOPs' time passes the bytes' time,
the GEMM's arithmetic. Every contender is checked against eager at its tier at that M before it is timed:
a wrong result gets no number.

Besides each problem's own K (in features) and C (out features), two shapes that are not KernelBench's
(SHAPES): 4096 x 4096, and 4096 in by 11,008 out (a transformer MLP's up projection), with the problem's
own group count where it divides C (else the problem is left out at that shape, and the run says so).

Record kind "batch_sweep": {problem, shape, K, C, tier, M, contender, median_ms, p20_ms, p80_ms, floor_ms,
bytes_ms, flops_ms}.
"""
from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn

from utils import bench, env, ops, precision, results
from utils.chapters.session import COMPILE_MODES, solution_pair
from utils.check import FP32_TIERS, TIERS
from utils.problems import Dims, all_problems, get_problem

MS = tuple(2**i for i in range(15))  # 1, 2, 4, ..., 16384
KIND = "batch_sweep"
ROW_KEY = ("problem", "shape", "tier", "M", "contender")  # what one row measures: never in two cards' shares


# shape name -> (K, C): in and out features; None: the problem's own
SHAPES = {"own": None, "4096x4096": (4096, 4096), "4096x11008": (4096, 11008)}


def dims_at(pid: int, M: int, shape: str = "own") -> Dims:
    """The problem at batch M: its own K, C and groups, or those of SHAPES[shape] with its own group count
    (ValueError where that count does not divide C)."""
    d = get_problem(pid).dims("full")
    if SHAPES[shape] is None:
        return Dims(M, d.in_features, d.out_features, d.groups)
    K, C = SHAPES[shape]
    if C % d.groups:
        raise ValueError(f"problem {pid}'s {d.groups} groups do not divide C = {C} (shape {shape})")
    return Dims(M, K, C, d.groups)


def shapes_of(pid: int, shapes=tuple(SHAPES)) -> list[str]:
    """The shapes of `shapes` the problem can take (its group count divides C)."""
    found = []
    for shape in shapes:
        try:
            dims_at(pid, 1, shape)
        except ValueError:
            continue
        found.append(shape)
    return found


def floor_of(pid: int, M: int, ceilings: bench.Ceilings, tier: str, shape: str = "own") -> dict:
    """The point's floor, and its two parts: bytes over bandwidth, FLOPs over the tier's peak. The strict
    tier's peak is the faster of fp32 SIMT (cuBLAS SGEMM) and a third of TF32's: 3xTF32 (chapter 08)
    meets the strict tier with three TF32 products per product, so it can beat SGEMM, and no fp32-accurate
    GEMM the workbook knows is faster than that."""
    cost = bench.problem_cost(pid, dims_at(pid, M, shape))
    fl = bench.floors(cost, ceilings)
    strict_tflops = max(ceilings.fp32_tflops, ceilings.tf32_tflops / 3)
    flops_ms = fl["tf32_ms"] if tier == "tf32" else cost.flops / (strict_tflops * 1e12) * 1e3
    return {"floor_ms": max(fl["memory_ms"], flops_ms), "bytes_ms": fl["memory_ms"], "flops_ms": flops_ms}


def crossover_M(pid: int, ceilings: bench.Ceilings, tier: str, shape: str = "own") -> float:
    """The batch where the FLOPs' time passes the bytes' time: the weight-bandwidth regime ends there."""
    one, two = (floor_of(pid, m, ceilings, tier, shape) for m in (1024, 2048))
    # both parts are affine in M: solve bytes(M) = flops(M) from two points
    db, df = two["bytes_ms"] - one["bytes_ms"], two["flops_ms"] - one["flops_ms"]
    return 1024 + (one["bytes_ms"] - one["flops_ms"]) * 1024 / (df - db)


def contenders(pid: int, M: int, seed: int = 0, modes=tuple(COMPILE_MODES), shape: str = "own") -> tuple[dict, torch.Tensor]:
    """{name: callable} at batch M (and shape) on the GPU, and the input they share."""
    dims = dims_at(pid, M, shape)
    ref, new = solution_pair(pid, dims, "cuda", seed)
    x = torch.rand(M, dims.in_features, device="cuda", generator=torch.Generator("cuda").manual_seed(seed))
    linear = next(m for m in ref.modules() if isinstance(m, nn.Linear))  # gemm, matmul or fc, as the problem names it
    w, b = linear.weight, linear.bias
    fns = {"eager": lambda: ref(x)}
    # static shapes: one compile per M, as a user who compiles for the batch they run gets
    fns |= {name: (lambda m=torch.compile(ref, mode=mode, dynamic=False): m(x)) for name, mode in COMPILE_MODES.items()
            if name in modes}
    fns |= {"ours": lambda: new(x), "cuBLAS GEMM": lambda: F.linear(x, w, b), "ours, GEMM": lambda: ops.linear(x, w, b)}
    return fns, x


def measure(pids, tiers, ms, *, reps: int = 30, ceilings: bench.Ceilings, modes=tuple(COMPILE_MODES),
            shapes=("own",), progress: bool = True) -> list[dict]:
    rows = []
    config = torch._dynamo.config
    limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, limit, max(64, getattr(config, limit)))  # one compile per M, each kept
    for pid in pids:
        left_out = [s for s in shapes if s not in shapes_of(pid, shapes)]
        if left_out and progress:
            print(f"problem {pid}: left out at {', '.join(left_out)} (its groups do not divide C there)", flush=True)
        for shape, tier in ((shape, tier) for shape in shapes_of(pid, shapes) for tier in tiers):
            torch._dynamo.reset()
            K, C = dims_at(pid, 1, shape).in_features, dims_at(pid, 1, shape).out_features
            with precision.tf32(tier == "tf32"), torch.no_grad():
                for M in ms:
                    fns, _ = contenders(pid, M, modes=modes, shape=shape)
                    expected = fns["eager"]()
                    for name in fns:
                        got = fns[name]()
                        if "GEMM" not in name and not torch.allclose(got, expected, atol=TIERS[tier].atol,
                                                                 rtol=TIERS[tier].rtol):
                            raise AssertionError(f"problem {pid}, {shape}, {tier}, M = {M}: {name} differs from eager by "
                                                 f"{(got - expected).abs().max().item():.1e}")
                    times = bench.time_interleaved(fns, reps=reps)
                    floor = floor_of(pid, M, ceilings, tier, shape)
                    for name, t in times.items():
                        rows.append({"problem": pid, "shape": shape, "K": K, "C": C, "tier": tier, "M": M,
                                     "contender": name, "median_ms": t.median, "p20_ms": t.p20, "p80_ms": t.p80, **floor})
                    if progress:
                        best = min(times[n].median for n in ("eager", *modes))
                        print(f"problem {pid} {shape:>10} {tier:>6} M={M:>5}: ours {times['ours'].median:.4f} ms, best other "
                              f"{best:.4f} ms ({best / times['ours'].median:.2f}x), floor {floor['floor_ms']:.4f} ms",
                              flush=True)
                    del fns
            torch.cuda.empty_cache()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m utils.chapters.batch_sweep", description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, nargs="*", default=[p.id for p in all_problems()])
    ap.add_argument("--tiers", nargs="*", default=list(FP32_TIERS), choices=list(FP32_TIERS))
    ap.add_argument("--ms", type=int, nargs="*", default=list(MS))
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=list(SHAPES),
                    help="own: each problem's K and C; the others: K x C for every problem whose groups divide C")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--modes", nargs="*", default=list(COMPILE_MODES), choices=list(COMPILE_MODES),
                    help="the torch.compile modes to time (max-autotune's compile takes about a minute per point)")
    ap.add_argument("--results-dir", default=None)
    ap.add_argument("--record", action=argparse.BooleanOptionalAction, default=True)
    results.add_share_options(ap, "sweep")
    args = ap.parse_args(argv)
    if env.mode() != "gpu":
        print("batch_sweep: no GPU here; the recorded sweeps are results/<device>/batch_sweep.json")
        return 0
    if args.merge:
        rows, sources = results.merged_rows(args.merge, env.device_slug(), ROW_KEY)
        print("recorded", results.record(KIND, rows, results_dir=args.results_dir,
                                         notes=f"python -m utils.chapters.batch_sweep --merge; {sources}"))
        return 0
    recorded = results.load("ceilings")
    ceilings = bench.Ceilings.from_record(recorded) if recorded and recorded["device"]["slug"] == env.device_slug() \
        else bench.measure_ceilings()
    rows = measure(args.problems, args.tiers, args.ms, reps=args.reps, ceilings=ceilings, modes=args.modes,
                   shapes=args.shapes)
    if args.rows_out:
        results.write_rows(args.rows_out, rows, ceilings=ceilings.source)
        print(f"wrote {len(rows)} rows to {args.rows_out}")
    elif args.record:
        print("recorded", results.record(KIND, rows, results_dir=args.results_dir,
                                         notes=f"python -m utils.chapters.batch_sweep; ceilings {ceilings.source}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
