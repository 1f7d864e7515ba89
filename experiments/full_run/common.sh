# What both full-run scripts (on_one_gpu.sh, on_four_gpus.sh) start with: sourced, not run.
# The checkout as the working directory, the commit under test, the results and logs folders under build/
# (kept between calls of a warm machine), the notebook packages from .whl, and the helpers both use.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD"
: "${WORKBOOK_GIT_COMMIT:?set WORKBOOK_GIT_COMMIT to the commit under test}"
export WORKBOOK_GIT_COMMIT
c=$WORKBOOK_GIT_COMMIT
[[ $c =~ ^[0-9a-f]{40}$ ]] && c=${c:0:7}  # the records carry git's short sha (results.short_commit), as do the logs' names
R=$PWD/build/fullrun/results
L=$PWD/build/fullrun/logs
if ! python3 -c "import nbformat, papermill, nbval, tabulate" 2>/dev/null; then
  python3 -m pip install --quiet --no-index --find-links .whl nbformat nbclient papermill ipykernel nbval tabulate \
    2>&1 | grep -v "^WARNING" | tail -3
fi
python3 -m ipykernel install --sys-prefix --name python3 --env PYTHONPATH "$PWD" >/dev/null 2>&1

# a chapter or step recorded into the run's results folder
run() { python3 -m utils.run --results-dir "$R" "$@" 2>&1 | grep -v "^W11\|Warning: "; }

# The GPU tests in three parts, by what they took at e883c5f on four H100s (results/nvidia-h100-80gb-hbm3/logs/
# final_run/README.md): the files of part $1 (0..2).
#   0: test_bad_inputs.py, the bad-input matrix: 1,492 tests in 67 s;
#   1: every other file but test_solutions.py: about 450 s;
#   2: test_solutions.py alone: its harness on five seeds (24 tests) took about 300 s, and its inductor compiles
#      more; counted as 64 tests of 2,374, it made the part it was in outrun its ten minutes.
gpu_tests() {
  python3 -m pytest tests -m gpu --collect-only -q -p no:cacheprovider 2>/dev/null | grep "::" | cut -d: -f1 | sort -u \
    | case "$1" in
        0) grep -x "tests/test_bad_inputs.py" ;;
        1) grep -vx "tests/test_bad_inputs.py\|tests/test_solutions.py" ;;
        2) grep -x "tests/test_solutions.py" ;;
      esac
}

# Part $1 (1..3) of the GPU tests, logged as pytest_gpu_<commit>_part<k>of3.log.
gpu_test_part() {
  local log="$L/pytest_gpu_${c}_part$1of3.log" files
  files=$(gpu_tests $(( $1 - 1 )) | tr '\n' ' ')
  echo "files: $files" > "$log"
  python3 -m pytest $files -m gpu -q -p no:cacheprovider --durations=25 >> "$log" 2>&1
}
