"""Inside the harness's gradient check for problem 75 at full scale with TF32: for each seed, how
many rows of the input's gradient each contender sends elsewhere than float64 does (a row whose
minimum moved to a near-tied channel), and the norm-wise errors the judge compares.

The contenders are the ones judge_gradients sees: ours (the solution's ModelNew), the reference
(eager PyTorch, cuBLAS TF32), and float64 at the input moved by the tier's noise, at each of the
judge's draws of it (the largest sets the band; --draws N takes N draws instead of check.MOVED_DRAWS).
A row counts as moved where its gradient differs from float64's by more than a tenth of its norm.

    python -m experiments.training.harness_flips [--seeds 0 1 2 3 4] [--tier tf32] [--draws 19]
"""
from __future__ import annotations

import argparse

from solutions import solution
from utils import check, precision


def probe(seed: int, tier: str) -> dict:
    seen = {"draws": []}
    judge = check.judge_gradients

    def spy(new, ref, ref64, tier_, moved64=None):
        if "new" in seen:  # the training step's checks judge gradients too: keep the gradients check's
            return judge(new, ref, ref64, tier_, moved64)
        seen.update(new=new, ref=ref, exact=ref64(), draws=moved64() if moved64 else [])
        return judge(new, ref, lambda: seen["exact"], tier_, (lambda: seen["draws"]) if moved64 else None)
    check.judge_gradients = spy
    try:
        with precision.tf32(tier == "tf32"):
            module = solution(75)
            report = check.check_model(75, module.ModelNew, scale="full", seed=seed,
                                       allow_torch_ops=module.ModelNew.allow_torch_ops)
    finally:
        check.judge_gradients = judge
    verdict = next(r for r in report.checks if r.name == "gradients")
    exact = seen["exact"]["input 0"].double()

    def moved(g):
        rows = (g.double() - exact).norm(dim=1) > 0.1 * exact.norm(dim=1)
        return int(rows.sum()), check._rel_norm(g, exact)
    return {"seed": seed, "verdict": f"{verdict.status}: {verdict.detail}", "new": moved(seen["new"]["input 0"]),
            "ref": moved(seen["ref"]["input 0"]), "draws": sorted(moved(d["input 0"]) for d in seen["draws"])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4])
    ap.add_argument("--tier", default="tf32", choices=["strict", "tf32"])
    ap.add_argument("--draws", type=int, default=check.MOVED_DRAWS)
    args = ap.parse_args(argv)
    check.MOVED_DRAWS = args.draws
    print("seed  rows moved, |g - g64| / |g64| of the input's gradient: ours | reference | float64 moved by the "
          "noise, each draw")
    for seed in args.seeds:
        r = probe(seed, args.tier)
        cells = " | ".join(f"{n:>3} {e:.1e}" for n, e in (r["new"], r["ref"]))
        draws = " ".join(f"{n}:{e:.1e}" for n, e in r["draws"])
        print(f"{seed:>4}  {cells} | {draws}\n      {r['verdict']}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
