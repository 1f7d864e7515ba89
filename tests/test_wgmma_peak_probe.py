"""kernels/probes/wgmma_peak_probe.cu: the tensor cores' yardstick (rung 9's k tile, nothing else). Every
block's tile is iters * (x @ w.T) in TF32, every element written; bad input refused."""
import pytest
import torch

from kernel_tests import kernel_file_tests, poisoned
from utils import build
from utils.tf32 import to_tf32

KERNEL = "wgmma_peak_probe"
EXPORTS = {"wgmma_peak_probe"}

kernels, test_exports, test_compiles = kernel_file_tests(KERNEL, EXPORTS, build.KERNELS_DIR / "probes")


@pytest.mark.gpu
@pytest.mark.parametrize("iters, blocks", [(1, 1), (3, 5), (64, 132)])
def test_every_block_holds_iters_products(kernels, cuda, iters, blocks):
    x = torch.rand(128, 32, device=cuda)
    w = torch.randn(256, 32, device=cuda)
    out = poisoned(kernels.wgmma_peak_probe, x, w, iters, blocks)
    assert out.shape == (blocks, 128, 256)
    expected = iters * (to_tf32(x, "truncate").double() @ to_tf32(w, "truncate").double().T)  # what wgmma reads
    for b in range(blocks):
        torch.testing.assert_close(out[b].double(), expected, rtol=1e-5, atol=1e-4 * iters)


@pytest.mark.gpu
def test_rejects_bad_input(kernels, cuda):
    x = torch.rand(128, 32, device=cuda)
    w = torch.rand(256, 32, device=cuda)
    for args, message in [((x.double(), w, 1, 1), "float32"), ((x, w.cpu(), 1, 1), "CUDA"),
                          ((torch.rand(32, 128, device=cuda).t(), w, 1, 1), "contiguous"),
                          ((torch.rand(64, 32, device=cuda), w, 1, 1), r"x must be \(128, 32\), got \[64, 32\]"),
                          ((x, torch.rand(256, 16, device=cuda), 1, 1), r"w must be \(256, 32\)"),
                          ((x, w, 0, 1), "iters must be"), ((x, w, 1, 0), "blocks must be")]:
        with pytest.raises(RuntimeError, match=message):
            kernels.wgmma_peak_probe(*args)
