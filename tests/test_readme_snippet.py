"""The README's drop-in snippet runs as written on the CPU (no GPU visible) and compares ModelNew against Model."""
import os
import re
import subprocess
import sys

from utils import REPO


def snippet() -> str:
    text = (REPO / "README.md").read_text()
    section = text[text.index("\n## The solutions"):]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_the_snippet_compares_against_Model_without_assuming_a_gpu():
    code = snippet()
    assert "s.Model(" in code and "s.ModelNew(" in code and "load_state_dict" in code
    assert ".cuda()" not in code


def test_the_readme_snippet_runs_on_the_cpu():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-c", snippet()], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    diff = re.fullmatch(r"max \|ModelNew - Model\| = (\S+)\n", run.stdout)
    assert diff, run.stdout
    assert float(diff.group(1)) < 1e-4  # the CPU path computes the reference math
