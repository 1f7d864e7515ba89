"""utils.toolchain: every way a build can fail before compiling raises its own error, naming the fix.

Most tests run against a fake CUDA toolkit (a shell-script nvcc and an empty libcudart) so that
each one changes exactly one thing and runs on any machine.
"""
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
import torch

from utils import toolchain


@pytest.fixture(autouse=True)
def fresh_detection(monkeypatch, tmp_path):
    """Each test sees its own machine: no cached detection, no GPU unless it says so, no conda
    environment unless it says so (none active, and this Python not in one)."""
    monkeypatch.setattr(toolchain, "_visible_gpu", lambda: (None, None))
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "python-prefix"))
    toolchain.detect.cache_clear()
    yield
    toolchain.detect.cache_clear()


def _script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def fake_toolkit(root: Path, version: str = "13.0", archs: tuple[str, ...] = ("75", "80", "90"),
                 layout: str = "usr-local") -> Path:
    """A directory that looks like a CUDA toolkit to toolchain: bin/nvcc answers --version,
    --list-gpu-arch and -dryrun (whose TOP line points back here); the headers and libcudart sit
    where /usr/local/cuda has them (include/, lib64/), or where conda-forge puts them (layout="conda":
    targets/x86_64-linux/include and lib, the library linked into lib/, and a conda-meta/ folder)."""
    gpu_archs = "\\n".join(f"compute_{a}" for a in archs)
    _script(root / "bin" / "nvcc", f"""case "$1" in
  --version) echo "Cuda compilation tools, release {version}, V{version}.1";;
  --list-gpu-arch) printf '{gpu_archs}\\n';;
  -dryrun) echo '#$ TOP={root}/bin/..' >&2;;
esac
""")
    if layout == "conda":
        target = root / "targets" / "x86_64-linux"
        _file(target / "include" / "cuda_runtime.h")
        _file(target / "lib" / "libcudart.so.13")
        (target / "lib" / "libcudart.so").symlink_to("libcudart.so.13")
        (root / "lib").mkdir()
        (root / "lib" / "libcudart.so.13").symlink_to(target / "lib" / "libcudart.so.13")
        (root / "conda-meta").mkdir()
    else:
        _file(root / "include" / "cuda_runtime.h")
        _file(root / "lib64" / "libcudart.so.13")
    return root


def _file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    return path


@pytest.fixture
def empty_path(tmp_path, monkeypatch):
    """PATH with nothing on it; no $CUDA_HOME, $CUDA_PATH or default toolkit locations."""
    bin_dir = tmp_path / "empty-bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(toolchain, "FALLBACK_CUDA_HOMES", ())
    return bin_dir


@pytest.fixture
def good_machine(tmp_path, monkeypatch):
    """A fake CUDA 13.0 toolkit in $CUDA_HOME, torch built for CUDA 13.0, ninja on PATH."""
    home = fake_toolkit(tmp_path / "cuda")
    monkeypatch.setenv("CUDA_HOME", str(home))
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    bin_dir = tmp_path / "bin"
    _script(bin_dir / "ninja", "echo 1.13.0\n")
    monkeypatch.setenv("PATH", str(bin_dir))
    return home


def test_good_machine_has_no_problems(good_machine):
    tc = toolchain.require_compiler()
    assert tc.cuda_home == good_machine.resolve()
    assert tc.nvcc_version == "13.0"
    assert tc.nvcc_archs == ["7.5", "8.0", "9.0"]
    assert tc.problems == []


def test_no_nvcc(empty_path):
    with pytest.raises(toolchain.NoNvccError) as err:
        toolchain.require_compiler()
    message = str(err.value)
    assert "nvcc not found" in message and "(looked at: nowhere: no $CUDA_HOME" in message
    assert "Install the CUDA toolkit" in message and "CUDA_HOME=" in message
    assert toolchain.detect().problems[0] == message


def test_nvcc_without_a_toolkit_around_it(tmp_path, empty_path, monkeypatch):
    # Like /usr/local/bin/nvcc: <dir>/bin/nvcc, but no libcudart in <dir> to link extensions with.
    lone = _script(tmp_path / "usr-local" / "bin" / "nvcc", "exit 0\n")
    monkeypatch.setenv("PATH", str(lone.parent))
    with pytest.raises(toolchain.NoNvccError) as err:
        toolchain.require_compiler()
    assert str(lone) in str(err.value)
    assert "libcudart" in str(err.value) and "CUDA_HOME=" in str(err.value)


def test_cpu_only_torch(good_machine, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(toolchain.CpuOnlyTorchError) as err:
        toolchain.require_compiler()
    message = str(err.value)
    assert "CPU-only" in message
    assert "pip install torch --index-url https://download.pytorch.org/whl/cu130" in message


def test_cuda_major_mismatch(good_machine, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    with pytest.raises(toolchain.CudaMismatchError) as err:
        toolchain.require_compiler()
    message = str(err.value)
    assert "nvcc is CUDA 13.0" in message and "built with CUDA 12.4" in message
    assert "CUDA 12.x toolkit" in message and "CUDA_HOME" in message  # fix 1: the toolkit torch wants
    assert "whl/cu130" in message  # fix 2: the torch nvcc wants


def test_same_major_different_minor_is_fine(good_machine, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "13.1")
    assert toolchain.require_compiler().problems == []


def test_ninja_missing(good_machine, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    monkeypatch.setattr(toolchain, "_python_scripts_dir", lambda: tmp_path / "no-scripts")
    with pytest.raises(toolchain.NinjaMissingError) as err:
        toolchain.require_compiler()
    assert "pip install ninja" in str(err.value)


def test_ninja_only_in_the_venv_is_found_and_put_on_path(good_machine, tmp_path, monkeypatch):
    # `.venv/bin/python -m ...` without activating the venv: pip's ninja is not on PATH,
    # and torch runs `ninja` from PATH.
    scripts = tmp_path / "venv-bin"
    ninja = _script(scripts / "ninja", "echo 1.13.0\n")
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    monkeypatch.setattr(toolchain, "_python_scripts_dir", lambda: scripts)
    assert toolchain.require_compiler().ninja == ninja
    toolchain.apply_ninja_path()
    assert shutil.which("ninja") == str(ninja)


def test_unsupported_arch_of_the_visible_gpu(good_machine, monkeypatch):
    monkeypatch.setattr(toolchain, "_visible_gpu", lambda: ("Tesla M60", "5.0"))
    with pytest.raises(toolchain.UnsupportedArchError) as err:
        toolchain.require_compiler()
    message = str(err.value)
    assert "sm_50" in message and "Tesla M60" in message
    assert "7.5, 8.0, 9.0" in message  # what this nvcc can do


def test_explicit_arch_is_checked_too(good_machine):
    assert toolchain.require_compiler("9.0a").problems == []  # 9.0a is 9.0 plus Hopper-only instructions
    with pytest.raises(toolchain.UnsupportedArchError, match="arch='5.2' was requested"):
        toolchain.require_compiler("5.2")


def test_find_cuda_home_sees_through_a_wrapper_script(tmp_path, empty_path):
    # /usr/local/bin/nvcc that execs the real one: torch would guess /usr/local.
    home = fake_toolkit(tmp_path / "cuda-13.0")
    _script(empty_path / "nvcc", f'exec {home}/bin/nvcc "$@"\n')
    assert toolchain.find_cuda_home() == home.resolve()


def test_find_cuda_home_skips_a_cuda_home_without_libcudart(tmp_path, empty_path, monkeypatch):
    home = fake_toolkit(tmp_path / "cuda")
    _script(tmp_path / "usr-local" / "bin" / "nvcc", f'exec {home}/bin/nvcc "$@"\n')
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "usr-local"))  # torch's guess for a wrapper
    monkeypatch.setattr(toolchain, "FALLBACK_CUDA_HOMES", (home,))
    assert toolchain.find_cuda_home() == home.resolve()


# --- where the toolkit is: a conda environment, /usr/local/cuda, a wrapper (above), nothing --------

def test_an_active_conda_environment_is_a_toolkit(tmp_path, empty_path, monkeypatch):
    # `conda activate` sets $CONDA_PREFIX; conda-forge keeps cuda_runtime.h and libcudart.so under
    # targets/x86_64-linux/, with only the versioned library linked into lib/.
    prefix = fake_toolkit(tmp_path / "envs" / "workbook", layout="conda")
    monkeypatch.setenv("CONDA_PREFIX", str(prefix))
    assert toolchain.find_cuda_home() == prefix.resolve()
    assert toolchain.cuda_include_dir(prefix) == prefix / "targets" / "x86_64-linux" / "include"
    assert toolchain.detect().nvcc == prefix.resolve() / "bin" / "nvcc"


def test_a_conda_environments_python_finds_its_toolkit_without_activation(tmp_path, empty_path, monkeypatch):
    # envs/workbook/bin/python run by its path: no $CONDA_PREFIX, the env's bin/ not on PATH
    prefix = fake_toolkit(tmp_path / "envs" / "workbook", layout="conda")
    monkeypatch.setattr(sys, "prefix", str(prefix))
    assert toolchain.find_cuda_home() == prefix.resolve()
    shutil.rmtree(prefix / "conda-meta")  # a venv's prefix is not a conda environment: not looked at
    assert toolchain.find_cuda_home() is None


def test_conda_comes_after_cuda_home_and_before_the_nvcc_on_path(tmp_path, empty_path, monkeypatch):
    prefix = fake_toolkit(tmp_path / "env", layout="conda")
    system = fake_toolkit(tmp_path / "cuda-12.8", version="12.8")
    _script(empty_path / "nvcc", f'exec {system}/bin/nvcc "$@"\n')
    monkeypatch.setenv("CONDA_PREFIX", str(prefix))
    assert toolchain.find_cuda_home() == prefix.resolve()
    monkeypatch.setenv("CUDA_HOME", str(system))  # said outright: wins
    assert toolchain.find_cuda_home() == system.resolve()


def test_a_conda_toolkit_with_its_headers_in_include_counts_too(tmp_path, empty_path, monkeypatch):
    prefix = fake_toolkit(tmp_path / "env", layout="conda")
    (prefix / "targets" / "x86_64-linux" / "include").rename(prefix / "include")
    monkeypatch.setenv("CONDA_PREFIX", str(prefix))
    assert toolchain.find_cuda_home() == prefix.resolve()
    assert toolchain.cuda_include_dir(prefix) == prefix / "include"


def test_apply_cuda_home_shows_gcc_where_conda_keeps_headers_and_libcudart(tmp_path, empty_path, monkeypatch):
    import torch.utils.cpp_extension as cpp_extension

    prefix = fake_toolkit(tmp_path / "env", layout="conda").resolve()
    monkeypatch.setenv("CONDA_PREFIX", str(prefix))
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", None)
    for var in ("CUDA_HOME", "LIBRARY_PATH"):  # set, then removed: restored to this state afterwards
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    monkeypatch.setenv("CPATH", "/opt/other/include")
    assert toolchain.apply_cuda_home() == prefix
    target = prefix / "targets" / "x86_64-linux"
    assert os.environ["CPATH"] == f"{target / 'include'}{os.pathsep}/opt/other/include"
    assert os.environ["LIBRARY_PATH"] == str(target / "lib")  # lib/ has libcudart.so.13, not the libcudart.so -l wants
    assert cpp_extension.CUDA_HOME == os.environ["CUDA_HOME"] == str(prefix)
    toolchain.apply_cuda_home()  # again: nothing added twice
    assert os.environ["CPATH"].count("targets") == 1 and os.environ["LIBRARY_PATH"] == str(target / "lib")


def test_apply_cuda_home_leaves_a_usual_toolkits_compiler_paths_alone(good_machine, monkeypatch):
    monkeypatch.delenv("CPATH", raising=False)
    monkeypatch.delenv("LIBRARY_PATH", raising=False)
    toolchain.apply_cuda_home()
    assert "CPATH" not in os.environ and "LIBRARY_PATH" not in os.environ


def test_the_usual_place_when_nothing_points_elsewhere(tmp_path, empty_path, monkeypatch):
    # /usr/local/cuda -> cuda-13.0, no nvcc on PATH, no variables set
    usual = fake_toolkit(tmp_path / "usr" / "local" / "cuda-13.0")
    (tmp_path / "usr" / "local" / "cuda").symlink_to(usual)
    monkeypatch.setattr(toolchain, "FALLBACK_CUDA_HOMES", (tmp_path / "usr" / "local" / "cuda",))
    assert toolchain.find_cuda_home() == usual.resolve()


def test_nothing_found_says_where_it_looked_and_why_each_is_no_toolkit(tmp_path, empty_path, monkeypatch):
    plain_env = tmp_path / "envs" / "plain"  # a conda environment without cuda-nvcc
    (plain_env / "conda-meta").mkdir(parents=True)
    no_dev = fake_toolkit(tmp_path / "envs" / "no-dev", layout="conda")  # cuda-nvcc without cuda-cudart-dev
    shutil.rmtree(no_dev / "targets" / "x86_64-linux" / "include")
    no_lib = fake_toolkit(tmp_path / "cuda-no-lib")
    (no_lib / "lib64" / "libcudart.so.13").unlink()
    monkeypatch.setenv("CUDA_HOME", str(no_dev))
    monkeypatch.setenv("CUDA_PATH", str(no_lib))
    monkeypatch.setenv("CONDA_PREFIX", str(plain_env))
    monkeypatch.setattr(toolchain, "FALLBACK_CUDA_HOMES", (tmp_path / "usr-local-cuda",))
    with pytest.raises(toolchain.NoNvccError) as err:
        toolchain.require_compiler()
    message = str(err.value)
    assert message.startswith("nvcc not found on PATH and no CUDA toolkit found (looked at: ")
    assert f"$CUDA_HOME: {no_dev} (no cuda_runtime.h in include/ or targets/*/include/)" in message
    assert f"$CUDA_PATH: {no_lib} (no libcudart in lib64/, lib/, targets/*/lib/)" in message
    assert f"$CONDA_PREFIX: {plain_env} (no bin/nvcc)" in message
    assert f"the usual place: {tmp_path / 'usr-local-cuda'} (no such directory)" in message
    assert "conda env update -f environment.yml" in message and "CUDA_HOME=" in message
    assert toolchain.detect().blockers[0] == "no nvcc"


REAL_HOME = toolchain.find_cuda_home()


@pytest.mark.skipif(REAL_HOME is None, reason="no CUDA toolkit on this machine")
def test_find_cuda_home_sees_through_a_wrapper_of_the_real_nvcc(tmp_path, monkeypatch):
    # The rest of PATH stays: nvcc's dry run asks the host compiler (gcc) for its properties.
    wrapper = _script(tmp_path / "wrapper" / "bin" / "nvcc", f'exec {REAL_HOME}/bin/nvcc "$@"\n')
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(toolchain, "FALLBACK_CUDA_HOMES", ())
    assert shutil.which("nvcc") == str(wrapper)
    assert toolchain.find_cuda_home() == REAL_HOME  # not tmp_path / "wrapper", torch's guess


def test_apply_cuda_home_points_torch_at_the_toolkit(good_machine, monkeypatch):
    import torch.utils.cpp_extension as cpp_extension

    monkeypatch.setattr(cpp_extension, "CUDA_HOME", "/usr/local")  # torch's guess for a wrapper
    monkeypatch.setenv("CUDA_HOME", str(good_machine))
    toolchain.apply_cuda_home()
    assert cpp_extension.CUDA_HOME == str(good_machine.resolve())
    assert os.environ["CUDA_HOME"] == str(good_machine.resolve())


def test_version_and_arch_parsing(tmp_path):
    nvcc = fake_toolkit(tmp_path / "cuda", version="12.8", archs=("75", "90", "100", "121"))/ "bin" / "nvcc"
    assert toolchain.nvcc_version(nvcc) == "12.8"
    assert toolchain.supported_archs(nvcc) == ["7.5", "9.0", "10.0", "12.1"]
    assert toolchain.arch_code("9.0a") == "90a" and toolchain.arch_code("10.0") == "100"
    with pytest.raises(ValueError, match="compute capability"):
        toolchain.arch_code("sm_90")
