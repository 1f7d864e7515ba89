"""The papermill runner: parameters, skips collected, failures and timeouts reported, never a hang; where the
executed copies of a renumbered chapter are found."""
import json
import os
from pathlib import Path

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


def test_a_renumbered_chapter_reads_its_copies_recorded_under_its_former_name(tmp_path, monkeypatch):
    """nbval compares a marked cell with the executed copies of its notebook (conftest.py); a chapter renumbered
    since the last recording finds them under its former name (run.RECORDED_AS), its own newest last."""
    new, former = "10_fused_solutions.ipynb", "09_fused_solutions.ipynb"
    monkeypatch.setitem(run.RECORDED_AS, new, (former,))
    for i, (device, name) in enumerate([("gpu-b", new), ("gpu-a", former), ("gpu-b", former)]):
        path = tmp_path / device / "notebooks" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
        os.utime(path, (1000 + i, 1000 + i))
    copies = [p.relative_to(tmp_path).as_posix() for p in run.recorded_copies(new, tmp_path)]
    assert copies == [f"gpu-a/notebooks/{former}", f"gpu-b/notebooks/{former}", f"gpu-b/notebooks/{new}"]
    assert run.recorded_copies("07_broadcasting_pitfall.ipynb", tmp_path) == []


def test_a_chapter_split_off_another_reads_the_copies_of_every_name_its_cells_ran_under(tmp_path):
    """Chapter 13 was part of 10, then chapter 11, then 12, as chapters were inserted before it: its cells' recorded
    outputs are also in the copies named 10_fused_solutions from before the split and in those named
    11_dropins_in_real_code and 12_dropins_in_real_code from before each renumbering, oldest name first and its own
    last, so that the newest wins."""
    new, split = "13_dropins_in_real_code.ipynb", "10_fused_solutions.ipynb"
    eleven, twelve = "11_dropins_in_real_code.ipynb", "12_dropins_in_real_code.ipynb"
    assert run.RECORDED_AS[new] == (split, eleven, twelve)
    for i, (device, name) in enumerate([("gpu-a", new), ("gpu-a", twelve), ("gpu-b", eleven), ("gpu-a", eleven),
                                        ("gpu-b", split), ("gpu-a", split)]):
        path = tmp_path / device / "notebooks" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
        os.utime(path, (1000 + i, 1000 + i))
    copies = [p.relative_to(tmp_path).as_posix() for p in run.recorded_copies(new, tmp_path)]
    assert copies == [f"gpu-b/notebooks/{split}", f"gpu-a/notebooks/{split}", f"gpu-b/notebooks/{eleven}",
                      f"gpu-a/notebooks/{eleven}", f"gpu-a/notebooks/{twelve}", f"gpu-a/notebooks/{new}"]
    ten = [p.relative_to(tmp_path).as_posix() for p in run.recorded_copies(split, tmp_path)]
    assert ten == copies[:2]  # chapter 10 kept its name, and reads no copy of chapter 13
    # the chapters now numbered 11 and 12 have names of their own, and read no copy of the ones before them
    assert run.recorded_copies("11_every_batch_size.ipynb", tmp_path) == []
    assert run.recorded_copies("12_bf16_and_fp16.ipynb", tmp_path) == []
    assert not any({eleven, twelve} & set(formers) for name, formers in run.RECORDED_AS.items() if name != new)


def test_every_renumbering_maps_a_notebook_of_today_to_copies_that_exist():
    """A stale entry fails here: once `make run` has recorded a chapter under its own name on every device and the
    old copies are gone, its entry of run.RECORDED_AS goes too."""
    for name, formers in run.RECORDED_AS.items():
        assert (run.NOTEBOOKS_DIR / name).is_file(), f"RECORDED_AS maps {name}, which is no notebook"
        for former in formers:
            assert list(run.results.RESULTS.glob(f"*/notebooks/{former}")), f"no recorded copy is named {former}"
    assert len(run.recorded_copies("10_fused_solutions.ipynb")) >= 1  # the recorded runs of the fused solutions
    # chapter 13's copies are all under its former names until `make run` records it as 13: 11's or 12's
    assert len(run.recorded_copies("13_dropins_in_real_code.ipynb")) >= 2


def test_an_executed_copy_names_no_folder_of_the_machine_that_ran_it(tmp_path):
    """The results root, the repository, the build folder, the environment and the home folder leave the copy;
    a folder that merely starts with one of their names stays."""
    results_root = tmp_path / "res"
    home = str(Path.home())
    nb = {"cells": [{"cell_type": "code", "source": [f'RESULTS_DIR = "{results_root}"\n'], "outputs": [
        {"name": "stdout", "output_type": "stream", "text": [
            f"recorded {results_root}/nvidia-h200/solutions.json\n",
            f"kernel {run.build.build_root_dir().resolve()}/vector_add-0123/vector_add.so\n",
            f"warning in {run.REPO}/utils/bench.py\n", f"{home}x/other and {home}/notes\n"]}]}],
          "metadata": {"papermill": {"input_path": str(run.NOTEBOOKS_DIR / "00_setup.ipynb"),
                                     "parameters": {"RESULTS_DIR": str(results_root)}}}}
    out = tmp_path / "00_setup.ipynb"
    out.write_text(json.dumps(nb, indent=1))
    run.scrub(out, results_root)
    text = out.read_text()
    assert str(results_root) not in text and str(run.REPO) not in text
    scrubbed = json.loads(text)
    assert scrubbed["cells"][0]["source"] == ['RESULTS_DIR = "results"\n']
    assert scrubbed["cells"][0]["outputs"][0]["text"] == [
        "recorded results/nvidia-h200/solutions.json\n", "kernel <build>/vector_add-0123/vector_add.so\n",
        "warning in utils/bench.py\n", f"{home}x/other and ~/notes\n"]
    assert scrubbed["metadata"]["papermill"]["input_path"] == "notebooks/00_setup.ipynb"


def test_a_whole_run_on_a_gpu_measures_the_scoreboard_first_and_nothing_else_does():
    assert run.wants_scoreboard("gpu", None, None) and run.wants_scoreboard("gpu", [], None)
    assert not run.wants_scoreboard("gpu", ["10"], None)
    assert run.wants_scoreboard("gpu", ["10"], True) and not run.wants_scoreboard("gpu", None, False)
    for mode in ("compile-only", "reference-only"):
        assert not run.wants_scoreboard(mode, None, None) and not run.wants_scoreboard(mode, None, True)


def test_steps_named_one_by_one_run_in_their_order_and_only_on_a_gpu():
    assert run.chosen_steps("gpu", None, None, None) == ["scoreboard", "profile"]
    assert run.chosen_steps("gpu", ["10"], None, None) == []
    assert run.chosen_steps("gpu", ["10"], None, ["profile"]) == ["profile"]
    assert run.chosen_steps("gpu", None, True, ["profile", "scoreboard"]) == ["scoreboard", "profile"]
    assert run.chosen_steps("gpu", None, None, []) == []
    assert run.chosen_steps("compile-only", None, None, ["scoreboard"]) == []


def test_steps_alone_run_no_notebook(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run.env, "device_slug", lambda: "gpu-a")
    monkeypatch.setattr(run.env, "mode", lambda: "gpu")
    ran = []
    monkeypatch.setattr(run, "run_scoreboard", lambda root, reps, timeout: ran.append("scoreboard") or
                        run.Outcome("scoreboard", "ok", 1.0, root / "scoreboard.json"))
    monkeypatch.setattr(run, "run_profile", lambda root, timeout: ran.append("profile") or
                        run.Outcome("profile", "ok", 1.0, root / "profile.json"))
    monkeypatch.setattr(run, "run_one", lambda *a, **k: ran.append("notebook"))
    assert run.main(["--steps", "scoreboard", "--results-dir", str(tmp_path)]) == 0
    assert ran == ["scoreboard"]
    assert "[scoreboard] ok in 1.0 s" in capsys.readouterr().out


def test_the_scoreboard_step_runs_the_scoreboard_and_reports_its_outcome(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(run, "run_in_group", lambda cmd, timeout: calls.append((cmd, timeout)) or (1, 2.5))
    outcome = run.run_scoreboard(tmp_path, 7, 99.0)
    (cmd, timeout), = calls
    assert cmd[1:] == ["-m", "utils.chapters.scoreboard", "--results-dir", str(tmp_path), "--reps", "7"]
    assert timeout == 99.0 and outcome.status == "failed" and outcome.output.name == "scoreboard.json"
    monkeypatch.setattr(run, "run_in_group", lambda cmd, timeout: (None, 99.0))
    assert run.run_scoreboard(tmp_path, None, 99.0).status == "timeout"
    assert "executed notebooks" not in run.summary([outcome], "gpu")
