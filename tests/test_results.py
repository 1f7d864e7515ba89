"""utils.results: the record schema, record/load, and the generated README table (all on the CPU)."""
import copy
import json
import shutil
import subprocess
import types
from datetime import datetime, timedelta

import pytest

from utils import REPO, results
from utils.report import readme as report, records

H100 = {"name": "NVIDIA H100 80GB HBM3", "slug": "nvidia-h100-80gb-hbm3", "cc": "9.0", "sm_count": 132,
        "memory_gb": 79.1, "l2_mb": 50.0}



def md_rows(text: str) -> list[list[str]]:
    """The cells of every Markdown table row in `text` (DataFrame.to_markdown pads them), stripped."""
    return [[c.strip() for c in line.strip()[1:-1].split("|")] for line in text.splitlines() if line.startswith("|")]


def fake_meta(device=H100, date="2025-06-01T12:00:00+00:00") -> dict:
    return {"device": dict(device), "torch": "2.11.0+cu128", "cuda": "12.8", "git_commit": "abc1234", "date": date}


def make_record(kind: str, entries: list[dict], **meta) -> dict:
    return {"schema": 1, **fake_meta(**meta), "kind": kind, "notes": "", "entries": entries}


def baseline(problem, contender, tf32, ms, pct=50.0) -> dict:
    return {"problem": problem, "contender": contender, "tf32": tf32, "median_ms": ms, "p20_ms": ms, "p80_ms": ms,
            "tflops": 1.0, "floor_ms": ms * pct / 100, "pct_of_floor": pct}


BASELINES = [baseline(94, "eager", False, 10.0), baseline(94, "eager", True, 4.0),
             baseline(94, "torch.compile", False, 8.0), baseline(94, "torch.compile", True, 2.5, pct=90.0),
             baseline(75, "eager", False, 12.0)]
CEILINGS = [{"copy_GBps": 3012.4, "fp32_tflops": 51.23, "tf32_tflops": 402.0}]


def write(root, rec) -> None:
    path = root / rec["device"]["slug"] / f"{rec['kind']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec))


@pytest.fixture
def on_h100(monkeypatch):
    monkeypatch.setattr(results, "metadata", lambda: fake_meta())


# --------------------------------------------------------------------------- record, load, validate

def test_record_load_round_trip(tmp_path, on_h100):
    path = results.record("baselines", BASELINES, notes="test", results_dir=tmp_path)
    assert path == tmp_path / "nvidia-h100-80gb-hbm3" / "baselines.json"
    rec = results.load("baselines", device="nvidia-h100-80gb-hbm3", results_root=tmp_path)
    assert rec["entries"] == BASELINES and rec["notes"] == "test" and rec["schema"] == results.SCHEMA
    assert list(rec) == list(results.TOP_KEYS)
    assert results.latest("baselines", tmp_path) == (rec, path)
    assert results.load("ceilings", device="nvidia-h100-80gb-hbm3", results_root=tmp_path) is None


def test_results_dir_from_the_environment(tmp_path, on_h100, monkeypatch):
    monkeypatch.setenv("WORKBOOK_RESULTS_DIR", str(tmp_path))
    assert results.record("ceilings", CEILINGS).parent.parent == tmp_path


def test_metadata_describes_the_gpu(monkeypatch):
    """Through the real utils.env, with torch made to see a fake H100."""
    import torch

    props = types.SimpleNamespace(name=H100["name"], major=9, minor=0, multi_processor_count=132,
                                  total_memory=85_000_000_000, L2_cache_size=50 * 2**20)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=None: props)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=None: props.name)
    meta = results.metadata()
    assert meta["device"] == {**H100, "memory_gb": 85.0}
    assert meta["torch"] == torch.__version__ and isinstance(meta["cuda"], str)
    assert datetime.fromisoformat(meta["date"]).utcoffset() == timedelta(0)
    results.validate({"schema": 1, **meta, "kind": "x", "notes": "", "entries": [{}]})


def test_refuses_to_record_without_a_gpu(tmp_path, monkeypatch):
    cpu = {"name": "cpu", "slug": "cpu", "cc": None, "sm_count": None, "memory_gb": None, "l2_mb": None}
    monkeypatch.setattr(results, "metadata", lambda: fake_meta(device=cpu))
    with pytest.raises(RuntimeError, match="no GPU here"):
        results.record("baselines", BASELINES, results_dir=tmp_path)
    assert not any(tmp_path.iterdir())


def test_load_without_a_gpu_takes_the_newer_of_two_equal_recordings(tmp_path, monkeypatch):
    from utils import env

    monkeypatch.setattr(env, "device_slug", lambda name=None: "cpu")
    write(tmp_path, make_record("ceilings", CEILINGS, date="2025-06-01T12:00:00+00:00"))
    write(tmp_path, make_record("ceilings", CEILINGS, device=A100, date="2025-07-01T08:00:00+00:00"))
    assert results.load("ceilings", results_root=tmp_path)["device"]["name"] == "NVIDIA A100-SXM4-80GB"
    assert results.load("baselines", results_root=tmp_path) is None
    assert results.latest("baselines", tmp_path) == (None, None)


A100 = {**H100, "name": "NVIDIA A100-SXM4-80GB", "slug": "nvidia-a100-sxm4-80gb", "cc": "8.0"}
H200 = {**H100, "name": "NVIDIA H200", "slug": "nvidia-h200", "memory_gb": 143.8, "l2_mb": 60.0}
PROFILE = [{"problem": 94, "op": "aten::addmm", "cuda_ms": 9.0, "pct": 90.0}]


@pytest.fixture
def two_devices(tmp_path):
    """The H100 recorded every kind; the H200 recorded two of them later (as results/ once held)."""
    write(tmp_path, make_record("ceilings", CEILINGS, date="2025-06-01T12:00:00+00:00"))
    write(tmp_path, make_record("baselines", BASELINES, date="2025-06-01T12:10:00+00:00"))
    write(tmp_path, make_record("eager_profile", PROFILE, date="2025-06-01T12:20:00+00:00"))
    write(tmp_path, make_record("ceilings", CEILINGS, device=H200, date="2025-07-01T08:00:00+00:00"))
    write(tmp_path, make_record("eager_profile", PROFILE, device=H200, date="2025-07-01T08:10:00+00:00"))
    return tmp_path


def no_gpu(monkeypatch):
    from utils import env

    monkeypatch.setattr(env, "device_slug", lambda name=None: "cpu")


def test_without_a_gpu_every_kind_comes_from_one_device(two_devices, monkeypatch):
    """An Amdahl bound from one device's profile and another's timing is no bound at all: without a
    GPU the notebooks read one device for every kind, the one that recorded the most (ties: the newer)."""
    no_gpu(monkeypatch)
    assert results.recorded_devices(two_devices) == ["nvidia-h100-80gb-hbm3", "nvidia-h200"]
    assert results.reading_device(two_devices) == "nvidia-h100-80gb-hbm3"
    for kind in ("ceilings", "baselines", "eager_profile"):  # the H200's newer ceilings and profile included
        assert results.load(kind, results_root=two_devices)["device"]["slug"] == "nvidia-h100-80gb-hbm3", kind
        assert results.recorded(kind, two_devices)["device"]["slug"] == "nvidia-h100-80gb-hbm3", kind
        rec, path = results.latest(kind, two_devices)
        assert path == two_devices / "nvidia-h100-80gb-hbm3" / f"{kind}.json" and rec == results.read(path)
    write(two_devices, make_record("baselines", BASELINES, device=H200, date="2025-07-01T08:20:00+00:00"))
    assert results.reading_device(two_devices) == "nvidia-h200"  # as many kinds, and newer: all from the H200
    assert {results.load(k, results_root=two_devices)["device"]["slug"] for k in ("ceilings", "baselines",
                                                                                 "eager_profile")} == {"nvidia-h200"}


def test_the_reading_device_can_be_named(two_devices, monkeypatch):
    no_gpu(monkeypatch)
    monkeypatch.setenv(results.DEVICE_ENV, "nvidia-h200")
    assert results.reading_device(two_devices) == "nvidia-h200"
    assert results.load("ceilings", results_root=two_devices)["device"]["slug"] == "nvidia-h200"
    assert results.load("baselines", results_root=two_devices) is None  # missing there: never another device's


def test_on_a_gpu_only_its_own_records_are_read(two_devices, monkeypatch):
    from utils import env

    monkeypatch.setattr(env, "device_slug", lambda name=None: "nvidia-h200")
    monkeypatch.setenv(results.DEVICE_ENV, "nvidia-h100-80gb-hbm3")  # a GPU run reads its own, whatever is asked
    assert results.reading_device(two_devices) == "nvidia-h200"
    assert results.load("eager_profile", results_root=two_devices)["device"]["slug"] == "nvidia-h200"
    assert results.load("baselines", results_root=two_devices) is None  # the H100's is not this GPU's
    assert results.latest("baselines", two_devices) == (None, None)
    monkeypatch.setattr(env, "device_slug", lambda name=None: "nvidia-b200")
    assert results.load("ceilings", results_root=two_devices) is None  # a GPU with no records yet has none
    # a GPU machine run as if it had none (WORKBOOK_MODE=compile-only): the no-GPU rule
    monkeypatch.delenv(results.DEVICE_ENV)
    assert results.recorded("baselines", two_devices, on_gpu=False)["device"]["slug"] == "nvidia-h100-80gb-hbm3"


def test_nothing_recorded_reads_nothing(tmp_path, monkeypatch):
    no_gpu(monkeypatch)
    assert results.reading_device(tmp_path) is None
    assert results.load("ceilings", results_root=tmp_path) is None
    assert results.latest("ceilings", tmp_path) == (None, None)


def _broken(change):
    rec = copy.deepcopy(make_record("baselines", BASELINES))
    change(rec)
    return rec


@pytest.mark.parametrize("change, message", [
    (lambda r: r.pop("git_commit"), "missing \\['git_commit'\\]"),
    (lambda r: r.update(extra=1), "unexpected \\['extra'\\]"),
    (lambda r: r.update(schema=3), "schema is 3, this code reads \\[1, 2\\]"),
    (lambda r: r.update(kind="Bad Kind"), "not a \\[a-z0-9_\\]\\+ name"),
    (lambda r: r.update(date="yesterday"), "not ISO-8601"),
    (lambda r: r.update(date="2025-06-01T12:00:00"), "UTC offset"),
    (lambda r: r["device"].pop("l2_mb"), "device must have exactly the keys"),
    (lambda r: r["device"].update(cc=None), "not a GPU"),
    (lambda r: r.update(entries=[]), "non-empty list"),
    (lambda r: r["entries"][1].pop("tf32"), "entry 1 lacks \\['tf32'\\]"),
    (lambda r: r.update(torch=2.11), "torch must be a string"),
])
def test_validate_rejects_a_broken_record(change, message):
    results.validate(make_record("baselines", BASELINES))
    with pytest.raises(ValueError, match=message):
        results.validate(_broken(change))


def test_validate_ceilings_has_one_entry_and_unknown_kinds_pass():
    with pytest.raises(ValueError, match="exactly one entry"):
        results.validate(make_record("ceilings", CEILINGS * 2))
    results.validate(make_record("some_future_kind", [{"anything": 1}]))


def test_committed_results_follow_the_schema():
    # records are results/<device>/<kind>.json; JSON under a device's logs/ is the raw output of
    # the script that wrote it (an exploration run), named in the log's folder, not a record
    for path in sorted((REPO / "results").glob("*/*.json")):
        rec = results.read(path)  # raises on a broken record
        assert path.parent.name == rec["device"]["slug"], path
        assert path.stem == rec["kind"], path


def test_git_commit_from_the_environment(tmp_path, monkeypatch):
    # a GPU runner's copy of the tree has no .git: the runner names the commit
    monkeypatch.setenv("WORKBOOK_GIT_COMMIT", "1234abc")
    assert results.git_commit(tmp_path) == "1234abc"


def test_git_commit(tmp_path, monkeypatch):
    monkeypatch.delenv("WORKBOOK_GIT_COMMIT", raising=False)
    assert results.git_commit(tmp_path) == "unknown"  # not a checkout
    if shutil.which("git") is None:
        return
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    assert results.git_commit(tmp_path) == "unknown"  # no commit yet
    for path in ("kernels/k.cu", "utils/a.py", "README.md"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x = 1\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "a"], check=True)
    sha = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert results.git_commit(tmp_path) == sha
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x.json").write_text("{}")
    assert results.git_commit(tmp_path) == sha  # a new recording does not make the code dirty
    (tmp_path / "README.md").write_text("prose\n")
    assert results.git_commit(tmp_path) == sha  # nor does prose: it measures nothing


@pytest.mark.parametrize("change", ["kernels/k.cu", "kernels/common/new.cuh", "utils/a.py", "notebooks/00_x.ipynb",
                                    "solutions/p.py"])
def test_git_commit_is_dirty_when_the_code_differs(tmp_path, monkeypatch, change):
    """A changed kernel, or a new one git does not track yet, marks the record: the kernels are what it measured."""
    monkeypatch.delenv("WORKBOOK_GIT_COMMIT", raising=False)
    if shutil.which("git") is None:
        pytest.skip("no git here")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.cu").write_text("// a kernel\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "a"], check=True)
    sha = results.git_commit(tmp_path)
    assert not sha.endswith("-dirty")
    (tmp_path / change).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / change).write_text("// changed\n")
    assert results.git_commit(tmp_path) == sha + "-dirty"


def test_commit_cli_prints_what_a_record_carries(monkeypatch, capsys):
    """A GPU runner's copy has no .git: the checkout tells it the commit, dirty mark included."""
    monkeypatch.setenv("WORKBOOK_GIT_COMMIT", "1234abc-dirty")
    assert results.main(["--commit"]) == 0
    assert capsys.readouterr().out == "1234abc-dirty\n"


# --------------------------------------------------------------------------- README table

@pytest.fixture
def recorded(tmp_path):
    root = tmp_path / "results"
    write(root, make_record("ceilings", CEILINGS))
    write(root, make_record("baselines", BASELINES, date="2025-06-02T09:00:00+00:00"))
    write(root, make_record("eager_profile", [{"problem": 94, "op": "aten::addmm", "cuda_ms": 9.0, "pct": 90.0}]))
    write(root, make_record("mystery", [{"x": 1}]))
    return root


def test_render_readme_table(recorded):
    md = report.render_readme_table(recorded)
    for golden in [
        "do not edit by hand",
        "### NVIDIA H100 80GB HBM3",
        "compute capability 9.0, 132 SMs, 79 GB, L2 50 MB",
        "**Ceilings**, recorded on NVIDIA H100 80GB HBM3, torch 2.11.0+cu128 (CUDA 12.8), 2025-06-01, commit `abc1234`",
        "**Baselines**, recorded on NVIDIA H100 80GB HBM3, torch 2.11.0+cu128 (CUDA 12.8), 2025-06-02",
        "**94_Gemm_BiasAdd_Hardtanh_Mish_GroupNorm**",
        "**75_Gemm_GroupNorm_Min_BiasAdd**",
        "Also recorded (not shown here): `eager_profile`, `mystery`.",
    ]:
        assert golden in md, golden
    rows = md_rows(md)
    assert ["3012 GB/s", "51.2 TFLOP/s", "402.0 TFLOP/s"] in rows
    head = rows.index(["contender", "TF32", "median ms", "speedup vs eager", "% of floor"])
    assert rows[head + 2:head + 6] == [["eager", "off", "10.000", "1.00x", "50 %"], ["eager", "on", "4.000", "2.50x", "50 %"],
                                       ["torch.compile", "off", "8.000", "1.25x", "50 %"],
                                       ["torch.compile", "on", "2.500", "4.00x", "90 %"]]
    frame = records.baselines_frame(results.read(recorded / H100["slug"] / "baselines.json"))
    assert frame.loc[(94, "torch.compile", "on"), "speedup vs eager"] == pytest.approx(4.0)
    assert frame.loc[(94, "eager", "off")].tolist() == pytest.approx([10.0, 1.0, 50.0])
    assert records.ceilings_frame(make_record("ceilings", CEILINGS)).iloc[0].tolist() == [3012.4, 51.23, 402.0]
    assert md.index("**Ceilings**") < md.index("**Baselines**")
    assert md == report.render_readme_table(recorded)  # deterministic


def test_render_readme_table_without_recordings(tmp_path):
    assert "No GPU run recorded yet" in report.render_readme_table(tmp_path)


def test_update_and_check_readme_detect_drift(tmp_path, recorded, capsys):
    readme, front = tmp_path / "results-README.md", tmp_path / "README.md"
    readme.write_text(f"# Title\n\nbefore\n{report.BEGIN}\nstale\n{report.END}\nafter\n")
    front.write_text(f"# Front\n{report.TIMES[0]}\n{report.TIMES[1]}\n{report.HEADLINE[0]}\n{report.HEADLINE[1]}\n")
    args = ["--readme", str(readme), "--front-readme", str(front), "--results-dir", str(recorded)]
    assert report.main(["--check-readme", *args]) == 1
    assert "out of date" in capsys.readouterr().err
    assert "stale" in readme.read_text()  # checking never writes
    assert report.main(["--update-readme", *args]) == 0
    text = readme.read_text()
    assert text.startswith("# Title\n\nbefore\n") and text.endswith(f"{report.END}\nafter\n")
    assert ["eager", "off", "10.000", "1.00x", "50 %"] in md_rows(text)
    assert "No whole-model run recorded yet" in front.read_text()
    assert report.main(["--check-readme", *args]) == 0
    write(recorded, make_record("ceilings", [{**CEILINGS[0], "copy_GBps": 2900.0}], date="2025-08-01T00:00:00+00:00"))
    assert report.update_readme(readme, check=True, results_root=recorded) is False


def test_update_readme_needs_the_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    with pytest.raises(ValueError, match="results:begin"):
        report.update_readme(readme, results_root=tmp_path)
    with pytest.raises(ValueError, match="times:begin"):
        report.update_front(readme, results_root=tmp_path)


def test_repo_readmes_are_current():
    """results/README.md's tables and README.md's times and headline are generated: never edit them by hand."""
    assert report.main(["--check-readme"]) == 0, "run `python -m utils.report --update-readme`"


def _fusion_row(problem, tier, contender, ms) -> dict:
    return {"problem": problem, "tier": tier, "contender": contender, "median_ms": ms, "p20_ms": ms, "p80_ms": ms,
            "max_abs_vs_eager": 0.0}


def test_readme_front_is_generated_from_the_record_and_the_logs(tmp_path):
    root = tmp_path / "results"
    rows = []
    for pid, eager, compiled, fused, fused_tf32 in ((94, 3.0, 2.5, 1.5, 0.5), (75, 4.0, 2.0, 1.0, 0.4)):
        rows += [_fusion_row(pid, "strict", "eager", eager), _fusion_row(pid, "strict", "torch.compile", compiled),
                 _fusion_row(pid, "strict", "fused", fused), _fusion_row(pid, "tf32", "fused", fused_tf32)]
    rec = make_record("whole_model_fusion", rows)
    write(root, rec)
    logs = root / rec["device"]["slug"] / "logs" / "final_run"
    logs.mkdir(parents=True)
    (logs / "make_run_a.log").write_text("[scoreboard] ok in 200.0 s\n[1/2] 00_setup: ok in 40.0 s\n"
                                         "[2/2] 01_models: ok in 60.0 s\n")
    copies = root / rec["device"]["slug"] / "notebooks"  # each chapter's time: papermill's, in its executed copy
    copies.mkdir()
    for name, seconds in (("00_setup", 40.0), ("01_models", 60.0)):
        (copies / f"{name}.ipynb").write_text(json.dumps({"cells": [], "metadata": {"papermill": {"duration": seconds}}}))
    (logs / "pytest_gpu_a.log").write_text("...\n12 passed, 3 skipped, 9 deselected in 300.50s (0:05:00)\n")
    headline = report.render_headline(root)
    # strict: eager / fused = 2.00x and 4.00x; eager / compile = 1.20x and 2.00x; tf32: 6.00x and 10.00x
    assert "runs 2.00x to 4.00x faster than eager PyTorch" in headline
    assert "`torch.compile` gives 1.20x to 2.00x" in headline and "with TF32 allowed, 6.00x to 10.00x" in headline
    assert f"](results/{rec['device']['slug']}/whole_model_scoreboard.png)" in headline
    times = report.render_times(root)
    assert "| 5 min one after the other: 2 chapters in 100 s, the scoreboard 200 s |" in times
    assert "its GPU tests (`pytest -m gpu`, 12 passed) 5 min" in times
    assert "not measured yet" in times  # the CPU's `make run`
    # notebook 13's training step measured before it, in shares on two cards: counted from the shares' logs,
    # and said to be missing where a training record has no logged time
    (root / rec["device"]["slug"] / "training.json").write_text("{}")
    assert "not counted: notebook 13's training step" in report.render_times(root)
    (logs / "training_37_a.log").write_text("[training] problems 37 62 ok in 50.0 s\n")
    (logs / "training_94_a.log").write_text("noise\n[training] problems 94 75 ok in 70.0 s\n")
    times = report.render_times(root)
    assert "| 7 min one after the other: 2 chapters in 100 s, the scoreboard 200 s, the training step 120 s |" in times


# The numbers of results/README.md's prose, outside the generated span, none of them a measurement of a
# committed record: what each one is. A number added to that prose fails the test below until it is either
# generated (utils/report/) or named here with where it comes from.
RESULTS_PROSE_NUMBERS = {
    "7": "rung 7 (a name)",
    "03": "notebook 03 (a name)",
    "04": "notebook 04 (a name)",
    "1%": "how far notebooks 03 and 04's GEMMs moved when the L2 flush changed: two recordings in git history, "
          "not a committed record (ladder.json at 9b9ed58 against e877ea9: at most 0.9%)",
}


def test_every_number_in_the_results_readme_is_generated():
    """results/README.md against the records, regenerated in memory: the generated span holds every number,
    and matches the records line for line; the prose around it holds only the numbers named in
    RESULTS_PROSE_NUMBERS."""
    import difflib
    import re

    text = report.RESULTS_README.read_text()
    assert text.count(report.BEGIN) == 1 and text.count(report.END) == 1, "no generated span in results/README.md"
    head, rest = text.split(report.BEGIN)
    span, tail = rest.split(report.END)
    expected = f"\n{report.render_readme_table()}\n"
    diff = list(difflib.unified_diff(span.splitlines(), expected.splitlines(), "results/README.md",
                                     "results/*/*.json", lineterm="", n=0))
    assert span == expected, "results/README.md disagrees with the records (`python -m utils.report " \
                             "--update-readme`):\n" + "\n".join(diff[:40])
    prose = re.findall(r"(?<![\w.])\d+(?:\.\d+)?%?", head + tail)
    assert prose, "no number found in the prose: the pattern no longer reads it"
    assert set(prose) <= set(RESULTS_PROSE_NUMBERS), (
        f"numbers in results/README.md's prose, outside the generated span: "
        f"{sorted(set(prose) - set(RESULTS_PROSE_NUMBERS))}; "
        "generate them from a record (utils/report/) or say in RESULTS_PROSE_NUMBERS what they are")


def test_ladder_renders_pct_of_cublas():
    rec = {"entries": [{"contender": "gemm_01_naive", "median_ms": 10.0, "tflops": 1.0, "shape": [1024, 8192, 8192]},
                       {"contender": "cuBLAS", "median_ms": 2.5, "tflops": 4.0, "shape": [1024, 8192, 8192]}]}
    frame = records.ladder_frame(rec)
    assert frame["% of cuBLAS"].tolist() == pytest.approx([25.0, 100.0])
    assert frame.loc["gemm_01_naive", "median ms"] == 10.0 and frame.loc["cuBLAS", "TFLOP/s"] == 4.0
    text = records.render_ladder(rec)
    assert "M x N x K = 1024 x 8192 x 8192" in text
    assert md_rows(text)[2:] == [["gemm_01_naive", "10.000", "1.00", "25.0 %"], ["cuBLAS", "2.500", "4.00", "100.0 %"]]


def bias_entry(contender, gemm, biases, passes, ms, spread=0.0) -> dict:
    return {"contender": contender, "gemm": gemm, "biases": biases, "separate_passes": passes, "median_ms": ms,
            "p20_ms": ms - spread / 2, "p80_ms": ms + spread / 2, "shape": [1024, 8192, 8192]}


BIAS_FUSION = [bias_entry("gemm (rung 7, no bias)", "rung 7", 0, 0, 3.0, spread=0.006),
               bias_entry("linear_bias (epilogue)", "rung 7", 1, 0, 3.003),
               bias_entry("gemm, then + bias", "rung 7", 1, 1, 3.021),
               bias_entry("cuBLAS F.linear(x, w)", "cuBLAS", 0, 0, 2.5),
               bias_entry("cuBLAS F.linear(x, w, bias)", "cuBLAS", 1, 0, 2.505),
               bias_entry("one (M, N) copy", "none", 0, 0, 0.02),
               bias_entry("gemm (rung 7, no bias), timed again last", "rung 7", 0, 0, 3.0015)]


def test_bias_fusion_is_validated_and_rendered_against_its_own_gemm(tmp_path, on_h100):
    path = results.record("bias_fusion", BIAS_FUSION, notes="notebooks/04", results_dir=tmp_path)
    assert results.read(path)["entries"] == BIAS_FUSION
    with pytest.raises(ValueError, match=r"entry 0 lacks \['separate_passes'\]"):
        results.validate(make_record("bias_fusion", [{k: v for k, v in BIAS_FUSION[0].items() if k != "separate_passes"}]))
    frame = records.bias_fusion_frame(make_record("bias_fusion", BIAS_FUSION))
    assert frame.loc["gemm (rung 7, no bias)", "spread %"] == pytest.approx(0.2)  # the control: its spread, no extra
    assert frame.loc["gemm (rung 7, no bias)", "extra us"] != frame.loc["gemm (rung 7, no bias)", "extra us"]  # NaN
    assert frame.loc["linear_bias (epilogue)", ["extra us", "extra %"]].tolist() == pytest.approx([3.0, 0.1])
    assert frame.loc["gemm, then + bias", ["extra us", "extra %"]].tolist() == pytest.approx([21.0, 0.7])
    # cuBLAS's bias against cuBLAS without one, not against rung 7
    assert frame.loc["cuBLAS F.linear(x, w, bias)", ["extra us", "extra %"]].tolist() == pytest.approx([5.0, 0.2])
    assert frame.loc["gemm (rung 7, no bias), timed again last", "extra us"] == pytest.approx(1.5)
    text = records.render_bias_fusion(make_record("bias_fusion", BIAS_FUSION))
    assert "M x N x K = 1024 x 8192 x 8192, fp32, TF32 off, one run." in text
    rows = md_rows(text)
    for golden in [["gemm (rung 7, no bias)", "rung 7", "0", "0", "3.000", "(spread 0.20 %)"],
                   ["linear_bias (epilogue)", "rung 7", "1", "0", "3.003", "+3.0 us (+0.10 %)"],
                   ["one (M, N) copy", "none", "0", "0", "0.020", "(a separate pass's floor)"]]:
        assert golden in rows, golden
    root = tmp_path / "readme"
    write(root, make_record("bias_fusion", BIAS_FUSION))
    assert "**Bias fusion (notebook 04)**, recorded on NVIDIA H100 80GB HBM3" in report.render_readme_table(root)


def mb_entry(problem, contender, role, ms, nbytes, copy_GBps, replaces=None) -> dict:
    GBps = nbytes / (ms * 1e-3) / 1e9
    entry = {"problem": problem, "contender": contender, "role": role, "median_ms": ms, "p20_ms": ms, "p80_ms": ms,
             "bytes": nbytes, "GBps": GBps, "pct_of_copy": 100 * GBps / copy_GBps, "shape": [1024, 8192]}
    return entry | ({"replaces": replaces} if replaces else {})


MEMORY_BOUND = [mb_entry(94, "copy (1024 x 8192)", "copy", 0.025, 67_108_864, 67_108_864 / 0.025e-3 / 1e9),
                mb_entry(94, "eager chain", "eager", 0.250, 67_108_864, 2684.35),
                mb_entry(94, "F.group_norm", "torch", 0.200, 67_108_864, 2684.35),
                mb_entry(94, "fused kernel", "ours", 0.0305, 67_108_864, 2684.35,
                         replaces=["eager chain", "F.group_norm", "not in this run"])]


@pytest.mark.parametrize("kind", ["fused_activations", "groupnorm_fusion", "broadcast_min"])
def test_memory_bound_kinds_are_validated_and_rendered(tmp_path, on_h100, kind):
    path = results.record(kind, MEMORY_BOUND, notes="notebooks/05-07", results_dir=tmp_path)
    assert results.read(path)["entries"] == MEMORY_BOUND
    with pytest.raises(ValueError, match=r"entry 0 lacks \['pct_of_copy'\]"):
        results.validate(make_record(kind, [{k: v for k, v in MEMORY_BOUND[0].items() if k != "pct_of_copy"}]))
    frame = records.memory_bound_frame(make_record(kind, MEMORY_BOUND))
    assert frame.loc[(94, "copy (1024 x 8192)"), ["median us", "% of copy"]].tolist() == pytest.approx([25.0, 100.0])
    assert frame.loc[(94, "eager chain"), "GB/s"] == pytest.approx(268.4, abs=0.1)
    # speedups against the rows it names, read from the same run; a name not in the run is left out
    assert frame.loc[(94, "fused kernel"), "faster than"] == pytest.approx({"eager chain": 0.25 / 0.0305,
                                                                            "F.group_norm": 0.2 / 0.0305})
    text = report.RENDERERS[kind](make_record(kind, MEMORY_BOUND))
    assert "**Problem 94**, shape 1024 x 8192" in text
    assert ["fused kernel", "ours", "30.5", "2200", "82 %", "8.20x eager chain; 6.56x F.group_norm"] in md_rows(text)
    assert ["copy (1024 x 8192)", "copy", "25.0", "2684", "100 %", "–"] in md_rows(text)
    root = tmp_path / "readme"
    write(root, make_record(kind, MEMORY_BOUND))
    assert f"**{results.KINDS[kind].title}**, recorded on NVIDIA H100 80GB HBM3" in report.render_readme_table(root)


def test_a_full_sha_from_the_runner_is_shortened(monkeypatch):
    monkeypatch.setenv("WORKBOOK_GIT_COMMIT", "1d6d181670f1a5b38c7b302757b385c394c13375")
    assert results.git_commit() == "1d6d181"
    monkeypatch.setenv("WORKBOOK_GIT_COMMIT", "1d6d181-dirty")
    assert results.git_commit() == "1d6d181-dirty"
    assert results.short_commit("unknown") == "unknown"


def step_entry(problem, contender, tf32, ms, **more) -> dict:
    return {"problem": problem, "contender": contender, "tf32": tf32, "protocol": "steady", "median_ms": ms,
            "p20_ms": ms, "p80_ms": ms, **more}


TRAINING = [step_entry(94, c, tf32, ms) for tf32, times in
            ((False, {"eager": 8.6, "torch.compile": 8.2, "torch.compile max-autotune-no-cudagraphs": 8.4, "ours": 3.7}),
             (True, {"eager": 2.0, "torch.compile": 1.6, "torch.compile max-autotune-no-cudagraphs": 1.5, "ours": 1.25}))
            for c, ms in times.items()]
AUTOCAST = [step_entry(62, c, False, ms, autocast="bf16")
            for c, ms in {"eager": 1.0, "torch.compile": 0.5, "torch.compile max-autotune-no-cudagraphs": 0.55,
                          "ours": 0.8}.items()]


@pytest.mark.parametrize("kind, entries, goldens", [
    ("training", TRAINING, {(94, "off", "ours"): [3.7, 8.6 / 3.7, 8.2 / 3.7],  # over eager and compile, TF32 off
                            (94, "on", "ours"): [1.25, 2.0 / 1.25, 1.5 / 1.25],  # the faster mode there: max-autotune
                            (94, "on", "eager"): [2.0, 1.0, 0.75]}),
    ("autocast", AUTOCAST, {(62, "ours"): [0.8, 1.25, 0.5 / 0.8]}),
])
def test_training_and_autocast_are_validated_and_rendered(tmp_path, on_h100, kind, entries, goldens):
    path = results.record(kind, entries, notes="notebooks/10", results_dir=tmp_path)
    assert results.read(path)["entries"] == entries
    with pytest.raises(ValueError, match=r"entry 0 lacks \['protocol'\]"):
        results.validate(make_record(kind, [{k: v for k, v in entries[0].items() if k != "protocol"}]))
    frame = records.FRAMES[kind](make_record(kind, entries))
    for key, values in goldens.items():
        assert frame.loc[key].tolist() == pytest.approx(values), key
    text = report.RENDERERS[kind](make_record(kind, entries))
    key, values = next(iter(goldens.items()))
    assert [*map(str, key), f"{values[0]:.3f}", *(f"{v:.2f}x" for v in values[1:])] in md_rows(text)
    assert (kind == "training") == ("TF32" in md_rows(text)[0]) and ("(bf16)" in text) == (kind == "autocast")
    root = tmp_path / "readme"
    write(root, make_record(kind, entries))
    assert f"**{results.KINDS[kind].title}**, recorded on NVIDIA H100 80GB HBM3" in report.render_readme_table(root)
