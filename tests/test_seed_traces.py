"""The seed trace at the top of notebooks 01-07: right after the title, one table row per step of
the seeds the chapter follows, each quoted, marked right (✓) or a slip (✗), and linked to the
heading where a chapter takes it up.

- Every link lands on a heading of its notebook (anchors as Jupyter makes them: the heading's
  text, spaces turned into hyphens).
- Where the seed documents are at hand (../shared/seeds next to the repository), every quote is
  in its seed word for word (whitespace aside; "…" separates the pieces of one step), and a
  seed's rows follow the seed's own order.
"""
import json
import re
from pathlib import Path

import pytest

from utils import REPO

NOTEBOOKS = sorted(p.name for p in (REPO / "notebooks").glob("0[1-7]_*.ipynb"))
SEEDS_DIR = REPO.parent / "shared" / "seeds"
QUOTE = r'(?:"[^"]+"|`[^`]+`)'


def cells(notebook: str) -> list[dict]:
    return json.loads((REPO / "notebooks" / notebook).read_text())["cells"]


def text(cell: dict) -> str:
    return "".join(cell["source"])


def anchors(notebook: str) -> set[str]:
    """The ids Jupyter gives the notebook's headings: the text without inline code marks, spaces -> '-'."""
    found = set()
    for cell in cells(notebook):
        if cell["cell_type"] == "markdown":
            for line in text(cell).splitlines():
                if m := re.match(r"#{1,6} (.+)", line):
                    found.add(m[1].strip().replace("`", "").replace(" ", "-"))
    return found


def links(markdown: str) -> list[tuple[str, str]]:
    """[label](target) pairs; a target may hold balanced parentheses, as heading anchors do."""
    out, i = [], 0
    while (start := markdown.find("](", i)) != -1:
        label = markdown[markdown.rindex("[", 0, start) + 1:start]
        depth, j = 1, start + 2
        while depth:
            depth += {"(": 1, ")": -1}.get(markdown[j], 0)
            j += 1
        out.append((label, markdown[start + 2:j - 1]))
        i = j
    return out


def trace_rows(notebook: str) -> list[tuple[str, list[str], str, str]]:
    """(seed, quotes, verdict, links column) for each row of the notebook's seed trace."""
    trace = text(cells(notebook)[1])
    rows = []
    for line in trace.splitlines():
        if re.match(r"\| \d{3} \|", line):
            seed, words, verdict, here = [part.strip() for part in line.strip().strip("|").split(" | ")]
            assert re.fullmatch(rf"{QUOTE}(?: … {QUOTE})*", words), f"{notebook}: not only quotes: {words}"
            rows.append((seed, [q.strip('"`') for q in re.findall(QUOTE, words)], verdict, here))
    return rows


def seed_texts() -> dict[str, str]:
    return {p.name[:3]: " ".join(p.read_text(errors="replace").split()) for p in SEEDS_DIR.glob("*.txt")}


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_the_trace_follows_the_title(notebook):
    first, second, third = cells(notebook)[:3]
    assert text(first).startswith("# ") and text(second).startswith("## Seed trace"), notebook
    assert "parameters" in third.get("metadata", {}).get("tags", []), f"{notebook}: the parameters cell comes next"
    assert len(trace_rows(notebook)) >= 3


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_each_row_is_marked_and_linked_to_a_heading(notebook):
    for seed, quotes, verdict, here in trace_rows(notebook):
        assert quotes and re.match(r"✓ right|✗ slip", verdict), f"{notebook}, seed {seed}: {verdict}"
        targets = links(here)
        assert targets, f"{notebook}, seed {seed}: no link in {here!r}"
        for _, target in targets:
            page, _, anchor = target.partition("#")
            page = page or notebook
            assert (REPO / "notebooks" / page).is_file(), f"{notebook}: no notebook {page}"
            assert anchor in anchors(page), f"{notebook}: no heading #{anchor} in {page}"


@pytest.mark.skipif(not SEEDS_DIR.is_dir(), reason=f"the seed documents are not at {SEEDS_DIR}")
@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_quotes_are_verbatim_and_in_each_seeds_order(notebook):
    seeds = seed_texts()
    where: dict[str, int] = {}
    for seed, quotes, _, _ in trace_rows(notebook):
        positions = []
        for quote in quotes:
            q = " ".join(quote.split())
            assert q in seeds[seed], f"{notebook}: seed {seed} does not say {quote!r}"
            positions.append(seeds[seed].index(q))
        assert positions[0] >= where.get(seed, -1), f"{notebook}: {quotes[0]!r} comes earlier in seed {seed}"
        where[seed] = positions[0]


def test_links_parse_anchors_with_parentheses():
    md = "[a](#Rung-1:-one-(seed-004,-x)), [b](02_naive_gemm.ipynb#Pitfalls)"
    assert links(md) == [("a", "#Rung-1:-one-(seed-004,-x)"), ("b", "02_naive_gemm.ipynb#Pitfalls")]
