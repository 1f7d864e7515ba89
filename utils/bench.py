"""Timing, FLOP and byte counts, the floors they imply, and the device's ceilings.

    t = time_ms(lambda: model(x))                  # CUDA events, warm-up, L2 flush, median
    cost = problem_cost(94)                        # FLOPs and minimum bytes of the whole forward
    floors(cost, DATASHEET_H100)                   # {"fp32_ms", "tf32_ms", "memory_ms"}
    rows = compare({"eager": f, "torch.compile": g}, cost=cost, ceilings=c)
    print(format_table(rows))

    python -m utils.bench --ceilings               # measure this GPU's ceilings, record them

The method (docs/ARCHITECTURE.md, "Performance method"): count first, measure the ceilings on
the same GPU, time with events after a warm-up and with a cold L2, report the median,
compare every contender in one run, never time on zeros. A contender faster than the
floors allow is flagged, not celebrated: it is almost always skipping work.
"""
from __future__ import annotations

import argparse
import math
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Callable

import torch

from utils import precision, results
from utils.problems import get_problem

# A contender is flagged when its median beats the lowest applicable floor by more than
# this margin (the ceilings themselves are measured with some noise).
FLOOR_MARGIN = 0.9
FLAG_TOO_FAST = "faster than the floor allows: check it computes everything (cached result? skipped work?)"

FP32_BYTES = 4


# --------------------------------------------------------------------------- timing

@dataclass(frozen=True)
class Timing:
    """Summary of repeated timings, all in milliseconds."""
    median: float
    p20: float
    p80: float
    min: float
    n: int

    @classmethod
    def from_times(cls, times_ms: list[float]) -> Timing:
        xs = sorted(times_ms)
        if not xs:
            raise ValueError("no timings to summarise (reps must be >= 1)")
        return cls(_quantile(xs, 0.5), _quantile(xs, 0.2), _quantile(xs, 0.8), xs[0], len(xs))


def _quantile(sorted_xs: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    pos = q * (len(sorted_xs) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def require_gpu(what: str) -> None:
    """Raise, naming `what`, where torch sees no CUDA GPU (and where recorded measurements are instead)."""
    if not torch.cuda.is_available():
        raise RuntimeError(
            f"{what} needs a CUDA GPU, and torch sees none on this machine "
            f"(torch {torch.__version__}, built for CUDA {torch.version.cuda or 'none'}). "
            "Recorded GPU measurements are under results/<device>/."
        )


# What the L2 holds when a timed call starts (time_ms's `l2`):
#   "clean"  nothing of the call's data, and nothing dirty: before each call a kernel *reads* a
#            buffer of twice the L2's size. That evicts whatever the previous call left, writing
#            back its dirty lines then, outside the timed region, and leaves the L2 full of clean
#            lines that cost nothing to evict. The default.
#   "dirty"  the common idiom, *zeroing* such a buffer (buffer.zero_()): the data is gone too,
#            but the L2 is left full of dirty lines, and writing them back to DRAM is charged to
#            the timed call, whose reads and writes evict them. On an H100 at 33.5 MB that made a
#            copy 28% slower (27.6 vs 21.5 us) and a kernel that only reads 35% slower (19.2
#            vs 14.2 us): a cost of the benchmark, not of the kernel, and a ratio against a
#            copy measured this way flatters every kernel slower than the copy
#            (results/<device>/logs/exploration/2_l2_flush_modes.log).
#   "warm"   no flush: whatever the previous call left, typically its own inputs and outputs.
L2_STATES = ("clean", "dirty", "warm")


@lru_cache(maxsize=None)
def _l2_flush_buffer(device_index: int, l2: str) -> torch.Tensor:
    # One buffer per state: the "clean" one is written once, here, and from then on only read,
    # so its lines are never dirty; the "dirty" one is zeroed before every call.
    l2_bytes = torch.cuda.get_device_properties(device_index).L2_cache_size
    return torch.ones(2 * l2_bytes // FP32_BYTES, dtype=torch.float32, device=f"cuda:{device_index}")


def l2_flush(l2: str) -> Callable[[], object] | None:
    """What to call before each timed call to leave the L2 as `l2` says (L2_STATES): "clean" reads a
    buffer of twice the L2's size (its .amax), "dirty" zeroes one, "warm" flushes nothing (None)."""
    if l2 == "warm":
        return None
    buffer = _l2_flush_buffer(torch.cuda.current_device(), l2)
    return buffer.amax if l2 == "clean" else buffer.zero_


def check_timing_args(l2: str, reps: int) -> None:
    """The timers' arguments, checked before anything touches a GPU."""
    if l2 not in L2_STATES:
        raise ValueError(f"l2 must be one of {L2_STATES}, got {l2!r}")
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")


# The timer every chapter calls. Notebook 01 ("The timer, line by line") shows this very function in
# a cell and says what each line is for; tests/test_bench.py checks that the two are the same code.
# How it times: the GPU stamps two CUDA events around each call, so the time is the GPU's, from the
# moment the stream reaches the first event: a call whose CPU side (Python, launches) is slower than
# its kernels is charged for it, as in a real model. By default the CPU runs ahead and the calls
# queue back to back (the steady state of a model called in a loop); sync_each=True synchronizes
# before every call (KernelBench's per-trial protocol), so the launch cost lands inside the events.
def time_ms(fn: Callable[[], object], *, reps: int = 50, warmup: int = 10, l2: str = "clean",
            sync_each: bool = False) -> Timing:
    """Time fn() on the current CUDA stream: `warmup` calls, then `reps` timed ones; their Timing (ms)."""
    check_timing_args(l2, reps)
    require_gpu("time_ms")
    flush = l2_flush(l2)  # "clean": a read of twice the L2, so none of fn's data is left in it
    for _ in range(warmup):  # untimed: the first calls pay for allocation, caches, lazy loading
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    torch.cuda.synchronize()  # nothing of the warm-up is left running when the first event is recorded
    for start, end in zip(starts, ends):
        if flush is not None:
            flush()  # before the start event: the flush is not timed
        if sync_each:
            torch.cuda.synchronize()  # the GPU idle, so the call's launch cost lands inside the events
        start.record()  # enqueued: the GPU stamps it when it gets there, as it does end
        fn()
        end.record()
    torch.cuda.synchronize()  # every event reached
    return Timing.from_times([start.elapsed_time(end) for start, end in zip(starts, ends)])


def _event_pairs(reps: int) -> list:
    return [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]


def _timed_call(fn: Callable[[], object], start, end, flush, sync_each: bool) -> None:
    """One timed call as time_ms makes it: the L2 flushed first (outside the events), fn() between the two events."""
    if flush is not None:
        flush()
    if sync_each:
        torch.cuda.synchronize()
    start.record()
    fn()
    end.record()


def _timing_of(events: list) -> Timing:
    return Timing.from_times([start.elapsed_time(end) for start, end in events])


def time_interleaved(fns: dict[str, Callable[[], object]], *, reps: int = 50, warmup: int = 10, l2: str = "clean",
                     sync_each: bool = False, warm_s: float = 0.3) -> dict[str, Timing]:
    """Time several contenders as time_ms times one, but in turn: rep i of every contender before
    rep i + 1 of any, the order rotating by one each rep, so that all of them meet the same state
    of the device. First every contender runs in turn `warmup` times and for at least `warm_s`
    seconds, so that the timing starts from the clock a GPU holds under sustained work.

    Why: a GPU at its power limit lowers its clock within a fraction of a second of heavy work and
    raises it again when idle. Timed one after another, the first contender after a pause gets the
    high clock: on an H100 cuBLAS's TF32 GEMM at 32768 x 4096 x 1024 measured 0.73 ms timed first
    and 0.81-0.84 ms timed after the others, and the spread of a kernel between runs followed where
    it stood in the order (experiments/wgmma_schedule/README.md, "The spread at K = 1024 is the clock").
    """
    check_timing_args(l2, reps)
    if not fns:
        raise ValueError("no contenders to time")
    require_gpu("time_interleaved")
    flush = l2_flush(l2)
    names = list(fns)
    start_s = time.perf_counter()
    rounds = 0
    while rounds < warmup or time.perf_counter() - start_s < warm_s:
        for name in names:
            fns[name]()
        torch.cuda.synchronize()  # the wall clock then counts device time
        rounds += 1
    events = {name: _event_pairs(reps) for name in names}
    for rep in range(reps):
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            _timed_call(fns[name], *events[name][rep], flush, sync_each)
    torch.cuda.synchronize()
    return {name: _timing_of(events[name]) for name in names}


# --------------------------------------------------------------------------- counts

@dataclass(frozen=True)
class Cost:
    """What a computation must do at least: FLOPs, and bytes moved to and from DRAM."""
    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        """FLOPs per byte: where the computation sits on the roofline."""
        return self.flops / self.bytes

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.flops + other.flops, self.bytes + other.bytes)


def gemm_cost(M: int, N: int, K: int) -> Cost:
    """C[M, N] = A[M, K] @ B[K, N] in fp32: 2·M·N·K FLOPs; A and B read once, C written once."""
    return Cost(2 * M * N * K, FP32_BYTES * (M * K + K * N + M * N))


def elementwise_cost(n_read: int, n_written: int, *, flops_per_element: float = 0) -> Cost:
    """An fp32 pass over memory: every element read once and written once.
    `flops_per_element` counts per element written."""
    return Cost(flops_per_element * n_written, FP32_BYTES * (n_read + n_written))


# FLOPs per element of the GEMM's (batch, out) output, after the GEMM. An estimate: every
# add, multiply, compare and transcendental counts 1. Next to the GEMM's 2·in_features
# FLOPs per element it is about 0.1 % (0.7 % for 37, whose in_features is 1024), so its
# exact value never moves a floor.
#   Linear's own bias: 1.  GroupNorm: sum for the mean 1, (x-m)² into the variance 3,
#   normalise (x-m)·rstd 2, affine ·γ+β 2: 8 (per-group rsqrt is negligible).
EPILOGUE_FLOPS_PER_ELEMENT = {
    94: 1 + 1 + 2 + 4 + 8,  # bias, + bias, Hardtanh (min, max), Mish x·tanh(softplus x) (exp, log1p, tanh, ·), GroupNorm
    75: 1 + 8 + 1 + 1,  # bias, GroupNorm, min over channels (1 compare), + bias(1,C,1,1) on the C·N output
    37: 1 + 4 + 1 + 8,  # bias, Swish x·sigmoid(x) (exp, +, ÷, ·), + bias, GroupNorm
    62: 1 + 8 + 2 + 1,  # bias, GroupNorm, LeakyReLU (compare, ·), x + x
}


def problem_cost(problem, scale: str = "full") -> Cost:
    """FLOPs and minimum DRAM bytes of one forward pass of a workbook problem (id or Problem).

    FLOPs: the GEMM's 2·B·I·O plus the epilogue estimate above. Bytes: fp32, x (B·I) read
    once, every parameter read once, the output written once (75's output is (1, C, N, 1):
    C·N elements). Intermediates cost nothing: this is what a perfectly fused kernel moves.
    """

    p = get_problem(problem)
    d = p.dims(scale)
    # Counting parameters on a model built on the meta device keeps the count exact
    # (the problem's own Model, both biases included) without allocating 256 MB of weights.
    with torch.device("meta"):
        n_params = sum(t.numel() for t in p.Model(*p.init_inputs(scale)).parameters())
    n_out = math.prod(p.output_shape(scale))
    flops = 2 * d.batch * d.in_features * d.out_features + EPILOGUE_FLOPS_PER_ELEMENT[p.id] * d.batch * d.out_features
    return Cost(flops, FP32_BYTES * (d.batch * d.in_features + n_params + n_out))


# --------------------------------------------------------------------------- ceilings and floors

@dataclass(frozen=True)
class Ceilings:
    """What the device can do at best: copy bandwidth and cuBLAS GEMM throughput."""
    copy_GBps: float
    fp32_tflops: float
    tf32_tflops: float
    source: str  # "measured on <device> <date>" or "datasheet H100 SXM"

    def entry(self) -> dict:
        """The "ceilings" record entry (results.record("ceilings", [c.entry()]))."""
        return {k: v for k, v in asdict(self).items() if k != "source"}

    @classmethod
    def from_record(cls, record: dict) -> Ceilings:
        """Ceilings from a recorded "ceilings" run (results.load("ceilings"))."""
        e = record["entries"][0]
        source = f"measured on {record['device']['name']} {record['date'][:10]}"
        return cls(e["copy_GBps"], e["fp32_tflops"], e["tf32_tflops"], source)


# NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column: 3.35 TB/s HBM3, 67 TFLOP/s FP32,
# TF32 Tensor Core 989 TFLOP/s *with sparsity*, so 989.4 / 2 = 494.7 TFLOP/s dense.
DATASHEET_H100 = Ceilings(3350, 67.0, 494.7, "datasheet H100 SXM")


def measure_ceilings(*, reps: int = 20, gemm_size: int = 8192) -> Ceilings:
    """Measure this GPU's ceilings: device-to-device copy bandwidth (bytes read + written),
    cuBLAS SGEMM at gemm_size³ with TF32 off, and the same GEMM with TF32 on."""
    require_gpu("measure_ceilings")
    name = torch.cuda.get_device_name()
    date = datetime.now(timezone.utc).date().isoformat()
    return Ceilings(_copy_GBps(reps), *_gemm_tflops(gemm_size, reps), f"measured on {name} {date}")


def _copy_GBps(reps: int) -> float:
    # At least 1 GiB and 8x the L2, so the copy streams from DRAM, not from cache.
    n = max(2**30, 8 * torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size) // FP32_BYTES
    src = torch.rand(n, device="cuda")  # random data, never zeros: some hardware compresses zeros
    dst = torch.empty_like(src)
    t = time_ms(lambda: dst.copy_(src), reps=reps)
    return 2 * n * FP32_BYTES / (t.median * 1e-3) / 1e9


def _gemm_tflops(size: int, reps: int) -> tuple[float, float]:
    """cuBLAS fp32 GEMM throughput (TFLOP/s) with TF32 off, then on."""
    a = torch.randn(size, size, device="cuda")
    b = torch.randn(size, size, device="cuda")
    c = torch.empty(size, size, device="cuda")
    rates = []
    for allowed in (False, True):
        with precision.tf32(allowed):
            t = time_ms(lambda: torch.mm(a, b, out=c), reps=reps)
        rates.append(2 * size**3 / (t.median * 1e-3) / 1e12)
    return rates[0], rates[1]


def floors(cost: Cost, ceilings: Ceilings) -> dict[str, float]:
    """The least time, in ms, each resource needs: FP32 SIMT math, TF32 tensor-core math, DRAM traffic."""
    return {
        "fp32_ms": cost.flops / (ceilings.fp32_tflops * 1e12) * 1e3,
        "tf32_ms": cost.flops / (ceilings.tf32_tflops * 1e12) * 1e3,
        "memory_ms": cost.bytes / (ceilings.copy_GBps * 1e9) * 1e3,
    }


def floor_ms(fl: dict[str, float], *, tf32_allowed: bool) -> float:
    """The floor that applies: the slower of memory and the math the precision setting allows."""
    return max(fl["memory_ms"], fl["tf32_ms"] if tf32_allowed else fl["fp32_ms"])


def floor_flag(median_ms: float, fl: dict[str, float]) -> str:
    """A warning when a time beats even the lowest floor anything could reach (memory, and
    TF32 math, whatever the precision setting), by more than the noise margin; else ""."""
    lowest = max(fl["memory_ms"], fl["tf32_ms"])
    return FLAG_TOO_FAST if median_ms < FLOOR_MARGIN * lowest else ""


# --------------------------------------------------------------------------- side by side

def make_row(contender: str, t: Timing, *, baseline_ms: float | None, cost: Cost | None = None,
             ceilings: Ceilings | None = None, tf32_allowed: bool = False) -> dict:
    """One row of a comparison, from a timing (pure: no GPU needed)."""
    row = {
        "contender": contender,
        "tf32": tf32_allowed,
        "median_ms": t.median,
        "p20_ms": t.p20,
        "p80_ms": t.p80,
        "speedup": baseline_ms / t.median if baseline_ms is not None else None,
        "flag": "",
    }
    if cost is not None:
        fl = floors(cost, ceilings or DATASHEET_H100)
        fmin = floor_ms(fl, tf32_allowed=tf32_allowed)
        row |= {
            "tflops": cost.flops / (t.median * 1e-3) / 1e12,
            "GBps": cost.bytes / (t.median * 1e-3) / 1e9,
            "floor_ms": fmin,
            "pct_of_floor": 100 * fmin / t.median,  # 100 % = runs at the floor
            "flag": floor_flag(t.median, fl),
        }
    return row


def compare(contenders: dict[str, Callable[[], object]], *, cost: Cost | None = None,
            ceilings: Ceilings | None = None, baseline: str | None = "eager", reps: int = 50,
            progress: bool = True, l2: str = "clean", sync_each: bool = False,
            interleave: bool = False) -> list[dict]:
    """Time every contender in this one run, in order, under the current TF32 setting
    (`l2` and `sync_each` as time_ms takes them); interleave=True times them in turn instead
    (time_interleaved: the fair comparison where contenders run at the GPU's power limit).

    Rows: contender, tf32, median_ms, p20_ms, p80_ms, speedup (baseline's median / this
    median), flag; with a cost also tflops, GBps, floor_ms and pct_of_floor (100·floor /
    median), against `ceilings` (default: DATASHEET_H100; pass measured ones when you have them).
    """
    if baseline is not None and baseline not in contenders:
        raise ValueError(f"baseline {baseline!r} is not a contender; contenders: {list(contenders)} "
                         "(pass baseline=<one of them>, or None for no speedup column)")
    tf32_allowed = precision.tf32_allowed()
    def summary(t: Timing) -> str:
        return f"{t.median:9.3f} ms  (p20 {t.p20:.3f}, p80 {t.p80:.3f}, n={t.n})"

    timings = {}
    if interleave:
        if progress:
            print(f"  {len(contenders)} contenders, timed in turn ({reps} reps each)", flush=True)
        timings = time_interleaved(contenders, reps=reps, l2=l2, sync_each=sync_each)
        if progress:
            for name, t in timings.items():
                print(f"  {name:<32} {summary(t)}", flush=True)
    else:
        for i, (name, fn) in enumerate(contenders.items(), 1):
            if progress:  # printed before timing: a first call may compile for minutes (max-autotune)
                print(f"  [{i}/{len(contenders)}] {name:<28}", end="", flush=True)
            timings[name] = t = time_ms(fn, reps=reps, l2=l2, sync_each=sync_each)
            if progress:
                print(f" {summary(t)}", flush=True)
    baseline_ms = timings[baseline].median if baseline is not None else None
    return [make_row(name, t, baseline_ms=baseline_ms, cost=cost, ceilings=ceilings, tf32_allowed=tf32_allowed)
            for name, t in timings.items()]


# key, header, format; columns absent from every row are left out
_COLUMNS = [
    ("contender", "contender", "{}"),
    ("median_ms", "median ms", "{:.3f}"),
    ("p20_ms", "p20 ms", "{:.3f}"),
    ("p80_ms", "p80 ms", "{:.3f}"),
    ("speedup", "speedup", "{:.2f}x"),
    ("tflops", "TFLOP/s", "{:.1f}"),
    ("GBps", "GB/s", "{:.0f}"),
    ("pct_of_floor", "% of floor", "{:.0f}%"),
]


def format_table(rows: list[dict]) -> str:
    """A fixed-width text table of compare() rows; flagged rows are marked ! and explained below."""
    cols = [c for c in _COLUMNS if any(r.get(c[0]) is not None for r in rows)]
    cells = [[h for _, h, _ in cols]]
    for r in rows:
        mark = " !" if r.get("flag") else ""
        cells.append([("-" if r.get(k) is None else f.format(r[k])) + (mark if k == "contender" else "")
                      for k, _, f in cols])
    widths = [max(len(line[i]) for line in cells) for i in range(len(cols))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
             for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines += [f"! {r['contender']}: {r['flag']}" for r in rows if r.get("flag")]
    return "\n".join(lines)


def format_ceilings(c: Ceilings, reference: Ceilings = DATASHEET_H100) -> str:
    """Ceilings next to a reference (the datasheet by default), as a small text table."""
    rows = [("copy bandwidth", c.copy_GBps, reference.copy_GBps, "GB/s"),
            ("FP32 SGEMM", c.fp32_tflops, reference.fp32_tflops, "TFLOP/s"),
            ("TF32 GEMM", c.tf32_tflops, reference.tf32_tflops, "TFLOP/s")]
    lines = [f"ceilings {c.source}; reference: {reference.source}",
             f"{'':16}{'this':>10}  {'reference':>10}",
             *(f"{name:16}{v:10.1f}  {ref:10.1f}  {unit:<8}{100 * v / ref:4.0f}% of reference"
               for name, v, ref, unit in rows)]
    return "\n".join(lines)


# --------------------------------------------------------------------------- CLI

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m utils.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--ceilings", action="store_true", help="measure this GPU's ceilings and record them")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--results-dir", default=None, help="results root (default: results/, or $WORKBOOK_RESULTS_DIR)")
    args = ap.parse_args(argv)
    if not args.ceilings:
        ap.print_help()
        return 0
    if not torch.cuda.is_available():
        print("no CUDA GPU here: ceilings are measured on a GPU (recorded ones are in results/<device>/ceilings.json)")
        return 0

    c = measure_ceilings(reps=args.reps)
    path = results.record("ceilings", [c.entry()], notes=f"utils.bench --ceilings, reps={args.reps}",
                          results_dir=args.results_dir)
    print(format_ceilings(c))
    print(f"recorded in {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
