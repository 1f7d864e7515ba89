"""Where a drop-in's training step and its cacheless forward spend their time, on the GPU.

For each problem at KernelBench's size, TF32 off (strict) and on:
- the forward: eager, torch.compile (default mode), ours by default (the weight's small parts made
  on every call), ours frozen (kept), ours keeping the GEMM's output (what training runs);
- a training step (forward, backward, the gradients of the input and every parameter): eager,
  torch.compile (default mode), ours;
- the pieces of ours's backward, each timed alone: the tail's backward kernel, linear_backward's two
  GEMMs with their transposed operand copies, and cuBLAS's two backward GEMMs on the same operands;
- the operand passes alone: the small parts of the weight, and a transposed copy of it (3xTF32: big
  and small parts; TF32: raw), beside a same-size copy (the memory ceiling).
Every contender's output or gradients are checked first (against eager at the tier); all timed in
turn (utils.bench.compare, interleaved, medians). A table last; JSON into --out.

    python -m experiments.training.training_probe --out OUT [--problems 94 37] [--reps 20]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from utils import bench, build, ops, precision
from utils.chapters import session as chapter
from utils.problems import get_problem


def forward_rows(pid: int, tf32: bool, reps: int) -> list[dict]:
    ref, new = chapter.solution_pair(pid, "full", "cuda")
    frozen = chapter.solution_pair(pid, "full", "cuda")[1].freeze()
    x = get_problem(pid).get_inputs("full")[0].cuda()
    with precision.tf32(tf32), torch.no_grad():
        compiled = torch.compile(ref)
        expected = ref(x)
        tol = 1e-2 if tf32 else 1e-4
        contenders = {"eager": lambda: ref(x), "torch.compile": lambda: compiled(x), "ours": lambda: new(x),
                      "ours, frozen": lambda: frozen(x)}
        for name, fn in contenders.items():
            out = fn()
            assert torch.allclose(out, expected, atol=tol, rtol=tol), f"{pid} {name}: {(out - expected).abs().max():.2e}"
        rows = []
        for protocol, sync_each in chapter.PROTOCOLS.items():
            timed = bench.compare(contenders, reps=reps, progress=False, interleave=True, sync_each=sync_each)
            rows += [r | {"problem": pid, "what": f"forward, {protocol}"} for r in timed]
        # the host's share: one call's CPU time, queued without waiting (the GPU busy with earlier calls)
        args = _op_args(new)
        launcher = build.launcher(ops.FUSED, _op_name(pid))
        for name, fn in (("ours (the module)", lambda: new(x)),
                         ("the registered op", lambda: ops.WHOLE_MODELS[_op_name(pid)].op(x, *args)),
                         ("the launcher itself", lambda: launcher(x, *args, None, False))):
            rows.append({"problem": pid, "what": "host ms per call", "contender": name, "median_ms": _host_ms(fn)})
    return rows


def _op_name(pid: int) -> str:
    return {94: "linear_bias_hardtanh_mish_group_norm", 37: "linear_swish_bias_group_norm",
            62: "linear_group_norm_leaky_relu_x2", 75: "linear_group_norm_min_bias"}[pid]


def _op_args(model) -> list:
    """The whole-model op's arguments as the solution's forward passes them, read back from a call."""
    seen = {}
    original = ops.WholeModel.__call__

    def spy(self, x, *args, weight_residual=None):
        seen["args"] = args
        return original(self, x, *args, weight_residual=weight_residual)
    ops.WholeModel.__call__ = spy
    try:
        model(torch.zeros(1, [m for m in model.modules() if isinstance(m, torch.nn.Linear)][0].in_features,
                          device="cuda"))
    finally:
        ops.WholeModel.__call__ = original
    return list(seen["args"])


def _host_ms(fn, calls: int = 200) -> float:
    """Median CPU time of one call, in ms, the calls queued back to back (no synchronize between)."""
    import time
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return sorted(times)[len(times) // 2] * 1e3


def training_rows(pid: int, tf32: bool, reps: int) -> list[dict]:
    ref, new = (m.train() for m in chapter.solution_pair(pid, "full", "cuda"))
    x = get_problem(pid).get_inputs("full")[0].cuda()
    with torch.no_grad():
        grad = torch.rand_like(ref(x)) * 2 - 1
    with precision.tf32(tf32):
        steps = {"eager": chapter._training_step(ref, x, grad),
                 "torch.compile": chapter._training_step(torch.compile(ref), x, grad),
                 "ours": chapter._training_step(new, x, grad)}
        expected = steps["eager"]()
        verdicts = {name: chapter._gradients_verdict(step(), expected, ref, x, grad, tf32) for name, step in steps.items()}
        for name, (status, detail) in verdicts.items():  # reported, not asserted: the probe measures where they stand
            print(f"{pid:>3} TF32 {'on ' if tf32 else 'off'} gradients of {name}: {status}: {detail}", flush=True)
        rows = bench.compare(steps, reps=reps, progress=False, interleave=True)
    return [r | {"problem": pid, "what": "training step", "gradients": " ".join(verdicts[r["contender"]])}
            for r in rows]


def piece_rows(pid: int, tf32: bool, reps: int) -> list[dict]:
    """ours's backward taken apart, and the operand passes, at this problem's shape."""
    p = get_problem(pid)
    d = p.dims("full")
    g = torch.Generator("cuda").manual_seed(0)
    x = torch.rand(d.batch, d.in_features, device="cuda", generator=g)
    w = (torch.rand(d.out_features, d.in_features, device="cuda", generator=g) * 2 - 1) / d.in_features ** 0.5
    dy = torch.randn(d.batch, d.out_features, device="cuda", generator=g)
    y = torch.randn(d.batch, d.out_features, device="cuda", generator=g)
    C, G = d.out_features, d.groups
    gamma, beta, bias = (torch.rand(C, device="cuda", generator=g) + 0.5 for _ in range(3))
    tail = {94: lambda: ops.bias_hardtanh_mish_group_norm_backward(dy, y, bias, -1.0, 1.0, G, gamma, beta, 1e-5),
            37: lambda: ops.swish_bias_group_norm_backward(dy, y, bias, G, gamma, beta, 1e-5),
            62: lambda: ops.group_norm_leaky_relu_x2_backward(dy, y, G, gamma, beta, 1e-5, 0.01),
            75: lambda: ops.group_norm_min_bias_backward(dy.t().reshape(1, C, d.batch, 1), y, G, gamma, beta, 1e-5)}
    copy_out = torch.empty_like(w)
    with precision.tf32(tf32):
        contenders = {
            "tail backward": tail[pid],
            "linear_backward dx": lambda: ops.linear_backward(dy, x, w, True, False),
            "linear_backward dw": lambda: ops.linear_backward(dy, x, w, False, True),
            "cuBLAS dx = dy @ w": lambda: dy @ w,
            "cuBLAS dw = dy.T @ x": lambda: dy.t() @ x,
            "weight's small parts": lambda: ops.tf32_residual(w),
            "weight, copy (ceiling)": lambda: copy_out.copy_(w),
        }
        rows = bench.compare(contenders, reps=reps, progress=False, interleave=True, baseline=None)
    return [r | {"problem": pid, "what": "pieces"} for r in rows]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--problems", type=int, nargs="*", default=[94, 75, 37, 62])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--commit", default="unknown", help="the commit the sources are at (the device has no .git)")
    ap.add_argument("--skip", nargs="*", default=[], choices=["forward", "training", "pieces"])
    args = ap.parse_args(argv)
    chapter.quiet_inductor()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for pid in args.problems:
        for tf32 in (False, True):
            for what, fn in (("forward", forward_rows), ("training", training_rows), ("pieces", piece_rows)):
                if what in args.skip:
                    continue
                torch._dynamo.reset()
                new = fn(pid, tf32, args.reps)
                rows += new
                for r in new:
                    print(f"{pid:>3} TF32 {'on ' if tf32 else 'off'} {r['what']:<18} {r['contender']:<24} "
                          f"{r['median_ms']:8.3f} ms" + (f"  {r['speedup']:.2f}x eager" if r.get("speedup") else ""),
                          flush=True)
                torch.cuda.empty_cache()
    record = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "commit": args.commit, "rows": rows}
    (args.out / "training_probe.json").write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
