#!/usr/bin/env bash
# The chapters' new code on a GPU, without recording into results/: the GPU tests named on the command
# line, then the chapters named in $NOTEBOOKS executed by utils.run into a copy of results/ (so they read
# the recorded ceilings and write their sweeps there), everything under $OUT:
#   NOTEBOOKS="02 03" bash experiments/reader_works/verify_on_gpu.sh tests/test_launch.py ...
# $OUT/run.tgz holds the executed chapters and the records they wrote; $OUT/*.log what ran.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD"
export WORKBOOK_GIT_COMMIT="${WORKBOOK_GIT_COMMIT:-unknown}"
if ! python3 -c "import nbformat, papermill, nbval, tabulate" 2>/dev/null; then
  python3 -m pip install --quiet --no-index --find-links .whl nbformat nbclient papermill ipykernel nbval tabulate \
    2>&1 | grep -v "^WARNING" | tail -3
fi
python3 -m ipykernel install --sys-prefix --name python3 --env PYTHONPATH "$PWD" >/dev/null 2>&1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
status=0
if [ $# -gt 0 ]; then
  python3 -m pytest "$@" -m "${PYTEST_MARK:-gpu}" -q -p no:cacheprovider 2>&1 | tee "$OUT/pytest_gpu.log" | tail -15 || status=1
fi
if [ -n "${NOTEBOOKS:-}" ]; then
  scratch=$(mktemp -d); cp -r results "$scratch/results"
  python3 -m utils.run --no-scoreboard --notebooks $NOTEBOOKS --results-dir "$scratch/results" 2>&1 \
    | grep -v "^W11\|Warning" | tee "$OUT/run.log" | tail -25 || status=1
  (cd "$scratch/results" && find . -newer "$OUT/device.txt" -type f | tar czf "$OUT/run.tgz" -T -)
fi
exit $status
