#!/usr/bin/env bash
# The drop-ins as models in bf16 and fp16 on a GPU: their GPU tests, the tail backward's (float32 and 16-bit),
# and the float32 drop-ins' (the launchers changed under them), compute-sanitizer's four tools over
# sanitize_dropins16.py, then dropins16_probe.py at KernelBench's size; with STAGES=neighbours,
# experiments/full_run/eager_neighbours.py, and with STAGES=mixed, mixed16_probe.py; with STAGES=rows, rows16_probe.py; with STAGES=host, host16_probe.py. STAGES picks (default:
# build tests fp32tests sanitize probe); TESTS_K: the tests stage's -k expression; PROBES: the probe's argument lists,
# ;-separated, PROBE_S each one's time limit; SANITIZERS the tools (default all four). Logs under $OUT.
set -u
STAGES=" ${STAGES:-build tests fp32tests sanitize probe} "
want() { [[ "$STAGES" == *" $1 "* ]]; }
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
python3 -c "import pytest" 2>/dev/null || python3 -m pip install -q --no-index --find-links .whl pytest 2>&1 | tail -1
if want build; then
  python3 -c "from utils import build; build.load_kernels(['fused_gemm_groupnorm', 'gemm_10_3xtf32', 'groupnorm',
    'min_bias_broadcast', 'tail_backward', 'gemm_11_wgmma_bf16'])" > "$OUT/build.log" 2>&1
  echo "build rc=$?"
fi
if want tests; then
  WORKBOOK_PREBUILD=0 timeout "${TESTS_S:-300}" python3 -m pytest tests/test_solutions_16bit.py tests/test_fused_models.py \
    tests/test_dtype_hint.py tests/test_tail_backward.py -m gpu -q -p no:cacheprovider ${TESTS_K:+-k "$TESTS_K"} \
    > "$OUT/pytest_16bit.log" 2>&1
  echo "pytest 16-bit rc=$?"; grep -E "passed|failed" "$OUT/pytest_16bit.log" | tail -3
fi
if want fp32tests; then
  WORKBOOK_PREBUILD=0 timeout 120 python3 -m pytest tests/test_bad_inputs.py -m gpu -q -p no:cacheprovider \
    -k "fused_gemm_groupnorm or linear_ or solution" > "$OUT/pytest_bad_inputs.log" 2>&1
  echo "pytest bad inputs rc=$?"; grep -E "passed|failed" "$OUT/pytest_bad_inputs.log" | tail -3
  WORKBOOK_PREBUILD=0 timeout "${DROPINS_S:-240}" python3 -m pytest tests/test_solutions.py -m gpu -q -p no:cacheprovider \
    > "$OUT/pytest_dropins.log" 2>&1
  echo "pytest drop-ins rc=$?"; grep -E "passed|failed" "$OUT/pytest_dropins.log" | tail -3
fi
if want sanitize; then
  for tool in ${SANITIZERS:-memcheck racecheck initcheck synccheck}; do
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "${SANITIZE_S:-150}" compute-sanitizer --tool $tool --error-exitcode 3 \
      python3 experiments/bf16/sanitize_dropins16.py ${SANITIZE_ARGS:-} > "$OUT/sanitize_$tool.log" 2>&1
    echo "$tool rc=$? $(grep -c ": ok" "$OUT/sanitize_$tool.log") ok; $(tail -1 "$OUT/sanitize_$tool.log")"
  done
fi
if want neighbours; then  # issue "full run"'s headline: eager beside chapter 09's 3xTF32 kernels, clocks sampled
  timeout "${NEIGHBOURS_S:-200}" python3 experiments/full_run/eager_neighbours.py --out "$OUT/eager_neighbours" \
    > "$OUT/eager_neighbours.log" 2>&1
  echo "eager neighbours rc=$?"; grep -v "^W11" "$OUT/eager_neighbours.log" | tail -12
fi
if want mixed; then  # the mixed-input GEMM (mixed16.cu) against conversion-then-GEMM (README, its prediction)
  timeout "${MIXED_S:-240}" python3 experiments/bf16/mixed16_probe.py --out "$OUT/mixed" --commit "${COMMIT:-unknown}" \
    > "$OUT/mixed16_probe.log" 2>&1
  echo "mixed probe rc=$?"; grep -E "^(check|time)" "$OUT/mixed16_probe.log" | tail -30
fi
if want rows; then  # the 16-bit drop-ins against the rows of x (rows16_probe.py), ROWS_ARGS its arguments
  timeout "${ROWS_S:-400}" python3 experiments/bf16/rows16_probe.py --out "$OUT/rows" --commit "${COMMIT:-unknown}" \
    ${ROWS_ARGS:-} > "$OUT/rows16_probe.log" 2>&1
  echo "rows probe rc=$?"; grep -E "^(ceil|check|time)" "$OUT/rows16_probe.log" | tail -120
fi
if want host; then  # the host's time of a call under autocast, layer by layer (host16_probe.py), at each of HOST_ROWS
  for m in ${HOST_ROWS:-1 16 128 256}; do
    timeout 120 python3 experiments/bf16/host16_probe.py --out "$OUT/host" --commit "${COMMIT:-unknown}" --rows $m \
      > "$OUT/host16_probe_M$m.log" 2>&1
    echo "host probe M=$m rc=$?"; grep -E "^host" "$OUT/host16_probe_M$m.log"
  done
fi
if want probe; then
  # PROBES: one probe run per ;-separated argument list, each in a process of its own with its own JSON (so that a
  # later one cut short by a time limit leaves the earlier ones whole). Each autocast dtype gets its own process:
  # torch.compile served a graph compiled under bf16 autocast to fp16 autocast in one process (README).
  IFS=';' read -ra runs <<< "${PROBES:---dtypes bfloat16 --modes autocast;--dtypes float16 --modes autocast;--dtypes bfloat16 float16 --modes model}"
  for i in "${!runs[@]}"; do
    timeout "${PROBE_S:-300}" python3 experiments/bf16/dropins16_probe.py --out "$OUT/probe$i" \
      --commit "${COMMIT:-unknown}" ${runs[$i]} > "$OUT/dropins16_probe$i.log" 2>&1
    echo "probe $i (${runs[$i]}) rc=$?"; grep -E "^(check|time)" "$OUT/dropins16_probe$i.log" | tail -80
  done
fi
