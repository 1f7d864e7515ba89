// kernels/common/gemm_wgmma_writers16.cuh: the wgmma GEMM's output in bf16 or fp16 (common/gemm_wgmma_writers.cuh
// for fp32): the values rounded to nearest even as they are stored, after the bias. Kept apart so that only a
// 16-bit launcher includes it.
//
//   OutputElement<__nv_bfloat16>, <__half>   one value and an even pair as the 16-bit type;
//   Direct16Writer<T>                         DirectWriterOf<T>: 4 bytes per lane, so a warp's store writes
//                                             16 bytes of each of 8 rows, half a 32-byte sector; measured
//                                             slower than the fp32 output (experiments/bf16/README.md, which
//                                             tries a fix);
//   Store16Epilogue<T>                        StoreEpilogue into a 16-bit output.

#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/gemm_wgmma_writers.cuh"

namespace gemm_wgmma {

template <>
struct OutputElement<__nv_bfloat16> {
  static __device__ __forceinline__ __nv_bfloat16 one(float v) { return __float2bfloat16_rn(v); }
  static __device__ __forceinline__ void pair(__nv_bfloat16* dst, float v0, float v1) {
    *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(v0, v1);
  }
};
template <>
struct OutputElement<__half> {
  static __device__ __forceinline__ __half one(float v) { return __float2half_rn(v); }
  static __device__ __forceinline__ void pair(__half* dst, float v0, float v1) {
    *reinterpret_cast<__half2*>(dst) = __floats2half2_rn(v0, v1);
  }
};

template <class T>
using Direct16Writer = DirectWriterOf<T>;

template <class T>
struct Store16Epilogue : StoreEpilogue {
  using Writer = Direct16Writer<T>;
  T* out;  // (M, N), hides StoreEpilogue's float out (left null)
};

}  // namespace gemm_wgmma
