// exercises/gemm_tile_shape.cu: YOUR TURN (notebooks/03_tiled_gemm.ipynb). out = x @ w.T in float32,
// x (M, K) and w (N, K) row-major as nn.Linear stores them, out (M, N).
//
// A copy of rung 5 (kernels/gemm_05_blocktile_2d.cu: 2-D register blocking, a BM x BN tile per
// block, TM x TN outputs per thread, slices of BK along K) whose shape is a set of knobs. Each
// knob has rung 5's value unless the build defines it: the notebook compiles this one file
// several times, e.g. with -DTILE_BK=16, and times the variants side by side. You can also edit
// the defaults here, or add a variant of your own in the notebook.
//
// What each knob trades (predict before you measure):
//   TILE_BK        a deeper slice: fewer barriers and global-load rounds per FMA, more shared
//                  memory per block (BK x (BM + BN + 8) floats must stay under 48 KB).
//   TILE_BM/BN     a larger tile: more FLOP per byte loaded from global memory (BM BN / 2(BM + BN)),
//                  but fewer blocks (1024 x 8192 / (BM BN) of them) to fill the GPU's SMs.
//   TILE_TM/TN     more outputs per thread: more reuse of each register, more registers (TM TN
//                  accumulators), fewer threads (BM BN / (TM TN)) per block.
//   TILE_MIN_BLOCKS  __launch_bounds__' minimum blocks per SM: caps the registers per thread at
//                  65536 / (MIN_BLOCKS x threads); too low a cap makes ptxas spill to local memory.
// The static_asserts below stop a shape this kernel cannot run, at compile time, with a reason.

#include "common/gemm_tile.cuh"

#ifndef TILE_BM
#define TILE_BM 128
#endif
#ifndef TILE_BN
#define TILE_BN 128
#endif
#ifndef TILE_BK
#define TILE_BK 8
#endif
#ifndef TILE_TM
#define TILE_TM 8
#endif
#ifndef TILE_TN
#define TILE_TN 8
#endif
#ifndef TILE_MIN_BLOCKS
#define TILE_MIN_BLOCKS 2
#endif

constexpr int BM = TILE_BM;
constexpr int BN = TILE_BN;
constexpr int BK = TILE_BK;
constexpr int TM = TILE_TM;
constexpr int TN = TILE_TN;
constexpr int THREADS = (BM / TM) * (BN / TN);
constexpr int MIN_BLOCKS_PER_SM = TILE_MIN_BLOCKS;

static_assert(BM % TM == 0 && BN % TN == 0, "TM must divide BM and TN must divide BN");
static_assert(THREADS % 32 == 0 && THREADS <= 1024, "(BM / TM) x (BN / TN) threads: a whole number of warps, at most 1024");
static_assert(BK * (BM + BN + 2 * GEMM_SMEM_PAD) * 4 <= 48 * 1024,
              "the two tiles must fit in 48 KB of static shared memory: make BK, BM or BN smaller");

__global__ void __launch_bounds__(THREADS, MIN_BLOCKS_PER_SM)
    gemm_tile_shape_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
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
    __syncthreads();
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
    __syncthreads();
  }

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

// @export: out = x @ w.T for float32 CUDA tensors x (M, K) and w (N, K): rung 5 with its tile shape as knobs (exercise)
torch::Tensor gemm(torch::Tensor x, torch::Tensor w) {
  torch::Tensor out = gemm_new_output(x, w);
  const int M = static_cast<int>(x.size(0));
  const int N = static_cast<int>(w.size(0));
  const int K = static_cast<int>(x.size(1));
  if (out.numel() == 0 || K == 0) {
    return out;
  }
  const c10::cuda::CUDAGuard guard(x.device());
  gemm_tile_shape_kernel<<<gemm_grid(M, N, BM, BN), THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(), M, N, K);
  LAUNCH_CHECK();
  return out;
}

// @export: the shape this build was compiled with: [BM, BN, BK, TM, TN, threads per block, MIN_BLOCKS_PER_SM]
std::vector<int64_t> tile_shape() { return {BM, BN, BK, TM, TN, THREADS, MIN_BLOCKS_PER_SM}; }
