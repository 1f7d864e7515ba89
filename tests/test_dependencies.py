"""pyproject.toml and environment.yml list the same dependencies (environment.yml with torch's pin in place
of pyproject's floor: tests/test_torch_pin.py); installing claims no generic name."""
import sys

import pytest

from utils import REPO

tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")


def conda_pip_list() -> list[str]:
    lines = (REPO / "environment.yml").read_text().splitlines()
    start = lines.index("  - pip:") + 1
    reqs = []
    for line in lines[start:]:
        if not line.startswith("      - "):
            break
        reqs.append(line.removeprefix("      - ").split(" #")[0].strip())  # without a trailing comment
    return reqs


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_environment_yml_matches_pyproject():
    project = [r for r in _pyproject()["project"]["dependencies"] if not r.startswith("torch")]
    conda = [r for r in conda_pip_list() if not r.startswith("torch")]
    assert "-e .[lab,test]" in conda, "environment.yml installs the project's dependencies with both extras"
    assert sorted(project) == sorted(r for r in conda if not r.startswith("-e ")), \
        "edit pyproject.toml and environment.yml together"
    assert [r for r in conda_pip_list() if r.startswith("torch")], "environment.yml installs torch (its pin)"


def test_installing_puts_no_package_into_site_packages():
    # `utils` and `solutions` are generic names: installed, they would collide with other projects'
    assert _pyproject()["tool"]["setuptools"]["packages"] == []
    assert _pyproject()["tool"]["pytest"]["ini_options"]["pythonpath"] == ["."]


def test_the_kernels_alone_need_no_jupyter():
    project = _pyproject()["project"]
    assert not {"jupyterlab", "papermill", "nbval", "pytest"} & set(project["dependencies"])
    assert {"jupyterlab", "papermill"} <= set(project["optional-dependencies"]["lab"])
    assert {"pytest", "nbval"} <= set(project["optional-dependencies"]["test"])
