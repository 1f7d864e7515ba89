"""Markers: `gpu` tests skip without a CUDA device; `compile` tests skip where nothing can compile.

Before the first test that compiles, every kernel file of kernels/ and kernels/exercises/ is built,
cold builds side by side (build.load_kernels, one per core): nvcc uses one core per file, so on the
2-core CI machine the ~25 cold builds take about half the time they take one by one on first use. Set
WORKBOOK_PREBUILD=0 to build on first use instead (a narrow selection of tests).
"""
import os

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    from utils import env

    mode = env.mode()
    if mode == "gpu":
        return
    # each reason says which need is missing here (utils.env): no GPU, no nvcc, a CPU-only torch, ...
    skip_gpu = pytest.mark.skip(reason=f"needs a CUDA GPU that kernels build for; here: {env.no_gpu_reason()} "
                                       f"(mode {mode})")
    skip_compile = pytest.mark.skip(reason=f"needs nvcc and a CUDA build of torch; here: {env.no_build_reason()} "
                                           f"(mode {mode})")
    for item in items:
        if item.get_closest_marker("gpu"):
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


@pytest.fixture(scope="session", autouse=True)
def kernels_built_side_by_side(request):
    from utils import build, env

    wanted = any(item.get_closest_marker("compile") or item.get_closest_marker("gpu") for item in request.session.items)
    if os.environ.get("WORKBOOK_PREBUILD", "1") == "0" or not wanted or env.mode() == "reference-only":
        return
    # built, not imported: each test still loads (warm) what it uses. A kernel that does not build is
    # left to the tests that use it, which fail with nvcc's error.
    import scratch_builds  # the exercises' starters and answers, each compiled once

    # Under pytest-xdist every worker prebuilds, each starting at another point of the list with its share of
    # the cores: a kernel one worker is building, another waits for (the build lock), then finds built.
    worker, workers = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:]), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    items = [*build.every_kernel_file(), *scratch_builds.variants(gpu=env.mode() == "gpu")]
    start = worker * len(items) // workers
    failed = build.load_kernels(items[start:] + items[:start], jobs=max(1, (os.cpu_count() or 1) // workers),
                                build_only=True, on_error="return")
    for item, error in failed.items():
        print(f"prebuild: {item} did not build ({type(error).__name__}); its tests will say why")
