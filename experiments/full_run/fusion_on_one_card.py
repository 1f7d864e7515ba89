"""Chapter 09's measurement of problem 94 (epilogue_fusion.measure_fusion: eager, torch.compile, the unfused ops,
the fused kernel, its GEMM alone, timed in turn in two rounds) on one lone H200, beside eager_neighbours.py's eager
alone: does 09's own method give eager 2-4% slower than the scoreboard's, as it did on the four-card machine?

    python experiments/full_run/fusion_on_one_card.py --out OUT
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from utils.chapters import epilogue_fusion  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = epilogue_fusion.measure_fusion(pids=(94,), progress=False)
    for r in rows:
        print(f"{r['tier']:<6} {r['contender']:<24} {r['median_ms']:.4f} ms  rounds "
              + ", ".join(f"{v:.4f}" for v in r["median_ms_by_round"]), flush=True)
    (args.out / "fusion_on_one_card.json").write_text(json.dumps(
        {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, indent=1, default=str))


if __name__ == "__main__":
    main()
