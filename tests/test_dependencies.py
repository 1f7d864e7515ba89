"""pyproject.toml and environment.yml list the same dependencies."""
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
        reqs.append(line.removeprefix("      - ").strip())
    return [r for r in reqs if not r.startswith("-e ")]


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert sorted(project) == sorted(conda_pip_list()), "edit pyproject.toml and environment.yml together"
