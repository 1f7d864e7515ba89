"""The test session (`make test`: tests/ and the notebooks under nbval) records nothing into
results/, and nbval compares the machine-independent cells with a recorded GPU run.

results/ holds the recorded GPU runs; the tests and the notebooks nbval executes read them,
and never write into it. At the start of the session $WORKBOOK_RECORD_DIR points at a temporary
folder (utils.results.write_root sends what a notebook or a test would record into results/
there: the notebooks' kernels inherit the variable from this process), and results/ is
snapshotted; at the end, a file added, removed or modified under results/ fails the session.

Notebooks are committed without outputs, so nbval alone has nothing to compare a cell
marked `# NBVAL_CHECK_OUTPUT` with: it would only execute it. Before the run, each such
cell gets as its reference the outputs of the same cell (same source) in the executed
copies recorded under results/*/notebooks/ (utils.run.recorded_copies: a renumbered chapter's
copies under its former names too, utils.run.RECORDED_AS). A marked cell must print the same thing on a
laptop as on the H100 — that is what the mark claims. A marked cell with no recorded
counterpart (new, or changed since the recording) is only executed, and the terminal
summary lists it, so an unchecked cell is never mistaken for a checked one.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

MARK = "# NBVAL_CHECK_OUTPUT"
RESULTS = Path(__file__).resolve().parent / "results"
_unchecked: list[str] = []
_results_before: dict = {}
_results_changed: list[str] = []
_record_dir: str | None = None  # the temporary folder this session made, removed at its end


def pytest_configure(config):
    global _record_dir
    from utils import results

    if not os.environ.get(results.RECORD_DIR_ENV):  # a folder set by hand is kept, to look at afterwards
        _record_dir = tempfile.mkdtemp(prefix="workbook-records-")
        os.environ[results.RECORD_DIR_ENV] = _record_dir
    _results_before.update(results.snapshot(RESULTS))


def pytest_sessionfinish(session):
    from utils import results

    if hasattr(session.config, "workeroutput"):  # a pytest-xdist worker: its collection found the unchecked cells
        session.config.workeroutput["nbval_unchecked"] = list(_unchecked)

    _results_changed.extend(results.changes(_results_before, results.snapshot(RESULTS)))
    if _results_changed:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config):
    global _record_dir
    from utils import results

    if _record_dir is not None:
        shutil.rmtree(_record_dir)
        del os.environ[results.RECORD_DIR_ENV]
        _record_dir = None


def recorded_outputs(notebook: str) -> dict[str, list]:
    """cell source -> outputs, over every recorded executed copy of `notebook`, those under its former names
    included (utils.run.recorded_copies; its own newest last, and the last wins)."""
    import nbformat  # here, not at the top: `pytest tests` needs no notebook packages

    from utils import run

    found: dict[str, list] = {}
    for copy in run.recorded_copies(notebook, RESULTS):
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


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller: each worker's unchecked cells (every worker collects every test, so the
    same cells come from each), kept once, for the summary."""
    for cell in getattr(node, "workeroutput", {}).get("nbval_unchecked", []):
        if cell not in _unchecked:
            _unchecked.append(cell)


def pytest_terminal_summary(terminalreporter):
    if _results_changed:
        terminalreporter.write_line(
            f"FAILED: the test session wrote into {RESULTS} (tests and nbval record into $WORKBOOK_RECORD_DIR "
            "through utils.results.write_root, never into results/):\n  " + "\n  ".join(_results_changed), red=True)
    if _unchecked:
        terminalreporter.write_line(
            "NBVAL_CHECK_OUTPUT cells executed but not compared (no recorded GPU run has them yet): "
            + ", ".join(_unchecked))
