"""utils.show: kernel source rendered from kernels/, whole or one function, shown once."""
import textwrap

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import Code

from utils import show

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
