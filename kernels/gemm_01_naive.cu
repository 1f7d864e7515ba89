// gemm_01_naive.cu: out = x @ w.T in float32, x (M, K) and w (N, K) row-major as nn.Linear stores
// them, out (M, N). Rung 1 of the SGEMM ladder (notebooks/02_naive_gemm.ipynb): seed 004's first
// GEMM kernel, its mapping kept, so that the notebook can measure why it is slow.
//
// The idea: one thread per output element, out[m][n] = sum_k x[m][k] * w[n][k], a plain loop over
// k in a register. Block m computes row m; thread t computes columns t, t + 256, t + 512, ... So
// a warp holds 32 consecutive columns of one row, and at each step k it reads x[m][k] (one
// address: a broadcast) and w[n0 + lane][k]: 32 floats K apart, 32 different cache lines for one
// load instruction. That access pattern, not the K iterations per thread, sets the speed.
//
// PREDICTION (written before measuring): about 1% of cuBLAS SGEMM (0.5-2%), i.e. a few hundred
// GFLOP/s where cuBLAS reaches ~50 TFLOP/s, limited by the L1's 32 transactions per load
// instruction (about 1/128 of the FMA rate), not by DRAM bandwidth or by arithmetic.
//
// Changed from seed 004's linear_kernel, and why: its thread computed only column threadIdx.x, so
// a row needed a block of N = 8192 threads, which cannot launch (1024 at most); here each thread
// loops over columns. Offsets are int64_t (M * N passes 2^31 at larger shapes). No bias: notebook
// 04 adds it as an epilogue.

#include "common/gemm_launch.cuh"

// 256 threads (8 warps, each covering 32 consecutive columns): the workbook's usual block size,
// since the seed's kernel left it open. Rung 2 keeps 256 so the comparison is about the mapping.
constexpr int kThreads = 256;

// @launch
__global__ void gemm_naive_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                  float* __restrict__ out, int N, int K) {
  const int m = blockIdx.x;
  const float* x_row = x + static_cast<int64_t>(m) * K;
  float* out_row = out + static_cast<int64_t>(m) * N;
  for (int n = threadIdx.x; n < N; n += blockDim.x) {
    const float* w_row = w + static_cast<int64_t>(n) * K;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) {
      sum += x_row[k] * w_row[k];
    }
    out_row[n] = sum;
  }
}

// @export: out = x @ w.T for float32 CUDA tensors x (M, K) and w (N, K): rung 1, naive (seed 004: a thread per output, a block per row)
torch::Tensor gemm(torch::Tensor x, torch::Tensor w) {
  torch::Tensor out = gemm_new_output(x, w);  // checks x and w (common/gemm_launch.cuh)
  const int64_t M = x.size(0), N = w.size(0), K = x.size(1);
  if (out.numel() == 0 || K == 0) {
    return out;  // nothing to compute (a launch with 0 blocks is an error), or all zeros
  }
  const c10::cuda::CUDAGuard guard(x.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  // One block per row: M <= GEMM_MAX_DIM fits gridDim.x.
  gemm_naive_kernel<<<static_cast<unsigned int>(M), kThreads, 0, stream>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(), static_cast<int>(N), static_cast<int>(K));
  LAUNCH_CHECK();
  return out;
}
