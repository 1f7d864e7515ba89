"""utils.export: each solution as one self-contained KernelBench file.

On the CPU (CI), from the exported text of each solution as it is in solutions/ (a Freezable
ModelNew whose forward calls a utils.ops.WholeModel): it imports nothing of this repository and
includes no file; it keeps the reference's sizes, get_inputs and get_init_inputs verbatim and
leaves out its Model; its ModelNew is a plain nn.Module (Freezable left out, `weight_residual =
None` in its place) whose parameters are the reference Model's (names, shapes, creation order,
values under one seed, strict load_state_dict both ways), with no docstring of the reference's or
the solution's; its forward, run with a stand-in launcher, hands the launcher what the workbook's
forward hands the op at inference (weight_residual None, save_gemm_output False) and returns its
first output; KernelBench's static rules (export.static_check, written from its
kernel_static_checker.py) find nothing in any of the four exports, each finding named by rule, line
and the kernel file it came from, and each rule fires where KernelBench's does; the docstring says
what the kernel checks and builds for, that the weight's small parts are made on every call, and
no CPU or cuBLAS path and no freezing; the lines that find the CUDA toolkit find what
utils.toolchain finds, behind a wrapper nvcc too, or say why not; a registered op's ops.<name>
reaches the launcher <name> by position or by name; solutions the export cannot carry over are
refused with the reason. Where kernels compile: every export builds through its own load_inline and
its own CUDA_HOME (94, 75, 37 and 62 share one build of kernels/fused_gemm_groupnorm.cu). On the
GPU: each export passes KernelBench's own evaluation, 5 seeded trials at atol = rtol = 1e-4, then
timing.
"""
import ast
import importlib
import os
import re
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from utils import REPO, build, export, toolchain
from utils.freezing import Freezable
from utils.problems import all_problems, get_problem

SOLUTIONS = {p.id: REPO / "solutions" / f"{p.slug}.py" for p in all_problems()}
ALLOWED_IMPORTS = {"inspect", "os", "shutil", "pathlib", "types", "torch", "torch.nn", "torch.utils", "torch.utils.cpp_extension"}


@pytest.fixture(scope="module")
def texts():
    """Every solution's exported text, made once."""
    return {pid: export.export_text(path) for pid, path in SOLUTIONS.items()}


def _imports(text: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module)
    return found


def _top_level(text: str, kind=(ast.ClassDef, ast.FunctionDef)) -> dict[str, ast.AST]:
    return {n.name: n for n in ast.parse(text).body if isinstance(n, kind)}


@pytest.mark.parametrize("pid", SOLUTIONS)
def test_the_export_is_self_contained(texts, pid):
    text = texts[pid]
    assert _imports(text) <= ALLOWED_IMPORTS, _imports(text) - ALLOWED_IMPORTS
    assert '#include "' not in text  # every header of kernels/ inlined
    assert not re.search(r"\bopen\(|read_text|read_bytes|__file__", text)  # reads no file at run time
    assert {"ModelNew", "get_inputs", "get_init_inputs"} <= set(_top_level(text)) and "Model" not in _top_level(text)
    reference_path = REPO / "utils" / "kernelbench" / f"{get_problem(pid).slug}.py"
    reference = reference_path.read_text()
    for node in ast.parse(reference).body:  # the sizes and the input functions, verbatim
        if not isinstance(node, (ast.Import, ast.ImportFrom, ast.ClassDef)):
            assert ast.get_source_segment(reference, node) in text
    # one build: the whole model's kernel file (kernels/fused_gemm_groupnorm.cu), after CUDA_HOME is set
    assert text.count("load_inline(") == 1 and "utils.kernelbench" not in text
    assert -1 < text.find(export.cuda_toolkit_text()) < text.find("= load_inline(")


@pytest.mark.parametrize("pid", SOLUTIONS)
def test_every_export_meets_kernelbenchs_static_rules(texts, pid):
    """validate_kernel_static(code, backend="cuda", precision="fp32"): no error and no warning."""
    findings = export.static_check(texts[pid])
    if findings:
        pytest.fail(f"the export of {pid}:\n" + "\n".join(map(str, findings)), pytrace=False)


@pytest.mark.parametrize("pid", SOLUTIONS)
def test_every_export_converts_nothing_to_16_bits(texts, pid):
    """Stricter than KernelBench's regular expressions: no CUDA intrinsic that rounds a float to bf16 or fp16
    (the 16-bit writers and the mixed-input GEMM stay out of a float32 export: export.FLOAT32_ONLY)."""
    code = export.without_comments(texts[pid])
    assert not re.findall(r"__floats?2(?:half|bfloat16)\w*\s*\(", code)


def _exported(text: str, name: str, **names):
    """The export's top-level function or class `name`, built from its text alone, with `names` as its globals."""
    exec(compile(ast.Module([_top_level(text)[name]], []), "<export>", "exec"), names)  # noqa: S102
    return names[name]


def _model_new(text: str, ops: SimpleNamespace | None = None) -> type:
    """The export's ModelNew class, built from its text alone (no kernel compiled: ops is empty, or `ops`)."""
    return _exported(text, "ModelNew", torch=torch, nn=torch.nn, ops=ops or SimpleNamespace())


@pytest.mark.parametrize("pid", SOLUTIONS)
def test_modelnew_stands_alone_with_the_reference_parameters(texts, pid):
    p = get_problem(pid)
    model_new = _model_new(texts[pid])
    assert model_new.__bases__ == (torch.nn.Module,)
    solution = _solution_module(pid)
    if issubclass(solution.ModelNew, Freezable):  # left out: no freezing, the small parts made on every call
        assert model_new.weight_residual is None and "weight_residual = None  # the export never keeps" in texts[pid]
        assert not [a for a in ("freeze", "unfreeze", "frozen") if hasattr(model_new, a)]
    torch.manual_seed(0)
    new = model_new(*p.init_inputs("small"))
    ref = p.make_model("small", seed=0)
    assert [(k, v.shape) for k, v in new.state_dict().items()] == [(k, v.shape) for k, v in ref.state_dict().items()]
    assert [k for k, _ in new.named_parameters()] == [k for k, _ in ref.named_parameters()]  # the creation order
    assert all(torch.equal(a, b) for a, b in zip(ref.state_dict().values(), new.state_dict().values()))  # one seed
    new.load_state_dict(p.make_model("small", seed=2).state_dict(), strict=True)
    ref.load_state_dict(new.state_dict(), strict=True)
    # no docstring of the reference's (Model's, its forward's) or of the solution's
    reference = (REPO / "utils" / "kernelbench" / f"{p.slug}.py").read_text()
    docstrings = [ast.get_docstring(n) for n in ast.walk(ast.parse(reference))
                  if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(n)]
    docstrings.append(ast.get_docstring(ast.parse(SOLUTIONS[pid].read_text())))
    flat = " ".join(texts[pid].split())
    assert docstrings and not [d for d in docstrings if " ".join(d.split()) in flat]
    assert "allow_torch_ops" not in texts[pid]  # the workbook's note about a cuBLAS path the export has not


def _solution_module(pid):
    """The workbook's solution module of a problem, as solutions/ has it."""
    return importlib.import_module(f"solutions.{get_problem(pid).slug}")


@pytest.mark.parametrize("pid", SOLUTIONS)
def test_the_forward_hands_the_launcher_what_the_workbook_hands_the_op(texts, pid, monkeypatch):
    """The solution's forward, unchanged in the export: the workbook's ops.<name> is a WholeModel, and
    the export's ops.<name> calls the launcher with what the WholeModel calls the op with at inference
    (an unfrozen model's weight_residual None, save_gemm_output False) and returns its first output."""
    import utils.ops

    p, text = get_problem(pid), texts[pid]
    (name,) = export.read_solution(SOLUTIONS[pid]).ops_used
    out, calls = torch.empty(1), {}

    def launcher(where):
        def launch(*args):
            calls[where] = args
            return out, torch.empty(0)
        return launch

    assert isinstance(getattr(utils.ops, name), utils.ops.WholeModel)  # (a registered op: see the sample's tests)
    monkeypatch.setattr(getattr(utils.ops, name), "op", launcher("workbook"))
    function = _exported(text, f"_{name}", _kernels_0=SimpleNamespace(**{name: launcher("export")}))
    torch.manual_seed(0)
    new = _model_new(text, SimpleNamespace(**{name: function}))(*p.init_inputs("small"))
    workbook = _solution_module(pid).ModelNew(*p.init_inputs("small"))
    workbook.load_state_dict(new.state_dict(), strict=True)
    (x,) = p.get_inputs("small")
    with torch.no_grad():
        assert workbook(x) is out and new(x) is out
    assert len(calls["export"]) == len(calls["workbook"]) and calls["export"][-2:] == (None, False)
    for a, b in zip(calls["export"], calls["workbook"]):
        assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b


def _fused_kernel_checks() -> tuple[int, int, tuple[int, ...], str]:
    """(K's multiple for float32 x, for 16-bit x, the group widths, the arch) as kernels/fused_gemm_groupnorm.cu
    checks and builds them: the multiples from `fusable`'s description, the widths from the launcher's error
    message, a second reading beside export's own."""
    source = build.kernel_source(export.FUSED_KERNEL)
    ((k32, k16),) = set(re.findall(r"K % (\d+) == 0 \(float32\) or K % (\d+) == 0 \(bfloat16, float16\)", source))
    (widths,) = set(re.findall(r"take groups of ([\d, or]+) channels", source))
    return int(k32), int(k16), tuple(int(w) for w in re.findall(r"\d+", widths)), build.required_arch(source)


@pytest.mark.parametrize("pid", SOLUTIONS)
def test_the_docstring_says_what_the_file_needs(texts, pid):
    doc = ast.get_docstring(ast.parse(texts[pid]))
    k32, k16, widths, arch = _fused_kernel_checks()
    assert (k32, k16, widths) == export.fused_conditions(), "the kernel's message and its checks disagree"
    d = get_problem(pid).dims("full")
    flat = " ".join(doc.split())
    assert f"sm_{toolchain.arch_code(arch)}" in flat and "compute capability 9.0" in flat
    assert f"K % {k32} == 0," in flat and "groups of 16, 32 or 64 channels" in flat
    assert f"K = {d.in_features} and groups of {d.channels_per_group} channels" in flat
    assert d.in_features % k32 == 0 and d.channels_per_group in widths  # this file's sizes do take the kernel
    assert "float32" in flat and "no CPU path" in flat and "cold build" in flat and "ninja" in flat
    assert not re.search(r"cuBLAS|off sm_90|fall(s)? back", flat)  # no path the exported launcher has not
    assert "small parts of x and of the weight made on every call" in flat and not re.search("freez", flat, re.I)


def _find_cuda_home():
    """The exports' own toolkit finder, from the text they carry."""
    return _exported(export.cuda_toolkit_text(), "_find_cuda_home", os=os, shutil=shutil, Path=Path)


def _toolkit(folder: Path) -> Path:
    (folder / "bin").mkdir(parents=True)
    (folder / "lib64").mkdir()
    (folder / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (folder / "bin" / "nvcc").chmod(0o755)
    (folder / "lib64" / "libcudart.so").write_text("")
    (folder / "include").mkdir()
    (folder / "include" / "cuda_runtime.h").write_text("")
    return folder


def test_the_cuda_toolkit_is_found_as_the_loader_finds_it(tmp_path, monkeypatch):
    find = _find_cuda_home()
    toolkit = export.cuda_toolkit_text()
    assert "cpp_extension.CUDA_HOME = " in toolkit and 'os.environ["CUDA_HOME"] = ' in toolkit
    cuda = _toolkit(tmp_path / "cuda")
    wrapper = tmp_path / "wrapper" / "bin"  # /usr/local/bin/nvcc: a script that runs the toolkit's nvcc
    wrapper.mkdir(parents=True)
    (wrapper / "nvcc").write_text(f"#!/bin/sh\nexec {cuda}/bin/nvcc \"$@\"\n")
    (wrapper / "nvcc").chmod(0o755)
    for var in ("CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(sys, "prefix", str(tmp_path))  # not a conda environment's Python
    monkeypatch.setenv("PATH", str(wrapper))
    monkeypatch.setattr(toolchain, "FALLBACK_CUDA_HOMES", (cuda,))
    # torch would guess the wrapper's parent; the export and the loader take the usual place
    assert find(usual=(str(cuda),)) == toolchain.find_cuda_home() == cuda.resolve()
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "wrapper"))  # no toolkit there: passed over, as the loader does
    assert find(usual=(str(cuda),)) == toolchain.find_cuda_home() == cuda.resolve()
    other = _toolkit(tmp_path / "other")
    monkeypatch.setenv("CUDA_PATH", str(other))
    assert find(usual=(str(cuda),)) == toolchain.find_cuda_home() == other.resolve()
    monkeypatch.delenv("CUDA_HOME")
    monkeypatch.delenv("CUDA_PATH")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "nvcc").symlink_to(other / "bin" / "nvcc")  # nvcc on PATH links into a toolkit: its real path's
    monkeypatch.setenv("PATH", str(linked))
    assert find(usual=(str(cuda),)) == other.resolve()
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    with pytest.raises(RuntimeError, match="no CUDA toolkit found.*Set CUDA_HOME"):
        find(usual=())


def test_on_this_machine_the_export_finds_the_loaders_toolkit():
    loader = toolchain.find_cuda_home()
    if loader is None:
        pytest.skip("no CUDA toolkit here")
    found = _find_cuda_home()()
    tried = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), os.environ.get("CONDA_PREFIX"),
             *map(str, toolchain.FALLBACK_CUDA_HOMES)]
    if found != loader and not any(t and Path(t).resolve() == loader for t in tried):
        pytest.skip(f"the loader found {loader} through `nvcc -dryrun` alone, which the export does not run")
    assert found == loader


def _finding_names(text: str) -> list[tuple[str, int]]:
    return [(f.rule.name, f.line) for f in export.static_check(text)]


def test_the_static_rules_fire_where_kernelbenchs_do():
    base = "from torch.utils.cpp_extension import load_inline\nsrc = '__global__ void k(float* x) { x[threadIdx.x] = 0; }'\n"
    assert _finding_names(base) == []
    cases = {  # a line added to the file: the rule it breaks
        '    """Performs the forward pass of the model."""': "code_bypass",  # a docstring is code to KernelBench
        "    pass": "code_bypass",
        "try:": "code_bypass",
        "except RuntimeError:": "code_bypass",
        "    except:": "code_bypass",
        "import threading": "thread_injection",
        "torch.cuda.synchronize = lambda: None": "timing_event_patch",
        "class Lazy(torch.Tensor):": "lazy_eval",
        "x = torch.sigmoid(x) * x": "torch_computation_ops",
        "y = F.relu(x)": "torch_computation_ops",
        "layer = torch.nn.Linear(4, 4)": "pytorch_wrap",
        "    found.record_stream(stream);": "stream_injection",
        "s = torch.cuda.Stream()": "stream_injection",
        "x = x.half()": "precision_downgrade",
    }
    for line, rule in cases.items():
        assert _finding_names(base + line + "\n") == [(rule, 3)], line
    fine = ["x = 1  # pass", "int y = 0; // except on the last row", "the test passed; a bypass", "torch.sigmoid_(x)",
            "import torch.nn as nn", "self.fc = nn.Linear(4, 4)", "p = torch.nn.Parameter(w)", "except_rows = 2"]
    for line in fine:
        assert _finding_names(base + line + "\n") == [], line
    assert _finding_names("src = '__global__ void k() { threadIdx.x; }'\n") == [("cuda_impl: compiled inline", 0)]
    assert _finding_names("from torch.utils.cpp_extension import load_inline\n") == [
        ("cuda_impl: __global__", 0), ("cuda_impl: kernel features", 0)]
    # KernelBench cuts at the first # or //, inside strings too, and matches across line ends
    assert _finding_names(base + "url = 'http://host' ; pass\n") == []
    assert _finding_names(base + "all rows except\nthe last\n") == [("code_bypass", 3)]
    (finding,) = export.static_check(base + "x = torch.tanh(x)\n")
    assert "warning rule torch_computation_ops" in str(finding) and "line 3: 'x = torch.tanh(x)'" in str(finding)
    # in an export, where the line came from: the kernel file, or the header inlined into it
    q = "'" * 3
    exported = (base + f"# ---- kernels/a.cu, its headers inlined ----\n_CUDA_SOURCE_0 = r{q}\n"
                "// ---- inlined: common/b.cuh ----\ns.record_stream(t);\n// ---- end of common/b.cuh ----\n"
                f"s.record_stream(t);\n{q}\ns.record_stream(t)\n")
    assert [f.origin for f in export.static_check(exported)] == ["kernels/common/b.cuh", "kernels/a.cu", ""]
    assert "at line 6 (from kernels/common/b.cuh): 's.record_stream(t);'" in str(export.static_check(exported)[0])


def test_headers_are_inlined_once_each():
    text = export.inline_source(REPO / "kernels" / "groupnorm.cu")
    assert text.count("---- inlined: common/check.cuh ----") == 1
    assert "(inlined above: common/check.cuh)" in text  # groupnorm.cuh includes it again


def test_launcher_signatures_are_read_from_their_prototypes():
    signature = export.launcher_signature(build.Export(
        "f", "std::tuple<torch::Tensor, torch::Tensor> f(torch::Tensor x, const torch::Tensor& w, double eps = 1e-5, "
        "c10::optional<torch::Tensor> residual = c10::nullopt, bool keep = false)", "f"))
    assert signature.params == ["x", "w", "eps", "residual", "keep"] and signature.returns == 2
    assert signature.defaults == {"eps": "1e-5", "residual": "None", "keep": "False"}
    assert export.launcher_signature(build.Export("g", "torch::Tensor g()", "g")) == export.LauncherSignature([], {}, 1)
    with pytest.raises(export.ExportError, match="the default 'kSomething' of mode has no Python spelling"):
        export.launcher_signature(build.Export("h", "torch::Tensor h(int64_t mode = kSomething)", "h"))


OP = "linear_group_norm_leaky_relu_x2"
SAMPLE = f'''"""A solution of problem 62 as solutions/ writes them: a Freezable ModelNew, a whole model's op."""
from utils import ops
from utils.freezing import Freezable
from utils.kernelbench.p062_matmul_groupnorm_leakyrelu_sum import Model, get_init_inputs, get_inputs  # noqa: F401


class ModelNew(Freezable, Model):
    allow_torch_ops = ("aten::addmm",)  # a note to the workbook's harness

    def forward(self, x):
        gn = self.gn
        return ops.{OP}(x, self.fc.weight, self.fc.bias, gn.num_groups, gn.weight, gn.bias,
                        gn.eps, self.leaky_relu.negative_slope, weight_residual=self.weight_residual)
'''
HELPER = ("from utils import ops", "from utils import ops\nfrom utils.precision import flags")
LAST_ARGUMENT = "gn.eps, self.leaky_relu.negative_slope, weight_residual=self.weight_residual)"
# the same as the workbook first wrote them: ModelNew(Model), its forward calling the registered op itself
PLAIN = [("from utils.freezing import Freezable\n", ""), ("class ModelNew(Freezable, Model)", "class ModelNew(Model)"),
         (LAST_ARGUMENT, "gn.eps, self.leaky_relu.negative_slope)[0]")]
PLAIN_LAST_ARGUMENT = "gn.eps, self.leaky_relu.negative_slope)[0]"


@pytest.fixture
def sample(tmp_path):
    """SAMPLE with some edits, each (old text, new text), as a file: what is tested is the export's reading
    of the text, with utils.ops.<OP> as utils/ops.py makes it (a WholeModel)."""
    def make(*edits: tuple[str, str]) -> Path:
        text = SAMPLE
        for old, new in edits:
            assert old in text, old
            text = text.replace(old, new, 1)
        path = tmp_path / f"sample_{len(list(tmp_path.iterdir()))}.py"
        path.write_text(text)
        return path

    return make


@pytest.fixture
def plain_sample(sample, monkeypatch):
    """The same, PLAIN applied first, with utils.ops.<OP> the registered op itself."""
    import utils.ops

    monkeypatch.setattr(utils.ops, OP, getattr(torch.ops.workbook, OP))
    return lambda *edits: sample(*PLAIN, *edits)


WHOLE_MODEL = f"ops.{OP} (a utils.ops.WholeModel: x, w, linear_bias, num_groups, gamma, beta, eps, negative_slope"


@pytest.mark.parametrize("edits, error", [
    ([("class ModelNew(", "class Other(")], "no class ModelNew"),
    ([(f"ops.{OP}", "ops.not_an_op")], "ops.not_an_op"),
    ([HELPER, ("        gn = self.gn", "        gn = flags() and self.gn")], "uses flags"),  # a helper of utils/
    ([("        gn = self.gn", "        gn = Model.__init__ and self.gn")], "uses Model"),
    ([("        gn = self.gn", "        gn = super().forward and self.gn")], "uses super"),
    ([("    def forward(self, x):", "    def __init__(self, *args):\n        super().__init__(*args)\n\n"
                                    "    def forward(self, x):")], "defines __init__"),
    ([HELPER, ("class ModelNew(Freezable, Model)", "class ModelNew(flags, Freezable, Model)")],
     "ModelNew's bases are flags, Freezable, Model"),
    ([("class ModelNew(Freezable, Model)", "class ModelNew(Freezable)")], "ModelNew's bases are Freezable;"),
    # a Freezable that is not utils.freezing's: the module's own, or another module's
    ([("class ModelNew(", "class Freezable:\n    weight_residual = None\n\n\nclass ModelNew(")],
     "ModelNew's bases are Freezable, Model"),
    ([("from utils.freezing import Freezable", "from utils.precision import flags as Freezable")],
     "ModelNew's bases are Freezable, Model"),
    ([("        gn = self.gn", "        gn = self.freeze() and self.gn")],
     "uses self.freeze, which utils.freezing.Freezable gives"),
    ([("        gn = self.gn", "        gn = self.gn if self.frozen else self.gn")], "uses self.frozen"),
    ([(LAST_ARGUMENT, "gn.eps, slope=self.leaky_relu.negative_slope)")], f"called with slope=, which {WHOLE_MODEL}"),
    ([(LAST_ARGUMENT, "gn.eps, negative_slope=self.leaky_relu.negative_slope)")],  # the workbook's *rest: by position
     "called with negative_slope=, which ops."),
    ([(LAST_ARGUMENT, "gn.eps, weight_residual=self.weight_residual)")],
     f"called with 7 arguments by position and 1 by name; {WHOLE_MODEL}"),
    ([(LAST_ARGUMENT, "gn.eps, self.leaky_relu.negative_slope, self.weight_residual)")],
     f"called with 9 arguments by position and 0 by name; {WHOLE_MODEL}"),
])
def test_solutions_the_export_cannot_carry_over_are_refused(sample, edits, error):
    export.export_text(sample())  # as it is, the sample exports
    with pytest.raises(export.ExportError, match=re.escape(error)):
        export.export_text(sample(*edits))


@pytest.mark.parametrize("edits, error", [
    ([(PLAIN_LAST_ARGUMENT, "gn.eps, slope=self.leaky_relu.negative_slope)")], "called with slope=, which its"),
    ([(PLAIN_LAST_ARGUMENT, "gn.eps, eps=self.leaky_relu.negative_slope)")], "called with eps=, which its launcher"),
    ([(PLAIN_LAST_ARGUMENT, "gn.eps)")], "called with 7 arguments by position and 0 by name; its launcher"),
])
def test_calls_of_a_registered_op_the_launcher_cannot_take_are_refused(plain_sample, edits, error):
    export.export_text(plain_sample())
    with pytest.raises(export.ExportError, match=re.escape(error)):
        export.export_text(plain_sample(*edits))


def test_an_op_that_utils_ops_wraps_in_python_is_refused(sample, monkeypatch):
    """The export calls the launcher; what a Python function around the op adds would be lost, and so
    would what a WholeModel whose call the export does not know does."""
    import utils.ops

    whole_model = getattr(utils.ops, OP)

    def wrapper(x, weight, linear_bias, *rest, weight_residual=None):
        return whole_model(x, weight, linear_bias, *rest, weight_residual=weight_residual)

    monkeypatch.setattr(utils.ops, OP, wrapper)
    with pytest.raises(export.ExportError, match=f"ops.{OP} is function .*wrapper of utils/ops.py, a Python wrapper"):
        export.export_text(sample())

    class Changed(utils.ops.WholeModel):
        def __call__(self, x, weight, linear_bias, *rest, weight_residual=None, save=False):
            return self.op(x, weight, linear_bias, *rest, weight_residual, save)

    changed = object.__new__(Changed)
    changed.__dict__.update(vars(whole_model))
    monkeypatch.setattr(utils.ops, OP, changed)
    with pytest.raises(export.ExportError, match=re.escape(
            f"ops.{OP} is a utils.ops.WholeModel(x, weight, linear_bias, *rest, weight_residual=None, save=False)")):
        export.export_text(sample())


def test_a_whole_models_function_takes_what_the_workbook_takes(sample):
    """ops.<name> of a WholeModel: the tail's arguments by position, weight_residual by name; the launcher
    gets them, then weight_residual, then save_gemm_output=False, and its first output is returned."""
    text = export.export_text(sample())
    calls = []
    function = _exported(text, f"_{OP}", _kernels_0=SimpleNamespace(
        **{OP: lambda *a: calls.append(a) or ("out", "saved")}))
    assert function(*range(8)) == "out" and function(*range(8), weight_residual="kept") == "out"
    assert calls == [(*range(8), None, False), (*range(8), "kept", False)]
    with pytest.raises(TypeError):
        function(*range(9))  # weight_residual by name only, as WholeModel takes it


def test_the_solutions_forward_is_carried_over_as_written(plain_sample):
    """ops.<name> of a registered op maps to the launcher <name>, whatever the forward does around the call
    and however it passes the arguments; an import of utils/ that the kept code does not use is left out."""
    path = plain_sample(HELPER, (f"        return ops.{OP}(", f"        out = (ops.{OP}("),
                        (PLAIN_LAST_ARGUMENT, "gn.eps, negative_slope=self.leaky_relu.negative_slope),)[0][0]\n"
                                              "        return out"))
    text = export.export_text(path)
    forward = ast.get_source_segment(text, _top_level(text)["ModelNew"].body[-1])
    assert f"out = (ops.{OP}(" in forward and "),)[0][0]\n        return out" in forward
    assert f"ops = SimpleNamespace({OP}=_{OP})" in text and "weight_residual = None" not in text  # no Freezable
    assert "from utils" not in text and "flags" not in text.split("# ---- the model")[1]
    # by position or by name, the launcher gets every argument in its order (its defaults after them)
    (launcher,) = [e for e in build.exported_functions(build.kernel_source(export.FUSED_KERNEL)) if e.name == OP]
    signature = export.launcher_signature(launcher)
    expected = (*range(8), *(eval(signature.defaults[p]) for p in signature.params[8:]))  # noqa: S307
    calls = []
    wrapper = _exported(text, f"_{OP}", _kernels_0=SimpleNamespace(**{OP: lambda *a: calls.append(a)}))
    wrapper(*range(8))
    wrapper(*range(7), negative_slope=7)
    wrapper(**dict(zip(signature.params, range(8))))
    assert calls == [expected] * 3


def test_the_command_line(sample, tmp_path, capsys):
    first, second = sample(), sample()
    assert export.main([str(first), "-o", str(tmp_path / "62.py")]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "62.py").is_file() and "62.py" in out and "KernelBench's static rules:" in out
    assert export.main([str(first), str(second), "-o", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / first.name).is_file() and (tmp_path / "out" / second.name).is_file()
    assert export.main([str(tmp_path / "nothing.py")]) == 1
    assert "no solution file" in capsys.readouterr().err
    assert export.main([str(sample(("class ModelNew(", "class Other(")))]) == 1
    assert "error: " in capsys.readouterr().err


def test_kernelbench_eval_takes_model_from_the_problem():
    assert export._reference_of(Path("/tmp/x.py"), 62) is get_problem(62).module
    assert export._reference_of(Path("/tmp") / SOLUTIONS[75].name, None) is get_problem(75).module
    with pytest.raises(ValueError, match="name the problem"):
        export._reference_of(Path("/tmp/x.py"), None)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Every solution exported and imported: its kernels built by the export's own load_inline, with the
    CUDA toolkit the export finds itself."""
    folder = tmp_path_factory.mktemp("export")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCH_EXTENSIONS_DIR", str(REPO / "build" / "export-cache"))
        if not torch.cuda.is_available():  # load_inline takes the arch from the GPU, or from this
            mp.setenv("TORCH_CUDA_ARCH_LIST", toolchain.DEFAULT_ARCH)
        toolchain.require_compiler()
        toolchain.apply_ninja_path()
        return {pid: export.load_exported(export.export(path, folder / path.name)) for pid, path in SOLUTIONS.items()}


@pytest.mark.compile
@pytest.mark.parametrize("pid", SOLUTIONS)
def test_every_export_builds(exported, pid):
    import torch.utils.cpp_extension as cpp_extension

    module = exported[pid]
    p = get_problem(pid)
    assert module.get_init_inputs() == p.module.get_init_inputs()
    assert Path(cpp_extension.CUDA_HOME) == toolchain.find_cuda_home()  # the export's own lines set it
    torch.manual_seed(0)
    new = module.ModelNew(*p.init_inputs("small"))
    ref = p.make_model("small", seed=0)
    assert all(torch.equal(a, b) for a, b in zip(ref.state_dict().values(), new.state_dict().values()))
    new.load_state_dict(ref.state_dict(), strict=True)
    assert all(callable(op) for op in vars(module.ops).values())


@pytest.mark.gpu
@pytest.mark.large
@pytest.mark.parametrize("pid", SOLUTIONS)
def test_every_export_passes_kernelbenchs_evaluation(exported, pid, tmp_path):
    path = tmp_path / f"{pid}.py"
    export.export(SOLUTIONS[pid], path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCH_EXTENSIONS_DIR", str(REPO / "build" / "export-cache"))
        result = export.kernelbench_eval(path, pid, trials=5, timing_trials=20)
    assert result["correct"], result
    assert len(result["trials"]) == 5 and max(result["trials"]) < 1e-3
    assert result["ms_new"] > 0 and result["speedup"] > 0
