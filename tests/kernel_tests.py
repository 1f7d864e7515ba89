"""What several test modules share: the opening tests of a kernel file's module, a kernel's output
over NaN-poisoned memory, running a notebook's checker cell on its own, and fake harness reports
for testing checker verdicts, and a notebook's from-scratch kernel exercise (ScratchExercise)."""
import ast
import json

import pytest
import torch

from utils import REPO, build, check


def kernel_file_tests(kernel: str, exports: set[str], kernels_dir=None):
    """The `kernels` fixture (the built module) and the two tests every kernel file gets: it
    exports exactly `exports`, and (on CI too: nvcc, no GPU) it compiles. Use as
        kernels, test_exports, test_compiles = kernel_file_tests("groupnorm", EXPORTS)
    `kernels_dir`: the kernel's folder when it is not kernels/ itself (kernels/probes/)."""

    @pytest.fixture(scope="module")
    def kernels():
        return build.load_kernel(kernel, kernels_dir=kernels_dir)

    def test_exports():
        assert {e.name for e in build.exported_functions(build.kernel_source(kernel, kernels_dir))} == exports

    @pytest.mark.compile
    def test_compiles():
        module = build.load_kernel(kernel, kernels_dir=kernels_dir)
        assert all(callable(getattr(module, name)) for name in exports)

    return kernels, test_exports, test_compiles


def poisoned(fn, *args):
    """fn(*args) after NaN was left in the memory its output will get: an element never written
    stays NaN. (The caching allocator hands a freed block of the same size back first.)"""
    n = fn(*args).numel()
    torch.full((n,), float("nan"), device="cuda")  # freed at once: NaN in the cached block
    return fn(*args)


def notebook_cell(notebook: str, function: str) -> dict:
    """Run, on its own, the code cell of notebooks/<notebook> that defines `function`; its namespace."""
    nb = json.loads((REPO / "notebooks" / notebook).read_text())
    for cell in nb["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code" and f"def {function}(" in source:
            namespace: dict = {}
            exec(compile(source, f"{notebook}: the cell defining {function}", "exec"), namespace)
            return namespace
    raise AssertionError(f"no code cell of {notebook} defines {function}()")


def fake_report(name: str, *checks: tuple[str, str]) -> check.CheckReport:
    """A harness report with these (check, status) results, for testing a checker's verdict."""
    return check.CheckReport(name, "strict", "cuda:0", [check.CheckResult(n, s) for n, s in checks])


class ScratchExercise:
    """A kernel written from scratch in a notebook's cell (the text assigned to `source_var`), launched by the
    notebook's own launch cell (the one defining `launch_fn`, which builds the text under `name` into the module
    variable `module_var`), with its reference answer and the shortcuts its checker must refuse in
    tests/exercise_answers/ (`shortcuts/<prefix>*.cu`). What the test modules of chapters 11 and 12 share."""

    def __init__(self, notebook: str, source_var: str, launch_fn: str, module_var: str, name: str, answer: str,
                 prefix: str):
        self.notebook = REPO / "notebooks" / notebook
        self.source_var, self.launch_fn, self.module_var, self.name = source_var, launch_fn, module_var, name
        answers = REPO / "tests" / "exercise_answers"
        self.answer_path = answers / answer
        self.shortcuts = sorted((answers / "shortcuts").glob(f"{prefix}*.cu"))
        self.scratch = build.build_root_dir().parent / "exercise_answers"  # a fixed path, so the builds are cached

    def cells(self) -> list[str]:
        return ["".join(c["source"]) for c in json.loads(self.notebook.read_text())["cells"] if c["cell_type"] == "code"]

    def starter(self) -> str:
        """The text the notebook commits in `source_var`."""
        for src in self.cells():
            if f'{self.source_var} = r"""' in src:
                for node in ast.parse(src).body:
                    if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == self.source_var for t in node.targets):
                        return ast.literal_eval(node.value)
        raise AssertionError(f"no cell of {self.notebook.name} assigns {self.source_var}")

    def launch_cell(self) -> str:
        found = [src for src in self.cells() if f"def {self.launch_fn}(" in src]
        assert found, f"no cell of {self.notebook.name} defines {self.launch_fn}"
        return found[0]

    def text(self, variant: str) -> str:
        """The starter, the answer, or a shortcut (by its file's stem)."""
        if variant == "starter":
            return self.starter()
        return self.answer_path.read_text() if variant == "answer" else (self.answer_path.parent / "shortcuts" / f"{variant}.cu").read_text()

    def folder(self, variant: str):
        """Where each text is built: the starter where the chapter builds it, the others each in a folder of its own."""
        if variant == "starter":
            return build.SCRATCH_DIR
        return self.scratch / (f"{self.name}_answer" if variant == "answer" else variant)

    def load(self, variant: str):
        return build.load_source(self.name, self.text(variant), scratch_dir=self.folder(variant))

    def launch_fn_for(self, module):
        """The notebook's launch cell, run with `module` as the reader's build."""
        namespace = {"torch": torch, "build": build, "S": type("S", (), {"can_compile": False})(), self.source_var: ""}
        exec(compile(self.launch_cell(), f"{self.notebook.name}'s launch cell", "exec"), namespace)
        namespace[self.module_var] = module
        return namespace[self.launch_fn]

    def check_static_reading(self, path, static, caught: dict, named: dict) -> None:
        """A shortcut's text: refused by the static reading, with the words `caught` gives for it, or passed, and
        then one the GPU tests name (`named`)."""
        problems = static(path.read_text())
        if path.stem in caught:
            assert len(problems) == 1 and caught[path.stem] in problems[0], problems
        else:
            assert problems == [] and path.stem in named, problems

    def check_shortcut_files(self, caught: dict, named: dict) -> None:
        assert {p.stem for p in self.shortcuts} == set(caught) | set(named)

    def check_launch_cell_fails(self, path, exercise, caught: dict, named: dict) -> None:
        """The whole checker (`exercise(fn, text)` -> (results, verdict)) through the notebook's launch cell on a
        shortcut's build: Not yet, the shortcut named, refused before running exactly when the text was."""
        results, verdict = exercise(self.launch_fn_for(self.load(path.stem)), path.read_text())
        assert verdict.startswith("Not yet:"), verdict
        assert (caught.get(path.stem) or named[path.stem]) in verdict, verdict
        assert (not results) == (path.stem in caught)
