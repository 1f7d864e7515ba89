"""utils.show: kernel source rendered from kernels/, whole or one function, shown once; the
labelled paragraphs of kernel headers, and every one that a notebook quotes exists."""
import ast
import json
import re
import textwrap

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import Code

from utils import REPO, build, ladder, show

SOURCE = textwrap.dedent("""\
    #include "common/check.cuh"

    // Doubles x; "}" in a string and { in a comment do not end it.
    template <int BLOCK>
    __global__ void __launch_bounds__(BLOCK)
    twice_kernel(float* x, int n) {
      const char* s = "}";
      for (int i = threadIdx.x; i < n; i += BLOCK) { x[i] *= 2; }  // {
    }

    // @export
    torch::Tensor twice(torch::Tensor x) {
      if (x.numel() == 0) { return x; }
      twice_kernel<256><<<1, 256>>>(x.data_ptr<float>(), x.numel());
      return x;
    }
    """)


@pytest.fixture
def kernels_dir(tmp_path):
    (tmp_path / "twice.cu").write_text(SOURCE)
    return tmp_path


def test_function_definitions_span_comment_head_and_body():
    spans = show.function_definitions(SOURCE)
    assert list(spans) == ["twice_kernel", "twice"]  # not the `for`, `if` or the calls inside
    assert spans["twice_kernel"] == show.Span(3, 9)
    assert spans["twice"] == show.Span(11, 16)


def test_show_one_function(kernels_dir, capsys):
    text = show.show_kernel("twice", "twice", kernels_dir=kernels_dir)
    assert text == "\n".join(SOURCE.splitlines()[10:16])
    assert (text.first_line, text.last_line) == (11, 16)
    out = capsys.readouterr().out
    assert out.startswith(f"{kernels_dir / 'twice.cu'}, lines 11-16 (twice)\n// @export\n")


def test_show_the_whole_file(kernels_dir):
    text = show.show_kernel("twice", kernels_dir=kernels_dir)
    assert text == SOURCE.rstrip("\n") and (text.first_line, text.last_line) == (1, 16)


def test_unknown_symbol_lists_the_functions(kernels_dir):
    with pytest.raises(KeyError, match="the functions are: twice_kernel, twice; the structs: none"):
        show.show_kernel("twice", "thrice", kernels_dir=kernels_dir)


@pytest.fixture
def shell():
    """An IPython shell for this test only: a lingering one changes how other tests display."""
    yield InteractiveShell.instance()
    InteractiveShell.clear_instance()


def test_in_a_notebook_the_code_is_highlighted_and_shown_once(kernels_dir, shell, capsys):
    shell.run_cell(f"from utils.show import show_kernel\nshow_kernel('twice', 'twice', kernels_dir={str(kernels_dir)!r})")
    assert capsys.readouterr().out.count("torch::Tensor twice(") == 1  # the returned text is not echoed again
    bundle, _ = shell.display_formatter.format(show._Listing("header", Code("int x;", language="cuda")))
    assert "text/html" in bundle and "<code>header</code>" in bundle["text/html"]


def test_show_a_shared_header(kernels_dir):
    (kernels_dir / "common").mkdir()
    (kernels_dir / "common" / "twice.cuh").write_text(SOURCE)
    text = show.show_kernel("common/twice.cuh", "twice_kernel", kernels_dir=kernels_dir)
    assert text.path == (kernels_dir / "common" / "twice.cuh").resolve() and (text.first_line, text.last_line) == (3, 9)


def test_a_missing_or_outside_header_is_refused(kernels_dir):
    (kernels_dir / "common").mkdir()
    (kernels_dir / "common" / "twice.cuh").write_text(SOURCE)
    for name in ["common/thrice.cuh", "../twice.cuh"]:
        with pytest.raises(FileNotFoundError, match=r"headers there: common/twice.cuh"):
            show.show_kernel(name, kernels_dir=kernels_dir)


def test_show_a_struct_with_its_comment():
    source = textwrap.dedent("""\
        #include "common/check.cuh"

        // Adds a bias: { in a comment.
        struct BiasEpilogue {
          const float* bias;
          __device__ float operator()(float acc, int, int n) const { return acc + bias[n]; }
        };

        struct Declared;
        """)
    assert show.struct_definitions(source) == {"BiasEpilogue": show.Span(3, 7)}
    assert show.find_definition(source, "BiasEpilogue") == show.Span(3, 7)


HEADED = textwrap.dedent("""\
    // twice.cu: doubles x.
    //
    // The idea. Each thread doubles one float.
    //
    //   y = 2 x          (an indented formula belongs to the paragraph above)
    //
    // PREDICTION: as fast as a copy.
    #include "common/check.cuh"
    // not the header any more
    """)


def test_header_sections_by_label(kernels_dir):
    (kernels_dir / "headed.cu").write_text(HEADED)
    assert show.header("headed", kernels_dir).splitlines()[0] == "twice.cu: doubles x."
    assert show.header_section("headed", "The idea", kernels_dir) == (
        "The idea. Each thread doubles one float.\n\n  y = 2 x          (an indented formula belongs to the paragraph above)")
    assert show.header_section("headed", "PREDICTION", kernels_dir) == "PREDICTION: as fast as a copy."
    assert show.header_section("headed", "not the header", kernels_dir) is None


# ---- the header sections the notebooks read --------------------------------------------------
#
# The notebooks quote paragraphs of kernel headers by their first words ("PREDICTION", "The idea",
# "Bytes and FLOPs", ...), through a `quote(name, *labels)` or `header_section(name, label)` of
# their own. A header rewritten without one of those paragraphs makes the notebook print
# "(nothing)" or compare a measurement with no prediction, silently. These tests read the calls
# from the notebooks' code cells, so they follow whatever the notebooks ask for.

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
READERS = {"quote": slice(1, None), "header_section": slice(1, 2)}  # function -> which arguments are labels
KERNELS_DIRS = {"EXERCISES": build.KERNELS_DIR / "exercises"}  # the kernels_dir= names notebooks pass


def header_reads(notebook):
    """[(kernel or None, label, kernels_dir)] for every quote(...) / header_section(...) call in the
    notebook's code cells whose labels are written out; kernel is None where the cell passes it in
    a variable (a loop over the ladder's rungs)."""
    reads = []
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        code = re.sub(r"(?m)^(\s*)[%!].*$", r"\1pass", "".join(cell["source"]))  # IPython magics
        for node in ast.walk(ast.parse(code)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in READERS):
                continue
            if not node.args:
                continue
            first = node.args[0]
            kernel = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
            kernels_dir = None
            for keyword in node.keywords:
                if keyword.arg == "kernels_dir" and isinstance(keyword.value, ast.Name):
                    assert keyword.value.id in KERNELS_DIRS, (
                        f"{notebook.name} passes kernels_dir={keyword.value.id}: add it to KERNELS_DIRS here")
                    kernels_dir = KERNELS_DIRS[keyword.value.id]
            for label in node.args[READERS[node.func.id]]:
                if isinstance(label, ast.Constant) and isinstance(label.value, str):
                    reads.append((kernel, label.value, kernels_dir))
    return reads


READS = [(nb.name, *read) for nb in NOTEBOOKS for read in header_reads(nb)]
NAMED = [(nb, k, label, d) for nb, k, label, d in READS if k is not None]
ANY_RUNG = sorted({(nb, label) for nb, k, label, _ in READS if k is None})


def test_the_notebooks_read_header_sections():
    """The reading above finds what it should: a parser that finds nothing would pass everything."""
    readers = {nb.name for nb in NOTEBOOKS if re.search(r"(?<![\w.])(quote|header_section)\(", nb.read_text())}
    assert readers and readers <= {nb for nb, *_ in NAMED}, f"notebooks whose calls were not found: {readers}"
    assert ("05_fused_activations.ipynb", "activations", "Bytes and FLOPs", None) in NAMED


@pytest.mark.parametrize("notebook, kernel, label, kernels_dir", NAMED,
                         ids=[f"{nb[:2]}-{k}-{label}" for nb, k, label, _ in NAMED])
def test_every_header_section_a_notebook_quotes_exists(notebook, kernel, label, kernels_dir):
    where = build.display_path(show.source_path(kernel, kernels_dir))
    assert show.header_section(kernel, label, kernels_dir), (
        f"{notebook} quotes the paragraph starting {label!r} from the header of {where}, which has none: "
        "restore the paragraph, or change the notebook")


@pytest.mark.parametrize("notebook, label", ANY_RUNG, ids=[f"{nb[:2]}-{label}" for nb, label in ANY_RUNG])
def test_labels_read_for_any_rung_exist_in_a_rung(notebook, label):
    """Where a notebook reads a label from whichever rung it is showing, some rung has it."""
    assert any(show.header_section(rung, label) for rung in ladder.all_rungs()), (
        f"{notebook} reads the paragraph {label!r} from the ladder's rungs, and no rung's header has one")


@pytest.mark.parametrize("rung", ladder.all_rungs())
def test_every_rung_states_a_prediction(rung):
    """Notebooks 02 and 03 compare every measured rung with its header's PREDICTION."""
    assert show.header_section(rung, "PREDICTION"), f"kernels/{rung}.cu has no PREDICTION paragraph"
