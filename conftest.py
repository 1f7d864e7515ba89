"""nbval: compare the machine-independent cells with a recorded GPU run.

Notebooks are committed without outputs, so nbval alone has nothing to compare a cell
marked `# NBVAL_CHECK_OUTPUT` with: it would only execute it. Before the run, each such
cell gets as its reference the outputs of the same cell (same source) in the executed
copies recorded under results/*/notebooks/. A marked cell must print the same thing on a
laptop as on the H100 — that is what the mark claims. A marked cell with no recorded
counterpart (new, or changed since the recording) is only executed, and the terminal
summary lists it, so an unchecked cell is never mistaken for a checked one.
"""
from __future__ import annotations

from pathlib import Path

MARK = "# NBVAL_CHECK_OUTPUT"
RESULTS = Path(__file__).resolve().parent / "results"
_unchecked: list[str] = []


def recorded_outputs(notebook: str) -> dict[str, list]:
    """cell source -> outputs, over every recorded executed copy of `notebook` (newest last wins)."""
    import nbformat  # here, not at the top: `pytest tests` needs no notebook packages

    found: dict[str, list] = {}
    for copy in sorted(RESULTS.glob(f"*/notebooks/{notebook}"), key=lambda p: p.stat().st_mtime):
        for cell in nbformat.read(copy, as_version=4).cells:  # NotebookNodes, as nbval expects
            if cell.cell_type == "code" and MARK in cell.source:
                found[cell.source] = cell.outputs
    return found


def pytest_collection_modifyitems(session, config, items):
    by_notebook: dict[str, dict[str, list]] = {}
    for item in items:
        cell = getattr(item, "cell", None)
        if cell is None or item.__class__.__name__ != "IPyNbCell" or MARK not in cell.source:
            continue
        name = Path(str(item.fspath)).name
        recorded = by_notebook.setdefault(name, recorded_outputs(name))
        if cell.source in recorded:
            cell.outputs = recorded[cell.source]
            cell.execution_count = 1  # nbval compares only cells that were run
        else:
            _unchecked.append(f"{name} cell {item.cell_num}")


def pytest_terminal_summary(terminalreporter):
    if _unchecked:
        terminalreporter.write_line(
            "NBVAL_CHECK_OUTPUT cells executed but not compared (no recorded GPU run has them yet): "
            + ", ".join(_unchecked))
