"""Problems 94, 37 and 62 as bf16 and fp16 models in one kernel (fused16.cu), checked and timed before any drop-in
runs them.

    python experiments/bf16/fused16_probe.py --out OUT [--commit SHA]

For each problem and dtype: the reference Model at KernelBench's size with its GroupNorm γ, β and biases
randomised (utils.check's _randomise), converted to the dtype (what `model.to(dtype)` gives a user); x from the
problem's get_inputs in that dtype. Checked against the same model in float64 on the same 16-bit values: ours
and eager's own error (largest absolute, and the norm of the difference over the reference's), ours held to the
dtype's tier (utils.check.TIERS, every element); a miss raises and nothing is timed. Then, side by side
(bench.time_interleaved: L2 flushed, medians): ours, eager in the dtype, torch.compile of it (default mode),
cuBLAS's bare GEMM of the same shape (F.linear on the 16-bit x and w, 16-bit out) and rung 11 (ours, bare).
OUT/fused16_probe.json holds every row.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from utils import bench, build, check  # noqa: E402
from utils.problems import get_problem  # noqa: E402

sys.path.insert(0, str(HERE))
from probe import write_rows  # noqa: E402

TIER = {torch.bfloat16: "bf16", torch.float16: "fp16"}


def parts(m):
    """The model's nn.Linear and nn.GroupNorm, whatever the problem names them."""
    return (next(x for x in m.modules() if isinstance(x, torch.nn.Linear)),
            next(x for x in m.modules() if isinstance(x, torch.nn.GroupNorm)))


def ours_call(f, pid, m, x):
    lin, gn = parts(m)
    if pid == 94:
        return lambda: f.linear_bias_hardtanh_mish_group_norm16(x, lin.weight, lin.bias, m.bias, m.hardtanh.min_val,
                                                                m.hardtanh.max_val, gn.num_groups, gn.weight, gn.bias,
                                                                gn.eps)
    if pid == 37:
        return lambda: f.linear_swish_bias_group_norm16(x, lin.weight, lin.bias, m.bias, gn.num_groups, gn.weight,
                                                        gn.bias, gn.eps)
    return lambda: f.linear_group_norm_leaky_relu_x2_16(x, lin.weight, lin.bias, gn.num_groups, gn.weight, gn.bias,
                                                        gn.eps, m.leaky_relu.negative_slope)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    built = build.load_kernels({"f": build.Variant("fused16", kernels_dir=HERE), "rung11": "gemm_11_wgmma_bf16"})
    f, rung11 = built["f"], built["rung11"]
    rows = []
    for pid in (94, 37, 62):
        p = get_problem(pid)
        for dtype in (torch.bfloat16, torch.float16):
            model = p.make_model("full", seed=0)
            check._randomise(model, 0)
            model = model.to("cuda", dtype).eval()
            x = p.get_inputs("full", generator=torch.Generator().manual_seed(1))[0].to("cuda", dtype)
            lin, _ = parts(model)
            with torch.no_grad():
                ref = model.double()(x.double())
                model = model.to(dtype)
                fns = {"ours": ours_call(f, pid, model, x), "eager": lambda: model(x),
                       "torch.compile": (lambda c=torch.compile(model): c(x)),
                       "cuBLAS GEMM alone": lambda: F.linear(x, lin.weight),
                       "rung 11 GEMM alone": lambda: rung11.gemm(x, lin.weight)}
                tier = check.TIERS[TIER[dtype]]
                for name in ("ours", "eager", "torch.compile"):
                    out = fns[name]().double()
                    err = (out - ref).abs().max().item()
                    rel = ((out - ref).norm() / ref.norm()).item()
                    ok = out.shape == ref.shape and bool(torch.allclose(out, ref, atol=tier.atol, rtol=tier.rtol))
                    print(f"check {pid} {str(dtype)[6:]:>8} {name:<14} max abs {err:.2e}, relative norm {rel:.2e} "
                          f"{'ok' if ok else 'OUTSIDE THE TIER'}", flush=True)
                    rows.append({"problem": pid, "dtype": str(dtype)[6:], "contender": name, "check": True,
                                 "max_abs": err, "rel_norm": rel, "within_tier": ok})
                    if name == "ours" and not ok:
                        raise AssertionError(f"problem {pid} in {dtype}: ours is outside the tier; not timing it")
                t = bench.time_interleaved(fns, reps=args.reps)
            bare = t["cuBLAS GEMM alone"].median
            for name, v in t.items():
                print(f"time  {pid} {str(dtype)[6:]:>8} {name:<20} {v.median:.4f} ms ({v.p20:.4f}-{v.p80:.4f}), "
                      f"{v.median / bare:.2f}x cuBLAS's GEMM alone", flush=True)
                rows.append({"problem": pid, "dtype": str(dtype)[6:], "contender": name, "check": False,
                             "median_ms": v.median, "p20_ms": v.p20, "p80_ms": v.p80})
            del model, fns
            torch.cuda.empty_cache()
    write_rows(args.out / "fused16_probe.json", args.commit, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
