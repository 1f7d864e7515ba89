"""The GEMM ladder (notebooks 02-03, and 08 for the tensor-core rungs): every rung verified
against float64 at its precision's tier, then timed side by side with cuBLAS.

    python -m utils.ladder                             # the SIMT ladder at the problems' shape, 1024 x 8192 x 8192
    python -m utils.ladder --shape 1000 1000 1000 --reps 20 --no-record
    python -m utils.ladder --tensor-cores              # rung 7 and the tensor-core rungs (8 on)
    python -m utils.ladder --tune                      # rung 7 over slice depth x pipeline stages

A rung is a file kernels/gemm_NN_<idea>.cu exporting `gemm(x, w) = x @ w.T` for x (M, K) and
w (N, K), nn.Linear's layout. Rungs 1-7 run on the FP32 units (SIMT, notebooks 02-03), rungs 8 on
on tensor cores (notebooks 08-09): `rungs()` is the first family, `rungs("tensor_cores")` the second,
`all_rungs()` both.

Each rung declares its precision in a line of its own, `// @precision: tf32` (absent: fp32). Its
tier (utils.check.TIERS) follows: fp32 -> strict (atol = rtol = 1e-4), tf32 -> tf32 (1e-2), bf16 ->
bf16 (5e-2; a bf16 rung takes bf16 operands and returns bf16, as F.linear does). The runner loads
every rung, checks it against torch.nn.functional.linear in float64 (every element, at the rung's
tier) on inputs like the problems' (x = torch.rand, w as nn.Linear initialises it; rounded to bf16
for a bf16 rung, the reference then the exact product of the rounded values), refuses to time a rung
that is wrong, then times the rungs against the cuBLAS of their precision: fp32 rungs with cuBLAS
SGEMM (TF32 off, contender "cuBLAS"), tf32 rungs with cuBLAS with TF32 on ("cuBLAS TF32"), bf16 rungs
with cuBLAS's bf16 GEMM ("cuBLAS bf16"), each group in one run. It records kind "ladder" (the SIMT ladder) or
"ladder_tensor_cores" under results/<device>/, with TFLOP/s and % of the reference per rung.

--tune rebuilds rung 7 (kernels/common/gemm_pipelined.cuh) for every slice depth BK and number
of pipeline stages in TUNE_GRID whose shared memory fits an SM, builds them side by side, verifies
each, and times them with cuBLAS in one run (kind "ladder_tuning"). Its best pair is what the
header's defaults should be; the test suite checks that they are.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from typing import Callable

import torch

from utils import REPO, bench, build, env, precision, results
from utils.check import TIERS

REFERENCE = "cuBLAS"  # cuBLAS SGEMM, TF32 off: the yardstick of the fp32 rungs
TF32_REFERENCE = "cuBLAS TF32"  # the same call with TF32 allowed: the yardstick of the tf32 rungs
SHAPE = (1024, 8192, 8192)  # M, N, K of problems 94, 75 and 62
TENSOR_CORES_FROM = 8  # rungs 1-7 run on the FP32 units (notebooks 02-03), 8 on on tensor cores (notebooks 08-09)
FAMILIES = ("simt", "tensor_cores", "all")

# A rung's declared precision -> the tier it is verified at, and the cuBLAS it is timed against.
TIER_OF_PRECISION = {"fp32": "strict", "tf32": "tf32", "bf16": "bf16"}
REFERENCE_OF_TIER = {"strict": REFERENCE, "tf32": TF32_REFERENCE, "bf16": "cuBLAS bf16"}
DTYPE_OF_TIER = {"strict": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16}  # the operands
_PRECISION_MARK = re.compile(r"^[ \t]*//[ \t]*@precision:[ \t]*(?P<precision>\S+)[ \t]*$", re.MULTILINE)


def all_rungs() -> list[str]:
    """Every rung in ladder order: kernels/gemm_01_*.cu, gemm_02_*.cu, ..."""
    return sorted(p.stem for p in (REPO / "kernels").glob("gemm_[0-9][0-9]_*.cu"))


def rung_number(name: str) -> int:
    return int(name.split("_")[1])


def rungs(family: str = "simt") -> list[str]:
    """The rungs of one family in ladder order: "simt" (1-7, the default: the ladder of notebooks
    02-03), "tensor_cores" (8 on) or "all"."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    names = all_rungs()
    if family == "simt":
        return [n for n in names if rung_number(n) < TENSOR_CORES_FROM]
    if family == "tensor_cores":
        return [n for n in names if rung_number(n) >= TENSOR_CORES_FROM]
    return names


def declared_precision(source: str, filename: str = "<kernel source>") -> str:
    """The precision a kernel's `// @precision: tf32` line declares; "fp32" when it has none."""
    marks = {m.group("precision") for m in _PRECISION_MARK.finditer(source)}
    if len(marks) > 1:
        raise ValueError(f"{filename}: more than one `// @precision:` line ({', '.join(sorted(marks))}); keep one")
    precision_ = marks.pop() if marks else "fp32"
    if precision_ not in TIER_OF_PRECISION:
        raise ValueError(f"{filename}: `// @precision: {precision_}` is not one of {sorted(TIER_OF_PRECISION)}")
    return precision_


def precision_of(name: str) -> str:
    """A rung's declared precision: "fp32", "tf32" or "bf16"."""
    return declared_precision(build.kernel_source(name), f"kernels/{name}.cu")


def tier_of(name: str) -> str:
    """The tier (a key of utils.check.TIERS) a rung is verified at: its declared precision's."""
    return TIER_OF_PRECISION[precision_of(name)]


def groups(names: list[str]) -> list[tuple[str, str, list[str]]]:
    """(tier, reference contender, rungs) for each tier among `names`, strict first, rungs in the
    given order: what measure() times together."""
    tiers = {name: tier_of(name) for name in names}
    return [(tier, REFERENCE_OF_TIER[tier], [n for n in names if tiers[n] == tier])
            for tier in REFERENCE_OF_TIER if tier in tiers.values()]


def load(name: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    return build.load_kernel(name).gemm


def dtype_of(name: str) -> torch.dtype:
    """The dtype of a rung's operands and output: float32, or bfloat16 for a bf16 rung."""
    return DTYPE_OF_TIER[tier_of(name)]


def operands(M: int, N: int, K: int, *, seed: int = 0, device: str = "cuda") -> tuple[torch.Tensor, torch.Tensor]:
    """x like the problems' get_inputs (uniform [0, 1)), w like nn.Linear's init (U(±1/√K)); never zeros."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(M, K, generator=g)
    w = (torch.rand(N, K, generator=g) * 2 - 1) / math.sqrt(K)
    return x.to(device), w.to(device)


def verify(fn, x: torch.Tensor, w: torch.Tensor, tier: str = "strict", *,
           reference: torch.Tensor | None = None) -> tuple[bool, str]:
    """fn(x, w) against x @ w.T in float64, every element, at `tier` (a key of utils.check.TIERS), the
    output in x's dtype; the output is poisoned first (NaN of that dtype left in the allocator's cache) so
    an element never written fails.
    `reference`, a float64 product computed once, replaces x @ w.T: the exact product of other operands
    (raw ones, where x and w are rounded copies), or one shared by several checks."""
    tolerance = TIERS[tier]
    ref = torch.nn.functional.linear(x.double(), w.double()) if reference is None else reference
    # freed at once: a NaN block in the cache (in the output's dtype: a float32 NaN is a NaN and a zero in bf16)
    torch.full((x.shape[0], w.shape[0]), float("nan"), dtype=x.dtype, device=x.device)
    out = fn(x, w)
    if out.shape != ref.shape or out.dtype != x.dtype:
        return False, f"shape {tuple(out.shape)} {out.dtype}, expected {tuple(ref.shape)} {x.dtype}"
    close = torch.isclose(out.double(), ref, atol=tolerance.atol, rtol=tolerance.rtol)
    err = (out.double() - ref).abs()
    detail = f"max abs err {err.max().item():.1e}, {int((~close).sum())} of {close.numel()} elements off"
    return bool(close.all()), detail


def measure(shape=SHAPE, *, reps: int = 20, names: list[str] | None = None, ceilings: bench.Ceilings | None = None,
            progress: bool = True) -> list[dict]:
    """Verify every rung at `shape` at its tier, then time each precision's rungs and their cuBLAS in
    one run (fp32 rungs with TF32 off, tf32 rungs with TF32 on, bf16 rungs on the operands rounded to bf16).
    Default: the SIMT ladder (rungs()).
    Rows in ladder order, each group's reference after it; each row has its tier, its reference
    and pct_of_cublas, the % of that reference."""
    M, N, K = shape
    names = names or rungs()
    modules = build.load_kernels(names)  # the cold builds side by side, before anything is timed
    x32, w32 = operands(M, N, K)
    rows = []
    for tier, reference, group in groups(names):
        x, w = x32.to(DTYPE_OF_TIER[tier]), w32.to(DTYPE_OF_TIER[tier])
        flags = precision.ieee_fp32() if tier == "strict" else precision.tf32(True)
        with flags:  # the comparison is like against like: SIMT/3xTF32 against SGEMM, TF32 against TF32
            contenders = {}
            for name in group:
                fn = modules[name].gemm
                ok, detail = verify(fn, x, w, tier)
                if progress:
                    print(f"  {name:<24} {'ok' if ok else 'WRONG'} ({tier} tier): {detail}", flush=True)
                if not ok:
                    raise AssertionError(f"{name} is wrong at {M}x{N}x{K} ({detail}); not timing a wrong kernel")
                contenders[name] = lambda fn=fn: fn(x, w)
            contenders[reference] = lambda: torch.nn.functional.linear(x, w)
            # bench's costs and ceilings are fp32's and TF32's: a bf16 group gets its TFLOP/s and no floor
            cost = bench.gemm_cost(M, N, K) if DTYPE_OF_TIER[tier] == torch.float32 else None
            timed = bench.compare(contenders, cost=cost, ceilings=ceilings, baseline=reference,
                                  reps=reps, progress=progress)
        for row in timed:
            row.setdefault("tflops", 2 * M * N * K / (row["median_ms"] * 1e-3) / 1e12)
            row["shape"] = [M, N, K]
            row["tier"] = tier
            row["reference"] = reference
            row["pct_of_cublas"] = 100 * row.pop("speedup")  # the reference's time / this one's
        rows += timed
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


def tune(shape=SHAPE, *, reps: int = 20, grid: list[tuple[int, int]] | None = None, jobs: int | None = None,
         progress: bool = True) -> list[dict]:
    """Rung 7 at every (BK, STAGES) of `grid`: built side by side (build.load_kernels, `jobs` at a time),
    each verified on odd shapes and at `shape`, then all timed with cuBLAS in one run. Rows in grid
    order, cuBLAS last."""
    grid = grid or tune_grid()
    label = {v: f"{TUNED} BK={v[0]} STAGES={v[1]}" for v in grid}
    if progress:
        print(f"building {len(grid)} variants of {TUNED} (the cold ones side by side)...", flush=True)
    modules = build.load_kernels({label[v]: build.Variant(TUNED, tune_flags(*v)) for v in grid}, jobs)
    fns = {v: modules[label[v]].gemm for v in grid}
    for s in [*ODD_SHAPES, tuple(shape)]:
        x, w = operands(*s, seed=sum(s))
        for (bk, st), fn in fns.items():
            ok, detail = verify(fn, x, w)
            if not ok:
                raise AssertionError(f"{TUNED} with BK={bk}, STAGES={st} is wrong at {s} ({detail}); not timing it")
    M, N, K = shape
    x, w = operands(M, N, K)
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
    references = {r.get("reference", REFERENCE) for r in rows}
    if references == {REFERENCE}:  # the SIMT ladder, as it always printed
        lines = [f"{'rung':<24} {'median ms':>10} {'TFLOP/s':>8} {'% of cuBLAS':>12}"]
        lines += [f"{r['contender']:<24} {r['median_ms']:10.3f} {r['tflops']:8.2f} {r['pct_of_cublas']:11.1f}%"
                  for r in rows]
        return "\n".join(lines)
    lines = [f"{'rung':<24} {'median ms':>10} {'TFLOP/s':>8} {'% of ref':>9}  reference"]
    lines += [f"{r['contender']:<24} {r['median_ms']:10.3f} {r['tflops']:8.2f} {r['pct_of_cublas']:8.1f}%  "
              f"{r.get('reference', REFERENCE)}" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m utils.ladder", description=__doc__.splitlines()[0])
    ap.add_argument("--shape", nargs=3, type=int, default=SHAPE, metavar=("M", "N", "K"))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rungs", nargs="*", help="a selection (default: the SIMT rungs, 1-7)")
    ap.add_argument("--tensor-cores", action="store_true",
                    help="rung 7 and the tensor-core rungs (8 on), each against the cuBLAS of its precision")
    ap.add_argument("--no-record", action="store_true", help="print only; record nothing under results/")
    ap.add_argument("--tune", action="store_true", help="time rung 7 over slice depth x pipeline stages instead")
    args = ap.parse_args(argv)

    if env.mode() != "gpu":
        print("the ladder runs on a GPU; nothing to measure on this machine.")
        return 0
    recorded = results.load("ceilings")  # this GPU's measured ceilings, for the floors; else the datasheet's
    ceilings = bench.Ceilings.from_record(recorded) if recorded else None
    if args.tune:
        rows = tune(tuple(args.shape), reps=args.reps)
        kind, notes = "ladder_tuning", f"python -m utils.ladder --tune, shape {list(args.shape)}"
    else:
        names = args.rungs or ([TUNED, *rungs("tensor_cores")] if args.tensor_cores else rungs())
        rows = measure(tuple(args.shape), reps=args.reps, names=names, ceilings=ceilings)
        simt = all(rung_number(n) < TENSOR_CORES_FROM for n in names)
        kind = "ladder" if simt else "ladder_tensor_cores"
        notes = f"python -m utils.ladder{'' if simt else ' (tensor cores)'}, shape {list(args.shape)}"
    print(format_ladder(rows))
    if not args.no_record:
        print("recorded", results.record(kind, rows, notes=notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
