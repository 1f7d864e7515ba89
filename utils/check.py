"""The correctness harness: KernelBench's protocol, hardened.

(Over 600 lines on purpose: one job, one check per way a kernel can pass KernelBench without being
right, each with its own docstring and verdict; split apart, the checks would share their trial
machinery across modules for no reader's gain.)

    >>> report = check_model(62, ModelNew)      # small scale; the tier follows torch's fp32 matmul setting
    >>> print(report)                           # one row per check: check | result | detail
    >>> report.raise_if_failed()
    >>> check_model(62, ModelNew, dtype=torch.bfloat16)   # a model wholly in bf16, at the bf16 tier

KernelBench builds `Model` and `ModelNew` under one seed and compares their outputs on a few
random inputs. A kernel can pass that without being right; each check below closes one way,
and tests/test_check.py holds a model that takes each way and shows its check failing.

    construction         new, renamed or reordered parameters: seeded weights differ, or
                         ModelNew().load_state_dict(Model().state_dict(), strict=True) breaks
    random_params        (setup) every GroupNorm γ/β and every bias gets random values, since the
                         defaults γ=1, β=0 make a model that ignores them exact
    trials               wrong values, shape (75 is (1, C, N, 1)), dtype or device; NaN or inf
    precision            a bf16 / fp16 / TF32 downgrade under the strict tier (error vs float64)
    inputs_unchanged     a model that writes into its input
    global_state         a model that switches TF32 (or any fp32 precision flag) on for everyone
    poisoned_output      an output never (fully) written, e.g. torch.empty   [CUDA]
    repeatable           races and other nondeterminism (the workbook's kernels are deterministic)
    output_owned         an output that a later call changes (one buffer handed out by every call)
    input_sensitivity    results cached by input pointer or shape
    odd_shapes           tile-edge bugs: the "odd" scale is a multiple of nothing a kernel tiles by
    large_batch          a row count, grid or buffer hard-coded for the batches tried: one trial of
                         max(1,024, the scale's batch) + 37 rows at the scale's in/out features
    noncontiguous_input  kernels that index their input as if it were contiguous
    stream               work launched on a stream other than the caller's current one   [CUDA]
    torch_fallback       a "kernel" that is the reference's PyTorch ops underneath   [CUDA]
    gradients            an output that carries no gradient, or wrong gradients, for the input
                         or any parameter (backward against the reference's autograd; norm-wise
                         against float64 where the reference's own are not determined to the tier)
    training_step        anything derived from the weights (a copy, a split, a prepacked weight)
                         kept past an optimizer step: a step of SGD, then of Adam, on ModelNew's own
                         gradients; after each, its output must be what the reference gives with
                         ModelNew's new weights, and after the first its gradients too (as judged
                         in `gradients`)
    param_writes         a write to a parameter that goes unseen: every way in PARAM_WRITES (in place
                         through p.data and through a view of it, under no_grad, p.data = new,
                         load_state_dict, an SGD and a fused Adam step), one parameter at a time and
                         alike in both models, each followed by a comparison at the tier. A cache keyed
                         on the version counter fails it: .data has a counter of its own, and fused
                         optimizer steps (torch 2.14) leave the counter as it was
    autocast             under torch.autocast(bfloat16), an error, another output dtype than the
                         reference's, or values outside the autocast tier (autocast_tier) of float64's

`inputs_unchanged` and `global_state` watch every call the other checks make. A check that
cannot run here reports `skip` with the reason, never `pass`; a skip does not fail the report.
One wrong value gets one diagnosis: once `trials` has found wrong values, the other checks that
compare with the reference report "skip: the values are already wrong (see trials)" instead of
each failing with a hypothesis of its own (a race, another stream, a cache...); likewise
`training_step` skips once `gradients` has failed (its steps would follow wrong gradients) or
`output_owned` has (its second backward would fail on the shared output). Two checks have
evidence of their own and still judge: `poisoned_output` (an output that changes with the poison
depends on memory it never wrote, whatever else is wrong) and `precision` (an error against
float64 of the size rounding makes, under ROUNDING_BAND, is a lower-precision GEMM; a larger one
is a wrong value, and precision then skips too).
`odd_shapes` always runs at the "odd" scale next to the requested one (it is a skip only when
the requested scale is "odd" itself). `training_step` and `param_writes` write parameters, so
each runs on a pair of its own: a copy of the (randomised) reference and a ModelNew built anew
that holds its weights.

`check_fn(fn, ref_fn, inputs_factory)` runs the same checks, less those about models and
scales, on a single function such as one kernel's binding against its PyTorch expression.
"""
from __future__ import annotations

import copy
import html
import inspect
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator, Sequence

import torch
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode

from utils import precision
from utils.op_declaration import FLOAT32
from utils.precision import ieee_fp32
from utils.problems import Problem, get_problem


@dataclass(frozen=True)
class Tier:
    atol: float
    rtol: float
    # where a gradient cannot be judged elementwise (judge_gradients), its norm-wise error against
    # float64 may reach this: what rounding the forward at this tier does through the models' kinks
    gradient_band: float = 1e-2
    # how far judge_gradients moves the input to see whether the gradients are determined to the tier:
    # by the tier itself, as any forward within the tier may (an fp32 GEMM's error is ~1e-6, a 3xTF32
    # one's 2e-6, TF32's 3e-4 to 7e-4: experiments/training/gradient_probe.py; moved by a quarter of
    # the tier, float64's gradients still missed a kink that a 3xTF32 forward flipped, seen on the H200)
    noise: float = 1e-4


# strict: KernelBench main (fp32); tf32: KernelBench v0 / v0.1, what TF32 tensor cores can meet.
# The gradient bands, measured at the problems' full sizes on the H100 and H200 (experiments/training/):
# a drop-in's gradients within 9e-4 of float64's norm at the strict tier; with TF32, eager's own reach
# 1.4e-2 (62) and ours 1.5e-2, a few times the strict tier's because a flipped kink (LeakyReLU's
# zero, Hardtanh's clip) costs a whole element and TF32's forward moves a thousand times more of them.
# bf16, fp16: results computed in 16 bits, or whose GEMM is (bf16 keeps 8 significant bits, fp16 11): a model
# or a GEMM in that dtype (rung 11), and one under torch.autocast in that dtype, whose reference itself runs its
# GEMM there (its error against float64: up to 2.2e-2 for bf16 at the small scale, 62's output left in bf16 on
# the CPU).
TIERS = {"strict": Tier(atol=1e-4, rtol=1e-4), "tf32": Tier(atol=1e-2, rtol=1e-2, gradient_band=5e-2, noise=1e-2),
         "bf16": Tier(atol=5e-2, rtol=5e-2, gradient_band=1e-1, noise=5e-2),
         "fp16": Tier(atol=1e-2, rtol=1e-2, gradient_band=5e-2, noise=1e-2)}
FP32_TIERS = ("strict", "tf32")  # the tiers of float32 results, as PyTorch's fp32 matmul setting picks one

# The tier of each 16-bit dtype, for a model in that dtype and under torch.autocast in it.
TIER_OF_DTYPE = {torch.bfloat16: "bf16", torch.float16: "fp16"}
AUTOCAST_TIERS = {dtype: TIERS[tier] for dtype, tier in TIER_OF_DTYPE.items()}


def autocast_tier(dtype: torch.dtype) -> Tier:
    """The tier of results computed under torch.autocast(dtype=dtype)."""
    if dtype not in AUTOCAST_TIERS:
        raise ValueError(f"no autocast tier for {dtype}; there is one for {', '.join(map(str, AUTOCAST_TIERS))}")
    return AUTOCAST_TIERS[dtype]

# Both reports list their checks in this order; check_fn has no model, so none of MODEL_ONLY.
MODEL_CHECKS = (
    "construction", "random_params", "trials", "precision", "inputs_unchanged", "global_state",
    "poisoned_output", "repeatable", "output_owned", "input_sensitivity", "odd_shapes", "large_batch",
    "noncontiguous_input", "stream", "torch_fallback", "gradients", "training_step", "param_writes", "autocast",
)
MODEL_ONLY = ("construction", "random_params", "odd_shapes", "large_batch", "gradients", "training_step",
              "param_writes", "autocast")
FN_CHECKS = tuple(c for c in MODEL_CHECKS if c not in MODEL_ONLY)

# The checks whose verdict is a comparison with the reference: once trials has found wrong values,
# their failures would only repeat it under another name (see the module docstring).
AGAINST_REFERENCE = ("input_sensitivity", "odd_shapes", "large_batch", "noncontiguous_input", "stream", "gradients",
                     "training_step", "param_writes", "autocast")
ALREADY_WRONG = "the values are already wrong (see trials)"
# training_step's likewise, when what it would fail with has been said already
GRADIENTS_WRONG = "the gradients are already wrong (see gradients)"
OUTPUT_NOT_OWNED = ("a later call changes an earlier output (see output_owned), so a step's graph is not the "
                    "caller's: the second backward would only fail on it")

STATUSES = ("pass", "fail", "skip")
Verdict = tuple[str, str]  # (status, detail), what each check function returns


@dataclass
class CheckResult:
    name: str
    status: str  # "pass" | "fail" | "skip"
    detail: str = ""  # for a skip: why it could not run

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {self.status!r}")


@dataclass
class CheckReport:
    subject: str  # what was checked against what
    tier: str
    device: str
    checks: list[CheckResult]

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def failed(self) -> list[str]:
        return [c.name for c in self.checks if c.status == "fail"]

    @property
    def skipped(self) -> list[str]:
        return [c.name for c in self.checks if c.status == "skip"]

    def __getitem__(self, name: str) -> CheckResult:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(f"no check {name!r} in this report; it has {[c.name for c in self.checks]}")

    def _header(self) -> str:
        t = TIERS[self.tier]
        return f"{self.subject} | tier {self.tier} (atol {t.atol:g}, rtol {t.rtol:g}) | device {self.device}"

    def _summary(self) -> str:
        counts = ", ".join(f"{sum(c.status == s for c in self.checks)} {s}" for s in STATUSES)
        return f"{counts}: {'OK' if self.ok else 'FAILED: ' + ', '.join(self.failed)}"

    def __str__(self) -> str:
        width = max(len("check"), *(len(c.name) for c in self.checks))
        rows = [f"{'check':<{width}}  result  detail"]
        rows += [f"{c.name:<{width}}  {c.status:<6}  {c.detail}" for c in self.checks]
        return "\n".join([self._header(), *rows, self._summary()])

    def _repr_html_(self) -> str:
        colour = {"pass": "#1a7f37", "fail": "#cf222e", "skip": "#9a6700"}
        rows = "".join(
            f"<tr><td><code>{c.name}</code></td><td style='color:{colour[c.status]}'><b>{c.status}</b></td>"
            f"<td style='text-align:left'>{html.escape(c.detail)}</td></tr>"
            for c in self.checks
        )
        return (
            f"<p>{html.escape(self._header())}</p><table><tr><th>check</th><th>result</th>"
            f"<th style='text-align:left'>detail</th></tr>{rows}</table><p>{html.escape(self._summary())}</p>"
        )

    def raise_if_failed(self) -> CheckReport:
        if not self.ok:
            raise AssertionError(f"{len(self.failed)} check(s) failed\n{self}")
        return self


def _dtype_tier(dtype: torch.dtype, tier: str) -> str:
    """The tier of a model in dtype: float32's as _resolve_tier says; a 16-bit dtype's own (TIER_OF_DTYPE)."""
    if dtype == torch.float32:
        return _resolve_tier(tier)
    if dtype not in TIER_OF_DTYPE:
        raise ValueError(f"dtype must be float32 or one of {', '.join(map(str, TIER_OF_DTYPE))}, not {dtype}")
    if tier not in ("auto", TIER_OF_DTYPE[dtype]):
        raise ValueError(f"a model in {dtype} is held to the {TIER_OF_DTYPE[dtype]} tier, not {tier!r}")
    return TIER_OF_DTYPE[dtype]


def _resolve_tier(tier: str) -> str:
    """"auto": the tier the ops declare for float32 (utils/op_declaration.py's FLOAT32): their TF32 one when
    the caller lets fp32 matmuls use TF32 (or bf16), else their IEEE one (strict)."""
    if tier == "auto":
        ieee, tf32 = FLOAT32[torch.float32]
        return tf32 if precision.tf32_allowed() else ieee
    if tier not in TIERS:
        raise ValueError(f"tier must be 'auto' or one of {sorted(TIERS)}, not {tier!r}")
    return tier


# --------------------------------------------------------------------------------------------
# Which PyTorch ops a call runs


class _OpRecorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func._schema.name)  # "aten::add", without the overload (".Tensor")
        return func(*args, **(kwargs or {}))


def torch_ops_called(fn: Callable, *args) -> set[str]:
    """The aten ops that `fn(*args)` sends through PyTorch's dispatcher, e.g. {"aten::addmm"}.

    A load_inline extension's pybind function never enters the dispatcher: a real kernel leaves
    no trace here beyond what its launcher calls through ATen (torch::empty for its output).
    """
    with _OpRecorder() as recorder:
        fn(*args)
    return recorder.ops


# Ops that compute nothing: a kernel may call them even when the reference does too.
IGNORED_OPS = frozenset({
    # allocation and initialisation: a kernel needs an output buffer, atomics need it zeroed
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty", "aten::new_empty_strided",
    "aten::zeros", "aten::zeros_like", "aten::zero_", "aten::fill_",
    # views and reshapes: another way to index the same memory (reshape and contiguous are
    # composite and arrive as view/clone, but a reader looks for them here)
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::expand", "aten::t", "aten::transpose",
    "aten::permute", "aten::unsqueeze", "aten::squeeze", "aten::select", "aten::slice", "aten::as_strided",
    "aten::detach", "aten::alias", "aten::contiguous",
    # copies: x.contiguous() of a strided input is a clone, moving data a kernel then reads
    "aten::clone", "aten::copy_",
})

# A reference's addmm is as much a fallback when it comes back as mm, bmm or a matrix-vector product.
GEMM_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm",
                      "aten::mv", "aten::addmv", "aten::dot", "aten::_addmm_activation"})


def _op_name(name: str) -> str:
    """"aten::mm.default" -> "aten::mm": allow_torch_ops takes names with or without the overload."""
    if "::" not in name:
        raise ValueError(f"allow_torch_ops takes op names like 'aten::mm', not {name!r}")
    return name.split(".", 1)[0]


def _fallback_ops(ref_ops: set[str], new_ops: set[str], allowed: Sequence[str] = ()) -> set[str]:
    """The reference's compute ops (GEMMs as a family) that the code under test also calls, less those allowed."""
    compute = set(ref_ops) - IGNORED_OPS
    if compute & GEMM_OPS:
        compute |= GEMM_OPS
    return (set(new_ops) & compute) - {_op_name(a) for a in allowed}


# --------------------------------------------------------------------------------------------
# What the checks run on


class _Watch:
    """Every watched call of the code under test: did it write into its inputs or change the precision flags?"""

    def __init__(self):
        self.calls = 0
        self.input_changes: list[str] = []
        self.flag_changes: list[str] = []

    @contextmanager
    def flags_kept(self, where: str) -> Iterator[None]:
        """Note any precision flag the code under test changes inside, and put it back."""
        flags = precision.flags()
        try:
            yield
        finally:
            changed = precision.changes(flags, precision.flags())
            if changed:
                self.flag_changes.append(f"{where}: {changed}")
                # so the rest of the run, and the caller's session, keep the caller's setting
                precision.restore(flags)

    def call(self, fn: Callable, inputs: list[Tensor], where: str):
        pristine = [t.clone() for t in inputs]
        with self.flags_kept(where), torch.no_grad():
            out = fn(*inputs)
        self.calls += 1
        for i, (t, p) in enumerate(zip(inputs, pristine)):
            if not torch.equal(t, p):
                self.input_changes.append(f"{where}: input {i} changed in {int((t != p).sum())}/{t.numel()} elements")
        return out


@dataclass
class _Case:
    new: Callable  # the code under test
    ref: Callable  # its reference, run in IEEE fp32
    make_ref64: Callable[[], Callable]  # the reference for float64 inputs, built on demand
    factory: Callable[[torch.Generator], list[Tensor]]  # fresh inputs from a seeded CPU generator
    seed: int
    device: torch.device
    tier: str
    scratch_bytes: tuple[int, ...] = ()  # intermediates' sizes, poisoned like the output's
    watch: _Watch = field(default_factory=_Watch)
    contiguous_only: bool = False  # may refuse strided inputs (loudly) instead of computing on them
    rows_factory: Callable[[torch.Generator, int], list[Tensor]] | None = None  # a model's inputs with any batch
    dtype: torch.dtype = torch.float32  # the model's: float32, or a model wholly in bfloat16 or float16

    @property
    def tolerance(self) -> Tier:
        return TIERS[self.tier]

    def inputs(self, salt: int) -> list[Tensor]:
        """Fresh inputs on the device. Trial i uses salt i, the other checks 10_000 and up: no two share inputs."""
        return self._on_device(self.factory, salt)

    def inputs_with_rows(self, salt: int, rows: int) -> list[Tensor]:
        """Fresh inputs of `rows` rows (a model's batch), like inputs(salt) otherwise."""
        return self._on_device(lambda generator: self.rows_factory(generator, rows), salt)

    def _on_device(self, factory: Callable[[torch.Generator], list[Tensor]], salt: int) -> list[Tensor]:
        generator = torch.Generator().manual_seed(self.seed * 100_003 + salt)
        return [t.to(self.device) for t in factory(generator)]

    def reference(self, inputs: list[Tensor]) -> Tensor:
        """The reference's output: in IEEE fp32; for a model in bf16 or fp16, float64's on the same 16-bit values,
        rounded once to the dtype (the reference in the dtype rounds after every op, and is itself off by up
        to the tier: the closest output the dtype has is what ModelNew is held to)."""
        with torch.no_grad(), ieee_fp32():
            if self.dtype != torch.float32:
                return self.make_ref64()(*[t.double() if t.is_floating_point() else t for t in inputs]).to(self.dtype)
            return self.ref(*[t.clone() for t in inputs])

    def call(self, inputs: list[Tensor], where: str):
        return self.watch.call(self.new, inputs, where)

    def call_unwatched(self, inputs: list[Tensor]):
        """For checks that control memory or streams exactly: no clones around the call."""
        with torch.no_grad():
            return self.new(*inputs)


@dataclass(frozen=True)
class _Comparison:
    ok: bool
    summary: str
    max_abs: float = 0.0
    mismatched: int = 0


def _compare(out, ref: Tensor, tier: Tier) -> _Comparison:
    if not isinstance(out, Tensor):
        return _Comparison(False, f"returned {type(out).__name__}, not a tensor")
    for what, got, want in (("shape", tuple(out.shape), tuple(ref.shape)), ("dtype", out.dtype, ref.dtype),
                            ("device", out.device, ref.device)):
        if got != want:
            return _Comparison(False, f"{what} {got}, expected {want}")
    if torch.equal(out, ref):  # bitwise (the CPU path of a drop-in is the reference's math): nothing to measure
        return _Comparison(True, f"max abs 0.0e+00, max rel 0.0e+00, 0/{out.numel()} mismatched")
    close = torch.isclose(out, ref, rtol=tier.rtol, atol=tier.atol, equal_nan=True)
    out_finite, ref_finite = out.isfinite(), ref.isfinite()
    finite = out_finite & ref_finite
    err = torch.where(finite, (out - ref).abs(), 0)
    max_abs = err.max().item()
    # relative to |ref| floored at atol, so that values crossing zero don't dominate
    max_rel = (err / ref.abs().clamp_min(tier.atol)).max().item()
    mismatched = int((~close).sum())
    summary = f"max abs {max_abs:.1e}, max rel {max_rel:.1e}, {mismatched}/{out.numel()} mismatched"
    bad = int((~out_finite & ref_finite).sum())
    if bad:
        summary += f", {bad} NaN/inf where the reference is finite"
    return _Comparison(mismatched == 0, summary, max_abs, mismatched)


def _run(name: str, check: Callable[..., Verdict], *args) -> CheckResult:
    try:
        status, detail = check(*args)
    except Exception as e:  # code under test that crashes fails this check; the detail says where
        status, detail = "fail", _describe(e)
    return CheckResult(name, status, detail)


def _describe(e: BaseException) -> str:
    frame = traceback.extract_tb(e.__traceback__)[-1]
    message = (str(e).strip().splitlines() or [""])[0]
    return f"raised {type(e).__name__}: {message} ({Path(frame.filename).name}:{frame.lineno})"


# --------------------------------------------------------------------------------------------
# The checks


def _check_trials(case: _Case, n: int) -> Verdict:
    results = []
    kept = []  # every trial's inputs stay alive, so no two trials share an address: a model that caches
    for i in range(n):  # by pointer is input_sensitivity's to diagnose, not a wrong value here
        kept.append(x := case.inputs(i))
        ref = case.reference(x)
        results.append(_compare(case.call(x, f"trial {i}"), ref, case.tolerance))
    failed = [(i, r) for i, r in enumerate(results) if not r.ok]
    if failed:
        i, r = failed[0]
        return "fail", f"{len(failed)}/{n} trials differ; trial {i}: {r.summary}"
    return "pass", f"{n} trials; worst: {max(results, key=lambda r: r.max_abs).summary}"


# fp32 done twice, in any order, stays within a small factor of the reference's own rounding;
# bf16, fp16 or TF32 in a GEMM is 100-1000x worse.
PRECISION_FACTOR = 16
PRECISION_FLOOR = 1e-7


def _relative_error(out: Tensor, ref64: Tensor) -> float:
    return ((out.double() - ref64).norm() / ref64.norm()).item()


# What a GEMM of lower precision does to these outputs, norm-wise against float64: TF32 ~1e-4 to
# 1e-3, bf16 and fp16 ~1e-3 to 5e-3. An error beyond this band is not rounding but a wrong value.
ROUNDING_BAND = 1e-2


def _check_precision(case: _Case, trials_failed: bool = False) -> Verdict:
    x = case.inputs(10_100)
    with torch.no_grad():
        ref64 = case.make_ref64()(*[t.double() if t.is_floating_point() else t for t in x])
    ref = case.reference(x)
    out = case.call(x, "precision")
    if not isinstance(out, Tensor) or out.shape != ref64.shape:
        return "fail", "the output's shape differs from the reference's (see trials)"
    new_err, ref_err = _relative_error(out, ref64), _relative_error(ref, ref64)
    limit = PRECISION_FACTOR * max(ref_err, PRECISION_FLOOR)
    detail = f"relative error vs float64: {new_err:.1e}, fp32 reference {ref_err:.1e}"
    if trials_failed and not new_err <= ROUNDING_BAND:  # NaN too: not a question of precision
        return "skip", f"{ALREADY_WRONG}; {detail}, beyond what rounding does ({ROUNDING_BAND:g})"
    if case.tier != "strict":
        return "skip", f"{detail}; reported, not judged, under the {case.tier} tier"
    if not new_err <= limit:  # NaN fails too
        return "fail", f"{detail} > limit {limit:.1e}: computed below fp32 precision (bf16, fp16 or TF32?)"
    return "pass", f"{detail} (limit {limit:.1e})"


def _check_inputs_unchanged(watch: _Watch) -> Verdict:
    if watch.input_changes:
        return "fail", f"{len(watch.input_changes)} of {watch.calls} calls wrote into their inputs; {watch.input_changes[0]}"
    if not watch.calls:
        return "skip", "no call of the code under test completed"
    return "pass", f"inputs bitwise unchanged by all {watch.calls} calls"


def _check_global_state(watch: _Watch) -> Verdict:
    if watch.flag_changes:
        return "fail", (f"fp32 precision flags changed by the call (the harness restored them): "
                        f"{watch.flag_changes[0]}")
    if not watch.calls:
        return "skip", "no call of the code under test completed"
    return "pass", f"TF32 / fp32 precision flags unchanged by all {watch.calls} calls"


def _poison_allocator(sizes: set[int], byte: int, device: torch.device, copies: int = 4) -> None:
    # A freed block stays in the caching allocator, which hands blocks out best-fit per stream:
    # taking a few blocks of each size the model will ask for, filling and freeing them leaves
    # the poison where its next torch.empty(...) of those sizes lands.
    blocks = [torch.full((n,), byte, dtype=torch.uint8, device=device) for n in sizes for _ in range(copies)]
    del blocks


POISONS = (("NaN", 0xFF), ("large finite", 0x7E))  # 0xFFFFFFFF is a NaN, 0x7E7E7E7E is 8.4e37


def _check_poisoned_output(case: _Case) -> Verdict:
    if case.device.type != "cuda":
        return "skip", "needs CUDA: the poison is planted in the CUDA caching allocator"
    x = case.inputs(10_200)
    ref = case.reference(x)  # kept alive, so its memory cannot be handed back to the model
    sizes = {ref.nbytes, *case.scratch_bytes}
    problems, outputs = [], []
    for label, byte in POISONS:
        _poison_allocator(sizes, byte, case.device)
        out = case.call_unwatched(x)
        outputs.append(out.clone() if isinstance(out, Tensor) else out)
        r = _compare(out, ref, case.tolerance)
        if not r.ok:
            problems.append(f"{label} poison: {r.summary}")
    if not problems:
        return "pass", f"matches after the allocator was poisoned with NaN and with 8.4e37 ({sorted(sizes)} bytes)"
    if _same(*outputs):  # wrong, but the same whatever the poison: a wrong value, not an unwritten one
        return "skip", ALREADY_WRONG + "; the output does not change with the poison, so it is not unwritten memory"
    return "fail", "output depends on memory it never wrote (it changes with the poison); " + "; ".join(problems)


def _same(a, b) -> bool:
    """Two outputs bitwise equal (NaN where NaN)."""
    return (isinstance(a, Tensor) and isinstance(b, Tensor) and a.shape == b.shape and a.dtype == b.dtype
            and bool(((a == b) | (a.isnan() & b.isnan())).all()))


def _check_repeatable(case: _Case) -> Verdict:
    x = case.inputs(10_300)
    first = case.call(x, "repeatable, first call").clone()  # clone: the model may reuse its output buffer
    second = case.call(x, "repeatable, second call")
    if isinstance(second, Tensor) and torch.equal(first, second):
        return "pass", "two calls on the same input are bitwise equal"
    return "fail", ("two calls on the same input differ; the workbook's kernels are deterministic by design "
                    "(no atomics in reductions), so look for a race or a read of unwritten memory")


def _check_output_owned(case: _Case) -> Verdict:
    first_x, second_x = case.inputs(10_310), case.inputs(10_311)
    first = case.call(first_x, "output_owned, first call")  # kept as returned: no clone
    if not isinstance(first, Tensor):
        return "fail", f"returned {type(first).__name__}, not a tensor (see trials)"
    kept = first.clone()
    second = case.call(second_x, "output_owned, second call")
    if not _same(first, kept):
        shared = " (the second call returned the same storage)" if isinstance(second, Tensor) and \
            second.untyped_storage().data_ptr() == first.untyped_storage().data_ptr() else ""
        return "fail", ("an output changed when the model was called again" + shared +
                        ": an output is the caller's; allocate a new one per call")
    return "pass", "an output keeps its values when the model is called again on other inputs"


def _check_input_sensitivity(case: _Case) -> Verdict:
    x = case.inputs(10_400)
    case.call(x, "input_sensitivity, first call")
    for t, fresh in zip(x, case.inputs(10_401)):
        t.copy_(fresh)  # same storage, same data_ptr, new values
    ref = case.reference(x)
    r = _compare(case.call(x, "input_sensitivity, after rewriting x in place"), ref, case.tolerance)
    if r.ok:
        return "pass", "rewriting the input in place (same data_ptr) gives the new values' result"
    return "fail", f"after rewriting the input in place (same data_ptr): {r.summary}; cached by pointer or shape?"


def _row_padded_slice(t: Tensor) -> Tensor:
    """`t` as a slice of a wider, NaN-padded buffer: rows further apart than their width, storage offset 3."""
    if t.dim() == 0:
        return t
    pad = float("nan") if t.is_floating_point() else 0
    wide = torch.full((*t.shape[:-1], t.shape[-1] + 8), pad, dtype=t.dtype, device=t.device)
    view = wide[..., 3: 3 + t.shape[-1]]
    view.copy_(t)
    return view


def _column_major(t: Tensor) -> Tensor:
    return t.mT.contiguous().mT if t.dim() >= 2 else t


LAYOUTS = (("row-padded slice", _row_padded_slice), ("column-major", _column_major))


def _check_noncontiguous_input(case: _Case) -> Verdict:
    x = case.inputs(10_500)
    if all(t.dim() < 2 for t in x):
        return "skip", "no input has two or more dims to lay out another way"
    ref = case.reference(x)
    problems, refused = [], []
    for label, layout in LAYOUTS:
        try:
            out = case.call([layout(t) for t in x], label)
        except RuntimeError as error:  # a verdict, not a fallback: only a loud, named refusal passes
            if case.contiguous_only and "contiguous" in str(error):
                refused.append(label)
                continue
            raise
        r = _compare(out, ref, case.tolerance)
        if not r.ok:
            problems.append(f"{label}: {r.summary}")
    if problems:
        return "fail", "with non-contiguous inputs (indexed as if contiguous?): " + "; ".join(problems)
    if refused:
        return "pass", f"refuses {' and '.join(refused)} views with an error that says so (contiguous_only)"
    return "pass", f"{' and '.join(label for label, _ in LAYOUTS)} views give the contiguous result"


SLEEP_CYCLES = 100_000_000  # ~50 ms at 2 GHz: far longer than any of these kernels takes


def _check_stream(case: _Case) -> Verdict:
    if case.device.type != "cuda":
        return "skip", "needs CUDA streams"
    fresh = case.inputs(10_600)
    ref = case.reference(fresh)
    # what a reader that ignores the caller's stream finds: the input before the caller wrote it
    x = [torch.full_like(t, float("nan")) if t.is_floating_point() else t.clone() for t in fresh]
    stream = torch.cuda.Stream(case.device)
    stream.wait_stream(torch.cuda.current_stream(case.device))
    with torch.cuda.stream(stream):
        torch.cuda._sleep(SLEEP_CYCLES)  # hold the caller's stream back, so work elsewhere runs first
        for t, f in zip(x, fresh):
            t.copy_(f)
        out = case.call_unwatched(x)
    stream.synchronize()
    torch.cuda.synchronize(case.device)  # and whatever the model launched elsewhere
    r = _compare(out, ref, case.tolerance)
    if r.ok:
        return "pass", "on a busy non-default current stream the result sees the input written on that stream"
    return "fail", f"on a busy non-default current stream: {r.summary}; work launched on another stream?"


def _check_torch_fallback(case: _Case, allowed: Sequence[str]) -> Verdict:
    if case.device.type != "cuda":
        return "skip", "on CPU the drop-in contract has ModelNew run the reference PyTorch math"
    x = case.inputs(10_700)
    with torch.no_grad():
        with ieee_fp32():
            ref_ops = torch_ops_called(case.ref, *x)
        new_ops = torch_ops_called(case.new, *x)
    used = _fallback_ops(ref_ops, new_ops, allowed)
    if used:
        return "fail", (f"calls the reference's PyTorch ops {sorted(used)}: a fallback, not a kernel "
                        f"(name deliberate ones in allow_torch_ops)")
    detail = f"calls none of the reference's compute ops ({', '.join(sorted(set(ref_ops) - IGNORED_OPS))})"
    return "pass", detail + (f" beyond those allowed ({', '.join(sorted(allowed))})" if allowed else "")


def _case_checks(case: _Case, trials: int, allowed: Sequence[str]) -> dict[str, CheckResult]:
    """The checks that need no model: everything check_fn runs, in report order less the watch's two."""
    results = {"trials": _run("trials", _check_trials, case, trials)}
    wrong = results["trials"].status == "fail"
    checks = {
        "precision": (_check_precision, case, wrong),
        "poisoned_output": (_check_poisoned_output, case),
        "repeatable": (_check_repeatable, case),
        "output_owned": (_check_output_owned, case),
        "input_sensitivity": (_check_input_sensitivity, case),
        "noncontiguous_input": (_check_noncontiguous_input, case),
        "stream": (_check_stream, case),
        "torch_fallback": (_check_torch_fallback, case, allowed),
    }
    for name, (check, *args) in checks.items():
        results[name] = _skip_as_wrong(name) if wrong and name in AGAINST_REFERENCE else _run(name, check, *args)
    return results


def _skip_as_wrong(name: str) -> CheckResult:
    return CheckResult(name, "skip", ALREADY_WRONG)


def _watch_checks(watch: _Watch) -> dict[str, CheckResult]:
    return {
        "inputs_unchanged": _run("inputs_unchanged", _check_inputs_unchanged, watch),
        "global_state": _run("global_state", _check_global_state, watch),
    }


# --------------------------------------------------------------------------------------------
# Models: construction, hardened parameters, the odd scale


def _build(cls: type[nn.Module], init: list, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return cls(*init)


def _signature_difference(model_cls: type, new_cls: type) -> str | None:
    def params(cls):
        return [(p.name, p.kind, p.default) for p in inspect.signature(cls).parameters.values()]

    new = params(new_cls)
    kinds = {kind for _, kind, _ in new}
    if {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD} <= kinds:
        return None  # (*args, **kwargs): it hands everything on to the reference's __init__
    if new != params(model_cls):
        return f"__init__{inspect.signature(new_cls)} differs from the reference's __init__{inspect.signature(model_cls)}"
    return None


def _state_dict_differences(ref: dict[str, Tensor], new: dict[str, Tensor], seed: int) -> list[str]:
    if set(ref) != set(new):
        missing = [k for k in ref if k not in new]
        extra = [k for k in new if k not in ref]
        return [f"state_dict names differ: missing {missing}, unexpected {extra}"]
    problems = []
    if list(ref) != list(new):
        problems.append(f"creation order differs: {list(new)}, reference {list(ref)}")
    for k in ref:
        if (new[k].shape, new[k].dtype) != (ref[k].shape, ref[k].dtype):
            problems.append(f"{k}: {tuple(new[k].shape)} {new[k].dtype}, reference {tuple(ref[k].shape)} {ref[k].dtype}")
        elif not torch.equal(new[k], ref[k]):
            problems.append(f"{k} differs under torch.manual_seed({seed}) (created in another order?)")
    return problems


def _construct(model_cls, new_cls, init: list, seed: int) -> tuple[CheckResult, nn.Module, nn.Module | None]:
    """The construction check; returns the reference and ModelNew holding its weights (None if it cannot)."""
    ref = _build(model_cls, init, seed)
    try:
        new = _build(new_cls, init, seed)
    except Exception as e:  # a constructor that rejects the reference's arguments is this check's verdict
        return CheckResult("construction", "fail", f"{new_cls.__name__}(*{init}) {_describe(e)}"), ref, None
    problems = [p for p in [_signature_difference(model_cls, new_cls)] if p]
    problems += _state_dict_differences(ref.state_dict(), new.state_dict(), seed)
    try:
        new.load_state_dict(ref.state_dict(), strict=True)
    except RuntimeError as e:  # what load_state_dict raises on missing, unexpected or mis-shaped keys
        problems.append(f"load_state_dict(strict=True) fails: {' '.join(str(e).split())}")
        new = None
    if problems:
        return CheckResult("construction", "fail", "; ".join(problems)), ref, new
    names = list(ref.state_dict())
    detail = (f"{len(names)} tensors ({', '.join(names)}): same names, order, shapes and values under "
              f"torch.manual_seed({seed}); load_state_dict(strict=True) works")
    return CheckResult("construction", "pass", detail), ref, new


def _randomise(model: nn.Module, seed: int) -> list[str]:
    """Give every GroupNorm γ/β and every bias fresh random values; returns their names."""
    generator = torch.Generator().manual_seed(seed * 100_003 + 10_900)
    names = []
    with torch.no_grad():
        for module_name, module in model.named_modules():
            for name, p in module.named_parameters(recurse=False):
                if isinstance(module, nn.GroupNorm) and name == "weight":
                    # |γ| in [0.5, 1.5] with random signs: far from 1 and never near 0
                    sign = torch.randint(0, 2, p.shape, generator=generator) * 2 - 1
                    p.copy_((torch.rand(p.shape, generator=generator) + 0.5) * sign)
                elif name.endswith("bias"):
                    # large enough that a dropped or misplaced bias is far outside tolerance, small
                    # enough that 94's Hardtanh does not saturate most channels
                    p.copy_(0.5 * torch.randn(p.shape, generator=generator))
                else:
                    continue
                names.append(f"{module_name}.{name}" if module_name else name)
    return names


def _check_random_params(ref: nn.Module, new: nn.Module, seed: int) -> Verdict:
    names = _randomise(ref, seed)
    new.load_state_dict(ref.state_dict(), strict=True)
    if not names:
        return "pass", "no GroupNorm or bias parameters to randomise"
    return "pass", f"randomised {', '.join(names)} (GroupNorm γ = ±U(0.5, 1.5), biases N(0, 0.5²)) in both models"


def _model_inputs(problem: Problem, scale: str, init: list, custom_init: bool):
    if not custom_init:
        return lambda generator: problem.get_inputs(scale, generator=generator)
    batch = problem.dims(scale).batch
    # all four problems take (in_features, out_features, ...) first
    return lambda generator: [torch.rand(batch, init[0], generator=generator)]


def _model_case(problem, ref, new, init, scale, custom_init, seed, device, tier, watch,
                dtype: torch.dtype = torch.float32) -> _Case:
    ref.to(device, dtype)
    new.to(device, dtype)
    batch = problem.dims(scale).batch
    factory = _model_inputs(problem, scale, init, custom_init)
    return _Case(
        new=new, ref=ref, make_ref64=lambda: copy.deepcopy(ref).double(),
        factory=lambda generator: [t.to(dtype) for t in factory(generator)], seed=seed, device=device, tier=tier,
        scratch_bytes=(batch * init[1] * dtype.itemsize,),  # the (batch, out_features) intermediate
        watch=watch,
        # what the factory draws (KernelBench's torch.rand(batch, in_features)), with another batch
        rows_factory=lambda generator, rows: [torch.rand(rows, init[0], generator=generator).to(dtype)],
        dtype=dtype,
    )


def _check_odd_shapes(problem: Problem, new_cls, seed, trials, device, tier, watch,
                      dtype: torch.dtype = torch.float32) -> Verdict:
    init = problem.init_inputs("odd")
    ref, new = _build(problem.Model, init, seed), _build(new_cls, init, seed)
    _randomise(ref, seed)
    new.load_state_dict(ref.state_dict(), strict=True)
    case = _model_case(problem, ref, new, init, "odd", False, seed, device, tier, watch, dtype)
    status, detail = _check_trials(case, trials)
    return status, f"scale odd {init}: {detail}"


# The large_batch trial's rows: more than any tile, block count or row constant a kernel could
# hard-code (at least 1,024, and more than the scale's batch, KernelBench's full batch at scale
# "full"), plus the odd scale's 37 rows, so that it is a multiple of nothing a kernel tiles by.
LARGE_BATCH = 1024
LARGE_BATCH_EXTRA = 37


def large_batch(batch: int) -> int:
    """The large_batch trial's rows for a scale whose batch is `batch`."""
    return max(LARGE_BATCH, batch) + LARGE_BATCH_EXTRA


def _check_large_batch(case: _Case, batch: int) -> Verdict:
    rows = large_batch(batch)
    x = case.inputs_with_rows(11_000, rows)
    ref = case.reference(x)
    r = _compare(case.call(x, f"large_batch, {rows} rows"), ref, case.tolerance)
    if r.ok:
        return "pass", f"batch {rows} (the trials': {batch}): {r.summary}"
    return "fail", (f"batch {rows}, where the trials' {batch} passed: {r.summary}; "
                    f"a row count, grid size or buffer hard-coded?")


# Where the gradients are not determined to the tier by the forward's rounding (below), a gradient
# is judged norm-wise against float64 within the tier's gradient_band: what a different rounding of
# the forward does stays inside it (measured at the problems' full sizes), a wrong formula (a lost
# factor, a missing term) lands far outside it.


def _gradient_tier(tier: Tier, ref: Tensor) -> Tier:
    """The tier for one gradient: its absolute tolerance scaled by the gradient's largest element, as
    the forward's tolerance applies to outputs of order one (a sum's rounding grows with its terms)."""
    return replace(tier, atol=tier.atol * max(1.0, ref.detach().abs().max().item() if ref.numel() else 0.0))


def _model_gradients(model: nn.Module, x: list[Tensor], grad_out: Tensor | None, generator, case: _Case,
                     label: str) -> tuple[dict[str, Tensor | None], Tensor]:
    """{"input i" / parameter name: gradient} of `model` at `x` for the output gradient `grad_out`
    (random from `generator` when None), and the output gradient used. `label` says where, for the watch."""
    inputs = [t.clone().requires_grad_(t.is_floating_point()) for t in x]
    with torch.enable_grad(), case.watch.flags_kept(f"{label} forward"):
        out = model(*inputs)
        if not (isinstance(out, Tensor) and out.requires_grad):
            raise _NoGradient()
        if grad_out is None:
            grad_out = torch.randn(out.shape, generator=generator).to(out.device)
        leaves = {f"input {i}": t for i, t in enumerate(inputs) if t.requires_grad}
        leaves |= dict(model.named_parameters())
        with case.watch.flags_kept(f"{label} backward"):
            grads = torch.autograd.grad(out, list(leaves.values()), grad_out.to(out.dtype), allow_unused=True)
    return dict(zip(leaves, grads)), grad_out


class _NoGradient(Exception):
    pass


def _rel_norm(a: Tensor, b: Tensor) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-300)).item()


def judge_gradients(new: dict[str, Tensor | None], ref: dict[str, Tensor | None], ref64: Callable[[], dict[str, Tensor]],
                    tier: Tier, moved64: Callable[[], list[dict[str, Tensor]]] | None = None) -> Verdict:
    """The verdict on ModelNew's gradients `new` against the reference's `ref` (name -> tensor).

    Elementwise at the tier, as the forward is judged, where that is well posed. It is not where
    the reference's gradients themselves differ from the float64 reference's (`ref64()`, computed
    only then) beyond the tier: a forward rounded differently, even a correctly rounded fp32 GEMM,
    moves which elements sit on either side of a kink (Hardtanh's clip, LeakyReLU's zero), which
    element of a near-tied row torch.min picks, and the low bits of sums over tens of thousands of
    rows (experiments/tensor_cores/gradient_conditioning.py measures it at the problems' full
    sizes). The reference may also happen to flip none where a forward rounded as well as it but
    differently flips some: so the float64 gradients are computed again with the input moved by the
    tier's noise, at several draws of it (`moved64()`, a list, only then); where they move beyond the
    tier, the gradients are not determined to it either. Then each gradient is judged norm-wise against
    float64 within the tier's gradient_band, or, where more, the largest error of those draws: what one
    flip costs depends on which row flips, so one draw's error is a coin toss against an equally good
    forward (problem 75 at full size with TF32: one draw 6.4e-2, nineteen more 4.3e-2 to 2.2e-1, ours
    9.8e-2; experiments/training/harness_flips.py). Elementwise, a gradient's absolute tolerance is
    the tier's times its largest element (_gradient_tier)."""
    missing = [k for k, g in ref.items() if g is not None and new.get(k) is None]
    if missing:
        return "fail", f"no gradient reaches {', '.join(missing)} (detached, or left out of the autograd formula)"
    names = [k for k, g in ref.items() if g is not None]
    tiers = {k: _gradient_tier(tier, ref[k]) for k in names}
    wrong = {k: r for k in names if not (r := _compare(new[k], ref[k], tiers[k])).ok}
    if not wrong:
        return "pass", f"gradients of {', '.join(names)} match the reference's"
    exact = ref64()
    ill_posed = [k for k in names if not _compare(ref[k], exact[k].to(ref[k].dtype), tiers[k]).ok]
    why = f"the reference's own gradients differ from float64's beyond the tier ({', '.join(ill_posed)})"
    draws = moved64() if moved64 is not None else []
    if not ill_posed and draws:
        ill_posed = [k for k in names if any(not _compare(m[k].to(ref[k].dtype), exact[k].to(ref[k].dtype), tiers[k]).ok
                                             for m in draws)]
        why = (f"float64's gradients move beyond the tier when the input moves by the tier's rounding, "
               f"{tier.noise:g} ({', '.join(ill_posed)})")
    if not ill_posed:  # the gradients are determined to the tier, and ours are elsewhere
        return "fail", (f"wrong gradients for {len(wrong)} of {len(names)} tensors; "
                        + "; ".join(f"{k}: {r.summary}" for k, r in list(wrong.items())[:3]))
    # What rounding does: the tier's band, or, where more, what moving the input within the tier does
    # to float64's own gradients. A band fixed for kinks that cost one element each is too tight where
    # one flip costs a whole row: problem 75's minimum sends a row's gradient to one channel, and a
    # row whose minimum moves to a near-tied channel costs ~4% of the norm at its full size.
    bands = {k: max([tier.gradient_band] + [_rel_norm(m[k], exact[k]) for m in draws]) for k in names}
    errors = {k: (_rel_norm(new[k], exact[k]), _rel_norm(ref[k], exact[k])) for k in names}
    outside = {k: e for k, e in errors.items() if not e[0] <= bands[k]}  # NaN fails too
    worst = max(errors, key=lambda k: errors[k][0])
    detail = (f"{why}, so judged norm-wise vs float64: worst {worst} {errors[worst][0]:.1e} (reference "
              f"{errors[worst][1]:.1e}), band {bands[worst]:.2g}{_band_source(tier, bands[worst])}")
    if outside:
        return "fail", (f"wrong gradients for {len(outside)} of {len(names)} tensors: "
                        + "; ".join(f"{k}: {e[0]:.1e} vs float64 (reference {e[1]:.1e}), band {bands[k]:.2g}"
                                    for k, e in list(outside.items())[:3])
                        + " of what rounding does")
    return "pass", detail


def _band_source(tier: Tier, band: float) -> str:
    return "" if band <= tier.gradient_band else " (float64's own, the input moved within the tier: the largest draw)"



NO_GRADIENT = ("the output carries no gradient (requires_grad is False): computed outside autograd, "
               "e.g. a kernel called with no autograd formula registered, or a detached result")


def _check_gradients(ref: nn.Module, new: nn.Module, case: _Case) -> Verdict:
    """Backward of ModelNew against backward of the reference, for the input and every parameter.

    Both run under the caller's fp32 matmul setting: this check judges the gradient formulas, and
    `trials` and `precision` judge the forward's precision. judge_gradients says how."""
    x = case.inputs(10_800)
    generator = torch.Generator().manual_seed(case.seed * 100_003 + 10_801)
    want, grad_out = _model_gradients(ref, x, None, generator, case, "gradients, reference")
    try:
        got, _ = _model_gradients(new, x, grad_out, generator, case, "gradients, new")
    except _NoGradient:
        return "fail", NO_GRADIENT
    return judge_gradients(got, want, lambda: _float64_gradients(ref, x, grad_out, generator, case, "gradients"),
                           case.tolerance, lambda: _float64_gradients(ref, x, grad_out, generator, case, "gradients",
                                                                      moved=MOVED_DRAWS))


# How many draws of the tier's noise judge_gradients takes the band from where gradients are ill posed.
# An equally good forward exceeds the largest of n draws with probability 1/(n + 1) if its error were
# distributed as theirs; a forward within the tier moves less than its noise does, so less than that.
MOVED_DRAWS = 8


def _float64_gradients(ref: nn.Module, x: list[Tensor], grad_out: Tensor, generator, case: _Case,
                       label: str, moved: int = 0):
    """The reference's gradients in float64, what judge_gradients measures against where fp32 does not
    decide: at x (a dict), or, with moved = n, a list of them at n draws of x moved by the tier's noise
    (each element by a random relative amount)."""
    ref64 = copy.deepcopy(ref).double()
    x64 = [t.double() if t.is_floating_point() else t for t in x]
    if not moved:
        return _model_gradients(ref64, x64, grad_out, generator, case, f"{label}, float64 reference")[0]
    draws = []
    for i in range(moved):
        g = torch.Generator().manual_seed(case.seed * 100_003 + 10_901 + 7_919 * i)
        xi = [t * (1 + case.tolerance.noise * (2 * torch.rand(t.shape, generator=g, dtype=t.dtype) - 1).to(t.device))
              if t.is_floating_point() else t for t in x64]
        draws.append(_model_gradients(ref64, xi, grad_out, generator, case, f"{label}, float64 reference moved")[0])
    return draws


AUTOCAST_DTYPE = torch.bfloat16  # the autocast dtype autocast checks: CUDA's and the CPU's common one


def _check_autocast(case: _Case) -> Verdict:
    """Under torch.autocast(bfloat16) ModelNew does what the reference does: the same output dtype (62's
    is bfloat16 on the CPU, where GroupNorm keeps its input's dtype, and float32 on CUDA), no error, and
    values within the autocast tier of float64's (the reference's own error beside, for scale)."""
    if case.dtype != torch.float32:
        return "skip", f"a model in {case.dtype}: autocast changes nothing of it (checked for float32 models)"
    x = case.inputs(10_900)
    with torch.autocast(case.device.type, dtype=AUTOCAST_DTYPE):
        want = case.reference(x)
        got = case.call(x, "autocast")
    with torch.no_grad():
        exact = case.make_ref64()(*[t.double() if t.is_floating_point() else t for t in x])
    if not isinstance(got, Tensor) or got.dtype != want.dtype:
        return "fail", (f"under autocast({AUTOCAST_DTYPE}) ModelNew returns "
                        f"{got.dtype if isinstance(got, Tensor) else type(got).__name__}, the reference {want.dtype}")
    tier = autocast_tier(AUTOCAST_DTYPE)
    r = _compare(got.double(), exact, tier)
    own = _compare(want.double(), exact, tier)
    detail = f"{want.dtype} out as the reference; vs float64: {r.summary} (the reference: {own.summary})"
    return ("pass" if r.ok else "fail"), detail


# --------------------------------------------------------------------------------------------
# Models whose parameters change: a training step, and every other way to write a parameter


Renew = Callable[[dict[str, Tensor]], nn.Module]  # a ModelNew built anew, holding the given state


def _new_holding(new_cls: type[nn.Module], init: list, seed: int, device: torch.device,
                 state: dict[str, Tensor], dtype: torch.dtype = torch.float32) -> nn.Module:
    with torch.device(device):  # built where it runs: a full-size GEMM weight is initialised in place
        new = _build(new_cls, init, seed)
    new.to(device, dtype).load_state_dict(state, strict=True)
    return new


def _own_pair(case: _Case, renew: Renew) -> tuple[nn.Module, nn.Module]:
    """A copy of the (randomised) reference and a ModelNew built anew that holds its weights. A check
    that writes parameters gets a pair of its own: no other check sees its writes, and it sees no
    cache that earlier calls left in ModelNew."""
    ref = copy.deepcopy(case.ref)
    return ref, renew(ref.state_dict())


def _with_models(case: _Case, ref: nn.Module, new: nn.Module) -> _Case:
    """`case` on another pair of models: the same inputs, tier and watch."""
    return replace(case, new=new, ref=ref, make_ref64=lambda: copy.deepcopy(ref).double())


def _settle(device: torch.device) -> None:
    """Let the parameter writes just made finish: whether ModelNew orders its work after the caller's is
    `stream`'s question, not that of the checks that write parameters."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _rms(t: Tensor) -> float:
    return t.detach().double().pow(2).mean().sqrt().item() if t.numel() else 0.0


# A training step moves every parameter by about this fraction of its norm: at the output, far
# beyond either tier, so a model that misses the step cannot pass.
TRAINING_STEP = 0.05

# (name, optimizer, its settings for a parameter p with the reference's gradient g): one step of each, in turn.
# SGD's lr·g and Adam's first step, about lr·sign(g) per element, both move p by TRAINING_STEP of its norm.
TRAINING_OPTIMIZERS = (
    ("SGD", torch.optim.SGD, lambda p, g: {"lr": TRAINING_STEP * _rms(p) / _rms(g) if _rms(g) else 0.0}),
    ("Adam", torch.optim.Adam, lambda p, g: {"lr": TRAINING_STEP * _rms(p)}),
)


def _check_training_step(case: _Case, renew: Renew) -> Verdict:
    """A step of each of TRAINING_OPTIMIZERS on ModelNew, on its own gradients of a loss (out * w).sum()
    with w random; then its output on fresh inputs against the reference's holding the same weights.

    Before each step the reference takes ModelNew's weights and both run the loss's backward; the step's
    settings come from the reference's gradients. After the first step ModelNew's gradients are judged
    against the reference's at the same weights as `gradients` judges them (a backward that kept a
    weight from before the step is off by about TRAINING_STEP; before any step `gradients` has judged
    them already). After each step the reference takes ModelNew's new weights, and the outputs must
    agree at the tier, as in trials. Judged against the reference's own step instead, gradients that
    differ by rounding alone could fail it: an element that the two forwards round to either side of a
    kink (LeakyReLU's zero, Hardtanh's clip) changes its sample's share of a weight row's gradient, a
    large share at a batch of 37 (a TF32-rounded GEMM on 62 at the odd scale put 43 of 4,255 outputs
    outside the tf32 tier that way after one SGD step, seed 4)."""
    ref, new = _own_pair(case, renew)
    trained = _with_models(case, ref, new)
    generator = torch.Generator().manual_seed(case.seed * 100_003 + 11_100)
    kept, moved, worst = [], [], None  # inputs stay alive: no two share an address
    for i, (label, optimizer, settings) in enumerate(TRAINING_OPTIMIZERS):
        ref.load_state_dict(new.state_dict())
        _settle(case.device)
        kept += [x := trained.inputs(11_110 + i), fresh := trained.inputs(11_120 + i)]
        before = trained.reference(fresh)
        want, grad_out = _model_gradients(ref, x, None, generator, trained, f"training_step, {label}, reference")
        try:
            got, _ = _model_gradients(new, x, grad_out, generator, trained, f"training_step, {label}, new")
        except _NoGradient:
            return "fail", NO_GRADIENT
        if i:  # after a step: the gradients of a backward that kept something from before it
            status, detail = judge_gradients(got, want, lambda: _float64_gradients(
                ref, x, grad_out, generator, trained, f"training_step, {label}"), case.tolerance,
                lambda: _float64_gradients(ref, x, grad_out, generator, trained, f"training_step, {label}",
                                           moved=MOVED_DRAWS))
            if status == "fail":
                return "fail", (f"after the {TRAINING_OPTIMIZERS[i - 1][0]} step, at the same weights as the "
                                f"reference: {detail}; does the backward use something derived from the weights "
                                f"before the step?")
        names = [name for name, g in want.items() if g is not None]
        params = {name: p for name, p in new.named_parameters() if name in names}
        for name, p in params.items():
            p.grad = got[name]
        optimizer([{"params": [p], **settings(p, want[name])} for name, p in params.items()]).step()
        ref.load_state_dict(new.state_dict())
        _settle(case.device)
        after = trained.reference(fresh)
        r = _compare(trained.call(fresh, f"training_step, after the {label} step"), after, case.tolerance)
        unseen = _compare(before, after, case.tolerance)  # what a model that missed the step would be off by
        if not r.ok:
            return "fail", (f"after one {label} step, ModelNew's output is not what its weights give: {r.summary} "
                            f"(the step moved the reference's output by up to {unseen.max_abs:.1e}); does it keep "
                            f"something derived from its weights from before the step?")
        moved.append((label, unseen.mismatched, before.numel()))
        worst = r if worst is None or r.max_abs > worst.max_abs else worst
    if not any(mismatched for _, mismatched, _ in moved):
        return "skip", "the steps moved the reference's output by less than the tier: nothing to tell apart"
    return "pass", (f"right outputs after an SGD and an Adam step (each moving every parameter by about "
                    f"{TRAINING_STEP:.0%} of its norm; missing a step would put outside the tier: "
                    f"{' and '.join(f'{label} {m}/{n}' for label, m, n in moved)}), worst: {worst.summary}; "
                    f"and the gradients after the {TRAINING_OPTIMIZERS[0][0]} step")


def _shuffled(values: Tensor, generator: torch.Generator) -> Tensor:
    """`values` rolled by a random shift, with random signs: new values almost everywhere, drawn as the originals
    were (so the model stays as well conditioned as in trials, where fresh normal values would not: a GroupNorm
    γ of 3)."""
    flat = values.flatten()
    shift = int(torch.randint(1, max(2, flat.numel()), (1,), generator=generator, device=flat.device))
    signs = torch.randint(0, 2, flat.shape, generator=generator, device=flat.device, dtype=flat.dtype) * 2 - 1
    return (flat.roll(shift) * signs).view_as(values)


def _half(t: Tensor) -> Tensor:
    """A view of t's first half along its longest dim: t[:k] for a (out, in) weight with out >= in."""
    dim = max(range(t.dim()), key=lambda d: t.shape[d])
    return t.narrow(dim, 0, max(1, t.shape[dim] // 2))


def _no_grad_copy(p: Tensor, new: Tensor) -> None:
    with torch.no_grad():
        p.copy_(new)


def _set_data(p: Tensor, new: Tensor) -> None:
    p.data = new.clone()  # each model its own storage


def _optimizer_step(optimizer, **settings) -> Callable[[nn.Module, str, Tensor], None]:
    """A write by `optimizer`'s step, with p.grad = new."""
    def write(model: nn.Module, name: str, new: Tensor) -> None:
        p = model.get_parameter(name)
        p.grad = new.clone()
        optimizer([p], **{k: v(p) if callable(v) else v for k, v in settings.items()}).step()
        p.grad = None
    return write


def _on_param(write: Callable[[Tensor, Tensor], object]) -> Callable[[nn.Module, str, Tensor], None]:
    return lambda model, name, new: write(model.get_parameter(name), new)


# Every way to write a parameter that a user's code takes, each applied to one parameter of both models
# with the same new values. Writes through .data leave p._version unchanged (.data has a version counter
# of its own), and so do `p.data = new` (a new storage) and, in torch 2.14 at least, fused optimizer
# steps: the check's detail counts the ways that left it unchanged where it ran.
PARAM_WRITES = (
    ("p.data.copy_(new)", _on_param(lambda p, new: p.data.copy_(new))),
    ("p.data.mul_(-1)", _on_param(lambda p, new: p.data.mul_(-1))),
    ("p.data[:k].zero_() (half of p, through a view of .data)", _on_param(lambda p, new: _half(p.data).zero_())),
    ("with torch.no_grad(): p.copy_(new)", _on_param(_no_grad_copy)),
    ("p.data = new (another storage)", _on_param(_set_data)),
    ("load_state_dict({name: new}, strict=False)",
     lambda model, name, new: model.load_state_dict({name: new}, strict=False)),
    # steps of a tenth of p: seen or not, they are far beyond either tier at the output
    ("SGD(lr=0.1).step() with p.grad = new", _optimizer_step(torch.optim.SGD, lr=0.1)),
    ("Adam(lr=0.1 * rms(p), fused=True).step() with p.grad = new",
     _optimizer_step(torch.optim.Adam, lr=lambda p: 0.1 * _rms(p), fused=True)),
)


def _check_param_writes(case: _Case, renew: Renew, batch: int) -> Verdict:
    """Each write of PARAM_WRITES to each parameter, applied alike to both models in turn; after each,
    ModelNew's output on inputs it has not seen must match the reference's. ModelNew has been called
    before every write (so it had the chance to keep something), and after a write it missed a
    ModelNew built anew takes the current weights (called once, then on), so that each verdict is
    its own write's."""
    ref = copy.deepcopy(case.ref)
    originals = {name: p.detach().clone() for name, p in ref.named_parameters()}
    if not originals:
        return "skip", "no parameters to write"
    n = len(PARAM_WRITES) * len(originals)
    # one input per call: windows of a taller one, each at its own address and with its own rows
    tall = case.inputs_with_rows(11_200, batch + 2 * n + 1)
    windows = ([t[i: i + batch] for t in tall] for i in range(2 * n + 1))
    generator = torch.Generator(case.device).manual_seed(case.seed * 100_003 + 11_201)

    def compare(written: _Case, where: str) -> _Comparison:
        x = next(windows)
        _settle(case.device)
        ref_out = written.reference(x)
        return _compare(written.call(x, f"param_writes, {where}"), ref_out, case.tolerance)

    def renewed(where: str) -> _Case:
        """A ModelNew built anew holding the reference's weights, called once."""
        written = _with_models(case, ref, renew(ref.state_dict()))
        r = compare(written, where)
        if not r.ok:
            raise AssertionError(f"ModelNew built anew {where} disagrees before any write: {r.summary}")
        return written

    written = renewed("at the start")
    missed, unversioned, worst = [], set(), None
    for w, (label, write) in enumerate(PARAM_WRITES):
        for j, name in enumerate(originals):
            new_values = _shuffled(originals[name], generator)
            version = ref.get_parameter(name)._version
            for model in (ref, written.new):
                write(model, name, new_values)
            where = f"{label} on {name}"
            if ref.get_parameter(name)._version == version:
                unversioned.add(label)
                where += " (p._version unchanged)"
            r = compare(written, where)
            if not r.ok:
                missed.append((where, r))
                written = renewed(f"after {where}")
            elif worst is None or r.max_abs > worst.max_abs:
                worst = r
    if missed:
        (first, r), rest = missed[0], [where for where, _ in missed[1:]]
        also = f"; also after {'; '.join(rest[:3])}{'; ...' if len(rest) > 3 else ''}" if rest else ""
        return "fail", (f"the output differs after {len(missed)} of {n} parameter writes (each made alike in both "
                        f"models), first after {first}: {r.summary}{also}. Every write must be seen, whatever "
                        f"API made it")
    return "pass", (f"all {n} writes seen ({len(PARAM_WRITES)} ways x {len(originals)} parameters; "
                    f"{len(unversioned)} of the ways leave p._version unchanged); worst: {worst.summary}")


# --------------------------------------------------------------------------------------------
# Entry points


def _device(device) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def _validated(trials: int, allow_torch_ops: Sequence[str]) -> list[str]:
    if trials < 5:
        raise ValueError(f"the protocol runs at least 5 trials, not {trials}")
    if isinstance(allow_torch_ops, str):
        raise TypeError("allow_torch_ops takes a collection of op names, e.g. {'aten::mm'}")
    return [_op_name(op) for op in allow_torch_ops]


def check_model(problem: Problem | int | str, model_new_cls: type[nn.Module], *, scale: str = "small",
                tier: str = "auto", trials: int = 5, seed: int = 0, device: str | torch.device | None = None,
                allow_torch_ops: Sequence[str] = (), init_inputs: list | None = None,
                training: bool = True, dtype: torch.dtype = torch.float32) -> CheckReport:
    """Check `model_new_cls` against the problem's reference Model: every check in this module's docstring.

    scale: "small" (CPU-friendly), "full" (KernelBench's sizes) or "odd"; odd_shapes adds the
    "odd" scale to any other. tier: "strict", "tf32" or "auto" (tf32 when torch lets fp32
    matmuls use TF32, the reference still runs in IEEE fp32). device: None is CUDA when there
    is one. allow_torch_ops: reference ops ModelNew may call on purpose ({"aten::mm"}).
    init_inputs: other __init__ arguments than the scale's (the inputs follow in_features).
    training: False for a model meant for inference only; `gradients` and `training_step` then report a
    skip (`param_writes` still runs: an inference model's weights get loaded and written too).
    dtype: float32, or bfloat16 or float16 for a model wholly in that dtype (both models and the inputs
    converted; tier "auto" is the dtype's, TIER_OF_DTYPE, and the outputs are held to float64's on the
    same 16-bit values, rounded once to the dtype: _Case.reference).
    """
    problem = get_problem(problem)
    allowed = _validated(trials, allow_torch_ops)
    device, tier = _device(device), _dtype_tier(dtype, tier)
    custom_init = init_inputs is not None
    init = list(init_inputs) if custom_init else problem.init_inputs(scale)
    subject = (f"{model_new_cls.__name__} vs problem {problem.id} (scale {scale}{f', init {init}' if custom_init else ''}"
               f"{'' if dtype == torch.float32 else f', in {dtype}'})")

    construction, ref, new = _construct(problem.Model, model_new_cls, init, seed)
    if new is None:
        reason = "ModelNew cannot take the reference's weights (see construction)"
        rest = [CheckResult(name, "skip", reason) for name in MODEL_CHECKS[1:]]
        return CheckReport(subject, tier, str(device), [construction, *rest])

    watch = _Watch()
    results = {
        "construction": construction,
        "random_params": _run("random_params", _check_random_params, ref, new, seed),
    }
    case = _model_case(problem, ref, new, init, scale, custom_init, seed, device, tier, watch, dtype)
    results |= _case_checks(case, trials, allowed)
    wrong = results["trials"].status == "fail"
    if scale == "odd":
        results["odd_shapes"] = CheckResult("odd_shapes", "skip", "the main run is at scale odd already")
    elif wrong:
        results["odd_shapes"] = _skip_as_wrong("odd_shapes")
    else:
        results["odd_shapes"] = _run("odd_shapes", _check_odd_shapes, problem, model_new_cls, seed, trials,
                                     device, tier, watch, dtype)
    if not training:
        results["gradients"] = CheckResult("gradients", "skip", "inference only (training=False): backward not checked")
    elif wrong:
        results["gradients"] = _skip_as_wrong("gradients")
    else:
        results["gradients"] = _run("gradients", _check_gradients, ref, new, case)
    batch = problem.dims(scale).batch
    results["large_batch"] = _skip_as_wrong("large_batch") if wrong else \
        _run("large_batch", _check_large_batch, case, batch)

    def renew(state: dict[str, Tensor]) -> nn.Module:
        return _new_holding(model_new_cls, init, seed, device, state, dtype)

    if results["gradients"].status != "pass":  # inference only, or wrong values or gradients: said there
        why = {"skip": results["gradients"].detail, "fail": GRADIENTS_WRONG}[results["gradients"].status]
        results["training_step"] = CheckResult("training_step", "skip", why)
    elif results["output_owned"].status == "fail":
        results["training_step"] = CheckResult("training_step", "skip", OUTPUT_NOT_OWNED)
    else:
        results["training_step"] = _run("training_step", _check_training_step, case, renew)
    results["param_writes"] = _skip_as_wrong("param_writes") if wrong else \
        _run("param_writes", _check_param_writes, case, renew, batch)
    results["autocast"] = _skip_as_wrong("autocast") if wrong else _run("autocast", _check_autocast, case)
    results |= _watch_checks(watch)
    return CheckReport(subject, tier, str(device), [results[name] for name in MODEL_CHECKS])


def check_fn(fn: Callable, ref_fn: Callable, inputs_factory: Callable[[torch.Generator], Tensor | Sequence[Tensor]],
             *, tier: str = "strict", trials: int = 5, seed: int = 0, device: str | torch.device | None = None,
             allow_torch_ops: Sequence[str] = (), name: str | None = None, contiguous_only: bool = False) -> CheckReport:
    """Check a single function (e.g. a fused activation's binding) against a PyTorch reference.

    inputs_factory(generator) returns the inputs, one tensor or a list, drawn from that seeded
    CPU generator; the harness moves them to `device`. ref_fn must also accept float64 inputs
    (for the precision check). Runs the checks of check_model that need no model (FN_CHECKS).
    contiguous_only: fn is a raw kernel whose launcher refuses strided inputs; then a RuntimeError
    naming contiguity passes noncontiguous_input (a silent wrong answer still fails). A drop-in
    ModelNew never gets this: check_model requires strided inputs to work.
    """
    allowed = _validated(trials, allow_torch_ops)
    device, tier = _device(device), _resolve_tier(tier)

    def factory(generator):
        inputs = inputs_factory(generator)
        return [inputs] if isinstance(inputs, Tensor) else list(inputs)

    watch = _Watch()
    case = _Case(new=fn, ref=ref_fn, make_ref64=lambda: ref_fn, factory=factory, seed=seed, device=device,
                 tier=tier, watch=watch, contiguous_only=contiguous_only)
    results = _case_checks(case, trials, allowed) | _watch_checks(watch)
    subject = f"{name or getattr(fn, '__name__', repr(fn))} vs {getattr(ref_fn, '__name__', repr(ref_fn))}"
    return CheckReport(subject, tier, str(device), [results[n] for n in FN_CHECKS])
