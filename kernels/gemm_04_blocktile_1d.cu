// gemm_04_blocktile_1d.cu: out = x @ w.T in float32, x (M, K) and w (N, K) row-major as nn.Linear
// stores them, out (M, N). Rung 4 of the SGEMM ladder (notebooks/03_tiled_gemm.ipynb): 1-D
// register blocking, each thread computes a column of 8 outputs.
//
// The idea: rung 3 issues a shared load for every FMA, and an SM serves about one warp-wide shared
// load per cycle where it could issue four warp FMAs. Here a thread owns TM = 8 outputs of one
// column, rows tm .. tm+7 of column tn of the block's 64 x 64 tile. At each k it reads w once into
// a register and uses it for 8 FMAs:
//     b = ws[k][tn];  acc[i] += xs[k][tm + i] * b   for i = 0..7
// The 8 sums stay in registers for the whole K loop. The shared tiles are k-major (xs[k][m]; why,
// and the transposing copy, in common/gemm_tile.cuh): a thread's 8 values of x at one k are
// contiguous and 16-byte aligned, two LDS.128.
//
// PREDICTION (made before measuring): about 2 to 2.5x rung 3, roughly a third of cuBLAS SGEMM.
// Shared-load instructions per FMA fall by more than 3x, but the FMAs do not take over: each
// thread does only 64 FMAs per slice between two barriers, and every slice starts with a trip to
// global memory (hundreds of cycles) that only the other resident warps can hide. Next rung:
// blocking in two dimensions, so that both x and w values are reused from registers.

#include "common/gemm_tile.cuh"

// 64 x 64 outputs per block, TM = 8 per thread: 512 threads. BK = 8: each thread copies exactly
// one element of each tile per slice (64 x 8 = 512). MIN_BLOCKS_PER_SM = 4 asks ptxas to fit 4
// blocks on a multiprocessor: 2048 threads, the most it holds, at 65536 / 2048 = 32 registers
// each. The kernel fits in 32 without spilling, so all 64 warp slots fill, and the more warps an
// SM holds, the more of each slice's global-load latency the others' FMAs hide. Shared memory,
// 2 x 8 x (64 + 4) floats = 4.25 KB per block, is far from limiting.
constexpr int BM = 64;
constexpr int BN = 64;
constexpr int BK = 8;
constexpr int TM = 8;
constexpr int THREADS = BM * BN / TM;
constexpr int MIN_BLOCKS_PER_SM = 4;

// @launch
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS_PER_SM)
    gemm_blocktile_1d_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
                             int M, int N, int K) {
  __shared__ float xs[BK][BM + GEMM_SMEM_PAD];
  __shared__ float ws[BK][BN + GEMM_SMEM_PAD];

  const int tiles_m = (M + BM - 1) / BM;
  const int m0 = static_cast<int>(blockIdx.x % tiles_m) * BM;
  const int n0 = static_cast<int>(blockIdx.x / tiles_m) * BN;
  const int tid = threadIdx.x;
  const int tn = tid % BN;
  const int tm = (tid / BN) * TM;

  float acc[TM] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    load_tile_kmajor<BM, BK, THREADS>(xs, x, M, K, m0, k0, tid);
    load_tile_kmajor<BN, BK, THREADS>(ws, w, N, K, n0, k0, tid);
    __syncthreads();  // the whole slice is in shared memory before anyone reads it
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float b = ws[k][tn];
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        acc[i] += xs[k][tm + i] * b;
      }
    }
    __syncthreads();  // everyone has read the slice before the next one overwrites it
  }

  // Outputs past M or N (edge tiles) were computed from zero-filled rows: they are not stored.
  const int n = n0 + tn;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = m0 + tm + i;
    if (m < M && n < N) {
      out[static_cast<int64_t>(m) * N + n] = acc[i];
    }
  }
}

// @export: out = x @ w.T for float32 CUDA tensors x (M, K) and w (N, K): rung 4, 1-D register blocking (64 x 64 tile, 8 outputs per thread)
torch::Tensor gemm(torch::Tensor x, torch::Tensor w) {
  torch::Tensor out = gemm_new_output(x, w);
  const int M = static_cast<int>(x.size(0));
  const int N = static_cast<int>(w.size(0));
  const int K = static_cast<int>(x.size(1));
  if (out.numel() == 0 || K == 0) {
    return out;
  }
  const c10::cuda::CUDAGuard guard(x.device());
  gemm_blocktile_1d_kernel<<<gemm_grid(M, N, BM, BN), THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(), M, N, K);
  LAUNCH_CHECK();
  return out;
}
