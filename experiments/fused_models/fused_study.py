"""Whole-model fusion study (kernels/fused_gemm_groupnorm.cu): per problem at full scale, in one run
and at both tiers, eager, torch.compile (default mode), the unfused drop-in path (workbook::linear +
the fused tail) and the fused kernel; for 75 both row-minimum folds. Every contender's output is
compared with eager's before it is timed. Writes $OUT/o/fused_study.json and prints a table.

    python -m experiments.fused_models.fused_study [--reps 50]

linear_and_rest was defined here when the two runs of README.md ran; it moved, unchanged, to
utils/chapters/epilogue_fusion.py, whose measure_fusion (notebook 09, section 4) records the same comparison.
"""
import argparse
import json
import os

import torch

from utils import bench, build, ops, precision
from utils.chapters import session as chapter
from utils.problems import get_problem
from utils.chapters.epilogue_fusion import linear_and_rest  # the model's Linear and its ops' other arguments

FUSED = {94: "linear_bias_hardtanh_mish_group_norm", 37: "linear_swish_bias_group_norm",
         62: "linear_group_norm_leaky_relu_x2", 75: "linear_group_norm_min_bias"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--problems", type=int, nargs="*", default=[94, 75, 37, 62])
    a = ap.parse_args()
    out_dir = os.path.join(os.environ.get("OUT", "."), "o")
    os.makedirs(out_dir, exist_ok=True)
    chapter.quiet_inductor()
    build.load_kernels(["fused_gemm_groupnorm", "gemm_09_wgmma_tf32", "gemm_10_3xtf32", "groupnorm",
                        "min_bias_broadcast"])
    fk = build.load_kernel("fused_gemm_groupnorm")
    rung9 = build.load_kernel("gemm_09_wgmma_tf32")
    res = {"device": torch.cuda.get_device_name(), "reps": a.reps, "rows": {}}
    for pid in a.problems:
        ref, _ = chapter.solution_pair(pid, "full", "cuda", 0)
        p = get_problem(pid)
        (x,) = [t.cuda() for t in p.get_inputs("full", generator=torch.Generator().manual_seed(1))]
        lin, rest = linear_and_rest(pid, ref)
        w, lb = lin.weight, lin.bias
        tail = getattr(ops, {94: "bias_hardtanh_mish_group_norm", 37: "swish_bias_group_norm",
                             62: "group_norm_leaky_relu_x2", 75: "group_norm_min_bias"}[pid])
        fused = getattr(fk, FUSED[pid])
        for tf32 in (False, True):
            tier = "tf32" if tf32 else "strict"
            tol = 1e-2 if tf32 else 1e-4
            torch._dynamo.reset()
            with precision.tf32(tf32), torch.no_grad():
                c = {"eager": lambda: ref(x), "compile": (lambda cm=torch.compile(ref): cm(x)),
                     "unfused": lambda: tail(ops.linear(x, w, lb), *rest),
                     "fused": lambda: fused(x, w, lb, *rest, None, False)[0]}
                # the fused kernel's GEMM alone (its epilogue a plain store): rung 10's linear, rung 9
                c["gemm"] = (lambda: rung9.gemm(x, w)) if tf32 else (lambda: ops.linear(x, w, lb))
                if pid == 75:
                    c["fused-atomic"] = lambda: fk.linear_group_norm_min_bias_atomic(x, w, lb, *rest, None, False)[0]
                want = ref(x)
                for n, f in c.items():
                    if n == "gemm":
                        continue
                    o = f()
                    torch.cuda.synchronize()
                    d = (o - want).abs().max().item()
                    ok = torch.allclose(o, want, atol=tol, rtol=tol)
                    print(f"{pid} {tier} {n}: max |diff| vs eager {d:.2e} {'ok' if ok else 'FAIL'}", flush=True)
                    assert ok, (pid, tier, n, d)
                row = {}
                for rnd in range(2):
                    for n, f in c.items():
                        row.setdefault(n, []).append(bench.time_ms(f, reps=a.reps).median)
                res["rows"][f"{pid}-{tier}"] = row
                print(pid, tier, {n: [round(v, 4) for v in vs] for n, vs in row.items()}, flush=True)
        del ref, x
        torch.cuda.empty_cache()
    json.dump(res, open(os.path.join(out_dir, "fused_study.json"), "w"), indent=1)
    print(f"\n{'problem':10s} {'eager':>8s} {'compile':>8s} {'unfused':>8s} {'fused':>8s} {'its gemm':>8s}  "
          f"fused x compile  fused x unfused")
    for k, row in res["rows"].items():
        m = {n: min(v) for n, v in row.items()}
        extra = f"  atomic {m['fused-atomic']:.4f}" if "fused-atomic" in m else ""
        print(f"{k:10s} {m['eager']:8.4f} {m['compile']:8.4f} {m['unfused']:8.4f} {m['fused']:8.4f} {m['gemm']:8.4f}  "
              f"{m['compile'] / m['fused']:6.3f}x  {m['unfused'] / m['fused']:6.3f}x{extra}")


if __name__ == "__main__":
    main()
