"""The drop-ins as models in bf16 and fp16, for compute-sanitizer: the fused kernels (K % 8 == 0) forward and
backward (the tail's 16-bit backward on its team path), the unfused path (K % 8 != 0), groups of 23 channels in
bf16 (the tail backward's general path), and a float32 model under autocast, at a batch no tile divides (and at
inference, where w stays float32, at 7, 131, 300, 600 and 2,100 rows: the narrow TF32 tiles, the mixed-input GEMM
from 257 rows, and w converted beyond 2,048). A
model in bf16 at KernelBench's channels and 200 rows takes the 16-bit narrow tiles 128 wide (64 wide at 131 rows
and the small channels); --models-only leaves the float32 model under autocast out:

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python experiments/bf16/sanitize_dropins16.py

Each output is also checked against float64 at the dtype's tier here, so that a run the tool finds clean is a
correct run."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.test_solutions_16bit import _pair, _x  # noqa: E402
from utils import check  # noqa: E402
from utils.problems import Dims, get_problem  # noqa: E402

INFERENCE_ONLY = "--autocast-inference-only" in sys.argv  # the route at inference under autocast alone
MODELS_ONLY = "--models-only" in sys.argv  # the models in bf16 and fp16 alone

for pid in (94, 75, 37, 62):
    for dtype in () if INFERENCE_ONLY else (torch.bfloat16, torch.float16):
        # "odd": groups of 23 channels, so the 16-bit tail backward takes its general path
        full = get_problem(pid).dims("full")
        wide_c = Dims(200, 256, full.out_features, full.groups)  # the 16-bit narrow tiles 128 wide (C = 8192)
        for case in ("fused", "K % 8 != 0") + (("odd", wide_c) if dtype == torch.bfloat16 else ()):
            ref, new = _pair(pid, case, dtype, "cuda")
            x = _x(ref, 200 if case is wide_c else 131, dtype, "cuda")
            out = new(x.clone().requires_grad_())
            # a gradient of ones would sum to C in 75's row minimum and overflow fp16's dw (as eager's would)
            out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(2)).to(out))
            want = ref.double()(x.double())
            tier = check.TIERS[check.TIER_OF_DTYPE[dtype]]
            assert out.dtype == dtype and torch.allclose(out.double(), want, atol=tier.atol, rtol=tier.rtol), (pid, case)
            assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in new.parameters()), (pid, case)
            print(f"{pid} {str(dtype)[6:]} {'C = %d, 200 rows' % full.out_features if case is wide_c else case}: ok",
                  flush=True)
    if MODELS_ONLY:
        continue
    ref, new = _pair(pid, "fused", torch.float32, "cuda")  # a float32 model under autocast: the mixed kernels
    if not INFERENCE_ONLY:
        x = _x(ref, 131, torch.float32, "cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = new(x.clone().requires_grad_())
            out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(2)).to(out))
        want = ref.double()(x.double())
        tier = check.autocast_tier(torch.bfloat16)
        assert out.dtype == torch.float32 and torch.allclose(out.double(), want, atol=tier.atol, rtol=tier.rtol), pid
        print(f"{pid} float32 under autocast(bfloat16): ok", flush=True)
    for rows in (7, 131, 300, 600, 2100):  # at inference w stays float32 up to 2,048 rows (the routes: above)
        x = _x(ref, rows, torch.float32, "cuda")
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
            out = new(x)
        want = ref.double()(x.double())
        tier = check.autocast_tier(torch.float16)
        assert out.dtype == torch.float32 and torch.allclose(out.double(), want, atol=tier.atol, rtol=tier.rtol), pid
        print(f"{pid} float32 under autocast(float16) at inference, {rows} rows: ok", flush=True)
torch.cuda.synchronize()
