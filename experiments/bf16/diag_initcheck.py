"""Where compute-sanitizer's initcheck finds a copy of uninitialized memory in a bf16 model's backward (94, fused,
131 rows): MARK lines, each after a synchronize, order the tool's reports among the steps."""
import sys

import torch

sys.path.insert(0, ".")
from tests.test_solutions_16bit import _pair, _x  # noqa: E402


def mark(what):
    torch.cuda.synchronize()
    print("MARK", what, flush=True)


ref, new = _pair(94, "fused", torch.bfloat16, "cuda")
x = _x(ref, 131, torch.bfloat16, "cuda")
xr = x.clone().requires_grad_()
out = new(xr)
g = torch.randn(out.shape, generator=torch.Generator().manual_seed(2)).to(out)
mark("forward done")


def hook(name):
    def run(grad):
        mark(f"gradient of {name} arrives {tuple(grad.shape)} {grad.dtype} contiguous={grad.is_contiguous()}")
    return run


xr.register_hook(hook("x"))
for name, p in new.named_parameters():
    p.register_hook(hook(name))
out.backward(g)
mark("backward done")
