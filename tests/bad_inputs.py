"""The bad-input matrix of tests/test_bad_inputs.py: what each launcher takes, and the rows.

A row is one kind of bad input for one callable (KINDS): a wrong dtype, a CPU tensor, a wrong rank
or shape (each per tensor argument), a batch of 0 or 1, a non-contiguous or transposed argument,
NaN, inf or values near float32's maximum, a num_groups that does not divide C, every tensor on a
second GPU, or one argument on another GPU than the rest. Each must get PyTorch's behaviour (the
reference's output: NaN where it has NaN, inf where it has inf, the rest within the tolerance) or
a clear error (judge: a Python exception naming the argument and what was expected); nothing
crashes, nothing is silently wrong.

The launchers are enumerated from the `// @export` lines of kernels/, kernels/probes/ and
kernels/exercises/ (launchers()), their arguments from the prototypes (utils.build.parameters).
SPECS says, per launcher, how to make valid arguments at a batch size and what PyTorch gives for
them; the rows follow from the prototype, so a new launcher gets its rows from its spec alone, and
one without a spec fails test_every_launcher_has_a_spec. A registered op's spec comes from its
declaration (utils/ops.py: Declaration's example and math; a whole model's from its tail's), and the
op is its launcher's spec, called through torch.ops.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

from utils import build, ops

# The sizes the ops' declarations draw their examples at (no tile's multiple): a GEMM's k and its output
# columns; channels and groups (32 channels per group, a width the fused kernels take).
K, N_OUT, C, G, EPS, SLOPE = (ops.EXAMPLE[key] for key in ("K", "N", "C", "G", "EPS", "SLOPE"))
BATCH = 5  # rows, where a row does not set the batch size
# Near float32's maximum (3.4e38), a power of two so that a TF32 split keeps it whole: one such value
# in a sum of O(1) terms cannot overflow in any order, and its square overflows.
NEAR_MAX = 2.0**125
SPECIALS = {"nan": (math.nan, math.nan), "inf": (math.inf, -math.inf), "near_max": (NEAR_MAX, -NEAR_MAX)}

ONE_ARGUMENT = ("dtype", "cpu", "rank", "shape", "noncontiguous", "transposed", "mixed_gpus")
KINDS = (*ONE_ARGUMENT, "zero_batch", "batch_1", "nan", "inf", "near_max", "groups", "other_gpu")
MUST_RUN = {"zero_batch", "batch_1", "nan", "inf", "near_max", "other_gpu"}  # PyTorch runs these: so must we
GPU_ONLY = {"cpu", "mixed_gpus", "other_gpu"}  # need CUDA tensors (the fake runs the first two on the CPU)
TWO_GPUS = {"mixed_gpus", "other_gpu"}
_SHAPE_WORDS = r"shape|-D\b|dim|agree|same K|divisible|must be \("
# what a clear error says, besides the argument's name
EXPECTED = {"dtype": r"float32|dtype", "cpu": r"CUDA|device", "rank": _SHAPE_WORDS, "shape": _SHAPE_WORDS,
            "noncontiguous": r"contiguous", "transposed": r"contiguous", "mixed_gpus": r"device",
            "groups": r"divisible|divide"}


# --- the launchers ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Launcher:
    """One `// @export` function: kernels/<folder>/<kernel>.cu's `name`."""
    folder: str  # "" (kernels/ itself), "probes" or "exercises"
    kernel: str
    name: str
    params: tuple[build.Parameter, ...]

    @property
    def key(self) -> str:
        return f"{self.folder}/{self.kernel}:{self.name}" if self.folder else f"{self.kernel}:{self.name}"

    @property
    def kernels_dir(self):
        return build.KERNELS_DIR / self.folder if self.folder else None

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.params]

    @property
    def tensors(self) -> list[int]:
        return [i for i, p in enumerate(self.params) if p.is_tensor]

    def builds_here(self) -> bool:
        return build.builds_here(self.kernel, self.kernels_dir)

    def load(self):
        return getattr(build.load_kernel(self.kernel, kernels_dir=self.kernels_dir), self.name)

    def __str__(self) -> str:
        return self.key


@functools.cache
def launchers() -> tuple[Launcher, ...]:
    """Every `// @export` function of kernels/, kernels/probes/ and kernels/exercises/ (the folders the
    test session builds), in file order."""
    found = []
    for folder in ("", "probes", "exercises"):
        for path in sorted((build.KERNELS_DIR / folder).glob("*.cu")):
            for export in build.exported_functions(path.read_text(), build.display_path(path)):
                found.append(Launcher(folder, path.stem, export.name, tuple(build.parameters(export))))
    return tuple(found)


def op_launcher(qualname: str) -> Launcher:
    """The launcher a registered op runs on the GPU (its CUDA kernel)."""
    name = qualname.split("::")[1]
    (found,) = [la for la in launchers() if la.folder == "" and la.kernel == build.op_kernel(qualname)
                and la.name == name]
    return found


# --- what each launcher takes, and what PyTorch gives -------------------------------------------

@dataclass(frozen=True)
class Spec:
    make: Callable[[int, torch.Generator], list]  # valid arguments at batch size n, on the CPU
    reference: Callable  # PyTorch's answer for those arguments, on their device
    tol: float | None = 1e-4  # atol = rtol on finite values (KernelBench's strict tier); None: shapes only
    special: int = 0  # the argument that gets NaN, inf and near-max values
    batch: bool = True  # the batch size may be 0 or 1 (a probe of one fixed shape has none)
    # row kind -> why it fails where the launcher's kernel runs: device code this matrix may not change
    # gets it wrong (an expected failure, strict: when the kernel is fixed, the entry must go)
    known: Mapping[str, str] = field(default_factory=dict)


def _gemm(n, g):
    return [torch.randn(n, K, generator=g), torch.randn(N_OUT, K, generator=g) / 8]


def _linear(n, g):
    return [*_gemm(n, g), torch.randn(N_OUT, generator=g)]


def _pair(n, g):
    return [torch.randn(n, N_OUT, generator=g), torch.randn(n, N_OUT, generator=g)]


_x = ops.example_tail_input


def _group_norm(n, g):
    return [_x(n, g), G, *ops.example_gamma_beta(g), EPS]


def _row_min(x, num_groups, gamma, beta, eps):
    return torch.min(F.group_norm(x, num_groups, gamma, beta, eps), dim=1, keepdim=True)[0]


def _block_min(x):  # read_probe: each block's minimum over 1024 floats, torch.min's NaN included
    flat = x.reshape(-1)
    blocks = -(-flat.numel() // 1024)
    padded = torch.cat([flat, flat.new_full((blocks * 1024 - flat.numel(),), math.inf)])
    return padded.view(blocks, 1024).amin(1)


def _fusable(x, w, num_groups):  # kernels/fused_gemm_groupnorm.cu's fusable, as documented there
    return bool(x.is_cuda and x.dim() == 2 and w.dim() == 2 and x.shape[1] == w.shape[1] and x.shape[1] > 0
                and x.shape[1] % 4 == 0 and num_groups > 0 and w.shape[0] % num_groups == 0
                and w.shape[0] // num_groups in (16, 32, 64) and torch.cuda.get_device_capability(x.device) == (9, 0))


def _leaky_relu_x2(x, slope):
    y = F.leaky_relu(x, slope)
    return y + y


_MIN_MODEL = ops.WHOLE_MODELS["linear_group_norm_min_bias"]
# What a declared op's spec adds to its declaration: tf32_residual's bits are exact; a tail's backward
# gets NaN, inf and near-max values in y, the argument that makes a whole group, hence every output,
# NaN or finite.
DECLARED_SPEC = {"tf32_residual": {"tol": 0.0},
                 **{f"{name}_backward": {"special": 1} for name in (
                     "bias_hardtanh_mish_group_norm", "swish_bias_group_norm", "group_norm_leaky_relu_x2",
                     "group_norm_min_bias")}}

_GEMM = Spec(_gemm, F.linear)
_EXERCISE_GEMM = Spec(_gemm, F.linear, tol=None)  # the starting point is wrong on purpose: shapes only
_TF32 = Spec(_gemm, F.linear, tol=1e-2)  # 1xTF32: KernelBench's TF32 tier
# rung 11: bf16 operands and output, at the bf16 tier (utils.check.TIERS)
_BF16 = Spec(lambda n, g: [t.bfloat16() for t in _gemm(n, g)], F.linear, tol=5e-2)

SPECS: dict[str, Spec] = {
    "vector_add:vector_add": Spec(_pair, torch.add),
    "activations:bias_hardtanh_mish": Spec(lambda n, g: [_x(n, g), torch.randn(C, generator=g), -1.0, 1.0],
                                           lambda x, b, lo, hi: F.mish(F.hardtanh(x + b, lo, hi))),
    "activations:swish_bias": Spec(lambda n, g: [_x(n, g), torch.randn(C, generator=g)],
                                   lambda x, b: torch.sigmoid(x) * x + b),
    "activations:leaky_relu_x2": Spec(lambda n, g: [_x(n, g), SLOPE], _leaky_relu_x2),
    "activations:mish": Spec(lambda n, g: [_x(n, g)], F.mish),
    "groupnorm:group_norm_welford": Spec(_group_norm, F.group_norm),
    "groupnorm:group_norm_sumsq": Spec(_group_norm, F.group_norm),
    "min_bias_broadcast:group_norm_row_min": Spec(_group_norm, _row_min),
    "min_bias_broadcast:min_bias_broadcast": Spec(
        lambda n, g: [torch.randn(n, 1, generator=g), torch.randn(1, C, 1, 1, generator=g)], torch.add),
    **{f"gemm_0{i}_{rung}:gemm": _GEMM for i, rung in enumerate(
        ("naive", "coalesced", "smem_tiled", "blocktile_1d", "blocktile_2d", "vectorized", "pipelined"), start=1)},
    "gemm_08_mma_tf32:gemm": _TF32,
    "gemm_09_wgmma_tf32:gemm": _TF32,
    "gemm_10_3xtf32:gemm": _GEMM,
    "gemm_11_wgmma_bf16:gemm": _BF16,
    "gemm_10_3xtf32:gemm_split_in_smem": _GEMM,
    "gemm_10_3xtf32:gemm_mma_sync": _GEMM,
    # every op declared in utils/ops.py: its example and its math
    **{f"{d.kernel}:{d.name}": Spec(d.example, d.math, **DECLARED_SPEC.get(d.name, {})) for d in ops.DECLARED.values()},
    "gemm_bias:linear_bias": Spec(_linear, F.linear),
    "gemm_bias:linear_two_biases": Spec(lambda n, g: [*_linear(n, g), torch.randn(N_OUT, generator=g)],
                                        lambda x, w, b, e: F.linear(x, w, b) + e),
    "fused_gemm_groupnorm:fusable": Spec(lambda n, g: [*_MIN_MODEL.example(n, g)[:2], G], _fusable, tol=0.0),
    **{f"fused_gemm_groupnorm:{name}": Spec(m.example, m.math) for name, m in ops.WHOLE_MODELS.items()},
    "fused_gemm_groupnorm:linear_group_norm_min_bias_atomic": Spec(_MIN_MODEL.example, _MIN_MODEL.math),
    "probes/read_probe:read_probe": Spec(lambda n, g: [torch.randn(n, K, generator=g)], _block_min, tol=0.0),
    "probes/wgmma_peak_probe:wgmma_peak_probe": Spec(  # fixed tiles; its output is a timing artefact: shapes only
        lambda n, g: [torch.randn(128, 32, generator=g), torch.randn(256, 32, generator=g), 1, 1],
        lambda x, w, iters, blocks: x.new_empty((blocks, 128, 256)), tol=None, batch=False),
    # exercises: the starting points are wrong on purpose (the reader's gap): errors and shapes only
    "exercises/scale_add:scale_add": Spec(lambda n, g: [*_pair(n, g), 0.5], lambda a, b, s: s * a + b, tol=None),
    "exercises/bias_gelu:bias_gelu": Spec(lambda n, g: [_x(n, g), torch.randn(C, generator=g)],
                                          lambda x, b: F.gelu(x + b), tol=None),
    "exercises/gemm_epilogue_relu:linear_relu": Spec(_linear, lambda x, w, b: F.relu(F.linear(x, w, b)), tol=None),
    **{f"exercises/{kernel}:gemm": _EXERCISE_GEMM
       for kernel in ("gemm_seed004", "gemm_smem_pad", "gemm_tile_shape", "gemm_warp_per_output")},
    "exercises/group_norm_stats:group_norm": Spec(_group_norm, F.group_norm, tol=None),
}


# --- the rows -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    kind: str
    arg: str | None = None  # the argument it changes (ONE_ARGUMENT kinds)

    def __str__(self) -> str:
        return f"{self.kind}-{self.arg}" if self.arg else self.kind


def rows(launcher: Launcher, spec: Spec) -> list[Row]:
    """Every row that applies to the launcher: per tensor argument where one argument changes, once
    otherwise; shape changes every tensor but the first (whose rank changes), transposed needs two
    dimensions of more than one element, mixed_gpus two tensors."""
    sample = spec.make(3, torch.Generator().manual_seed(0))
    tensors = [i for i in launcher.tensors if isinstance(sample[i], torch.Tensor)]
    if not tensors:
        return []
    found = []
    for i in tensors:
        t, name = sample[i], launcher.names[i]
        found += [Row("dtype", name), Row("cpu", name), Row("rank", name)]
        found += [Row("shape", name)] if i != tensors[0] else []
        found += [Row("noncontiguous", name)] if t.numel() > 1 else []
        found += [Row("transposed", name)] if t.dim() >= 2 and min(t.shape[-2:]) > 1 else []
        found += [Row("mixed_gpus", name)] if len(tensors) > 1 else []
    found += [Row("zero_batch"), Row("batch_1")] if spec.batch else []
    found += [Row(kind) for kind in SPECIALS] if spec.tol is not None else []
    found += [Row("groups")] if "num_groups" in launcher.names else []
    return found + [Row("other_gpu")]


def _strided(t: torch.Tensor) -> torch.Tensor:
    """t's values in a view with stride 2 between neighbours: not contiguous."""
    return torch.empty(2 * t.numel(), dtype=t.dtype, device=t.device)[::2].view(t.shape).copy_(t)


def non_divisor(n: int) -> int:
    return next(d for d in range(2, n + 2) if n % d)


def valid_arguments(spec: Spec, n: int = BATCH, device="cpu") -> list:
    return [a.to(device) if isinstance(a, torch.Tensor) else a for a in spec.make(n, torch.Generator().manual_seed(0))]


def arguments(launcher: Launcher, spec: Spec, row: Row, device="cpu") -> list:
    """The row's arguments: valid ones on `device` (other_gpu: the second GPU), then the row's change.
    (cpu and mixed_gpus on a machine without CUDA: valid_arguments, then fake_devices.)"""
    n = {"zero_batch": 0, "batch_1": 1}.get(row.kind, BATCH)
    args = valid_arguments(spec, n, "cuda:1" if row.kind == "other_gpu" else device)
    if row.arg is not None:
        i = launcher.names.index(row.arg)
        t = args[i]
        args[i] = {"dtype": lambda: t.double(), "cpu": lambda: t.cpu(), "rank": lambda: t.unsqueeze(0),
                   "shape": lambda: torch.cat([t, t[..., :1]], dim=-1),  # one more along the last dimension
                   "noncontiguous": lambda: _strided(t), "mixed_gpus": lambda: t.to("cuda:1"),
                   "transposed": lambda: t.transpose(-2, -1).contiguous().transpose(-2, -1)}[row.kind]()
    elif row.kind in SPECIALS:
        t = args[spec.special].clone()
        t.view(-1)[0], t.view(-1)[-1] = SPECIALS[row.kind]  # the first and the last row, one value each
        args[spec.special] = t
    elif row.kind == "groups":
        channels = args[launcher.names.index("gamma" if "gamma" in launcher.names else "w")].shape[0]
        args[launcher.names.index("num_groups")] = non_divisor(channels)
    return args


# --- running and judging ------------------------------------------------------------------------

@dataclass
class Outcome:
    value: Any = None
    error: Exception | None = None

    def __repr__(self) -> str:
        return f"error {type(self.error).__name__}: {self.error}" if self.error else "a result"


def outcome(fn, args, *, sync: bool = False) -> Outcome:
    """fn(*args), or the exception it raised (after the GPU finished, when sync: an error of the
    launch itself surfaces here, not in a later test)."""
    try:
        value = fn(*args)
        for d in range(torch.cuda.device_count() if sync else 0):
            torch.cuda.synchronize(d)
    except Exception as e:  # noqa: BLE001 -- the outcome to judge, whatever it is
        return Outcome(error=e)
    return Outcome(value)


def fake_devices(launcher: Launcher, row: Row, args: list) -> list:
    """cpu and mixed_gpus rows for a fake implementation: the tensors on cuda(:0), the row's one on
    the CPU or cuda:1 (a fake tensor needs no GPU)."""
    i = launcher.names.index(row.arg)
    return [a.to({"cpu": "cpu", "mixed_gpus": "cuda:1"}[row.kind] if j == i else "cuda")
            if isinstance(a, torch.Tensor) else a for j, a in enumerate(args)]


def fake_outcome(fn, args, to_device=None) -> Outcome:
    """fn on fake tensors of args' shapes (torch.compile's tracing), after to_device(fake args)."""
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        return outcome(fn, to_device(fake) if to_device else fake)


def assert_clear(error: Exception, row: Row, names: list[str]) -> None:
    """A clear error: a Python exception (not a CUDA fault) that names the argument and says what
    was expected."""
    text = str(error)
    assert isinstance(error, (RuntimeError, TypeError, ValueError)), f"{row}: not a clear error: {error!r}"
    assert not re.search(r"CUDA error|illegal memory|misaligned address", text), f"{row}: a GPU fault: {text}"
    named = [row.arg] if row.arg else ["num_groups"] if row.kind == "groups" else names
    assert any(re.search(rf"\b{re.escape(n)}\b", text) for n in named), f"{row}: the error names none of {named}: {text}"
    if row.kind in EXPECTED:
        assert re.search(EXPECTED[row.kind], text), f"{row}: the error does not say what was expected: {text}"


def _flat(value) -> list:
    return [v for item in value for v in _flat(item)] if isinstance(value, (tuple, list)) else [value]


def assert_like(got, want, tol: float | None, row: Row) -> None:
    """got is PyTorch's answer: the same structure, shapes, dtypes and devices; unless tol is None,
    NaN and ±inf in the same places and the finite values within tol (atol = rtol)."""
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want), f"{row}: {len(got)} outputs, PyTorch gives {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        if not isinstance(w, torch.Tensor):
            assert g == w, f"{row}: output {k} is {g!r}, PyTorch gives {w!r}"
            continue
        assert isinstance(g, torch.Tensor), f"{row}: output {k} is {g!r}, PyTorch gives a tensor"
        assert (g.shape, g.dtype, g.device) == (w.shape, w.dtype, w.device), (
            f"{row}: output {k} is {tuple(g.shape)} {g.dtype} on {g.device}, PyTorch's {tuple(w.shape)} {w.dtype} "
            f"on {w.device}")
        if tol is None:
            continue
        for what, mask in (("NaN", torch.isnan), ("+inf", torch.isposinf), ("-inf", torch.isneginf)):
            assert torch.equal(mask(g), mask(w)), (
                f"{row}: output {k} has {int(mask(g).sum())} {what}, PyTorch's {int(mask(w).sum())}, "
                f"{int((mask(g) != mask(w)).sum())} of them in other places")
        finite = torch.isfinite(w)
        a, b = g[finite], w[finite]
        ok = torch.equal(a, b) if tol == 0 else torch.allclose(a, b, atol=tol, rtol=tol)
        assert ok, f"{row}: output {k} differs from PyTorch's by up to {(a - b).abs().max().item():.3g} (tol {tol})"


def judge(row: Row, got: Outcome, want: Outcome, tol: float | None, names: list[str]) -> None:
    """PyTorch's behaviour or a clear error: where PyTorch raises, a clear error; where it gives a
    result, that result, or (a bad input it happens to accept) a clear error, except in the rows it
    must run (MUST_RUN)."""
    if got.error is not None:
        assert want.error is not None or row.kind not in MUST_RUN, f"{row}: PyTorch runs this; got {got}"
        assert_clear(got.error, row, names)
    else:
        assert want.error is None, f"{row}: PyTorch refuses this ({want}), but a result came back"
        assert_like(got.value, want.value, tol, row)
