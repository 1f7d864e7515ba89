"""After a run on several GPUs (on_four_gpus.sh): did every chapter read this run's records?

    python experiments/full_run/check_order.py results/<device> <commit>

For each executed chapter and each record it reads, the record carries <commit> and was written before
the cell that reads it started (papermill's start_time): before the chapter's first cell, or, for 13's
final scoreboard of 10's `solutions`, before that cell. Prints one line per pair; exits 1 on any miss.
"""
import json
import sys
from datetime import datetime
from pathlib import Path

# chapter -> the records it reads, as `recorded(...)`, `scoreboard.show` and the harness read them
READS = {
    "00": ["ceilings"], "01": [], "02": ["ceilings", "scoreboard"], "03": ["ceilings", "profile", "scoreboard"],
    "04": ["ceilings", "eager_profile", "scoreboard"], "05": ["ceilings", "scoreboard"],
    "06": ["ceilings", "scoreboard"], "07": ["ceilings", "scoreboard"], "08": ["ceilings"], "09": ["ceilings", "profile", "tensor_cores"],
    "10": ["ceilings", "whole_model_fusion"], "11": ["ceilings"],
    "13": ["ceilings", "scoreboard", "training", "solutions@show_final"],
}
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def start_of(nb: dict, marker: str | None) -> datetime:
    for cell in nb["cells"]:
        pm = cell.get("metadata", {}).get("papermill", {})
        if pm.get("start_time") and (marker is None or marker in "".join(cell["source"])):
            return datetime.fromisoformat(pm["start_time"])
    raise LookupError(f"no executed cell with {marker!r}")


def main(root: Path, commit: str) -> int:
    misses = 0
    for nb_path in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        if not (NOTEBOOKS / nb_path.name).is_file():  # a copy under a chapter's former name (utils/run.py's RECORDED_AS)
            print(f"skip {nb_path.stem}: no chapter has this name now")
            continue
        nb = json.loads(nb_path.read_text())
        for read in READS[nb_path.stem[:2]]:
            kind, _, marker = read.partition("@")
            rec = json.loads((root / f"{kind}.json").read_text())
            cell = start_of(nb, marker or None)
            ok = rec["git_commit"].startswith(commit) and datetime.fromisoformat(rec["date"]) < cell
            misses += not ok
            print(f"{'ok  ' if ok else 'MISS'} {nb_path.stem} reads {kind} ({rec['git_commit']}, {rec['date']})"
                  f" at {cell.isoformat(timespec='seconds')}{' in ' + marker if marker else ''}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2]))
