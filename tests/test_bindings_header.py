"""utils/bindings_header.py: the bindings file's prelude, precompiled once and used by every kernel module's g++
half; a precompiled header that g++ would skip fails the build instead of slowing it down in silence."""
from __future__ import annotations

import subprocess

import pytest

from utils import bindings_header, build


def _bindings_compile(tmp_path, extra=()):
    """g++ on a bindings file that starts as a kernel module's does, with torch's flags, -H (the headers read)."""
    source = tmp_path / "main.cpp"
    source.write_text(bindings_header.INCLUDE + "torch::Tensor k(torch::Tensor x);\n")
    cuda_cflags = list(build.plan("vector_add").cuda_cflags)
    bindings_header.ensure(cuda_cflags)
    cmd = [*bindings_header.flags(cuda_cflags), *extra, f"-I{bindings_header.folder()}", "-H", "-fsyntax-only",
           str(source)]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.mark.compile
def test_the_prelude_is_precompiled_and_a_bindings_file_reads_the_precompiled_form(tmp_path):
    done = _bindings_compile(tmp_path)
    assert done.returncode == 0, done.stderr
    compiled = bindings_header.folder() / f"{bindings_header.HEADER}.gch"
    assert compiled.is_file()
    assert f"! {compiled}" in done.stderr  # -H marks a precompiled header it used with "!"
    assert "ATen/core/TensorBody.h" not in done.stderr  # and opened none of the headers inside it


@pytest.mark.compile
def test_a_precompiled_prelude_g_plus_plus_would_skip_fails_the_build(tmp_path):
    done = _bindings_compile(tmp_path, extra=["-O0"])  # other flags than it was made with
    assert done.returncode != 0 and "invalid-pch" in done.stderr


def test_the_folder_names_what_the_precompiled_form_depends_on(monkeypatch):
    first = bindings_header.folder()
    bindings_header.folder.cache_clear()
    monkeypatch.setenv("CXX", "no-such-compiler-here")  # another compiler: another folder (and none: no error)
    try:
        assert bindings_header.folder() != first and bindings_header.folder().parent == bindings_header.ROOT
    finally:
        bindings_header.folder.cache_clear()
