"""Markers: `gpu` tests skip without a CUDA device; `compile` tests skip where nothing can compile.

When a session has tests that compile, every kernel file of kernels/ and kernels/exercises/ and the
exercises' texts are built in the background from its start, cold builds side by side
(build.load_kernels): nvcc uses one core per file, and its builds take most of `make test` on the
2-core CI machine. Meanwhile the tests run: the two longest modules first (LONG_FIRST), then those that
need no kernel, then the modules with a `compile` or `gpu` test, then the notebooks (`make test` keeps
this order: --no-loadscope-reorder). A test that needs a kernel not built yet builds it, or waits for
the build that holds its lock. Set WORKBOOK_PREBUILD=0 to build on first use only (a narrow selection
of tests).
"""
import json
import os
import subprocess
import sys

import pytest
import torch


# The modules whose one long test is a chain no worker can share (on the 2-core CI machine, a clean clone):
# the four exports' own builds (about 200 s) and JupyterLab in Chromium (about 160 s). They start first, so
# that the many short tests fill the cores beside them, and not the other way round at the end of the session.
LONG_FIRST = ("test_export.py", "test_lab_browser.py")


def _compiles(item) -> bool:
    return bool(item.get_closest_marker("compile") or item.get_closest_marker("gpu"))


def _needs_kernels(item) -> bool:
    return _compiles(item) or item.path.suffix == ".ipynb"


def _order(item, needing) -> tuple[bool, bool]:
    return (item.path.name not in LONG_FIRST, item.path in needing)


def pytest_collection_modifyitems(config, items):
    from utils import env

    # LONG_FIRST, then the modules and notebooks that need no kernel, in their order, then the others: they run
    # while the kernels build (kernels_built_side_by_side). A module moves whole: its tests keep their order.
    needing = {item.path for item in items if _needs_kernels(item)}
    items.sort(key=lambda item: _order(item, needing))
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

    wanted = any(_compiles(item) for item in request.session.items)
    if os.environ.get("WORKBOOK_PREBUILD", "1") == "0" or not wanted or env.mode() == "reference-only":
        yield
        return
    # built, not imported: each test still loads (warm) what it uses. A kernel that does not build is
    # left to the tests that use it, which fail with nvcc's error.
    import scratch_builds  # the exercises' starters and answers, each compiled once

    # Under pytest-xdist every worker prebuilds, each starting at another point of the list with its share of
    # the cores: a kernel one worker is building, another waits for (the build lock), then finds built.
    worker, workers = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:]), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    items = [*build.every_kernel_file(), *scratch_builds.variants(gpu=env.mode() == "gpu")]
    start = worker * len(items) // workers

    # in a process of its own, with the environment as the session starts: tests that set $WORKBOOK_BUILD_DIR
    # or $MAX_JOBS for themselves meanwhile change nothing of it
    listed = build.SCRATCH_DIR.parent / f"prebuild_{worker}.json"
    listed.parent.mkdir(parents=True, exist_ok=True)
    listed.write_text(json.dumps([[v.name, list(v.extra_cuda_cflags), v.kernels_dir and str(v.kernels_dir)]
                                  for v in items[start:] + items[:start]]))
    with open(listed.with_suffix(".log"), "w") as log:
        background = subprocess.Popen([sys.executable, "-m", "utils.build", "--variants", str(listed), "--jobs",
                                       str(max(1, (os.cpu_count() or 1) // workers))], stdout=log,
                                      stderr=subprocess.STDOUT, env=dict(os.environ), cwd=build.REPO)
    yield
    background.wait()
    print("".join(line for line in listed.with_suffix(".log").read_text().splitlines(keepends=True)
                  if line.startswith("prebuild: ")), end="")
