"""The GEMM ladder chapter's exercises (notebooks 02 and 03): the checkers' verdicts, each "Not yet" until the
reader has acted, and the cells that build, check and time the reader's kernels. Tested in
tests/test_ladder_chapter.py, tests/test_gemm_exercises.py and tests/test_exercise_checkers.py.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

from IPython.display import Markdown, display

from utils import bench, build, check, env, ladder, precision
from utils.chapters.gemm_addressing import LOAD_NAMES, ws_load_floats, ws_passes
from utils.chapters.gemm_ladder import EXERCISES, LadderChapter
from utils.run import skip


def padding_verdict(row_floats: int, report=None, load_floats: int | None = None) -> str:
    """Exercise 2 of notebook 03: PASS when the warp reads ws[tx][kk] in one pass per kk at the load
    width nvcc uses for such rows (or `load_floats`) and, when the harness ran, the kernel is right."""
    w = load_floats or ws_load_floats(row_floats)
    passes = ws_passes(row_floats, w)
    if passes > 1:
        return (f"Not yet: with rows of {row_floats} floats, ws[tx][kk] is read with {LOAD_NAMES[w]} and takes "
                f"{passes:g} passes per kk, where a conflict-free read takes 1.")
    if report is not None and not report.ok:
        return exercise_verdict(report, {})
    return (f"PASS: with rows of {row_floats} floats, ws[tx][kk] is read with {LOAD_NAMES[w]}, one pass per kk"
            + (", and the kernel is right." if report is not None else " (the GPU check was skipped here)."))


# --------------------------------------------------------------------------- verdicts

GIVEN_VARIANTS = ("rung 5 as is", "BK 16", "BK 32", "64 x 64 tile")  # notebook 03, exercise 1


def exercise_verdict(report, hints: dict, passed: str = "PASS: every check passed.") -> str:
    """An exercise checker's verdict on a harness report: PASS when the harness found nothing wrong;
    else "Not yet:", the checks that failed and a hint for each one that has a hint."""
    if report.ok:
        return passed
    lines = [f"Not yet: {', '.join(report.failed)} failed."]
    lines += [f"  - {name}: {hints[name]}" for name in report.failed if name in hints]
    return "\n".join(lines)


def order_verdict(my_order, variants, measured=None, problems=None) -> str:
    """Exercise 1 of notebook 03: Not yet until `variants` has one of your own and `my_order` lists each
    label once; given the measured order (fastest first) and {label: why} for the variants that failed,
    PASS when none failed."""
    if not set(variants) - set(GIVEN_VARIANTS):
        return "Not yet: add a variant of your own to TILE_VARIANTS first."
    if my_order is None or sorted(my_order) != sorted(variants):
        return f"Not yet: put every label of TILE_VARIANTS in MY_ORDER, once each, fastest first: {sorted(variants)}."
    if measured is None:
        return "Your prediction is in; the measurement needs a GPU."
    if problems:
        return "Not yet: " + "; ".join(f"{label}: {why}" for label, why in problems.items())
    right = sum(a == b for a, b in zip(measured, my_order))
    return f"PASS: every variant computes x @ w.T; your order has {right} of {len(measured)} places right."


def pair_verdict(my_best, pairs, best=None, problems=()) -> str:
    """Exercise 3 of notebook 03: Not yet until `my_best` is one of the (BK, STAGES) `pairs`; given the
    fastest pair measured and the labels of the pairs that failed, PASS when none failed."""
    pairs = [tuple(p) for p in pairs]
    if my_best is None or tuple(my_best) not in pairs:
        return f"Not yet: write your prediction in MY_BEST first, one of {pairs}."
    if best is None:
        return "Your prediction is in; the measurement needs a GPU."
    if problems:
        return "Not yet: " + "; ".join(problems) + " failed (see above)."
    verdict = "right" if tuple(my_best) == tuple(best) else "not this time"
    return f"PASS: every pair computes x @ w.T; the fastest is {tuple(best)}, you predicted {tuple(my_best)}: {verdict}."


def operands_odd(generator):
    """GEMM operands x (37, 65) and w (129, 65) for the harness: no tile divides M, N or K."""
    import torch

    return [torch.rand(37, 65, generator=generator), torch.rand(129, 65, generator=generator) * 2 - 1]


def operands_n515(generator):
    """x (37, 65) and w (515, 65): N > 256 (seed 004's one column per thread leaves columns out), no tile
    divides M, N or K."""
    import torch

    return [torch.rand(37, 65, generator=generator), torch.rand(515, 65, generator=generator) * 2 - 1]


# --------------------------------------------------------------------------- the exercises' GPU work

def _first_line(error) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def pct_table(rows: list[dict]) -> None:
    """Print compare() rows fastest first, each with its % of cuBLAS."""
    cublas = next(r for r in rows if r["contender"] == ladder.REFERENCE)
    print(f"{'contender':<28} {'median ms':>9} {'TFLOP/s':>8} {'% of cuBLAS':>11}")
    for r in sorted(rows, key=lambda r: r["median_ms"]):
        print(f"{r['contender']:<28} {r['median_ms']:>9.3f} {r['tflops']:>8.2f} "
              f"{100 * cublas['median_ms'] / r['median_ms']:>10.1f}%")


def time_variants(fns: dict, shape, reps: int) -> tuple[list[dict], dict]:
    """Verify each gemm of {label: fn} at `shape` against float64; time the right ones with cuBLAS in one
    run (TF32 off). Returns (rows, {label: why} for the wrong ones). Needs a GPU."""
    import torch.nn.functional as F

    x, w = ladder.operands(*shape)
    wrong, timed = {}, {}
    for label, fn in fns.items():
        try:
            ok, detail = ladder.verify(fn, x, w)
        except RuntimeError as error:  # a launch the GPU refuses (too much shared memory, say)
            ok, detail = False, f"raised: {_first_line(error)}"
        print(f"{label:<28} {'ok' if ok else 'WRONG'}: {detail}")
        if ok:
            timed[label] = lambda fn=fn: fn(x, w)
        else:
            wrong[label] = detail
    with precision.ieee_fp32():
        rows = bench.compare({**timed, ladder.REFERENCE: lambda: F.linear(x, w)}, cost=bench.gemm_cost(*shape),
                             baseline=ladder.REFERENCE, reps=reps, progress=False)
    return rows, wrong


def check_exercise(chapter: LadderChapter, name: str, operands, hints: dict, passed: str):
    """Build exercise `name` (your edits rebuild it) and, on a GPU, run it through the harness and print
    the verdict. Returns (module or None, whether it passed)."""
    import torch.nn.functional as F

    S = chapter.session
    if not S.can_compile:
        skip(f"compiling {name}", env.no_build_reason())
        return None, False
    module = build.load_kernel(name, kernels_dir=EXERCISES)
    if not S.on_gpu:
        skip(f"checking {name}", "no GPU (it compiled)")
        return module, False
    report = check.check_fn(module.gemm, F.linear, operands, name=f"your {name}", contiguous_only=True)
    print(report)
    print(exercise_verdict(report, hints, passed))
    return module, report.ok


def time_warp_exercise(guess, module, passed: bool, chapter: LadderChapter, rung2_step: dict) -> None:
    """Exercise 2 of notebook 02: once the reader has written a guess and the kernel passed, time it
    against rung 2 and cuBLAS and set the guess beside the measurement and the L1-line model."""
    if guess is None:
        print("Not yet: write your guess in MY_GUESS first, then run this cell again.")
        return
    if not chapter.on_gpu:
        skip("timing exercise 2 against rung 2", "no GPU")
        return
    if not passed:
        print("Not yet: the checker above must say PASS first (a wrong kernel is not timed).")
        return
    yours = "one warp per output (yours)"
    rows, _ = time_variants({"gemm_02_coalesced": ladder.load("gemm_02_coalesced"), yours: module.gemm},
                            chapter.shape, chapter.session.reps)
    pct_table(rows)
    ms = {r["contender"]: r["median_ms"] for r in rows}
    measured = ms[yours] / ms["gemm_02_coalesced"]
    model = (2 / 32) / (rung2_step["lines"] / rung2_step["fmas"])
    display(Markdown(
        f"Your guess: {guess:g}x. Measured on {env.device_name()}: **{measured:.2f}x** rung 2's time. The L1-line "
        f"model alone (2 lines per 32 FMAs against {rung2_step['lines']} per {rung2_step['fmas']}) says {model:.2f}x; "
        "compare it with how close rung 2 came to that model's cap before trusting it."))


def tile_exercise(variants: dict, my_order, chapter: LadderChapter) -> None:
    """Exercise 1 of notebook 03: until the prediction is complete, Not yet and nothing built; then each
    variant of kernels/exercises/gemm_tile_shape.cu built (on a GPU all, else the first), and on a GPU
    checked and timed with cuBLAS in one run, and the verdict."""
    S = chapter.session
    prediction = order_verdict(my_order, variants)
    if prediction.startswith("Not yet"):
        print(prediction)
        return
    if not S.can_compile:
        skip("compiling exercise 1", env.no_build_reason())
        return
    chosen = variants if S.on_gpu else dict(list(variants.items())[:1])
    built = build.load_kernels({label: build.Variant("gemm_tile_shape", flags, EXERCISES)
                                for label, flags in chosen.items()}, on_error="return")
    broken = {label: m for label, m in built.items() if isinstance(m, Exception)}
    for label, module in built.items():
        print(f"{label:<16} " + (f"does not compile: {_first_line(module)}" if label in broken else
                                 "BM, BN, BK, TM, TN, threads, min blocks/SM = " + str(module.tile_shape())))
    if not S.on_gpu:
        skip("timing the tile-shape variants", "no GPU (the first variant compiled)")
        print(prediction)
        return
    rows, wrong = time_variants({l: m.gemm for l, m in built.items() if l not in broken}, chapter.shape, S.reps)
    pct_table(rows)
    order = [r["contender"] for r in sorted(rows, key=lambda r: r["median_ms"]) if r["contender"] != ladder.REFERENCE]
    print("measured, fastest first:", order)
    print("your order:             ", list(my_order))
    problems = {**{l: f"does not compile: {_first_line(e)}" for l, e in broken.items()}, **wrong}
    print(order_verdict(my_order, variants, order, problems))


def shared_loads(module) -> dict | None:
    """How many shared-memory loads of each width (LDS, LDS.64, LDS.128) the compiler put in a built
    kernel's machine code (cuobjdump -sass); None where the toolkit has no cuobjdump."""
    nvcc = shutil.which("nvcc")
    tool = shutil.which("cuobjdump") or (nvcc and str(Path(nvcc).parent / "cuobjdump"))
    try:
        sass = subprocess.run([tool, "-sass", module.__file__], capture_output=True, text=True, check=True).stdout
    except (TypeError, OSError, subprocess.CalledProcessError):
        return None
    return dict(sorted(Counter(re.findall(r"\b(LDS(?:\.[0-9A-Z]+)*)\b", sass)).items()))


def pad_exercise(chapter: LadderChapter) -> None:
    """Exercise 2 of notebook 03: build gemm_smem_pad, show its shared loads in the SASS where the toolkit
    can, run the harness on a GPU, print the verdict (it needs no GPU), and on a GPU time it against rung 3."""
    import torch.nn.functional as F

    S = chapter.session
    if not S.can_compile:
        skip("compiling exercise 2", env.no_build_reason())
        return
    module = build.load_kernel("gemm_smem_pad", kernels_dir=EXERCISES)  # your edits rebuild it here
    row = module.ws_row_floats()
    if (sass := shared_loads(module)) is not None:
        print(f"shared loads in the SASS (cuobjdump -sass): {sass}; the checker counts ws[tx][kk] read with "
              f"{LOAD_NAMES[ws_load_floats(row)]}, beside the LDS.128 of xs")
    report = None
    if S.on_gpu:
        report = check.check_fn(module.gemm, F.linear, operands_odd, name="your gemm_smem_pad", contiguous_only=True)
        print(report)
    else:
        skip("running exercise 2 through the harness", "no GPU (it compiled; the layout is checked below)")
    print(padding_verdict(row, report))
    if S.on_gpu and report.ok:
        yours = f"yours (rows of {row} floats)"
        rows, _ = time_variants({"gemm_03_smem_tiled": ladder.load("gemm_03_smem_tiled"), yours: module.gemm},
                                chapter.shape, S.reps)
        pct_table(rows)
        ms = {r["contender"]: r["median_ms"] for r in rows}
        display(Markdown(f"Measured on {env.device_name()}: your kernel takes **{ms[yours] / ms['gemm_03_smem_tiled']:.2f}x** "
                         f"rung 3's time, at {ws_passes(row):g} pass(es) per kk against rung 3's 1."))


def pipeline_pairs() -> tuple[list[tuple[int, int]], tuple[int, int]]:
    """Exercise 3 of notebook 03: rung 7's committed (BK, STAGES), half the slice depth, and one stage more
    of each; and the committed pair."""
    bk0, st0 = ladder.defaults()
    return [(bk, st) for bk in (bk0 // 2, bk0) for st in (st0, st0 + 1)], (bk0, st0)


def pipeline_exercise(my_best, chapter: LadderChapter) -> None:
    """Exercise 3 of notebook 03: until MY_BEST names one of the pairs, Not yet and nothing built; on a GPU,
    the four builds of rung 7 checked and timed with cuBLAS in one run, and the verdict."""
    S = chapter.session
    pairs, committed = pipeline_pairs()
    prediction = pair_verdict(my_best, pairs)
    if prediction.startswith("Not yet"):
        print(prediction)
        return
    if not S.on_gpu:
        skip("exercise 3", "no GPU (the committed rung 7 compiled above; the other pairs are built on a GPU)")
        print(prediction)
        return
    label = {p: f"BK {p[0]}, {p[1]} stages" + (" (committed)" if p == committed else "") for p in pairs}
    built = build.load_kernels({label[p]: build.Variant(ladder.TUNED, [] if p == committed else ladder.tune_flags(*p))
                                for p in pairs}, on_error="return")
    broken = {l: m for l, m in built.items() if isinstance(m, Exception)}
    for l, error in broken.items():
        print(f"{l}: does not compile: {_first_line(error)}")
    rows, wrong = time_variants({l: m.gemm for l, m in built.items() if l not in broken}, chapter.shape, S.reps)
    pct_table(rows)
    timed = {r["contender"]: r["median_ms"] for r in rows}
    best = min((p for p in pairs if label[p] in timed), key=lambda p: timed[label[p]])
    text = f"Measured on {env.device_name()}: fastest **BK = {best[0]} with {best[1]} stages**"
    text += "; that is the committed pair." if best == committed else (
        f", {timed[label[committed]] / timed[label[best]]:.3f}x faster than the committed pair in this run "
        "(differences of a percent or two are within run-to-run noise; the recorded sweep used more repetitions).")
    display(Markdown(text))
    print(pair_verdict(my_best, pairs, best, [*broken, *wrong]))
