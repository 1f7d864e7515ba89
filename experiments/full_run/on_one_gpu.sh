#!/usr/bin/env bash
# `make run`, `pytest -m gpu` and compute-sanitizer at one commit on one GPU, over as many calls of under ten
# minutes as it takes. Every call runs the same command: it takes the next steps of the queue below, one after
# the other, while the step's expected seconds still fit in what is left of the call (CALL_BUDGET, default
# 540 s; a step expected to take longer than that runs alone, first in its call), and returns what the run
# has written so far. The queue's state and the results folder (build/fullrun/results, a copy of results/)
# live under build/, which a warm machine keeps between calls.
#
# One card runs everything, in the notebooks' order, so every chapter reads this run's records, written
# before it started, and the scoreboard and every chapter's table time the contenders on the same card.
# The expected seconds are the H100's (at ded6c47 for 00-09, the scoreboard and the profile; at 4da733a for
# the rest; at e883c5f for the training step, 13 and the GPU tests' parts), with room. Notebook 13's training
# step alone outran a call at e883c5f (500 s): it is measured before 13 in two shares
# (utils/chapters/training.py), and 13 shows that record.
#
# Under $OUT: logs.tgz (the logs) and fullrun.tgz (every file the run wrote into the results folder).
source "$(dirname "$0")/common.sh"
budget=${CALL_BUDGET:-540}
DONE=$PWD/build/fullrun/done.txt
t0=$(date +%s)

# step, expected seconds (02, 04, 05, 07 and 08 with their sweeps over the size: the H200's times at 99b4afc, and
# 08's sweep estimated, with room)
QUEUE="prebuild 150
01 330
00 40
scoreboard 180
profile 45
02 65
03 100
04 50
05 60
06 90
07 70
08 150
09 100
10 480
11 150
training1 280
training2 260
12 150
13 200
pytest1 120
pytest2 480
pytest3 480
sanitize 330"

if [ ! -f "$DONE" ]; then
  rm -rf build/fullrun && mkdir -p "$L" && cp -r results "$R" && touch "$DONE"
  nvidia-smi --query-gpu=index,name,clocks.max.sm,power.limit --format=csv,noheader > "$L/device_$c.txt"
fi
stamp() { echo "$(date -u +%H:%M:%S) $*" >> "$L/progress_$c.txt"; }

step() {
  case $1 in
    prebuild) python3 -m utils.build > "$L/prebuild_$c.log" 2>&1 ;;
    scoreboard | profile) run --steps "$1" > "$L/run_$1_$c.log" ;;
    pytest?) gpu_test_part "${1#pytest}" ;;
    # notebook 13's training step, in two calls' worth of shares, recorded as one before 13 shows it
    training1) python3 -m utils.chapters.training --problems 37 62 --rows-out "$L/training_rows_37.json" \
      > "$L/training_$c.log" 2>&1 ;;
    training2) python3 -m utils.chapters.training --problems 94 75 --rows-out "$L/training_rows_94.json" \
      >> "$L/training_$c.log" 2>&1 &&
      python3 -m utils.chapters.training --merge "$L"/training_rows_*.json --results-dir "$R" >> "$L/training_$c.log" 2>&1 ;;
    sanitize) PYTORCH_NO_CUDA_MEMORY_CACHING=1 python3 -m utils.sanitize --results-dir "$R" --resume \
      --budget "$(( budget - $(date +%s) + t0 ))" --targets 'solutions/*' 'exercises/*' >> "$L/sanitize_$c.log" 2>&1 ;;
    *) run --notebooks "$1" > "$L/run_$1_$c.log" ;;
  esac
}

pack() {
  (cd "$R" && find . -newer "$L/device_$c.txt" -type f | tar czf "$OUT/fullrun.tgz" -T - 2>/dev/null)
  tar czf "$OUT/logs.tgz" -C "$L/.." logs 2>/dev/null
}

first=1
while read -r name expected; do
  grep -qx "$name" "$DONE" && continue
  left=$(( budget - $(date +%s) + t0 ))
  if [ "$first" = 0 ] && [ "$expected" -gt "$left" ]; then break; fi
  first=0
  stamp "$name starts ($left s left in this call, $expected expected)"
  start=$(date +%s)
  step "$name"
  rc=$?
  stamp "$name rc=$rc in $(( $(date +%s) - start )) s"
  echo "$name" >> "$DONE"
  pack
done <<< "$QUEUE"
pack
echo "done: $(tr '\n' ' ' < "$DONE")"
tail -n 15 "$L/progress_$c.txt"
