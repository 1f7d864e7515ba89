"""How well the reference's own gradients are determined at full scale, against the solutions' strict GEMM.

    python experiments/tensor_cores/gradient_conditioning.py --out DIR

For each problem at KernelBench's full size, with the harness's randomised γ/β and biases, the
gradients of the input and every parameter from:
  ref32   the reference Model in fp32 (cuBLAS SGEMM), what check_model's `gradients` compares against;
  new     the solution's ModelNew at the strict tier (rung 10's 3xTF32 GEMM, then the fused tail);
  cr32    the reference with its GEMM computed in float64 and rounded to fp32: a GEMM as accurate as
          fp32 can be, only rounded differently from cuBLAS's;
  ref64   the reference in float64.
Per tensor: elements outside allclose(1e-4, 1e-4) and the norm-wise relative error, for each pair.
The question: is an elementwise comparison of gradients at the strict tier well posed, i.e. does a
second, equally valid fp32 forward (cr32) pass it against ref32?
"""
import argparse
import copy
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from utils import check, precision  # noqa: E402
from utils.chapters.session import solution_pair  # noqa: E402
from utils.problems import get_problem  # noqa: E402


def grads(model, x, grad_out):
    x = x.clone().requires_grad_()
    out = model(x)
    leaves = {"input": x} | dict(model.named_parameters())
    return dict(zip(leaves, torch.autograd.grad(out, list(leaves.values()), grad_out.to(out.dtype))))


def correctly_rounded(ref):
    model = copy.deepcopy(ref)
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            m.forward = lambda x, m=m: F.linear(x.double(), m.weight.double(), m.bias.double()).float()
    return model


def compare(a, b):
    bad = ~torch.isclose(a.double(), b.double(), atol=1e-4, rtol=1e-4)
    return {"mismatched": int(bad.sum()), "n": a.numel(), "max_abs": float((a.double() - b.double()).abs().max()),
            "rel_norm": float((a.double() - b.double()).norm() / b.double().norm())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seeds", type=int, default=2)
    args = ap.parse_args()
    rows = []
    with precision.tf32(False):
        for pid in (94, 75, 37, 62):
            for seed in range(args.seeds):
                ref, new = solution_pair(pid, "full", device="cuda")
                check._randomise(ref, seed)
                new.load_state_dict(ref.state_dict())
                g = torch.Generator().manual_seed(seed + 7)
                x = get_problem(pid).get_inputs("full", generator=g)[0].cuda()
                with torch.no_grad():
                    shape = ref(x).shape
                grad_out = torch.randn(shape, generator=g).cuda()
                r32, n32 = grads(ref, x, grad_out), grads(new, x, grad_out)
                c32 = grads(correctly_rounded(ref), x, grad_out)
                r64 = grads(copy.deepcopy(ref).double(), x.double(), grad_out.double())
                for k in r32:
                    row = {"pid": pid, "seed": seed, "tensor": k,
                           "new_vs_ref32": compare(n32[k], r32[k]), "cr32_vs_ref32": compare(c32[k], r32[k]),
                           "new_vs_ref64": compare(n32[k], r64[k]), "ref32_vs_ref64": compare(r32[k], r64[k]),
                           "cr32_vs_ref64": compare(c32[k], r64[k])}
                    rows.append(row)
                    print(f"{pid} s{seed} {k:20s} " + "  ".join(
                        f"{name}: {row[name]['mismatched']:>6d} bad, norm {row[name]['rel_norm']:.1e}"
                        for name in ("new_vs_ref32", "cr32_vs_ref32", "new_vs_ref64", "ref32_vs_ref64")), flush=True)
                del ref, new, r32, n32, c32, r64
                torch.cuda.empty_cache()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gradient_conditioning.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
