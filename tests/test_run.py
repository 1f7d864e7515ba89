"""The papermill runner: parameters, skips collected, failures and timeouts reported, never a hang."""
import nbformat
import pytest

from utils import run


def write_notebook(path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell("DEVICE = 'auto'\nREPS = 1")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params] + [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, path)
    return path


def test_skips_and_parameters_reach_the_summary(tmp_path):
    nb = write_notebook(tmp_path / "00_demo.ipynb",
                        "from utils.run import skip\nassert REPS == 7, REPS\nskip('timing the kernel', 'no GPU')")
    outcome = run.run_one(nb, tmp_path / "out.ipynb", {"DEVICE": "cpu", "REPS": 7}, timeout=300)
    assert outcome.status == "ok", outcome.error
    assert outcome.skipped == ["timing the kernel (no GPU)"]
    text = run.summary([outcome], "compile-only")
    assert "timing the kernel (no GPU)" in text and "ok" in text


def test_a_failing_cell_is_reported_with_its_error(tmp_path):
    nb = write_notebook(tmp_path / "01_fail.ipynb", "raise ValueError('broken on purpose')")
    outcome = run.run_one(nb, tmp_path / "out.ipynb", {}, timeout=300)
    assert outcome.status == "failed"
    assert "ValueError: broken on purpose" in outcome.error


def test_per_notebook_timeout_kills_it(tmp_path):
    nb = write_notebook(tmp_path / "02_hang.ipynb", "import time\ntime.sleep(600)")
    outcome = run.run_one(nb, tmp_path / "out.ipynb", {}, timeout=20)
    assert outcome.status == "timeout"
    assert outcome.seconds < 60


def test_selection_by_number_and_unknown_names():
    names = [nb.stem for nb in run.find_notebooks(["00"])]
    assert names and all(n.startswith("00_") for n in names)
    with pytest.raises(SystemExit, match="no notebook"):
        run.find_notebooks(["99"])


def test_default_parameters_by_mode(tmp_path):
    assert run.default_parameters("gpu", None, tmp_path)["SCALE"] == "full"
    cpu = run.default_parameters("compile-only", None, tmp_path)
    assert cpu["SCALE"] == "small" and cpu["DEVICE"] == "cpu" and cpu["RESULTS_DIR"] == str(tmp_path)
