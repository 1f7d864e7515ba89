"""results/ holds recorded GPU runs and nothing else, and the test session never writes into it:
writes aimed at results/ go to $WORKBOOK_RECORD_DIR (results.write_root), and conftest.py fails
the session if a file under results/ was added, removed or modified."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from utils import REPO, env, results, run
from utils.chapters import session as chapter

# What results/ may hold: records, plots, logs, executed notebooks, and the notes that describe them.
DATA_SUFFIXES = {".json", ".jsonl", ".csv", ".png", ".log", ".txt", ".ipynb", ".md"}
H100 = {"name": "NVIDIA H100 80GB HBM3", "slug": "nvidia-h100-80gb-hbm3", "cc": "9.0", "sm_count": 132,
        "memory_gb": 79.1, "l2_mb": 50.0}
CEILINGS = [{"copy_GBps": 3012.4, "fp32_tflops": 51.23, "tf32_tflops": 402.0}]


@pytest.fixture
def record_dir(tmp_path, monkeypatch):
    """A record folder of this test's own, in place of the session's."""
    folder = tmp_path / "records"
    monkeypatch.setenv(results.RECORD_DIR_ENV, str(folder))
    return folder


@pytest.fixture
def on_h100(monkeypatch):
    monkeypatch.setattr(results, "metadata", lambda: {"device": dict(H100), "torch": "2.11.0+cu128", "cuda": "12.8",
                                                      "git_commit": "abc1234", "date": "2025-06-01T12:00:00+00:00"})
    monkeypatch.setattr(env, "device_slug", lambda name=None: H100["slug"])


def test_results_holds_data_only():
    """The scripts that wrote a log live in experiments/, with the commit they ran at."""
    code = [p.relative_to(REPO).as_posix() for p in sorted(results.RESULTS.rglob("*"))
            if p.is_file() and p.suffix not in DATA_SUFFIXES]
    assert not code, f"results/ holds data only; move these to experiments/: {code}"


# Folders of the machine that ran something: a recorded file names the repository's folders relative to it,
# `<venv>`, `<site-packages>` or `$OUT` (utils.run.scrub; the logs' READMEs say which). The toolkit's own
# /usr/local/cuda-* stays: it is where every CUDA install puts it.
MACHINE_FOLDERS = re.compile(r"(?<![\w.<$])/(?:tmp|root|home|opt|work|mnt|scratch|private|Users)/")


def test_results_name_no_folder_of_the_machine_that_ran_them():
    leaks = {}
    for p in sorted(results.RESULTS.rglob("*")):
        if p.is_file() and p.suffix in DATA_SUFFIXES - {".png"}:
            found = sorted({m.group(0) for m in MACHINE_FOLDERS.finditer(p.read_text(errors="replace"))})
            if found:
                leaks[p.relative_to(REPO).as_posix()] = found
    assert not leaks, f"machine folders in results/: {leaks}"


def test_the_session_records_into_a_temporary_folder():
    folder = Path(os.environ[results.RECORD_DIR_ENV]).resolve()
    assert folder.is_dir() and not folder.is_relative_to(results.RESULTS.resolve()), folder
    assert results.write_root() == results.write_root(results.RESULTS) == Path(os.environ[results.RECORD_DIR_ENV])


def test_write_root_redirects_results_and_nothing_else(record_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO / "notebooks")  # where the notebooks run, RESULTS_DIR = "../results"
    assert results.write_root("../results") == record_dir
    assert results.root_dir("../results") == Path("../results")  # the records are still read from results/
    assert results.write_root(tmp_path / "mine") == tmp_path / "mine"  # a folder of the caller's own
    monkeypatch.delenv(results.RECORD_DIR_ENV)
    assert results.write_root("../results") == Path("../results")  # `make run`: into results/


def test_a_record_aimed_at_results_lands_in_the_record_folder(record_dir, on_h100):
    before = results.snapshot(results.RESULTS)
    path = results.record("ceilings", CEILINGS, results_dir=results.RESULTS, notes="test")
    assert path == record_dir / H100["slug"] / "ceilings.json"
    assert results.read(path)["entries"] == CEILINGS
    assert results.changes(before, results.snapshot(results.RESULTS)) == []


def test_plots_and_executed_notebooks_follow_the_records(record_dir, on_h100):
    session = chapter.Session("gpu", "cuda", "full", 1, results.RESULTS)
    assert session.plot_path("solutions") == record_dir / H100["slug"] / "solutions.png"
    assert run.output_dir("gpu", results.RESULTS) == record_dir / H100["slug"] / "notebooks"


def test_snapshot_sees_every_kind_of_change(tmp_path):
    (tmp_path / "logs").mkdir()
    for name in ("same.json", "edited.json", "gone.png", "touched.log", "logs/deep.log"):
        (tmp_path / name).write_text(f"{name}\n")
    before = results.snapshot(tmp_path)
    assert results.changes(before, results.snapshot(tmp_path)) == []
    (tmp_path / "edited.json").write_text("EDITED.json\n")  # same size, other bytes
    (tmp_path / "gone.png").unlink()
    (tmp_path / "logs" / "new.log").write_text("new\n")
    stat = (tmp_path / "touched.log").stat()
    os.utime(tmp_path / "touched.log", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # rewritten, same bytes
    assert results.changes(before, results.snapshot(tmp_path)) == [
        "added logs/new.log", "removed gone.png", "modified edited.json", "modified touched.log"]


def _session(folder: Path, test: str) -> subprocess.CompletedProcess:
    """pytest over one test file in `folder`, with the repository's conftest.py guarding folder/results/."""
    shutil.copy(REPO / "conftest.py", folder / "conftest.py")
    (folder / "test_one.py").write_text(test)
    environ = {k: v for k, v in os.environ.items() if k != results.RECORD_DIR_ENV}  # the conftest makes its own
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_one.py"],
                          cwd=folder, env=environ, capture_output=True, text=True, timeout=300)


def test_a_session_that_writes_into_results_fails(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "rec.json").write_text("{}\n")
    reads = _session(tmp_path, "import os\nfrom pathlib import Path\n\n"
                               "def test_reads():\n"
                               "    here = Path(__file__).parent\n"
                               "    assert Path(os.environ['WORKBOOK_RECORD_DIR']).is_dir()\n"
                               "    (here / 'record_dir.txt').write_text(os.environ['WORKBOOK_RECORD_DIR'])\n"
                               "    assert (here / 'results' / 'rec.json').read_text() == '{}\\n'\n")
    assert reads.returncode == 0, reads.stdout + reads.stderr
    assert not Path((tmp_path / "record_dir.txt").read_text()).exists()  # the session's folder is gone with it
    writes = _session(tmp_path, "from pathlib import Path\n\n"
                                "def test_writes():\n"
                                "    (Path(__file__).parent / 'results' / 'rec.json').write_text('[]\\n')\n"
                                "    (Path(__file__).parent / 'results' / 'plot.png').write_bytes(b'')\n")
    assert writes.returncode == 1, writes.stdout + writes.stderr
    assert "1 passed" in writes.stdout  # the test itself passed: the session's end caught the writes
    assert "added plot.png" in writes.stdout and "modified rec.json" in writes.stdout


def test_plot_path_is_under_the_write_root_on_the_gpu_only(monkeypatch, tmp_path):
    monkeypatch.setenv(results.RECORD_DIR_ENV, str(tmp_path))
    assert results.plot_path("ladder", results.RESULTS, on_gpu=False) is None
    assert results.plot_path("ladder", results.RESULTS, on_gpu=True) == tmp_path / env.device_slug() / "ladder.png"
