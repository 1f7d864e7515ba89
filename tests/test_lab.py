"""`make lab`: the interpreter PY names, the whole checkout served (results/ included) and opened at
notebooks/, --allow-root only as root; the README says so and documents WORKBOOK_MODE."""
import os
import shutil
import subprocess

import pytest

from utils import REPO


def _lab_commands(*args: str) -> str:
    return subprocess.run(["make", "-n", "-s", "lab", *args], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_lab_runs_jupyter_through_PY():
    out = _lab_commands("PY=python3")
    assert "python3 -m jupyter lab" in out
    assert "venv" not in out  # no venv set up, no .venv/bin/jupyter
    # the checkout's root (make's CURDIR, the folder PYTHONPATH starts with), not notebooks/
    root = out.split('PYTHONPATH="', 1)[1].split("$", 1)[0]
    assert os.path.samefile(root, REPO)
    assert f'--ServerApp.root_dir="{root}"' in out and "--LabApp.default_url=/lab/tree/notebooks" in out
    assert ("--allow-root" in out) == (os.geteuid() == 0)


def test_readme_describes_make_lab_and_workbook_mode():
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "`make lab` (JupyterLab, run as `$(PY) -m jupyter lab`" in readme
    assert "`--allow-root`" in readme and "`results/<device>/` are in the same file browser" in readme
    assert "`WORKBOOK_MODE`" in readme
    assert "state_dict, strict=True" not in readme
