"""utils.check catches what it claims to: each test feeds it a model that is wrong in one way
(tests/hacks.py) and asserts that the check for that way fails, so removing a check fails
its test. A faithful model must pass everywhere."""
import pytest
import torch
import torch.nn.functional as F

import hacks
from utils import check
from utils.check import (
    FN_CHECKS, IGNORED_OPS, MODEL_CHECKS, CheckReport, CheckResult, check_fn, check_model, torch_ops_called,
)
from utils.precision import flags as precision_flags
from utils.precision import ieee_fp32
from utils.problems import all_problems, get_problem

CUDA_ONLY = {"poisoned_output", "stream", "torch_fallback"}
REFERENCE_OPS_62 = ["aten::addmm", "aten::native_group_norm", "aten::leaky_relu", "aten::add"]


@pytest.fixture(autouse=True)
def one_cpu_thread():
    """The small problems gain nothing from threads, and on a machine whose other cores are busy
    OpenMP's spin-waiting makes one check_model take seconds instead of a tenth of one."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _reference_class(problem):
    return type("Faithful", (problem.Model,), {})


def _failed_only(report: CheckReport, *names: str) -> None:
    assert sorted(report.failed) == sorted(names), str(report)


# -- a faithful model ------------------------------------------------------------------------


@pytest.mark.parametrize("pid", [p.id for p in all_problems()])
def test_faithful_model_passes_on_cpu(pid):
    report = check_model(pid, _reference_class(get_problem(pid)), device="cpu")
    assert report.ok, str(report)
    assert [c.name for c in report.checks] == list(MODEL_CHECKS)
    assert set(report.skipped) == CUDA_ONLY  # said so, never passed
    for name in CUDA_ONLY:
        assert report[name].detail, "a skip carries its reason"
    assert report.tier == "strict" and report.device == "cpu"


@pytest.mark.gpu
@pytest.mark.parametrize("pid", [p.id for p in all_problems()])
def test_faithful_model_on_gpu_is_a_fallback_and_nothing_else(pid):
    problem = get_problem(pid)
    report = check_model(pid, _reference_class(problem))
    _failed_only(report, "torch_fallback")
    assert not report.skipped, str(report)
    x = problem.get_inputs("small")[0].cuda()
    with torch.no_grad():
        ops = torch_ops_called(problem.make_model("small").cuda(), x) - IGNORED_OPS
    assert check_model(pid, _reference_class(problem), allow_torch_ops=ops).ok


# -- construction and parameters ---------------------------------------------------------------


def test_new_parameter_names_fail_construction_and_stop_the_run():
    report = check_model(62, hacks.NewParameters, device="cpu")
    _failed_only(report, "construction")
    assert "gamma" in report["construction"].detail
    assert set(report.skipped) == set(MODEL_CHECKS) - {"construction"}


def test_creation_order_fails_construction_but_the_rest_runs():
    report = check_model(62, hacks.ReorderedParameters, device="cpu")
    _failed_only(report, "construction")
    assert "order" in report["construction"].detail
    assert report["trials"].status == "pass"


def test_ignored_groupnorm_affine_fails_trials_because_params_are_randomised():
    report = check_model(62, hacks.IgnoresAffine, device="cpu")
    assert "trials" in report.failed, str(report)
    assert "gn.weight" in report["random_params"].detail


def test_constructor_rejecting_the_arguments_fails_construction():
    class NoEps(hacks.Model62):
        def __init__(self, input_size, hidden_size, num_groups):
            super().__init__(input_size, hidden_size, num_groups)

    report = check_model(62, NoEps, device="cpu")
    _failed_only(report, "construction")
    assert "__init__" in report["construction"].detail


# -- outputs ------------------------------------------------------------------------------------


def test_wrong_broadcast_shape_fails_trials():
    report = check_model(75, hacks.MinWithoutBroadcast, device="cpu")
    assert "trials" in report.failed
    assert "shape (64, 1), expected (1, 1024, 64, 1)" in report["trials"].detail


def test_a_single_nan_fails_trials():
    class OneNaN(hacks.Model62):
        def forward(self, x):
            out = super().forward(x)
            out[0, 0] = float("nan")
            return out

    report = check_model(62, OneNaN, device="cpu")
    assert "trials" in report.failed
    assert "1 NaN/inf where the reference is finite" in report["trials"].detail


def test_crash_is_reported_not_raised():
    report = check_model(62, hacks.Crashes, device="cpu")
    assert "trials" in report.failed
    assert "raised RuntimeError: illegal configuration" in report["trials"].detail
    assert report["inputs_unchanged"].status == "skip"  # no call completed: nothing to judge


def test_tile_edge_bug_fails_odd_shapes_only():
    report = check_model(62, hacks.FullTilesOnly, device="cpu")
    _failed_only(report, "odd_shapes")


def test_odd_scale_run_skips_odd_shapes():
    report = check_model(62, hacks.Faithful, scale="odd", device="cpu")
    assert report.ok and report["odd_shapes"].status == "skip"


# -- inputs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", [hacks.ZeroesInput, hacks.EditsInput])
def test_writing_into_the_input_fails_inputs_unchanged(model):
    report = check_model(62, model, device="cpu")
    assert "inputs_unchanged" in report.failed, str(report)


def test_caching_by_pointer_fails_input_sensitivity():
    report = check_model(62, hacks.CachesByPointer, device="cpu")
    assert "input_sensitivity" in report.failed, str(report)


def test_contiguity_assumption_fails_noncontiguous_input():
    report = check_model(62, hacks.AssumesContiguous, device="cpu")
    _failed_only(report, "noncontiguous_input")


def test_a_wrong_formula_gets_one_failure_with_the_right_diagnosis():
    report = check_model(62, hacks.WrongSlope, device="cpu")
    _failed_only(report, "trials")
    assert "mismatched" in report["trials"].detail
    for name in ("precision", "input_sensitivity", "odd_shapes", "noncontiguous_input", "gradients"):
        assert report[name].status == "skip" and report[name].detail.startswith(check.ALREADY_WRONG), name
    assert "beyond what rounding does" in report["precision"].detail  # its own evidence: 8.6e-02, not rounding


@pytest.mark.gpu
def test_a_wrong_formula_on_gpu_is_not_blamed_on_memory_streams_or_caches():
    report = check_model(62, hacks.WrongSlope, allow_torch_ops=REFERENCE_OPS_62)
    _failed_only(report, "trials")
    assert report["poisoned_output"].status == "skip" and "not unwritten memory" in report["poisoned_output"].detail
    assert report["stream"].detail == check.ALREADY_WRONG


def test_one_output_buffer_for_every_call_fails_output_owned():
    report = check_model(62, hacks.ReusesOutputBuffer, device="cpu")
    _failed_only(report, "output_owned")
    assert "same storage" in report["output_owned"].detail


def test_an_output_without_autograd_fails_gradients():
    report = check_model(62, hacks.DetachedOutput, device="cpu")
    _failed_only(report, "gradients")
    assert "carries no gradient" in report["gradients"].detail


def test_a_wrong_backward_fails_gradients():
    report = check_model(62, hacks.WrongGradient, device="cpu")
    _failed_only(report, "gradients")
    assert "wrong gradients" in report["gradients"].detail and "input 0" in report["gradients"].detail


def test_a_parameter_left_out_of_backward_fails_gradients():
    report = check_model(62, hacks.FrozenBias, device="cpu")
    _failed_only(report, "gradients")
    assert "no gradient reaches fc.bias" in report["gradients"].detail


def _kinked_gradients(flips: int, seed: int = 0) -> dict:
    """A gradient of a million elements (float64 truth) and an fp32 one that jumps by about its rms
    at `flips` elements (which ones: `seed`), as a forward rounded to the other side of a kink makes it."""
    truth = torch.randn(1_000_000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    fp32 = truth.float()
    idx = torch.randperm(1_000_000, generator=torch.Generator().manual_seed(seed))[:flips]
    fp32[idx] += 1.0
    return {"w": fp32}, {"w": truth}


def test_gradients_are_judged_elementwise_where_the_reference_is_determined():
    strict = check.TIERS["strict"]
    ref, exact = _kinked_gradients(0)
    calls = []
    new = {"w": ref["w"] + 1e-3 * torch.randn(1_000_000)}  # small but beyond the tier everywhere
    status, detail = check.judge_gradients(new, ref, lambda: calls.append(1) or exact, strict)
    assert status == "fail" and "wrong gradients for 1 of 1" in detail and calls == [1]
    status, _ = check.judge_gradients({"w": ref["w"].clone()}, ref, lambda: calls.append(2) or exact, strict)
    assert status == "pass" and calls == [1]  # float64 is computed only when needed


def test_gradients_across_kinks_are_judged_norm_wise_against_float64():
    strict = check.TIERS["strict"]
    ref, exact = _kinked_gradients(3, seed=1)   # the reference flipped 3 elements ...
    new, _ = _kinked_gradients(5, seed=2)       # ... ours 5 others: rounding, not a wrong formula
    status, detail = check.judge_gradients(new, ref, lambda: exact, strict)
    assert status == "pass" and "norm-wise vs float64" in detail
    # a formula that loses a factor 2 is far outside the band, kinks or not
    status, detail = check.judge_gradients({"w": new["w"] / 2}, ref, lambda: exact, strict)
    assert status == "fail" and "of what rounding does" in detail
    # NaN is not rounding either
    status, _ = check.judge_gradients({"w": new["w"] * float("nan")}, ref, lambda: exact, strict)
    assert status == "fail"


def test_where_moving_the_input_within_the_tier_moves_float64s_gradients_more_the_band_follows():
    # a row-wise choice (75's minimum): each flip moves a whole row, so a few flips exceed the fixed band
    tf32 = check.TIERS["tf32"]
    truth = torch.randn(1024, 256, generator=torch.Generator().manual_seed(0), dtype=torch.float64)

    def rows_moved(rows: int, seed: int) -> torch.Tensor:
        g = truth.clone()
        g[torch.randperm(1024, generator=torch.Generator().manual_seed(seed))[:rows]] *= -1
        return g

    ref = {"w": rows_moved(0, 0).float()}
    ref["w"] += 1.0  # beyond the tier elementwise: judged against float64
    new = {"w": rows_moved(5, 1).float()}                  # 5 rows flipped: ~14% of the norm
    moved64 = lambda: [{"w": rows_moved(20, 2)}]             # float64 itself, the input moved: 20 rows
    status, detail = check.judge_gradients(new, ref, lambda: {"w": truth}, tf32, moved64)
    assert status == "pass" and "float64's own, the input moved within the tier" in detail
    status, detail = check.judge_gradients(new, ref, lambda: {"w": truth}, tf32, lambda: [{"w": truth}])
    assert status == "fail" and "band 0.05" in detail       # float64 unmoved by the move: the fixed band
    status, _ = check.judge_gradients({"w": new["w"] * 3}, ref, lambda: {"w": truth}, tf32, moved64)
    assert status == "fail"                                  # a wrong formula stays wrong
    # the band is the largest of the draws: one draw that moved 3 rows alone would fail 5 flipped rows
    draws = lambda: [{"w": rows_moved(3, 3)}, {"w": rows_moved(20, 2)}, {"w": rows_moved(1, 4)}]  # noqa: E731
    assert check.judge_gradients(new, ref, lambda: {"w": truth}, tf32, lambda: draws()[:1])[0] == "fail"
    assert check.judge_gradients(new, ref, lambda: {"w": truth}, tf32, draws)[0] == "pass"


def test_an_inference_only_model_skips_gradients_and_says_so():
    report = check_model(62, hacks.DetachedOutput, device="cpu", training=False)
    assert report.ok and "inference only" in report["gradients"].detail


def test_training_step_skips_with_the_reason_where_it_would_repeat_a_failure_or_is_not_wanted():
    report = check_model(62, hacks.FrozenBias, device="cpu")
    assert report["training_step"].status == "skip" and report["training_step"].detail == check.GRADIENTS_WRONG
    shared = check_model(62, hacks.ReusesOutputBuffer, device="cpu")  # its second backward would only crash
    assert shared["training_step"].status == "skip" and shared["training_step"].detail == check.OUTPUT_NOT_OWNED
    inference = check_model(62, hacks.Faithful, device="cpu", training=False)
    assert inference["training_step"].status == "skip" and "inference only" in inference["training_step"].detail
    assert inference["param_writes"].status == "pass"  # an inference model's weights get written too


# -- batches, training steps and parameter writes ------------------------------------------------


@pytest.mark.parametrize("scale", ["small", "odd"])
def test_rows_past_256_fail_large_batch_at_every_scale(scale):
    report = check_model(62, hacks.RowsWrapAt256, scale=scale, device="cpu")
    _failed_only(report, "large_batch")  # no other trial has more than 256 rows
    rows = check.large_batch(get_problem(62).dims(scale).batch)
    assert f"batch {rows}, where the trials' " in report["large_batch"].detail


@pytest.mark.parametrize("pid", [p.id for p in all_problems()])
def test_the_large_batch_outgrows_every_tile_and_the_full_batch(pid):
    for scale in ("small", "odd", "full"):
        batch = get_problem(pid).dims(scale).batch
        rows = check.large_batch(batch)
        assert rows > max(1024, batch) and rows % 2 == 1, (scale, rows)  # odd: a multiple of no tile
    report = check_model(pid, _reference_class(get_problem(pid)), device="cpu")
    assert report["large_batch"].status == "pass"
    assert f"batch {check.large_batch(get_problem(pid).dims('small').batch)} " in report["large_batch"].detail


def test_a_weight_kept_from_the_first_call_fails_training_step_and_param_writes():
    report = check_model(62, hacks.SnapshotsWeight, device="cpu")
    _failed_only(report, "training_step", "param_writes")
    assert "after one SGD step, ModelNew's output is not what its weights give" in report["training_step"].detail
    detail = report["param_writes"].detail
    assert "8 of 32 parameter writes" in detail  # every way of writing fc.weight, and nothing else
    assert "first after p.data.copy_(new) on fc.weight (p._version unchanged): max abs" in detail


def test_a_cache_keyed_on_the_version_counter_fails_param_writes_only():
    report = check_model(62, hacks.CachesWeightByVersion, device="cpu")
    _failed_only(report, "param_writes")  # optimizer steps of the training step bump the counter
    detail = report["param_writes"].detail
    assert "4 of 32 parameter writes" in detail, detail
    assert "first after p.data.copy_(new) on fc.weight (p._version unchanged)" in detail
    for blind in ("p.data.mul_(-1)", "p.data[:k].zero_()", "fused=True"):
        assert blind in detail, blind
    for seen in ("torch.no_grad()", "p.data = new", "load_state_dict", "SGD"):  # counter or storage changes
        assert seen not in detail, seen


def test_a_backward_that_keeps_the_first_weight_fails_training_step_after_the_step():
    report = check_model(62, hacks.StaleInputGradient, device="cpu")
    _failed_only(report, "training_step")
    detail = report["training_step"].detail
    assert detail.startswith("after the SGD step, at the same weights as the reference: wrong gradients"), detail
    assert "input 0" in detail


def test_the_steps_and_writes_move_the_output_far_beyond_the_tier():
    report = check_model(62, hacks.Faithful, device="cpu")
    n = len(check.PARAM_WRITES) * 4
    assert f"all {n} writes seen" in report["param_writes"].detail
    # what a model that missed each step would show: most outputs outside the tier
    moved = report["training_step"].detail.split("outside the tier: ")[1].split(")")[0]
    for step in moved.split(" and "):
        label, counts = step.split()
        changed, total = map(int, counts.split("/"))
        assert changed > total // 2, step


@pytest.mark.parametrize("model", [hacks.SnapshotsWeight, hacks.CachesWeightByVersion])
def test_weight_caches_fail_at_the_tf32_tier_too(model):
    report = check_model(62, model, device="cpu", tier="tf32")
    assert "param_writes" in report.failed, str(report)


def test_nondeterminism_fails_repeatable():
    report = check_model(62, hacks.Noisy, device="cpu")
    assert "repeatable" in report.failed, str(report)
    assert "deterministic by design" in report["repeatable"].detail


# -- precision and tiers ---------------------------------------------------------------------


def test_bf16_gemm_fails_precision():
    report = check_model(62, hacks.Bf16Gemm, device="cpu")
    assert "precision" in report.failed, str(report)


def test_switching_tf32_on_fails_global_state_and_is_undone():
    before = precision_flags()
    report = check_model(62, hacks.SwitchesTF32On, device="cpu")
    _failed_only(report, "global_state")
    assert precision_flags() == before
    assert torch.backends.cuda.matmul.allow_tf32 is False


def test_off_by_5e3_fails_strict_and_passes_tf32():
    strict = check_model(62, hacks.OffBy5e3, tier="strict", device="cpu")
    assert "trials" in strict.failed
    tf32 = check_model(62, hacks.OffBy5e3, tier="tf32", device="cpu")
    assert tf32.ok, str(tf32)
    assert tf32["precision"].status == "skip" and "not judged" in tf32["precision"].detail


def test_auto_tier_follows_the_fp32_matmul_setting():
    assert check_model(62, hacks.Faithful, device="cpu").tier == "strict"
    torch.set_float32_matmul_precision("high")
    report = check_model(62, hacks.Faithful, device="cpu")
    assert report.tier == "tf32"
    assert torch.get_float32_matmul_precision() == "high"  # the reference's IEEE run is undone


def test_ieee_fp32_restores_inherited_flags():
    if not hasattr(torch.backends, "fp32_precision"):
        pytest.skip("torch < 2.9 has no fp32_precision tree")
    torch.backends.fp32_precision = "tf32"
    with ieee_fp32():
        assert torch.backends.cuda.matmul.fp32_precision == "ieee"
    assert torch.backends.cuda.matmul.fp32_precision == "tf32"
    # still inherited, not pinned: it follows the global setting again
    torch.backends.fp32_precision = "none"
    assert torch.backends.cuda.matmul.fp32_precision == "none"


# -- which PyTorch ops run ---------------------------------------------------------------------


def test_torch_ops_called_sees_the_reference_ops():
    problem = get_problem(62)
    with torch.no_grad():
        ops = torch_ops_called(problem.make_model("small"), problem.get_inputs("small")[0])
    assert {"aten::addmm", "aten::native_group_norm", "aten::leaky_relu", "aten::add"} <= ops


def test_torch_ops_called_ignores_views():
    x = torch.rand(8, 6)
    ops = torch_ops_called(lambda t: t.view(6, 8).t().reshape(-1)[2:].unsqueeze(0).permute(1, 0), x)
    assert ops and ops <= IGNORED_OPS


def test_fallback_ops_flags_reference_ops_and_gemm_family_unless_allowed():
    problem = get_problem(62)
    x = problem.get_inputs("small")[0]
    with torch.no_grad():
        ref_ops = torch_ops_called(problem.make_model("small"), x)
        fallback = torch_ops_called(hacks.FallsBack(*problem.init_inputs("small")), x)
    assert {"aten::addmm", "aten::native_group_norm"} <= check._fallback_ops(ref_ops, fallback)
    custom_gemm_then_torch_mm = {"aten::empty", "aten::t", "aten::mm"}
    assert check._fallback_ops(ref_ops, custom_gemm_then_torch_mm) == {"aten::mm"}
    assert check._fallback_ops(ref_ops, custom_gemm_then_torch_mm, ["aten::mm.default"]) == set()
    with pytest.raises(ValueError, match="aten::mm"):
        check_model(62, hacks.Faithful, device="cpu", allow_torch_ops=["mm"])


def test_arguments_are_validated():
    with pytest.raises(ValueError, match="at least 5 trials"):
        check_model(62, hacks.Faithful, device="cpu", trials=3)
    with pytest.raises(ValueError, match="tier"):
        check_model(62, hacks.Faithful, device="cpu", tier="fp8")


# -- the report --------------------------------------------------------------------------------


def test_report_table_and_raise():
    report = check_model(62, hacks.ZeroesInput, device="cpu")
    text = str(report)
    for c in report.checks:
        assert c.name in text
    assert "skip" in text and "FAILED: inputs_unchanged" in text
    with pytest.raises(AssertionError, match="inputs_unchanged"):
        report.raise_if_failed()
    assert "<table>" in report._repr_html_()
    with pytest.raises(ValueError):
        CheckResult("trials", "ok")


# -- single functions --------------------------------------------------------------------------


def _activations(g):
    return torch.randn(64, 96, generator=g) * 3  # well past Hardtanh's [-1, 1]


def _hardtanh_mish(x):
    return F.mish(F.hardtanh(x))


def test_check_fn_passes_a_faithful_function():
    report = check_fn(lambda x: F.mish(F.hardtanh(x)), _hardtanh_mish, _activations, device="cpu")
    assert report.ok, str(report)
    assert [c.name for c in report.checks] == list(FN_CHECKS)


def test_check_fn_takes_several_inputs_of_any_rank():
    def swish_bias(x, bias):
        return x * torch.sigmoid(x) + bias

    def inputs(g):
        return [torch.randn(32, 48, generator=g), torch.randn(48, generator=g)]

    report = check_fn(lambda x, b: F.silu(x) + b, swish_bias, inputs, device="cpu", name="silu + bias")
    assert report.ok, str(report)
    assert report.subject.startswith("silu + bias")


def test_check_fn_catches_seed_000s_hardtanh_range():
    report = check_fn(lambda x: F.mish(F.hardtanh(x, 0.0, 2.0)), _hardtanh_mish, _activations, device="cpu")
    assert "trials" in report.failed


def test_check_fn_catches_an_in_place_activation():
    report = check_fn(lambda x: F.mish(x.clamp_(-1, 1)), _hardtanh_mish, _activations, device="cpu")
    assert "inputs_unchanged" in report.failed, str(report)


# -- CUDA-only checks ---------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("model", [hacks.UninitialisedOutput, hacks.PartlyWrittenOutput])
def test_unwritten_output_fails_poisoned_output(model):
    report = check_model(62, model)
    assert "poisoned_output" in report.failed, str(report)
    assert "changes with the poison" in report["poisoned_output"].detail  # even when trials fail too


@pytest.mark.gpu
def test_side_stream_fails_stream():
    report = check_model(62, hacks.SideStream, allow_torch_ops=REFERENCE_OPS_62)
    _failed_only(report, "stream")


@pytest.mark.gpu
def test_fallback_fails_torch_fallback():
    report = check_model(62, hacks.FallsBack)
    _failed_only(report, "torch_fallback")
    assert "aten::addmm" in report["torch_fallback"].detail


@pytest.mark.gpu
def test_tf32_gemm_under_ieee_fails_precision():
    report = check_model(62, hacks.TF32Inside)
    assert report.tier == "strict"
    assert "precision" in report.failed, str(report)


@pytest.mark.gpu
def test_tf32_allowed_selects_tf32_tier_and_keeps_the_reference_ieee():
    torch.backends.cuda.matmul.allow_tf32 = True
    report = check_model(62, hacks.Faithful, allow_torch_ops=REFERENCE_OPS_62)
    assert report.tier == "tf32"
    assert report.ok, str(report)
    assert "reported, not judged" in report["precision"].detail


def _refuses_strided(x, w):
    if not (x.is_contiguous() and w.is_contiguous()):
        raise RuntimeError("x must be contiguous (call .contiguous())")
    return F.linear(x, w)


def _two_matrices(g):
    return [torch.rand(37, 65, generator=g), torch.rand(129, 65, generator=g)]


def test_a_raw_kernel_may_refuse_strided_inputs_loudly_but_a_model_may_not():
    strict = check_fn(_refuses_strided, F.linear, _two_matrices, device="cpu")
    assert strict.failed == ["noncontiguous_input"]
    lenient = check_fn(_refuses_strided, F.linear, _two_matrices, device="cpu", contiguous_only=True)
    assert lenient.ok and "refuses" in lenient["noncontiguous_input"].detail


def test_contiguous_only_still_fails_silent_garbage_and_other_errors():
    def reads_storage_as_contiguous(x, w):  # strided views indexed as if dense: wrong, silently
        dense = lambda t: torch.as_strided(t, t.shape, (t.shape[1], 1), t.storage_offset())  # noqa: E731
        return F.linear(dense(x), dense(w))

    def raises_something_else(x, w):
        if not x.is_contiguous():
            raise RuntimeError("out of memory")
        return F.linear(x, w)

    for fn in (reads_storage_as_contiguous, raises_something_else):
        report = check_fn(fn, F.linear, _two_matrices, device="cpu", contiguous_only=True)
        assert "noncontiguous_input" in report.failed, fn.__name__
