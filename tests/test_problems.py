"""The four problems are KernelBench's, and the extra scales keep their structure."""
import inspect

import pytest
import torch

from utils.problems import SCALES, all_problems, get_problem

IDS = [94, 75, 37, 62]

# KernelBench's sizes (batch, in, out, groups), as the design lists them.
FULL = {94: (1024, 8192, 8192, 256), 75: (1024, 8192, 8192, 512), 37: (32768, 1024, 4096, 64), 62: (1024, 8192, 8192, 512)}

# Parameter names as state_dict lists them (a module's own parameters before its children's):
# what a drop-in must keep for load_state_dict(strict=True).
PARAMS = {
    94: ["bias", "gemm.weight", "gemm.bias", "groupnorm.weight", "groupnorm.bias"],
    75: ["bias", "gemm.weight", "gemm.bias", "group_norm.weight", "group_norm.bias"],
    37: ["bias", "matmul.weight", "matmul.bias", "group_norm.weight", "group_norm.bias"],
    62: ["fc.weight", "fc.bias", "gn.weight", "gn.bias"],
}


def test_order_and_lookup():
    assert [p.id for p in all_problems()] == IDS
    assert get_problem("75") is get_problem(75)
    with pytest.raises(KeyError, match="94"):
        get_problem(1)


@pytest.mark.parametrize("pid", IDS)
def test_full_scale_is_kernelbench(pid):
    p = get_problem(pid)
    d = p.dims("full")
    assert (d.batch, d.in_features, d.out_features, d.groups) == FULL[pid]
    assert p.init_inputs("full") == p.module.get_init_inputs()
    (x,) = p.module.get_inputs()
    assert x.shape == (d.batch, d.in_features) and x.dtype == torch.float32


@pytest.mark.parametrize("pid", IDS)
def test_reference_source_is_verbatim_kernelbench(pid):
    # The module states where it comes from, and keeps KernelBench's module-level API.
    src = inspect.getsource(get_problem(pid).module)
    assert src.startswith(f"# KernelBench level 2, {get_problem(pid).kernelbench_file} (verbatim).")
    assert "def get_inputs():\n    return [torch.rand(batch_size, " in src


@pytest.mark.parametrize("pid", IDS)
@pytest.mark.parametrize("scale", ["small", "odd"])
def test_scaled_models_build_and_run(pid, scale):
    p = get_problem(pid)
    model = p.make_model(scale)
    assert [n for n, _ in model.named_parameters()] == PARAMS[pid]
    (x,) = p.get_inputs(scale, generator=torch.Generator().manual_seed(1))
    out = model(x)
    assert tuple(out.shape) == p.output_shape(scale)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("pid", IDS)
def test_small_keeps_channels_per_group(pid):
    p = get_problem(pid)
    assert p.dims("small").channels_per_group == p.dims("full").channels_per_group


def test_odd_shapes_are_multiples_of_nothing():
    for p in all_problems():
        d = p.dims("odd")
        for tile in (2, 4, 8, 16, 32, 64, 128):
            assert d.batch % tile and d.in_features % tile and d.out_features % tile
        assert d.out_features % d.groups == 0


def test_75_broadcasts_to_1_C_N_1():
    p = get_problem(75)
    assert p.output_shape("full") == (1, 8192, 1024, 1)


def test_seeded_construction_is_reproducible():
    p = get_problem(62)
    a, b = p.make_model("small", seed=3), p.make_model("small", seed=3)
    for (na, ta), (nb, tb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert na == nb and torch.equal(ta, tb)


def test_unknown_scale():
    with pytest.raises(ValueError, match="full"):
        get_problem(94).dims("huge")


def test_scales_constant():
    assert SCALES == ("full", "small", "odd")
