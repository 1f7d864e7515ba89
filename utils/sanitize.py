"""`make sanitize`: every kernel of kernels/ and every solution under compute-sanitizer's four tools.

One target per process, each with a time limit; a verdict per (tool, target), recorded.

    python -m utils.sanitize                                  # memcheck, synccheck, initcheck, racecheck: everything
    python -m utils.sanitize --list                           # the plan, on any machine: targets, calls, tools
    python -m utils.sanitize --tools memcheck synccheck       # some tools
    python -m utils.sanitize --targets 'gemm_0*' 'solutions/*' --classes reduced   # some targets (shell patterns)
    python -m utils.sanitize --budget 420 --resume            # end within 420 s (a target starts only with more
                                                              # left than it took last time); skip the pairs clean
                                                              # at this commit: run it again to go on
    python -m utils.sanitize --exclude initcheck=kns=reduce_kernel   # leave a PyTorch kernel out of one tool's verdict

The targets (utils/sanitize_targets.py) are the kernel files' launchers and the solutions' forward
and training step, at reduced shapes (edges and several tiles; every tool) and at KernelBench's full
shapes (memcheck and synccheck; racecheck and initcheck for the memory-bound units only). Each runs as
`compute-sanitizer --tool T python -m utils.sanitize_targets <target>`, one after the other: one GPU
runs one racecheck at a time. PYTORCH_NO_CUDA_MEMORY_CACHING=1 makes every tensor its own cudaMalloc
(inside a cached block an out-of-bounds access hits memory memcheck thinks valid, and initcheck
takes a reused block for initialised). The kernels are built before, outside the sanitizer.

A verdict (`judge`) is "clean" only when the tool's summary says 0 (ERROR SUMMARY: N errors;
racecheck's RACECHECK SUMMARY: N hazards, warnings counted) and the target ran every call and exited
0. Errors are "errors"; a target that exits otherwise, or prints no summary, "crashed"; one stopped
at its time limit "not finished"; one the budget left out "not run". None of these passes.

Recorded: results/<device>/sanitize.json (kind "sanitize": tool, target, verdict, errors, seconds,
commit, device per entry, and the calls run, the kernels the reports name, the filters used) and one
log per (tool, target) under results/<device>/logs/sanitize/<tool>/, with this machine's paths taken
out. A run replaces the entries of the pairs it ran and keeps the others, each with its own commit.
--exclude passes compute-sanitizer's --kernel-name-exclude (kns=, kne= or regex=); use it only for an
error inside a kernel of PyTorch's own, never one of kernels/: each entry names the filters it ran
with. (No memcheck --leak-check: tensors Python still holds at exit are reported as leaks.)
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from utils import REPO, build, env, results
from utils import sanitize_targets as st

KIND = "sanitize"
ERROR_EXITCODE = 99
PRINT_LIMIT = 50  # reports printed per target; the summary still counts them all
TIMEOUT_S = {"memcheck": 300, "synccheck": 300, "initcheck": 480, "racecheck": 480}  # per target
MIN_LEFT_S = 10  # a target starts only with this much of the budget left (a start under the sanitizer takes seconds)
OPS_KERNELS = ("gemm_10_3xtf32", "fused_gemm_groupnorm", "groupnorm", "min_bias_broadcast", "tail_backward")
# What a report's location names when the kernel is PyTorch's or cuBLAS's, not one of kernels/.
LIBRARY_KERNELS = ("at::native", "at::cuda", "c10::", "cublas", "cutlass", "xmma", "sgemm", "gemv")
VERDICTS = ("clean", "errors", "crashed", "not finished", "not run", "skipped")

_ERRORS = re.compile(r"^=+ ERROR SUMMARY: (\d+) errors?\s*$", re.MULTILINE)  # not "... errors were not printed"
_HAZARDS = re.compile(r"^=+ RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)",
                      re.MULTILINE)
_CALL = re.compile(rf"^{st.CALL} (\d+)/(\d+) ", re.MULTILINE)
_START = re.compile(rf"^{st.START} .*: (\d+) calls\s*$", re.MULTILINE)
_WHERE = re.compile(r"^=+ .*?\bat (.+?)\+0x[0-9a-fA-F]+", re.MULTILINE)


@dataclass(frozen=True)
class Verdict:
    verdict: str                   # one of VERDICTS
    errors: int | None             # the tool's count (racecheck: hazards); None: it printed no summary
    calls_done: int                # the target's calls that finished
    calls: int | None              # the target's calls (None: it never started)
    where: tuple[str, ...] = ()    # the kernels the reports name, the first few
    reason: str = ""

    @property
    def in_libraries_only(self) -> bool:
        """Every report is inside PyTorch's or cuBLAS's kernels (a case for --exclude, with care)."""
        return bool(self.where) and all(any(m in w for m in LIBRARY_KERNELS) for w in self.where)


def judge(tool: str, text: str, rc: int | None, timed_out: bool) -> Verdict:
    """A (tool, target) verdict from the output, the exit status and whether the time limit stopped it."""
    totals = [int(n) for n in _ERRORS.findall(text)]
    hazards = [max(int(n), int(e) + int(w)) for n, e, w in _HAZARDS.findall(text)]
    errors = sum(hazards) if hazards else (sum(totals) if totals else None)
    if hazards and totals:
        errors = max(errors, sum(totals))
    done = max((int(i) for i, _ in _CALL.findall(text)), default=0)
    started = _START.search(text)
    calls = int(started.group(1)) if started else None
    where = tuple(dict.fromkeys(" ".join(w.split())[:160] for w in _WHERE.findall(text)))[:5]
    progress = f"{done}/{calls if calls is not None else '?'} calls"
    if timed_out:
        return Verdict("not finished", None, done, calls, where, f"stopped at the time limit after {progress}"
                       + (" (errors were being reported)" if where else ""))
    if errors:
        v = Verdict("errors", errors, done, calls, where, f"{errors} reported, {progress}")
        return v if not v.in_libraries_only else replace(
            v, reason=v.reason + "; every report is inside a kernel of PyTorch's or cuBLAS's (see --exclude)")
    if rc == ERROR_EXITCODE:
        return Verdict("errors", errors, done, calls, where, "compute-sanitizer's exit status says errors")
    if errors is None:
        return Verdict("crashed", None, done, calls, where, f"no summary from compute-sanitizer (exit status {rc}, {progress})")
    if rc != 0 or f"{st.DONE} " not in text:
        last = [line for line in text.splitlines() if line.strip() and not line.startswith("=")][-1:]
        return Verdict("crashed", errors, done, calls, where,
                       f"exit status {rc} after {progress}" + (f": {last[0].strip()[:200]}" if last else ""))
    return Verdict("clean", 0, done, calls, where)


# ---- running one target -------------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    rc: int | None                 # None: killed at the time limit
    timed_out: bool
    seconds: float
    text: str


def run_process(cmd: list[str], environ: dict, timeout: float, cwd: Path = REPO) -> Run:
    """Run cmd in a process group of its own, its output to a file; at the time limit the whole group
    (the sanitizer, the Python it runs, anything they started) is killed."""
    with tempfile.TemporaryFile() as out:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=cwd, env=environ, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        timed_out = False
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out, rc = True, None
        finally:  # the time limit, Ctrl-C, or a clean exit that left a child behind
            _kill_group(proc.pid)
            proc.wait()
        seconds = time.monotonic() - start
        out.seek(0)
        return Run(rc, timed_out, seconds, out.read().decode(errors="replace"))


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


def command(tool: str, target: str, sanitizer: str, excludes: tuple[str, ...] = (),
            print_limit: int = PRINT_LIMIT) -> list[str]:
    cmd = [sanitizer, "--tool", tool, "--error-exitcode", str(ERROR_EXITCODE), "--target-processes",
           "application-only", "--print-limit", str(print_limit)]
    for f in excludes:
        cmd += ["--kernel-name-exclude", f]
    return cmd + [sys.executable, "-m", "utils.sanitize_targets", target]


def environment(base: dict | None = None) -> dict:
    environ = dict(os.environ if base is None else base, PYTORCH_NO_CUDA_MEMORY_CACHING="1", PYTHONUNBUFFERED="1")
    environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), environ.get("PYTHONPATH")) if p)
    return environ


def scrub(text: str) -> str:
    """The log without this machine's paths (results/ holds none): the checkout, the environment, the
    toolkit, home and temp, and any other absolute folder, each replaced by a name."""
    named = [(str(REPO), "."), (sys.prefix, "<venv>"), (str(Path.home()), "~"), (tempfile.gettempdir(), "<tmp>")]
    cuda = shutil.which("nvcc")
    if cuda:
        named.append((str(Path(cuda).resolve().parent.parent), "<cuda>"))
    for path, name in sorted(named, key=lambda p: -len(p[0])):
        if len(path) > 1:
            text = text.replace(path, name)
    return re.sub(r"(?<![\w.~<>-])/(?:[\w.+@-]+/)+", "<path>/", text)


# ---- the plan, the run, the record ---------------------------------------------------------------

def plan(tools, patterns=None, classes=st.CLASSES) -> list[tuple[str, st.Target]]:
    """(tool, target) pairs in run order: tool by tool (fastest first), targets in list order."""
    chosen = st.select(patterns, classes)
    return [(tool, t) for tool in st.TOOLS if tool in tools for t in chosen if tool in t.tools]


def log_name(tool: str, target: str) -> str:
    return f"logs/sanitize/{tool}/{target.replace('/', '.')}.log"


def entry(tool: str, target: str, v: Verdict, seconds: float, commit: str, device: str,
          excludes: tuple[str, ...] = (), log: str | None = None) -> dict:
    return {"tool": tool, "target": target, "verdict": v.verdict, "errors": v.errors, "seconds": round(seconds, 1),
            "commit": commit, "device": device, "calls_done": v.calls_done, "calls": v.calls,
            "excluded_kernels": list(excludes), "where": list(v.where), "reason": v.reason, "log": log}


def merge(previous: list[dict], fresh: list[dict]) -> list[dict]:
    """The previous entries with those of the pairs run now replaced, in plan order (tool, then target)."""
    ran = {(e["tool"], e["target"]) for e in fresh}
    order = {t.name: i for i, t in enumerate(st.targets())}
    merged = [e for e in previous if (e["tool"], e["target"]) not in ran] + fresh
    return sorted(merged, key=lambda e: (st.TOOLS.index(e["tool"]) if e["tool"] in st.TOOLS else len(st.TOOLS),
                                         order.get(e["target"], len(order)), e["target"]))


def previous_entries(path: Path) -> list[dict]:
    return results.read(path)["entries"] if path.exists() else []


def sanitizer_path() -> str | None:
    found = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    return found if Path(found).exists() else None


def prebuild(pairs) -> None:
    """Build what the targets load, before and outside the sanitizer (a child loads them warm)."""
    units = {t.unit for _, t in pairs}
    files = {(u.path.stem, u.path.parent) for u in units if not u.is_solution and u.builds_here()}
    files |= {(k, build.KERNELS_DIR) for k in OPS_KERNELS if build.builds_here(k)}
    failed = build.load_kernels([build.Variant(n, kernels_dir=d) for n, d in sorted(files)], build_only=True,
                                on_error="return")
    for item, error in failed.items():
        print(f"prebuild: {item} did not build ({type(error).__name__}); its targets will crash and say why")


def run(pairs, sanitizer: str, *, timeouts: dict, budget: float | None, excludes: dict, previous: list[dict],
        resume: bool, commit: str, device: str, log_root: Path | None, runner=run_process, say=print,
        clock=time.monotonic) -> list[dict]:
    """Run every (tool, target) in turn, printing each verdict as it comes; the entries of the pairs
    it ran, skipped or left out (a pair the budget left out keeps its recorded entry, if it has one)."""
    fresh, start, n = [], clock(), len(pairs)
    recorded = {(e["tool"], e["target"]): e for e in previous}
    for i, (tool, target) in enumerate(pairs, 1):
        head, key = f"[{i:>{len(str(n))}}/{n}] {tool:<9} {target.name}", (tool, target.name)
        left = None if budget is None else budget - (clock() - start)
        ex, seconds, log = tuple(excludes.get(tool, ())), 0.0, None
        if resume and recorded.get(key, {}).get("verdict") == "clean" and recorded[key]["commit"] == commit:
            say(f"{head}: clean at {commit} already (--resume)")
            continue
        if not target.unit.builds_here():
            v = Verdict("skipped", None, 0, len(target.calls),
                        reason=f"{build.display_path(target.unit.path)} does not build for this GPU (its // @arch line)")
        elif left is not None and left < max(MIN_LEFT_S, recorded.get(key, {}).get("seconds") or 0):
            # too little left: under MIN_LEFT_S, or less than this pair took last time (a later --resume runs it)
            if key in recorded:
                say(f"{head}: not run ({left:.0f} s of the budget left); its recorded entry stays")
                continue
            v = Verdict("not run", None, 0, len(target.calls), reason="the budget ran out before it started")
        else:
            limit = timeouts[tool] if left is None else min(timeouts[tool], left)
            say(f"{head} ...", end="", flush=True)
            try:
                r = runner(command(tool, target.name, sanitizer, ex), environment(), limit)
            except KeyboardInterrupt:  # run_process killed the target's processes; keep what finished
                say(" interrupted: recording the pairs that finished")
                break
            v, seconds, log = judge(tool, r.text, r.rc, r.timed_out), r.seconds, log_name(tool, target.name)
            if r.timed_out and limit < timeouts[tool]:  # not its own time limit: the budget's end
                v = replace(v, reason=v.reason.replace("at the time limit", f"at the budget's end ({limit:.0f} s)"))
            if log_root is not None:
                (log_root / log).parent.mkdir(parents=True, exist_ok=True)
                (log_root / log).write_text(scrub(r.text))
        say(f"{head}: {v.verdict}" if log is None else
            f" {v.verdict}, {_count(v)}, {v.calls_done}/{v.calls} calls, {seconds:.1f} s (elapsed {clock() - start:.0f} s)")
        if v.verdict != "clean":
            say(f"    {v.reason}")
        fresh.append(entry(tool, target.name, v, seconds, commit, device, ex if log else (), log))
    return fresh


def _count(v: Verdict) -> str:
    return "no summary" if v.errors is None else f"{v.errors} error{'s' * (v.errors != 1)}"


def report(entries: list[dict], pairs, commit: str) -> tuple[str, bool]:
    """The closing summary, and whether every planned pair is clean at this commit (a skip, a pair
    that does not apply to this GPU, is listed and does not fail it)."""
    planned = {(tool, t.name) for tool, t in pairs}
    mine = [e for e in entries if (e["tool"], e["target"]) in planned]
    lines = ["", "== compute-sanitizer summary"]
    for tool in st.TOOLS:
        counts = {v: sum(1 for e in mine if e["tool"] == tool and e["verdict"] == v) for v in VERDICTS}
        if any(counts.values()):
            lines.append(f"{tool:<10} " + ", ".join(f"{c} {v}" for v, c in counts.items() if c))
    bad = [e for e in mine if e["verdict"] not in ("clean", "skipped")]
    stale = [e for e in mine if e["verdict"] == "clean" and e["commit"] != commit]
    lines += [f"  {e['verdict'].upper():<13} {e['tool']:<9} {e['target']}: {e['reason']}"
              + (f" [{e['log']}]" if e.get("log") else "") for e in bad]
    lines += [f"  {'STALE':<13} {e['tool']:<9} {e['target']}: clean at {e['commit']}, not run at {commit}" for e in stale]
    excluded = sorted({(e["tool"], f) for e in mine for f in e.get("excluded_kernels", [])})
    if excluded:
        lines.append("kernels left out of the verdict (--exclude): " + ", ".join(f"{t}: {f}" for t, f in excluded))
    missing = planned - {(e["tool"], e["target"]) for e in mine}
    failing = len(bad) + len(stale) + len(missing)
    lines.append(f"every (tool, target) pair clean at {commit}" if not failing else
                 f"{failing} of {len(planned)} (tool, target) pairs are not clean at {commit}")
    return "\n".join(lines), not failing


def _excludes(items) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in items or ():
        tool, sep, flt = item.partition("=")
        if not sep or tool not in st.TOOLS or not re.match(r"(kns|kne|regex)=.", flt):
            raise SystemExit(f"--exclude takes TOOL=kns=NAME, TOOL=kne=NAME or TOOL=regex=EXPR, got {item!r}")
        out.setdefault(tool, []).append(flt)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m utils.sanitize", description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--tools", nargs="+", default=list(st.TOOLS), choices=st.TOOLS)
    ap.add_argument("--targets", nargs="+", metavar="PATTERN", help="shell patterns of target or unit names")
    ap.add_argument("--classes", nargs="+", default=list(st.CLASSES), choices=st.CLASSES)
    ap.add_argument("--timeout", type=float, help="seconds per target (default: " +
                    ", ".join(f"{t} {s}" for t, s in TIMEOUT_S.items()) + ")")
    ap.add_argument("--budget", type=float, help="seconds in all: no target starts after that")
    ap.add_argument("--resume", action="store_true", help="skip the pairs recorded clean at this commit")
    ap.add_argument("--exclude", action="append", metavar="TOOL=FILTER", help="--kernel-name-exclude for one tool")
    ap.add_argument("--results-dir", type=Path, help="the results root (default results/)")
    ap.add_argument("--list", action="store_true", help="print the plan and stop")
    args = ap.parse_args(argv)
    excludes = _excludes(args.exclude)
    pairs = plan(args.tools, args.targets, args.classes)
    if not pairs:
        print("no target matches", args.targets)
        return 1
    if args.list:
        for tool, t in pairs:
            print(f"{tool:<10} {t.name:<60} {len(t.calls):>3} calls")
        print(f"{len(pairs)} (tool, target) pairs, {sum(len(t.calls) for _, t in pairs)} calls")
        return 0
    if env.mode() != "gpu":
        print(f"compute-sanitizer needs a GPU where kernels build (this machine: {env.mode()}); nothing was checked.")
        return 0
    sanitizer = sanitizer_path()
    if sanitizer is None:
        print("compute-sanitizer not found: it ships with the CUDA toolkit (bin/compute-sanitizer).")
        return 1
    device_root = results.write_root(args.results_dir) / env.device_slug()
    summary = device_root / f"{KIND}.json"
    previous = previous_entries(summary)
    prebuild(pairs)
    print(f"== compute-sanitizer: {len(pairs)} (tool, target) pairs, one process each; logs under {device_root}/logs/sanitize/",
          flush=True)
    timeouts = {t: args.timeout or s for t, s in TIMEOUT_S.items()}
    commit = results.git_commit()
    fresh = run(pairs, sanitizer, timeouts=timeouts, budget=args.budget, excludes=excludes, previous=previous,
                resume=args.resume, commit=commit, device=env.device_slug(), log_root=device_root)
    entries = merge(previous, fresh)
    if entries:
        results.record(KIND, entries, notes="python -m utils.sanitize: compute-sanitizer over utils/sanitize_targets.py's "
                       "targets, one process per (tool, target); each entry carries its own commit", results_dir=args.results_dir)
    text, ok = report(entries, pairs, commit)
    print(text + f"\nrecorded: {summary}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
