"""Where a drop-in's gradient error comes from, step by step, against float64 (and eager beside it).

For a whole model at a shape and a TF32 setting, each step of ours's training step is fed float64's
own input to that step (rounded to float32), so that its error is its own:
    y       the GEMM's output kept by the forward          (the fused kernel, save_gemm_output)
    dy      the tail's backward, from float64's y           (tail_backward.cu)
    dx, dw  linear_backward, from float64's dy              (gemm_10_3xtf32.cu)
and then the whole chain (ours's gradients of x and w), beside eager's at the same setting and
cuBLAS's GEMMs on float64's dy. Errors are norm-wise, |a - b| / |b|, and the largest elementwise
error relative to the largest element.

    python -m experiments.training.gradient_probe [--tf32] [--model linear_group_norm_leaky_relu_x2] [--shape 131 100 224 7]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from utils import ops, precision


def _args(name, M, K, C, G, seed=8):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(M, K, generator=g)
    bound = 1 / K ** 0.5
    w = (torch.rand(C, K, generator=g) * 2 - 1) * bound
    lb = (torch.rand(C, generator=g) * 2 - 1) * bound
    sign = torch.randint(0, 2, (C,), generator=g) * 2 - 1
    gamma, beta = (torch.rand(C, generator=g) + 0.5) * sign, 0.5 * torch.randn(C, generator=g)
    bias = 0.5 * torch.randn(C, generator=g)
    x, w, lb, gamma, beta, bias = (t.cuda() for t in (x, w, lb, gamma, beta, bias))
    rest = {"linear_bias_hardtanh_mish_group_norm": [bias, -1.0, 1.0, G, gamma, beta, 1e-5],
            "linear_swish_bias_group_norm": [bias, G, gamma, beta, 1e-5],
            "linear_group_norm_leaky_relu_x2": [G, gamma, beta, 1e-5, 0.01],
            "linear_group_norm_min_bias": [G, gamma, beta, 1e-5, bias.view(1, C, 1, 1)]}[name]
    return [x, w, lb, *rest]


def _err(a, b) -> str:
    a, b = a.double(), b.double()
    norm = ((a - b).norm() / b.norm().clamp(min=1e-300)).item()
    peak = ((a - b).abs().max() / b.abs().max().clamp(min=1e-300)).item()
    return f"norm {norm:.1e}  peak {peak:.1e}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="linear_group_norm_leaky_relu_x2", choices=list(ops.WHOLE_MODELS))
    ap.add_argument("--shape", type=int, nargs=4, default=[131, 100, 224, 7], metavar=("M", "K", "C", "G"))
    ap.add_argument("--tf32", action="store_true")
    args = ap.parse_args(argv)
    model = ops.WHOLE_MODELS[args.model]
    a = _args(args.model, *args.shape)
    x, w, lb, *rest = a
    d = [t.double() if isinstance(t, torch.Tensor) else t for t in a]
    y64 = F.linear(*d[:3]).requires_grad_()
    out64 = model.tail_math(y64, *d[3:])
    grad = torch.randn(out64.shape, device="cuda", generator=torch.Generator("cuda").manual_seed(9))
    (dy64,) = torch.autograd.grad(out64, y64, grad.double())
    dx64, dw64 = dy64 @ d[1], dy64.t() @ d[0]
    tail_args = rest[:4] if args.model == "linear_group_norm_min_bias" else rest
    print(f"{args.model} {tuple(args.shape)} TF32 {'on' if args.tf32 else 'off'}")
    with precision.tf32(args.tf32):
        _, y = model.op(*a, None, True)
        print(f"  y  (forward's kept output)      {_err(y, y64)}")
        print(f"  y  cuBLAS F.linear              {_err(F.linear(x, w, lb), y64)}")
        dy = model._tail_backward(grad, y64.detach().float(), *tail_args)[0]
        print(f"  dy tail backward on float64's y {_err(dy, dy64)}")
        dy_chain = model._tail_backward(grad, y, *tail_args)[0]
        print(f"  dy tail backward on ours's y    {_err(dy_chain, dy64)}")
        yr = F.linear(x, w, lb).detach().requires_grad_()
        (dy_eager,) = torch.autograd.grad(model.tail_math(yr, *rest), yr, grad)
        print(f"  dy eager on cuBLAS's y          {_err(dy_eager, dy64)}")
        dx, dw = ops.linear_backward(dy64.float(), x, w, True, True)
        print(f"  dx linear_backward on f64's dy  {_err(dx, dx64)}")
        print(f"  dx cuBLAS on float64's dy       {_err(dy64.float() @ w, dx64)}")
        print(f"  dw linear_backward on f64's dy  {_err(dw, dw64)}")
        print(f"  dw cuBLAS on float64's dy       {_err(dy64.float().t() @ x, dw64)}")
        leaves = [t.clone().requires_grad_() if i < 2 else t for i, t in enumerate(a)]
        gx, gw = torch.autograd.grad(model(*leaves), leaves[:2], grad)
        leaves_e = [t.clone().requires_grad_() if i < 2 else t for i, t in enumerate(a)]
        ex, ew = torch.autograd.grad(model.tail_math(F.linear(*leaves_e[:3]), *rest), leaves_e[:2], grad)
    print(f"  chain dx: ours {_err(gx, dx64)}   eager {_err(ex, dx64)}")
    print(f"  chain dw: ours {_err(gw, dw64)}   eager {_err(ew, dw64)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
