"""What several test modules share: the opening tests of a kernel file's module, a kernel's output
over NaN-poisoned memory, running a notebook's checker cell on its own, and fake harness reports
for testing checker verdicts."""
import json

import pytest
import torch

from utils import REPO, build, check


def kernel_file_tests(kernel: str, exports: set[str], kernels_dir=None):
    """The `kernels` fixture (the built module) and the two tests every kernel file gets: it
    exports exactly `exports`, and (on CI too: nvcc, no GPU) it compiles. Use as
        kernels, test_exports, test_compiles = kernel_file_tests("groupnorm", EXPORTS)
    `kernels_dir`: the kernel's folder when it is not kernels/ itself (kernels/probes/)."""

    @pytest.fixture(scope="module")
    def kernels():
        return build.load_kernel(kernel, kernels_dir=kernels_dir)

    def test_exports():
        assert {e.name for e in build.exported_functions(build.kernel_source(kernel, kernels_dir))} == exports

    @pytest.mark.compile
    def test_compiles():
        module = build.load_kernel(kernel, kernels_dir=kernels_dir)
        assert all(callable(getattr(module, name)) for name in exports)

    return kernels, test_exports, test_compiles


def poisoned(fn, *args):
    """fn(*args) after NaN was left in the memory its output will get: an element never written
    stays NaN. (The caching allocator hands a freed block of the same size back first.)"""
    n = fn(*args).numel()
    torch.full((n,), float("nan"), device="cuda")  # freed at once: NaN in the cached block
    return fn(*args)


def notebook_cell(notebook: str, function: str) -> dict:
    """Run, on its own, the code cell of notebooks/<notebook> that defines `function`; its namespace."""
    nb = json.loads((REPO / "notebooks" / notebook).read_text())
    for cell in nb["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code" and f"def {function}(" in source:
            namespace: dict = {}
            exec(compile(source, f"{notebook}: the cell defining {function}", "exec"), namespace)
            return namespace
    raise AssertionError(f"no code cell of {notebook} defines {function}()")


def fake_report(name: str, *checks: tuple[str, str]) -> check.CheckReport:
    """A harness report with these (check, status) results, for testing a checker's verdict."""
    return check.CheckReport(name, "strict", "cuda:0", [check.CheckResult(n, s) for n, s in checks])
