"""docs/ARCHITECTURE.md, the design document, stays true to the repository (all on the CPU).

- Every repository path it names in backticks (or in a diagram) exists; `<placeholder>` parts match
  anything, so `results/<device>/` needs at least one device folder.
- Every dotted name of utils/ or solutions/ it names in backticks (`utils.build.load_kernel`)
  imports and resolves; every `python -m <module>` names a module that exists, every `make <target>`
  a target of the Makefile.
- Every reference to the document in the code, notes and notebooks names docs/ARCHITECTURE.md,
  never a bare name; where it quotes a section (`docs/ARCHITECTURE.md, "Performance method"`, or a
  link to `docs/ARCHITECTURE.md#performance-method`), that section is a heading of the document.
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import re
from pathlib import Path

import pytest

from utils import REPO

DOC = REPO / "docs/ARCHITECTURE.md"
BARE = "ARCHITECTURE" ".md"  # the name without its folder, written so that this file does not mention it bare

ROOTS = (".ci", "docs", "experiments", "kernels", "notebooks", "results", "solutions", "tests", "utils")
TOP_FILES = ("README.md", "Makefile", "pyproject.toml", "environment.yml", "conftest.py")
PATH = re.compile(r"^(?:(?:%s)/[^\s`'\"]*|%s)$" % ("|".join(re.escape(r) for r in ROOTS),
                                                  "|".join(re.escape(f) for f in TOP_FILES)))
DOTTED = re.compile(r"^(?P<name>(?:utils|solutions)(?:\.\w+)+)(?:\(.*\))?$", re.DOTALL)
FENCE = re.compile(r"^```.*?^```[ \t]*$", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#{1,6}[ \t]+(?P<title>.+?)[ \t]*#*[ \t]*$", re.MULTILINE)

# Where the code may refer to the document: sources, notes, notebooks (results/ holds recordings).
SCANNED_SUFFIXES = {".py", ".md", ".ipynb", ".cu", ".cuh", ".toml", ".yml", ".yaml", ".txt", ".sh"}
SCANNED_NAMES = {"Makefile", "run"}
SKIPPED_DIRS = {".git", ".venv", "build", "results", "__pycache__", ".ipynb_checkpoints", ".pytest_cache"}
# A mention, then optionally the section it quotes: `, "Section"`, ` ("Section")` or `#anchor`.
REFERENCE = re.compile(r"ARCHITECTURE\.md(?:#(?P<anchor>[\w-]+)|(?:,[ \t]*|[ \t]+\([ \t]*)\"(?P<section>[^\"\n]+)\")?")


def _doc() -> str:
    return DOC.read_text()


def _prose_and_fences(text: str) -> tuple[str, list[str]]:
    return FENCE.sub("", text), FENCE.findall(text)


def _inline_spans(text: str) -> list[str]:
    prose, _ = _prose_and_fences(text)
    return [" ".join(s.split()) for s in re.findall(r"`([^`]+)`", prose)]


def _fence_paths(text: str) -> list[str]:
    _, fences = _prose_and_fences(text)
    tokens = [t.strip("(),;:") for block in fences for t in block.split()]
    return [t for t in tokens if "/" in t and PATH.match(t)]


def _exists(path: str) -> bool:
    path = path.split(":")[0].rstrip("/")  # kernels/<name>.cu:<line> names the file
    if "<" in path or "*" in path:
        pattern = re.sub(r"<[^>]*>", "*", path)
        return any(REPO.glob(pattern))
    return (REPO / path).exists()


def headings(text: str) -> list[str]:
    prose, _ = _prose_and_fences(text)
    return [m.group("title") for m in HEADING.finditer(prose)]


def anchor(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _make_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z][\w-]*)[ \t]*:", (REPO / "Makefile").read_text(), re.MULTILINE))


def _scanned_files() -> list[Path]:
    found = []
    for path in REPO.rglob("*"):
        rel = path.relative_to(REPO)
        if any(part in SKIPPED_DIRS for part in rel.parts) or not path.is_file() or path == DOC:
            continue
        if path.suffix in SCANNED_SUFFIXES or path.name in SCANNED_NAMES:
            found.append(path)
    return sorted(found)


def _text_of(path: Path) -> str:
    if path.suffix == ".ipynb":  # the cells' text, with its quotes unescaped
        cells = json.loads(path.read_text()).get("cells", [])
        return "\n".join("".join(c.get("source", [])) for c in cells)
    return path.read_text(errors="replace")


def reference_problems(text: str, where: str, sections: list[str]) -> list[str]:
    """What is wrong with each mention of the document in `text`: a bare name, or a quoted section
    (or anchor) that is no heading of the document."""
    problems = []
    titles = {t.lower() for t in sections}
    anchors = {anchor(t) for t in sections}
    for m in REFERENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        if not text[:m.start()].endswith("docs/"):
            problems.append(f"{where}:{line}: names {BARE} without its folder: write docs/ARCHITECTURE.md")
        if m.group("section") is not None and m.group("section").strip().lower() not in titles:
            problems.append(f"{where}:{line}: quotes the section \"{m.group('section')}\", which is no heading of "
                            "docs/ARCHITECTURE.md")
        if m.group("anchor") is not None and m.group("anchor").lower() not in anchors:
            problems.append(f"{where}:{line}: links to #{m.group('anchor')}, which is no heading of "
                            "docs/ARCHITECTURE.md")
    return problems


def test_the_document_exists_and_the_readme_points_at_it():
    assert DOC.is_file(), "docs/ARCHITECTURE.md is missing"
    readme = (REPO / "README.md").read_text()
    assert "docs/ARCHITECTURE.md" in readme, "README.md does not point at docs/ARCHITECTURE.md"
    for section in ("Layout", "Data flow", "The drop-in contract", "The ops", "Correctness harness",
                    "Performance method", "Modes"):
        assert section in headings(_doc()), f"docs/ARCHITECTURE.md has no section {section!r}"


def test_every_path_it_names_exists():
    named = [s for s in _inline_spans(_doc()) if PATH.match(s)] + _fence_paths(_doc())
    assert named, "no repository path found in docs/ARCHITECTURE.md: is the pattern still right?"
    missing = sorted({p for p in named if not _exists(p)})
    assert not missing, "docs/ARCHITECTURE.md names paths that do not exist:\n  " + "\n  ".join(missing)


def test_every_dotted_name_resolves():
    names = sorted({m.group("name") for s in _inline_spans(_doc()) if (m := DOTTED.match(s))})
    assert names, "no dotted name found in docs/ARCHITECTURE.md: is the pattern still right?"
    unresolved = [n for n in names if not _resolves(n)]
    assert not unresolved, "docs/ARCHITECTURE.md names what does not exist:\n  " + "\n  ".join(unresolved)


def test_every_command_exists():
    spans = _inline_spans(_doc())
    modules = sorted({m.group(1) for s in spans if (m := re.search(r"python -m ([\w.]+)", s))})
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    targets = sorted({m.group(1) for s in spans if (m := re.match(r"make ([\w-]+)", s))})
    unknown = sorted(set(targets) - _make_targets())
    assert modules and targets
    assert not missing, f"docs/ARCHITECTURE.md runs modules that do not exist: {missing}"
    assert not unknown, f"docs/ARCHITECTURE.md names make targets the Makefile lacks: {unknown}"


def test_every_reference_names_the_document_and_a_section_it_has():
    sections = headings(_doc())
    problems = [p for path in _scanned_files()
                for p in reference_problems(_text_of(path), str(path.relative_to(REPO)), sections)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("text, wrong", [
    (f'see docs/{BARE}, "Performance method"', False),
    (f"(docs/{BARE})", False),
    (f"[design](docs/{BARE}#the-drop-in-contract)", False),
    (f"({BARE})", True),
    (f'docs/{BARE}, "Performance"', True),
    (f"docs/{BARE}#nowhere", True),
])
def test_the_reference_check_sees_a_bare_name_and_a_missing_section(text, wrong):
    sections = ["Layout", "Performance method", "The drop-in contract"]
    assert bool(reference_problems(text, "x", sections)) == wrong


def test_the_path_check_sees_a_missing_path():
    assert _exists("results/<device>/") and _exists("kernels/<name>.cu:<line>") and _exists("utils/ops.py")
    assert not _exists("utils/no_such_module.py") and not _exists("kernels/<name>.cuda")
