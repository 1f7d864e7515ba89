"""utils.build: binding from `// @export`, the build cache, locks, compile errors, and vector_add.

A cold build costs 5-70 s on 2 cores (25-70 s with PyTorch's headers), so the compile tests share one build of vector_add (in a
temporary build root, module-scoped) and one failing build of a broken kernel.
"""
import contextlib
import io
import json
import pickle
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest
import torch

from utils import REPO, bindings_header, build, launch, toolchain

# --- reading kernel files (no compiler needed) ------------------------------------------

SOURCE = textwrap.dedent("""\
    #include "common/check.cuh"

    __global__ void scale_kernel(float* x, int n) { }

    // a helper, not exported
    static int blocks_for(int n) { return (n + 255) / 256; }

    // @export
    torch::Tensor scale(torch::Tensor x,
                        double factor) {
      return x;
    }

    // @export: y = a*x + y, in place; returns nothing
    void axpy_(torch::Tensor y, const torch::Tensor& x, double a) {
    }
    """)


def test_exported_functions():
    exports = build.exported_functions(SOURCE)
    assert [e.name for e in exports] == ["scale", "axpy_"]
    assert exports[0].prototype == "torch::Tensor scale(torch::Tensor x, double factor)"
    assert exports[0].doc == "scale"  # no docstring given: the name
    assert exports[1].prototype == "void axpy_(torch::Tensor y, const torch::Tensor& x, double a)"
    assert exports[1].doc == "y = a*x + y, in place; returns nothing"


def test_export_on_a_global_kernel_is_an_error():
    with pytest.raises(build.KernelSourceError, match="marks a __global__ kernel"):
        build.exported_functions("// @export\n__global__ void k(float* x) {\n}\n", "k.cu")


def test_export_must_sit_directly_above_a_definition():
    source = "// @export\n// a comment in between\ntorch::Tensor f(torch::Tensor x) {\n}\n"
    with pytest.raises(build.KernelSourceError, match=r"k\.cu:1: `// @export` must sit directly above"):
        build.exported_functions(source, "k.cu")
    with pytest.raises(build.KernelSourceError, match="must sit directly above"):
        build.exported_functions("// @export\ntorch::Tensor f(torch::Tensor x);\n", "k.cu")


def test_exporting_a_name_twice_is_an_error():
    source = "// @export\nvoid f(int a) {\n}\n// @export\nvoid f(double a) {\n}\n"
    with pytest.raises(build.KernelSourceError, match="exported more than once"):
        build.exported_functions(source)


@pytest.fixture
def kernels_dir(tmp_path):
    """A kernels/ directory with k.cu -> common/outer.cuh -> common/inner.cuh."""
    root = tmp_path / "kernels"
    (root / "common").mkdir(parents=True)
    (root / "common" / "outer.cuh").write_text('#pragma once\n#include "inner.cuh"\n')
    (root / "common" / "inner.cuh").write_text("#pragma once\n#define FACTOR 2\n")
    (root / "unrelated.cuh").write_text("#define NOT_INCLUDED 1\n")
    (root / "k.cu").write_text('#include "common/outer.cuh"\n#include <vector>\n// @ops\n'
                               "// @export\ntorch::Tensor k(torch::Tensor x) {\n  return x;\n}\n")
    return root


def test_a_kernel_without_export_is_an_error(kernels_dir):
    (kernels_dir / "plain.cu").write_text("__global__ void plain(float* x) {}\n")
    with pytest.raises(build.KernelSourceError, match="exports nothing to Python") as err:
        build.plan("plain", kernels_dir=kernels_dir)
    assert "// @export" in str(err.value) and "plain.cu" in str(err.value)


def test_a_missing_kernel_lists_the_kernels_there(kernels_dir):
    with pytest.raises(FileNotFoundError, match=r"no kernel 'nope'.*\(kernels in .*: k\)$"):
        build.plan("nope", kernels_dir=kernels_dir)


def test_included_headers_are_found_recursively(kernels_dir):
    headers = build.included_headers(kernels_dir / "k.cu", kernels_dir)
    assert headers == [(kernels_dir / "common" / "outer.cuh").resolve(), (kernels_dir / "common" / "inner.cuh").resolve()]


def test_cache_key_follows_the_headers(kernels_dir, tmp_path):
    before = build.plan("k", kernels_dir=kernels_dir, build_root=tmp_path / "b")
    assert before.key == build.plan("k", kernels_dir=kernels_dir, build_root=tmp_path / "b").key  # deterministic
    (kernels_dir / "unrelated.cuh").write_text("#define NOT_INCLUDED 2\n")
    assert build.plan("k", kernels_dir=kernels_dir).key == before.key  # not included: no rebuild

    (kernels_dir / "common" / "inner.cuh").write_text("#pragma once\n#define FACTOR 3\n")  # two levels down
    after = build.plan("k", kernels_dir=kernels_dir, build_root=tmp_path / "b")
    assert after.key != before.key
    assert after.build_dir != before.build_dir and after.module_name != before.module_name
    assert after.build_dir == tmp_path / "b" / f"k-{after.key[:12]}"


def test_cache_key_follows_flags_and_arch(kernels_dir):
    base = build.plan("k", kernels_dir=kernels_dir, arch="9.0")
    assert build.plan("k", kernels_dir=kernels_dir, arch="8.0").key != base.key
    assert build.plan("k", kernels_dir=kernels_dir, arch="9.0", extra_cuda_cflags=["-DX=1"]).key != base.key


def test_plan_flags_arch_and_line_directive(kernels_dir, monkeypatch):
    monkeypatch.setenv("WORKBOOK_BUILD_DIR", str(kernels_dir.parent / "elsewhere"))
    p = build.plan("k", kernels_dir=kernels_dir, arch="9.0a")
    assert "-gencode=arch=compute_90a,code=sm_90a" in p.cuda_cflags
    assert {"-O3", "-lineinfo"} <= set(p.cuda_cflags) and p.cflags == bindings_header.CFLAGS
    # nvcc reports errors at the real file and line, not in the build directory's copy
    assert p.cuda_source.startswith(f'#line 1 "{kernels_dir / "k.cu"}"\n#include')
    # the bindings file: the precompiled light prelude (not <torch/extension.h>), the launcher's
    # declaration, then the function that registers it as an op's CUDA kernel when asked to
    assert p.cpp_source == (bindings_header.INCLUDE + "torch::Tensor k(torch::Tensor x);"
                            + build.registration_source(p.exports))
    assert 'if (name == "k") library->impl("k", TORCH_FN(k));' in p.cpp_source
    assert "torch/extension.h" not in p.cpp_source
    # an exercise elsewhere can include common/; the prelude's folder comes last
    assert p.include_dirs == (kernels_dir, build.KERNELS_DIR, bindings_header.folder())
    assert p.build_dir.parent == kernels_dir.parent / "elsewhere"


def test_default_arch_is_the_visible_gpu_or_sm_90(kernels_dir):
    expected = toolchain.detect().gpu_arch or "9.0"
    assert build.plan("k", kernels_dir=kernels_dir).arch == expected


def test_a_kernel_can_ask_for_an_arch_specific_target(kernels_dir, monkeypatch):
    source = (kernels_dir / "k.cu").read_text()
    (kernels_dir / "k.cu").write_text("// @arch: 9.0a\n" + source)
    monkeypatch.setattr(toolchain.detect(), "gpu_arch", None)  # no GPU: the kernel's own arch
    assert build.plan("k", kernels_dir=kernels_dir).arch == "9.0a" and build.builds_here("k", kernels_dir)
    monkeypatch.setattr(toolchain.detect(), "gpu_arch", "9.0")  # a Hopper GPU: sm_90a is its family
    assert "-gencode=arch=compute_90a,code=sm_90a" in build.plan("k", kernels_dir=kernels_dir).cuda_cflags
    assert build.builds_here("k", kernels_dir)
    monkeypatch.setattr(toolchain.detect(), "gpu_arch", "8.0")  # an A100 cannot run sm_90a code: say so
    assert not build.builds_here("k", kernels_dir)
    with pytest.raises(toolchain.UnsupportedArchError, match=r"k\.cu is built for sm_90a only .* this GPU is sm_80"):
        build.plan("k", kernels_dir=kernels_dir)


def test_arch_marks_are_checked():
    assert build.required_arch("__global__ void k() {}\n") is None
    assert build.required_arch("// @arch: 9.0a\n") == "9.0a"
    with pytest.raises(build.KernelSourceError, match="more than one"):
        build.required_arch("// @arch: 9.0a\n// @arch: 10.0a\n", "k.cu")
    with pytest.raises(ValueError, match="arch must look like"):
        build.required_arch("// @arch: hopper\n")


NVCC_OUTPUT = """Error building extension 'broken_0123456789ab': [1/3] /usr/local/cuda/bin/nvcc -MD -MF cuda.cuda.o.d -c cuda.cu -o cuda.cuda.o
FAILED: cuda.cuda.o
/usr/local/cuda/bin/nvcc -MD -MF cuda.cuda.o.d -DTORCH_EXTENSION_NAME=broken -c /b/cuda.cu -o cuda.cuda.o
/repo/kernels/broken.cu(12): error: identifier "nope" is undefined
      nope = 1;
      ^

1 error detected in the compilation of "/b/cuda.cu".
ninja: build stopped: subcommand failed.
"""
GCC_OUTPUT = """Error building extension 'x': [1/2] c++ -MMD -MF main.o.d -c /b/main.cpp -o main.o
FAILED: main.o
c++ -MMD -MF main.o.d -c /b/main.cpp -o main.o
/b/main.cpp:2:1: error: 'Tensorr' in namespace 'torch' does not name a type
ninja: build stopped: subcommand failed.
"""


def test_compile_error_points_at_the_first_error():
    p = build.plan("vector_add")
    err = build._compile_error(p, NVCC_OUTPUT)
    assert (err.path, err.line, err.message) == (Path("/repo/kernels/broken.cu"), 12, 'identifier "nope" is undefined')
    text = str(err)
    assert text.startswith('/repo/kernels/broken.cu:12: error: identifier "nope" is undefined\n')
    assert "      nope = 1;" in text
    assert "-MD -MF" not in text and "ninja:" not in text  # no command dumps
    err = build._compile_error(p, GCC_OUTPUT)
    assert (err.path, err.line) == (Path("/b/main.cpp"), 2)


# --- locks (no compiler needed) ---------------------------------------------------------

def _finished_pid() -> int:
    """The pid of a process that has finished (and been reaped): a build that was killed."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def sleeper():
    """A live process that is not us."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc.pid
    proc.kill()
    proc.wait()


def test_clear_stale_locks(tmp_path, sleeper, capsys):
    dead, live, torch_only, clean = (tmp_path / d for d in ("dead-1", "live-2", "torch-3", "clean-4"))
    for d in (dead, live, torch_only, clean):
        d.mkdir()
    (dead / build.LOCK_FILE).write_text(str(_finished_pid()))
    (dead / build.TORCH_LOCK_FILE).write_text("")
    (live / build.LOCK_FILE).write_text(str(sleeper))
    (live / build.TORCH_LOCK_FILE).write_text("")
    (torch_only / build.TORCH_LOCK_FILE).write_text("")

    removed = build.clear_stale_locks(tmp_path)

    assert sorted(removed) == sorted([dead / build.LOCK_FILE, dead / build.TORCH_LOCK_FILE, torch_only / build.TORCH_LOCK_FILE])
    assert not any(f.exists() for f in removed)
    assert (live / build.LOCK_FILE).exists() and (live / build.TORCH_LOCK_FILE).exists()  # a build is running there
    assert "removed a stale build lock" in capsys.readouterr().out


# --- compiling (nvcc and a CUDA build of torch; no GPU) ---------------------------------

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One cold build of vector_add in a fresh build root, with what it printed and how long it took."""
    root = tmp_path_factory.mktemp("kernel-builds")
    out = io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stdout(out):
        module = build.load_kernel("vector_add", build_root=root)
    return module, build.plan("vector_add", build_root=root), out.getvalue(), time.monotonic() - start


@pytest.mark.compile
def test_vector_add_compiles(built):
    module, plan, output, seconds = built
    assert callable(module.vector_add)
    assert "out = a + b" in module.vector_add.__doc__  # the `// @export:` docstring
    assert plan.library.is_file() and (plan.build_dir / build.DONE_FILE).is_file()
    code = toolchain.arch_code(plan.arch)
    assert plan.arch == (toolchain.detect().gpu_arch or "9.0")
    assert f"-gencode=arch=compute_{code},code=sm_{code}" in (plan.build_dir / "build.ninja").read_text()
    assert f"sm_{code}".encode() in plan.library.read_bytes()  # the machine code inside is for that arch
    print(f"cold build of vector_add: {seconds:.1f} s")


@pytest.mark.compile
def test_cold_build_prints_progress(built):
    _, plan, output, seconds = built
    lines = output.splitlines()
    assert lines[0].startswith(f"building kernel 'vector_add' for sm_{toolchain.arch_code(plan.arch)} (cold build: ")
    assert lines[-1].startswith("built 'vector_add' in ")
    if seconds > build.TICK_SECONDS + 2:
        assert "  ... still compiling 'vector_add' (10 s)" in lines


@pytest.mark.compile
def test_second_load_in_a_process_is_the_same_module(built):
    module, plan, _, _ = built
    start = time.perf_counter()
    assert build.load_kernel("vector_add", build_root=plan.build_dir.parent) is module
    assert time.perf_counter() - start < 0.5


WARM_LOAD = """
import json, sys, time, torch
if torch.cuda.is_available():
    torch.cuda.init()  # the GPU's start-up is the first kernel call's cost, not the load's
from utils import build
start = time.perf_counter()
module = build.load_kernel("vector_add", build_root=sys.argv[1], lock_timeout=30)
print(json.dumps({"seconds": time.perf_counter() - start, "has_vector_add": hasattr(module, "vector_add")}))
"""


def _load_in_new_process(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WARM_LOAD, str(root)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.compile
def test_warm_load_in_a_new_process_is_fast_and_does_not_rebuild(built):
    _, plan, _, _ = built
    mtime = plan.library.stat().st_mtime_ns
    proc = _load_in_new_process(plan.build_dir.parent)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["has_vector_add"]
    assert result["seconds"] < 1.0, result
    assert "building kernel" not in proc.stdout
    assert plan.library.stat().st_mtime_ns == mtime


@pytest.mark.compile
def test_stale_locks_of_a_killed_build_are_cleared(built):
    # A build killed midway leaves our lock (with its dead pid) and torch's lock behind, and no
    # "done" mark. Some torch versions wait forever on such a lock: the load must clear both.
    _, plan, _, _ = built
    (plan.build_dir / build.DONE_FILE).unlink()
    (plan.build_dir / build.LOCK_FILE).write_text(str(_finished_pid()))
    (plan.build_dir / build.TORCH_LOCK_FILE).write_text("")
    proc = _load_in_new_process(plan.build_dir.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "removed a stale build lock (process" in proc.stdout
    assert json.loads(proc.stdout.strip().splitlines()[-1])["has_vector_add"]
    assert not (plan.build_dir / build.LOCK_FILE).exists()
    assert not (plan.build_dir / build.TORCH_LOCK_FILE).exists()
    assert (plan.build_dir / build.DONE_FILE).is_file()


@pytest.mark.compile
def test_a_live_lock_is_waited_for_then_times_out(tmp_path, sleeper, capsys):
    flags = ["-DLOCK_TEST"]  # a build that was never made, in this process or on disk: loading must build
    plan = build.plan("vector_add", extra_cuda_cflags=flags, build_root=tmp_path)
    plan.build_dir.mkdir(parents=True)
    (plan.build_dir / build.LOCK_FILE).write_text(str(sleeper))
    start = time.monotonic()
    with pytest.raises(build.BuildLockTimeout) as err:
        build.load_kernel("vector_add", extra_cuda_cflags=flags, build_root=tmp_path, lock_timeout=1.0)
    assert 1.0 <= time.monotonic() - start < 10
    assert f"held by process {sleeper}, which is still running" in str(err.value)
    assert f"waiting for process {sleeper}" in capsys.readouterr().out
    assert (plan.build_dir / build.LOCK_FILE).read_text() == str(sleeper)  # not ours to remove
    assert not plan.library.exists()


BROKEN = """\
#include "common/check.cuh"

// @export
torch::Tensor broken(torch::Tensor x) {
  CHECK_CUDA(x);
  int n = "not a number";  // line 6: a type error
  return x;
}
"""


@pytest.mark.compile
def test_compile_error_names_the_file_and_line(tmp_path, capsys):
    kernels = tmp_path / "kernels"
    (kernels / "common").mkdir(parents=True)
    (kernels / "common" / "check.cuh").write_text((REPO / "kernels" / "common" / "check.cuh").read_text())
    (kernels / "broken.cu").write_text(BROKEN)
    start = time.monotonic()
    with pytest.raises(build.KernelCompileError) as err:
        build.load_kernel("broken", kernels_dir=kernels, build_root=tmp_path / "builds")
    seconds = time.monotonic() - start
    e = err.value
    assert (e.path, e.line) == (kernels / "broken.cu", 6)
    assert str(e).startswith(f'{kernels / "broken.cu"}:6: error: a value of type "const char *" cannot be used')
    assert 'int n = "not a number";' in str(e)
    assert len(str(e).splitlines()) <= 25 and "-DTORCH_EXTENSION_NAME" not in str(e)  # not the command dump
    assert "-DTORCH_EXTENSION_NAME" in e.nvcc_output  # which is still there for whoever needs it
    out = capsys.readouterr().out
    assert "building kernel 'broken' for sm_" in out
    if seconds > build.TICK_SECONDS + 2:
        assert "  ... still compiling 'broken' (10 s)" in out
    print(f"failing build of broken.cu: {seconds:.1f} s")


# --- load_kernels: several builds side by side ----------------------------------------------

class Unpicklable(Exception):
    def __init__(self, a, b):  # pickle rebuilds an exception from .args: (a message,) here, not (a, b)
        super().__init__(f"{a} {b}")


@pytest.fixture
def fake_loads(monkeypatch):
    """load_kernels with its builds faked: every plan warm unless its name is in `cold`, no worker
    processes (`side_by_side` records what they were given), a load returns what it was asked for and
    raises for a name in `broken`. The fixture's value holds these knobs and the loads made."""
    fake = types.SimpleNamespace(cold=set(), broken={}, loads=[], side_by_side=[])

    def load_kernel(name, extra_cuda_cflags=(), kernels_dir=None):
        fake.loads.append(name)
        if name in fake.broken:
            raise fake.broken[name]
        return types.SimpleNamespace(name=name, flags=tuple(extra_cuda_cflags), kernels_dir=kernels_dir)

    def plan(name, **kw):
        if name == "nope":
            raise FileNotFoundError("no kernel 'nope'")
        return name

    def side_by_side(cold, jobs):
        fake.side_by_side.append((dict(cold), jobs))
        return {}

    monkeypatch.setattr(build, "plan", plan)
    monkeypatch.setattr(build, "_is_built", lambda name: name not in fake.cold)
    monkeypatch.setattr(build, "load_kernel", load_kernel)
    monkeypatch.setattr(build, "_build_side_by_side", side_by_side)
    return fake


def test_a_variant_is_a_hashable_build_that_names_itself(tmp_path):
    v = build.Variant("gemm_07_pipelined", ["-DGEMM07_BK=16", "-DGEMM07_STAGES=3"])
    assert v == build.Variant("gemm_07_pipelined", ("-DGEMM07_BK=16", "-DGEMM07_STAGES=3")) and hash(v)
    assert str(v) == "gemm_07_pipelined -DGEMM07_BK=16 -DGEMM07_STAGES=3"
    assert str(build.Variant("k", kernels_dir=tmp_path)) == f"k (in {tmp_path})"
    assert build.as_variant(("k", ["-DX"])) == build.Variant("k", ("-DX",))
    assert build.as_variant(("k", [], str(tmp_path))) == build.Variant("k", (), tmp_path)
    assert build.as_variant("k") == build.Variant("k")
    with pytest.raises(TypeError, match="sequence of flags"):
        build.Variant("k", "-DX")
    with pytest.raises(TypeError, match="a name, a build.Variant or a tuple"):
        build.as_variant(["k"])


def test_load_kernels_keys_each_item_as_given_in_order(fake_loads, tmp_path):
    flagged = build.Variant("a", ["-DX"])
    got = build.load_kernels(["b", "a", ("a", ["-DX"]), flagged, "b", ("c", [], tmp_path)])
    assert list(got) == ["b", "a", flagged, build.Variant("c", (), tmp_path)]  # a tuple keys by its Variant
    assert got["a"].flags == () and got[flagged].flags == ("-DX",) and got["b"].name == "b"
    assert got[build.Variant("c", (), tmp_path)].kernels_dir == tmp_path
    assert fake_loads.side_by_side == []  # all warm: no worker started


def test_load_kernels_with_labels_and_a_default_folder(fake_loads, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    got = build.load_kernels({"y": build.Variant("a", ["-DY"]), "x": "a", "z": ("a", [], elsewhere)},
                             kernels_dir=tmp_path)
    assert list(got) == ["y", "x", "z"]
    assert (got["y"].flags, got["y"].kernels_dir) == (("-DY",), tmp_path)  # no folder of its own: kernels_dir
    assert got["x"].kernels_dir == tmp_path and got["z"].kernels_dir == elsewhere


def test_load_kernels_sends_each_cold_build_once_to_the_workers(fake_loads):
    fake_loads.cold = {"a", "b"}
    got = build.load_kernels({"first": "a", "again": "a", "other": ("b", ["-DX"]), "warm": "c"}, jobs=8)
    (cold, jobs), = fake_loads.side_by_side
    assert cold == {build.Variant("a"): "first", build.Variant("b", ["-DX"]): "other"}  # announced by their labels
    assert jobs == 2  # at most one per cold build
    assert list(got) == ["first", "again", "other", "warm"]


def test_load_kernels_builds_one_cold_kernel_here_unless_build_only(fake_loads):
    fake_loads.cold = {"a"}
    assert list(build.load_kernels(["a", "c"])) == ["a", "c"]
    assert fake_loads.side_by_side == []  # one cold build: in this process, by load_kernel
    assert build.load_kernels(["a", "c"], build_only=True) == {}
    assert [list(cold) for cold, _ in fake_loads.side_by_side] == [[build.Variant("a")]]
    assert fake_loads.loads == ["a", "c"]  # build_only imported nothing


def test_load_kernels_on_error(fake_loads, capsys):
    error = build.KernelCompileError("bad", Path("kernels/bad.cu"), 3, "oops", "")
    fake_loads.broken = {"bad": error}
    got = build.load_kernels(["a", "bad", "c"], on_error="return")
    assert got["bad"] is error and got["c"].name == "c" and list(got) == ["a", "bad", "c"]
    assert "  FAILED bad: kernels/bad.cu:3: error: oops" in capsys.readouterr().out
    fake_loads.loads.clear()
    with pytest.raises(build.KernelCompileError):
        build.load_kernels(["a", "bad", "c"])
    assert fake_loads.loads == ["a", "bad", "c"]  # raised once the others were done
    assert isinstance(build.load_kernels(["nope", "a"], on_error="return")["nope"], FileNotFoundError)
    fake_loads.loads.clear()
    with pytest.raises(FileNotFoundError):  # found before anything is built: raised at once
        build.load_kernels(["a", "nope"])
    assert fake_loads.loads == []
    with pytest.raises(ValueError, match="on_error"):
        build.load_kernels(["a"], on_error="ignore")
    with pytest.raises(TypeError, match="a list"):
        build.load_kernels("a")


def test_a_workers_error_reaches_the_parent_whole(monkeypatch):
    error = build.KernelCompileError("bad", Path("kernels/bad.cu"), 3, "oops", "the whole log")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.name, copy.path, copy.line, copy.message, copy.nvcc_output, str(copy)) == \
        (error.name, error.path, error.line, error.message, error.nvcc_output, str(error))
    monkeypatch.setenv("MAX_JOBS", "1")  # the worker sets its share of the cores; restored after the test

    def plan(name, **kw):
        raise Unpicklable("cannot", "travel")

    monkeypatch.setattr(build, "plan", plan)
    with pytest.raises(RuntimeError, match="^Unpicklable: cannot travel$"):  # not a pool broken by unpickling
        build._build_only(build.Variant("k"), 1)


TWICE = r"""
// @launch
__global__ void twice_kernel(const float* x, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
#ifdef WORKBOOK_VARIANT_TEST
  if (i < n) out[i] = 2.0f * x[i] + WORKBOOK_VARIANT_TEST;
#else
  if (i < n) out[i] = 2.0f * x[i];
#endif
}
"""


@pytest.mark.compile
def test_load_kernels_builds_variants_side_by_side(tmp_path, monkeypatch, capsys):
    # the one real side-by-side build: two builds of one kernel file (with and without a flag) and a kernel
    # that fails at once, in worker processes, into a fresh build root. The file is plain kernels, which build
    # without PyTorch's headers (utils/launch.py): the point is the workers, not the compiler's time.
    monkeypatch.setenv("WORKBOOK_BUILD_DIR", str(tmp_path / "builds"))  # read by the workers too
    kernels = (tmp_path / "kernels").resolve()
    kernels.mkdir()
    (kernels / "broken.cu").write_text('#error "broken on purpose"\n// @export\ntorch::Tensor broken(torch::Tensor x) { return x; }\n')
    (kernels / "twice.cu").write_text(TWICE)
    flagged = build.Variant("twice", ["-DWORKBOOK_VARIANT_TEST=1"], kernels)
    got = build.load_kernels({"broken": ("broken", [], kernels), "plain": ("twice", [], kernels), "flagged": flagged},
                             jobs=2, on_error="return")
    assert isinstance(got["broken"], build.KernelCompileError)  # whole: file, line and nvcc's output
    assert (got["broken"].path, got["broken"].line) == (kernels / "broken.cu", 1) and got["broken"].nvcc_output
    plain, variant = got["plain"], got["flagged"]
    assert plain is not variant and plain.__name__ != variant.__name__ and isinstance(variant.twice_kernel, launch.Launcher)
    for item in (build.Variant("twice", (), kernels), flagged):  # both built here, into the fresh root
        assert item.plan().library.is_relative_to(tmp_path / "builds")
        assert build._is_built(item.plan())
    out = capsys.readouterr().out
    assert "building 3 kernels, 2 at a time: broken, plain, flagged" in out
    assert "  built plain" in out and "  built flagged" in out and f"  FAILED broken: {kernels / 'broken.cu'}:" in out
    if torch.cuda.is_available():
        x = torch.rand(1000, device="cuda")
        outs = [torch.full_like(x, float("nan")) for _ in range(2)]
        plain.twice_kernel[4, 256](x, outs[0], 1000)
        variant.twice_kernel[4, 256](x, outs[1], 1000)
        assert torch.equal(outs[0], 2 * x) and torch.equal(outs[1], 2 * x + 1)


# --- running (GPU) ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def vector_add(built):
    return built[0].vector_add


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(0,), (1,), (1000003,), (37, 129)], ids=str)
def test_vector_add_matches_torch(vector_add, cuda, shape):
    a, b = torch.rand(shape, device=cuda), torch.rand(shape, device=cuda)
    torch.full(shape, float("nan"), device=cuda)  # freed at once: empty_like may hand out these NaNs
    out = vector_add(a, b)
    assert out.shape == a.shape and out.dtype == torch.float32 and out.device == a.device
    assert torch.equal(out, a + b)  # every element, exactly: an unwritten one stays NaN


@pytest.mark.gpu
def test_vector_add_writes_every_element_of_poisoned_memory(vector_add, cuda):
    n = 1 << 20
    poison = torch.full((n,), float("nan"), device=cuda)
    del poison  # the caching allocator hands this block to the next allocation of its size
    a, b = torch.rand(n, device=cuda), torch.rand(n, device=cuda)
    out = vector_add(a, b)
    assert not out.isnan().any()
    assert torch.equal(out, a + b)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "make, message",
    [
        (lambda c: (torch.rand(8), torch.rand(8, device=c)), "a must be a CUDA tensor"),
        (lambda c: (torch.rand(8, device=c), torch.rand(8, device=c, dtype=torch.float64)), "b must be float32"),
        (lambda c: (torch.rand(8, 4, device=c).t(), torch.rand(4, 8, device=c)), r"a must be contiguous \(call .contiguous\(\)\)"),
        (lambda c: (torch.rand(8, device=c), torch.rand(9, device=c)), "a and b must have the same shape"),
    ],
    ids=["cpu-tensor", "float64", "non-contiguous", "shape-mismatch"],
)
def test_vector_add_rejects_bad_inputs(vector_add, cuda, make, message):
    a, b = make(cuda)
    with pytest.raises(RuntimeError, match=message):
        vector_add(a, b)


@pytest.mark.gpu
def test_vector_add_runs_on_the_current_stream(vector_add, cuda):
    n = 1 << 22
    a_src, b_src = torch.rand(n, device=cuda), torch.rand(n, device=cuda)
    a, b = torch.zeros(n, device=cuda), torch.zeros(n, device=cuda)
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(100_000_000)  # the stream is busy for ~50 ms before the inputs are written
        a.copy_(a_src)
        b.copy_(b_src)
        out = vector_add(a, b)  # on another stream it would run now, and add the zeros
    torch.cuda.synchronize()
    assert torch.equal(out, a_src + b_src)


def test_only_a_file_marked_ops_carries_the_registration(kernels_dir):
    (kernels_dir / "plain.cu").write_text("// @export\ntorch::Tensor plain(torch::Tensor x) {\n  return x;\n}\n")
    plain = build.plan("plain", kernels_dir=kernels_dir)
    assert build.REGISTER_CUDA not in plain.cpp_source and "torch/library.h" not in plain.cpp_source
    assert build._registration_binding(plain) == {}
    assert build.REGISTER_CUDA in build._registration_binding(build.plan("k", kernels_dir=kernels_dir))


def test_register_op_refuses_a_kernel_file_not_marked_ops():
    with pytest.raises(build.KernelSourceError, match="kernels/gemm_bias.cu has no line `// @ops`"):
        build.register_op("gemm_bias", "gemm_bias", reference=None, fake=None)


def test_every_kernel_file_utils_ops_registers_is_marked_ops():
    from utils import ops  # noqa: F401  (registers the ops)
    assert build._op_kernels and all(build.registers_ops(build.kernel_source(k)) for k in set(build._op_kernels.values()))


def test_only_launchers_an_op_can_call_are_registrable():
    ready = [build.Export(n, proto, n) for n, proto in (
        ("a", "torch::Tensor a(torch::Tensor x, const torch::Tensor& y, double s, int64_t n, bool b)"),
        ("b", "std::tuple<torch::Tensor, torch::Tensor> b(torch::Tensor x, c10::optional<torch::Tensor> r = c10::nullopt)"))]
    not_ready = [build.Export(n, proto, n) for n, proto in (
        ("c", "void c(torch::Tensor x)"),                  # returns nothing: no op
        ("d", "torch::Tensor d(torch::Tensor& out)"),      # a mutable reference: another schema
        ("e", "bool e(torch::Tensor x, int64_t g)"),       # a predicate (fused_gemm_groupnorm's fusable)
        ("f", "torch::Tensor f(torch::Tensor x, float s)"))]  # float has no schema type
    source = build.registration_source(ready + not_ready)
    assert [n for n in "abcdef" if f'library->impl("{n}"' in source] == ["a", "b"]
    assert build.registration_source(not_ready) == ""  # nothing to register: no <torch/library.h> either
    assert build.REGISTER_CUDA in source and "#include <torch/library.h>" in source


def test_the_cuda_stand_in_registers_the_launcher_where_the_kernel_builds_and_runs_elsewhere_otherwise(monkeypatch):
    registered, ran = [], []

    class Module:
        def k(self, x, flag):
            ran.append(("launcher", x, flag))
            return "kernel"

        def workbook_register_cuda(self, namespace, name):
            registered.append((namespace, name))

    monkeypatch.setattr(build, "load_kernel", lambda kernel: Module())
    whole = lambda args: (*args, True)[:2]  # the trailing default filled in
    elsewhere = lambda x, flag: ran.append(("elsewhere", x, flag)) or "reference"
    for fits in (True, False):
        build._builds_here_once.cache_clear()
        build.launcher.cache_clear()
        monkeypatch.setattr(build, "builds_here", lambda kernel: fits)
        stand_in = build._cuda_stand_in("some_kernel", "k", "ns", elsewhere, whole)
        assert stand_in(1) == ("kernel" if fits else "reference")
    build._builds_here_once.cache_clear()
    build.launcher.cache_clear()
    assert registered == [("ns", "k")]  # only where the kernel file builds for this GPU
    assert ran == [("launcher", 1, True), ("elsewhere", 1, True)]
