// kernels/common/tf32_operands.cuh: the operands of the Hopper GEMM (common/gemm_wgmma.cuh),
// prepared on every call from the tensors as they are, nothing kept between calls. Used by rung 10's
// `linear` and `linear_backward` (gemm_10_3xtf32.cu) and by the whole-model kernels
// (fused_gemm_groupnorm.cu).
//
//   tf32_residual(v)                  the small parts of v's 3xTF32 split, v itself being the big parts;
//   prepare(v, transpose, residual)   an operand as the wgmma kernel reads it: K-major (the reduction
//                                     along the rows' contiguous dimension), K a multiple of 4, raw
//                                     values as the big parts and, for 3xTF32, the small parts beside.
//
// The big part needs no memory. 3xTF32 computes x·w as xb·wb + xb·ws + xs·wb (the split of
// common/tensor_core.cuh). The tensor cores read an fp32 operand as TF32 by ignoring its low 13 bits,
// i.e. they truncate it (tests/test_gemm_tensor_cores.py pins this on the GPU: raw and truncated
// operands give the same bits). So if big is trunc(v), it is v itself, as TMA loads it, and only
//   small = rna(v - trunc(v))
// goes through memory: v - trunc(v) is exact in fp32 (v's low 13 significand bits), rounded to the
// nearest TF32; where that is 0 and v is not (v a TF32 value, or ±inf or NaN), small is ±2^-126
// instead (`residual` below says why). Against rounding big to the nearest (split_tf32, which writes
// both parts), the split is half as exact: |v - big - small| <= 2^-21 |v| instead of 2^-22 (or
// 2^-126 where small is that stand-in, less than 2^-21 |v| for |v| >= 2^-105), and the dropped xs·ws
// term up to 2^-20 of the product instead of 2^-22. Both are far below the 1e-4 tier, whose limit is
// the accumulation (gemm_10_3xtf32.cu), and the pass over v writes 4 bytes per element instead of 8.
// An inf or NaN stays whole in the big part, v itself.
//
// Why nothing is kept. nn.Linear's weight changes under the module in ways no counter sees: a write
// through `weight.data` bumps the version counter of the `.data` tensor, not the parameter's. A split
// kept between calls and checked against the version goes stale silently (issue "Drop-ins for real
// code"). Splitting the weight on every call costs one read and one write of it (at 8192 x 8192,
// 537 MB: ~0.18 ms on an H100 beside a 1.0 ms GEMM); keeping it is the user's choice, made knowingly
// (a drop-in's freeze(), which hands the kept small parts back in as `w_residual`).
//
// Transposed operands (the backward's dX = dY·W and dW = dYᵀ·X reduce over W's rows and over the
// batch, which are not the contiguous dimension): TF32 wgmma reads K-major operands only, so the
// operand is copied transposed, big and small parts both, through a 32 x 32 tile in shared memory
// (coalesced reads and writes). K is padded with zeros to a multiple of 4 (TMA's row stride is a
// multiple of 16 bytes); zeros add nothing to any sum.

#pragma once

#include <algorithm>
#include <cstdint>

#include "common/check.cuh"
#include "common/device_cache.cuh"
#include "common/tensor_core.cuh"

namespace tf32_operands {

// The residual of one value (common/tensor_core.cuh's tc::tf32_residual: why it is never 0 but where v
// is ±0), the one the whole-model kernels also make in shared memory from w (SplitW3xTf32Mainloop).
__device__ __forceinline__ float residual(float v) { return tc::tf32_residual(v); }

// n values: float4s where both pointers allow them (16-byte aligned), the last n % 4 one by one.
__global__ void residual_kernel(const float* __restrict__ v, float* __restrict__ small, int64_t n, bool vector) {
  const int64_t n4 = vector ? n / 4 : 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  for (int64_t i = first; i < n4; i += stride) {
    const float4 a = reinterpret_cast<const float4*>(v)[i];
    reinterpret_cast<float4*>(small)[i] = make_float4(residual(a.x), residual(a.y), residual(a.z), residual(a.w));
  }
  for (int64_t i = 4 * n4 + first; i < n; i += stride) {
    small[i] = residual(v[i]);
  }
}

// The small parts of a contiguous float tensor (any size), a new contiguous tensor of its shape.
inline torch::Tensor tf32_residual(const torch::Tensor& v) {
  TORCH_CHECK(v.is_contiguous(), "tf32_residual needs a contiguous tensor");
  const c10::cuda::CUDAGuard guard(v.device());
  torch::Tensor small = torch::empty_like(v, at::MemoryFormat::Contiguous);
  const int64_t n = v.numel();
  if (n == 0) return small;
  const int threads = 256;
  const int64_t blocks =
      std::min<int64_t>((n / 4 + threads) / threads,
                        static_cast<int64_t>(device_attribute<cudaDevAttrMultiProcessorCount>(v.get_device())) * 8);
  residual_kernel<<<static_cast<unsigned>(blocks), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      v.data_ptr<float>(), small.data_ptr<float>(), n, aligned16(v.data_ptr()) && aligned16(small.data_ptr()));
  LAUNCH_CHECK();
  return small;
}

// out[p][i][j] (P parts of (rows_out, k_pad)) from v (rows, cols) with strides (s0, s1):
// TRANSPOSE: out[.][i][j] = v[j][i] (rows_out = cols, k = rows), else out[.][i][j] = v[i][j];
// with RESIDUAL (3xTF32) part 0 the raw value and part 1 its small part; without (TF32) part 0 the
// value rounded to the nearest TF32, which the copy makes for free: the tensor cores would truncate
// it, and truncation's error is twice rounding's and biased (every magnitude shrinks, so a sum of
// same-signed products is scaled down by ~2^-11); j >= k: 0. A block copies a 32 x 32 tile
// of out through shared memory, 32 x 8 threads, 4 values each: a warp reads 32 consecutive values of
// v's contiguous dimension and writes 32 consecutive values of out's.
constexpr int kTile = 32;
template <bool TRANSPOSE, bool RESIDUAL>
__global__ void operand_copy_kernel(const float* __restrict__ v, int64_t s0, int64_t s1, int64_t rows_out, int64_t k,
                                    int64_t k_pad, float* __restrict__ big, float* __restrict__ small) {
  __shared__ float tile[kTile][kTile + 1];  // +1: the transposed read hits 32 different banks
  auto put = [](float x, float* big, float* small) {
    if constexpr (RESIDUAL) {
      *big = x;
      *small = residual(x);
    } else {
      *big = isfinite(x) ? __uint_as_float(tc::to_tf32(x)) : x;
    }
  };
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kTile;  // out rows
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kTile;  // out columns (k)
  const int tx = threadIdx.x, ty = threadIdx.y;
  if constexpr (TRANSPOSE) {
    // tile[a][b] = v[j0 + a][i0 + b]: reads along v's rows (its columns i are contiguous when s1 = 1)
    for (int a = ty; a < kTile; a += 8) {
      const int64_t j = j0 + a, i = i0 + tx;
      tile[a][tx] = j < k && i < rows_out ? v[j * s0 + i * s1] : 0.0f;
    }
    __syncthreads();
    for (int a = ty; a < kTile; a += 8) {
      const int64_t i = i0 + a, j = j0 + tx;
      if (i < rows_out && j < k_pad) {
        put(tile[tx][a], big + i * k_pad + j, small + i * k_pad + j);
      }
    }
  } else {
    for (int a = ty; a < kTile; a += 8) {
      const int64_t i = i0 + a, j = j0 + tx;
      if (i < rows_out && j < k_pad) {
        put(j < k ? v[i * s0 + j * s1] : 0.0f, big + i * k_pad + j, small + i * k_pad + j);
      }
    }
  }
}

// An operand of x @ w.T as the wgmma kernel reads it: (rows, k) K-major, k % 4 == 0, 16-byte aligned;
// big = the raw values (or a copy), small = their residuals (undefined when not asked for).
struct Operand {
  torch::Tensor big, small;
  int64_t rows() const { return big.size(0); }
  int64_t k() const { return big.size(1); }
};

inline int64_t round_up4(int64_t n) { return (n + 3) / 4 * 4; }

// v (r, c) float32 CUDA, any strides. transpose: the operand is vᵀ (reduction over v's rows).
// Only a contiguous, aligned v with c % 4 == 0 taken as it is is not copied (its residual still is
// computed when asked for; without, its raw values are truncated by the tensor cores, as rung 9's
// operands are); everything else is copied, padded to k % 4 == 0, and rounded when TF32.
inline Operand prepare(const torch::Tensor& v, bool transpose, bool with_residual) {
  TORCH_CHECK(v.dim() == 2, "an operand must be 2-D, got ", shape_string(v));
  const c10::cuda::CUDAGuard guard(v.device());
  if (!transpose && v.is_contiguous() && v.size(1) % 4 == 0 && aligned16(v.data_ptr())) {
    return {v, with_residual ? tf32_residual(v) : torch::Tensor()};
  }
  const int64_t rows_out = transpose ? v.size(1) : v.size(0);
  const int64_t k = transpose ? v.size(0) : v.size(1);
  const int64_t k_pad = round_up4(k);
  torch::Tensor parts = torch::empty({with_residual ? 2 : 1, rows_out, k_pad}, v.options());
  if (parts.numel() > 0) {
    const dim3 block(kTile, 8);
    const dim3 grid(static_cast<unsigned>((k_pad + kTile - 1) / kTile), static_cast<unsigned>((rows_out + kTile - 1) / kTile));
    TORCH_CHECK(grid.y <= 65535, "an operand of ", num(rows_out), " rows is more than this copy's grid holds");
    float* big = parts[0].data_ptr<float>();
    float* small = with_residual ? parts[1].data_ptr<float>() : nullptr;
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const float* src = v.data_ptr<float>();
    if (transpose) {
      if (with_residual) {
        operand_copy_kernel<true, true><<<grid, block, 0, stream>>>(src, v.stride(0), v.stride(1), rows_out, k, k_pad, big, small);
      } else {
        operand_copy_kernel<true, false><<<grid, block, 0, stream>>>(src, v.stride(0), v.stride(1), rows_out, k, k_pad, big, small);
      }
    } else {
      if (with_residual) {
        operand_copy_kernel<false, true><<<grid, block, 0, stream>>>(src, v.stride(0), v.stride(1), rows_out, k, k_pad, big, small);
      } else {
        operand_copy_kernel<false, false><<<grid, block, 0, stream>>>(src, v.stride(0), v.stride(1), rows_out, k, k_pad, big, small);
      }
    }
    LAUNCH_CHECK();
  }
  return {parts[0], with_residual ? parts[1] : torch::Tensor()};
}

// The small parts of w that a caller kept between calls (tf32_residual of w at an earlier call: a
// drop-in's freeze()), checked for what can be checked without reading them: shape, dtype, device,
// layout. That they are w's is the caller's contract. Undefined when none were given.
inline torch::Tensor kept_residual(const c10::optional<torch::Tensor>& r, const torch::Tensor& w) {
  if (!r.has_value() || !r->defined()) return {};
  const torch::Tensor& ws = *r;
  check_float_cuda_input(ws, "w_residual");
  check_same_device(w, "w", ws, "w_residual");
  TORCH_CHECK(ws.sizes() == w.sizes() && ws.is_contiguous() && aligned16(ws.data_ptr()),
              "w_residual must be tf32_residual(w): contiguous, of w's shape ", shape_string(w), ", got ",
              shape_string(ws));
  return ws;
}

}  // namespace tf32_operands
