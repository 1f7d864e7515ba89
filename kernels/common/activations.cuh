// kernels/common/activations.cuh: the problems' activations, exactly as PyTorch computes them,
// and the per-element operations built from them (kernels/activations.cu, kernels/groupnorm.cu;
// notebooks/05_fused_activations.ipynb and 06).
//
// "Exactly" means: the function PyTorch computes, in float32, agreeing with PyTorch's CUDA
// kernels to a few units in the last place everywhere (bit for bit where the formula is the
// same), and in the same special values at +-inf, NaN and where a textbook formula overflows or
// loses all its digits:
//
//   hardtanh(x)   clamp to [min_val, max_val]; nn.Hardtanh() is [-1, 1] (seed 000 assumed
//                 [0, 2], seed 001 [0, 20]). NaN stays NaN, as torch.clamp keeps it.
//   mish(x)       x * tanh(softplus(x)), softplus(x) = log(1 + e^x). PyTorch's CUDA kernel
//                 evaluates x * tanh(log1p(exp(x))): three transcendental calls, ~50 instructions.
//                 The naive log(1 + exp(x)) fails at both ends: below x ~ -17, 1 + e^x rounds to 1
//                 and log gives 0, every digit lost (log1p keeps them); above x ~ 88, exp
//                 overflows (harmless there only because tanh(inf) = 1).
//                 Here: tanh(log(1 + e)) = ((1 + e)^2 - 1) / ((1 + e)^2 + 1) = n / (n + 2) with
//                 e = e^x and n = e (e + 2): the same function, one exp and one division, with no
//                 cancellation anywhere (for x -> -inf, n ~ 2e and n / (n + 2) ~ e, as it
//                 should). For x > 20 it returns x: F.mish has no threshold there (unlike
//                 F.softplus), but its tanh of the softplus rounds to 1.0f, so it returns x too;
//                 and n would overflow past x ~ 44. Special values as torch: +inf
//                 -> inf, -inf -> -inf * 0 = NaN, NaN -> NaN. Max relative error against float64
//                 over [-87, 120]: 2.9e-7, against 2.2e-7 for the three-call form (float32 on a
//                 CPU); the tests hold it to 1e-6 of F.mish on CUDA, extremes included. Why
//                 bother: with the three-call form, problem 94's fused GroupNorm is bound by
//                 instruction issue, not memory (kernels/groupnorm.cu; the measurements are in
//                 experiments/memory_bound/README.md).
//   sigmoid(x)    1 / (1 + exp(-x)), torch's formula: exp(-x) overflows to inf for x < -88,
//                 and 1 / inf = 0, the right limit, so no special case is needed.
//   leaky_relu    x > 0 ? x : x * slope, torch's comparison (NaN goes to x * slope, NaN).
//
// An operation is a small struct with `float f(float v, float b) const`: v the element, b its
// column's bias (or 0 for operations with no bias, kHasBias = false). Kernels call it through
// apply1 / apply4, which fetch the bias of channel c (one 16-byte load for four channels).

#pragma once

#include <cstdint>

#include "common/elementwise.cuh"

__device__ __forceinline__ float hardtanh_f(float v, float lo, float hi) {
  // Comparisons, not fminf/fmaxf: those return the other operand when one is NaN.
  return v < lo ? lo : (v > hi ? hi : v);
}

__device__ __forceinline__ float mish_f(float v) {
  if (v > 20.0f) return v;  // tanh(softplus(v)) == 1.0f exactly
  const float e = expf(v);
  const float n = e * (e + 2.0f);
  return v * (n / (n + 2.0f));  // v * tanh(log1p(e))
}

// mish_f with the hardware's approximate exp (__expf: ex2.approx) and division (__fdividef:
// rcp.approx): about 8 instructions where mish_f takes about 30 (expf's range reduction, IEEE
// division's special cases). __expf is off by at most 2 + 1.2|v| ulp, __fdividef by 2: at
// |v| <= 1 (nn.Hardtanh()'s range, problem 94) a few ulp, at |v| = 20 up to ~3e-6 relative. Not
// close enough for notebook 05's standalone Mish, held to 1e-6 of F.mish; used where the values
// go straight into a GroupNorm, whose tolerance is 1e-4 (kernels/groupnorm.cu, problem 94).
// Special values as mish_f: v > 20 -> v (+inf included: inf * NaN is never returned), -inf -> NaN,
// NaN -> NaN; below v ~ -87 __expf flushes e^v to 0 and the result is -0 instead of a subnormal.
__device__ __forceinline__ float mish_fast_f(float v) {
  const float e = __expf(v);
  const float n = e * (e + 2.0f);
  const float m = v * __fdividef(n, n + 2.0f);
  return v > 20.0f ? v : m;
}

__device__ __forceinline__ float sigmoid_f(float v) { return 1.0f / (1.0f + expf(-v)); }

__device__ __forceinline__ float leaky_relu_f(float v, float slope) { return v > 0.0f ? v : v * slope; }

// ---- operations ------------------------------------------------------------------------------

// y = v: GroupNorm with nothing before or after it.
struct Identity {
  static constexpr bool kHasBias = false;
  const float* bias = nullptr;
  __device__ float f(float v, float) const { return v; }
};

// y = mish(v): the activation alone, for checking it on extreme inputs.
struct MishOp {
  static constexpr bool kHasBias = false;
  const float* bias = nullptr;
  __device__ float f(float v, float) const { return mish_f(v); }
};

// Problem 94 after its GEMM: y = mish(hardtanh(v + bias[col])).
struct BiasHardtanhMish {
  static constexpr bool kHasBias = true;
  const float* bias;
  float lo, hi;
  __device__ float f(float v, float b) const { return mish_f(hardtanh_f(v + b, lo, hi)); }
};

// The same with mish_fast_f: problem 94's fused GroupNorm, which is bound by instruction issue.
struct BiasHardtanhMishFast {
  static constexpr bool kHasBias = true;
  const float* bias;
  float lo, hi;
  __device__ float f(float v, float b) const { return mish_fast_f(hardtanh_f(v + b, lo, hi)); }
};

// Problem 37 after its GEMM: y = v * sigmoid(v) + bias[col]. The model writes
// torch.sigmoid(x) * x, the same product (float multiplication commutes exactly). __fmul_rn and
// __fadd_rn round the product before the sum, as eager's two kernels do; a plain `s * v + b`
// would let the compiler contract them into one fma (rounded once: a last-bit difference).
struct SwishBias {
  static constexpr bool kHasBias = true;
  const float* bias;
  __device__ float f(float v, float b) const { return __fadd_rn(__fmul_rn(sigmoid_f(v), v), b); }
};

// The same with the hardware's approximate exp and reciprocal (__expf, __fdividef: a few ulp),
// for the GEMM's epilogue (common/gemm_epilogue_groupnorm.cuh), where only 8 warps per SM run
// the tail's arithmetic and nothing overlaps it: IEEE expf and division cost about 4x the
// instructions. The values go straight into a GroupNorm, held to 1e-4. For v < -88, __expf(-v)
// is inf and __fdividef(1, inf) is 0, the right limit, as in sigmoid_f.
struct SwishBiasFast {
  static constexpr bool kHasBias = true;
  const float* bias;
  __device__ float f(float v, float b) const { return __fadd_rn(__fmul_rn(__fdividef(1.0f, 1.0f + __expf(-v)), v), b); }
};

// Problem 62 after its GroupNorm: y = leaky_relu(v); y + y. Written as the sum the model does;
// y + y == 2 * y exactly in binary floating point (doubling only changes the exponent), so
// either form gives the same bits, overflow to inf included.
struct LeakyReluX2 {
  static constexpr bool kHasBias = false;
  const float* bias = nullptr;
  float slope;
  __device__ float f(float v, float) const {
    const float y = leaky_relu_f(v, slope);
    return y + y;
  }
};

// op at one element of channel c.
template <class Op>
__device__ __forceinline__ float apply1(const Op& op, float v, int64_t c) {
  if constexpr (Op::kHasBias) {
    return op.f(v, op.bias[c]);
  } else {
    return op.f(v, 0.0f);
  }
}

// op at four consecutive elements of channels c .. c + 3 (c a multiple of 4, bias 16-byte
// aligned: the callers check both).
template <class Op>
__device__ __forceinline__ float4 apply4(const Op& op, float4 v, int64_t c) {
  float4 b = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if constexpr (Op::kHasBias) {
    b = load4(op.bias + c);
  }
  return make_float4(op.f(v.x, b.x), op.f(v.y, b.y), op.f(v.z, b.z), op.f(v.w, b.w));
}
