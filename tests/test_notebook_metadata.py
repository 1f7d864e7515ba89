"""The committed notebooks carry the metadata JupyterLab writes for the workbook's kernel, in the
form Jupyter saves them, so that opening one in `make lab` does not mark it modified.

JupyterLab sets `kernelspec` from the kernel it starts (the `python3` kernelspec that `make setup`
installs with ipykernel) and `language_info` from the kernel's reply; it changes neither when the
value is already the same. ipykernel's reply also carries `language_info.version`, the running
Python's version: that one field is left out here, as it would tie the notebooks to one Python.

nbstripout is the notebooks' git filter (.gitattributes; `make lab` configures it with the flags below): the
committed form is what it makes of a notebook, so a notebook a reader has run shows no change in git.
"""
import subprocess
import sys
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


# the git filter's command as the Makefile configures it: cell ids kept, the kernel's Python version dropped
NBSTRIPOUT = ["-m", "nbstripout", "--keep-id", "--extra-keys", "metadata.language_info.version"]


def test_nbstripout_leaves_the_committed_notebooks_as_they_are(tmp_path):
    pytest.importorskip("nbstripout")
    copies = [tmp_path / p.name for p in NOTEBOOKS]
    for path, copy in zip(NOTEBOOKS, copies):
        copy.write_bytes(path.read_bytes())
    subprocess.run([sys.executable, *NBSTRIPOUT, *map(str, copies)], check=True)  # in place, as `git add` would
    changed = [p.name for p, copy in zip(NOTEBOOKS, copies) if copy.read_bytes() != p.read_bytes()]
    assert not changed, f"not in the form the git filter keeps: {changed}"


def test_nbstripout_strips_what_a_run_adds(tmp_path):
    pytest.importorskip("nbstripout")
    nb = nbformat.read(NOTEBOOKS[0], as_version=nbformat.NO_CONVERT)
    committed = nbformat.writes(nb) + "\n"
    nb.metadata.language_info["version"] = "3.11.7"
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.execution_count, code.outputs = 1, [nbformat.v4.new_output("stream", text="ran\n")]
    (tmp_path / "ran.ipynb").write_text(nbformat.writes(nb) + "\n")
    stripped = subprocess.run([sys.executable, *NBSTRIPOUT, "--textconv", str(tmp_path / "ran.ipynb")],
                              capture_output=True, text=True, check=True).stdout
    assert stripped == committed
