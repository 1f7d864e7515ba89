"""Notebook 13's training step, measured outside the notebook: the four problems spread over several cards.

    python -m utils.chapters.training                                                  # every problem, this card
    CUDA_VISIBLE_DEVICES=1 python -m utils.chapters.training --problems 37 --rows-out 37.json   # one card's share
    python -m utils.chapters.training --merge 94.json 75.json 37.json 62.json          # ... recorded as one

It runs session.measure_training, the function notebook 13's cell calls, and records kind "training". Most of
its time is torch.compile's: the max-autotune compiles of the four problems' training steps, at both tiers,
took 418-478 s of an H100 run's 500 (the record's compile_s), on one card more than a device call lasts.
Spread over cards, each card compiles and times its own problems; every row compares contenders timed on
one card. A whole run (experiments/full_run/on_four_gpus.sh) records it so before notebook 13, which then
shows the record of its commit rather than measuring again (Session.measures_unless_recorded).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from utils import env, results
from utils.chapters.session import measure_training
from utils.problems import all_problems

KIND = "training"
ROW_KEY = ("problem", "tf32", "contender", "protocol")  # what one row measures: never in two cards' shares
HOW = "python -m utils.chapters.training"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=HOW, description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, nargs="*", default=[p.id for p in all_problems()],
                    help="the problems to measure (with --merge: that the files must cover)")
    ap.add_argument("--reps", type=int, default=50, help="timed repetitions (notebook 13's REPS under make run)")
    ap.add_argument("--results-dir", type=Path, default=None)
    results.add_share_options(ap, "training step")
    args = ap.parse_args(argv)
    if env.mode() != "gpu":
        print(f"{HOW}: no GPU here; the recorded steps are results/<device>/{KIND}.json")
        return 0
    if args.merge:
        rows, sources = results.merged_rows(args.merge, env.device_slug(), ROW_KEY)
        missing = sorted(set(args.problems) - {row["problem"] for row in rows})
        if missing:  # a record of some problems would pass for the step of all four
            raise SystemExit(f"{HOW} --merge: no rows of problem(s) {missing} in {[str(p) for p in args.merge]}")
        print("recorded", results.record(KIND, rows, results_dir=args.results_dir, notes=f"{HOW} --merge; {sources}"))
        return 0
    start = time.monotonic()
    rows = measure_training(args.problems, reps=args.reps)
    # as utils.run logs a step, so that the README's time for `make run` counts this share too
    print(f"[training] problems {' '.join(map(str, args.problems))} ok in {time.monotonic() - start:.1f} s")
    if args.rows_out:
        results.write_rows(args.rows_out, rows, problems=" ".join(map(str, args.problems)))
        print(f"wrote {len(rows)} rows to {args.rows_out}")
    else:
        print("recorded", results.record(KIND, rows, results_dir=args.results_dir, notes=HOW))
    return 0


if __name__ == "__main__":
    sys.exit(main())
