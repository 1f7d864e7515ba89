"""The schedules for small and mid-size batches (kernels/common/gemm_dispatch.cuh): `linear` at up to 64
rows of x (the small-batch schedule, kernels/common/gemm_small_batch.cuh) and at 65-256 rows (the strict
tier's narrow tiles, w's small parts made in the kernel, 64 or 128 columns wide), at both tiers, and the
whole models, which run as `linear` and their tail there.

Every element against float64 at the tier's tolerance, on both sides of the M = 64 and M = 256 boundaries,
at shapes that are no multiple of the schedules' boxes (16 CW rows of w, 32 floats of k, 8 rows of x; 128 x
64 and 128 x 128 tiles: N = 8200 at 200 rows takes the 128-wide one on a 132-SM GPU), on views, and with
inf and NaN in w and x where fp32 has them. The drop-ins' forward and backward at batches 1, 7, 64, 129,
200 and 257 against the reference model in float64. (The harness at scales small (batch 64) and odd (37), in
test_solutions.py, runs the schedule too.)
"""
import copy

import pytest
import torch
import torch.nn.functional as F

from solutions import solution
from utils import check, ops, precision
from utils.problems import all_problems, get_problem

pytestmark = pytest.mark.gpu

TIERS = {"strict": False, "tf32": True}  # tier -> TF32 allowed
MS = [1, 7, 64, 65, 129, 200, 256, 257, 1000]


def _rand(*shape, seed: int, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale).cuda()


def _assert_close(out: torch.Tensor, ref64: torch.Tensor, tier: str, what: str) -> None:
    t = check.TIERS[tier]
    err = (out.double() - ref64).abs() - (t.atol + t.rtol * ref64.abs())
    assert out.shape == ref64.shape and bool((err <= 0).all()), (
        f"{what}: {int((err > 0).sum())} of {out.numel()} elements outside the {tier} tier")


def _linear(x, w, b, tier):
    with precision.tf32(TIERS[tier]):
        return ops.linear(x, w, b)


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("M", MS)
@pytest.mark.parametrize("N, K", [(1000, 1004), (77, 36), (4096, 260), (8200, 132)])
def test_linear_matches_float64_on_both_sides_of_the_boundary(M, N, K, tier):
    x, w, b = _rand(M, K, seed=1), _rand(N, K, seed=2, scale=K**-0.5), _rand(N, seed=3)
    _assert_close(_linear(x, w, b, tier), x.double() @ w.double().T + b.double(), tier, f"M={M} N={N} K={K}")


@pytest.mark.large
@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("M", [1, 64, 128, 256])
def test_linear_at_the_problems_width(M, tier):
    x, w, b = _rand(M, 8192, seed=4), _rand(8192, 8192, seed=5, scale=8192**-0.5), _rand(8192, seed=6)
    _assert_close(_linear(x, w, b, tier), x.double() @ w.double().T + b.double(), tier, f"M={M} N=K=8192")


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("M", [7, 100])
def test_linear_takes_views_and_a_kept_residual(M, tier):
    """A column slice of x (its rows 16-byte misaligned), a transposed x, a row slice of w; and the w_residual a
    drop-in's freeze() hands over, which these schedules do not need but still check."""
    base, w, b = _rand(M, 261, seed=7), _rand(300, 260, seed=8, scale=0.06), _rand(300, seed=9)
    for x in (base[:, 1:], _rand(260, M, seed=10).T):
        _assert_close(_linear(x, w, b, tier), x.double() @ w.double().T + b.double(), tier, "x view")
    w_rows = _rand(301, 260, seed=11, scale=0.06)[1:]
    x = base[:, 1:].contiguous()
    _assert_close(_linear(x, w_rows, b, tier), x.double() @ w_rows.double().T + b.double(), tier, "w view")
    with precision.tf32(TIERS[tier]):
        kept = ops.linear(x, w, b, ops.tf32_residual(w))
    _assert_close(kept, x.double() @ w.double().T + b.double(), tier, "kept residual")
    with pytest.raises(RuntimeError, match="w_residual"), precision.tf32(TIERS[tier]):
        ops.linear(x, w, b, torch.zeros(3, 3, device="cuda"))


@pytest.mark.parametrize("M", [7, 100])
def test_linear_puts_inf_and_nan_where_fp32_does(M):
    x, w, b = _rand(M, 260, seed=12), _rand(300, 260, seed=13, scale=0.06), _rand(300, seed=14)
    w[5, 3], w[9, 200], x[2, 17] = float("inf"), float("nan"), float("-inf")
    with precision.tf32(False):
        want = F.linear(x, w, b)
    got = _linear(x, w, b, "strict")
    assert torch.equal(got.isinf(), want.isinf()) and torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got[got.isinf()], want[want.isinf()])
    finite = want.isfinite()
    assert torch.allclose(got[finite], want[finite], atol=1e-4, rtol=1e-4)


def _grads(model, x, grad, tf32: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The model's output at x and the gradients of x and of its parameters for `grad`."""
    x = x.clone().requires_grad_()
    model.zero_grad(set_to_none=True)
    with precision.tf32(tf32):
        out = model(x)
        out.backward(grad.to(out.dtype))
    return out.detach(), {"x": x.grad, **{name: p.grad.clone() for name, p in model.named_parameters()}}


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("M", [1, 7, 64, 129, 200, 257])
@pytest.mark.parametrize("pid", [p.id for p in all_problems()])
def test_drop_ins_forward_and_backward_at_small_batches(pid, M, tier):
    """Against the reference model in float64, the gradients judged as the harness judges them
    (check.judge_gradients: elementwise where well posed, norm-wise within the tier's band across kinks)."""
    p = get_problem(pid)
    ref = p.make_model("small", seed=0).cuda()
    new = solution(pid).ModelNew(*p.init_inputs("small")).cuda()
    new.load_state_dict(ref.state_dict())
    x = _rand(M, p.dims("small").in_features, seed=15)
    grad = _rand(*ref(x).shape, seed=16)
    out, got = _grads(new, x, grad, TIERS[tier])
    _, ref32 = _grads(ref, x, grad, False)
    out64, ref64 = _grads(copy.deepcopy(ref).double(), x.double(), grad, False)
    _assert_close(out, out64, tier, f"problem {pid} at batch {M}")
    tolerance = check.TIERS[tier]
    ref64_model = copy.deepcopy(ref).double()

    def moved64():  # as the harness: float64's gradients with x moved by the tier's rounding, at 8 draws
        draws = []
        for i in range(8):
            noise = 2 * torch.rand(x.shape, generator=torch.Generator().manual_seed(100 + i), dtype=torch.float64) - 1
            draws.append(_grads(ref64_model, x.double() * (1 + tolerance.noise * noise.cuda()), grad, False)[1])
        return draws

    verdict, detail = check.judge_gradients(got, ref32, lambda: ref64, tolerance, moved64)
    assert verdict == "pass", f"problem {pid} at batch {M}: {detail}"
