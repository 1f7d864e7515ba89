"""Every write to a drop-in's parameters is seen (the drop-in contract), and freeze() keeps what it says.

By default a drop-in keeps nothing derived from its weights between calls (utils/freezing.py,
kernels/common/tf32_operands.cuh), so any write, whatever API made it, shows in the next output:
`.data` writes (the `.data` tensor has a version counter of its own), in-place writes through views
of `.data`, `torch.no_grad()` writes, `.data = new`, load_state_dict, nn.init, optimizer steps, an
EMA written through `.data`. Each GPU test writes the GEMM's weight (the one a cache would keep) and
the other parameters the same way in the reference and in the drop-in, and compares the outputs.

freeze() is the opt-in: the weight's 3xTF32 small parts kept between calls, made again when a
counter sees a write (an unfused optimizer step, `.to()`, `.data = new`), not when none does (`.data`
writes, fused optimizer steps), until freeze() is called again. On the CPU (CI): the small parts bit for bit (the reference of the
kernel's arithmetic), the bookkeeping of freeze(), unfreeze() and state_dict.
"""
import pytest
import torch
from torch import nn

from solutions import solution
from utils import ops, precision
from utils.chapters.session import solution_pair
from utils.problems import all_problems, get_problem

PIDS = [p.id for p in all_problems()]


def _gemm(model: nn.Module) -> nn.Linear:
    (linear,) = [m for m in model.modules() if isinstance(m, nn.Linear)]
    return linear


def _fresh(like: torch.Tensor, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return ((torch.rand(like.shape, generator=g) * 2 - 1) * like.abs().max().clamp(min=0.1).item()).to(like.device)


def _sgd_step(model: nn.Module, x: torch.Tensor, seed: int) -> None:
    out = model(x)
    weights = torch.rand(out.shape, generator=torch.Generator().manual_seed(seed)).to(out.device)
    (out * weights).sum().backward()
    torch.optim.SGD(model.parameters(), lr=0.05).step()
    model.zero_grad(set_to_none=True)


# name -> write(model, param, seed): the same write is made in the reference and in the drop-in
WRITES = {
    "data.copy_": lambda m, p, s: p.data.copy_(_fresh(p, s)),
    "data.mul_": lambda m, p, s: p.data.mul_(-1),
    "slice of data.zero_": lambda m, p, s: p.data[:8].zero_(),
    "strided view of data.mul_": lambda m, p, s: p.data.view(-1)[::7].mul_(1.5),
    "EMA through data": lambda m, p, s: p.data.mul_(0.9).add_(0.1 * _fresh(p, s)),
    "no_grad copy_": lambda m, p, s: torch.no_grad()(p.copy_)(_fresh(p, s)),
    "data = new": lambda m, p, s: setattr(p, "data", _fresh(p, s)),
    "nn.init": lambda m, p, s: nn.init.normal_(p, std=0.05, generator=torch.Generator(p.device).manual_seed(s)),
}


def test_the_small_parts_are_the_kernels_bits_on_the_cpu():
    w = torch.randn(64, 33) * torch.logspace(-20, 20, 33)
    w[0, :4] = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0])
    small = ops.tf32_residual(w)
    big = (w.view(torch.int32) & -8192).view(torch.float32)  # what the tensor cores read of w
    assert (small.view(torch.int32) & 8191).eq(0).all()  # a TF32 value itself
    finite = torch.isfinite(w)
    # inf and NaN: the stand-in ±2^-126, of w's sign (common/tf32_operands.cuh's residual); 0: 0
    assert torch.equal(small[~finite], torch.copysign(torch.full_like(small[~finite], 2.0**-126), w[~finite]))
    assert small[0, 3].item() == 0.0
    err = ((big + small).double() - w.double()).abs()[finite]
    assert (err <= 2.0 ** -21 * w.double().abs()[finite]).all()  # the split's bound (tf32_operands.cuh)


@pytest.mark.parametrize("pid", PIDS)
def test_freeze_keeps_the_small_parts_out_of_the_state_dict(pid):
    ref, new = solution_pair(pid)
    assert not new.frozen and new.weight_residual is None
    new.freeze()
    w = _gemm(new).weight
    assert new.frozen and torch.equal(new.weight_residual, ops.tf32_residual(w.detach()))
    assert set(new.state_dict()) == set(ref.state_dict())
    new.load_state_dict(ref.state_dict())  # strict
    new.unfreeze()
    assert not new.frozen and new.weight_residual is None


@pytest.mark.parametrize("pid", PIDS)
def test_a_frozen_model_remakes_its_small_parts_after_a_write_a_counter_sees(pid):
    ref, new = solution_pair(pid)
    new.freeze()
    w = _gemm(new).weight
    _sgd_step(new.train(), get_problem(pid).get_inputs("small")[0], seed=1)
    assert torch.equal(new.weight_residual, ops.tf32_residual(w.detach()))
    w.data = _fresh(w, 2)
    assert torch.equal(new.weight_residual, ops.tf32_residual(w.detach()))
    w.data.mul_(-1)  # no counter sees it: the documented blind spot of a frozen model
    assert not torch.equal(new.weight_residual, ops.tf32_residual(w.detach()))
    new.freeze()
    assert torch.equal(new.weight_residual, ops.tf32_residual(w.detach()))


# --- on the GPU: the outputs after each write ------------------------------------------------------


def _pair(pid, scale, cuda):
    ref, new = solution_pair(pid, scale, cuda)
    return ref, new, get_problem(pid).get_inputs(scale, generator=torch.Generator().manual_seed(7))[0].to(cuda)


def _agree(ref, new, x, tol, what):
    with torch.no_grad():
        a, b = ref(x), new(x)
    assert torch.allclose(a, b, atol=tol, rtol=tol), f"{what}: max diff {(a - b).abs().max():.2e}"


TIERS = {"strict": (False, 1e-4), "tf32": (True, 1e-2)}
# The most rows of x at which the strict GEMM makes w's small parts itself, reading the weight as it is (the
# small-batch schedule up to 64, the narrow tiles up to 256: kernels/common/gemm_dispatch.cuh, kNarrowMaxM).
MAKES_ITS_OWN_SPLIT = 256


@pytest.mark.gpu
@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("write", WRITES)
@pytest.mark.parametrize("pid", PIDS)
def test_every_write_is_seen(pid, write, tier, cuda):
    allow_tf32, tol = TIERS[tier]
    with precision.tf32(allow_tf32):
        ref, new, x = _pair(pid, "small", cuda)
        _agree(ref, new, x, tol, "before the write")
        for seed, (p_ref, p_new) in enumerate(zip(ref.parameters(), new.parameters())):
            WRITES[write](ref, p_ref, seed)
            WRITES[write](new, p_new, seed)
        _agree(ref, new, x, tol, f"after {write}")


@pytest.mark.gpu
@pytest.mark.parametrize("pid", PIDS)
def test_load_state_dict_and_optimizer_steps_are_seen(pid, cuda):
    with precision.tf32(False):
        ref, new, x = _pair(pid, "odd", cuda)
        other = get_problem(pid).make_model("odd", seed=5).to(cuda)
        ref.load_state_dict(other.state_dict())
        new.load_state_dict(other.state_dict())
        _agree(ref, new, x, 1e-4, "after load_state_dict")
        for step in range(3):
            _sgd_step(ref.train(), x, seed=step)
            _sgd_step(new.train(), x, seed=step)
            _agree(ref, new, x, 1e-4, f"after optimizer step {step + 1}")


@pytest.mark.gpu
@pytest.mark.parametrize("pid", PIDS)
def test_a_frozen_model_is_the_default_model_until_a_write_no_counter_sees(pid, cuda):
    with precision.tf32(False):
        ref, new, x = _pair(pid, "small", cuda)
        with torch.no_grad():
            default = new(x)
            new.freeze()
            assert torch.equal(new(x), default)  # the same small parts, made once instead of per call
            w = _gemm(new).weight
            w.data.mul_(-1)
            _gemm(ref).weight.data.mul_(-1)
            # At 256 rows of x or fewer the GEMM reads the weight as it is (those schedules keep nothing);
            # beyond, it reads the kept parts: the documented blind spot, the old weight's.
            _agree(ref, new, x[:MAKES_ITS_OWN_SPLIT], 1e-4, "frozen, at a small batch, after a write no counter sees")
            rows = MAKES_ITS_OWN_SPLIT + 1
            big = x.repeat(-(-rows // x.shape[0]), 1)[:rows] if x.shape[0] < rows else x
            stale = new(big)
            new.freeze()
            _agree(ref, new, big, 1e-4, "after freeze() again")
            assert not torch.allclose(stale, new(big), atol=1e-4, rtol=1e-4)
