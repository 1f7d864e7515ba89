"""Notebook 09's prose against its records and its seeds: every figure its markdown quotes from
results/ is the record's, rounded as the prose rounds it (a re-recorded run that moves one fails
here until the prose follows), and what it says of the five seeds is what the seeds say.

Also the final scoreboard's table (utils.chapters.scoreboard.final_markdown, show_final): built from
the three records of one device, its ratios the records' own."""
import json
import re
import types

import pytest

from utils import REPO, results
from utils.chapters import scoreboard as sb
from utils.chapters import session as chapter

NB09 = REPO / "notebooks" / "09_fused_solutions.ipynb"
ROOT = REPO / "results"
H200, H100 = "nvidia-h200", "nvidia-h100-80gb-hbm3"
SEEDS_DIR = REPO.parent / "shared" / "seeds"
LONG_K, SHORT_K = (94, 75, 62), (37,)  # the problems by their GEMM's K: 8192, and 37's 1024


def markdown_cells() -> dict[str, str]:
    """{cell id: source} of the notebook's markdown cells."""
    cells = json.loads(NB09.read_text())["cells"]
    return {c["id"]: "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"}


def prose() -> str:
    """All of the notebook's markdown, whitespace folded (a phrase may be wrapped anywhere)."""
    return " ".join(" ".join(markdown_cells().values()).split())


def says(*phrases: str) -> None:
    text = prose()
    missing = [p for p in phrases if p not in text]
    assert not missing, f"notebooks/09 does not say (its records do): {missing}"


def record(device: str, kind: str) -> dict:
    rec = results.load(kind, device, ROOT)
    assert rec is not None, f"no {kind} record for {device}"
    return rec


def span(values, fmt: str = "{:.2f}", unit: str = "x") -> str:
    """'lo–hi<unit>' as the prose writes a range, or one value when both ends round alike."""
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return f"{lo}{unit}" if lo == hi else f"{lo}–{hi}{unit}"


def ratios(device: str, kind: str, contender: str = "ours", protocol: str = "steady") -> dict[tuple[int, bool], dict]:
    """{(problem, tf32): session.solution_ratios row} of a record."""
    rows = chapter.solution_ratios(record(device, kind)["entries"], contender)
    return {(r["problem"], r["tf32"]): r for r in rows if r["protocol"] == protocol}


def medians(device: str, kind: str) -> dict[tuple, float]:
    """{(problem, contender, tf32, protocol): median ms} of a record."""
    return {(e["problem"], e["contender"], e["tf32"], e["protocol"]): e["median_ms"]
            for e in record(device, kind)["entries"]}


# --------------------------------------------------------------------------- the final scoreboard

def test_the_final_table_is_the_records_ratios():
    recs = {kind: record(H200, kind) for kind in sb.FINAL_KINDS}
    text = sb.final_markdown(recs)
    ms = medians(H200, "solutions")
    eager, compiled = ms[94, "eager", False, "steady"], min(ms[94, m, False, "steady"] for m in chapter.COMPILE_MODES)
    ours = ms[94, "ours", False, "steady"]
    row = next(line for line in text.splitlines() if line.startswith("| 94 |"))
    assert row.split(" | ")[1] == f"{eager / ours:.2f}x · {compiled / ours:.2f}x"
    assert len(row.split(" | ")) == 1 + len(sb.FINAL_COLUMNS)
    assert "recorded on NVIDIA H200" in text and "Not recorded" not in text
    assert [line.split(" | ")[0] for line in text.splitlines() if re.match(r"\| \d", line)] == [
        "| 94", "| 75", "| 37", "| 62"]


def test_the_final_table_names_what_is_missing_and_never_mixes_devices():
    text = sb.final_markdown({"solutions": record(H100, "solutions"), "training": None, "autocast": None})
    assert "Not recorded on this device: the training step, the forward under autocast." in text
    assert "training step, TF32 off" not in text and "forward, TF32 on" in text
    with pytest.raises(ValueError, match="more than one device"):
        sb.final_markdown({"solutions": record(H100, "solutions"), "training": record(H200, "training")})


def test_show_final_without_records_prints_one_line(tmp_path, capsys):
    sb.show_final(types.SimpleNamespace(on_gpu=False, results_dir=tmp_path))
    out = capsys.readouterr().out
    assert out.startswith("SKIPPED: the final scoreboard") and out.count("\n") == 1
