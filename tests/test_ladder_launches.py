"""The launches notebooks 02 and 03 make in their cells: each rung's kernel, marked `// @launch` in its file,
launched with the grid, block and shared memory the cell computes from the rung's constants.

- Without a GPU: every rung 1-7 has exactly one launchable kernel, and each launch cell names it.
- gpu: each launch cell, run as the notebook runs it (with the notebook's own operands replaced by shapes that
  fit no tile, K a multiple of 4 or not), fills a NaN-poisoned output with x @ w.T.
"""
import json

import pytest
import torch
import torch.nn.functional as F

from utils import REPO, build, ladder, launch
from utils.chapters import gemm_addressing as addressing

NOTEBOOKS = ["02_naive_gemm.ipynb", "03_tiled_gemm.ipynb"]


def launch_cells() -> dict[int, str]:
    """{rung number: the source of the cell that sets run_rung<n>} over both notebooks."""
    found = {}
    for notebook in NOTEBOOKS:
        for cell in json.loads((REPO / "notebooks" / notebook).read_text())["cells"]:
            src = "".join(cell["source"])
            for n in range(1, 8):
                if cell["cell_type"] == "code" and f"run_rung{n} = " in src:
                    found[n] = src
    return found


def test_every_rung_has_one_launchable_kernel_and_a_cell_that_launches_it():
    cells = launch_cells()
    assert sorted(cells) == list(range(1, 8))
    for name in ladder.rungs():
        kernels = launch.launchables(build.kernel_source(name), name)
        assert len(kernels) == 1, name
        assert f".{kernels[0].name}[grid, block, smem](" in cells[ladder.rung_number(name)], name


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(130, 200, 96), (37, 129, 97)], ids=["K%4==0", "odd"])
@pytest.mark.parametrize("rung", range(1, 8))
def test_each_launch_cell_computes_the_gemm(rung, shape):
    M, N, K = shape
    name = ladder.rungs()[rung - 1]
    x, w = ladder.operands(M, N, K)
    out = torch.empty(M, N, device="cuda")
    namespace = {"modules": {name: build.load_kernel(name)}, "addressing": addressing, "quote": lambda *a: None,
                 "print": lambda *a, **k: None, "M": M, "N": N, "K": K, "x": x, "w": w, "out": out}
    exec(compile(launch_cells()[rung], f"rung {rung}'s launch cell", "exec"), namespace)
    out.fill_(float("nan"))
    namespace[f"run_rung{rung}"]()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, F.linear(x, w), atol=1e-4, rtol=1e-4)
