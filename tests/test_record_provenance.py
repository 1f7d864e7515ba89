"""Which kernels a record ran: every record (schema 2) carries the hash of kernels/**/*.cu and *.cuh as they
were when it was measured (utils.results.kernel_sources), so a record whose kernels have changed since is
named, with the files that changed. All on the CPU."""
import functools
import json
import re

import pytest

from utils import REPO, build, results, sass_identical
from utils.report import readme

H100 = {"name": "NVIDIA H100 80GB HBM3", "slug": "nvidia-h100-80gb-hbm3", "cc": "9.0", "sm_count": 132,
        "memory_gb": 79.1, "l2_mb": 50.0}
CEILINGS = [{"copy_GBps": 3012.4, "fp32_tflops": 51.23, "tf32_tflops": 402.0}]


# --------------------------------------------------------------------------- the committed records

# Kernel files whose code changed since a device's full run without changing one instruction of the kernels
# that run measured: every __global__ function of every kernel file the change reaches (the file itself, or
# every file including the header) compiles to the same SASS now as at the run's commit
# (experiments/reader_works/sass_identity.py over every kernel file, its log named here). The changes added
# launchable copies beside the kernels (`// @launch`), moved a kernel's body into a force-inlined device
# function it calls, or lightened the launchers' host headers (common/check.cuh). An entry goes once the
# device's records are measured again (a test below says so). A device may have several logs, one per change.
SASS_IDENTICAL = sass_identical.SASS_IDENTICAL


@functools.cache
def _builders(path: str) -> list[str]:
    """The kernel files (relative to kernels/, as sass_identity.py names them) a change of `path` reaches:
    the file itself, or every kernel file that includes the header."""
    if path.endswith(".cu"):
        return [path.removeprefix("kernels/")]
    header = (REPO / path).resolve()
    return [cu.relative_to(build.KERNELS_DIR).as_posix() for cu in sorted(build.KERNELS_DIR.rglob("*.cu"))
            if header in {h.resolve() for h in build.included_headers(cu, build.KERNELS_DIR)}]


def _exercise_target(path: str) -> str | None:
    """The sanitize target of an exercise's kernel file (kernels/exercises/x.cu: exercises.x), else None."""
    if not path.startswith("kernels/exercises/"):
        return None
    return "exercises." + path.rsplit("/", 1)[1].rsplit(".", 1)[0]


@functools.cache
def _drifting() -> tuple[str, ...]:
    """The records (device/kind.json) whose kernel sources differ from the tree's: those an allowance is for."""
    return tuple(results.provenance(results.RESULTS)[0])


def _never_ran(device: str, cu: str) -> bool:
    """An exercise no drifting record of the device ran (only make sanitize runs them): rewriting it changes
    none of their figures. (A record made at the tree's kernels may have run it: it needs no allowance.) Or a
    kernel file added after every drifting record of the device ran: none of them holds it among the sources
    it hashed, so nothing they measured built it."""
    held = [json.loads((results.RESULTS / name).read_text()).get("kernels", {}).get("files", {})
            for name in _drifting() if name.startswith(device + "/")]
    if held and all(f"kernels/{cu}" not in files for files in held):
        return True
    target = _exercise_target(f"kernels/{cu}")
    return target is not None and not any(target in (results.RESULTS / name).read_text() for name in _drifting()
                                          if name.startswith(device + "/"))


def _sass_identical_files(device: str) -> set[str]:
    """The files SASS_IDENTICAL lets drift on `device`, each checked against its log: every function the log
    compared in every kernel file the change reaches is identical (or new), none differs or is gone."""
    allowed = set()
    for log_name, files in SASS_IDENTICAL.get(device, []):
        log = (results.RESULTS / device / log_name).read_text().splitlines()
        for path in files:
            for cu in _builders(path):
                if _never_ran(device, cu):
                    continue
                verdicts = [line.split()[1] for line in log if line.startswith(f"{cu}: ")]
                assert verdicts and set(verdicts) <= {"identical", "new"}, (log_name, path, cu, verdicts)
        allowed |= set(files)
    return allowed


def test_the_builders_of_a_header_are_every_file_that_includes_it():
    builders = _builders("kernels/common/check.cuh")
    assert {"gemm_01_naive.cu", "fused_gemm_groupnorm.cu", "probes/read_probe.cu", "exercises/scale_add.cu"} <= set(builders)
    assert _builders("kernels/gemm_10_3xtf32.cu") == ["gemm_10_3xtf32.cu"]


def _unmeasured(rec_name: str, line: str) -> bool:
    """An exercise file's change, for a record that never ran that exercise (only make sanitize runs them)."""
    target = _exercise_target(line.split(" ", 1)[1])
    return target is not None and target not in (results.RESULTS / rec_name).read_text()


def test_no_record_of_a_full_run_ran_other_kernels_than_the_tree_holds():
    """Fails for a record of a device where `make run` measured every chapter (its folder holds a scoreboard)
    whose kernel hash no longer matches kernels/: its numbers measured other code, unless the only changes are
    files SASS_IDENTICAL shows compile to the same kernels, or exercises the record never ran. Re-record it on
    a GPU (the chapter's notebook, or the command in its notes)."""
    stale, _ = results.provenance(results.RESULTS)
    full = results.full_run_devices()
    assert full, "no device has a full recorded run (results/<device>/scoreboard.json)"
    mine = {}
    same_on = {device: _sass_identical_files(device) for device in full}  # each log read and checked once
    for name, drift in stale.items():
        device = name.split("/")[0]
        if device in full:
            same = same_on[device]
            left = [line for line in drift if line.split(" ", 1)[1] not in same and not _unmeasured(name, line)]
            if left:
                mine[name] = left
    assert not mine, "records whose kernel sources changed since they were recorded:\n" + "\n".join(
        f"  {name}: {', '.join(drift)}" for name, drift in mine.items())


def test_every_sass_identical_entry_still_names_a_change():
    """Once a device is measured again its records name no drift, and its SASS_IDENTICAL entry must go."""
    stale, _ = results.provenance(results.RESULTS)
    for device, entries in SASS_IDENTICAL.items():
        files = {path for _, paths in entries for path in paths}
        drifting = {line.split(" ", 1)[1] for name, drift in stale.items() if name.startswith(device + "/")
                    for line in drift}
        assert set(files) <= drifting, f"{device}: no record drifts in {sorted(set(files) - drifting)}; remove them"


def test_stale_records_of_other_devices_are_flagged_in_the_readme_and_named_here():
    """A device with no full run keeps what one chapter's run recorded; where those kernels have changed
    since, the README says so beside the record, and this test names each (an expected failure) until it is
    recorded again."""
    stale, _ = results.provenance(results.RESULTS)
    full = results.full_run_devices()
    others = {name: drift for name, drift in stale.items() if name.split("/")[0] not in full}
    table = readme.render_readme_table(results.RESULTS)
    for name in others:
        rec = results.read(results.RESULTS / name)
        device = f"### {rec['device']['name']}\n"
        section = table[table.index(device) + len(device):].split("\n### ")[0]
        if rec["kind"] in readme.RENDERERS:
            head = f"**{results.KINDS[rec['kind']].title}**, recorded on "
            (line,) = [l for l in section.splitlines() if l.startswith(head)]
            assert "**Measured kernels that have changed since**" in line, name
        else:
            assert f"`{rec['kind']}` (**of kernels that have changed since**)" in section, name
    if others:
        pytest.xfail("records of kernels that have changed since, re-record them on their GPU: " + "; ".join(
            f"{name} ({', '.join(drift)})" for name, drift in others.items()))


def test_committed_records_say_which_kernels_they_ran():
    """Records made before the hash existed (schema 1) cannot be checked: listed here, as an expected
    failure, until each is recorded again. A record that carries the hash is checked above."""
    _, unknown = results.provenance(results.RESULTS)
    if unknown:
        pytest.xfail(f"unknown provenance: {len(unknown)} records predate the kernel-source hash "
                     f"(schema 1), re-record them on a GPU: {', '.join(unknown)}")


# --------------------------------------------------------------------------- the hash, on a tree of our own

@pytest.fixture
def tree(tmp_path):
    """A repository with three kernel sources (one in a subfolder) and a file the hash leaves out."""
    (tmp_path / "kernels" / "common").mkdir(parents=True)
    (tmp_path / "kernels" / "a.cu").write_text("__global__ void a() {}\n")
    (tmp_path / "kernels" / "b.cu").write_text("__global__ void b() {}\n")
    (tmp_path / "kernels" / "common" / "c.cuh").write_text("#pragma once\n")
    (tmp_path / "kernels" / "README.md").write_text("the map\n")
    return tmp_path


def test_kernel_sources_hash_every_cu_and_cuh_file_in_path_order(tree):
    sources = results.kernel_sources(tree)
    assert list(sources["files"]) == ["kernels/a.cu", "kernels/b.cu", "kernels/common/c.cuh"]
    assert sources == results.kernel_sources(tree)  # stable
    (tree / "kernels" / "README.md").write_text("another map\n")
    assert results.kernel_sources(tree) == sources  # not a kernel source
    assert results.kernel_sources(REPO)["files"].keys() >= {"kernels/groupnorm.cu", "kernels/common/reduce.cuh"}


def test_kernel_drift_names_each_changed_file(tree):
    rec = {"kernels": results.kernel_sources(tree)}
    assert results.kernel_drift(rec, tree) == []
    (tree / "kernels" / "common" / "c.cuh").write_text("#pragma once\n// changed\n")
    (tree / "kernels" / "b.cu").unlink()
    (tree / "kernels" / "d.cu").write_text("__global__ void d() {}\n")
    # (no git here to show the record's version of c.cuh: even a comment counts; an added file never does)
    assert results.kernel_drift(rec, tree) == ["removed kernels/b.cu", "modified kernels/common/c.cuh"]
    assert results.kernel_drift({"schema": 1}, tree) is None  # does not say


@pytest.fixture
def on_h100(monkeypatch):
    monkeypatch.setattr(results, "metadata", lambda: {"device": dict(H100), "torch": "2.11.0+cu128", "cuda": "12.8",
                                                      "git_commit": "abc1234", "date": "2025-06-01T12:00:00+00:00"})


def test_record_writes_the_kernel_sources_it_ran(tmp_path, on_h100):
    path = results.record("ceilings", CEILINGS, results_dir=tmp_path)
    rec = json.loads(path.read_text())
    assert rec["schema"] == results.SCHEMA == 2
    assert rec["kernels"] == results.kernel_sources()
    assert results.kernel_drift(rec) == []


def test_provenance_names_stale_and_unknown_records(tmp_path, tree, on_h100):
    """A stale record fails the check of the committed ones; one without the hash is listed apart."""
    root = tmp_path / "results"
    fresh = results.record("ceilings", CEILINGS, results_dir=root)
    rec = json.loads(fresh.read_text())
    rec["kernels"] = results.kernel_sources(tree)  # as if recorded on `tree`
    fresh.write_text(json.dumps(rec))
    old = root / H100["slug"] / "baselines.json"
    committed = json.loads((REPO / "results" / H100["slug"] / "baselines.json").read_text())
    committed.pop("kernels", None)  # a record of schema 1, from before records carried the hash
    old.write_text(json.dumps({**committed, "schema": 1}))
    assert results.provenance(root, tree) == ({}, [f"{H100['slug']}/baselines.json"])
    (tree / "kernels" / "a.cu").write_text("__global__ void a() { /* faster */ }\n")
    assert results.provenance(root, tree) == ({f"{H100['slug']}/ceilings.json": ["modified kernels/a.cu"]},
                                              [f"{H100['slug']}/baselines.json"])


def test_validate_knows_both_schemas(tmp_path, tree, on_h100):
    rec = json.loads(results.record("ceilings", CEILINGS, results_dir=tmp_path).read_text())
    results.validate(rec)
    old = {k: v for k, v in rec.items() if k != "kernels"}
    results.validate({**old, "schema": 1})  # the committed records' schema
    with pytest.raises(ValueError, match="missing \\['kernels'\\]"):
        results.validate(old)
    with pytest.raises(ValueError, match="unexpected \\['kernels'\\]"):
        results.validate({**rec, "schema": 1})
    with pytest.raises(ValueError, match="not the hash of kernels.files"):
        results.validate({**rec, "kernels": {**rec["kernels"], "files": {"kernels/a.cu": "0" * 64}}})
    with pytest.raises(ValueError, match="this code reads \\[1, 2\\]"):
        results.validate({**rec, "schema": 3})


def test_stale_on_the_command_line(tmp_path, monkeypatch, capsys, tree, on_h100):
    root = tmp_path / "results"
    path = results.record("ceilings", CEILINGS, results_dir=root)
    rec = json.loads(path.read_text())
    rec["kernels"] = results.kernel_sources(tree)
    path.write_text(json.dumps(rec))
    monkeypatch.setenv("WORKBOOK_RESULTS_DIR", str(root))
    monkeypatch.setattr(results, "REPO", tree)
    assert results.main(["--stale"]) == 0
    assert "no record is stale" in capsys.readouterr().out
    (tree / "kernels" / "b.cu").write_text("__global__ void b() { }\n")
    assert results.main(["--stale"]) == 1
    assert f"stale: {H100['slug']}/ceilings.json: modified kernels/b.cu" in capsys.readouterr().out


def test_the_readme_flags_a_record_whose_kernels_changed(tmp_path):
    """The drift note names the changed file; a record of today's kernels gets none."""
    now = results.kernel_sources()
    old = {"sha256": "0" * 64, "files": {**now["files"], "kernels/groupnorm.cu": "0" * 64}}
    assert readme._drift_note({"kernels": now}) == ""
    note = readme._drift_note({"kernels": old})
    assert "**Measured kernels that have changed since** (modified kernels/groupnorm.cu)" in note


def test_the_readme_names_a_change_that_compiles_to_the_same_sass(monkeypatch):
    """A source change SASS_IDENTICAL covers on the record's device is named with its log, not as a re-record."""
    now = results.kernel_sources()
    old = {"sha256": "0" * 64, "files": {**now["files"], "kernels/groupnorm.cu": "0" * 64,
                                        "kernels/common/hopper.cuh": "0" * 64}}
    monkeypatch.setitem(sass_identical.SASS_IDENTICAL, "gpu-x", [("logs/x/sass_identity.log", ["kernels/common/hopper.cuh"])])
    note = readme._drift_note({"kernels": old, "device": {"slug": "gpu-x"}})
    assert "**Measured kernels that have changed since** (modified kernels/groupnorm.cu)" in note
    assert "compile to the same SASS (modified kernels/common/hopper.cuh: `gpu-x/logs/x/sass_identity.log`)" in note
    alike = readme._drift_note({"kernels": {**old, "files": {**now["files"], "kernels/common/hopper.cuh": "0" * 64}},
                                "device": {"slug": "gpu-x"}})
    assert "re-record" not in alike and "same SASS" in alike


def test_full_run_devices_are_the_folders_with_a_scoreboard(tmp_path):
    (tmp_path / "gpu-a").mkdir()
    (tmp_path / "gpu-b").mkdir()
    (tmp_path / "gpu-a" / "scoreboard.json").write_text("{}")
    (tmp_path / "gpu-b" / "ladder.json").write_text("{}")
    assert results.full_run_devices(tmp_path) == ["gpu-a"]


# --------------------------------------------------------------------------- the recorded run

RUN_LOGS = "logs/final_run"


@pytest.mark.parametrize("device", results.full_run_devices())
def test_a_full_run_is_one_commit_and_its_log_readme_says_which(device):
    """Every record `make run` writes on a device with a full run (all but ladder_tuning, which `utils.ladder
    --tune` writes, and sanitize) carries one commit: the one its logs' README names, whose run logs executed
    every chapter in notebooks/ and the scoreboard, and whose GPU tests and sanitizer figures are those of the
    logs beside it."""
    root = results.RESULTS / device
    readme_text = " ".join((root / RUN_LOGS / "README.md").read_text().split())
    kinds = [p for p in sorted(root.glob("*.json")) if p.stem not in ("ladder_tuning", "sanitize")]
    commits = {p.stem: results.short_commit(results.read(p)["git_commit"]) for p in kinds}
    assert len(set(commits.values())) == 1, commits
    (commit,) = set(commits.values())
    assert f"**Every chapter at {commit}**" in readme_text
    # the run's logs: one per machine or GPU that ran chapters (make_run_*, run_*), one or more of the GPU tests
    run_logs = sorted(p for p in (root / RUN_LOGS).glob(f"*run_*_{commit}.log") if p.name.startswith(("make_run_", "run_")))
    assert run_logs, f"no run log of {commit} in {RUN_LOGS}"
    logs = ""
    for path in run_logs:
        assert f"`{path.name}`" in readme_text, path.name
        logs += path.read_text()
    for nb in sorted((root / "notebooks").glob("*.ipynb")):  # every executed copy is one of this run's, ok
        if re.search(rf"\] {re.escape(nb.stem)}: ok in ", logs):
            continue
        # a chapter whose runner log did not come back: the README says so, and the copy shows every cell
        # executed to its end without an exception
        assert f"`{nb.name}`" in readme_text and executed_whole(nb), f"{nb.name}: not executed ok by this run's logs"
    assert "[scoreboard] ok in " in logs
    assert "[profile] ok in " in logs or not (root / "profile.json").exists()  # a run from before the profile has none
    counts = {"passed": 0, "skipped": 0}
    test_logs = sorted((root / RUN_LOGS).glob(f"pytest_gpu_{commit}*.log"))
    assert test_logs, f"no pytest_gpu_{commit}*.log"
    for path in test_logs:
        text = path.read_text()
        tail = text.strip().splitlines()[-1]
        found = dict((k, int(n)) for n, k in re.findall(r"(\d+) (passed|skipped|failed|errors?)", tail))
        if not found:  # stopped by the machine's time limit before pytest's summary: the README gives what ran
            assert not re.search(r"[FE]", re.sub(r"\[ *\d+%\]", "", text)), f"{path.name}: a test failed"
            ran = text.count(".") + text.count("s")
            assert f"`{path.name}`: stopped after {ran} tests, none failed" in readme_text, path.name
            continue
        assert found.get("passed") and not set(found) - {"passed", "skipped"}, f"{path.name}: {tail}"
        counts = {k: counts[k] + found.get(k, 0) for k in counts}
    assert f"{counts['passed']} passed, {counts['skipped']} skipped, none failed" in readme_text
    san = results.read(root / "sanitize.json")["entries"]
    mine = [e for e in san if results.short_commit(e["commit"]) == commit]
    assert mine and all(e["verdict"] == "clean" and e["errors"] == 0 for e in mine)
    assert f"{len(mine)} of {len(mine)} (tool, target) pairs clean, 0 errors" in readme_text


def executed_whole(path) -> bool:
    """Whether papermill ran every code cell of an executed copy to its end, none with an exception."""
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    return bool(code) and nb["metadata"]["papermill"].get("exception") in (None, False) and all(
        c["metadata"].get("papermill", {}).get("status") == "completed" and not c["metadata"]["papermill"].get("exception")
        and not any(o.get("output_type") == "error" for o in c.get("outputs", [])) for c in code)


# --------------------------------------------------------------------------- what counts as a change of the code

@pytest.fixture
def git_tree(tree):
    """`tree` as a git checkout with one commit, and a record of its kernels at that commit."""
    import subprocess

    def git(*args):
        return subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "kernels")
    rec = {"kernels": results.kernel_sources(tree), "git_commit": git("rev-parse", "--short", "HEAD").strip()}
    return tree, rec


def test_comments_and_layout_are_not_a_change_of_the_code(git_tree):
    tree, rec = git_tree
    (tree / "kernels" / "a.cu").write_text("// @launch\n__global__   void a()\n{ }  // a comment\n")
    (tree / "kernels" / "common" / "c.cuh").write_text("#pragma once\n/* a\n   block comment */\n")
    assert results.kernel_drift(rec, tree) == []


def test_a_change_of_the_code_is_drift_and_an_added_file_is_not(git_tree):
    tree, rec = git_tree
    (tree / "kernels" / "exercises").mkdir()
    (tree / "kernels" / "exercises" / "new.cu").write_text("__global__ void n() {}\n")
    assert results.kernel_drift(rec, tree) == []  # nothing the record ran can have included it
    (tree / "kernels" / "a.cu").write_text("__global__ void a() { int x = 1; }\n")
    (tree / "kernels" / "b.cu").unlink()
    assert results.kernel_drift(rec, tree) == ["removed kernels/b.cu", "modified kernels/a.cu"]


def test_comment_only_changes_count_where_git_cannot_show_what_the_record_ran(git_tree):
    tree, rec = git_tree
    (tree / "kernels" / "a.cu").write_text("// only a comment more\n__global__ void a() {}\n")
    assert results.kernel_drift({**rec, "git_commit": rec["git_commit"] + "-dirty"}, tree) == ["modified kernels/a.cu"]
    assert results.kernel_drift({**rec, "git_commit": "0000000"}, tree) == ["modified kernels/a.cu"]
    edited = {**rec["kernels"], "files": {**rec["kernels"]["files"], "kernels/a.cu": "0" * 64}}
    assert results.kernel_drift({**rec, "kernels": edited}, tree) == ["modified kernels/a.cu"]


def test_code_of_drops_comments_but_keeps_strings():
    assert results.code_of('int a; // c\n/* x\n y */ int b = "//not";  ') == 'int a;int b="//not";'
