// gemm_01_naive.cu: out = x @ w.T in float32, x (M, K) and w (N, K) row-major as nn.Linear
// stores them, out (M, N). Rung 1 of the SGEMM ladder (notebooks/02_naive_gemm.ipynb): the
// first GEMM kernel seed 004 wrote, its mapping kept as the seed wrote it, so that we can
// measure why it is slow.
//
// The idea: one thread per output element, out[m][n] = sum_k x[m][k] * w[n][k], a plain loop
// over k in registers.
//
// Thread -> data: block m computes row m of out (blockIdx.x = m); thread t of the block computes
// columns n = t, t + 256, t + 512, ... of that row. So the 32 lanes of a warp hold 32
// consecutive columns n0 .. n0+31 of one row, and at every step k of their loops they read
//   x[m][k]             one address for the whole warp: a broadcast, 1 sector (32 bytes)
//                       fetched for 4 useful bytes;
//   w[n0 + lane][k]     32 addresses K floats apart (w's rows are K-contiguous, and the warp
//                       walks across rows): uncoalesced, 32 separate sectors, 1024 bytes
//                       fetched for 128 useful bytes, 8x what the arithmetic needs.
// Each sector holds 8 consecutive k of one row, so the L1 cache can serve a thread's next 7
// steps if it keeps the line, and DRAM traffic is less than 8x; but every load instruction still
// asks the L1 for 32 different lines, and the L1 answers them one after another. That is the
// bottleneck: about 32 L1 cycles per warp and step, for 32 fused multiply-adds that the SM
// could issue in a quarter of a cycle.
//
// Arithmetic intensity: per thread and step, 2 FLOP (one FMA) for 8 bytes requested (one x, one
// w float) = 0.25 FLOP/byte; counted in sectors actually moved, a warp's step is 64 FLOP for
// 32 + 1024 bytes = 0.06 FLOP/byte. Nothing loaded is reused by another thread except the
// broadcast x. For comparison, an H100 needs about 20 FLOP per byte of DRAM traffic (an H200,
// with faster memory, about 14) before FP32 arithmetic, not memory, becomes the limit.
//
// Parallelism: one block per row, so the grid has M blocks. For M = 1024 that is about one
// resident wave on a 132-SM GPU; for M = 1 (a single sample) one SM works and 131 idle.
//
// PREDICTION (written before measuring): about 1% of cuBLAS SGEMM (0.5-2%), i.e. a few hundred
// GFLOP/s where cuBLAS reaches ~50 TFLOP/s, limited by the L1's 32 transactions per load
// instruction (about 1/128 of the FMA rate), not by DRAM bandwidth or by arithmetic.
//
// Seed 004 dropped this kernel as "very slow" because each thread runs K = 8192 iterations;
// but every GEMM does M * N * K multiply-adds in some order. The count is not the problem, the
// access pattern above is.
//
// What changed from seed 004's linear_kernel, and why:
// - The seed never launched it. Its thread computes only column n = threadIdx.x and returns if
//   n >= N, which needs a block of N threads: for N = 8192 that launch fails (the limit is
//   1024), and with 256 threads per block only columns 0..255 would be written, leaving 97% of
//   out as garbage. Here each thread loops n = threadIdx.x, threadIdx.x + 256, ... while n < N.
// - Row offsets (m * K, n * K, m * N) are computed in int64_t: M * N alone reaches 2^27 for
//   problem 37 (32768 x 4096), and larger shapes pass 2^31, where int arithmetic overflows.
// - No bias: this rung computes x @ w.T only; notebook 04 fuses the bias in as an epilogue.
// - The seed's `if (batch >= batch_size) return;` is gone: the grid has exactly M blocks.
// - const and __restrict__ on the pointers, as in every kernel of the workbook, so that the
//   rungs of the ladder differ only in their mapping of threads to data.

#include "common/gemm_launch.cuh"

// 256 threads (8 warps, each covering 32 consecutive columns): the workbook's usual block size,
// since the seed's kernel left it open. Rung 2 keeps 256 so the comparison is about the mapping.
constexpr int kThreads = 256;

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
