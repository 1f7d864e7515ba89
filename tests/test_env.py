"""utils.env: the machine's mode, WORKBOOK_MODE, device slugs, the report."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from utils import REPO, env, toolchain


@pytest.mark.parametrize(
    "name, slug",
    [
        ("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"),
        ("NVIDIA GeForce RTX 4090", "nvidia-geforce-rtx-4090"),
        ("  Tesla V100-SXM2-16GB ", "tesla-v100-sxm2-16gb"),
        ("NVIDIA H200 (MIG 1g.18gb)", "nvidia-h200-mig-1g-18gb"),
    ],
)
def test_device_slug(name, slug):
    assert env.device_slug(name) == slug


def test_device_slug_without_a_gpu_is_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert env.device_name() is None
    assert env.device_slug() == "cpu"
    assert env.gpu_properties() is None


@pytest.fixture
def machine(monkeypatch):
    """Pretend the machine's own mode is the one given."""
    monkeypatch.delenv("WORKBOOK_MODE", raising=False)
    return lambda mode: monkeypatch.setattr(env, "_machine_mode", lambda: mode)


# ids other than the bare mode names: conftest reads a "gpu" keyword as the gpu marker.
@pytest.mark.parametrize("forced", ["gpu", "compile-only", "reference-only"], ids=lambda m: f"forced-{m}")
def test_workbook_mode_may_lower_the_mode(machine, monkeypatch, forced):
    machine("gpu")
    monkeypatch.setenv("WORKBOOK_MODE", forced)
    assert env.mode() == forced


def test_without_workbook_mode_the_machine_decides(machine):
    machine("compile-only")
    assert env.mode() == "compile-only"


def test_workbook_mode_cannot_raise_the_mode(machine, monkeypatch):
    machine("compile-only")
    monkeypatch.setenv("WORKBOOK_MODE", "gpu")
    with pytest.raises(RuntimeError, match="WORKBOOK_MODE=gpu asks for more than this machine can do") as err:
        env.mode()
    assert "compile-only, reference-only" in str(err.value)  # what it may be set to instead


def test_workbook_mode_must_be_a_mode(machine, monkeypatch):
    machine("gpu")
    monkeypatch.setenv("WORKBOOK_MODE", "fast")
    with pytest.raises(ValueError, match="not a mode"):
        env.mode()


NO_NVCC = "nvcc not found on PATH and no CUDA toolkit under $CUDA_HOME. Install the CUDA toolkit (nvcc)."


@pytest.fixture
def pretend(monkeypatch):
    """Pretend this machine has a GPU (or not) and a toolchain with these problems."""
    monkeypatch.delenv("WORKBOOK_MODE", raising=False)

    def machine(gpu: bool, problems: list[str]):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "NVIDIA H100 80GB HBM3")
        monkeypatch.setattr(env, "gpu_properties", lambda: {"name": "NVIDIA H100 80GB HBM3", "cc": "9.0", "sms": 132,
                                                            "memory_gb": 85.0, "l2_mb": 50.0} if gpu else None)
        monkeypatch.setattr(toolchain, "detect", lambda: toolchain.Toolchain(
            "2.x", "13.0", None, None, None, [], None, None, None, problems=problems))
    return machine


@pytest.mark.parametrize(
    "gpu, problems, expected",
    [(True, [], "gpu"), (False, [], "compile-only"), (False, [NO_NVCC], "reference-only"),
     (True, [NO_NVCC], "reference-only")],
    ids=["has-gpu", "toolchain-only", "neither", "gpu-without-toolchain"],
)
def test_machine_mode_from_gpu_and_toolchain(pretend, gpu, problems, expected):
    pretend(gpu, problems)
    assert env._machine_mode() == expected


def test_a_gpu_where_no_kernel_builds_skips_builds_and_says_why(pretend, monkeypatch):
    pretend(True, [NO_NVCC])
    assert env.mode() == "reference-only"  # so no caller asking for "gpu" (or can_compile) tries to build
    reason = env.why()
    assert reason.startswith("a GPU is visible (NVIDIA H100 80GB HBM3) but no kernel can be built here: nvcc not found")
    assert reason.endswith("Install the CUDA toolkit (nvcc); kernels are skipped, and the notebooks run as in "
                           "reference-only mode")
    text = env.report()
    assert ("mode       reference-only\n           a GPU is visible (NVIDIA H100 80GB HBM3) but no kernel can be "
            "built here (why: below); kernels are skipped\n") in text
    assert f"  - {NO_NVCC}" in text  # the problem, with its fix, in the list below too
    monkeypatch.setenv("WORKBOOK_MODE", "gpu")
    with pytest.raises(RuntimeError, match="asks for more than this machine can do"):
        env.mode()


@pytest.mark.parametrize("gpu, problems", [(True, []), (False, []), (False, [NO_NVCC])],
                         ids=["has-gpu", "toolchain-only", "neither"])
def test_why_is_only_for_a_gpu_that_is_not_used(pretend, gpu, problems):
    pretend(gpu, problems)
    assert env.why() is None
    assert "GPU is visible" not in env.report().split("what the notebooks do")[0]


def test_resolve_device(pretend):
    pretend(False, [])
    assert env.resolve_device("auto", "compile-only") == "cpu"
    assert env.resolve_device("auto", "gpu") == "cuda"
    assert env.resolve_device("cpu", "compile-only") == "cpu"
    pretend(True, [])
    assert env.resolve_device("cuda", "gpu") == "cuda"
    assert env.resolve_device("cuda:1", "reference-only") == "cuda:1"  # a GPU is visible: the reader's choice


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_cuda_without_a_gpu_stops_at_once(pretend, device):
    pretend(False, [])
    with pytest.raises(RuntimeError) as err:
        env.resolve_device(device, "compile-only")
    assert str(err.value) == (f"DEVICE={device!r} but no CUDA GPU is visible (torch.cuda.is_available() is False): "
                              "run with DEVICE='cpu' (or 'auto'), or on a GPU machine.")


def test_mode_of_this_machine(monkeypatch):
    # Worked out independently of utils.toolchain: a GPU; else nvcc, torch's CUDA and ninja.
    monkeypatch.delenv("WORKBOOK_MODE", raising=False)
    if not (shutil.which("nvcc") and torch.version.cuda and toolchain.find_ninja()):
        expected = "reference-only"  # with or without a GPU: nothing can be built
    elif torch.cuda.is_available():
        expected = "gpu"
    else:
        expected = "compile-only"  # this (GPU-less, nvcc-equipped) build machine and CI
    assert env.mode() == expected


def test_report_names_mode_versions_and_what_runs(monkeypatch):
    monkeypatch.delenv("WORKBOOK_MODE", raising=False)
    text = env.report()
    assert f"mode       {env.mode()}" in text
    assert torch.__version__ in text
    for mode, what in env.WHAT_RUNS.items():
        assert mode in text and what in text
    assert f"-> {env.mode()}" in text  # this machine's line is marked


def test_brief_from_the_command_line():
    out = subprocess.run([sys.executable, "-m", "utils.env", "--brief"], cwd=REPO, capture_output=True,
                         text=True, check=True, env={**os.environ, "WORKBOOK_MODE": "reference-only"})
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("mode reference-only | torch ")


def _toolchain(torch_version="2.14.1+cu130", torch_cuda="13.0", toolkit=True, nvcc_version="13.0"):
    """A toolchain as detect() would build it: its problems and blockers from its own errors()."""
    home = Path("/opt/cuda") if toolkit else None
    tc = toolchain.Toolchain(torch_version, torch_cuda, home, home / "bin" / "nvcc" if home else None,
                             nvcc_version if toolkit else None, ["9.0"] if toolkit else [], Path("/usr/bin/ninja"),
                             None, None)
    errors = tc.errors()
    tc.problems, tc.blockers = [str(e) for e in errors], [e.short for e in errors]
    return tc


@pytest.mark.parametrize("kwargs, reason", [
    (dict(toolkit=False), "no nvcc"),
    (dict(torch_version="2.14.1+cpu", torch_cuda=None), "a CPU-only torch (2.14.1+cpu)"),
    (dict(toolkit=False, torch_version="2.14.1+cpu", torch_cuda=None), "no nvcc; a CPU-only torch (2.14.1+cpu)"),
    (dict(nvcc_version="12.4"), "nvcc is CUDA 12.4 but torch was built with CUDA 13.0"),
], ids=["no-nvcc", "cpu-torch", "both", "mismatch"])
def test_no_build_reason_says_which_need_is_missing(monkeypatch, kwargs, reason):
    monkeypatch.delenv("WORKBOOK_MODE", raising=False)
    monkeypatch.setattr(toolchain, "detect", lambda: _toolchain(**kwargs))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert env.no_build_reason() == reason
    assert env.no_gpu_reason() == "no CUDA GPU is visible"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "NVIDIA H100 80GB HBM3")
    assert env.no_gpu_reason() == reason  # a GPU, and no kernel can be built for it


def test_no_build_reason_names_workbook_mode_where_it_lowered_the_mode(monkeypatch):
    monkeypatch.setattr(toolchain, "detect", lambda: _toolchain())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("WORKBOOK_MODE", "reference-only")
    assert env.no_build_reason() == env.no_gpu_reason() == "WORKBOOK_MODE=reference-only"


def test_skipped_tests_say_which_need_is_missing():
    # tests/conftest.py's skip reasons come from the two functions above; here WORKBOOK_MODE lowers the mode
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_activations.py::test_compiles",
         "tests/test_activations.py::test_empty_input", "-rs", "-q", "-p", "no:cacheprovider"],
        cwd=REPO, capture_output=True, text=True,
        env={**os.environ, "WORKBOOK_MODE": "reference-only", "WORKBOOK_PREBUILD": "0", "COLUMNS": "300"}).stdout
    build = "; ".join(toolchain.detect().blockers) or "WORKBOOK_MODE=reference-only"
    gpu = build if torch.cuda.is_available() else "no CUDA GPU is visible"
    assert f"needs nvcc and a CUDA build of torch; here: {build} (mode reference-only)" in out
    assert f"needs a CUDA GPU that kernels build for; here: {gpu} (mode reference-only)" in out
