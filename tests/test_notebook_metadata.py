"""The committed notebooks carry the metadata JupyterLab writes for the workbook's kernel, in the
form Jupyter saves them, so that opening one in `make lab` does not mark it modified.

JupyterLab sets `kernelspec` from the kernel it starts (the `python3` kernelspec that `make setup`
installs with ipykernel) and `language_info` from the kernel's reply; it changes neither when the
value is already the same. ipykernel's reply also carries `language_info.version`, the running
Python's version: that one field is left out here, as it would tie the notebooks to one Python.
"""
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {
    "codemirror_mode": {"name": "ipython", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
}


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 10


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_metadata_is_what_jupyterlab_writes(path):
    nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    assert dict(nb.metadata) == {"kernelspec": KERNELSPEC, "language_info": LANGUAGE_INFO}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_as_jupyter_saves_it(path):
    """Byte for byte what nbformat.write (Jupyter's save) makes of it, outputs empty: a save
    without edits leaves the file as committed."""
    raw = path.read_text(encoding="utf-8")
    nb = nbformat.reads(raw, as_version=nbformat.NO_CONVERT)
    assert nbformat.writes(nb) + "\n" == raw
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (path.name, cell.get("id"))
