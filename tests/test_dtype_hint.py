"""A drop-in given the wrong dtype says what to convert: an int64 or float64 input the input (`x.float()`), an
input of another dtype than the module's the module or the input (`model.to(...)`), an int module the module
(`model.float()`), both where both are wrong (all on the CPU). A model wholly in bfloat16 or float16 runs
(tests/test_solutions_16bit.py)."""
import pytest
import torch

from solutions import solution
from utils import ops


def _model_and_input(pid: int):
    s = solution(pid)
    model = s.ModelNew(*s.get_init_inputs())
    linear = next(m for m in model.modules() if isinstance(m, torch.nn.Linear))
    return model, torch.rand(2, linear.in_features)


@pytest.mark.parametrize("pid", [94, 75, 37, 62])
@pytest.mark.parametrize("dtype", [torch.int64, torch.float64])
def test_a_wrong_input_dtype_names_the_input(pid, dtype):
    model, x = _model_and_input(pid)
    with torch.no_grad(), pytest.raises(TypeError) as error:
        model(x.to(dtype))
    message = str(error.value)
    assert f"float32, bfloat16 and float16 only: x is {dtype};" in message and "convert the input: x.float()" in message
    assert "module" not in message  # the module is float32 already: converting it would not help


def test_a_half_precision_module_with_a_float32_input_names_the_conversion():
    model, x = _model_and_input(94)
    model = model.half()
    with torch.no_grad(), pytest.raises(TypeError) as error:
        model(x)
    message = str(error.value)
    assert "every tensor must have x's dtype torch.float32, got w torch.float16" in message
    assert "model.to(torch.float32), or convert the input" in message


def test_a_float64_module_with_an_int_input_names_the_module_and_the_input():
    model, x = _model_and_input(94)
    with torch.no_grad(), pytest.raises(TypeError) as error:
        model.double()(x.long())
    message = str(error.value)
    assert "convert the input: x.float()" in message and "convert the module: model.float()" in message
    assert "(its w, linear_bias" in message


def test_the_hint_for_parameters_alone():
    assert ops._dtype_fix(["w", "bias"]).startswith("convert the module: model.float() (its w, bias)")
