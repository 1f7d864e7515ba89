"""The wgmma engine on 16-bit operands (gemm16.cu) against cuBLAS's bf16 and fp16 GEMMs.

    python experiments/bf16/probe.py --out OUT [--commit SHA]

First every contender is checked against float64 at shapes no tile divides (x and w hold bf16 or fp16
values exactly, so the reference is their exact product): ours (fp32 out) and cuBLAS's (`F.linear`, the output
in the operands' dtype, and `torch.mm(..., out_dtype=torch.float32)` where torch has it). Then, side by side
(bench.time_interleaved: L2 flushed, medians), at 1024 x 8192 x 8192 and 32768 x 4096 x 1024 (issue "bf16 and
fp16"'s two shapes) and 8192^3. Ours writes fp32 (at two block widths), or, as the ladder's rung 11, its operands'
dtype rounded in the epilogue (Quad16Writer). Prints one line per point; OUT/bf16_probe.json holds every row.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from utils import bench, build  # noqa: E402

SHAPES = [(1024, 8192, 8192), (32768, 4096, 1024), (8192, 8192, 8192)]
CHECKS = [(1000, 1000, 1000), (129, 4099, 1032), (1, 8, 8), (300, 257, 4104)]


def contenders(g, rung11, dtype):
    fns = {"ours bn=256": lambda x, w: g.gemm16(x, w, 256, 0), "ours bn=128": lambda x, w: g.gemm16(x, w, 128, 0),
           "rung 11 (16-bit out)": lambda x, w: rung11.gemm(x, w),
           f"cuBLAS {dtype} out": lambda x, w: F.linear(x, w)}
    try:
        torch.mm(torch.ones(8, 8, dtype=dtype, device="cuda"), torch.ones(8, 8, dtype=dtype, device="cuda"),
                 out_dtype=torch.float32)
        fns["cuBLAS fp32 out"] = lambda x, w: torch.mm(x, w.t(), out_dtype=torch.float32)
    except (TypeError, RuntimeError):
        pass
    return fns


def out_and_commit(doc: str, argv=None, more=None) -> argparse.Namespace:
    """A probe's command line: --out (made here) and --commit (the JSON's), and what more(parser) adds; its
    description the docstring's first line."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--commit", default="unknown")
    if more is not None:
        more(ap)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    return args


def main(argv=None) -> int:
    args = out_and_commit(__doc__, argv)
    built = build.load_kernels({"g": build.Variant("gemm16", kernels_dir=HERE), "rung11": "gemm_11_wgmma_bf16"})
    g, rung11 = built["g"], built["rung11"]
    rows = []
    for dtype in (torch.bfloat16, torch.float16):
        fns = contenders(g, rung11, dtype)
        for M, N, K in CHECKS:
            gen = torch.Generator(device="cuda").manual_seed(M + N + K)
            x = torch.randn(M, K, device="cuda", generator=gen).to(dtype)
            w = (torch.randn(N, K, device="cuda", generator=gen) / K**0.5).to(dtype)
            ref = F.linear(x.double(), w.double())
            scale = ref.abs().max().item()
            for name, fn in fns.items():
                torch.full((M, N), float("nan"), device="cuda")  # a NaN block in the cache: unwritten output shows
                out = fn(x, w)
                err = (out.double() - ref).abs().max().item() / scale
                ok = bool(torch.isfinite(out).all()) and out.shape == ref.shape
                print(f"check {str(dtype)[6:]:>8} {M}x{N}x{K} {name:<18} error {err:.1e} {'ok' if ok else 'NOT WRITTEN'}",
                      flush=True)
                rows.append({"dtype": str(dtype)[6:], "M": M, "N": N, "K": K, "contender": name, "check": True,
                             "rel_error": err, "written": ok})
        for M, N, K in SHAPES:
            x = torch.randn(M, K, device="cuda").to(dtype)
            w = (torch.randn(N, K, device="cuda") / K**0.5).to(dtype)
            t = bench.time_interleaved({n: (lambda fn=fn: fn(x, w)) for n, fn in fns.items()}, reps=30)
            best = min(v.median for k, v in t.items() if k.startswith("cuBLAS"))
            for name, v in t.items():
                tflops = 2 * M * N * K / (v.median * 1e9)
                print(f"time  {str(dtype)[6:]:>8} {M}x{N}x{K} {name:<18} {v.median:.4f} ms ({v.p20:.4f}-{v.p80:.4f}) "
                      f"{tflops:6.0f} TFLOP/s, {best / v.median:.2f}x the faster cuBLAS", flush=True)
                rows.append({"dtype": str(dtype)[6:], "M": M, "N": N, "K": K, "contender": name, "check": False,
                             "median_ms": v.median, "p20_ms": v.p20, "p80_ms": v.p80, "tflops": tflops})
    write_rows(args.out / "bf16_probe.json", args.commit, rows)
    return 0


def write_rows(path: Path, commit: str, rows: list[dict]) -> None:
    """A probe's rows as JSON, with the device, torch and the commit they ran at (fused16_probe.py's too)."""
    path.write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "commit": commit,
                                "rows": rows}, indent=1))


if __name__ == "__main__":
    raise SystemExit(main())


# problem -> the name of its whole model's op (utils.ops.WHOLE_MODELS)
WHOLE_MODEL_OF = {94: "linear_bias_hardtanh_mish_group_norm", 75: "linear_group_norm_min_bias",
                  37: "linear_swish_bias_group_norm", 62: "linear_group_norm_leaky_relu_x2"}


def op_args_of(whole, call) -> tuple:
    """The arguments the last call of whole.op got while call() ran (a drop-in's forward: under autocast, what
    the autocast kernel handed the op)."""
    captured = {}
    real = whole.op

    def capture(*a):
        captured["args"] = a
        return real(*a)
    whole.op = capture
    try:
        call()
    finally:
        whole.op = real
    return captured["args"]
