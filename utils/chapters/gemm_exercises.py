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

import pandas as pd
from IPython.display import Markdown, display

from utils import bench, build, check, env, ladder, precision
from utils.chapters.gemm_addressing import LOAD_NAMES, ws_load_floats, ws_passes
from utils.chapters.gemm_ladder import EXERCISES, LadderChapter, provenance
from utils.run import skip


def padding_verdict(row_floats: int, report=None, load_floats: int | None = None) -> str:
    """Exercise 3 of notebook 03: PASS when the warp reads ws[tx][kk] in one pass per kk at the load
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

GIVEN_VARIANTS = ("rung 5 as is", "BK 16", "BK 32", "64 x 64 tile")  # notebook 03, exercise 2


def exercise_verdict(report, hints: dict, passed: str = "PASS: every check passed.") -> str:
    """An exercise checker's verdict on a harness report: PASS when the harness found nothing wrong;
    else "Not yet:", the checks that failed and a hint for each one that has a hint."""
    if report.ok:
        return passed
    lines = [f"Not yet: {', '.join(report.failed)} failed."]
    lines += [f"  - {name}: {hints[name]}" for name in report.failed if name in hints]
    return "\n".join(lines)


TIE = 0.02  # two times within 2% of each other are a tie: run-to-run noise on one GPU is about that


def _first_prediction(chapter: LadderChapter, exercise: str, prediction):
    """The prediction an exercise judges: the first one made in this run of the chapter. A prediction changed
    after the measurement was shown is not judged again (the measurement is on the screen by then)."""
    return chapter.predictions.setdefault(exercise, prediction)


def order_verdict(my_order, variants, measured=None, problems=None) -> str:
    """Exercise 2 of notebook 03: Not yet until `variants` has one of your own and `my_order` lists each
    label once. Given the measured times ({label: median ms}) and {label: why} for the variants that failed:
    PASS only when none failed and no pair of your order is contradicted by the measurement (a pair whose
    times are within TIE of each other is a tie, either order right). It never says which pair is wrong."""
    if not set(variants) - set(GIVEN_VARIANTS):
        return "Not yet: add a variant of your own to TILE_VARIANTS first."
    if my_order is None or sorted(my_order) != sorted(variants):
        return f"Not yet: put every label of TILE_VARIANTS in MY_ORDER, once each, fastest first: {sorted(variants)}."
    if measured is None:
        return "Your prediction is in; it is judged against a measurement, which needs a GPU."
    if problems:
        return "Not yet: " + "; ".join(f"{label}: {why}" for label, why in problems.items())
    pairs = [(a, b) for i, a in enumerate(my_order) for b in my_order[i + 1:]]
    wrong = sum(measured[a] > (1 + TIE) * measured[b] for a, b in pairs)
    if wrong:
        return (f"Not yet: the measurement contradicts {wrong} of the {len(pairs)} pairs your order ranks "
                f"(ties within {100 * TIE:.0f}% count either way). Compare the times above with what you expected.")
    return f"PASS: every variant computes x @ w.T, and the measurement bears out all {len(pairs)} pairs of your order."


def pair_verdict(my_best, pairs, measured=None, problems=(), source: str = "") -> str:
    """Exercise 4 of notebook 03: Not yet until `my_best` is one of the (BK, STAGES) `pairs`. Given the
    measured times ({pair: median ms}, this run's or a recorded sweep's, named by `source`) and the labels of
    the pairs that failed: PASS only when your pair is the fastest or within TIE of it. It never names the
    fastest pair."""
    pairs = [tuple(p) for p in pairs]
    if my_best is None or tuple(my_best) not in pairs:
        return f"Not yet: write your prediction in MY_BEST first, one of {pairs}."
    if measured is None:
        return "Your prediction is in; it is judged against a measurement: this run's on a GPU, else a recorded sweep."
    if problems:
        return "Not yet: " + "; ".join(problems) + " failed (see above)."
    best = min(measured[p] for p in pairs if p in measured)
    mine = measured.get(tuple(my_best))
    if mine is None:
        return f"Not yet: {tuple(my_best)} was not measured{f' in {source}' if source else ''}."
    if mine <= (1 + TIE) * best:
        return (f"PASS: {tuple(my_best)} is the fastest pair{f' in {source}' if source else ''}, or within "
                f"{100 * TIE:.0f}% of it.")
    return (f"Not yet: {tuple(my_best)} is not the fastest pair{f' in {source}' if source else ''}, nor within "
            f"{100 * TIE:.0f}% of it. Weigh again what a deeper slice saves and what a stage costs.")


# --------------------------------------------------------------------------- notebook 03, exercise 1

TILED_NAME = "my_tiled_sgemm"  # the kernel the reader writes, and the scratch build's name
_FORBIDDEN = {  # what the source may not use -> why
    r"#\s*include": "no #include: the kernel is yours, not the workbook's headers or a library's",
    r"\bcublas\w*": "no cuBLAS: the point is to write the GEMM",
    r"\b(?:at|torch|c10)::": "no ATen or torch calls: the point is to write the GEMM",
    r"\b(?:cutlass|cute|wmma|mma)\b|\bmma\.sync|\bwgmma": "no library or tensor-core GEMM: fp32 FMAs, as rung 3",
    r"@export": "no host launcher (`// @export`): the notebook launches your kernel with its own grid and block",
}


def _code_only(source: str) -> str:
    """The source without its comments and string literals, for the static checks."""
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.DOTALL)
    source = re.sub(r"//[^\n]*", " ", source)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', source)


def _read_in_an_expression(array: str, code: str) -> bool:
    """Whether `array[...]` appears on the right of an assignment (what the product loop does with a tile)."""
    for statement in re.split(r"[;{}]", code):
        parts = re.split(r"(?<![=!<>+\-*/])[+\-*/]?=(?!=)", statement, maxsplit=1)
        if len(parts) == 2 and re.search(r"\b" + array + r"\s*\[", parts[1]):
            return True
    return False


def tiled_static_problems(source: str, kernel: str = TILED_NAME) -> list[str]:
    """What the source of exercise 1 (notebook 03) lacks or must not have, read without compiling it: the
    kernel `kernel` marked `// @launch`; slices of x and w staged in __shared__ arrays that the kernel also
    reads; a __syncthreads() after the copy and one before the next copy overwrites it; no cuBLAS, ATen,
    library GEMM, #include or host launcher. [] when there is nothing to say."""
    code = _code_only(source)
    problems = []
    if not re.search(r"//\s*@launch\s*\n\s*(?:template\s*<[^>]*>\s*)?__global__[^{]*\b" + kernel + r"\s*\(", source):
        problems.append(f"`// @launch` directly above `__global__ void {kernel}(...)`: the launch cell calls it by name")
    arrays = re.findall(r"__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?float\s+(\w+)\s*\[", code)
    if len(arrays) < 2:
        problems.append("a slice of x and a slice of w staged in __shared__ float arrays (two arrays), "
                        f"found {len(arrays)}")
    unread = [a for a in arrays if not _read_in_an_expression(a, code)]
    if arrays and unread:
        problems.append(f"the product loop reads its operands from the shared tiles: {', '.join(unread)} never read")
    if len(re.findall(r"\b__syncthreads\s*\(\s*\)", code)) < 2:
        problems.append("two __syncthreads(): one after the copy into shared memory (before anyone reads it), one "
                        "before the next copy overwrites it")
    problems += [why for pattern, why in _FORBIDDEN.items() if re.search(pattern, code if pattern != "@export" else source)]
    return problems


def operands_tiled(generator):
    """x (67, 101) and w (129, 101): several tiles each way, and no tile of 8, 16 or 32 divides M, N or K."""
    import torch

    return [torch.rand(67, 101, generator=generator), torch.rand(129, 101, generator=generator) * 2 - 1]


def tiled_verdict(problems: list[str], report=None) -> str:
    """Exercise 1 of notebook 03: Not yet while the static checks find something (each named) or, where the
    harness ran, any check failed; PASS only when both hold. Without a GPU the harness cannot run, and the
    verdict says so instead of PASS."""
    if problems:
        return "Not yet: the source needs\n" + "\n".join(f"  - {p}" for p in problems)
    if report is None:
        return "The source has what a tiled SGEMM needs; whether it computes x @ w.T is checked on a GPU."
    return exercise_verdict(report, {
        "poisoned_output": "some outputs were never written: does every block store its whole tile, edges included?",
        "trials": "the outputs differ from x @ w.T: look at the edge tiles (zero-fill what lies past M, N or K) and "
                  "at the barriers.",
        "repeatable": "two runs differ: a race on the shared tiles (a barrier missing?).",
    }, "PASS: your tiled SGEMM computes x @ w.T at shapes no tile divides.")


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


def pct_table(rows: list[dict]) -> pd.DataFrame:
    """compare() rows fastest first (the index: the contender), each with its % of cuBLAS."""
    cublas = next(r for r in rows if r["contender"] == ladder.REFERENCE)
    return pd.DataFrame([{"contender": r["contender"], "median ms": round(r["median_ms"], 3), "TFLOP/s": round(r["tflops"], 2),
                          "% of cuBLAS": round(100 * cublas["median_ms"] / r["median_ms"], 1)}
                         for r in sorted(rows, key=lambda r: r["median_ms"])]).set_index("contender")


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


def tile_exercise(variants: dict, my_order, chapter: LadderChapter) -> None:
    """Exercise 2 of notebook 03: until the prediction is complete, Not yet and nothing built; then each
    variant of kernels/exercises/gemm_tile_shape.cu built (on a GPU all, else the first), and on a GPU
    checked and timed with cuBLAS in one run, and the verdict."""
    S = chapter.session
    prediction = order_verdict(my_order, variants)
    if prediction.startswith("Not yet"):
        print(prediction)
        return
    if not S.can_compile:
        skip("compiling exercise 2", env.no_build_reason())
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
    judged = _first_prediction(chapter, "tile shapes", (list(my_order), dict(variants)))
    if judged != (list(my_order), dict(variants)):
        print(f"Your prediction changed after the measurement was shown; the first one is judged: {judged[0]}")
    rows, wrong = time_variants({l: m.gemm for l, m in built.items() if l not in broken}, chapter.shape, S.reps)
    display(pct_table(rows))
    order = [r["contender"] for r in sorted(rows, key=lambda r: r["median_ms"]) if r["contender"] != ladder.REFERENCE]
    print("measured, fastest first:", order)
    print("your order:             ", judged[0])
    problems = {**{l: f"does not compile: {_first_line(e)}" for l, e in broken.items()}, **wrong}
    times = {r["contender"]: r["median_ms"] for r in rows}
    print(order_verdict(judged[0], judged[1], times if not problems else {}, problems))


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


def pad_exercise(chapter: LadderChapter) -> bool:
    """Exercise 3 of notebook 03: build gemm_smem_pad, show its shared loads in the SASS where the toolkit
    can, run the harness on a GPU, print the verdict (it needs no GPU), and on a GPU time it against rung 3.
    Returns whether the verdict is PASS."""
    import torch.nn.functional as F

    S = chapter.session
    if not S.can_compile:
        skip("compiling exercise 3", env.no_build_reason())
        return False
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
        skip("running exercise 3 through the harness", "no GPU (it compiled; the layout is checked below)")
    verdict = padding_verdict(row, report)
    print(verdict)
    if S.on_gpu and report.ok and verdict.startswith("PASS"):
        yours = f"yours (rows of {row} floats)"
        rows, _ = time_variants({"gemm_03_smem_tiled": ladder.load("gemm_03_smem_tiled"), yours: module.gemm},
                                chapter.shape, S.reps)
        display(pct_table(rows))
        ms = {r["contender"]: r["median_ms"] for r in rows}
        display(Markdown(f"Measured on {env.device_name()}: your kernel takes **{ms[yours] / ms['gemm_03_smem_tiled']:.2f}x** "
                         f"rung 3's time, at {ws_passes(row):g} pass(es) per kk against rung 3's 1."))
    return verdict.startswith("PASS")


def pipeline_pairs() -> tuple[list[tuple[int, int]], tuple[int, int]]:
    """Exercise 4 of notebook 03: rung 7's committed (BK, STAGES), half the slice depth, and one stage more
    of each; and the committed pair."""
    bk0, st0 = ladder.defaults()
    return [(bk, st) for bk in (bk0 // 2, bk0) for st in (st0, st0 + 1)], (bk0, st0)


def recorded_pairs(record: dict | None, pairs) -> dict:
    """{(BK, STAGES): median ms} of the `pairs` in a recorded rung-7 sweep (kind "ladder_tuning"); {} without one."""
    if record is None:
        return {}
    return {(e["bk"], e["stages"]): e["median_ms"] for e in record["entries"]
            if e.get("bk") is not None and (e["bk"], e["stages"]) in set(pairs)}


def pipeline_exercise(my_best, chapter: LadderChapter) -> None:
    """Exercise 4 of notebook 03: until MY_BEST names one of the pairs, Not yet and nothing built. On a GPU,
    the four builds of rung 7 checked and timed with cuBLAS in one run, and the first prediction judged
    against them; without one, judged against the recorded sweep of rung 7, where there is one."""
    S = chapter.session
    pairs, committed = pipeline_pairs()
    prediction = pair_verdict(my_best, pairs)
    if prediction.startswith("Not yet"):
        print(prediction)
        return
    judged = _first_prediction(chapter, "pipeline", tuple(my_best))
    if judged != tuple(my_best):
        print(f"Your prediction changed after the measurement was shown; the first one is judged: {judged}")
    if not S.on_gpu:
        record = S.recorded("ladder_tuning")
        measured = recorded_pairs(record, pairs)
        skip("exercise 4's builds and timing", "no GPU; judged against the recorded sweep" if measured else
             "no GPU, and no recorded sweep to judge against")
        print(pair_verdict(judged, pairs, measured or None, source=provenance(record) if measured else ""))
        return
    label = {p: f"BK {p[0]}, {p[1]} stages" + (" (committed)" if p == committed else "") for p in pairs}
    built = build.load_kernels({label[p]: build.Variant(ladder.TUNED, [] if p == committed else ladder.tune_flags(*p))
                                for p in pairs}, on_error="return")
    broken = {l: m for l, m in built.items() if isinstance(m, Exception)}
    for l, error in broken.items():
        print(f"{l}: does not compile: {_first_line(error)}")
    rows, wrong = time_variants({l: m.gemm for l, m in built.items() if l not in broken}, chapter.shape, S.reps)
    display(pct_table(rows))
    timed = {r["contender"]: r["median_ms"] for r in rows}
    print(pair_verdict(judged, pairs, {p: timed[label[p]] for p in pairs if label[p] in timed}, [*broken, *wrong],
                       source=f"this run on {env.device_name()}"))


def guess_verdict(guess: float, measured: float, rung2_step: dict, close: float = 0.2) -> str:
    """Exercise 2 of notebook 02: the reader's guess (your kernel's time / rung 2's) against the measured
    ratio, within `close` (relative) or not, beside what the L1-line model alone says."""
    model = (2 / 32) / (rung2_step["lines"] / rung2_step["fmas"])
    near = abs(guess / measured - 1) <= close
    return (f"Your guess: {guess:g}x. Measured: {measured:.2f}x rung 2's time: your guess is "
            f"{'within' if near else 'outside'} {100 * close:.0f}% of it. The L1-line model alone (2 lines per 32 FMAs "
            f"against {rung2_step['lines']} per {rung2_step['fmas']}) says {model:.2f}x; compare it with how close rung 2 "
            "came to that model's cap before trusting it.")
