"""utils/chapters/training.py: notebook 13's training step measured outside the notebook, its problems spread
over several cards and recorded as one; on the CPU, the merge (the measurement itself runs on a GPU:
tests/test_chapter.py's measure_training tests)."""
import json

import pytest

from utils import env, results
from utils.chapters import training


def _share(path, device, *pids):
    rows = [{"problem": pid, "tf32": tf32, "contender": "ours", "protocol": "steady"} for pid in pids
            for tf32 in (False, True)]
    path.write_text(json.dumps({"device": device, "problems": " ".join(map(str, pids)), "rows": rows}))
    return str(path)


def test_shares_of_every_problem_merge_into_one_record_and_a_missing_one_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(env, "mode", lambda: "gpu")
    monkeypatch.setattr(env, "device_slug", lambda name=None: "gpu-a")
    recorded = []
    monkeypatch.setattr(results, "record", lambda kind, rows, **kw: recorded.append((kind, rows, kw)) or kind)
    a, b = _share(tmp_path / "a.json", "gpu-a", 37, 62), _share(tmp_path / "b.json", "gpu-a", 94, 75)
    with pytest.raises(SystemExit, match=r"problem\(s\) \[75, 94\]"):
        training.main(["--merge", a])
    assert recorded == []
    assert training.main(["--merge", a, b]) == 0
    (kind, rows, kw), = recorded
    assert kind == "training" and {r["problem"] for r in rows} == {94, 75, 37, 62} and len(rows) == 8
    assert "a.json: 4 rows, problems 37 62" in kw["notes"]
    with pytest.raises(ValueError, match="not gpu-a"):  # two kinds of card never meet in one record
        training.main(["--merge", a, _share(tmp_path / "c.json", "gpu-b", 94, 75)])


def test_without_a_gpu_it_measures_and_records_nothing(monkeypatch, capsys):
    monkeypatch.setattr(env, "mode", lambda: "compile-only")
    monkeypatch.setattr(training, "measure_training", lambda *a, **kw: pytest.fail("measured without a GPU"))
    assert training.main([]) == 0
    assert "no GPU here" in capsys.readouterr().out
