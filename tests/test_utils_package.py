"""utils/__init__.py's docstring is the map of the package: it names every module, one line each."""
import re

import utils
from utils import REPO


def test_the_docstring_names_every_module():
    listed = set(re.findall(r"(?m)^([a-z_][a-z0-9_]*)\s+\S", utils.__doc__))  # a name at the start of a line
    modules = {p.stem for p in (REPO / "utils").glob("*.py") if p.stem != "__init__"}
    packages = {p.parent.name for p in (REPO / "utils").glob("*/__init__.py")}
    every = modules | packages
    assert listed == every, (f"utils/__init__.py's docstring misses {sorted(every - listed)} "
                             f"and names {sorted(listed - every)}, which are not modules")
