"""The GEMM ladder (notebooks 02-03): every rung verified against cuBLAS, then timed side by side.

    python -m utils.ladder                             # the problems' shape, 1024 x 8192 x 8192
    python -m utils.ladder --shape 1000 1000 1000 --reps 20 --no-record
    python -m utils.ladder --tune                      # rung 7 over slice depth x pipeline stages

A rung is a file kernels/gemm_NN_<idea>.cu exporting `gemm(x, w) = x @ w.T` for x (M, K) and
w (N, K), nn.Linear's layout. The runner loads every rung, checks it against
torch.nn.functional.linear in float64 (every element, strict tier) on inputs like the
problems' (x = torch.rand, w as nn.Linear initialises it), refuses to time a rung that is
wrong, then times every rung and cuBLAS SGEMM (TF32 off) in one run and records kind
"ladder" under results/<device>/ with TFLOP/s and % of cuBLAS per rung.

--tune rebuilds rung 7 (kernels/common/gemm_pipelined.cuh) for every slice depth BK and number
of pipeline stages in TUNE_GRID whose shared memory fits an SM, builds them in parallel, verifies
each, and times them with cuBLAS in one run (kind "ladder_tuning"). Its best pair is what the
header's defaults should be; the test suite checks that they are.
"""
from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import Callable

import torch

from utils import REPO, bench, build, precision
from utils.check import TIERS

REFERENCE = "cuBLAS"
SHAPE = (1024, 8192, 8192)  # M, N, K of problems 94, 75 and 62


def rungs() -> list[str]:
    """The rungs in ladder order: kernels/gemm_01_*.cu, gemm_02_*.cu, ..."""
    return sorted(p.stem for p in (REPO / "kernels").glob("gemm_[0-9][0-9]_*.cu"))


def load(name: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    return build.load_kernel(name).gemm


def operands(M: int, N: int, K: int, *, seed: int = 0, device: str = "cuda") -> tuple[torch.Tensor, torch.Tensor]:
    """x like the problems' get_inputs (uniform [0, 1)), w like nn.Linear's init (U(±1/√K)); never zeros."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(M, K, generator=g)
    w = (torch.rand(N, K, generator=g) * 2 - 1) / math.sqrt(K)
    return x.to(device), w.to(device)


def verify(fn, x: torch.Tensor, w: torch.Tensor) -> tuple[bool, str]:
    """fn(x, w) against x @ w.T in float64, every element, at the strict tier; the output is
    poisoned first (NaN left in the allocator's cache) so an element never written fails."""
    ref = torch.nn.functional.linear(x.double(), w.double())
    torch.full((x.shape[0], w.shape[0]), float("nan"), device=x.device)  # freed at once: a NaN block in the cache
    out = fn(x, w)
    tier = TIERS["strict"]
    if out.shape != ref.shape or out.dtype != torch.float32:
        return False, f"shape {tuple(out.shape)} {out.dtype}, expected {tuple(ref.shape)} float32"
    close = torch.isclose(out.double(), ref, atol=tier.atol, rtol=tier.rtol)
    err = (out.double() - ref).abs()
    detail = f"max abs err {err.max().item():.1e}, {int((~close).sum())} of {close.numel()} elements off"
    return bool(close.all()), detail


def measure(shape=SHAPE, *, reps: int = 20, names: list[str] | None = None, ceilings: bench.Ceilings | None = None,
            progress: bool = True) -> list[dict]:
    """Verify every rung at `shape`, then time them and cuBLAS in one run. Rows in ladder order, cuBLAS last."""
    M, N, K = shape
    x, w = operands(M, N, K)
    names = names or rungs()
    with precision.ieee_fp32():  # cuBLAS in plain fp32: the comparison is SIMT against SIMT
        contenders = {}
        for name in names:
            fn = load(name)
            ok, detail = verify(fn, x, w)
            if progress:
                print(f"  {name:<24} {'ok' if ok else 'WRONG'}: {detail}", flush=True)
            if not ok:
                raise AssertionError(f"{name} is wrong at {M}x{N}x{K} ({detail}); not timing a wrong kernel")
            contenders[name] = lambda fn=fn: fn(x, w)
        contenders[REFERENCE] = lambda: torch.nn.functional.linear(x, w)
        rows = bench.compare(contenders, cost=bench.gemm_cost(M, N, K), ceilings=ceilings, baseline=REFERENCE,
                             reps=reps, progress=progress)
    for row in rows:
        row["shape"] = [M, N, K]
        row["pct_of_cublas"] = 100 * row.pop("speedup")  # cuBLAS time / rung time
    return rows


TUNED = "gemm_07_pipelined"
TUNE_GRID = [(bk, stages) for bk in (8, 16, 32, 64) for stages in (2, 3, 4)]
SMEM_PER_SM = 227 * 1024  # the most shared memory one block may have on sm_90
ODD_SHAPES = [(37, 129, 65), (1000, 1000, 1000)]


def stage_bytes(bk: int) -> int:
    """Shared memory of one stage of rung 7: a BK x (128 + 4) float tile of x and one of w."""
    return 2 * bk * (128 + 4) * 4


def tune_flags(bk: int, stages: int) -> list[str]:
    return [f"-DGEMM07_BK={bk}", f"-DGEMM07_STAGES={stages}"]


def tune_grid() -> list[tuple[int, int]]:
    """(BK, STAGES) pairs whose shared memory fits one block on an SM."""
    return [(bk, st) for bk, st in TUNE_GRID if stage_bytes(bk) * st <= SMEM_PER_SM]


def _build(flags: list[str]) -> list[str]:
    build.load_kernel(TUNED, extra_cuda_cflags=flags)
    return flags


def tune(shape=SHAPE, *, reps: int = 20, grid: list[tuple[int, int]] | None = None, workers: int | None = None,
         progress: bool = True) -> list[dict]:
    """Rung 7 at every (BK, STAGES) of `grid`: built in parallel, each verified on odd shapes and at
    `shape`, then all timed with cuBLAS in one run. Rows in grid order, cuBLAS last."""
    grid = grid or tune_grid()
    workers = workers or max(1, min(len(grid), (os.cpu_count() or 2) - 1))
    if progress:
        print(f"building {len(grid)} variants of {TUNED} with {workers} parallel compilers...", flush=True)
    # spawn, not fork: a forked child of a process that has initialised CUDA cannot use CUDA.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for flags in pool.map(_build, [tune_flags(*v) for v in grid]):
            if progress:
                print(f"  built {' '.join(flags)}", flush=True)
    fns = {(bk, st): build.load_kernel(TUNED, extra_cuda_cflags=tune_flags(bk, st)).gemm for bk, st in grid}
    for s in [*ODD_SHAPES, tuple(shape)]:
        x, w = operands(*s, seed=sum(s))
        for (bk, st), fn in fns.items():
            ok, detail = verify(fn, x, w)
            if not ok:
                raise AssertionError(f"{TUNED} with BK={bk}, STAGES={st} is wrong at {s} ({detail}); not timing it")
    M, N, K = shape
    x, w = operands(M, N, K)
    label = {v: f"{TUNED} BK={v[0]} STAGES={v[1]}" for v in grid}
    with precision.ieee_fp32():
        contenders = {label[v]: (lambda fn=fn: fn(x, w)) for v, fn in fns.items()}
        contenders[REFERENCE] = lambda: torch.nn.functional.linear(x, w)
        rows = bench.compare(contenders, cost=bench.gemm_cost(M, N, K), baseline=REFERENCE, reps=reps,
                             progress=progress)
    default = defaults()
    for row in rows:
        v = next((v for v in grid if label[v] == row["contender"]), None)
        row.update(kernel=TUNED, shape=[M, N, K], bk=v and v[0], stages=v and v[1], default=v == default,
                   pct_of_cublas=100 * row.pop("speedup"))
    return rows


def defaults(header: str = "common/gemm_pipelined.cuh") -> tuple[int, int]:
    """Rung 7's default (BK, STAGES), read from the #defines in its header."""
    text = (REPO / "kernels" / header).read_text()
    value = {name: int(re.search(rf"#define {name} (\d+)", text).group(1)) for name in ("GEMM07_BK", "GEMM07_STAGES")}
    return value["GEMM07_BK"], value["GEMM07_STAGES"]


def format_ladder(rows: list[dict]) -> str:
    lines = [f"{'rung':<24} {'median ms':>10} {'TFLOP/s':>8} {'% of cuBLAS':>12}"]
    lines += [f"{r['contender']:<24} {r['median_ms']:10.3f} {r['tflops']:8.2f} {r['pct_of_cublas']:11.1f}%" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m utils.ladder", description=__doc__.splitlines()[0])
    ap.add_argument("--shape", nargs=3, type=int, default=SHAPE, metavar=("M", "N", "K"))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rungs", nargs="*", help="a selection (default: every kernels/gemm_NN_*.cu)")
    ap.add_argument("--no-record", action="store_true", help="print only; record nothing under results/")
    ap.add_argument("--tune", action="store_true", help="time rung 7 over slice depth x pipeline stages instead")
    args = ap.parse_args(argv)

    from utils import env, results

    if env.mode() != "gpu":
        print("the ladder runs on a GPU; nothing to measure on this machine.")
        return 0
    recorded = results.load("ceilings")  # this GPU's measured ceilings, for the floors; else the datasheet's
    ceilings = bench.Ceilings.from_record(recorded) if recorded else None
    if args.tune:
        rows = tune(tuple(args.shape), reps=args.reps)
        kind, notes = "ladder_tuning", f"python -m utils.ladder --tune, shape {list(args.shape)}"
    else:
        rows = measure(tuple(args.shape), reps=args.reps, names=args.rungs, ceilings=ceilings)
        kind, notes = "ladder", f"python -m utils.ladder, shape {list(args.shape)}"
    print(format_ladder(rows))
    if not args.no_record:
        print("recorded", results.record(kind, rows, notes=notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
