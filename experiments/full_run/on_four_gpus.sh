#!/usr/bin/env bash
# `make run` and `pytest -m gpu` at one commit on a machine with four GPUs, in two parts that each end within
# ten minutes (PART=1, then PART=2 on the same machine: build/ is kept between them). Every chapter runs as
# `python -m utils.run`, on the GPU given by CUDA_VISIBLE_DEVICES, into one results folder
# (build/fullrun/results, a copy of results/). A chapter starts only once the records it reads have been
# written by this run (`wait_for KIND`: the record carries this commit), so every chapter shows this run's
# figures, 13's final scoreboard reading 10's `solutions` included; check_order.py checks it after the run.
#   PART=1: every kernel built (64 cores); then GPU0 the scoreboard, 08 and 09 (08's sweep draws its floor
#           from the ceilings, which 01 records at about 290 s); GPU1 the profile, 03, 07, 04, 05; GPU2 01, 00,
#           02, 06, 11; GPU3 the bad-input matrix (the GPU tests' first part), then
#           compute-sanitizer on the solutions and the exercises until 500 s into the part. (02, 04, 05 and
#           07 end with a sweep over the size, about a minute in all on one H200: 02 moved off GPU1 for it.)
#   PART=2: 10, and notebook 13's training step spread over three cards (utils/chapters/training.py: its
#           torch.compile max-autotune compiles took 500 s on one card at e883c5f, and 13 outran the part;
#           about 115 s a problem on an H200 at 99b4afc); GPU0 runs 10, then trains 62; GPU1 trains 94 and 75,
#           records the four as one, then runs 13 once 10 has recorded `solutions` (at 99b4afc 10 trained
#           first and ended 3 s after 13's final scoreboard had read the older record); GPU2 the GPU tests but
#           test_solutions.py; GPU3 trains 37, then runs test_solutions.py.
# The scoreboard, 09 and 10 share GPU0: they quote the same headline ratios (utils.report.scoreboard.HEADLINES),
# and two cards of one host differ by more than a run's spread (the H200 run at dfaf467: 1.6-3.3%).
#   PART=3: the batch sweep (issue 36's baseline), a problem per GPU, recorded as one sweep.
# Under $OUT: logs.tgz (the logs, with smi_part<N>_<commit>.csv: every card's clock, power and temperature twice
# a second) and fullrun.tgz (every file the run wrote into the results folder).
# The GPU tests' third part outran its ten minutes at dfaf467 (results/nvidia-h200/logs/final_run/README.md):
# the exercise tests built their shortcut kernels cold, one after the other; tests/scratch_builds.py now
# lists them, and on a GPU the session's prebuild builds them side by side.
source "$(dirname "$0")/common.sh"
t0=$(date +%s)
# every card's SM clock, power and temperature twice a second while the part runs: a contender that draws close to
# the power limit (a SIMT SGEMM: 680 W of 700 on an H200) slows where the card runs hot, and two records timed
# minutes apart on one card then disagree (logs/final_run/README.md, "One headline that two records quote apart")
smi=""
sample_cards() {
  nvidia-smi --query-gpu=index,timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 500 \
    > "$L/smi_part${PART}_$c.csv" 2>/dev/null &
  smi=$!
  disown "$smi"  # not one of the jobs the part waits for below
}
stamp() { echo "$(( $(date +%s) - t0 )) s: $*" >> "$L/progress_part${PART}_$c.txt"; }

# a record of this run: results/<device>/<kind>.json written at this commit
wait_for() {
  local kind=$1 limit=${2:-540}
  while ! python3 - "$R" "$kind" "$c" <<'PY' 2>/dev/null
import json, sys
from pathlib import Path
from utils import env
rec = json.loads((Path(sys.argv[1]) / env.device_slug() / f"{sys.argv[2]}.json").read_text())
sys.exit(0 if rec["git_commit"].startswith(sys.argv[3]) else 1)
PY
  do
    if [ $(( $(date +%s) - t0 )) -gt "$limit" ]; then stamp "gave up waiting for $kind"; return 1; fi
    sleep 5
  done
  stamp "$kind recorded"
}

pytest_part() {  # k of 0..2
  gpu_test_part $(( $1 + 1 ))
  stamp "pytest part $(( $1 + 1 )) of 3 done"
}

if [ "$PART" = 1 ]; then
  rm -rf build/fullrun && mkdir -p "$L" && cp -r results "$R"
  sample_cards
  nvidia-smi --query-gpu=index,name,clocks.max.sm,power.limit --format=csv,noheader > "$L/device_$c.txt"
  stamp "prebuild starts"
  python3 -m utils.build > "$L/prebuild_$c.log" 2>&1
  stamp "prebuild done"
  (export CUDA_VISIBLE_DEVICES=0
   run --steps scoreboard; wait_for ceilings && run --notebooks 08 09
  ) > "$L/run_gpu0_part1_$c.log" 2>&1 &
  (export CUDA_VISIBLE_DEVICES=1
   run --steps profile; wait_for scoreboard && wait_for ceilings && run --notebooks 03 07
   wait_for eager_profile && wait_for ceilings && run --notebooks 04 05
  ) > "$L/run_gpu1_part1_$c.log" 2>&1 &
  (export CUDA_VISIBLE_DEVICES=2
   run --notebooks 01; run --notebooks 00; wait_for scoreboard && run --notebooks 02 06 11  # utils.run sorts a selection: 00 after 01's ceilings
  ) > "$L/run_gpu2_part1_$c.log" 2>&1 &
  (export CUDA_VISIBLE_DEVICES=3; pytest_part 0
   PYTORCH_NO_CUDA_MEMORY_CACHING=1 python3 -m utils.sanitize --results-dir "$R" --budget "$(( 500 - $(date +%s) + t0 ))" \
     --targets 'solutions/*' 'exercises/*' > "$L/sanitize_$c.log" 2>&1
   stamp "sanitize done") &
elif [ "$PART" = 2 ]; then
  sample_cards
  train() {  # one card's share of the training step: the problems $*
    python3 -m utils.chapters.training --problems "$@" --rows-out "$L/training_rows_${1}.json" \
      > "$L/training_${1}_$c.log" 2>&1
    stamp "training $* done"
  }
  (export CUDA_VISIBLE_DEVICES=0; wait_for whole_model_fusion 5 && run --notebooks 10; train 62
  ) > "$L/run_gpu0_part2_$c.log" 2>&1 &
  (export CUDA_VISIBLE_DEVICES=1; train 94 75
   until { [ -f "$L/training_rows_37.json" ] && [ -f "$L/training_rows_62.json" ]; } \
         || [ $(( $(date +%s) - t0 )) -gt 420 ]; do sleep 5; done
   python3 -m utils.chapters.training --merge "$L"/training_rows_*.json --results-dir "$R" >> "$L/training_94_$c.log" 2>&1
   wait_for training 5 && wait_for scoreboard 5 && wait_for solutions 480 && run --notebooks 12 13
  ) > "$L/run_gpu1_part2_$c.log" 2>&1 &
  (export CUDA_VISIBLE_DEVICES=2; pytest_part 1) &
  (export CUDA_VISIBLE_DEVICES=3; train 37; pytest_part 2) &
else  # PART=3: the batch sweep, a problem per card ($SWEEP_ARGS: e.g. "--ms 1 8 64 512 4096 --modes torch.compile")
  mkdir -p "$L" "$R" && touch "$L/device_$c.txt"
  sample_cards
  for i in 0 1 2 3; do
    pid=$(echo 94 75 37 62 | cut -d' ' -f$(( i + 1 )))
    (export CUDA_VISIBLE_DEVICES=$i
     python3 -m utils.chapters.batch_sweep --problems "$pid" --rows-out "$L/sweep_rows_$pid.json" ${SWEEP_ARGS:-} \
       > "$L/sweep_${pid}_$c.log" 2>&1
     stamp "sweep $pid done") &
  done
fi
# what this part has written so far comes back even if the call runs out of time: two archives, since a call
# returns only a few files
while [ -n "$(jobs -r)" ]; do
  sleep 20
  (cd "$R" && find . -newer "$L/device_$c.txt" -type f | tar czf "$OUT/fullrun.tgz" -T - 2>/dev/null)
  tar czf "$OUT/logs.tgz" -C "$L/.." logs 2>/dev/null
done
if [ "$PART" = 3 ]; then  # one record of the four cards' rows (cards of one kind: utils.chapters.batch_sweep.merged)
  CUDA_VISIBLE_DEVICES=0 python3 -m utils.chapters.batch_sweep --merge "$L"/sweep_rows_*.json --results-dir "$R" \
    >> "$L/sweep_merge_$c.log" 2>&1
fi
stamp "part $PART done"
[ -n "$smi" ] && kill "$smi" 2>/dev/null
(cd "$R" && find . -newer "$L/device_$c.txt" -type f | tar czf "$OUT/fullrun.tgz" -T -)
tar czf "$OUT/logs.tgz" -C "$L/.." logs
tail -n 3 "$L"/run_*_part"$PART"_*.log "$L"/pytest_gpu_*.log 2>/dev/null
cat "$L/progress_part${PART}_$c.txt"
