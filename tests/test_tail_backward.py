"""kernels/tail_backward.cu: the backward of each problem's tail (everything after the GEMM) against
float64 autograd of the reference tail. Every output of every launcher, at the problems' group
widths on row and group counts that are multiples of nothing, at odd and large groups (the general
path), with saturating inputs, strided and expanded gradients, M = 0 and M = 1, 75's ties and NaN;
every element checked as written, the same bits on a second run, bad input refused with a message
that names the problem."""
import pytest
import torch
import torch.nn.functional as F

from utils import build

from kernel_tests import kernel_file_tests

KERNEL = "tail_backward"
EXPORTS = {"bias_hardtanh_mish_group_norm_backward", "swish_bias_group_norm_backward",
           "group_norm_leaky_relu_x2_backward", "group_norm_min_bias_backward"}
# Each launcher's schema as torch.library will register it: arguments in order, and the tuple it returns.
SCHEMAS = {
    "bias_hardtanh_mish_group_norm_backward":
        "(Tensor grad, Tensor y, Tensor bias, float min_val, float max_val, int num_groups, Tensor gamma, "
        "Tensor beta, float eps) -> (Tensor, Tensor, Tensor, Tensor)",
    "swish_bias_group_norm_backward":
        "(Tensor grad, Tensor y, Tensor bias, int num_groups, Tensor gamma, Tensor beta, float eps) "
        "-> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    "group_norm_leaky_relu_x2_backward":
        "(Tensor grad, Tensor y, int num_groups, Tensor gamma, Tensor beta, float eps, float negative_slope) "
        "-> (Tensor, Tensor, Tensor, Tensor)",
    "group_norm_min_bias_backward":
        "(Tensor grad, Tensor y, int num_groups, Tensor gamma, Tensor beta, float eps) "
        "-> (Tensor, Tensor, Tensor, Tensor, Tensor)",
}
OUTPUTS = {94: ("dy", "dbias", "dgamma", "dbeta"), 37: ("dy", "dbias", "dgamma", "dbeta", "dlinear_bias"),
           62: ("dy", "dgamma", "dbeta", "dlinear_bias"), 75: ("dy", "dgamma", "dbeta", "dbias", "dlinear_bias")}
EPS = 1e-5
LO, HI = -1.0, 1.0  # nn.Hardtanh()'s range (problem 94)
SLOPE = 0.01        # problem 62's LeakyReLU
# How close float32 must come to the float64 gradients: TOL of each output's scale (its largest
# finite magnitude, at least 1: the inputs are O(1)), plus TOL relative. One float32 rounding is
# 6e-8 relative; each output is a short chain of float32 operations, and a float32 emulation of the
# kernels' arithmetic came within 1e-7 to 6e-7 of the scale of float64 autograd at these shapes
# (the column sums included, each adding ~1000 rows). 1e-4 leaves two orders of magnitude above
# that, while a wrong formula (a sign, a mean, a missing term, a row or column skipped) is off by
# a good fraction of the scale.
TOL = 1e-4
# (M, C, G) at the problems' group widths D = C / G: the problem's C and G with 1030 rows; 37
# groups (a block's columns are 256: the last tile is partial) with 37 rows; a single row.
SHAPES = {
    94: [(1030, 8192, 256), (37, 1184, 37), (1, 8192, 256)],
    37: [(1030, 4096, 64), (37, 832, 13), (1, 4096, 64)],
    62: [(1030, 8192, 512), (37, 656, 41), (1, 8192, 512)],
    75: [(1030, 8192, 512), (37, 656, 41), (1, 8192, 512)],
}
# Other group widths: D = 23 (not whole float4s: the general path), D = 12 and 20 (team lanes
# holding unequal shares of a group), D = 260 (over the 256 a team holds: general path), one group
# of 20000 channels (the general path's statistics in chunks), D = 1.
ODD = [(37, 115, 5), (7, 120, 10), (9, 80, 4), (9, 1040, 4), (3, 20000, 1), (5, 7, 7)]
FULL = {94: (1024, 8192, 256), 37: (32768, 4096, 64), 62: (1024, 8192, 512), 75: (1024, 8192, 512)}
PROBLEMS = sorted(OUTPUTS)

kernels, test_exports, test_compiles = kernel_file_tests(KERNEL, EXPORTS)


def test_signatures():
    """The launchers' arguments (names, types, order) and how many tensors each returns."""
    schemas = {e.name: build.op_schema(e) for e in build.exported_functions(build.kernel_source(KERNEL))}
    assert schemas == SCHEMAS


# ---- inputs ------------------------------------------------------------------------------------

def affine(C, g):
    """GroupNorm weight and bias far from the defaults (γ = 1, β = 0 hide an ignored affine):
    |γ| in [0.5, 1.5] with random signs, β ~ N(0, 0.5²)."""
    sign = torch.randint(0, 2, (C,), generator=g) * 2 - 1
    return (torch.rand(C, generator=g) + 0.5) * sign, 0.5 * torch.randn(C, generator=g)


def normalised(t, G):
    return F.group_norm(t["y"].double(), G, t["gamma"].double(), t["beta"].double(), EPS)


def redraw(t, G, g, scale, rows_or_groups):
    """Draw again the elements of y where the (M, C) mask says so."""
    t["y"] = torch.where(rows_or_groups, torch.randn(t["y"].shape, generator=g) * scale, t["y"])


def away_from_kink(t, G, g, scale, band=1e-4):
    """No normalised value within `band` of 0, LeakyReLU's kink (62): there float32 and float64 may
    take different branches, and the gradient jumps by a factor 1 / slope, which no tolerance
    covers. Groups that come that close are drawn again."""
    M, C = t["y"].shape
    for _ in range(100):
        close = (normalised(t, G).abs() < band).view(M, G, C // G).any(-1)
        if not close.any():
            return
        redraw(t, G, g, scale, close.repeat_interleave(C // G, dim=1))
    raise AssertionError("could not draw y away from the kink")


def distinct_minima(t, G, g, scale, keep=(), gap=1e-4):
    """Each row's smallest normalised value at least `gap` below the next (75), except the rows in
    `keep`: where two values are closer, float32 and float64 may pick different minima."""
    M, C = t["y"].shape
    if C < 2:
        return
    for _ in range(100):
        two = normalised(t, G).topk(2, dim=1, largest=False).values
        close = two[:, 1] - two[:, 0] < gap
        close[list(keep)] = False
        if not close.any():
            return
        redraw(t, G, g, scale, close.view(M, 1).expand(M, C))
    raise AssertionError("could not draw rows with distinct minima")


def inputs(problem, M, C, G, *, seed=0, scale=2.0):
    """The launcher's tensors on the CPU: y (M, C) ~ N(0, scale²) (never zero), random γ, β, biases
    and gradient."""
    g = torch.Generator().manual_seed(seed)
    t = {"y": torch.randn(M, C, generator=g) * scale}
    t["gamma"], t["beta"] = affine(C, g)
    if problem in (94, 37):
        t["bias"] = 0.5 * torch.randn(C, generator=g)
    t["grad"] = torch.randn((1, C, M, 1) if problem == 75 else (M, C), generator=g)
    if problem == 62:
        away_from_kink(t, G, g, scale)
    if problem == 75:
        distinct_minima(t, G, g, scale)
    return t


def to(t, device):
    return {k: v.to(device) for k, v in t.items()}


def launch(kernels, problem, t, G):
    if problem == 94:
        return kernels.bias_hardtanh_mish_group_norm_backward(t["grad"], t["y"], t["bias"], LO, HI, G, t["gamma"],
                                                              t["beta"], EPS)
    if problem == 37:
        return kernels.swish_bias_group_norm_backward(t["grad"], t["y"], t["bias"], G, t["gamma"], t["beta"], EPS)
    if problem == 62:
        return kernels.group_norm_leaky_relu_x2_backward(t["grad"], t["y"], G, t["gamma"], t["beta"], EPS, SLOPE)
    return kernels.group_norm_min_bias_backward(t["grad"], t["y"], G, t["gamma"], t["beta"], EPS)


def reference(problem, t, G):
    """float64 autograd of the reference tail, on t's device; the gradients in the launcher's order."""
    def leaf(x):
        return x.double().detach().requires_grad_()

    grad = t["grad"].double()
    gamma, beta = leaf(t["gamma"]), leaf(t["beta"])
    if problem == 94:
        # From z = y + bias as float32 rounds it, the kernel's own z: Hardtanh's cut (z <= -1 or
        # z >= 1) then falls at the same elements. dy = dz and dbias = its column sum.
        z = leaf(t["y"] + t["bias"])
        F.group_norm(F.mish(F.hardtanh(z, LO, HI)), G, gamma, beta, EPS).backward(grad)
        return z.grad, z.grad.sum(0), gamma.grad, beta.grad
    y = leaf(t["y"])
    if problem == 37:
        bias = leaf(t["bias"])
        F.group_norm(torch.sigmoid(y) * y + bias, G, gamma, beta, EPS).backward(grad)
        return y.grad, bias.grad, gamma.grad, beta.grad, y.grad.sum(0)
    if problem == 62:
        out = F.leaky_relu(F.group_norm(y, G, gamma, beta, EPS), SLOPE)
        (out + out).backward(grad)
        return y.grad, gamma.grad, beta.grad, y.grad.sum(0)
    bias = leaf(torch.randn(1, y.shape[1], 1, 1, device=y.device))  # its value changes no gradient
    (torch.min(F.group_norm(y, G, gamma, beta, EPS), dim=1, keepdim=True)[0] + bias).backward(grad)
    return y.grad, gamma.grad, beta.grad, bias.grad, y.grad.sum(0)


def assert_matches(problem, outs, refs, *, equal_nan=False, what=""):
    assert isinstance(outs, tuple) and len(outs) == len(OUTPUTS[problem])
    for name, out, ref in zip(OUTPUTS[problem], outs, refs):
        ref = ref.to(out.device)
        assert out.dtype == torch.float32 and out.is_contiguous(), name
        finite = ref[ref.isfinite()]
        scale = max(finite.abs().max().item() if finite.numel() else 0.0, 1.0)
        torch.testing.assert_close(out.double(), ref, rtol=TOL, atol=TOL * scale, equal_nan=equal_nan,
                                   msg=lambda m, name=name: f"{problem} {what} {name}: {m}")


def poisoned(call):
    """call() after NaN was left in the memory its outputs will get (the caching allocator hands
    freed blocks of the same size back first): an element the launcher never writes stays NaN."""
    outs = call()
    for out in outs:
        out.fill_(float("nan"))
    del outs, out
    return call()


# ---- against float64 autograd --------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("problem, shape", [(p, s) for p in PROBLEMS for s in SHAPES[p] + ODD],
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v))
def test_every_output_against_float64(kernels, cuda, problem, shape):
    M, C, G = shape
    t = to(inputs(problem, M, C, G, seed=M + C), cuda)
    outs = poisoned(lambda: launch(kernels, problem, t, G))  # every element checked as written: no NaN expected
    assert_matches(problem, outs, reference(problem, t, G), what=str(shape))


@pytest.mark.gpu
@pytest.mark.parametrize("problem", [94, 37])
def test_saturating_inputs(kernels, cuda, problem):
    """|y| up to ~100: Hardtanh cuts most elements (their dy is exactly 0 and whole groups become
    constant, normalised by eps alone), Mish and sigmoid saturate."""
    M, C, G = SHAPES[problem][0]
    t = to(inputs(problem, M, C, G, seed=problem, scale=30.0), cuda)
    outs = poisoned(lambda: launch(kernels, problem, t, G))
    assert_matches(problem, outs, reference(problem, t, G), what="|y| ~ 30")
    if problem == 94:
        cut = ((t["y"] + t["bias"]) <= LO) | ((t["y"] + t["bias"]) >= HI)
        assert cut.float().mean() > 0.9 and (outs[0][cut] == 0).all()


@pytest.mark.gpu
@pytest.mark.parametrize("problem", PROBLEMS)
def test_unaligned_views_take_the_general_path(kernels, cuda, problem):
    """y, grad and the parameters start 4 bytes into their storage: no float4 access allowed."""
    M, C, G = SHAPES[problem][1]

    def shifted(x):
        buf = torch.empty(x.numel() + 1, device=cuda)
        view = buf[1:].view(x.shape)
        view.copy_(x)
        return view

    t = {k: shifted(v) for k, v in to(inputs(problem, M, C, G, seed=5), cuda).items()}
    assert all(v.data_ptr() % 16 for v in t.values())
    assert_matches(problem, launch(kernels, problem, t, G), reference(problem, t, G), what="unaligned")


@pytest.mark.gpu
@pytest.mark.parametrize("problem", PROBLEMS)
@pytest.mark.parametrize("layout", ["transposed", "expanded", "scalar"])
def test_any_gradient_layout(kernels, cuda, problem, layout):
    """autograd may hand a strided gradient, or an expanded one (out.sum()'s gradient is a single
    value broadcast with stride 0): the launchers take any layout."""
    M, C, G = 37, SHAPES[problem][1][1], SHAPES[problem][1][2]
    t = to(inputs(problem, M, C, G, seed=7), cuda)
    shape = t["grad"].shape
    if layout == "transposed":
        grad = t["grad"].flatten().flip(0).view(shape[::-1]).permute(*reversed(range(len(shape))))
    elif layout == "expanded":  # one value per channel, the same for every row
        grad = t["grad"].select(-2 if problem == 75 else 0, 0).unsqueeze(-2 if problem == 75 else 0).expand(shape)
    else:
        grad = torch.tensor(0.75, device=cuda).expand(shape)
    assert grad.shape == shape and not grad.is_contiguous()
    t["grad"] = grad
    assert_matches(problem, launch(kernels, problem, t, G), reference(problem, t, G), what=layout)


@pytest.mark.gpu
@pytest.mark.parametrize("problem", PROBLEMS)
def test_no_rows(kernels, cuda, problem):
    """M = 0: an empty dy and zero parameter gradients, as autograd gives."""
    C, G = 64, 4
    t = to(inputs(problem, 0, C, G), cuda)
    outs = launch(kernels, problem, t, G)
    assert outs[0].shape == (0, C)
    for name, out in zip(OUTPUTS[problem][1:], outs[1:]):
        assert out.shape == ((1, C, 1, 1) if (problem, name) == (75, "dbias") else (C,)), name
        assert (out == 0).all(), name


@pytest.mark.gpu
@pytest.mark.parametrize("problem", PROBLEMS)
def test_the_same_bits_every_run(kernels, cuda, problem):
    """The column sums are added in a fixed order (per-block partials, then a second pass), never
    with float atomics: two runs give the same bits."""
    M, C, G = SHAPES[problem][0]
    t = to(inputs(problem, M, C, G, seed=11), cuda)
    first = launch(kernels, problem, t, G)
    second = poisoned(lambda: launch(kernels, problem, t, G))
    for name, a, b in zip(OUTPUTS[problem], first, second):
        assert torch.equal(a, b), name


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(37, 656, 41), (37, 115, 5)], ids=lambda s: "x".join(map(str, s)))
def test_75_ties_and_nan(kernels, cuda, shape):
    """torch.min(dim=1) takes the first of equal minima, and a NaN as the minimum (the first NaN's
    index). Row 0: two groups alike, their common minimum the row's; row 1: two equal minima in one
    group; row 2: a NaN in one group (that group's dy, dgamma and dlinear_bias are NaN, as in
    PyTorch); row 3: NaN in two groups (the second's dy is NaN too, though no gradient reaches it).
    The reference runs on the CPU, whose torch.min is documented to take the first."""
    M, C, G = shape
    D = C // G
    g = torch.Generator().manual_seed(75)
    t = inputs(75, M, C, G, seed=75)
    y, gamma, beta = t["y"], t["gamma"], t["beta"]
    gamma[0], gamma[1], gamma[2 * D] = 3.0, 3.0, 3.0  # minima far below the rest of their rows
    beta[0], beta[1], beta[2 * D] = 0.0, 0.0, 0.0
    y[0, :D] = torch.randn(D, generator=g)
    y[0, 0] = -50.0
    y[0, 2 * D:3 * D] = y[0, :D]  # group 2 repeats group 0: channels 0 and 2D normalise alike
    y[1, :D] = torch.randn(D, generator=g)
    y[1, 0] = y[1, 1] = -50.0  # equal values, equal parameters (channels 0 and 1): equal minima
    y[2, D + 1] = float("nan")
    y[3, D + 1] = y[3, 2 * D + 2] = float("nan")
    distinct_minima(t, G, g, 2.0, keep=(0, 1, 2, 3))
    n = normalised(t, G)
    index = torch.min(n, dim=1)[1]
    assert index[:4].tolist() == [0, 0, D, D], "the rows are built as the docstring says"
    cuda_t = to(t, cuda)
    outs = poisoned(lambda: launch(kernels, 75, cuda_t, G))
    assert_matches(75, outs, reference(75, t, G), equal_nan=True, what="ties and NaN")
    assert outs[0][2, D:2 * D].isnan().all() and not outs[0][2, :D].isnan().any()
    assert outs[0][3, 2 * D:3 * D].isnan().all()


@pytest.mark.gpu
@pytest.mark.large
@pytest.mark.parametrize("problem", PROBLEMS)
def test_full_size(kernels, cuda, problem):
    M, C, G = FULL[problem]
    t = to(inputs(problem, M, C, G, seed=problem), cuda)
    outs = poisoned(lambda: launch(kernels, problem, t, G))
    assert_matches(problem, outs, reference(problem, t, G), what="full size")


# ---- bad input -----------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("problem", PROBLEMS)
def test_rejects_bad_input(kernels, cuda, problem):
    M, C, G = 4, 12, 3
    good = to(inputs(problem, M, C, G), cuda)
    grad_shape = r"grad must have the output's shape \[1, 12, 4, 1\]" if problem == 75 else "same shape"
    # y, gamma, beta and num_groups go through the forward's checks (common/groupnorm.cuh), naming y.
    bad = [
        ({"y": good["y"].double()}, "y must be float32"),
        ({"grad": good["grad"].double()}, "grad must be float32"),
        ({"gamma": good["gamma"].double()}, "gamma must be float32"),
        ({"y": good["y"].cpu()}, "y must be a CUDA tensor"),
        ({"grad": good["grad"].cpu()}, "grad must be a CUDA tensor"),
        ({"beta": good["beta"].cpu()}, "beta must be a CUDA tensor"),
        ({"y": torch.randn(C, M, device=cuda).t()}, "y must be contiguous"),
        ({"y": good["y"].view(M, 3, 4)}, "y must be 2-D"),
        ({"gamma": good["gamma"][:11]}, r"gamma .*must have shape \[12\].*\[11\]"),
        ({"beta": good["beta"].view(1, C)}, r"beta .*must have shape \[12\].*\[1, 12\]"),
        ({"grad": torch.randn(M + 1, C, device=cuda)}, grad_shape),
        ({"num_groups": 5}, "C = 12 must be divisible by num_groups = 5"),
        ({"num_groups": 0}, "num_groups must be positive"),
        ({"eps": -1.0}, "eps must be non-negative"),
    ]
    if problem in (94, 37):
        bad += [({"bias": good["bias"].double()}, "bias must be float32"),
                ({"bias": good["bias"].cpu()}, "bias must be a CUDA tensor"),
                ({"bias": good["bias"][:11]}, r"bias must have shape \[12\].*\[11\]")]
    if problem == 94:
        bad += [({"min_val": 1.0, "max_val": -1.0}, "min_val <= max_val")]
    for change, message in bad:
        t = {**good, **{k: v for k, v in change.items() if torch.is_tensor(v)}}
        G_ = change.get("num_groups", G)
        eps = change.get("eps", EPS)
        lo, hi = change.get("min_val", LO), change.get("max_val", HI)
        calls = {
            94: lambda: kernels.bias_hardtanh_mish_group_norm_backward(t["grad"], t["y"], t["bias"], lo, hi, G_,
                                                                       t["gamma"], t["beta"], eps),
            37: lambda: kernels.swish_bias_group_norm_backward(t["grad"], t["y"], t["bias"], G_, t["gamma"],
                                                               t["beta"], eps),
            62: lambda: kernels.group_norm_leaky_relu_x2_backward(t["grad"], t["y"], G_, t["gamma"], t["beta"], eps,
                                                                  SLOPE),
            75: lambda: kernels.group_norm_min_bias_backward(t["grad"], t["y"], G_, t["gamma"], t["beta"], eps),
        }
        with pytest.raises(RuntimeError, match=message):
            calls[problem]()


# ---- a model in bf16 or fp16 (94, 37, 62) -------------------------------------------------------------
#
# grad, y and dy in the model's dtype, the parameters and the column sums float32: the kernels read the 16-bit
# values, compute in float and round dy once. float holds every bf16 and fp16 value, so the result must be the
# float32 launcher's on the values converted, dy then rounded: the same bits, element by element. 75 takes
# float32 only (WholeModel converts around it).

HALF16 = [torch.bfloat16, torch.float16]
HALF16_IDS = ["bf16", "fp16"]
TAKES_HALF16 = [94, 37, 62]


def half16_inputs(problem, M, C, G, dtype, *, seed=0):
    """inputs() with grad and y rounded to dtype (the parameters stay float32)."""
    t = inputs(problem, M, C, G, seed=seed)
    return {k: v.to(dtype) if k in ("grad", "y") else v for k, v in t.items()}


def float32_then_rounded(kernels, problem, t, G):
    """The float32 launcher on t's 16-bit grad and y converted, dy rounded back to their dtype."""
    dy, *sums = launch(kernels, problem, {**t, "grad": t["grad"].float(), "y": t["y"].float()}, G)
    return (dy.to(t["y"].dtype), *sums)


def assert_same_bits(problem, outs, want, what=""):
    assert len(outs) == len(want) == len(OUTPUTS[problem])
    for name, out, ref in zip(OUTPUTS[problem], outs, want):
        assert (out.dtype, out.shape) == (ref.dtype, ref.shape), f"{problem} {what} {name}"
        assert out.is_contiguous(), name
        torch.testing.assert_close(out, ref, rtol=0, atol=0, equal_nan=True,
                                   msg=lambda m, name=name: f"{problem} {what} {name}: {m}")


def test_16bit_cpu_op_is_the_float32_math_rounded_once():
    """The registered ops' CPU implementation (the declaration's math) on 16-bit grad and y: dy in their dtype,
    the sums float32, equal to the float32 op on the converted values with dy rounded; what the fake gives."""
    from utils import ops
    G = 4
    for problem, name in ((94, "bias_hardtanh_mish_group_norm_backward"), (37, "swish_bias_group_norm_backward"),
                          (62, "group_norm_leaky_relu_x2_backward")):
        op = ops.BACKWARD[name]
        for dtype in HALF16:
            t = half16_inputs(problem, 7, 128, G, dtype)
            args = {94: lambda t: (t["grad"], t["y"], t["bias"], LO, HI, G, t["gamma"], t["beta"], EPS),
                    37: lambda t: (t["grad"], t["y"], t["bias"], G, t["gamma"], t["beta"], EPS),
                    62: lambda t: (t["grad"], t["y"], G, t["gamma"], t["beta"], EPS, SLOPE)}[problem]
            got = op(*args(t))
            dy, *sums = op(*args({**t, "grad": t["grad"].float(), "y": t["y"].float()}))
            assert_same_bits(problem, got, (dy.to(dtype), *sums), f"cpu {dtype}")
            torch.library.opcheck(op, args(t))


def test_16bit_refused_where_it_does_not_fit():
    """75's op takes float32 only; grad and y must share their 16-bit dtype; the parameters stay float32."""
    from utils import ops
    G = 4
    t = half16_inputs(75, 7, 128, G, torch.bfloat16)
    with pytest.raises(TypeError, match="float32 only: y is torch.bfloat16"):
        ops.BACKWARD["group_norm_min_bias_backward"](t["grad"], t["y"], G, t["gamma"], t["beta"], EPS)
    op = ops.BACKWARD["group_norm_leaky_relu_x2_backward"]
    t = half16_inputs(62, 7, 128, G, torch.bfloat16)
    with pytest.raises(TypeError, match="every tensor must have y's dtype torch.bfloat16, got grad torch.float16"):
        op(t["grad"].half(), t["y"], G, t["gamma"], t["beta"], EPS, SLOPE)
    with pytest.raises(TypeError, match="float32 only: gamma is torch.bfloat16"):
        op(t["grad"], t["y"], G, t["gamma"].bfloat16(), t["beta"], EPS, SLOPE)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", HALF16, ids=HALF16_IDS)
@pytest.mark.parametrize("problem, shape", [(p, s) for p in TAKES_HALF16 for s in SHAPES[p] + ODD],
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v))
def test_16bit_is_the_float32_kernels_bits_rounded_once(kernels, cuda, problem, shape, dtype):
    """Team path (the problems' widths) and general path (odd widths), every output from NaN-poisoned memory."""
    M, C, G = shape
    t = to(half16_inputs(problem, M, C, G, dtype), cuda)
    got = poisoned(lambda: launch(kernels, problem, t, G))
    assert_same_bits(problem, got, float32_then_rounded(kernels, problem, t, G), f"{shape} {dtype}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", HALF16, ids=HALF16_IDS)
@pytest.mark.parametrize("problem", TAKES_HALF16)
def test_16bit_unaligned_and_strided(kernels, cuda, problem, dtype):
    """y one element into its storage (the general path: not 16-byte aligned) and a transposed gradient, against
    the float32 launcher on a y as unaligned (its general path too: the two paths sum in different orders)."""
    M, C, G = 37, 256, 8
    t = to(half16_inputs(problem, M, C, G, dtype), cuda)

    def shifted(v):
        return torch.empty(M * C + 1, dtype=v.dtype, device=cuda)[1:].view(M, C).copy_(v)

    got = launch(kernels, problem, {**t, "y": shifted(t["y"]), "grad": t["grad"].t().contiguous().t()}, G)
    dy, *sums = launch(kernels, problem, {**t, "y": shifted(t["y"].float()), "grad": t["grad"].float()}, G)
    assert_same_bits(problem, got, (dy.to(dtype), *sums))


@pytest.mark.gpu
@pytest.mark.parametrize("problem", TAKES_HALF16)
def test_16bit_rejects_mixed_dtypes(kernels, cuda, problem):
    M, C, G = 4, 12, 3
    t = to(half16_inputs(problem, M, C, G, torch.bfloat16), cuda)
    for change, message in [({"grad": t["grad"].half()}, "grad must have y's dtype BFloat16, got Half"),
                            ({"grad": t["grad"].float()}, "grad must have y's dtype BFloat16, got Float"),
                            ({"gamma": t["gamma"].bfloat16()}, "gamma must be float32"),
                            ({"y": t["y"].cpu()}, "y must be a CUDA tensor")]:
        with pytest.raises(RuntimeError, match=message):
            launch(kernels, problem, {**t, **change}, G)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", HALF16, ids=HALF16_IDS)
@pytest.mark.parametrize("name", ["bias_hardtanh_mish_group_norm_backward", "swish_bias_group_norm_backward",
                                  "group_norm_leaky_relu_x2_backward"])
def test_16bit_opcheck_on_the_gpu(name, dtype, cuda):
    from utils import ops
    problem = {"bias": 94, "swish": 37, "group": 62}[name.split("_")[0]]
    G = 4
    t = to(half16_inputs(problem, 7, 128, G, dtype), cuda)
    args = {94: lambda: (t["grad"], t["y"], t["bias"], LO, HI, G, t["gamma"], t["beta"], EPS),
            37: lambda: (t["grad"], t["y"], t["bias"], G, t["gamma"], t["beta"], EPS),
            62: lambda: (t["grad"], t["y"], G, t["gamma"], t["beta"], EPS, SLOPE)}[problem]()
    torch.library.opcheck(ops.BACKWARD[name], args)
