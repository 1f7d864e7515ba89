"""solutions/: the four drop-in ModelNew modules hold the drop-in contract
(docs/ARCHITECTURE.md, "The drop-in contract").

On the CPU (CI): construction and state_dict parity with the reference, the harness on the CPU
path (the reference math), the edge cases (batch 0, 1 and odd, strided and transposed inputs,
float64 as the reference math; bf16 and fp16 in tests/test_solutions_16bit.py) and torch.compile(fullgraph=True) tracing through the registered ops. On the GPU:
the harness at both tiers, at small, odd and full scale, on 5 seeds, with random γ/β and biases;
the edge cases on CUDA; torch.compile with inductor; moving between devices.
"""
import pytest
import torch

from solutions import solution
from utils import check, precision
from utils.chapters.session import solution_pair
from utils.problems import all_problems, get_problem

PIDS = [p.id for p in all_problems()]
SEEDS = range(5)


def _x(pid: int, batch: int, device="cpu", seed=1) -> torch.Tensor:
    return torch.rand(batch, get_problem(pid).dims("small").in_features,
                      generator=torch.Generator().manual_seed(seed)).to(device)


def _close(a, b, tol=1e-4) -> bool:
    return a.shape == b.shape and torch.allclose(a, b, atol=tol, rtol=tol)


@pytest.fixture(autouse=True)
def one_cpu_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the small problems gain nothing from threads (see test_check.py)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("pid", PIDS)
def test_the_module_is_a_drop_in_with_the_references_weights(pid):
    module = solution(pid)
    p = get_problem(pid)
    assert module.get_inputs is p.module.get_inputs and module.get_init_inputs is p.module.get_init_inputs
    assert issubclass(module.ModelNew, p.Model)  # the same __init__, names, shapes and creation order
    ref, new = solution_pair(pid)
    assert list(ref.state_dict()) == list(new.state_dict())
    assert all(torch.equal(ref.state_dict()[k], new.state_dict()[k]) for k in ref.state_dict())
    new.load_state_dict(p.make_model("small", seed=7).state_dict(), strict=True)
    assert set(module.ModelNew.allow_torch_ops) == {"aten::addmm", "aten::mm"}  # cuBLAS, named on purpose
    assert "What runs where" in module.__doc__ and "results/" in module.__doc__


@pytest.mark.parametrize("pid", PIDS)
def test_the_harness_passes_on_the_cpu_path(pid):
    report = check.check_model(pid, solution(pid).ModelNew, device="cpu")
    assert report.ok, str(report)
    assert report["gradients"].status == "pass"


@pytest.mark.parametrize("batch", [0, 1, 37])
@pytest.mark.parametrize("pid", PIDS)
def test_any_batch_size(pid, batch):
    ref, new = solution_pair(pid)
    with torch.no_grad():
        assert _close(new(_x(pid, batch)), ref(_x(pid, batch)))


@pytest.mark.parametrize("pid", PIDS)
def test_strided_and_transposed_inputs(pid):
    ref, new = solution_pair(pid)
    x = _x(pid, 37)
    wide = torch.full((37, x.shape[1] + 8), float("nan"))
    views = {"row-padded slice": wide[:, 3:3 + x.shape[1]].copy_(x), "transposed": x.T.contiguous().T,
             "every other row": torch.repeat_interleave(x, 2, dim=0)[::2]}
    with torch.no_grad():
        want = ref(x)
        for label, view in views.items():
            assert not view.is_contiguous()
            assert _close(new(view), want), label


@pytest.mark.parametrize("pid", PIDS)
def test_float64_runs_the_reference_math(pid):
    """A drop-in wholly in float64 gives Model's float64 output, bit for bit (the same ops), and its gradients."""
    ref, new = solution_pair(pid)
    ref, new = ref.double(), new.double()
    x = _x(pid, 37).double().requires_grad_()
    out, want = new(x), ref(x)
    assert out.dtype == torch.float64 and torch.equal(out, want)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, [x, *new.parameters()], grad)
    expected = torch.autograd.grad(want, [x, *ref.parameters()], grad)
    assert all(torch.equal(g, e) for g, e in zip(got, expected))


@pytest.mark.parametrize("pid", PIDS)
def test_float64_passes_gradcheck(pid):
    """What float64 is for: torch.autograd.gradcheck of the input's and the weight's gradients (fast mode: the
    Jacobian along random directions, as the weight alone has 262,144 elements)."""
    _, new = solution_pair(pid)
    new = new.double()
    x = _x(pid, 3).double().requires_grad_()
    name, linear = next((n, m) for n, m in new.named_modules() if isinstance(m, torch.nn.Linear))
    assert torch.autograd.gradcheck(lambda x, w: torch.func.functional_call(new, {f"{name}.weight": w}, (x,)),
                                    (x, linear.weight.detach().clone().requires_grad_()), eps=1e-6, atol=1e-5,
                                    fast_mode=True)


@pytest.mark.parametrize("pid", PIDS)
def test_a_float32_model_names_what_to_convert_for_a_float64_input(pid):
    _, new = solution_pair(pid)
    with torch.no_grad(), pytest.raises(TypeError, match=r"x is torch.float64; convert the input: x.float\(\)"):
        new(_x(pid, 4).double())


@pytest.mark.parametrize("pid", PIDS)
def test_compiles_fullgraph_through_the_registered_ops(pid):
    ref, new = solution_pair(pid)
    torch._dynamo.reset()
    compiled = torch.compile(new, fullgraph=True, backend="aot_eager")  # no graph break, or this raises
    x = _x(pid, 13).requires_grad_()
    out = compiled(x)
    assert _close(out, ref(x))
    out.sum().backward()  # the op's autograd formula, through AOT autograd
    assert x.grad is not None and all(p.grad is not None for p in new.parameters())


# --- on the GPU -----------------------------------------------------------------------------------


def _tier(tier: str):
    return precision.tf32(tier == "tf32")


def _expected_skips(scale: str, tier: str) -> set[str]:
    """What may not run on a GPU: odd_shapes when the run is at scale odd already, and precision,
    which the tf32 tier reports without judging."""
    return ({"odd_shapes"} if scale == "odd" else set()) | ({"precision"} if tier == "tf32" else set())


@pytest.mark.gpu
@pytest.mark.parametrize("tier", ["strict", "tf32"])
@pytest.mark.parametrize("scale", ["small", "odd"])
@pytest.mark.parametrize("pid", PIDS)
def test_the_harness_at_both_tiers_on_five_seeds(pid, scale, tier):
    module = solution(pid)
    with _tier(tier):
        for seed in SEEDS:
            report = check.check_model(pid, module.ModelNew, scale=scale, seed=seed,
                                       allow_torch_ops=module.ModelNew.allow_torch_ops)
            assert report.tier == tier
            assert report.ok and set(report.skipped) == _expected_skips(scale, tier), f"seed {seed}\n{report}"


@pytest.mark.gpu
@pytest.mark.large
@pytest.mark.parametrize("tier", ["strict", "tf32"])
@pytest.mark.parametrize("pid", PIDS)
def test_the_harness_at_full_scale_on_five_seeds(pid, tier):
    module = solution(pid)
    with _tier(tier):
        for seed in SEEDS:
            report = check.check_model(pid, module.ModelNew, scale="full", seed=seed,
                                       allow_torch_ops=module.ModelNew.allow_torch_ops)
            assert report.ok and set(report.skipped) == _expected_skips("full", tier), f"seed {seed}\n{report}"


@pytest.mark.gpu
@pytest.mark.parametrize("batch", [0, 1, 37])
@pytest.mark.parametrize("pid", PIDS)
def test_any_batch_size_on_the_gpu(pid, batch, cuda):
    ref, new = solution_pair(pid, device=cuda)
    with torch.no_grad():
        out = new(_x(pid, batch, cuda))
        assert _close(out, ref(_x(pid, batch, cuda))) and out.is_cuda


@pytest.mark.gpu
@pytest.mark.parametrize("pid", PIDS)
def test_strided_and_transposed_inputs_on_the_gpu(pid, cuda):
    ref, new = solution_pair(pid, device=cuda)
    x = _x(pid, 37, cuda)
    with torch.no_grad():
        assert _close(new(x.T.contiguous().T), ref(x))
        assert _close(new(torch.repeat_interleave(x, 2, dim=0)[::2]), ref(x))


@pytest.mark.gpu
@pytest.mark.parametrize("pid", PIDS)
def test_to_cpu_and_back(pid, cuda):
    ref, new = solution_pair(pid, device=cuda)
    with torch.no_grad():
        on_gpu = new(_x(pid, 9, cuda))
        new.to("cpu")
        on_cpu = new(_x(pid, 9))  # the reference math
        new.to(cuda)
        again = new(_x(pid, 9, cuda))
    assert on_cpu.device.type == "cpu" and _close(on_cpu, on_gpu.cpu())
    assert torch.equal(again, on_gpu)


@pytest.mark.gpu
@pytest.mark.parametrize("pid", PIDS)
def test_a_cpu_input_to_a_gpu_model_gets_an_error_naming_the_device(pid, cuda):
    _, new = solution_pair(pid, device=cuda)
    for grad in (False, True):  # past the autograd kernel and through it
        with torch.set_grad_enabled(grad), pytest.raises(RuntimeError, match="must be a CUDA tensor, got one on cpu"):
            new(_x(pid, 4))


@pytest.mark.gpu
@pytest.mark.parametrize("pid", PIDS)
def test_float64_on_the_gpu_runs_the_reference_math(pid, cuda):
    ref, new = solution_pair(pid, device=cuda)
    ref, new = ref.double(), new.double()
    x = _x(pid, 37, cuda).double()
    with torch.no_grad():
        out, want = new(x), ref(x)
    assert out.dtype == torch.float64 and out.device == want.device and torch.allclose(out, want, atol=1e-12, rtol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("tf32", [False, True], ids=["ieee", "tf32"])
@pytest.mark.parametrize("pid", PIDS)
def test_torch_compile_with_inductor_fullgraph(pid, tf32, cuda):
    ref, new = solution_pair(pid, device=cuda)
    torch._dynamo.reset()
    compiled = torch.compile(new, fullgraph=True)
    x = _x(pid, 37, cuda)
    with precision.tf32(tf32), torch.no_grad():
        out, want = compiled(x), new(x)
    assert torch.equal(out, want) or _close(out, want, 1e-5)  # the same kernels, through inductor's graph
