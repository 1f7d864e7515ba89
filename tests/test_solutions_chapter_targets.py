"""Notebook 10's targets and predictions (the cell that defines PREDICTED and FORWARD_TARGETS): the frozen
model's target is its prediction's low end, so the table's verdict (session.verdict) and the debrief's
(solution_debriefs.against_each) judge the same thing on every recorded device; the targets name no record of
the project's history."""
import json

import pytest

from utils import REPO, results
from utils.chapters import session as chapter
from utils.chapters import solution_debriefs as debriefs

NB10 = REPO / "notebooks" / "10_fused_solutions.ipynb"
DEVICES = sorted(p.name for p in (REPO / "results").iterdir() if (p / "solutions.json").exists())


def targets_cell() -> dict:
    cells = json.loads(NB10.read_text())["cells"]
    source = next("".join(c["source"]) for c in cells if "FORWARD_TARGETS = " in "".join(c["source"]))
    definitions = source[:source.index("\n\nif measured is not None")]
    namespace = {"PIDS": [94, 75, 37, 62], "debriefs": debriefs}
    exec(compile(definitions, "notebook 10", "exec"), namespace)
    return namespace


def test_the_frozen_target_is_the_low_end_of_its_prediction():
    ns = targets_cell()
    for pid in ns["PIDS"]:
        lo, _ = debriefs.predicted_range(ns["PREDICTED"][False, "ours, frozen"][pid])
        assert ns["forward_target"]({"contender": "ours, frozen", "tf32": False, "problem": pid}) == ("vs_compile", lo, None)


@pytest.mark.parametrize("device", DEVICES)
def test_the_tables_verdict_and_the_debrief_agree_on_the_frozen_rows(device):
    ns = targets_cell()
    record = results.load("solutions", device, REPO / "results")
    for r in chapter.solution_ratios(record["entries"], "ours, frozen"):
        if r["protocol"] != "steady" or r["tf32"]:
            continue
        lo, hi = debriefs.predicted_range(ns["PREDICTED"][False, "ours, frozen"][r["problem"]])
        met = chapter.verdict(r["vs_compile"], ns["forward_target"](r)[1]) != "**missed**"
        assert met == (debriefs.side(r["vs_compile"], lo, hi) >= 0), (device, r["problem"], r["vs_compile"])
