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


# --------------------------------------------------------------------------- the seeds

def seed_texts() -> dict[str, str]:
    return {p.name[:3]: " ".join(p.read_text(errors="replace").split()) for p in SEEDS_DIR.glob("*.txt")}


def seed_rows(cell_id: str) -> list[tuple[str, list[str]]]:
    """(seed, the table row's cells) for each row of a markdown cell's table that names a seed."""
    rows = []
    for line in markdown_cells()[cell_id].splitlines():
        if m := re.match(r"\| (\d{3}|all)\b", line):
            rows.append(("000" if m[1] == "all" else m[1], [c.strip() for c in line.strip().strip("|").split(" | ")]))
    return rows


RECAP = "nb09-58e"  # "## 11. The seeds against the outcome"


@pytest.mark.skipif(not SEEDS_DIR.is_dir(), reason=f"the seed documents are not at {SEEDS_DIR}")
@pytest.mark.parametrize("cell_id", ["nb09-01", RECAP])
def test_every_quote_of_a_seed_is_verbatim(cell_id):
    seeds = seed_texts()
    quoted = 0
    for seed, cells in seed_rows(cell_id):
        for quote in re.findall(r'"([^"]+)"', " | ".join(cells)):
            assert " ".join(quote.replace("`", "").split()) in seeds[seed], f"seed {seed} does not say {quote!r}"
            quoted += 1
    assert quoted or cell_id == RECAP  # the seeds' words are quoted at the top; the recap may paraphrase


@pytest.mark.skipif(not SEEDS_DIR.is_dir(), reason=f"the seed documents are not at {SEEDS_DIR}")
def test_only_the_seed_the_prose_names_drafts_a_model_new():
    drafted = [seed for seed, text in sorted(seed_texts().items()) if "class ModelNew" in text]
    assert drafted == ["001"]
    says(f"Only {drafted[0]} drafts a `class ModelNew`")
    assert "Each seed ends with" not in prose()


def test_the_recap_has_one_row_per_seed_and_names_chapters_that_exist():
    rows = seed_rows(RECAP)
    assert [seed for seed, _ in rows] == ["000", "001", "002", "003", "004"]
    for seed, (_, right, slipped, chapters) in rows:
        assert right and slipped, seed
        for number in chapters.split(", "):
            assert list((REPO / "notebooks").glob(f"{number}_*.ipynb")), f"seed {seed}: no chapter {number}"


def test_seed_003s_whole_batch_statistics_are_called_a_slip_where_it_is_marked_right():
    (cells,) = [cells for seed, cells in seed_rows("nb09-01") if seed == "003"]
    verdict = cells[3]
    assert verdict.startswith("right") and "across the batch" in verdict and "chapter 06" in verdict
    (recap,) = [cells for seed, cells in seed_rows(RECAP) if seed == "003"]
    assert "GroupNorm over the whole batch" in recap[2] and "06" in recap[3]


def test_what_the_prose_reads_from_the_final_table_holds_on_every_device():
    """"With TF32 off ... over 2x torch.compile on all four, forward and training step alike; with TF32
    allowed and under autocast ... the smallest margins are there": on every device's records."""
    says("With TF32 off the margin is the GEMM's, over 2x `torch.compile` on all four, forward and training step alike")
    for device in results.recorded_devices(ROOT):
        strict, rest = [], []
        for kind in sb.FINAL_KINDS:
            if results.load(kind, device, ROOT) is not None:
                for (_, tf32), r in ratios(device, kind).items():
                    (rest if tf32 or kind == "autocast" else strict).append(r["vs_compile"])
        assert not strict or (min(strict) > 2 and max(rest, default=0) < min(strict)), (device, strict, rest)
