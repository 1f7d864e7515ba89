"""Show kernel source in a notebook, straight from kernels/: kernel text is never pasted into
notebooks, so what the reader sees is always what gets compiled.

    show_kernel("vector_add")                        # the whole file
    show_kernel("vector_add", "vector_add_kernel")   # one function: kernel, device function or launcher
    show_kernel("common/gemm_pipelined.cuh", "gemm_pipelined_kernel")   # a shared header's function

A kernel file opens with a comment in labelled paragraphs ("The idea", "Thread -> data",
"PREDICTION", ...) that the notebooks quote; header and header_section read them:

    header_section("gemm_07_pipelined", "PREDICTION")
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from utils import build

_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_NOT_FUNCTIONS = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignof", "static_assert"}


class KernelText(str):
    """The text show_kernel displayed, with where it came from.

    A str, so it can be searched or printed. It tells IPython it is already displayed, so a
    `show_kernel(...)` on the last line of a cell does not print the code a second time.
    """

    path: Path
    first_line: int
    last_line: int

    def _ipython_display_(self) -> None:
        return None


@dataclass(frozen=True)
class _Listing:
    """A header line over highlighted code in a notebook; plain text anywhere else."""

    header: str
    code: object  # IPython.display.Code

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/plain": repr(self), "text/html": f"<p><code>{self.header}</code></p>{self.code._repr_html_()}"}

    def __repr__(self) -> str:
        return f"{self.header}\n{self.code.data}"


@dataclass(frozen=True)
class Span:
    first_line: int  # 1-based, inclusive, with the comment directly above the definition
    last_line: int


def source_path(name: str, kernels_dir: Path | None = None) -> Path:
    """kernels/<name>.cu for a kernel name; kernels/<name> for a header such as
    "common/gemm_pipelined.cuh" (the code several kernel files share)."""
    if not name.endswith(".cuh"):
        return build.kernel_path(name, kernels_dir)
    root = Path(kernels_dir or build.KERNELS_DIR).resolve()
    path = (root / name).resolve()
    if root not in path.parents or not path.is_file():
        known = ", ".join(sorted(str(p.relative_to(root)) for p in root.rglob("*.cuh"))) or "none"
        raise FileNotFoundError(f"no header {name!r} under {root} (headers there: {known})")
    return path


def show_kernel(name: str, symbol: str | None = None, *, kernels_dir: Path | None = None) -> KernelText:
    """Display kernels/<name>.cu (or the header kernels/<name> when name ends in .cuh), or just the
    function `symbol` in it, syntax-highlighted, under a line naming the file and line range.
    Returns the text shown."""
    from IPython.display import Code, display

    path = source_path(name, kernels_dir)
    source = path.read_text()
    lines = source.splitlines()
    span = find_definition(source, symbol) if symbol else Span(1, len(lines))
    text = KernelText("\n".join(lines[span.first_line - 1: span.last_line]))
    text.path, text.first_line, text.last_line = path, span.first_line, span.last_line
    what = f" ({symbol})" if symbol else ""
    title = f"{build.display_path(path)}, lines {span.first_line}-{span.last_line}{what}"
    display(_Listing(title, Code(str(text), language="cuda")))
    return text


def header(name: str, kernels_dir: Path | None = None) -> str:
    """The comment block that opens kernels/<name>.cu (or a header, "common/<file>.cuh"), without
    its // markers."""
    lines = []
    for line in source_path(name, kernels_dir).read_text().splitlines():
        if not line.startswith("//"):
            break
        lines.append(line[3:] if line.startswith("// ") else line[2:])
    return "\n".join(lines)


def header_section(name: str, label: str, kernels_dir: Path | None = None) -> str | None:
    """The paragraph of the header that starts with `label` ("The idea", "PREDICTION", ...) and the
    indented paragraphs (formulas, lists) right after it; None if no paragraph starts so."""
    paragraphs = re.split(r"\n[ \t]*\n", header(name, kernels_dir))
    for i, paragraph in enumerate(paragraphs):
        if paragraph.startswith(label):
            j = i + 1
            while j < len(paragraphs) and paragraphs[j].startswith(" "):
                j += 1
            return "\n\n".join(paragraphs[i:j])
    return None


def find_definition(source: str, symbol: str) -> Span:
    """Where the function or struct `symbol` is defined: from the comment directly above it (and
    any template/qualifier lines) to its closing brace (and the `;` after a struct's)."""
    definitions = {**function_definitions(source), **struct_definitions(source)}
    if symbol not in definitions:
        raise KeyError(f"no function or struct {symbol!r} is defined here; the functions are: "
                       f"{', '.join(function_definitions(source)) or 'none'}; the structs: "
                       f"{', '.join(struct_definitions(source)) or 'none'}")
    return definitions[symbol]


_STRUCT = re.compile(r"\b(?:struct|class)\s+([A-Za-z_]\w*)\s*(?::[^{};()]*)?\{")


def struct_definitions(source: str) -> dict[str, Span]:
    """Every struct or class defined at the top level (or in a namespace) of a C++/CUDA source,
    such as an epilogue functor: `struct Name {...};`. Declarations without a body do not count."""
    code = _blank_comments_and_strings(source)
    found: dict[str, Span] = {}
    pos = 0
    while match := _STRUCT.search(code, pos):
        end = _matching(code, match.end() - 1, "{", "}")
        if end is None:
            break
        found.setdefault(match.group(1), Span(_first_line(source, code, match.start()), code.count("\n", 0, end) + 1))
        pos = end + 1
    return found


def function_definitions(source: str) -> dict[str, Span]:
    """Every function defined in a C++/CUDA source, in order: `name(...)` followed by `{`.
    Function bodies are skipped, so calls and `if (...) {` inside them do not count."""
    code = _blank_comments_and_strings(source)
    found: dict[str, Span] = {}
    pos = 0
    while match := _CALL.search(code, pos):
        pos = match.end()
        close = _matching(code, match.end() - 1, "(", ")")
        body = _body_start(code, close + 1) if close is not None else None
        if match.group(1) in _NOT_FUNCTIONS or body is None:
            continue
        end = _matching(code, body, "{", "}")
        if end is None:
            break
        found.setdefault(match.group(1), Span(_first_line(source, code, match.start()), code.count("\n", 0, end) + 1))
        pos = end + 1
    return found


def _blank_comments_and_strings(source: str) -> str:
    """The source with comments, string and char literals replaced by spaces (newlines kept),
    so braces and parentheses in them do not count."""
    out = list(source)
    i, n = 0, len(source)
    while i < n:
        two = source[i:i + 2]
        if two == "//":
            end = source.find("\n", i)
            end = n if end < 0 else end
        elif two == "/*":
            end = source.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif source[i] in "\"'":
            end = i + 1
            while end < n and source[end] != source[i] and source[end] != "\n":
                end += 2 if source[end] == "\\" else 1
            end = min(end + 1, n)
        else:
            i += 1
            continue
        for k in range(i, end):
            if out[k] != "\n":
                out[k] = " "
        i = end
    return "".join(out)


def _matching(code: str, open_at: int, opening: str, closing: str) -> int | None:
    depth = 0
    for i in range(open_at, len(code)):
        if code[i] == opening:
            depth += 1
        elif code[i] == closing:
            depth -= 1
            if depth == 0:
                return i
    return None


def _body_start(code: str, after: int) -> int | None:
    """The `{` that opens a function body right after a parameter list (past qualifiers such as
    const or noexcept), or None when the parentheses were a call or a declaration."""
    match = re.compile(r"(?:\s|\b(?:const|noexcept|override|final|mutable)\b)*\{").match(code, after)
    return match.end() - 1 if match else None


def _first_line(source: str, code: str, name_at: int) -> int:
    """The definition's first line: back from the name's line over the lines that belong to its
    head (return type, template, __launch_bounds__), then over the comment lines directly above."""
    src_lines, code_lines = source.splitlines(), code.splitlines()
    line = code.count("\n", 0, name_at)  # 0-based
    while line > 0 and _continues_head(code_lines[line - 1]):
        line -= 1
    while line > 0 and src_lines[line - 1].strip() and not code_lines[line - 1].strip():
        line -= 1  # a comment-only line: blank once comments are blanked
    return line + 1


def _continues_head(code_line: str) -> bool:
    stripped = code_line.strip()
    return bool(stripped) and not stripped.startswith("#") and stripped[-1] not in ";{}"
