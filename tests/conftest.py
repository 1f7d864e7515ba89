"""Markers: `gpu` tests skip without a CUDA device; `compile` tests skip where nothing can compile."""
import pytest
import torch


def pytest_collection_modifyitems(config, items):
    from utils import env

    mode = env.mode()
    skip_gpu = pytest.mark.skip(reason=f"needs a CUDA GPU (this machine's mode: {mode})")
    skip_compile = pytest.mark.skip(reason=f"needs nvcc and a CUDA build of torch (mode: {mode})")
    for item in items:
        if item.get_closest_marker("gpu") and mode != "gpu":
            item.add_marker(skip_gpu)
        elif item.get_closest_marker("compile") and mode == "reference-only":
            item.add_marker(skip_compile)


@pytest.fixture(autouse=True)
def restore_precision_settings():
    """Tests flip TF32 on purpose: leave every fp32 precision setting as each test found it."""
    from utils import precision

    saved = precision.flags()
    yield
    precision.restore(saved)


@pytest.fixture
def cuda():
    """The current CUDA device; tests using it carry the gpu marker."""
    return torch.device("cuda")
