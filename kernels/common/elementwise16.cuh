// kernels/common/elementwise16.cuh: common/elementwise.cuh's accesses for tensors in bfloat16 or float16,
// whose values a kernel computes with in float (kernels/tail_backward.cu: a model's backward in its
// 16-bit dtype). Kept apart from elementwise.cuh because the float32 drop-ins' one-file export inlines
// that one, and KernelBench's static rules refuse a narrowing conversion in it.
//
//   load4 / store4 (E*)     four 16-bit values in one 8-byte access, as floats: 256 contiguous bytes
//                           per warp instruction, at the same four values a lane as the float4 path;
//   as_float(e)             an element's value (exact: float holds every bf16 and fp16 value);
//   ElementOf<E>::rounded   a float rounded to E to nearest even, as Tensor.to(dtype) rounds;
//   with_float_element      f(E{}) for a tensor's dtype: float, __nv_bfloat16 or __half.

#pragma once

#include <cstdint>

#include <c10/core/ScalarType.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/check.cuh"
#include "common/elementwise.cuh"

template <class E>
struct ElementOf;
template <>
struct ElementOf<float> {
  static __device__ __forceinline__ float rounded(float v) { return v; }
  static __device__ __forceinline__ float value(float e) { return e; }
};
template <>
struct ElementOf<__nv_bfloat16> {
  static __device__ __forceinline__ __nv_bfloat16 rounded(float v) { return __float2bfloat16_rn(v); }
  static __device__ __forceinline__ float value(__nv_bfloat16 e) { return __bfloat162float(e); }
  using Pair = __nv_bfloat162;
  static __device__ __forceinline__ Pair pair(float a, float b) { return __floats2bfloat162_rn(a, b); }
  static __device__ __forceinline__ float2 floats(Pair p) { return __bfloat1622float2(p); }
};
template <>
struct ElementOf<__half> {
  static __device__ __forceinline__ __half rounded(float v) { return __float2half_rn(v); }
  static __device__ __forceinline__ float value(__half e) { return __half2float(e); }
  using Pair = __half2;
  static __device__ __forceinline__ Pair pair(float a, float b) { return __floats2half2_rn(a, b); }
  static __device__ __forceinline__ float2 floats(Pair p) { return __half22float2(p); }
};

template <class E>
__device__ __forceinline__ float as_float(E e) {
  return ElementOf<E>::value(e);
}

// Four 16-bit values at p (8-byte aligned) as a float4, and back, rounded.
template <class E>
__device__ __forceinline__ float4 load4(const E* p) {
  using Pair = typename ElementOf<E>::Pair;
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const float2 a = ElementOf<E>::floats(*reinterpret_cast<const Pair*>(&raw.x));
  const float2 b = ElementOf<E>::floats(*reinterpret_cast<const Pair*>(&raw.y));
  return make_float4(a.x, a.y, b.x, b.y);
}

template <class E>
__device__ __forceinline__ void store4(E* p, float4 v) {
  using Pair = typename ElementOf<E>::Pair;
  const Pair a = ElementOf<E>::pair(v.x, v.y);
  const Pair b = ElementOf<E>::pair(v.z, v.w);
  *reinterpret_cast<uint2*>(p) = make_uint2(*reinterpret_cast<const uint32_t*>(&a), *reinterpret_cast<const uint32_t*>(&b));
}

// f(E{}) for dtype: float32, bfloat16 or float16 (the caller has checked it is one of them).
template <class F>
void with_float_element(c10::ScalarType dtype, F&& f) {
  switch (dtype) {
    case c10::kFloat: f(float{}); break;
    case c10::kBFloat16: f(__nv_bfloat16{}); break;
    case c10::kHalf: f(__half{}); break;
    default: TORCH_CHECK(false, "dtype ", c10::toString(dtype), " is not float32, bfloat16 or float16");
  }
}

// A tensor's data as E, the element with_float_element gave for its dtype.
template <class E>
E* data_as(const at::Tensor& t) {
  return reinterpret_cast<E*>(t.data_ptr());
}
