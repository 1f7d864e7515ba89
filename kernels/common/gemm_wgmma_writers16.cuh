// kernels/common/gemm_wgmma_writers16.cuh: the wgmma GEMM's output in bf16 or fp16 (common/gemm_wgmma_writers.cuh
// for fp32): the values rounded to nearest even as they are stored, after the bias. Kept apart so that only the
// launchers that take 16-bit tensors include it (rung 11, the whole models of fused_gemm_groupnorm.cu).
//
//   OutputElement<__nv_bfloat16>, <__half>   a value rounded to the 16-bit type; a pair, packed in one word;
//   Quad16Writer<T>                          the pairs of two n8 blocks exchanged within each quad, so that a
//                                            warp's store writes whole 32-byte sectors;
//   WriterFor<T>, ParamElement<T>            the writer of a 16-bit output, a 16-bit parameter read as a float
//                                            (a whole-model epilogue of a model in bf16 or fp16);
//   Store16Epilogue<T>                       StoreEpilogue into a 16-bit output;
//   OperandFor<T>, with_half16(dtype, f)     the wgmma operand of a 16-bit element; f(that operand, the element)
//                                            for a tensor's 16-bit dtype.
//
// Why the exchange. DirectWriterOf<T> stores a lane's pair from registers: 8 bytes in fp32, so one warp store
// of an n8 block writes 32 bytes (a sector) of each of 8 rows. In 16 bits the pair is 4 bytes and the same
// store writes half a sector of each row: twice the store instructions per byte, and half-sector writes that
// the L2 merges. Measured on an H200 at 32768 x 4096 x 1024 in bf16: 0.558 ms against 0.483 ms for the fp32
// output (twice the bytes); with the exchange, 0.469 ms (experiments/bf16/README.md, whose runs these are).

#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/gemm_wgmma_types.cuh"
#include "common/gemm_wgmma_writers.cuh"

namespace gemm_wgmma {

// A value rounded to the 16-bit type; a pair rounded and packed into one 32-bit word (what Quad16Writer
// exchanges).
template <>
struct OutputElement<__nv_bfloat16> {
  static __device__ __forceinline__ __nv_bfloat16 rounded(float v) { return __float2bfloat16_rn(v); }
  static __device__ __forceinline__ uint32_t packed(float v0, float v1) {
    const __nv_bfloat162 p = __floats2bfloat162_rn(v0, v1);
    return *reinterpret_cast<const uint32_t*>(&p);
  }
};
template <>
struct OutputElement<__half> {
  static __device__ __forceinline__ __half rounded(float v) { return __float2half_rn(v); }
  static __device__ __forceinline__ uint32_t packed(float v0, float v1) {
    const __half2 p = __floats2half2_rn(v0, v1);
    return *reinterpret_cast<const uint32_t*>(&p);
  }
};

// A lane holds pair (h, j) at row + 8h, columns col + 8j and + 1, col = the block's first column + 2t for
// t = lane % 4 (EpilogueTile). Here the pairs of n8 blocks j - 1 and j (j odd) are exchanged within the quad
// so that lane t holds columns 4t..4t + 3 of the 16 the two blocks cover, and stores them as one 8-byte value:
// 32 bytes of each row per warp store. The contract it needs of an epilogue: put(h, j, ...) with j ascending
// from an even first j, both h of a j before the next j, and every lane of the warp calling (the shuffles);
// StoreEpilogue and gemm_epilogue::GroupNormEpilogue call it so. BN a multiple of 16.
template <class T>
struct Quad16Writer {
  T* out;
  int row, col, M, N;        // EpilogueTile's
  mutable uint32_t held[2];  // block j - 1's packed pairs, rows h = 0 and 1, until block j arrives

  __device__ __forceinline__ void put(int h, int j, float v0, float v1) const {
    const uint32_t mine = OutputElement<T>::packed(v0, v1);
    if ((j & 1) == 0) {
      held[h] = mine;
      return;
    }
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int t = lane & 3;
    const int src = (lane & ~3) + 2 * (t & 1);  // lanes 0 and 1 of the quad (t even) or 2 and 3 (t odd)
    const uint32_t a0 = __shfl_sync(0xffffffffu, held[h], src), a1 = __shfl_sync(0xffffffffu, held[h], src + 1);
    const uint32_t b0 = __shfl_sync(0xffffffffu, mine, src), b1 = __shfl_sync(0xffffffffu, mine, src + 1);
    const int m = row + 8 * h;
    const int n = col - 2 * t + 8 * (j - 1) + 4 * t;  // the two blocks' first column, then this lane's 4
    if (m >= M || n >= N) {
      return;
    }
    const uint2 four = t < 2 ? make_uint2(a0, a1) : make_uint2(b0, b1);  // block j - 1's columns, or block j's
    T* dst = out + static_cast<int64_t>(m) * N + n;
    if (N % 4 == 0) {  // then n % 4 == 0 too: 8-byte aligned, and n + 3 < N
      *reinterpret_cast<uint2*>(dst) = four;
    } else {
      const T* v = reinterpret_cast<const T*>(&four);
      for (int i = 0; i < 4 && n + i < N; ++i) dst[i] = v[i];
    }
  }
};

template <>
struct WriterFor<__nv_bfloat16> {
  using type = Quad16Writer<__nv_bfloat16>;
};
template <>
struct WriterFor<__half> {
  using type = Quad16Writer<__half>;
};

template <>
struct ParamElement<__nv_bfloat16> {
  static __device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(__ldg(p)); }
};
template <>
struct ParamElement<__half> {
  static __device__ __forceinline__ float load(const __half* p) { return __half2float(__ldg(p)); }
};

template <class T>
struct Store16Epilogue : StoreEpilogue {
  using Writer = Quad16Writer<T>;
  T* out;  // (M, N), hides StoreEpilogue's float out (left null)
};

// The wgmma operand whose element is T.
template <class T>
struct OperandFor;
template <>
struct OperandFor<__nv_bfloat16> {
  using type = Bf16Operand;
};
template <>
struct OperandFor<__half> {
  using type = Fp16Operand;
};

// Calls f(Operand{}, T{}) for a 16-bit dtype: (Bf16Operand, __nv_bfloat16) for bfloat16, (Fp16Operand, __half)
// for float16; the caller has checked that dtype is one of them.
template <class F>
void with_half16(c10::ScalarType dtype, F&& f) {
  if (dtype == c10::kBFloat16) {
    f(OperandFor<__nv_bfloat16>::type{}, __nv_bfloat16{});
  } else {
    f(OperandFor<__half>::type{}, __half{});
  }
}

}  // namespace gemm_wgmma
