"""The bad-input matrix: every launcher of kernels/ (each `// @export` function of kernels/,
kernels/probes/ and kernels/exercises/), every registered op of utils/ops.py and every solution's
ModelNew, fed each kind of bad input (tests/bad_inputs.py: the rows, the specs, the judging). Each
gets PyTorch's behaviour or a clear error.

On the CPU (CI): every launcher has a spec that fits its prototype; each registered op's CPU path
(the reference math) and fake implementation give the same error for each bad input, a clear one
(the fake refuses, too, the devices the kernel would), and PyTorch's results where there is no
error; each ModelNew on the CPU does what Model does, or says clearly why not. On the GPU: each
launcher and each op, row by row, against PyTorch on the same device; each ModelNew on CUDA,
tensors on two GPUs included (skipped with fewer).

Elsewhere, not repeated here: how the kernels format numbers in their messages
(tests/test_kernel_messages.py); a ModelNew with batch 0, 1 and 37, strided and transposed inputs,
float16 and bfloat16, and a CPU input to a CUDA model (tests/test_solutions.py).
"""
import pytest
import torch

from solutions import solution
from tests import bad_inputs as bi
from utils import build, ops
from utils.chapters.session import solution_pair
from utils.problems import all_problems, get_problem

LAUNCHERS = bi.launchers()
OPS = build.registered_ops()  # utils.ops registered them (tests/bad_inputs.py imports it)
PIDS = [p.id for p in all_problems()]


def _cases(subject, rows) -> list:
    return [pytest.param(subject, row, id=f"{subject}-{row}") for row in rows]


def _launcher_cases() -> list:
    return [case for la in LAUNCHERS if la.key in bi.SPECS for case in _cases(la, bi.rows(la, bi.SPECS[la.key]))]


def _op_cases(gpu: bool) -> list:
    cases = []
    for qualname in OPS:
        launcher = bi.op_launcher(qualname)
        # on the CPU: no second GPU; and an op of one tensor runs its CPU path on a CPU tensor, as it should
        rows = [r for r in bi.rows(launcher, bi.SPECS[launcher.key])
                if gpu or not (r.kind == "other_gpu" or r.kind == "cpu" and len(launcher.tensors) == 1)]
        cases += _cases(qualname, rows)
    return cases


def _known(request, reasons, kind: str, kernel_runs: bool) -> None:
    """A failure the matrix knows of (bi.Spec.known), expected where the failing kernel runs (an op
    runs its `elsewhere` path where its kernel file does not build); strict, so that it is noticed
    when the device code is fixed."""
    if kind in reasons and kernel_runs:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reasons[kind]))


def _op(qualname: str):
    namespace, name = qualname.split("::")
    return getattr(getattr(torch.ops, namespace), name)


# --- the matrix itself --------------------------------------------------------------------------


def test_every_launcher_has_a_spec():
    keys = {la.key for la in LAUNCHERS}
    missing = [la.key for la in LAUNCHERS if la.tensors and la.key not in bi.SPECS]
    assert not missing, f"launchers without a spec in tests/bad_inputs.py SPECS: {missing}"
    assert not set(bi.SPECS) - keys, f"specs of no launcher: {sorted(set(bi.SPECS) - keys)}"
    # a launcher without tensor arguments (an exercise's constants) takes no bad tensor: no spec, no rows
    assert not [la.key for la in LAUNCHERS if not la.tensors and la.key in bi.SPECS]


@pytest.mark.parametrize("launcher", [la for la in LAUNCHERS if la.key in bi.SPECS], ids=str)
def test_a_spec_fits_its_launcher(launcher):
    spec = bi.SPECS[launcher.key]
    for n in (bi.BATCH, 1, 0) if spec.batch else (bi.BATCH,):
        args = spec.make(n, torch.Generator().manual_seed(0))
        assert len(args) == len(launcher.params), f"{len(args)} arguments for {launcher.names}"
        for arg, param in zip(args, launcher.params):
            want = {"int64_t": int, "double": float, "bool": bool}.get(param.ctype, torch.Tensor)
            assert isinstance(arg, want) and not (want is int and isinstance(arg, bool)), f"{param.text}: {arg!r}"
        spec.reference(*args)  # PyTorch's answer exists for valid arguments
    kinds = {row.kind for row in bi.rows(launcher, spec)}
    assert {"dtype", "cpu", "rank", "other_gpu"} <= kinds
    assert ("groups" in kinds) == ("num_groups" in launcher.names)


def test_every_registered_op_has_its_launchers_rows():
    listed = [*ops.ALL, *ops.BACKWARD, *ops.WHOLE_MODELS, "tf32_residual"]
    assert {f"workbook::{name}" for name in listed} <= set(OPS)
    assert all(bi.op_launcher(q).key in bi.SPECS for q in OPS)
    for qualname in OPS:  # the op's schema is its launcher's prototype: the names errors must say
        assert [a.name for a in _op(qualname).default._schema.arguments] == bi.op_launcher(qualname).names


def test_a_row_changes_what_it_says():
    launcher = next(la for la in LAUNCHERS if la.key == "groupnorm:swish_bias_group_norm")
    spec = bi.SPECS[launcher.key]
    valid = bi.arguments(launcher, spec, bi.Row("batch_1"))
    x, bias = valid[0], valid[1]
    assert x.shape == (1, bi.C) and bi.arguments(launcher, spec, bi.Row("zero_batch"))[0].shape == (0, bi.C)
    assert bi.arguments(launcher, spec, bi.Row("dtype", "bias"))[1].dtype == torch.float64
    assert bi.arguments(launcher, spec, bi.Row("rank", "bias"))[1].shape == (1, bi.C)
    assert bi.arguments(launcher, spec, bi.Row("shape", "bias"))[1].shape == (bi.C + 1,)
    strided = bi.arguments(launcher, spec, bi.Row("noncontiguous", "x"))[0]
    transposed = bi.arguments(launcher, spec, bi.Row("transposed", "x"))[0]
    plain = bi.arguments(launcher, spec, bi.Row("dtype", "bias"))[0]
    assert not strided.is_contiguous() and not transposed.is_contiguous()
    assert torch.equal(strided, plain) and torch.equal(transposed, plain)
    special = bi.arguments(launcher, spec, bi.Row("inf"))[0]
    assert special[0, 0] == float("inf") and special[-1, -1] == float("-inf") and special[1:-1].isfinite().all()
    assert bi.arguments(launcher, spec, bi.Row("groups"))[2] == 3  # 128 channels in 3 groups


def test_the_judge_can_fail():
    row = bi.Row("dtype", "gamma")
    nan = torch.tensor([float("nan"), 1.0])
    with pytest.raises(AssertionError, match="NaN"):
        bi.assert_like(torch.tensor([1.0, 1.0]), nan, 1e-4, row)
    with pytest.raises(AssertionError, match="differs"):
        bi.assert_like(torch.tensor([float("nan"), 1.1]), nan, 1e-4, row)
    with pytest.raises(AssertionError, match="names none of"):
        bi.assert_clear(RuntimeError("x must be float32"), row, ["x", "gamma"])
    with pytest.raises(AssertionError, match="what was expected"):
        bi.assert_clear(RuntimeError("gamma is wrong"), row, ["x", "gamma"])
    with pytest.raises(AssertionError, match="a GPU fault"):
        bi.assert_clear(RuntimeError("CUDA error: an illegal memory access was encountered (gamma float32)"), row, [])
    with pytest.raises(AssertionError, match="PyTorch runs this"):
        bi.judge(bi.Row("nan"), bi.Outcome(error=ValueError("x")), bi.Outcome(nan), 1e-4, ["x"])
    with pytest.raises(AssertionError, match="PyTorch refuses this"):
        bi.judge(row, bi.Outcome(nan), bi.Outcome(error=RuntimeError("no")), 1e-4, ["x"])
    bi.judge(row, bi.Outcome(error=TypeError("gamma must be float32")), bi.Outcome(nan), 1e-4, ["gamma"])


# --- the registered ops on the CPU: their CPU path and their fake implementation ---------------


@pytest.mark.parametrize("qualname, row", _op_cases(gpu=False))
def test_an_ops_cpu_path_and_fake_implementation_agree(qualname, row):
    launcher, op = bi.op_launcher(qualname), _op(qualname)
    spec = bi.SPECS[launcher.key]
    if row.kind in bi.GPU_ONLY:  # fake tensors on CUDA, one of them elsewhere: what the kernel refuses
        fake = bi.fake_outcome(op, bi.valid_arguments(spec), lambda fakes: bi.fake_devices(launcher, row, fakes))
        assert fake.error is not None, f"{row}: the fake implementation accepts what the kernel refuses"
        bi.assert_clear(fake.error, row, launcher.names)
        return
    args = bi.arguments(launcher, spec, row)
    cpu, fake = bi.outcome(op, args), bi.fake_outcome(op, args)
    if cpu.error is not None or fake.error is not None:
        assert (type(fake.error), str(fake.error)) == (type(cpu.error), str(cpu.error)), f"{row}: CPU {cpu}, fake {fake}"
    else:
        bi.assert_like(fake.value, cpu.value, None, row)
    bi.judge(row, cpu, bi.outcome(spec.reference, args), spec.tol, launcher.names)


# --- on the GPU: every launcher and every op, row by row ----------------------------------------


def _two_gpus(kind: str) -> None:
    if kind in bi.TWO_GPUS and torch.cuda.device_count() < 2:
        pytest.skip(f"{kind} needs two GPUs; this machine has {torch.cuda.device_count()}")


def _on_the_gpu(request, fn, launcher: bi.Launcher, row: bi.Row) -> None:
    _two_gpus(row.kind)
    spec = bi.SPECS[launcher.key]
    _known(request, spec.known, row.kind, launcher.builds_here())
    with torch.cuda.device(0):
        args = bi.arguments(launcher, spec, row, "cuda:0")
        got = bi.outcome(fn, args, sync=True)
        bi.judge(row, got, bi.outcome(spec.reference, args, sync=True), spec.tol, launcher.names)


@pytest.mark.gpu
@pytest.mark.parametrize("launcher, row", _launcher_cases())
def test_a_launcher_gets_pytorchs_behaviour_or_a_clear_error(request, launcher, row):
    if not launcher.builds_here():
        pytest.skip(f"kernels/{launcher.key.split(':')[0]}.cu does not build for this GPU (its // @arch line)")
    _on_the_gpu(request, launcher.load(), launcher, row)


@pytest.mark.gpu
@pytest.mark.parametrize("qualname, row", _op_cases(gpu=True))
def test_an_op_on_the_gpu_gets_pytorchs_behaviour_or_a_clear_error(request, qualname, row):
    _on_the_gpu(request, _op(qualname), bi.op_launcher(qualname), row)


# --- the solutions ------------------------------------------------------------------------------

SOLUTION_ROWS = {  # id -> the row as judged; the input x it changes is below
    "dtype": bi.Row("dtype", "x"), "rank": bi.Row("rank", "x"), "rank_1d": bi.Row("rank", "x"),
    "shape": bi.Row("shape", "x"), "nan": bi.Row("nan"), "inf": bi.Row("inf"), "near_max": bi.Row("near_max"),
    "groups": bi.Row("groups"), "mixed_gpus": bi.Row("mixed_gpus", "x"), "other_gpu": bi.Row("other_gpu"),
}
CPU_SOLUTION_ROWS = [r for r in SOLUTION_ROWS if SOLUTION_ROWS[r].kind not in bi.GPU_ONLY]
# (pid -> row -> why it fails where the fused kernel runs: device code this matrix may not change gets it wrong)
KNOWN: dict[int, dict[str, str]] = {}


def _group_norm(model: torch.nn.Module) -> torch.nn.GroupNorm:
    return next(m for m in model.modules() if isinstance(m, torch.nn.GroupNorm))


def _solution_case(pid: int, row_id: str, device: str) -> None:
    """Model and ModelNew (the same weights) on x changed as the row says, judged as a launcher is:
    ModelNew does what Model does, or raises a clear error."""
    row = SOLUTION_ROWS[row_id]
    ref, new = solution_pair(pid, device=device)
    x = torch.rand(bi.BATCH, get_problem(pid).dims("small").in_features, generator=torch.Generator().manual_seed(1))
    x = x.to(device)
    if row_id == "other_gpu":
        ref, new, x = ref.to("cuda:1"), new.to("cuda:1"), x.to("cuda:1")
    elif row.kind in bi.SPECIALS:
        x.view(-1)[0], x.view(-1)[-1] = bi.SPECIALS[row.kind]
    elif row.kind == "groups":  # a model built right whose GroupNorm then gets groups that do not divide C
        for model in (ref, new):
            _group_norm(model).num_groups = bi.non_divisor(_group_norm(model).num_channels)
    else:
        x = {"dtype": lambda: x.double(), "rank": lambda: x.unsqueeze(0), "rank_1d": lambda: x[0],
             "shape": lambda: torch.cat([x, x[:, :1]], dim=1), "mixed_gpus": lambda: x.to("cuda:1")}[row_id]()
    with torch.no_grad():
        got, want = bi.outcome(new, [x], sync=device != "cpu"), bi.outcome(ref, [x], sync=device != "cpu")
    bi.judge(row, got, want, 1e-4, ["x"])


@pytest.mark.parametrize("row_id", CPU_SOLUTION_ROWS)
@pytest.mark.parametrize("pid", PIDS)
def test_a_solution_on_the_cpu_does_what_model_does_or_says_why_not(pid, row_id):
    _solution_case(pid, row_id, "cpu")


@pytest.mark.parametrize("pid", PIDS)
def test_groups_that_do_not_divide_c_fail_as_the_reference_does(pid):
    p = get_problem(pid)
    init = p.init_inputs("small")
    at = 3 if pid == 94 else 2  # where num_groups sits among the constructor's arguments
    assert init[at] == p.dims("small").groups
    init[at] = bi.non_divisor(p.dims("small").out_features)
    with pytest.raises(ValueError) as theirs:
        p.Model(*init)
    with pytest.raises(ValueError) as ours:
        solution(pid).ModelNew(*init)
    assert str(ours.value) == str(theirs.value) and "divisible" in str(ours.value)


@pytest.mark.gpu
@pytest.mark.parametrize("row_id", list(SOLUTION_ROWS))
@pytest.mark.parametrize("pid", PIDS)
def test_a_solution_on_the_gpu_does_what_model_does_or_says_why_not(request, pid, row_id):
    _two_gpus(SOLUTION_ROWS[row_id].kind)
    _known(request, KNOWN.get(pid, {}), row_id, build.builds_here("fused_gemm_groupnorm"))
    with torch.cuda.device(0):
        _solution_case(pid, row_id, "cuda:0")
