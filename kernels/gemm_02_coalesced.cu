// gemm_02_coalesced.cu: out = x @ w.T in float32, x (M, K) and w (N, K) row-major as nn.Linear
// stores them, out (M, N). Rung 2 of the SGEMM ladder (notebooks/02_naive_gemm.ipynb): rung 1's
// arithmetic with coalesced loads, still without shared memory.
//
// The idea: both operands are contiguous along K, so a warp reads whole 128-byte lines only if its
// 32 lanes walk along k. The lanes split K (lane l takes k = l, l + 32, ...), keep partial dot
// products in registers, and the warp adds its 32 partial sums with five register shuffles at the
// end (warp_sum, common/reduce.cuh). A warp computes 4 outputs of one row, so each line of x it
// loads serves 4 columns; a block's 8 warps take 8 rows and the same 4 columns of w.
//
// Edges: a K that is not a multiple of 32 needs nothing (lanes stop at their last k < K); a warp
// past M returns whole, so warp_sum's full mask holds; in the last group of columns an index past
// N - 1 is clamped to N - 1 (recomputed, never stored), so no warp reads past the end of w.
//
// PREDICTION (written before measuring): about 10x rung 1, around 10% of cuBLAS SGEMM (5-20%).
// The L1 can deliver about one 128-byte line per cycle, so 5 loads per 4 FMA instructions cap
// the SM at 1/5 of its FMA rate even if every load hits; L1 misses on w (when the block's warps
// drift apart) push the L2 towards 0.4 FLOP/byte and the result towards the low end. Unlike
// rung 1, M = 1 (a matrix-vector product) fills the GPU: N / 4 warps, all coalesced.

#include "common/gemm_launch.cuh"
#include "common/reduce.cuh"

// 8 warps per block, as in rung 1's 256 threads. Each warp: 1 row of x, 4 rows of w.
// 4 columns per warp share each x load 4 ways; with the loop unrolled 4 times, each trip
// through it issues 20 independent loads, enough to keep memory busy while earlier ones arrive.
constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = 8;
constexpr int kColsPerWarp = 4;
constexpr int kThreads = kWarpsPerBlock * kWarpSize;

// @launch
__global__ void __launch_bounds__(kThreads)
    gemm_coalesced_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
                          int M, int N, int K, int col_groups) {
  const int lane = threadIdx.x % kWarpSize;
  // One-dimensional grid: gridDim.y is limited to 65535, which would cap M or N. Column groups
  // vary fastest, so the blocks resident at the same time share their 8 rows of x in L1/L2.
  const int m = (blockIdx.x / col_groups) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  const int n0 = (blockIdx.x % col_groups) * kColsPerWarp;
  if (m >= M) {
    return;
  }

  // Lane l starts at k = l of its rows, and every step moves all 5 pointers 32 floats along.
  // Pointers that advance, rather than row * K + k recomputed at every load, keep the loop at
  // 5 loads, 4 FMAs and a few integer adds per step.
  const float* xp = x + static_cast<int64_t>(m) * K + lane;
  const float* wp[kColsPerWarp];
#pragma unroll
  for (int j = 0; j < kColsPerWarp; ++j) {
    wp[j] = w + static_cast<int64_t>(min(n0 + j, N - 1)) * K + lane;
  }

  float acc[kColsPerWarp] = {};
#pragma unroll 4
  for (int k = lane; k < K; k += kWarpSize) {
    const float xv = *xp;
    xp += kWarpSize;
#pragma unroll
    for (int j = 0; j < kColsPerWarp; ++j) {
      acc[j] += xv * *wp[j];
      wp[j] += kWarpSize;
    }
  }

  // Every lane gets all 4 totals; lane j keeps total j (a chain of selects: indexing acc with
  // the lane number would move acc to local memory), and lanes 0..3 store 4 consecutive floats.
  float mine = 0.0f;
#pragma unroll
  for (int j = 0; j < kColsPerWarp; ++j) {
    const float total = warp_sum(acc[j]);
    if (lane == j) {
      mine = total;
    }
  }
  if (lane < kColsPerWarp && n0 + lane < N) {
    out[static_cast<int64_t>(m) * N + n0 + lane] = mine;
  }
}

// @export: out = x @ w.T for float32 CUDA tensors x (M, K) and w (N, K): rung 2, coalesced (a warp splits K, shuffle reduction)
torch::Tensor gemm(torch::Tensor x, torch::Tensor w) {
  torch::Tensor out = gemm_new_output(x, w);  // checks x and w (common/gemm_launch.cuh)
  const int64_t M = x.size(0), N = w.size(0), K = x.size(1);
  if (out.numel() == 0 || K == 0) {
    return out;  // nothing to compute (a launch with 0 blocks is an error), or all zeros
  }
  const c10::cuda::CUDAGuard guard(x.device());
  const int col_groups = static_cast<int>((N + kColsPerWarp - 1) / kColsPerWarp);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  gemm_coalesced_kernel<<<gemm_grid(M, N, kWarpsPerBlock, kColsPerWarp), kThreads, 0, stream>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(), static_cast<int>(M), static_cast<int>(N),
      static_cast<int>(K), col_groups);
  LAUNCH_CHECK();
  return out;
}
