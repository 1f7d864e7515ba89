#!/usr/bin/env bash
# The small-batch schedule and the narrow tiles on a GPU: their tests, the drop-ins' and ops' GPU tests (not the full-size ones),
# and compute-sanitizer's four tools over experiments/small_batch/sanitize_small.py. Logs under $OUT.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
python3 -c "import pytest, IPython, nbformat" 2>/dev/null || python3 -m pip install -q --no-index --find-links .whl \
  pytest nbformat nbclient papermill ipykernel nbval tabulate 2>&1 | grep -v "^WARNING" | tail -1
# every kernel file (the tests' own prebuild would add the exercises), or only KERNELS (a cold machine builds all
# in about 350 s)
if [ -n "${KERNELS:-}" ]; then
  python3 -c "import sys; from utils import build; build.load_kernels(sys.argv[1:])" $KERNELS > "$OUT/build.log" 2>&1
else
  python3 -m utils.build > "$OUT/build.log" 2>&1
fi; echo "build rc=$?"
# TESTS and MARK choose (by default the files below, without the full-size tests); SANITIZE=0 skips the sanitizers.
WORKBOOK_PREBUILD=0 python3 -m pytest ${TESTS:-tests/test_small_batch.py tests/test_solutions.py tests/test_ops.py \
  tests/test_fused_models.py tests/test_bad_inputs.py} -m "${MARK:-gpu and not large}" -q \
  -p no:cacheprovider --durations=10 > "$OUT/pytest_small_batch.log" 2>&1
echo "pytest rc=$?"; tail -4 "$OUT/pytest_small_batch.log"
for tool in $([ "${SANITIZE:-1}" = 1 ] && echo memcheck racecheck initcheck synccheck); do
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool $tool --error-exitcode 3 \
    python3 experiments/small_batch/sanitize_small.py > "$OUT/sanitize_$tool.log" 2>&1
  echo "$tool rc=$? $(grep -c "ERROR SUMMARY: 0" "$OUT/sanitize_$tool.log") $(tail -1 "$OUT/sanitize_$tool.log")"
done
