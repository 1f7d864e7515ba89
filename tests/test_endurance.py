"""The drop-ins over many calls, on a GPU: the same input gives the same bits every time, and nothing
accumulates on the GPU (about a minute on an H100; `pytest -m endurance`).

- 1,000 forward calls of each solution at the small scale, the batch cycling through 1, 37, 300 and the
  problem's own (37 and 300 are multiples of no tile), TF32 off and on: each output bitwise equal to
  the first of its batch and tier.
- 1,000 training steps (forward, backward, an SGD step) of each solution on two replicas built and fed
  alike: their outputs and parameters bitwise equal at every checkpoint (a backward that is not
  deterministic shows here).
- 100 ModelNews of each problem built, called (every other one frozen) and deleted.
- At KernelBench's full sizes (marked `large` too): 1,000 forward calls of each solution, the batch
  cycling through 1, 37 and the problem's; 100 training steps of problem 94 on two replicas.

Memory is torch.cuda.memory_allocated() after gc.collect() and a synchronize: the same at every
checkpoint of a loop, and back at its baseline once the loop's models are gone. Every test warms up
first (kernels loaded, cuBLAS's workspace made where a path uses it), then takes its baseline.
"""
from __future__ import annotations

import gc

import pytest
import torch

from solutions import solution
from utils import precision
from utils.problems import Dims, all_problems, get_problem

pytestmark = [pytest.mark.gpu, pytest.mark.endurance]

PIDS = [p.id for p in all_problems()]
CALLS = 1000
CHECKPOINTS = (249, 499, 749, 999)  # after every (batch, tier) has had its first call
LR = 1e-5  # small steps on a unit-norm gradient: the weights move every step and stay finite


def settled() -> int:
    """The GPU memory tensors hold once everything freed is collected and the GPU is idle."""
    gc.collect()
    torch.cuda.synchronize()
    return torch.cuda.memory_allocated()


def flat_and_back(memory: list[int], baseline: int, loop: str) -> None:
    """The memory at a loop's checkpoints did not grow, and with the loop's models deleted it is back."""
    assert len(set(memory)) == 1, f"GPU memory grew over {loop}: {memory} bytes at its checkpoints"
    assert settled() == baseline, f"after {loop}, the models deleted, GPU memory is not back at its baseline"


def batches(pid: int, scale: str) -> tuple[int, ...]:
    own = get_problem(pid).dims(scale).batch
    return (1, 37, 300, own) if scale == "small" else (1, 37, own)


def model(pid: int, scale: str, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return solution(pid).ModelNew(*get_problem(pid).init_inputs(scale)).cuda()


def inputs(pid: int, scale: str, sizes) -> dict[int, torch.Tensor]:
    g = torch.Generator().manual_seed(pid)
    return {b: torch.rand(b, get_problem(pid).dims(scale).in_features, generator=g).cuda() for b in sizes}


def gradients(pid: int, scale: str, sizes) -> dict[int, torch.Tensor]:
    """A unit-norm gradient of the output per batch size (75's output is (1, C, N, 1))."""
    p, g = get_problem(pid), torch.Generator().manual_seed(pid + 1)
    out = {}
    for b in sizes:
        grad = torch.randn(p.output_shape(at_batch(pid, scale, b)), generator=g)
        out[b] = (grad / grad.norm()).cuda()
    return out


def at_batch(pid: int, scale: str, batch: int) -> Dims:
    d = get_problem(pid).dims(scale)
    return Dims(batch, d.in_features, d.out_features, d.groups)


def warm_up(pid: int, scale: str) -> None:
    """One forward at each tier, frozen too, and a training step: whatever a first call makes once."""
    m = model(pid, scale)
    x = inputs(pid, scale, [37])[37]
    for tf32 in (False, True):
        with precision.tf32(tf32), torch.no_grad():
            m(x)
    m.freeze()(x)
    m.unfreeze()
    step(m, torch.optim.SGD(m.parameters(), lr=LR), x, gradients(pid, scale, [37])[37])


def forward_loop(pid: int, scale: str, tiers=(False, True)) -> None:
    sizes = batches(pid, scale)
    warm_up(pid, scale)
    xs = inputs(pid, scale, sizes)
    baseline = settled()
    m = model(pid, scale)
    first, memory = {}, []
    combos = [(b, t) for t in tiers for b in sizes]
    with torch.no_grad():
        for i in range(CALLS):
            b, tf32 = combos[i % len(combos)]
            with precision.tf32(tf32):
                out = m(xs[b])
            if (b, tf32) not in first:
                first[b, tf32] = out
            else:
                assert torch.equal(out, first[b, tf32]), f"call {i} (batch {b}, tf32 {tf32}) differs from the first"
            del out
            if i in CHECKPOINTS:
                memory.append(settled())
    del m, first
    flat_and_back(memory, baseline, "the calls")


def training_loop(pid: int, scale: str, steps: int) -> None:
    sizes = batches(pid, scale)
    warm_up(pid, scale)
    xs, grads = inputs(pid, scale, sizes), gradients(pid, scale, sizes)
    baseline = settled()
    replicas = [model(pid, scale), model(pid, scale)]
    optimizers = [torch.optim.SGD(r.parameters(), lr=LR) for r in replicas]
    checkpoints = {steps * k // 4 - 1 for k in (1, 2, 3, 4)}
    memory = []
    for i in range(steps):
        b = sizes[i % len(sizes)]
        outs = [step(r, opt, xs[b], grads[b]) for r, opt in zip(replicas, optimizers)]
        if i in checkpoints:
            replicas_agree(replicas, outs, f"step {i} (batch {b})")
        del outs
        if i in checkpoints:
            memory.append(settled())
    del replicas, optimizers
    flat_and_back(memory, baseline, "the steps")


def replicas_agree(replicas, outs, where: str) -> None:
    """The replicas' outputs and parameters are bitwise equal and finite. (A function of its own: a loop
    variable left bound to a parameter would keep it, and its gradient, alive past the replicas.)"""
    assert torch.equal(*outs), f"{where}: the replicas' outputs differ"
    for (name, p), q in zip(replicas[0].named_parameters(), replicas[1].parameters()):
        assert torch.isfinite(p).all(), f"{where}: {name} is no longer finite"
        assert torch.equal(p, q), f"{where}: the replicas' {name} differ"


def step(m: torch.nn.Module, optimizer, x: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """One training step: forward, backward, the optimizer's step; the output, detached."""
    optimizer.zero_grad(set_to_none=True)
    out = m(x)
    out.backward(grad)
    optimizer.step()
    return out.detach()


@pytest.mark.parametrize("pid", PIDS)
def test_forward_calls_repeat_bitwise_and_leave_nothing(pid):
    forward_loop(pid, "small")


@pytest.mark.parametrize("pid", PIDS)
def test_training_steps_are_deterministic_and_leave_nothing(pid):
    training_loop(pid, "small", CALLS)


@pytest.mark.parametrize("pid", PIDS)
def test_a_hundred_models_come_and_go(pid):
    warm_up(pid, "small")
    x = inputs(pid, "small", [37])[37]
    baseline = settled()
    for i in range(100):
        m = model(pid, "small", seed=i)
        if i % 2:
            m.freeze()  # its kept small parts go with it
        with torch.no_grad():
            out = m(x)
        assert out.shape == get_problem(pid).output_shape(at_batch(pid, "small", 37))
        del m, out
    assert settled() == baseline, "100 models built and deleted: GPU memory is not back at its baseline"


@pytest.mark.large
@pytest.mark.parametrize("pid", PIDS)
def test_full_size_forward_calls_repeat_bitwise_and_leave_nothing(pid):
    forward_loop(pid, "full")


@pytest.mark.large
def test_full_size_training_steps_are_deterministic_and_leave_nothing():
    training_loop(94, "full", 100)
