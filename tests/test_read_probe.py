"""kernels/probes/read_probe.cu: the pure-read yardstick of notebook 07. Each block's minimum of 1024
floats, every block written, NaN propagated like torch.min, bad input refused."""
import pytest
import torch

from kernel_tests import kernel_file_tests, poisoned
from utils import build

KERNEL = "read_probe"
EXPORTS = {"read_probe"}
BLOCK = 1024  # floats per block: 256 threads x one float4

kernels, test_exports, test_compiles = kernel_file_tests(KERNEL, EXPORTS, build.KERNELS_DIR / "probes")


def block_minima(x):
    flat = x.reshape(-1)
    return torch.stack([chunk.min() for chunk in flat.split(BLOCK)])


@pytest.mark.gpu
@pytest.mark.parametrize("numel", [4, 1020, 1024, 1028, 5 * 1024 + 12, 1 << 20])
def test_every_block_minimum(kernels, cuda, numel):
    x = torch.randn(numel, device=cuda) * 3 + 1
    out = poisoned(kernels.read_probe, x)
    assert out.shape == ((numel + BLOCK - 1) // BLOCK,)
    torch.testing.assert_close(out, block_minima(x), rtol=0, atol=0)
    assert out.min().item() == x.min().item()


@pytest.mark.gpu
def test_any_shape_of_the_same_floats(kernels, cuda):
    x = torch.randn(37, 8, 12, device=cuda)
    torch.testing.assert_close(kernels.read_probe(x), block_minima(x), rtol=0, atol=0)
    assert kernels.read_probe(torch.empty(0, 4, device=cuda)).shape == (0,)


@pytest.mark.gpu
def test_nan_propagates_like_torch_min(kernels, cuda):
    x = torch.randn(3 * BLOCK, device=cuda)
    x[BLOCK + 5] = float("nan")
    out = kernels.read_probe(x)
    assert out[1].isnan() and out[[0, 2]].isfinite().all()


@pytest.mark.gpu
def test_rejects_bad_input(kernels, cuda):
    x = torch.randn(16, device=cuda)
    for bad, message in [(x.double(), "float32"), (x.cpu(), "CUDA"), (torch.randn(4, 8, device=cuda).t(), "contiguous"),
                         (torch.randn(10, device=cuda), "multiple of 4 floats, got 10"),
                         (torch.randn(17, device=cuda)[1:], "16-byte boundary")]:
        with pytest.raises(RuntimeError, match=message):
            kernels.read_probe(bad)
