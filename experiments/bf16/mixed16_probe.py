"""The mixed-input GEMM (mixed16.cu: x 16-bit, w float32 converted in registers) against autocast's way, the
conversion of w and then a 16-bit GEMM, and against the 16-bit GEMM alone on a w converted before (the floor a
conversion kept between calls would give).

    python experiments/bf16/mixed16_probe.py --out OUT [--commit SHA] [--rows M ...]

First every contender is checked against float64 at shapes no tile divides (w rounded to x's dtype first, as
w.to(x.dtype) rounds it, so the reference is the exact product of what the tensor cores multiply), every output
element written (a NaN block left in the allocator's cache first). Then, side by side (bench.time_interleaved: L2
flushed, medians), at 94's, 75's and 62's GEMM (1024 x 8192 x 8192) and 37's (32768 x 4096 x 1024). The README's
prediction ("The mixed-input main loop: ... counted again"): ours about 1.25x rung 11's main loop, 0.22 ms at
1024 x 8192 x 8192 against 0.27-0.28 ms for the conversion and the GEMM. --rows adds M x 8192 x 8192 for each M
given (where the whole models' route turns from one GEMM to the other: common/gemm_dispatch.cuh). Prints one line
per point; OUT/mixed16_probe.json holds every row.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from utils import bench, build  # noqa: E402

sys.path.insert(0, str(HERE))
from probe import out_and_commit, write_rows  # noqa: E402

SHAPES = [(1024, 8192, 8192), (32768, 4096, 1024)]
CHECKS = [(300, 200, 136), (1, 8, 8), (257, 129, 4104), (1024, 1024, 1024)]


def contenders(mixed, rung11, dtype):
    """name -> fn(x, w32, w16): w16 is w32 converted once, before the timing."""
    fns = {"ours (w float32, converted in registers)": lambda x, w32, w16: mixed.mixed_gemm(x, w32),
           "w.to(dtype), then rung 11": lambda x, w32, w16: rung11.gemm(x, w32.to(dtype)),
           "w.to(dtype), then cuBLAS": lambda x, w32, w16: torch.mm(x, w32.to(dtype).t()),
           "cuBLAS on w converted before": lambda x, w32, w16: torch.mm(x, w16.t()),
           "rung 11 on w converted before": lambda x, w32, w16: rung11.gemm(x, w16)}
    return fns


def main(argv=None) -> int:
    args = out_and_commit(__doc__, argv, lambda ap: ap.add_argument("--rows", type=int, nargs="*", default=[]))
    shapes = SHAPES + [(m, 8192, 8192) for m in args.rows]
    built = build.load_kernels({"mixed": build.Variant("mixed16", kernels_dir=HERE), "rung11": "gemm_11_wgmma_bf16"})
    mixed, rung11 = built["mixed"], built["rung11"]
    rows = []
    for dtype in (torch.bfloat16, torch.float16):
        fns = contenders(mixed, rung11, dtype)
        for M, N, K in CHECKS:
            gen = torch.Generator(device="cuda").manual_seed(M + N + K)
            x = torch.randn(M, K, device="cuda", generator=gen).to(dtype)
            w32 = torch.randn(N, K, device="cuda", generator=gen) / K**0.5
            w16 = w32.to(dtype)
            ref = x.double() @ w16.double().t()
            scale = ref.abs().max().item()
            torch.full((M, N), float("nan"), device="cuda")  # a NaN block in the cache: an unwritten element shows
            out = mixed.mixed_gemm(x, w32)
            err = (out.double() - ref).abs().max().item() / scale
            ok = bool(torch.isfinite(out).all()) and out.shape == ref.shape and out.dtype == torch.float32
            # float32 accumulation of K exact products: a few ulps of the largest value, far below one bf16 ulp
            verdict = "ok" if ok and err < 1e-5 else ("NOT WRITTEN" if not ok else "WRONG")
            print(f"check {str(dtype)[6:]:>8} {M}x{N}x{K} error {err:.1e} {verdict}", flush=True)
            rows.append({"dtype": str(dtype)[6:], "M": M, "N": N, "K": K, "check": True, "rel_error": err,
                         "written": ok, "verdict": verdict})
        for M, N, K in shapes:
            x = torch.randn(M, K, device="cuda").to(dtype)
            w32 = torch.randn(N, K, device="cuda") / K**0.5
            w16 = w32.to(dtype)
            t = bench.time_interleaved({n: (lambda fn=fn: fn(x, w32, w16)) for n, fn in fns.items()}, reps=30)
            cast_then = min(v.median for k, v in t.items() if k.startswith("w.to"))
            for name, v in t.items():
                print(f"time  {str(dtype)[6:]:>8} {M}x{N}x{K} {name:<42} {v.median:.4f} ms ({v.p20:.4f}-{v.p80:.4f}), "
                      f"{cast_then / v.median:.2f}x the faster conversion-then-GEMM", flush=True)
                rows.append({"dtype": str(dtype)[6:], "M": M, "N": N, "K": K, "contender": name, "check": False,
                             "median_ms": v.median, "p20_ms": v.p20, "p80_ms": v.p80})
    write_rows(args.out / "mixed16_probe.json", args.commit, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
