"""What `make sanitize` runs under compute-sanitizer: every launcher of kernels/ and every solution as
named targets, and the worker that runs one target's calls in a process of its own.

    python -m utils.sanitize --list                                   # the targets, on any machine
    python -m utils.sanitize_targets gemm_05_blocktile_2d/reduced    # one target's calls (the driver runs this)

A target is a unit (a kernel file, or a solution module) at one shape class:

  reduced  edge shapes, multiples of no tile (37 rows; K = 65, where the tensor-core rungs take their
           mma.sync kernel, and K = 68, their TMA path; group widths 23, 12, 20, 260, 20000 ...), and a
           shape of several tiles and several pipeline stages (300 x 520 x 600: 3 x 3 block tiles of
           128 x 256, 19 k tiles of 32 through a ring of at most 4 stages, 3 promotion chunks of 256);
           every tool runs it.
  full     KernelBench's shapes (the problems' GEMMs, tails and whole models). memcheck and synccheck
           run it; racecheck and initcheck only for a memory-bound unit (FULL_UNDER_EVERY_TOOL): they
           track every shared-memory access, and a GEMM of 1024 x 8192 x 8192 under racecheck did not
           finish in 100 s (experiments/wgmma_schedule/README.md).

A call makes its inputs on the CPU and copies them to the GPU (cudaMemcpy: no kernel), and computes no
reference: the kernels that run are the launchers' own, what they call (a copy, cuBLAS where a path
is cuBLAS's), and for a training step PyTorch's optimizer step. No float64 reference kernel of
PyTorch's (what initcheck flagged in the pytest run, results/nvidia-h200/logs/dropins/README.md) runs.

Every export of every kernel file is called, or excused in EXCUSED with the reason
(tests/test_sanitize.py holds the list to that). The worker prints START, one CALL line per call, and
DONE; the driver (utils/sanitize.py) takes a target without DONE for one that did not finish.
"""
from __future__ import annotations

import argparse
import fnmatch
import importlib
import sys
import time
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import Callable

import torch

from utils import REPO, build, ops, precision  # noqa: F401  (ops: the schemas the fused launchers' fallback calls)
from utils.problems import Dims, get_problem

TOOLS = ("memcheck", "synccheck", "initcheck", "racecheck")  # fastest first: a budget that runs out loses the slow ones
FAST_TOOLS = ("memcheck", "synccheck")  # they run every full-shape target
CLASSES = ("reduced", "full")
SOLUTIONS_DIR = REPO / "solutions"
START, CALL, DONE = "SANITIZE-TARGET-START", "SANITIZE-CALL", "SANITIZE-TARGET-DONE"

EPS, LO, HI, SLOPE = 1e-5, -1.0, 1.0, 0.01  # GroupNorm's eps, nn.Hardtanh()'s range, 62's LeakyReLU
WHOLE_MODEL = {94: "linear_bias_hardtanh_mish_group_norm", 75: "linear_group_norm_min_bias",
               37: "linear_swish_bias_group_norm", 62: "linear_group_norm_leaky_relu_x2"}
TAIL = {94: "bias_hardtanh_mish_group_norm", 75: "group_norm_min_bias", 37: "swish_bias_group_norm",
        62: "group_norm_leaky_relu_x2"}
STEPS = ("forward", "forward, frozen", "training step")  # a solution target's calls
FULL_UNDER_EVERY_TOOL = {"vector_add", "activations", "groupnorm", "min_bias_broadcast", "tail_backward",
                         "probes/read_probe"}  # memory-bound: their full shapes are affordable under every tool
# Exports that launch no kernel, with the reason; everything else a kernel file exports is called.
EXCUSED = {
    "fused_gemm_groupnorm": {"fusable": "a host-side predicate (shapes, arch): it launches no kernel"},
    "exercises/gemm_smem_pad": {"ws_row_floats": "returns a compile-time constant: it launches no kernel"},
    "exercises/gemm_tile_shape": {"tile_shape": "returns the compile-time tile shape: it launches no kernel"},
}


# ---- inputs, made on the CPU (never zeros: nothing a kernel reads is left uninitialised) -----------

def _gen(*sizes) -> torch.Generator:
    return torch.Generator().manual_seed(sum(sizes) % 2**31)


def _uniform(g, *shape, bound=1.0) -> torch.Tensor:
    return (torch.rand(*shape, generator=g) * 2 - 1) * bound


def width(pid: int) -> int:
    """The problem's channels per group: the fused kernels' instance (16, 32 or 64)."""
    return get_problem(pid).dims("full").channels_per_group


def tiles_groups(D: int) -> int:
    """Groups of D channels for the tiles shape: C = 512 + D, more than 4 column tiles of 128 and a
    multiple of none (D <= 64), so the last tile is partial."""
    return 512 // D + 1


def gemm(M, N, K):
    """x (M, K) as the problems' inputs (torch.rand), w (N, K) at nn.Linear's init scale."""
    g = _gen(M, N, K)
    return [torch.rand(M, K, generator=g), _uniform(g, N, K, bound=max(K, 1) ** -0.5)]


def linear(M, N, K, kept=False):
    """gemm's operands, a bias (N,) and, kept, a w_residual (the small parts a freeze() keeps)."""
    x, w = gemm(M, N, K)
    g = _gen(N, K)
    return [x, w, _uniform(g, N)] + ([_uniform(g, N, K, bound=2.0**-12)] if kept else [])


def linear_optional_residual(M, N, K, kept=False):
    """gemm_10_3xtf32's linear: its w_residual is optional, and a pybind launcher takes it as None."""
    return linear(M, N, K, kept) + ([] if kept else [None])


def two_biases(M, N, K):
    return linear(M, N, K) + [_uniform(_gen(N), N)]


def linear_backward(M, N, K):
    x, w = gemm(M, N, K)
    return [_uniform(_gen(M, N), M, N), x, w, True, True]


def weight(N, K):
    return gemm(1, N, K)[1:]


def pair(R, C):
    g = _gen(R, C)
    return [_uniform(g, R, C), _uniform(g, R, C)]


def scale_add(R, C):
    return pair(R, C) + [2.0]


def rows(R, C, bias=False):
    g = _gen(R, C)
    return [_uniform(g, R, C, bound=4.0)] + ([_uniform(g, C)] if bias else [])


def activation(R, C, *, name):
    x, bias = rows(R, C, bias=True)
    return {"bias_hardtanh_mish": [x, bias, LO, HI], "swish_bias": [x, bias], "leaky_relu_x2": [x, SLOPE],
            "mish": [x]}[name]


def tail(N, C, G, *, name, grad=False):
    """A tail's arguments (groupnorm.cu, min_bias_broadcast.cu, the exercises'), or with grad its
    backward's (tail_backward.cu: the output's gradient, then the GEMM's output y in x's place)."""
    g = _gen(N, C, G)
    x = _uniform(g, N, C, bound=3.0)
    gamma, beta = torch.rand(C, generator=g) + 0.5, 0.5 * torch.randn(C, generator=g)
    bias = 0.5 * torch.randn(C, generator=g)
    head = [_uniform(g, *((1, C, N, 1) if name.startswith("group_norm_min_bias") else (N, C))), x] if grad else [x]
    if name.startswith("bias_hardtanh_mish"):
        return head + [bias, LO, HI, G, gamma, beta, EPS]
    if name.startswith("swish_bias"):
        return head + [bias, G, gamma, beta, EPS]
    if name.startswith("group_norm_leaky_relu_x2"):
        return head + [G, gamma, beta, EPS, SLOPE]
    if name == "group_norm_min_bias":
        return head + [G, gamma, beta, EPS, bias.view(1, C, 1, 1)]
    if name == "min_bias_broadcast":
        return [x[:, :1].contiguous(), bias.view(1, C, 1, 1)]
    return head + [G, gamma, beta, EPS]  # the plain GroupNorms, the row minimum, 75's tail backward


def whole_model(M, K, C, G, *, pid, kept=False, save=False):
    """A whole model's arguments (fused_gemm_groupnorm.cu): x, w, linear_bias, its tail's, w_residual, save."""
    x, w, lb, *residual = linear(M, C, K, kept)
    return [x, w, lb] + tail(M, C, G, name=TAIL[pid])[1:] + [residual[0] if kept else None, save]


def peak_probe(iters, blocks):
    g = _gen(iters, blocks)
    return [torch.rand(128, 32, generator=g), torch.randn(256, 32, generator=g), iters, blocks]


def solution_inputs(M, K, C, G, *, pid):
    """A solution's input x (M, K) and the gradient of its output, for a training step."""
    g = _gen(M, K, C, G)
    return [torch.rand(M, K, generator=g), torch.randn(get_problem(pid).output_shape(Dims(M, K, C, G)), generator=g)]


# ---- calls, units, targets -------------------------------------------------------------------------

@dataclass(frozen=True)
class Call:
    export: str                 # the launcher it calls (a kernel unit) or the step (a solution unit)
    shape: tuple[int, ...]      # the sizes, as its factory takes them
    args: Callable[[], list]    # its arguments, made on the CPU: partial(factory, *shape, ...)
    tf32: bool = False          # TF32 allowed for fp32 matmuls during the call (PyTorch's setting)

    @property
    def label(self) -> str:
        flags = [k for k, v in getattr(self.args, "keywords", {}).items() if v is True] + (["tf32"] if self.tf32 else [])
        return " ".join([self.export, "x".join(map(str, self.shape)), *flags])


@dataclass(frozen=True)
class Unit:
    name: str                   # "gemm_05_blocktile_2d", "probes/read_probe", "solutions/p094_gemm_..."
    reduced: tuple[Call, ...]
    full: tuple[Call, ...] = ()

    @property
    def is_solution(self) -> bool:
        return self.name.startswith("solutions/")

    @property
    def path(self) -> Path:
        if self.is_solution:
            return SOLUTIONS_DIR / f"{self.name.split('/', 1)[1]}.py"
        return build.KERNELS_DIR / f"{self.name}.cu"

    def builds_here(self) -> bool:
        """Whether its kernel file builds for this GPU (the wgmma files are sm_90a's); a solution runs anywhere."""
        return self.is_solution or build.builds_here(self.path.stem, self.path.parent)


@dataclass(frozen=True)
class Target:
    unit: Unit
    shape_class: str

    @property
    def name(self) -> str:
        return f"{self.unit.name}/{self.shape_class}"

    @property
    def calls(self) -> tuple[Call, ...]:
        return getattr(self.unit, self.shape_class)

    @property
    def tools(self) -> tuple[str, ...]:
        every = self.shape_class == "reduced" or self.unit.name in FULL_UNDER_EVERY_TOOL
        return TOOLS if every else FAST_TOOLS


def calls(exports, factory, shapes, tf32=(False,), *, named=False, **options) -> tuple[Call, ...]:
    """One call per export, shape and TF32 setting; named: the factory is told the export (name=)."""
    return tuple(Call(e, tuple(s), partial(factory, *s, **({"name": e} if named else {}), **options), t)
                 for e in exports for s in shapes for t in tf32)


GEMM_EDGE = ((37, 129, 65), (37, 129, 68))  # M, N, K: multiples of no tile; K % 4 != 0 (mma.sync paths) and == 0 (TMA)
GEMM_TILES = ((300, 520, 600),)
GEMM_REDUCED = GEMM_EDGE + GEMM_TILES
GEMM_FULL = ((1024, 8192, 8192), (32768, 4096, 1024))  # problems 94, 75, 62; problem 37
ROWS_REDUCED = ((37, 115), (1, 8192), (37, 128), (3, 4), (300, 520))
ROWS_FULL = ((1024, 8192), (32768, 4096))
# (N, C, G): the group widths' paths (D = 23, 12, 20, 4, 260, 500, one group of 20000 channels; teams
# for D = 32, 16, 64, 128, 256), then the problems' widths at 300 rows, the last column tile partial.
GROUPS_EDGE = ((37, 115, 5), (7, 120, 10), (9, 80, 4), (9, 12, 3), (3, 1040, 4), (3, 1000, 2), (2, 20000, 1),
               (1, 8192, 256), (37, 1024, 64), (5, 4096, 64), (3, 384, 3), (3, 768, 3))
GROUPS_TILES = tuple((300, 512 + D, tiles_groups(D)) for D in (32, 16, 64))
GROUPS_FULL = ((1024, 8192, 256), (32768, 4096, 64), (1024, 8192, 512))  # 94; 37; 62 and 75
GROUP_NORMS = ("group_norm_welford", "group_norm_sumsq", "bias_hardtanh_mish_group_norm", "swish_bias_group_norm",
               "group_norm_leaky_relu_x2")
MIN_TAILS = ("group_norm_row_min", "min_bias_broadcast", "group_norm_min_bias")
ACTIVATIONS = ("bias_hardtanh_mish", "swish_bias", "leaky_relu_x2", "mish")
RUNG10 = ("gemm", "gemm_split_in_smem", "gemm_mma_sync")


def _full_size(pid) -> tuple[int, int, int, int]:
    d = get_problem(pid).dims("full")
    return d.batch, d.in_features, d.out_features, d.groups


def _whole_model_calls(pid, export, full=False) -> tuple[Call, ...]:
    """The full shape (strict and TF32, the GEMM's output saved or not), or: the tiles shape with every
    variant (saved output, kept residual, TF32), an edge shape the fused kernel takes (K = 68) and one
    it does not (K = 65: the ops linear, then the tail)."""
    one = partial(calls, [export], whole_model, pid=pid)
    if full:
        return one([_full_size(pid)], (False, True)) + one([_full_size(pid)], save=True)
    D = width(pid)
    tiles, edge = (300, 600, 512 + D, tiles_groups(D)), (37, 68, D * 5, 5)
    out = (one([tiles], (False, True)) + one([tiles], (False, True), save=True) + one([tiles], kept=True)
           + one([edge]) + one([edge], (True,), save=True))
    if not export.endswith("_atomic"):  # the atomic fold has no unfused path: it refuses other shapes
        out += one([(37, 65, D * 5, 5)], save=True)
    return out


def _rung(stem: str) -> Unit:
    if stem != "gemm_10_3xtf32":
        return Unit(stem, calls(["gemm"], gemm, GEMM_REDUCED), calls(["gemm"], gemm, GEMM_FULL))
    unit = {}
    for shape_class, shapes in (("reduced", GEMM_REDUCED), ("full", GEMM_FULL)):
        unit[shape_class] = (calls(RUNG10, gemm, shapes) + calls(["tf32_residual"], weight, [s[1:] for s in shapes])
                             + calls(["linear"], linear_optional_residual, shapes, (False, True))
                             + calls(["linear"], linear_optional_residual, shapes[-1:], kept=True)
                             + calls(["linear_backward"], linear_backward, shapes, (False, True)))
    return Unit(stem, **unit)


def _tail_backward() -> Unit:
    reduced, full = (), ()
    for pid in (94, 37, 62, 75):
        name, D = f"{TAIL[pid]}_backward", width(pid)
        shapes = [(37, 37 * D, 37), (1, 8192, 8192 // D), (300, 512 + D, tiles_groups(D)),  # the problem's width
                  (37, 115, 5), (7, 120, 10), (9, 80, 4), (9, 1040, 4), (3, 20000, 1), (5, 7, 7)]  # the general path
        reduced += calls([name], tail, shapes, named=True, grad=True)
        full += calls([name], tail, [(n, c, g) for n, _, c, g in [_full_size(pid)]], named=True, grad=True)
    return Unit("tail_backward", reduced, full)


@lru_cache(maxsize=None)
def kernel_units() -> tuple[Unit, ...]:
    """A unit per kernel file of kernels/, kernels/probes/ and kernels/exercises/ (the ladder's rungs
    found by their file names)."""
    rungs = sorted(p.stem for p in build.KERNELS_DIR.glob("gemm_[0-9][0-9]_*.cu"))
    models = [(pid, WHOLE_MODEL[pid]) for pid in (94, 75, 37, 62)] + [(75, "linear_group_norm_min_bias_atomic")]
    fused = {c: sum((_whole_model_calls(pid, e, c == "full") for pid, e in models), ()) for c in CLASSES}
    gemms = ("gemm_seed004", "gemm_smem_pad", "gemm_tile_shape", "gemm_warp_per_output")
    return (
        Unit("vector_add", calls(["vector_add"], pair, ROWS_REDUCED), calls(["vector_add"], pair, ROWS_FULL[:1])),
        *(_rung(stem) for stem in rungs),
        Unit("gemm_bias", calls(["linear_bias"], linear, GEMM_REDUCED) + calls(["linear_two_biases"], two_biases, GEMM_REDUCED),
             calls(["linear_bias"], linear, GEMM_FULL) + calls(["linear_two_biases"], two_biases, GEMM_FULL)),
        Unit("activations", calls(ACTIVATIONS, activation, ROWS_REDUCED, named=True),
             calls(ACTIVATIONS, activation, ROWS_FULL, named=True)),
        Unit("groupnorm", calls(GROUP_NORMS, tail, GROUPS_EDGE + GROUPS_TILES, named=True),
             calls(GROUP_NORMS, tail, GROUPS_FULL, named=True)),
        Unit("min_bias_broadcast", calls(MIN_TAILS, tail, GROUPS_EDGE[:3] + ((1028, 256, 16), (6, 3, 3)) + GROUPS_TILES,
                                         named=True),
             calls(MIN_TAILS, tail, GROUPS_FULL[2:], named=True)),
        _tail_backward(),
        Unit("fused_gemm_groupnorm", fused["reduced"], fused["full"]),
        Unit("probes/read_probe", calls(["read_probe"], rows, [(1, 4), (37, 116), (300, 520)]),
             calls(["read_probe"], rows, ROWS_FULL[:1])),
        Unit("probes/wgmma_peak_probe", calls(["wgmma_peak_probe"], peak_probe, [(1, 1), (3, 5)]),
             calls(["wgmma_peak_probe"], peak_probe, [(64, 132)])),
        # the exercises as committed, the reader's starting points: the reduced shapes only
        Unit("exercises/scale_add", calls(["scale_add"], scale_add, ROWS_REDUCED)),
        Unit("exercises/bias_gelu", calls(["bias_gelu"], rows, ROWS_REDUCED, bias=True)),
        Unit("exercises/gemm_epilogue_relu", calls(["linear_relu"], linear, GEMM_REDUCED)),
        *(Unit(f"exercises/{stem}", calls(["gemm"], gemm, GEMM_REDUCED)) for stem in gemms),
        Unit("exercises/group_norm_stats", calls(["group_norm"], tail, [(37, 115, 5), GROUPS_TILES[0]], named=True)),
    )


def _solution_calls(pid, sizes) -> tuple[Call, ...]:
    """The forward (TF32 off and on, and frozen) and a training step (TF32 off and on) at each size."""
    forward, frozen, training = STEPS
    return sum((calls([forward], solution_inputs, [s], (False, True), pid=pid)
                + calls([frozen], solution_inputs, [s], pid=pid)
                + calls([training], solution_inputs, [s], (False, True), pid=pid) for s in sizes), ())


@lru_cache(maxsize=None)
def solution_units() -> tuple[Unit, ...]:
    """A unit per module of solutions/: the odd scale (the unfused path: K = 129), the tiles shape
    (the fused kernel, 300 rows, the last column tile partial) and one row; the full shape."""
    units = []
    for path in sorted(SOLUTIONS_DIR.glob("p[0-9][0-9][0-9]_*.py")):
        pid = int(path.stem[1:4])
        odd, D = get_problem(pid).dims("odd"), width(pid)
        reduced = [(odd.batch, odd.in_features, odd.out_features, odd.groups), (300, 600, 512 + D, tiles_groups(D)),
                   (1, 600, 512 + D, tiles_groups(D))]
        units.append(Unit(f"solutions/{path.stem}", _solution_calls(pid, reduced), _solution_calls(pid, [_full_size(pid)])))
    return tuple(units)


def targets() -> list[Target]:
    """Every target, kernel files first, then solutions; a unit's reduced class before its full one."""
    return [Target(u, c) for u in kernel_units() + solution_units() for c in CLASSES if getattr(u, c)]


def select(patterns=None, classes=CLASSES) -> list[Target]:
    """The targets whose name (or unit name) matches one of the shell patterns, in the given classes."""
    chosen = [t for t in targets() if t.shape_class in classes]
    if not patterns:
        return chosen
    return [t for t in chosen if any(fnmatch.fnmatchcase(t.name, p) or fnmatch.fnmatchcase(t.unit.name, p)
                                     for p in patterns)]


def find(name: str) -> Target:
    for t in targets():
        if t.name == name:
            return t
    raise KeyError(f"no sanitizer target {name!r}; `python -m utils.sanitize --list` lists them")


# ---- the worker: one target's calls ------------------------------------------------------------------

def run_call(unit: Unit, call: Call, device: str = "cuda") -> None:
    """One call on `device`: a launcher of the unit's kernel file, or a solution's step (the CPU runs a
    solution's reference path: how the tests check the calls without a GPU)."""
    args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in call.args()]
    with precision.tf32(call.tf32):
        if unit.is_solution:
            _solution_step(unit, call, args)
        else:
            getattr(build.load_kernel(unit.path.stem, kernels_dir=unit.path.parent), call.export)(*args)
    if device != "cpu":
        torch.cuda.synchronize()


def _solution_step(unit: Unit, call: Call, args: list) -> None:
    # solutions/ sit above the library (docs/ARCHITECTURE.md, "Import direction"): the worker loads the
    # module it is told to run by name, as a test runner loads a test file; nothing here imports it.
    module = importlib.import_module(f"solutions.{unit.path.stem}")
    x, grad = args
    pid = int(unit.path.stem[1:4])
    torch.manual_seed(pid)
    model = module.ModelNew(*get_problem(pid).init_inputs(Dims(*call.shape))).to(x.device)
    _, frozen, training = STEPS
    if call.export == frozen:
        model.freeze()
    if call.export == training:
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
        model(x.requires_grad_()).backward(grad)
        optimizer.step()
    else:
        with torch.no_grad():
            model(x)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m utils.sanitize_targets",
                                 description="Run one sanitizer target's calls (utils/sanitize.py runs this under compute-sanitizer).")
    ap.add_argument("target", help="a target's name, e.g. gemm_05_blocktile_2d/reduced")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args(argv)
    target = find(args.target)
    n = len(target.calls)
    print(f"{START} {target.name}: {n} calls", flush=True)
    for i, call in enumerate(target.calls, 1):
        start = time.monotonic()
        run_call(target.unit, call, args.device)
        print(f"{CALL} {i}/{n} {call.label}: {time.monotonic() - start:.2f} s", flush=True)
    print(f"{DONE} {target.name}: {n} calls", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
