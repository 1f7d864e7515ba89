"""The two 3xTF32 splits on inf, NaN, zeros, TF32 values and near-max values, on the CPU: utils/tf32.py's
split_tf32 (rung 10's tc::split_tf32: big rounded to nearest) and utils/ops.py's tf32_residual reference
(common/tf32_operands.cuh's residual: big = the value truncated). Each must keep finite values' split as it
was, and give a three-product GEMM fp32's ±inf and NaN where fp32 has them; the second's stand-in small
part ±2^-126 must not change a finite result through the modeled tensor-core adder."""
import math

import pytest
import torch
import torch.nn.functional as F

from utils import ops, tf32

TINY = 2.0**-126  # float32's smallest normal
NEAR_MAX = 2.0**125


def f32(*values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def word(t: torch.Tensor) -> list[int]:
    return [v & 0xFFFFFFFF for v in t.view(torch.int32).tolist()]


def truncated_split(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The operands' split of common/tf32_operands.cuh: big = t as the tensor cores read it, small = residual."""
    return tf32.to_tf32(t, "truncate"), ops.TF32_RESIDUAL.reference(t.reshape(1, -1)).view_as(t)


def test_split_tf32_keeps_finite_values_as_they_were():
    g = torch.Generator().manual_seed(4)
    t = torch.cat([torch.randn(10_000, generator=g) * 10.0 ** torch.randint(-30, 30, (10_000,), generator=g),
                   f32(0.0, -0.0, 1.0, -1.5, NEAR_MAX, -NEAR_MAX, 3.3e38, 1e-38)])
    big, small = tf32.split_tf32(t)
    want_big = tf32.to_tf32(t)
    assert word(big) == word(want_big) and word(small) == word(tf32.to_tf32(t - want_big))


def test_split_tf32_puts_inf_and_nan_in_the_small_part_over_a_tiny_big_part():
    big, small = tf32.split_tf32(f32(math.inf, -math.inf, math.nan, 1.0, -1.5, 0.0, -0.0, NEAR_MAX))
    assert big[:2].tolist() == [TINY, -TINY] and abs(big[2].item()) == TINY
    assert small[:2].tolist() == [math.inf, -math.inf] and math.isnan(small[2].item())
    # a TF32 value (1.0, -1.5, 2^125) is its own big part, with a small part of 0; zeros keep their sign
    assert big[3:].tolist() == [1.0, -1.5, 0.0, -0.0, NEAR_MAX] and small[3:].tolist() == [0.0] * 5
    assert word(big[5:7]) == [0, 0x80000000]


def test_the_residual_is_never_0_for_a_nonzero_value_and_has_its_sign():
    values = f32(math.inf, -math.inf, math.nan, 1.0, -1.5, NEAR_MAX, -NEAR_MAX, 0.0, -0.0,
                 1 + 3 * 2**-12, -(1 + 2**-20))
    small = ops.TF32_RESIDUAL.reference(values.view(1, -1)).view(-1)
    assert small[:2].tolist() == [TINY, -TINY] and abs(small[2].item()) == TINY
    assert small[3:7].tolist() == [TINY, -TINY, TINY, -TINY]  # TF32 values: the stand-in, of their sign
    assert word(small[7:9]) == [0, 0]  # ±0: 0, as before (inf·0 is NaN in fp32 too)
    assert small[9:].tolist() == [3 * 2**-12, -(2**-20)]  # the low 13 bits, rounded to the nearest TF32


def test_the_residual_of_ordinary_values_is_unchanged():
    g = torch.Generator().manual_seed(5)
    w = torch.randn(64, 512, generator=g) * 10.0 ** torch.randint(-30, 30, (64, 512), generator=g)
    w[:, ::7] = tf32.to_tf32(w[:, ::7])  # TF32 values among them
    small = ops.TF32_RESIDUAL.reference(w)
    rest = tf32.to_tf32(w - tf32.to_tf32(w, "truncate"))  # the kernel's rna(w - trunc(w)), another way
    exact = rest == 0
    assert exact[:, ::7].all() and not exact[:, 1::7].any()
    assert torch.equal(small[~exact], rest[~exact])
    assert torch.equal(small[exact], torch.copysign(torch.full_like(w, TINY), w)[exact])
    assert torch.equal(torch.sign(small), torch.sign(w))


def _three_products(xp, wp) -> torch.Tensor:
    """xs·wb + xb·ws + xb·wb in float64 (each product of TF32 values exact, as in the tensor core)."""
    (xb, xs), (wb, ws) = [(b.double(), s.double()) for b, s in (xp, wp)]
    return xs @ wb.T + xb @ ws.T + xb @ wb.T


@pytest.mark.parametrize("split", [tf32.split_tf32, truncated_split], ids=["rounded", "truncated"])
def test_a_split_gemm_has_fp32s_inf_and_nan(split):
    """x with ±inf and NaN, w with TF32 values (small part 0 before the fix), zeros and an inf: NaN, +inf
    and -inf where fp32's x @ w.T has them (inf·0 = NaN there too), the rest within the split's error."""
    g = torch.Generator().manual_seed(6)
    x, w = torch.randn(6, 64, generator=g), (torch.rand(67, 64, generator=g) * 2 - 1) / 8
    w[::3] = tf32.to_tf32(w[::3])  # rows of TF32 values: against x's inf, inf·0 before the fix
    w[5, 0], w[7, 0] = 0.0, -0.0  # inf·0: NaN in fp32
    w[11, 9], w[13, 10] = math.inf, -math.inf  # inf·inf: ±inf in fp32
    x[0, 0], x[1, 9], x[2, 10], x[3, 3], x[4, 9] = math.inf, -math.inf, math.inf, math.nan, 0.0
    want = F.linear(x.double(), w.double())
    got = _three_products(split(x), split(w))
    for mask in (torch.isnan, torch.isposinf, torch.isneginf):
        assert torch.equal(mask(got), mask(want)), f"{mask.__name__}: {int(mask(got).sum())}, {int(mask(want).sum())}"
    finite = torch.isfinite(want)
    assert finite.sum() > 100 and torch.allclose(got[finite], want[finite], rtol=1e-5, atol=1e-6)


def test_the_stand_in_small_part_leaves_finite_results_bit_for_bit_on_the_modeled_adder():
    """Through utils/tf32's model of the tensor core's adder, the truncated split with the ±2^-126 stand-in
    gives the same bits as with small parts of 0 on TF32 values (as before the fix): mixed signs, zeros,
    ordinary values among them, with and without promotion. A stand-in of 2^-12 |v| would show."""
    g = torch.Generator().manual_seed(7)
    x = torch.randint(-8, 9, (300, 256), generator=g).float() * 2.0 ** torch.randint(-3, 4, (300, 256), generator=g)
    w = torch.randint(-8, 9, (300, 256), generator=g).float() / 8
    x[::2, ::5] = torch.randn(150, 52, generator=g)  # some values that are not TF32 values

    def split_with(stand_in):
        def split(t):
            big, small = truncated_split(t)
            return big, torch.where(small.abs() == TINY, stand_in(t), small)
        return split

    before = split_with(torch.zeros_like)
    assert (truncated_split(w)[1].abs() == TINY).float().mean() > 0.8  # the stand-in is what most see here
    for promote in (0, 64):
        want = tf32.tensor_core_dot(x, w, promote=promote, split=before)
        assert torch.equal(tf32.tensor_core_dot(x, w, promote=promote, split=truncated_split), want)
    larger = tf32.tensor_core_dot(x, w, split=split_with(lambda t: t * 2.0**-12))
    assert not torch.equal(larger, tf32.tensor_core_dot(x, w, split=before))
