"""`make run`: execute the notebooks in order, headless, with papermill.

    python -m utils.run                      # every notebook (on a GPU the scoreboard first)
    python -m utils.run --notebooks 00 01    # a selection, by number
    python -m utils.run --timeout 1200 --reps 20
    python -m utils.run --steps scoreboard   # only the scoreboard (--steps profile --notebooks 09: both)

Each notebook runs in its own papermill process (so a crashed kernel or a hung cell
cannot take the others down) with the parameters DEVICE, SCALE, REPS and
RESULTS_DIR, under a per-notebook timeout that kills the whole process group.

On a GPU the executed notebooks land in results/<device>/notebooks/ and the
notebooks record their measurements under results/<device>/. Without a GPU nothing is
recorded: executed copies go to build/run-<mode>/, and the summary lists what each
notebook skipped. An executed copy names no folder of the machine that ran it: the results root,
the repository, the build folder, the Python environment and the home folder are written as
`results`, a repository-relative path, `<build>`, `<site-packages>`/`<venv>` and `~`.
Notebooks report a skip by printing a line made by `skip()`; this module writes that marker
and reads it back, so the protocol lives in one place.

A whole run on a GPU first measures and records the scoreboard (`python -m
utils.chapters.scoreboard`), which chapters 02-10 show, and the profile (`python -m utils.profile`),
which 03 and 09 read: one `make run` leaves every record of one commit (--scoreboard /
--no-scoreboard decide both for a selection; --steps names them one by one, and alone runs no notebook,
so that a machine with several GPUs can record them side by side with the chapters that do not read them).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import site
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from utils import REPO, build, env, results

NOTEBOOKS_DIR = REPO / "notebooks"
SKIP_MARKER = "SKIPPED:"
# Chapters renumbered since a GPU run recorded them: notebook -> the names its executed copies under
# results/<device>/notebooks/ may still carry, until `make run` records it under its own name on that device.
# Chapter 10 was split in two (weight writes, training, autocast and the ending became 11, now 13); a copy of
# 10 from before the split holds 13's cells. A chapter inserted as 11 made 11_dropins_in_real_code 12, and one
# inserted as 12 made it 13: its copies recorded before keep those names. Former names oldest first, so that a
# newer copy wins.
RECORDED_AS = {"13_dropins_in_real_code.ipynb": ("10_fused_solutions.ipynb", "11_dropins_in_real_code.ipynb",
                                                 "12_dropins_in_real_code.ipynb")}


def skip(what: str, why: str) -> None:
    """Say, in a notebook, that a step did not run here and why (the runner collects these)."""
    print(f"{SKIP_MARKER} {what} ({why})")


@dataclass
class Outcome:
    notebook: str
    status: str  # "ok", "failed", "timeout"
    seconds: float
    output: Path
    skipped: list[str] = field(default_factory=list)
    error: str = ""


def find_notebooks(selection: list[str] | None = None) -> list[Path]:
    """Notebooks named NN_topic.ipynb, in order; `selection` holds numbers ("00") or names."""
    found = sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
    if not selection:
        return found
    chosen = [nb for nb in found if any(nb.stem == s or nb.stem.split("_")[0] == s.zfill(2) for s in selection)]
    missing = [s for s in selection if not any(nb.stem == s or nb.stem.split("_")[0] == s.zfill(2) for nb in found)]
    if missing:
        raise SystemExit(f"no notebook matches {missing}; there are: {[nb.stem for nb in found]}")
    return chosen


def recorded_copies(notebook: str, results_root: Path = results.RESULTS) -> list[Path]:
    """The executed copies of notebooks/<notebook> recorded under results_root/<device>/notebooks/: those under
    the names it had before (RECORDED_AS), then those under its own name, each group oldest first, so that
    a reader taking the last one found takes the notebook's own newest copy."""
    copies = []
    for name in (*RECORDED_AS.get(notebook, ()), notebook):
        copies += sorted(Path(results_root).glob(f"*/notebooks/{name}"), key=lambda p: p.stat().st_mtime)
    return copies


def default_parameters(mode: str, reps: int | None, results_root: Path) -> dict:
    on_gpu = mode == "gpu"
    return {
        "DEVICE": "cuda" if on_gpu else "cpu",
        "SCALE": "full" if on_gpu else "small",
        "REPS": reps if reps is not None else (50 if on_gpu else 3),
        "RESULTS_DIR": str(results_root),
    }


def output_dir(mode: str, results_root: Path) -> Path:
    """Where the executed notebooks go: on a GPU beside the records (results.write_root, so that a
    run inside the test session lands in its temporary folder), else build/run-<mode>/."""
    if mode == "gpu":

        return results.write_root(results_root) / env.device_slug() / "notebooks"
    return REPO / "build" / f"run-{mode}"


def machine_paths(results_root: Path) -> list[tuple[str, str]]:
    """(this machine's folder, what an executed copy says instead), the longest first, so that a folder
    inside another is replaced before it."""
    pairs = {str(Path(results_root).resolve()): "results", str(build.build_root_dir().resolve()): "<build>",
             str(REPO) + os.sep: "", str(REPO): ".", str(Path.home()): "~"}
    if sys.prefix != sys.base_prefix:  # a virtual environment's own folder (a system prefix such as /usr is not)
        pairs[sys.prefix] = "<venv>"
    for packages in [*site.getsitepackages(), site.getusersitepackages()]:
        pairs[str(Path(packages))] = "<site-packages>"
    return sorted(((k, v) for k, v in pairs.items() if len(k) > 1), key=lambda kv: -len(kv[0]))


def scrub(out: Path, results_root: Path) -> None:
    """Rewrite the executed copy `out` without this machine's folders (machine_paths): its parameters,
    papermill's metadata and every output that printed a path."""
    text = out.read_text()
    for folder, instead in machine_paths(results_root):
        spelled = re.escape(json.dumps(folder)[1:-1])  # as the notebook's JSON spells it
        # the whole folder only: /home/ann is not the start of /home/anna
        text = re.sub(spelled + ("" if folder.endswith(os.sep) else r"(?![\w.-])"), lambda _: instead, text)
    out.write_text(text)


def run_in_group(cmd: list[str], timeout: float) -> tuple[int | None, float]:
    """cmd in its own process group with the repository on PYTHONPATH, killed as a whole on timeout (it and
    whatever it started: papermill's kernel). (return code, or None on timeout; seconds)."""
    env_vars = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env_vars, start_new_session=True)
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        rc = None
    return rc, time.monotonic() - start


def run_one(nb: Path, out: Path, params: dict, timeout: float) -> Outcome:
    """One notebook in its own process group, killed as a whole on timeout."""
    cmd = [sys.executable, "-m", "papermill", str(nb), str(out), "--cwd", str(nb.parent), "--progress-bar"]
    for key, value in params.items():
        cmd += ["-p" if not isinstance(value, str) else "-r", key, str(value)]
    rc, seconds = run_in_group(cmd, timeout)
    if out.is_file():
        scrub(out, Path(params.get("RESULTS_DIR", results.RESULTS)))
    if rc is None:
        return Outcome(nb.stem, "timeout", seconds, out, read_skips(out),
                       f"killed after {timeout:.0f} s (per-notebook timeout)")
    return Outcome(nb.stem, "ok" if rc == 0 else "failed", seconds, out, read_skips(out),
                   "" if rc == 0 else read_error(out))


def _stream_text(out: Path) -> list[tuple[dict, str]]:
    if not out.exists():
        return []
    nb = json.loads(out.read_text())
    texts = []
    for cell in nb.get("cells", []):
        for o in cell.get("outputs", []):
            text = o.get("text", "")
            texts.append((o, "".join(text) if isinstance(text, list) else text))
    return texts


def read_skips(out: Path) -> list[str]:
    return [line[len(SKIP_MARKER):].strip()
            for _, text in _stream_text(out) for line in text.splitlines() if line.startswith(SKIP_MARKER)]


def read_error(out: Path) -> str:
    if not out.exists():
        return "papermill wrote no output notebook (see the log above)"
    nb = json.loads(out.read_text())
    for cell in nb.get("cells", []):
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                return f"{o.get('ename')}: {o.get('evalue')}"
    return "papermill failed (see the log above)"


def wants_scoreboard(mode: str, selection: list[str] | None, asked: bool | None) -> bool:
    """Whether this run measures the scoreboard: as asked (--scoreboard / --no-scoreboard), else on a GPU
    when every notebook runs (`make run`), before them, so that the chapters show this run's."""
    if asked is not None:
        return asked and mode == "gpu"
    return mode == "gpu" and not selection


def run_scoreboard(results_root: Path, reps: int | None, timeout: float) -> Outcome:
    """`python -m utils.chapters.scoreboard` in its own process group (a subprocess: the runner imports
    no chapter module), recording into results_root; its output goes to this terminal."""
    cmd = [sys.executable, "-m", "utils.chapters.scoreboard", "--results-dir", str(results_root)]
    cmd += ["--reps", str(reps)] if reps is not None else []
    return _run_step("scoreboard", cmd, results_root, timeout,
                     "a stage failed its check or was not timed (see the log above)")


def run_profile(results_root: Path, timeout: float) -> Outcome:
    """`python -m utils.profile`: Nsight Compute on the kernels chapters 03 and 09 debrief, recorded."""
    cmd = [sys.executable, "-m", "utils.profile", "--results-dir", str(results_root)]
    return _run_step("profile", cmd, results_root, timeout, "ncu failed or found no kernel (see the log above)")


STEPS = ("scoreboard", "profile")  # what a whole run records before the notebooks, which show it


def chosen_steps(mode: str, selection: list[str] | None, asked: bool | None, steps: list[str] | None) -> list[str]:
    """The records measured before the notebooks: --steps as named, else both or none (wants_scoreboard)."""
    if steps is not None:
        return [s for s in STEPS if s in steps] if mode == "gpu" else []
    return list(STEPS) if wants_scoreboard(mode, selection, asked) else []


def _run_step(kind: str, cmd: list[str], results_root: Path, timeout: float, failed: str) -> Outcome:
    record = results.write_root(results_root) / env.device_slug() / f"{kind}.json"
    rc, seconds = run_in_group(cmd, timeout)
    if rc is None:
        return Outcome(kind, "timeout", seconds, record, error=f"killed after {timeout:.0f} s (per-step timeout)")
    return Outcome(kind, "ok" if rc == 0 else "failed", seconds, record, error="" if rc == 0 else failed)


def summary(outcomes: list[Outcome], mode: str) -> str:
    lines = ["", f"== summary ({mode} mode)", f"{'notebook':<34} {'status':<8} {'time':>8}  skipped"]
    for o in outcomes:
        lines.append(f"{o.notebook:<34} {o.status:<8} {o.seconds:>7.1f}s  {len(o.skipped)}")
    for o in outcomes:
        if o.error:
            lines.append(f"  {o.notebook}: {o.error}  -> {o.output}")
    skipped = [(o.notebook, s) for o in outcomes for s in o.skipped]
    if skipped:
        lines.append("skipped on this machine:")
        lines += [f"  {nb}: {s}" for nb, s in skipped]
    executed = [o for o in outcomes if o.notebook not in STEPS]
    if executed:
        lines.append(f"executed notebooks: {executed[0].output.parent}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m utils.run", description=__doc__.splitlines()[0])
    ap.add_argument("--notebooks", nargs="*", help="numbers or names (default: all, in order)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per notebook (default 3600)")
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions per measurement")
    ap.add_argument("--results-dir", type=Path, default=REPO / "results", help="results root (default results/)")
    ap.add_argument("--scoreboard", action=argparse.BooleanOptionalAction, default=None,
                    help="measure and record the scoreboard first (default: on a GPU, when every notebook runs)")
    ap.add_argument("--steps", nargs="*", choices=STEPS, default=None,
                    help="which of the scoreboard and the profile to record first; without --notebooks, no notebook runs")
    args = ap.parse_args(argv)

    mode = env.mode()
    notebooks = [] if args.steps is not None and args.notebooks is None else find_notebooks(args.notebooks)
    params = default_parameters(mode, args.reps, args.results_dir.resolve())
    out_dir = output_dir(mode, args.results_dir.resolve())
    out_dir.mkdir(parents=True, exist_ok=True)
    print(env.report())
    if mode != "gpu":
        why = "A GPU is visible, but no kernel can be built here (see above)" if env.why() else "No GPU here"
        print(f"{why}: nothing is measured or recorded; executed notebooks go to {out_dir}.")
    for stale in build.clear_stale_locks():
        print(f"removed a stale build lock: {stale}")

    outcomes = []
    steps = chosen_steps(mode, args.notebooks, args.scoreboard, args.steps)
    if "scoreboard" in steps:
        print("\n[scoreboard] every chapter's stage, measured before the chapters that show it", flush=True)
        outcomes.append(run_scoreboard(args.results_dir.resolve(), args.reps, args.timeout))
        print(f"[scoreboard] {outcomes[-1].status} in {outcomes[-1].seconds:.1f} s", flush=True)
    if "profile" in steps:
        print("\n[profile] Nsight Compute on rung 7 and a whole-model kernel, read by chapters 03 and 09", flush=True)
        outcomes.append(run_profile(args.results_dir.resolve(), args.timeout))
        print(f"[profile] {outcomes[-1].status} in {outcomes[-1].seconds:.1f} s", flush=True)
    for i, nb in enumerate(notebooks, 1):
        print(f"\n[{i}/{len(notebooks)}] {nb.name}  parameters: {params}", flush=True)
        outcome = run_one(nb, out_dir / nb.name, params, args.timeout)
        print(f"[{i}/{len(notebooks)}] {nb.stem}: {outcome.status} in {outcome.seconds:.1f} s", flush=True)
        outcomes.append(outcome)
    print(summary(outcomes, mode))
    return 0 if all(o.status == "ok" for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
