"""The GEMM ladder (notebooks 02-03): every rung verified against cuBLAS, then timed side by side.

    python -m utils.ladder                             # the problems' shape, 1024 x 8192 x 8192
    python -m utils.ladder --shape 1000 1000 1000 --reps 20 --no-record

A rung is a file kernels/gemm_NN_<idea>.cu exporting `gemm(x, w) = x @ w.T` for x (M, K) and
w (N, K), nn.Linear's layout. The runner loads every rung, checks it against
torch.nn.functional.linear in float64 (every element, strict tier) on inputs like the
problems' (x = torch.rand, w as nn.Linear initialises it), refuses to time a rung that is
wrong, then times every rung and cuBLAS SGEMM (TF32 off) in one run and records kind
"ladder" under results/<device>/ with TFLOP/s and % of cuBLAS per rung.
"""
from __future__ import annotations

import argparse
import math
import sys
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
    args = ap.parse_args(argv)

    from utils import env, results

    if env.mode() != "gpu":
        print("the ladder runs on a GPU; nothing to measure on this machine.")
        return 0
    recorded = results.load("ceilings")  # this GPU's measured ceilings, for the floors; else the datasheet's
    ceilings = bench.Ceilings.from_record(recorded) if recorded else None
    rows = measure(tuple(args.shape), reps=args.reps, names=args.rungs, ceilings=ceilings)
    print(format_ladder(rows))
    if not args.no_record:
        print("recorded", results.record("ladder", rows, notes=f"python -m utils.ladder, shape {list(args.shape)}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
