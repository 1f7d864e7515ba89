#!/usr/bin/env bash
# The drop-ins at small batches after the small-batch schedule: utils.chapters.batch_sweep's rows (eager,
# torch.compile, ours, cuBLAS's GEMM alone, ours alone) into $OUT/batch_sweep_small.json, nothing recorded.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
python3 -m utils.chapters.batch_sweep --problems ${PROBLEMS:-94 62} --ms ${MS:-1 8 64} --reps 30 --modes torch.compile --shapes ${SHAPES:-own 4096x4096 4096x11008} \
  --rows-out "$OUT/${NAME:-batch_sweep_small}.json" 2>&1 | grep -v "^W11\|Warning" | tee "$OUT/${NAME:-batch_sweep_small}.log" | tail -30
