#!/usr/bin/env bash
# Rung 11 on a GPU: its GPU tests, the ladder against cuBLAS's bf16 GEMM at the rung target's two shapes (not
# recorded), compute-sanitizer's four tools over sanitize_rung11.py; the bf16 and fp16 models in one kernel
# (fused16_probe.py); then chapter 09's measurement of problem 94 on this lone card
# (experiments/full_run/fusion_on_one_card.py). Logs under $OUT.
# STAGES picks what runs (default all of: build tests ladder sanitize fused16 fusion), so that one device call of at
# most ten minutes can run part and the next, on the still-warm machine, the rest.
set -u
STAGES=" ${STAGES:-build tests ladder sanitize fused16 fusion} "
want() { [[ "$STAGES" == *" $1 "* ]]; }
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
python3 -c "import pytest, IPython" 2>/dev/null || python3 -m pip install -q --no-index --find-links .whl pytest ipykernel 2>&1 | tail -1
if want build; then
python3 -c "from utils import build; build.load_kernels(['gemm_08_mma_tf32', 'gemm_09_wgmma_tf32', 'gemm_10_3xtf32',
  'gemm_11_wgmma_bf16', 'fused_gemm_groupnorm', 'groupnorm', 'min_bias_broadcast'])" > "$OUT/build.log" 2>&1
echo "build rc=$?"
fi
if want tests; then
WORKBOOK_PREBUILD=0 python3 -m pytest tests/test_gemm_tensor_cores.py tests/test_gemm_ladder.py -m gpu -k "gemm_11" -q \
  -p no:cacheprovider > "$OUT/pytest_rung11.log" 2>&1
echo "pytest rc=$?"; tail -3 "$OUT/pytest_rung11.log"
WORKBOOK_PREBUILD=0 python3 -m pytest tests/test_solutions.py tests/test_bad_inputs.py -m gpu -q -p no:cacheprovider \
  -k "float64 or gemm_11" > "$OUT/pytest_float64_badinputs.log" 2>&1
echo "pytest float64/bad inputs rc=$?"; tail -3 "$OUT/pytest_float64_badinputs.log"
fi
if want ladder; then
for shape in "1024 8192 8192" "32768 4096 1024"; do
  python3 -m utils.ladder --rungs gemm_11_wgmma_bf16 --shape $shape --reps 30 --no-record 2>&1 | grep -v "^W11"
done > "$OUT/ladder_rung11.log"; cat "$OUT/ladder_rung11.log"
fi
if want sanitize; then
for tool in memcheck racecheck initcheck synccheck; do
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool $tool --error-exitcode 3 \
    python3 experiments/bf16/sanitize_rung11.py > "$OUT/sanitize_$tool.log" 2>&1
  echo "$tool rc=$? $(grep -c "ERROR SUMMARY: 0" "$OUT/sanitize_$tool.log") $(tail -1 "$OUT/sanitize_$tool.log")"
done
fi
if want fused16; then
python3 experiments/bf16/fused16_probe.py --out "$OUT" --commit "$(git rev-parse --short HEAD 2>/dev/null)" \
  > "$OUT/fused16_probe.log" 2>&1
echo "fused16 rc=$?"; grep -v "^W11" "$OUT/fused16_probe.log" | tail -24
fi
if want fusion; then
timeout "${FUSION_S:-150}" python3 experiments/full_run/fusion_on_one_card.py --out "$OUT" > "$OUT/fusion_on_one_card.log" 2>&1
echo "fusion rc=$?"; grep -v "^W11" "$OUT/fusion_on_one_card.log" | tail -12
fi
