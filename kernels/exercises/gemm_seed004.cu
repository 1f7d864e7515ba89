// exercises/gemm_seed004.cu: YOUR TURN (notebooks/02_naive_gemm.ipynb). out = x @ w.T in float32,
// x (M, K) and w (N, K) row-major as nn.Linear stores them, out (M, N).
//
// This is seed 004's linear_kernel (without its bias), launched the only way it can be: a block
// of N threads is impossible for N = 8192 (a block holds at most 1024), so the launcher below
// uses 256 threads, and thread t of block m computes column n = t of row m. Every column
// n >= 256 is never written: `out` keeps whatever the allocator left there. It compiles and
// runs, and the checker in notebook 02 reports "Not yet" on purpose (its shape has N = 515).
//
// Your job: make the 256 threads of a block cover every column of their row, whatever N is.
// Change only the kernel; leave the launcher's 256 threads and one block per row as they are.
// (Rung 1, kernels/gemm_01_naive.cu, is one answer; try it before you look.)

#include "common/gemm_tile.cuh"  // gemm_new_output: the ladder's input checks and output

constexpr int kThreads = 256;

__global__ void gemm_seed004_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                    float* __restrict__ out, int N, int K) {
  const int m = blockIdx.x;
  const float* x_row = x + static_cast<int64_t>(m) * K;
  // TODO: one column per thread covers only the columns n < blockDim.x (256 of them).
  const int n = threadIdx.x;
  if (n < N) {  // the seed's `if (... j >= hidden_size) return;`
    const float* w_row = w + static_cast<int64_t>(n) * K;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) {
      sum += x_row[k] * w_row[k];
    }
    out[static_cast<int64_t>(m) * N + n] = sum;
  }
}

// @export: out = x @ w.T for float32 CUDA tensors x (M, K) and w (N, K): seed 004's mapping, a block of 256 threads per row (exercise)
torch::Tensor gemm(torch::Tensor x, torch::Tensor w) {
  torch::Tensor out = gemm_new_output(x, w);
  const int64_t M = x.size(0), N = w.size(0), K = x.size(1);
  if (out.numel() == 0 || K == 0) {
    return out;  // nothing to compute (a launch with 0 blocks is an error), or all zeros
  }
  const c10::cuda::CUDAGuard guard(x.device());
  gemm_seed004_kernel<<<static_cast<unsigned int>(M), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(), static_cast<int>(N), static_cast<int>(K));
  LAUNCH_CHECK();
  return out;
}
