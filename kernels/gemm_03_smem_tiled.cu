// gemm_03_smem_tiled.cu: out = x @ w.T in float32, x (M, K) and w (N, K) row-major as nn.Linear
// stores them, out (M, N). Rung 3 of the SGEMM ladder (notebooks/03_tiled_gemm.ipynb): the
// classic shared-memory tiled GEMM.
//
// The idea: the 32 x 32 outputs of a tile need only 32 rows of x and 32 rows of w. A block computes
// such a tile, one output per thread, and walks along K in chunks of 32: it copies a 32 x 32 piece
// of x and one of w into shared memory (each element read from global memory once, coalesced),
// waits for all of it (__syncthreads), and each thread then takes its 32 products from there:
//     acc += xs[ty][k] * ws[tx][k]   for k = 0..31   (warp ty, lane tx)
// Every value copied serves 32 outputs.
//
// Why ws has rows of 33 floats: in the product loop a warp reads ws[tx][k], one word from each of
// 32 rows. With rows of 32 floats all 32 words sit in the same bank; nvcc then reads 4 consecutive k
// with one 16-byte LDS.128, served a quarter-warp (8 lanes) at a time, and the 8 lanes of each
// quarter queue on the same 4 banks. One float of padding puts word (tx, k) in bank (tx + k) % 32:
// 32 different banks, one pass per k. xs needs none: its reads are broadcasts (one word per warp).
//
// PREDICTION (written before measuring): only about 1.5x rung 2, roughly 15% of cuBLAS SGEMM
// (10-20%), not 20x. Global memory stops being the limit; shared memory becomes it: each FMA
// still needs its own shared load of ws (and a quarter of a 128-bit load of xs), the SM serves
// about one warp-wide shared load per cycle while it could issue four warp FMAs, so FMAs run at
// about 1/5 of peak at best, minus the two barriers per chunk. The next rung (register blocking)
// lets each thread compute several outputs from every value it reads from shared memory.

#include "common/gemm_launch.cuh"

// A 32 x 32 tile of out per block, one output per thread: 1024 threads, the most a block may
// have; 32 x 32 + 32 x 33 floats = 8320 bytes of shared memory. The chunk of K is 32 as well,
// so each thread copies exactly one element of each tile per chunk.
constexpr int kTile = 32;
constexpr int kThreads = kTile * kTile;

// @launch
__global__ void __launch_bounds__(kThreads)
    gemm_smem_tiled_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
                           int M, int N, int K, int col_tiles) {
  __shared__ float xs[kTile][kTile];
  __shared__ float ws[kTile][kTile + 1];  // padded: see the bank-conflict note above

  const int tx = threadIdx.x % kTile;
  const int ty = threadIdx.x / kTile;
  // One-dimensional grid: gridDim.y is limited to 65535, which would cap M. Column tiles vary
  // fastest, so the blocks resident at the same time share their 32 rows of x in L2.
  const int m0 = (blockIdx.x / col_tiles) * kTile;
  const int n0 = (blockIdx.x % col_tiles) * kTile;

  // Copy role: row m0 + ty of x and row n0 + ty of w, column k0 + tx. Rows past the edge are
  // never read (the flags below zero-fill them); clamping keeps even their pointers inside.
  const bool x_row_ok = m0 + ty < M;
  const bool w_row_ok = n0 + ty < N;
  const float* x_row = x + static_cast<int64_t>(min(m0 + ty, M - 1)) * K;
  const float* w_row = w + static_cast<int64_t>(min(n0 + ty, N - 1)) * K;

  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    const int k = k0 + tx;
    xs[ty][tx] = (x_row_ok && k < K) ? x_row[k] : 0.0f;
    ws[ty][tx] = (w_row_ok && k < K) ? w_row[k] : 0.0f;
    __syncthreads();  // every element of both tiles is written before anyone reads them
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) {
      acc += xs[ty][kk] * ws[tx][kk];
    }
    __syncthreads();  // everyone is done reading before the next chunk overwrites them
  }

  const int m = m0 + ty;
  const int n = n0 + tx;
  if (m < M && n < N) {
    out[static_cast<int64_t>(m) * N + n] = acc;
  }
}

// @export: out = x @ w.T for float32 CUDA tensors x (M, K) and w (N, K): rung 3, shared-memory tiles (32 x 32, padded)
torch::Tensor gemm(torch::Tensor x, torch::Tensor w) {
  torch::Tensor out = gemm_new_output(x, w);  // checks x and w (common/gemm_launch.cuh)
  const int64_t M = x.size(0), N = w.size(0), K = x.size(1);
  if (out.numel() == 0 || K == 0) {
    return out;  // nothing to compute (a launch with 0 blocks is an error), or all zeros
  }
  const c10::cuda::CUDAGuard guard(x.device());
  const int col_tiles = static_cast<int>((N + kTile - 1) / kTile);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  gemm_smem_tiled_kernel<<<gemm_grid(M, N, kTile, kTile), kThreads, 0, stream>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(), static_cast<int>(M), static_cast<int>(N),
      static_cast<int>(K), col_tiles);
  LAUNCH_CHECK();
  return out;
}
