"""The helpers of the GEMM ladder chapter (notebooks 02 and 03): quoting a rung's header, reading the
numbers in its PREDICTION, building several kernels at once, and measuring rungs against cuBLAS with
a computed sentence comparing the two. Tested in tests/test_ladder_chapter.py.

    chapter = LadderChapter(SHAPE, REPS, RESULTS_DIR, ON_GPU)    # what the measuring helpers need
    quote("gemm_01_naive", "The idea", "PREDICTION")             # header paragraphs, as written
    predicted_pct("gemm_05_blocktile_2d")                        # (low, high) % of cuBLAS, or None
    chapter.rung_result("gemm_02_coalesced", ["gemm_02_coalesced"])  # measure (or replay) and compare
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from IPython.display import Markdown, display

from utils import REPO, build, env, ladder, results
from utils.ladder import rung_number
from utils.run import skip
from utils.show import header, header_section

__all__ = ["LadderChapter", "build_all", "exercise_verdict", "global_kernels", "operands_odd", "header", "header_section", "predicted_pct",
           "predicted_speedup", "prediction_sentence", "prediction_vs_measurement", "provenance", "quote",
           "rung_name", "rung_number"]


def quote(name: str, *labels: str, kernels_dir: Path | None = None) -> None:
    """Show header sections of a kernel file as they are written there: the notebook quotes the file,
    so what it shows is what gets compiled. A label with no paragraph is named, not skipped silently."""
    where = build.display_path(build.kernel_path(name, kernels_dir))
    found = [text for label in labels if (text := header_section(name, label, kernels_dir))]
    missing = [label for label in labels if not header_section(name, label, kernels_dir)]
    body = "\n\n".join(found) if found else "(nothing)"
    note = f"\n\n*(no paragraph starting “{'”, “'.join(missing)}” in this header)*" if missing else ""
    display(Markdown(f"From the header of `{where}`:\n\n```text\n{body}\n```{note}"))


def rung_name(number: int) -> str | None:
    """The rung of the FP32 ladder with this number (gemm_03_smem_tiled for 3), None if there is none:
    notebooks name "the rung before" by number, whatever the file is called."""
    return next((n for n in ladder.rungs() if rung_number(n) == number), None)


def global_kernels(source: str) -> list[str]:
    """The names of the __global__ functions defined in a CUDA source, so a notebook can show each
    kernel of a rung without naming them by hand."""
    return re.findall(r"__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(", source)


_NUM = r"(\d+(?:\.\d+)?)"


def _prediction(name: str) -> str:
    """A rung's PREDICTION paragraph on one line (whitespace collapsed), "" without one: the numbers
    in it may be wrapped across lines."""
    return " ".join((header_section(name, "PREDICTION") or "").split())


def predicted_pct(name: str) -> tuple[float, float] | None:
    """(low, high) % of cuBLAS that a rung's PREDICTION names ("55-65% of cuBLAS", "of cuBLAS
    SGEMM (5-20%)"); None when it names no such range. Read from the file, so the sentence after a
    measurement is computed, not typed."""
    text = _prediction(name)
    for pattern in (_NUM + r"\s*-\s*" + _NUM + r"% of cuBLAS", r"of cuBLAS[\w ]*\(" + _NUM + r"\s*-\s*" + _NUM + r"%\)"):
        if match := re.search(pattern, text):
            return float(match[1]), float(match[2])
    return None


def predicted_speedup(name: str) -> tuple[float, float, int] | None:
    """(low, high, earlier rung) from "about 2 to 2.5x rung 3", "about 10x rung 1" or "5-15% over
    rung 5"; None when the PREDICTION names no such factor."""
    text = _prediction(name)
    if match := re.search(_NUM + r"(?:\s*(?:to|-)\s*" + _NUM + r")?x rung (\d+)", text):
        return float(match[1]), float(match[2] or match[1]), int(match[3])
    if match := re.search(_NUM + r"\s*-\s*" + _NUM + r"% over rung (\d+)", text):
        return 1 + float(match[1]) / 100, 1 + float(match[2]) / 100, int(match[3])
    return None


def build_all(jobs: dict, on_error: str = "raise") -> dict:
    """Compile several kernels at once, each in its own process (a cold build is about 40 s of one or
    two cores, mostly PyTorch's headers), then load them here (instant once built).
    jobs: {label: (kernel name, kernels_dir or None, extra nvcc flags)}. Returns {label: module};
    with on_error="return", a kernel that fails to build maps to its exception instead."""
    def built(name, kernels_dir, flags):
        plan = build.plan(name, extra_cuda_cflags=flags, kernels_dir=kernels_dir)
        return (plan.build_dir / build.DONE_FILE).is_file()

    def compile_in_child(job):
        name, kernels_dir, flags = job
        code = ("from utils import build; build.load_kernel("
                f"{name!r}, kernels_dir={(str(kernels_dir) if kernels_dir else None)!r}, extra_cuda_cflags={list(flags)!r})")
        path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=dict(os.environ, PYTHONPATH=path)).returncode == 0

    cold = {label: job for label, job in jobs.items() if not built(*job)}
    if cold:
        workers = max(1, min(len(cold), (os.cpu_count() or 2) // 2))
        print(f"compiling {len(cold)} cold build(s), {workers} at a time (~40 s each on a free core; "
              "a failed one is rebuilt below to show its error)...", flush=True)
        with ThreadPoolExecutor(workers) as pool:
            futures = {pool.submit(compile_in_child, job): label for label, job in cold.items()}
            for future in as_completed(futures):
                print(f"  {futures[future]}: {'built' if future.result() else 'FAILED'}", flush=True)
    modules = {}
    for label, (name, kernels_dir, flags) in jobs.items():
        try:
            modules[label] = build.load_kernel(name, kernels_dir=kernels_dir, extra_cuda_cflags=flags)
        except Exception as error:
            if on_error == "raise":
                raise
            modules[label] = error
    return modules


def prediction_sentence(name: str, rows: list[dict], source: str) -> str:
    """One computed paragraph (Markdown): a rung's time, and how it compares with its header's
    PREDICTION. rows: ladder rows holding the rung, cuBLAS and (for a predicted factor) the earlier
    rung; source: whose numbers they are ("Measured on ...", or a record's provenance)."""
    by_name = {row["contender"]: row for row in rows}
    row, cublas = by_name[name], by_name[ladder.REFERENCE]
    pct = 100 * cublas["median_ms"] / row["median_ms"]
    text = (f"{source}: `{name}` takes **{row['median_ms']:.2f} ms** ({row['tflops']:.2f} TFLOP/s), "
            f"**{pct:.1f}% of cuBLAS** ({cublas['median_ms']:.2f} ms).")
    if band := predicted_pct(name):
        lo, hi = band
        where = "inside" if lo <= pct <= hi else ("below" if pct < lo else "above")
        text += f" The header predicted {lo:g}-{hi:g}%: the measurement is **{where}** that range."
    else:
        text += " The header's PREDICTION gives no range in % of cuBLAS to compare with."
    if header_section(name, "TUNED"):
        text += (" (This PREDICTION was written before the tuning that the header's TUNED AFTERWARDS paragraph "
                 "describes; the kernel measured here is the tuned one.)")
    if (factor := predicted_speedup(name)) and (earlier := rung_name(factor[2])) in by_name:
        lo, hi, number = factor
        got = by_name[earlier]["median_ms"] / row["median_ms"]
        if lo == hi:
            text += (f" It predicted about {lo:g}x rung {number}; measured **{got:.2f}x** "
                     f"(measured / predicted = {got / lo:.2f}).")
        else:
            where = "inside" if lo <= got <= hi else ("below" if got < lo else "above")
            text += f" It predicted {lo:g}-{hi:g}x rung {number}; measured **{got:.2f}x**, {where} that range."
    return text


def prediction_vs_measurement(name: str, rows: list[dict], source: str) -> None:
    """Display prediction_sentence(): the sentence after each measured rung is computed, not typed."""
    display(Markdown(prediction_sentence(name, rows, source)))


def provenance(record: dict) -> str:
    """Whose numbers a recorded run holds: device, date and commit, to open a sentence that uses them."""
    return f"Recorded on {record['device']['name']} ({record['date'][:10]}, commit `{record['git_commit']}`)"


@dataclass
class LadderChapter:
    """What the measuring helpers of a ladder notebook need from its parameters cell: the GEMM shape,
    the repetitions, where records are read and whether this machine has a GPU. `measured` holds,
    per contender, its latest row: every measurement of this run of the notebook, on this GPU."""
    shape: tuple[int, int, int]
    reps: int
    results_dir: str | Path
    on_gpu: bool
    measured: dict = field(default_factory=dict)

    def measure(self, names: list[str], reps: int | None = None) -> list[dict]:
        """Verify `names` against float64 at the chapter's shape, then time them and cuBLAS side by
        side (utils.ladder.measure); print the ladder and keep each row in `measured`."""
        rows = ladder.measure(self.shape, reps=reps or self.reps, names=names)
        print(ladder.format_ladder(rows))
        self.measured.update({row["contender"]: row for row in rows})
        return rows

    def recorded_ladder(self) -> dict | None:
        """The latest recorded ladder: this GPU's, or without a GPU the latest of any device (None if none)."""
        return results.load("ladder", results_root=self.results_dir)

    def rung_result(self, name: str, names: list[str], reps: int | None = None) -> None:
        """On a GPU: measure `names` (with cuBLAS) and compare `name` with its prediction. Without
        one: the same comparison on the latest recorded ladder, saying whose it is."""
        if self.on_gpu:
            self.measure(names, reps)
            prediction_vs_measurement(name, list(self.measured.values()), f"Measured on {env.device_name()}")
            return
        skip(f"measuring {name}", "no GPU")
        record = self.recorded_ladder()
        if record is None or name not in {e["contender"] for e in record["entries"]}:
            print(f"no recorded ladder has {name} yet: run this notebook (or `make ladder`) on a GPU")
        else:
            prediction_vs_measurement(name, record["entries"], provenance(record))


def exercise_verdict(report, hints, passed="PASS: every check passed."):
    """An exercise checker's verdict on a harness report: PASS when the harness found nothing wrong;
    else "Not yet:", the checks that failed and a hint for each one that has a hint."""
    if report.ok:
        return passed
    lines = [f"Not yet: {', '.join(report.failed)} failed."]
    lines += [f"  - {name}: {hints[name]}" for name in report.failed if name in hints]
    return "\n".join(lines)


def operands_odd(generator):
    """GEMM operands x (37, 65) and w (129, 65) for the harness: no tile divides M, N or K."""
    import torch

    return [torch.rand(37, 65, generator=generator), torch.rand(129, 65, generator=generator) * 2 - 1]

