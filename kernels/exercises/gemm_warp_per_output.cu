// exercises/gemm_warp_per_output.cu: YOUR TURN (notebooks/02_naive_gemm.ipynb). out = x @ w.T in
// float32, x (M, K) and w (N, K) row-major as nn.Linear stores them, out (M, N).
//
// Rung 2's idea at its simplest: one WARP per output element. The 32 lanes split K (lane l takes
// k = l, l + 32, l + 64, ...), so at every step the warp reads 32 consecutive floats of x's row
// and 32 of w's row: two coalesced 128-byte loads. Each lane ends with a partial sum over its
// own k; the output is the sum of the 32 partial sums.
//
// This starting point compiles and runs, but lane 0 stores ITS OWN partial sum: the terms
// k = 0, 32, 64, ... only, 1/32 of the dot product's terms. The checker in notebook 02 reports
// "Not yet" on purpose.
//
// Your job: add the 32 lanes' partial sums before lane 0 stores. Five register shuffles do it
// (__shfl_xor_sync with offsets 16, 8, 4, 2, 1), or call warp_sum from common/reduce.cuh
// (include it first). Every lane of the warp must take part in the shuffles.
//
// Then the question in the notebook: rung 2 gives each warp 4 outputs, so one x load serves 4
// columns; here one x load serves 1. How much slower than rung 2 will this be?

#include "common/gemm_tile.cuh"  // gemm_new_output, gemm_grid: the ladder's launcher helpers

constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpsPerBlock * kWarpSize;

__global__ void __launch_bounds__(kThreads)
    gemm_warp_per_output_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                float* __restrict__ out, int M, int N, int K) {
  const int lane = threadIdx.x % kWarpSize;
  // Warp g of the grid computes out[g / N][g % N]: consecutive warps take consecutive columns of
  // one row, so the warps of a block share their row of x (in L1) and read 8 rows of w.
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (g >= static_cast<int64_t>(M) * N) {
    return;  // a whole warp at once: the shuffles below still see all 32 lanes of every live warp
  }
  const int m = static_cast<int>(g / N);
  const int n = static_cast<int>(g % N);
  const float* x_row = x + static_cast<int64_t>(m) * K;
  const float* w_row = w + static_cast<int64_t>(n) * K;

  float partial = 0.0f;
  for (int k = lane; k < K; k += kWarpSize) {
    partial += x_row[k] * w_row[k];
  }

  // TODO: add the 32 partial sums of the warp (five __shfl_xor_sync, or warp_sum).

  if (lane == 0) {
    out[static_cast<int64_t>(m) * N + n] = partial;
  }
}

// @export: out = x @ w.T for float32 CUDA tensors x (M, K) and w (N, K): one warp per output, lanes split K (exercise)
torch::Tensor gemm(torch::Tensor x, torch::Tensor w) {
  torch::Tensor out = gemm_new_output(x, w);
  const int64_t M = x.size(0), N = w.size(0), K = x.size(1);
  if (out.numel() == 0 || K == 0) {
    return out;  // nothing to compute (a launch with 0 blocks is an error), or all zeros
  }
  const c10::cuda::CUDAGuard guard(x.device());
  // M * N warps, 8 to a block: as many blocks as 1 x 8 tiles of out.
  gemm_warp_per_output_kernel<<<gemm_grid(M * N, 1, kWarpsPerBlock, 1), kThreads, 0,
                                at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(), static_cast<int>(M), static_cast<int>(N),
      static_cast<int>(K));
  LAUNCH_CHECK();
  return out;
}
