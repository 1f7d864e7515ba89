#!/usr/bin/env bash
# Nsight Compute's view of a few small-batch contenders (ncu_one.py): time, DRAM throughput, issue use,
# occupancy and the main stall reasons per issued instruction. Writes $OUT/ncu_<config>.csv and prints a summary.
set -u
export PYTHONPATH=$PWD
S=smsp__average_warps_issue_stalled
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active
for r in long_scoreboard barrier math_pipe_throttle mio_throttle short_scoreboard wait lg_throttle selected \
         dispatch_stall no_instruction not_selected; do metrics+=,${S}_${r}_per_issue_active.ratio; done
metrics+=,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
metrics+=,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem
python3 -c "from utils import build; from pathlib import Path; build.load_kernel('swapped_mma', kernels_dir=Path('experiments/small_batch'))" 2>&1 | tail -1
for cfg in "$@"; do
  set -- $cfg
  k=$([ "$1" = bulk ] && echo bulk_kernel || echo swapped_kernel)
  f=$OUT/ncu_$(echo "$cfg" | tr ' ' _).csv
  echo "== $cfg"
  ncu -k regex:$k --launch-skip 2 --launch-count 1 --metrics "$metrics" --csv --page raw \
    python3 experiments/small_batch/ncu_one.py $cfg 2>/dev/null | grep -v "^==" > "$f"
  python3 - "$f" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
for name, value in zip(rows[0], rows[-1]):
    if name.startswith(("gpu__", "dram", "smsp", "sm__", "launch")):
        print("  " + name.replace("smsp__average_warps_issue_stalled_", "stall_").replace("_per_issue_active.ratio", ""), value)
PY
done
