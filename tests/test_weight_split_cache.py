"""Rung 10's `linear` keeps the 3xTF32 split of its weight between calls (gemm_10_3xtf32.cu,
WeightSplits). A kept split is only right while the weight is the same tensor with the same
values, so every way a weight can change must show up in the next call's result: an in-place
write, an optimizer step, `load_state_dict`, `.data = ...`, a freed weight whose memory is reused
by another, a view. Each test compares the call's output with a fresh computation of the same
product (`gemm`, which splits both operands on every call, plus the bias: the epilogue adds the
bias to the same sum, so the two are bitwise equal) and checks the cache's own counters."""
import pytest
import torch

from utils import build, ops, precision

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def rung10():
    return build.load_kernel("gemm_10_3xtf32")


@pytest.fixture(autouse=True)
def sm90_strict(cuda, rung10):
    if torch.cuda.get_device_capability(cuda) != (9, 0):
        pytest.skip("rung 10 is sm_90 only; elsewhere linear is cuBLAS's addmm and keeps nothing")
    rung10.weight_split_cache_clear()
    with precision.tf32(False):
        yield


def stats(rung10) -> dict:
    hits, misses, entries = rung10.weight_split_cache_stats().tolist()
    return {"hits": hits, "misses": misses, "entries": entries}


def operands(cuda, M=67, N=130, K=260, seed=0):
    g = torch.Generator(device=cuda).manual_seed(seed)
    x = torch.rand(M, K, device=cuda, generator=g)
    w = (torch.rand(N, K, device=cuda, generator=g) * 2 - 1) / K ** 0.5
    b = torch.randn(N, device=cuda, generator=g)
    return x, w, b


def fresh(rung10, x, w, b):
    """The same product with nothing kept: gemm splits both operands on this call."""
    return rung10.gemm(x, w.contiguous()) + b


def test_the_split_is_kept_across_calls(rung10, cuda):
    x, w, b = operands(cuda)
    first = rung10.linear(x, w, b)
    again = rung10.linear(x, w, b)
    assert torch.equal(first, fresh(rung10, x, w, b)) and torch.equal(again, first)
    assert stats(rung10) == {"hits": 1, "misses": 1, "entries": 1}


def test_an_in_place_write_is_seen(rung10, cuda):
    x, w, b = operands(cuda)
    rung10.linear(x, w, b)
    with torch.no_grad():
        w.mul_(-2.0)  # bumps w's version
    assert torch.equal(rung10.linear(x, w, b), fresh(rung10, x, w, b))
    assert stats(rung10) == {"hits": 0, "misses": 2, "entries": 1}  # the stale split was dropped


def test_an_optimizer_step_is_seen(rung10, cuda):
    x, _, b = operands(cuda)
    lin = torch.nn.Linear(x.shape[1], b.shape[0], device=cuda)
    opt = torch.optim.SGD(lin.parameters(), lr=0.5)
    out = ops.linear(x, lin.weight, lin.bias)
    out.square().sum().backward()
    opt.step()
    with torch.no_grad():
        after = ops.linear(x, lin.weight, lin.bias)
        assert torch.equal(after, fresh(rung10, x, lin.weight, lin.bias))
        assert not torch.equal(after, out)


def test_load_state_dict_is_seen(rung10, cuda):
    x, w, b = operands(cuda)
    lin = torch.nn.Linear(x.shape[1], b.shape[0], device=cuda)
    with torch.no_grad():
        ops.linear(x, lin.weight, lin.bias)
        lin.load_state_dict({"weight": w, "bias": b})  # copy_ into the same parameter
        assert torch.equal(ops.linear(x, lin.weight, lin.bias), fresh(rung10, x, w, b))


def test_assigning_data_is_seen(rung10, cuda):
    x, w, b = operands(cuda)
    lin = torch.nn.Linear(x.shape[1], b.shape[0], device=cuda)
    with torch.no_grad():
        ops.linear(x, lin.weight, lin.bias)
        lin.weight.data = w.clone()  # new storage under the same parameter
        assert torch.equal(ops.linear(x, lin.weight, b), fresh(rung10, x, w, b))


def test_a_freed_weight_does_not_answer_for_its_successor(rung10, cuda):
    """The caching allocator hands the same address to the next tensor of that size, whose version
    counter also starts at 0: only the weak reference to the old tensor tells them apart."""
    x, w, b = operands(cuda)
    first = w.clone()
    address = first.data_ptr()
    rung10.linear(x, first, b)
    del first
    second = torch.empty_like(w)
    second.copy_(-w)
    if second.data_ptr() != address:
        pytest.skip("the allocator did not reuse the freed weight's memory this time")
    assert torch.equal(rung10.linear(x, second, b), fresh(rung10, x, second, b))
    assert stats(rung10)["misses"] == 2


def test_views_and_inference_tensors_are_not_kept(rung10, cuda):
    x, w, b = operands(cuda)
    view = torch.cat([w, w], dim=1)[:, : w.shape[1]]  # w's values, rows 2K apart
    assert not view.is_contiguous()
    assert torch.equal(rung10.linear(x, view, b), fresh(rung10, x, w, b))
    with torch.inference_mode():
        inf = w.clone()
        assert torch.equal(rung10.linear(x, inf, b), fresh(rung10, x, w, b))
    assert stats(rung10)["entries"] == 0


def test_a_split_made_on_one_stream_is_safe_on_another(rung10, cuda):
    x, w, b = operands(cuda, M=512, N=1024, K=2048)
    expected = fresh(rung10, x, w, b)
    side = torch.cuda.Stream(cuda)
    side.wait_stream(torch.cuda.current_stream(cuda))
    with torch.cuda.stream(side):
        rung10.linear(x, w, b)  # the split is made on `side`
    out = rung10.linear(x, w, b)  # kept split, used on the default stream
    assert torch.equal(out, expected)
    assert stats(rung10)["hits"] == 1


def test_tf32_allowed_keeps_nothing(rung10, cuda):
    x, w, b = operands(cuda)
    with precision.tf32(True):
        assert torch.equal(rung10.linear(x, w, b), torch.addmm(b, x, w.t()))
    assert stats(rung10) == {"hits": 0, "misses": 0, "entries": 0}
