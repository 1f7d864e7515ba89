// gemm_05_blocktile_2d.cu: out = x @ w.T in float32, x (M, K) and w (N, K) row-major as nn.Linear
// stores them, out (M, N). Rung 5 of the SGEMM ladder (notebooks/03_tiled_gemm.ipynb): 2-D
// register blocking, each thread computes an 8 x 8 block of outputs as a sum of outer products.
//
// The idea: rung 4 reuses each w value 8 times from a register but reads a fresh x value for every
// FMA. Block in both directions: a thread owns an 8 x 8 sub-tile (rows tm .. tm+7, columns
// tn .. tn+7 of the block's 128 x 128 tile; tm = 8 (t / 16), tn = 8 (t % 16)). At each k it copies
// 8 values of x and 8 of w from the k-major shared tiles into registers and adds their outer product:
//     a[i] = xs[k][tm + i];  b[j] = ws[k][tn + j];  acc[i][j] += a[i] * b[j]   (i, j = 0..7)
// 16 floats read (four LDS.128) for 64 FMAs. The 64 sums live in registers for the whole K loop.
// The larger tile also doubles the FLOP per byte copied from global memory (rung 4: 64 x 64).
//
// PREDICTION (made before measuring): about 2x rung 4, some 55-65% of cuBLAS SGEMM. FMAs now make
// up most of the instruction stream, and a slice gives each thread 512 FMAs between barriers
// instead of 64, with 64 independent accumulators to keep the FMA pipe busy while loads are in
// flight. What still limits it: every slice starts with a wait for global memory that only 16
// warps per SM (see below) can cover, and the two barriers per slice stall the whole block.

#include "common/gemm_tile.cuh"

// 128 x 128 outputs per block, 8 x 8 per thread: 256 threads. BK = 8: each thread copies 4
// elements of each tile per slice (128 x 8 / 256). Registers decide occupancy: the 64
// accumulators, 16 operands and the addressing take ptxas 122 registers; MIN_BLOCKS_PER_SM = 2
// caps them at 65536 / (2 x 256) = 128, so 2 blocks (16 warps, a quarter of the SM's 64 warp
// slots) fit without spilling. Few warps suffice here because each has 64 independent FMAs per k
// to issue. Shared memory, 2 x 8 x (128 + 4) floats = 8.25 KB per block, is far from limiting.
constexpr int BM = 128;
constexpr int BN = 128;
constexpr int BK = 8;
constexpr int TM = 8;
constexpr int TN = 8;
constexpr int THREADS = (BM / TM) * (BN / TN);
constexpr int MIN_BLOCKS_PER_SM = 2;

// @launch
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS_PER_SM)
    gemm_blocktile_2d_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
                             int M, int N, int K) {
  __shared__ float xs[BK][BM + GEMM_SMEM_PAD];
  __shared__ float ws[BK][BN + GEMM_SMEM_PAD];

  const int tiles_m = (M + BM - 1) / BM;
  const int m0 = static_cast<int>(blockIdx.x % tiles_m) * BM;
  const int n0 = static_cast<int>(blockIdx.x / tiles_m) * BN;
  const int tid = threadIdx.x;
  const int tm = (tid / (BN / TN)) * TM;
  const int tn = (tid % (BN / TN)) * TN;

  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    load_tile_kmajor<BM, BK, THREADS>(xs, x, M, K, m0, k0, tid);
    load_tile_kmajor<BN, BK, THREADS>(ws, w, N, K, n0, k0, tid);
    __syncthreads();  // the whole slice is in shared memory before anyone reads it
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM];
      float b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        a[i] = xs[k][tm + i];
      }
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        b[j] = ws[k][tn + j];
      }
#pragma unroll
      for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          acc[i][j] += a[i] * b[j];
        }
      }
    }
    __syncthreads();  // everyone has read the slice before the next one overwrites it
  }

  // Outputs past M or N (edge tiles) were computed from zero-filled rows: they are not stored.
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = m0 + tm + i;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int n = n0 + tn + j;
      if (m < M && n < N) {
        out[static_cast<int64_t>(m) * N + n] = acc[i][j];
      }
    }
  }
}

// @export: out = x @ w.T for float32 CUDA tensors x (M, K) and w (N, K): rung 5, 2-D register blocking (128 x 128 tile, 8 x 8 outputs per thread)
torch::Tensor gemm(torch::Tensor x, torch::Tensor w) {
  torch::Tensor out = gemm_new_output(x, w);
  const int M = static_cast<int>(x.size(0));
  const int N = static_cast<int>(w.size(0));
  const int K = static_cast<int>(x.size(1));
  if (out.numel() == 0 || K == 0) {
    return out;
  }
  const c10::cuda::CUDAGuard guard(x.device());
  gemm_blocktile_2d_kernel<<<gemm_grid(M, N, BM, BN), THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(), M, N, K);
  LAUNCH_CHECK();
  return out;
}
