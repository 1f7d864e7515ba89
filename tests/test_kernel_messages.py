"""No kernel streams a bare number into a TORCH_CHECK message.

On the GPU machines (torch 2.11 wheels, nvcc 13.0, g++ 13) that crashes the process with SIGSEGV
instead of raising (results/nvidia-h100-80gb-hbm3/logs/stream_diag.log): numbers must go through
num() or shape_string() from kernels/common/check.cuh. This reads every kernel source and checks
each message piece of each TORCH_CHECK against what is known to be safe."""
import re
from pathlib import Path

import pytest

from utils import REPO

SOURCES = sorted(p for p in (REPO / "kernels").rglob("*") if p.suffix in (".cu", ".cuh"))

SAFE = [
    re.compile(r'^(#\w+\s*)?"'),                                       # a string literal (or #x "...")
    re.compile(r"^(shape_string|num|std::to_string|c10::toString)\("),  # formatted as text here
    re.compile(r"\.(device|scalar_type)\(\)$"),                         # printed as text by c10
    re.compile(r"^\(dtype\)$"),                                         # CHECK_DTYPE's ScalarType argument
]


def calls(text: str, name: str = "TORCH_CHECK"):
    """(line, [arguments]) of every call of `name`, arguments split at top-level commas."""
    for m in re.finditer(rf"\b{name}\s*\(", text):
        depth, args, cur, i, quote = 1, [], "", m.end(), None
        while i < len(text) and depth:
            c = text[i]
            if quote:
                cur += c
                if c == "\\":
                    cur += text[i + 1]
                    i += 1
                elif c == quote:
                    quote = None
            elif c in "\"'":
                quote, cur = c, cur + c
            elif c in "([{":
                depth, cur = depth + 1, cur + c
            elif c in ")]}":
                depth -= 1
                if depth:
                    cur += c
            elif c == "," and depth == 1:
                args, cur = args + [cur], ""
            else:
                cur += c
            i += 1
        args.append(cur)
        yield text.count("\n", 0, m.start()) + 1, [" ".join(a.replace("\\\n", " ").split()) for a in args]


def unsafe_pieces(path: Path, root: Path = REPO) -> list[str]:
    text = path.read_text()
    text = re.sub(r"//[^\n]*", "", text)  # comments may mention TORCH_CHECK
    char_ptrs = set(re.findall(r"const char\s*\*\s*(\w+)", text))  # C strings: written as text
    found = []
    for line, args in calls(text):
        for piece in args[1:]:
            if not (any(p.search(piece) for p in SAFE) or piece in char_ptrs):
                found.append(f"{path.relative_to(root)}:{line}: {piece}")
    return found


def test_the_parser_sees_what_is_streamed():
    text = 'TORCH_CHECK(a < b, "n = ", n, " of ", shape_string(x), f(1, 2), #x " ok", x.device(), num(k));'
    ((_, args),) = calls(text)
    assert args == ["a < b", '"n = "', "n", '" of "', "shape_string(x)", "f(1, 2)", '#x " ok"', "x.device()", "num(k)"]


def test_a_bare_number_is_caught(tmp_path):
    bad = tmp_path / "bad.cu"
    bad.write_text('void f(int n, const char* name) {\n  TORCH_CHECK(n > 0, name, " n = ", n, ", ok: ", num(n));\n}\n')
    assert unsafe_pieces(bad, tmp_path) == ["bad.cu:2: n"]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO / "kernels")))
def test_no_number_is_streamed_into_a_check(path):
    assert not unsafe_pieces(path), "format numbers with num() (kernels/common/check.cuh):\n" + "\n".join(unsafe_pieces(path))
