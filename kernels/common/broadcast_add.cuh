// kernels/common/broadcast_add.cuh: problem 75's broadcast write, out (1, C, N, 1) = rowmin (N, 1) +
// bias (1, C, 1, 1), out[0, c, n, 0] = rowmin[n] + bias[c]. min_bias_broadcast.cu explains it
// (notebook 07); the whole-model kernel (fused_gemm_groupnorm.cu) ends with it too.

#pragma once

#include <algorithm>
#include <cstdint>

#include "common/check.cuh"
#include "common/dependent_launch.cuh"
#include "common/elementwise.cuh"

constexpr int kBroadcastThreads = 256;

// out (C, N) = rowmin[n] + bias[c], n4 = the float4 of n this thread owns. Both kernels may run
// as dependents of the row minimum (common/dependent_launch.cuh): nothing reads rowmin before
// wait_for_producer(). Notebook 07 launches the float4 one from Python too (`// @launch`: launched the
// ordinary way, not as a dependent, wait_for_producer() returns at once).
// @launch
__global__ void __launch_bounds__(kBroadcastThreads)
    broadcast_add_vec4_kernel(const float* __restrict__ rowmin, const float* __restrict__ bias,
                              float* __restrict__ out, int64_t N, int64_t C) {
  wait_for_producer();
  const int64_t n = 4 * (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x);
  if (n >= N) return;  // no barrier below: threads past the end may leave
  const float4 m = load4(rowmin + n);
  for (int64_t c = blockIdx.y; c < C; c += gridDim.y) {
    const float b = bias[c];
    store4(out + c * N + n, make_float4(m.x + b, m.y + b, m.z + b, m.w + b));
  }
}

__global__ void __launch_bounds__(kBroadcastThreads)
    broadcast_add_scalar_kernel(const float* __restrict__ rowmin, const float* __restrict__ bias,
                                float* __restrict__ out, int64_t N, int64_t total) {
  wait_for_producer();
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t c = i / N;
    out[i] = rowmin[i - c * N] + bias[c];
  }
}

// bias's shape (1, C, 1, 1), whatever its dtype.
inline void check_broadcast_bias_shape(const torch::Tensor& bias) {
  TORCH_CHECK(bias.dim() == 4 && bias.size(0) == 1 && bias.size(2) == 1 && bias.size(3) == 1,
              "bias must have shape [1, C, 1, 1] (problem 75's bias_shape), got ", shape_string(bias));
}

// bias (1, C, 1, 1), float32 CUDA contiguous on `like`'s device; like_name: what the launcher calls like.
inline void check_broadcast_bias(const torch::Tensor& like, const torch::Tensor& bias, const char* like_name) {
  CHECK_FLOAT_CUDA_INPUT(bias);
  check_same_device(like, like_name, bias, "bias");
  check_broadcast_bias_shape(bias);
}

// out (1, C, N, 1) = rowmin (N, 1) + bias (1, C, 1, 1), inputs already checked. dependent: rowmin
// is the output of the kernel just launched on this stream, and the broadcast is launched as its
// programmatic dependent.
inline torch::Tensor broadcast_add(const torch::Tensor& rowmin, const torch::Tensor& bias, bool dependent) {
  const int64_t N = rowmin.size(0);
  const int64_t C = bias.size(1);
  torch::Tensor out = torch::empty({1, C, N, 1}, rowmin.options());
  if (N == 0 || C == 0) return out;
  const int device = rowmin.get_device();
  const float* mp = rowmin.data_ptr<float>();
  const float* bp = bias.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (N % 4 == 0 && aligned16(mp) && aligned16(op)) {
    const int64_t n4 = N / 4;
    const int threads = static_cast<int>(std::min<int64_t>(kBroadcastThreads, (n4 + 31) / 32 * 32));
    const int64_t grid_x = (n4 + threads - 1) / threads;
    TORCH_CHECK(grid_x <= INT32_MAX, "N = ", num(N), " is too large for one grid");
    // Enough rows of blocks to fill the GPU once, each walking down its share of the channels.
    const int64_t resident = resident_blocks(broadcast_add_vec4_kernel, threads, 0, device);
    const int64_t grid_y = std::max<int64_t>(1, std::min<int64_t>({C, 65535, resident / grid_x}));
    const dim3 grid(static_cast<unsigned int>(grid_x), static_cast<unsigned int>(grid_y));
    if (dependent) {
      launch_dependent(broadcast_add_vec4_kernel, grid, dim3(threads), stream, mp, bp, op, N, C);
    } else {
      broadcast_add_vec4_kernel<<<grid, threads, 0, stream>>>(mp, bp, op, N, C);
      LAUNCH_CHECK();
    }
  } else {
    const int64_t total = C * N;
    const unsigned int grid = resident_grid(broadcast_add_scalar_kernel, kBroadcastThreads, 0,
                                            (total + kBroadcastThreads - 1) / kBroadcastThreads, device);
    if (dependent) {
      launch_dependent(broadcast_add_scalar_kernel, dim3(grid), dim3(kBroadcastThreads), stream, mp, bp, op, N, total);
    } else {
      broadcast_add_scalar_kernel<<<grid, kBroadcastThreads, 0, stream>>>(mp, bp, op, N, total);
      LAUNCH_CHECK();
    }
  }
  return out;
}

