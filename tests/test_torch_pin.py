"""torch's one pin, torch-requirement.txt: the Makefile installs it, environment.yml names it (with the
CUDA toolkit of its CUDA version), pyproject.toml's floor admits it, the README states it; and the README
says which torch the recorded runs used, since they were made with another one."""
import json
import os
import re
import shutil
import subprocess

import pytest
import torch
from packaging.requirements import Requirement

from utils import REPO

PIN_FILE = REPO / "torch-requirement.txt"


def pin() -> tuple[str, str]:
    """("torch==2.14.1", "13.0"): the requirement line and its `# cuda:` line."""
    text = PIN_FILE.read_text()
    requirements = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert len(requirements) == 1, f"{PIN_FILE.name} holds one requirement, torch's pin: {requirements}"
    cuda = re.search(r"^# cuda: (\d+\.\d+)$", text, re.MULTILINE)
    assert cuda, f"{PIN_FILE.name} says the pinned build's CUDA version on a `# cuda: X.Y` line"
    return requirements[0], cuda.group(1)


def pinned_version() -> str:
    requirement = Requirement(pin()[0])
    (spec,) = requirement.specifier
    assert requirement.name == "torch" and spec.operator == "==", f"the pin is torch==<version>, not {requirement}"
    return spec.version


def make_variable(name: str, **environ: str) -> str:
    if shutil.which("make") is None:
        pytest.skip("no make here")
    # this process's settings (a `make test PY=...` passes them down through MAKEFLAGS) stay out
    env = {k: v for k, v in os.environ.items()
           if k not in ("TORCH", "PY", "CONDA_DEFAULT_ENV", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    out = subprocess.run(["make", "-s", "--no-print-directory", "--eval", f"show-it: ; @echo '$({name})'", "show-it"],
                         cwd=REPO, capture_output=True, text=True, check=True, env={**env, **environ})
    return out.stdout.strip()


def test_the_makefile_installs_the_pin():
    assert make_variable("TORCH") == pin()[0]
    assert "torch==" not in (REPO / "Makefile").read_text(), "the Makefile reads the pin, it does not restate it"


def test_environment_yml_names_the_pin_and_its_cuda():
    text = (REPO / "environment.yml").read_text()
    torch_lines = re.findall(r"^\s+- (torch\S*)", text, re.MULTILINE)
    assert torch_lines == [pin()[0]], "environment.yml installs the pinned torch, once"
    assert re.findall(r"^\s+- cuda-version=(\S+)", text, re.MULTILINE) == [pin()[1]]
    for package in ("cuda-nvcc", "cuda-cudart-dev", "cxx-compiler", "make"):  # what `make run` and `make test` need
        assert re.search(rf"^\s+- {package}\b", text, re.MULTILINE), package


def test_the_conda_environment_is_the_one_the_makefile_recognises():
    name = re.search(r"^name: (\S+)$", (REPO / "environment.yml").read_text(), re.MULTILINE).group(1)
    assert make_variable("PY", CONDA_DEFAULT_ENV=name) == "python"  # no venv inside the environment
    assert make_variable("PY", CONDA_DEFAULT_ENV="base") == ".venv/bin/python"
    assert make_variable("PY") == ".venv/bin/python"


def test_pyprojects_floor_admits_the_pin():
    (floor,) = [Requirement(r) for r in _pyproject_dependencies() if Requirement(r).name == "torch"]
    assert floor.specifier.contains(pinned_version())


def _pyproject_dependencies() -> list[str]:
    text = (REPO / "pyproject.toml").read_text()
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.MULTILINE | re.DOTALL).group(1)
    return re.findall(r'"([^"]+)"', block)


def recorded_torch_versions() -> set[str]:
    return {json.loads(p.read_text())["torch"] for p in REPO.glob("results/*/*.json")}


def test_the_readme_states_the_pin_and_the_recorded_runs_torch():
    readme = " ".join((REPO / "README.md").read_text().split())
    requirement, cuda = pin()
    assert f"`torch-requirement.txt`: `{requirement}`, a CUDA {cuda} build" in readme
    stated = re.search(r"The recorded runs under `results/` were made with (.+?), ", readme)
    assert stated, "the README says which torch the recorded runs used"
    assert sorted(re.findall(r"torch (\S+?) ?\(", stated.group(1))) == sorted(recorded_torch_versions())


def test_this_machines_torch_is_the_pinned_build_where_it_is_the_pinned_version():
    if torch.__version__.split("+")[0] != pinned_version():
        pytest.skip(f"torch {torch.__version__} here (PY= or TORCH= chose another), not the pin")
    if torch.version.cuda is not None:  # a CPU build of the pinned version says nothing of its CUDA
        assert torch.version.cuda.split(".")[0] == pin()[1].split(".")[0], \
            f"torch {torch.__version__} is a CUDA {torch.version.cuda} build; {PIN_FILE.name} says CUDA {pin()[1]}"
