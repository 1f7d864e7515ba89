// exercises/gemm_smem_pad.cu: YOUR TURN (notebooks/03_tiled_gemm.ipynb). out = x @ w.T in float32,
// x (M, K) and w (N, K) row-major as nn.Linear stores them, out (M, N).
//
// Rung 3 (kernels/gemm_03_smem_tiled.cu) with its padding taken out. A block computes a 32 x 32
// tile of out, one output per thread; per chunk of 32 k it copies 32 rows of x into xs and 32
// rows of w into ws, and thread (ty, tx) then computes
//     acc += xs[ty][kk] * ws[tx][kk]     for kk = 0..31.
// At each kk the 32 lanes of a warp (tx = 0..31) read ws[tx][kk]: one word from each of 32 rows.
// With rows of 32 floats, word (tx, kk) is word 32 tx + kk, in bank (32 tx + kk) % 32 = kk for
// every lane: the lanes queue on one bank. (nvcc reads 4 consecutive kk with one 16-byte LDS.128
// where a row is a multiple of 16 bytes, as here, and 2 with an 8-byte LDS.64 where it is a
// multiple of 8. An LDS.128 is served a quarter-warp (8 lanes) at a time, an LDS.64 a half-warp;
// the lanes of each part still share banks.)
//
// It computes the right answer, only slowly: the checker in notebook 03 reports "Not yet" until
// the read is conflict-free at the load width nvcc uses. Your job: change kWsRowFloats so that it
// is. (Predict first: how many passes per kk does each row length from 32 to 40 take?)

#include "common/gemm_tile.cuh"  // gemm_new_output, gemm_grid: the ladder's launcher helpers

constexpr int kTile = 32;
constexpr int kThreads = kTile * kTile;
constexpr int kWsRowFloats = kTile;  // TODO: the padding fix (floats per row of ws)

static_assert(kWsRowFloats >= kTile, "a row of ws holds at least the tile's 32 values of k");

__global__ void __launch_bounds__(kThreads)
    gemm_smem_pad_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
                         int M, int N, int K, int col_tiles) {
  __shared__ float xs[kTile][kTile];
  __shared__ float ws[kTile][kWsRowFloats];

  const int tx = threadIdx.x % kTile;
  const int ty = threadIdx.x / kTile;
  const int m0 = (blockIdx.x / col_tiles) * kTile;
  const int n0 = (blockIdx.x % col_tiles) * kTile;

  const bool x_row_ok = m0 + ty < M;
  const bool w_row_ok = n0 + ty < N;
  const float* x_row = x + static_cast<int64_t>(min(m0 + ty, M - 1)) * K;
  const float* w_row = w + static_cast<int64_t>(min(n0 + ty, N - 1)) * K;

  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    const int k = k0 + tx;
    xs[ty][tx] = (x_row_ok && k < K) ? x_row[k] : 0.0f;
    ws[ty][tx] = (w_row_ok && k < K) ? w_row[k] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) {
      acc += xs[ty][kk] * ws[tx][kk];
    }
    __syncthreads();
  }

  const int m = m0 + ty;
  const int n = n0 + tx;
  if (m < M && n < N) {
    out[static_cast<int64_t>(m) * N + n] = acc;
  }
}

// @export: out = x @ w.T for float32 CUDA tensors x (M, K) and w (N, K): rung 3 without its padding (exercise)
torch::Tensor gemm(torch::Tensor x, torch::Tensor w) {
  torch::Tensor out = gemm_new_output(x, w);
  const int64_t M = x.size(0), N = w.size(0), K = x.size(1);
  if (out.numel() == 0 || K == 0) {
    return out;
  }
  const c10::cuda::CUDAGuard guard(x.device());
  const int col_tiles = static_cast<int>((N + kTile - 1) / kTile);
  gemm_smem_pad_kernel<<<gemm_grid(M, N, kTile, kTile), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(), static_cast<int>(M), static_cast<int>(N),
      static_cast<int>(K), col_tiles);
  LAUNCH_CHECK();
  return out;
}

// @export: floats per row of the shared tile ws, as compiled (the checker computes the bank conflicts from it)
int64_t ws_row_floats() { return kWsRowFloats; }
