"""The READMEs' generated parts, from what is recorded under results/ (utils.results):

- results/README.md's tables: every record of every device;
- README.md's first screen: the three commands' times (from the run logs under results/<device>/logs/final_run/
  and, for the 2-core CPU machine, CPU_TIMES below) and the headline figure with its plot (from the newest
  `whole_model_fusion` record).

    python -m utils.report --update-readme   # regenerate both
    python -m utils.report --check-readme    # exit 1 if either is out of date (a test runs this)
    python -m utils.report --show            # print the tables

RENDERERS maps a record kind (utils.results.KINDS) to its Markdown; a kind without one is listed under
its device without being rendered. Adding a kind: its entry keys in utils.results.KINDS, its rendering
here (a function of utils/report/ that takes the record).
"""
from __future__ import annotations

import argparse
import json
import posixpath
import re
import sys
from pathlib import Path
from typing import Callable

from utils.report import records, scoreboard, tensor_cores
from utils import REPO
from utils.results import KINDS, README, kernel_drift, read, root_dir, short_commit
from utils.sass_identical import sass_identical

BEGIN = "<!-- results:begin -->"
END = "<!-- results:end -->"
TIMES = ("<!-- times:begin -->", "<!-- times:end -->")  # README.md's generated parts: the commands' times
HEADLINE = ("<!-- headline:begin -->", "<!-- headline:end -->")  # and the headline figure
RESULTS_README = REPO / "results" / "README.md"  # the tables; README.md keeps the first screen

# The 2-core CPU machine (no GPU) has no run folder under results/ (that holds GPU runs): its times, as measured,
# each with what it includes. None: not measured yet.
# - `make lab`: from the command to the server answering /api/status, .venv/ already set up, on a machine busy
#   with other jobs (load average 10 on 2 cores): an upper bound.
# - `make test`: .ci/run on a clean clone (.venv/ set up, every kernel built cold, GPU tests skipped), timed
#   by the shell around it; pytest's own summary line gave the tests' part.
CPU_TIMES = {
    "make lab": "13 s to serve, `.venv/` set up already (measured on a busy machine)",
    "make run": None,
    "make test": "13-16 min on a clean clone (15:19 at 54a9b36 and 14:38 at b896d57, run one after the other on the "
                 "same machine, pytest 752 s and 738 s of it, on two workers; 12:47 at c11ae67 and 14:43 at c9105e9 on "
                 "earlier days), the setup of `.venv/` and every kernel's cold build included",
}

RENDERERS: dict[str, Callable[[dict], str]] = {
    "ceilings": records.render_ceilings,
    "baselines": records.render_baselines,
    "ladder": records.render_ladder,
    "ladder_tuning": records.render_ladder_tuning,
    "bias_fusion": records.render_bias_fusion,
    "fused_activations": records.render_memory_bound,
    "groupnorm_fusion": records.render_memory_bound,
    "broadcast_min": records.render_memory_bound,
    "solutions": records.render_solutions,
    "training": records.render_training,
    "autocast": records.render_autocast,
    "scoreboard": scoreboard.markdown,
    "tensor_cores": tensor_cores.render,
    "whole_model_fusion": tensor_cores.render_fusion,
}


def render(rec: dict) -> str:
    """A record's Markdown, as the README shows it (its kind must have a renderer)."""
    return RENDERERS[rec["kind"]](rec)


def _stamp(rec: dict) -> str:
    return (f"{rec['device']['name']}, torch {rec['torch']} (CUDA {rec['cuda']}), "
            f"{rec['date'][:10]}, commit `{short_commit(rec['git_commit'])}`")


def _drift_note(rec: dict) -> str:
    """A flag on a record whose kernel sources have changed since it ran (utils.results.kernel_drift); a change
    shown to compile to the same SASS (utils/sass_identical.py) is named as such, with its log."""
    drift = kernel_drift(rec)
    if not drift:
        return ""
    same = sass_identical(rec.get("device", {}).get("slug", ""))
    changed = [line for line in drift if line.split(" ", 1)[1] not in same]
    alike = [line for line in drift if line.split(" ", 1)[1] in same]
    note = ""
    if changed:
        note += (". **Measured kernels that have changed since** (" + "; ".join(changed) + "): "
                 "these figures are not of the kernels in kernels/ now; re-record them on this GPU")
    if alike:
        slug = rec["device"]["slug"]  # the logs lie under results/<device>/: named from results/
        logs = ", ".join(f"`{posixpath.normpath(f'{slug}/{log}')}`"
                         for log in sorted({same[line.split(' ', 1)[1]] for line in alike}))
        note += f". Sources changed since that compile to the same SASS ({'; '.join(alike)}: {logs})"
    return note


def _render_device(records: list[dict]) -> str:
    dev = records[0]["device"]
    l2 = f", L2 {dev['l2_mb']:.0f} MB" if dev["l2_mb"] else ""  # older torch does not report it
    parts = [f"### {dev['name']}",
             f"compute capability {dev['cc']}, {dev['sm_count']} SMs, {dev['memory_gb']:.0f} GB{l2}"]
    known = [r for kind in KINDS for r in records if r["kind"] == kind and kind in RENDERERS]
    for rec in known:
        parts.append(f"**{KINDS[rec['kind']].title}**, recorded on {_stamp(rec)}" + _drift_note(rec))
        parts.append(render(rec))
    if rest := sorted(r["kind"] for r in records if r not in known):
        stale = {r["kind"] for r in records if r not in known and kernel_drift(r)}
        parts.append("Also recorded (not shown here): " + ", ".join(
            f"`{k}`" + (" (**of kernels that have changed since**)" if k in stale else "") for k in rest) + ".")
    return "\n\n".join(parts)


def render_readme_table(results_root: str | Path | None = None) -> str:
    """Markdown for README.md, generated from results/*/*.json: one section per device."""
    root = root_dir(results_root)
    by_device: dict[str, list[dict]] = {}
    for path in sorted(root.glob("*/*.json")):
        by_device.setdefault(path.parent.name, []).append(read(path))
    header = ("<!-- generated by `python -m utils.report --update-readme` from results/*/*.json: "
              "do not edit by hand -->")
    if not by_device:
        return header + "\n\nNo GPU run recorded yet: on a GPU, `make run` and `make bench` record them under results/<device>/."
    return "\n\n".join([header, *(_render_device(by_device[slug]) for slug in sorted(by_device))])


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def gpu_run_times(folder: Path) -> dict | None:
    """What a device folder's recorded run says: every executed chapter's time (papermill's, in the copy under
    notebooks/), the scoreboard's and the profile's from the run logs (logs/final_run/), and `pytest -m gpu`'s
    outcome over its logs (one or several parts; a part the machine's time limit stopped has no summary);
    None without run logs."""
    logs = folder / "logs" / "final_run"
    run_logs = [p for p in sorted(logs.glob("*run_*.log")) if p.name.startswith(("make_run_", "run_"))]
    if not run_logs:
        return None
    run: dict[str, float] = {}
    for nb in sorted((folder / "notebooks").glob("*.ipynb")):
        duration = json.loads(nb.read_text()).get("metadata", {}).get("papermill", {}).get("duration")
        if duration is not None:
            run[nb.stem] = float(duration)
    for log in run_logs:
        run |= {step: float(t) for step, t in re.findall(r"\[(scoreboard|profile)\] ok in ([\d.]+) s", log.read_text(errors="replace"))}
    # notebook 13's training step, where a run measured it before 12 (utils.chapters.training), in shares
    shares = [float(t) for log in sorted(logs.glob("training_*.log"))
              for t in re.findall(r"\[training\] .*ok in ([\d.]+) s", log.read_text(errors="replace"))]
    if shares:
        run["training step"] = sum(shares)
    tests, parts, cut = None, 0, 0
    for log in sorted(logs.glob("pytest_gpu_*.log")):
        parts += 1
        if m := re.search(r"(\d+) passed.*? in ([\d.]+)s", log.read_text(errors="replace").strip().splitlines()[-1]):
            tests = {"passed": (tests or {}).get("passed", 0) + int(m.group(1)), "s": (tests or {}).get("s", 0) + float(m.group(2))}
        else:
            cut += 1
    if tests:
        tests |= {"parts": parts, "cut": cut}
    return {"run": run, "tests": tests}
def _headline_record(root: Path) -> tuple[str, dict] | None:
    found = [(p.parent.name, read(p)) for p in sorted(root.glob("*/whole_model_fusion.json"))]
    return max(found, key=lambda f: f[1]["date"]) if found else None


def _speedups(rec: dict, tier: str, over: str) -> list[float]:
    """Per problem: `over` (eager or torch.compile, at the strict tier) over the fused kernel at `tier`."""
    at = {(e["problem"], e["contender"], e["tier"]): e["median_ms"] for e in rec["entries"]}
    return [at[(p, over, "strict")] / at[(p, "fused", tier)] for p, c, t in at if c == "fused" and t == tier]


def _span(values: list[float]) -> str:
    return f"{min(values):.2f}x to {max(values):.2f}x"


GENERATED = "<!-- generated by `python -m utils.report --update-readme`: do not edit by hand -->"


def render_times(results_root: str | Path | None = None) -> str:
    """README.md's three commands with their times: on the GPU of the newest whole-model record, from its run
    logs; on the 2-core CPU machine, CPU_TIMES."""
    root = root_dir(results_root)
    header = GENERATED
    head = _headline_record(root)
    gpu = gpu_run_times(root / head[0]) if head else None
    gpu_name = head[1]["device"]["name"] if head else "a GPU"
    if gpu:
        steps = ("scoreboard", "profile", "training step")
        chapters = {k: v for k, v in gpu["run"].items() if k not in steps}
        done = [f"the {k} {gpu['run'][k]:.0f} s" for k in steps if k in gpu["run"]]
        run_gpu = (f"{_minutes(sum(gpu['run'].values()))} one after the other: {len(chapters)} chapters in "
                   f"{sum(chapters.values()):.0f} s" + "".join(f", {s}" for s in done))
        if "training step" not in gpu["run"] and (root / head[0] / "training.json").exists():
            run_gpu += ("; not counted: notebook 13's training step, which this run measured before 12 "
                        "(`python -m utils.chapters.training`) in logs that give no time")
        t = gpu["tests"]
        test_gpu = ("not measured yet" if not t else
                    f"not timed as a whole; its GPU tests (`pytest -m gpu`, {t['passed']} passed"
                    + (f" in {t['parts']} parts" if t["parts"] > 1 else "")
                    + (f"; {t['cut']} part stopped by the machine's time limit" if t["cut"] == 1 else
                       f"; {t['cut']} parts stopped by the machine's time limit" if t["cut"] else "")
                    + f") {_minutes(t['s'])}" + (" for the parts that finished" if t["cut"] else ""))
    else:
        run_gpu = test_gpu = "not measured yet"

    def cpu(cmd: str) -> str:
        return CPU_TIMES[cmd] or "not measured yet"

    lines = [header, "",
             f"| command | what it does | on a GPU machine ({gpu_name}) | on a 2-core CPU machine, no GPU |",
             "|---|---|---|---|",
             "| `make lab` | JupyterLab at `notebooks/`; the recorded copies under `results/<device>/notebooks/` "
             f"open read-only | {'not measured yet'} | {cpu('make lab')} |",
             "| `make run` | executes every chapter headless; on a GPU measures and records into `results/<device>/` "
             f"| {run_gpu} | {cpu('make run')} |",
             "| `make test` | the test suite: CPU tests, every kernel compiled, the notebooks under nbval "
             f"| {test_gpu} | {cpu('make test')} |"]
    lines += ["", "Each command first sets up `.venv/` if it is missing (about a minute from a local wheel cache, "
                  "longer from the network). The GPU times are the run's own, from its logs "
                  f"(`results/{head[0] if head else '<device>'}/logs/final_run/`): setup and kernel builds "
                  "before it left out."]
    return "\n".join(lines)


def render_headline(results_root: str | Path | None = None) -> str:
    """README.md's headline figure, from the newest `whole_model_fusion` record, and its plot."""
    head = _headline_record(root_dir(results_root))
    lines = [GENERATED]
    if head is None:
        lines += ["", "No whole-model run recorded yet: on a GPU, `make run` records it under `results/<device>/`."]
    else:
        slug, rec = head
        png = f"results/{slug}/whole_model_scoreboard.png"
        lines += ["", f"**The headline.** On {rec['device']['name']}, each whole model in one kernel (the GEMM on the "
                      f"tensor cores, everything after it in its epilogue) runs "
                      f"{_span(_speedups(rec, 'strict', 'eager'))} faster than eager PyTorch at fp32's accuracy "
                      f"(TF32 off), where `torch.compile` gives {_span([e / c for e, c in zip(_speedups(rec, 'strict', 'eager'), _speedups(rec, 'strict', 'torch.compile'))])}; "
                      f"with TF32 allowed, {_span(_speedups(rec, 'tf32', 'eager'))} faster than eager fp32 "
                      f"(recorded {rec['date'][:10]}, `{slug}/whole_model_fusion.json`).",
                  "", f"![speedup over eager fp32 of the four whole models]({png})"]
    return "\n".join(lines)


def _update_span(path: Path, begin: str, end: str, body: str, check: bool) -> bool:
    text = path.read_text()
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise ValueError(f"{path} needs one {begin} line followed by one {end} line around its generated part")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    new = f"{head}{begin}\n{body}\n{end}{tail}"
    if new == text:
        return True
    if not check:
        path.write_text(new)
    return False


def update_front(readme: str | Path = README, check: bool = False, results_root: str | Path | None = None) -> bool:
    """Regenerate README.md's first screen (the times and the headline). True if it was already up to date."""
    times = _update_span(Path(readme), *TIMES, render_times(results_root), check)
    return _update_span(Path(readme), *HEADLINE, render_headline(results_root), check) and times


def update_readme(readme: str | Path = RESULTS_README, check: bool = False, results_root: str | Path | None = None) -> bool:
    """Regenerate results/README.md's tables (between the results markers). True if it was already up to
    date; with check=True nothing is written."""
    return _update_span(Path(readme), BEGIN, END, render_readme_table(results_root), check)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m utils.report", description="the READMEs' generated parts from results/")
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--update-readme", action="store_true", help="rewrite the generated parts of both READMEs")
    what.add_argument("--check-readme", action="store_true", help="exit 1 if either README is out of date")
    what.add_argument("--show", action="store_true", help="print the tables")
    ap.add_argument("--readme", type=Path, default=RESULTS_README, help="the tables' README (results/README.md)")
    ap.add_argument("--front-readme", type=Path, default=README, help="the first screen's README (README.md)")
    ap.add_argument("--results-dir", type=Path, default=None, help="results root (default results/)")
    args = ap.parse_args(argv)
    if args.show:
        print(render_readme_table(args.results_dir))
        return 0
    stale = []
    for path, update in ((args.readme, update_readme), (args.front_readme, update_front)):
        current = update(path, check=args.check_readme, results_root=args.results_dir)
        if not current:
            stale.append(path)
        print(f"{path}: {'already up to date' if current else 'out of date' if args.check_readme else 'updated'}")
    if args.check_readme and stale:
        print(f"{', '.join(map(str, stale))}: out of date with results/; run `python -m utils.report --update-readme` "
              "(never edit a generated part by hand)", file=sys.stderr)
        return 1
    return 0
