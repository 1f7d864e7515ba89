// read_probe.cu: the pure-read yardstick of notebook 07. A kernel that reads every float of x
// once and does as little else as it can: one float4 per thread, a minimum over the block, one
// float written per block. Its time is what a kernel that only reads x cannot beat; the row
// minimum of problem 75 (min_bias_broadcast.cu) reads the same 33.5 MB and normalises every
// value on the way, so this, not a copy, is its fair yardstick.
//
//   read_probe(x)   x contiguous float32, numel a multiple of 4, 16-byte aligned: the minimum
//                   of each block of 1024 floats (NaN if the block holds one, like torch.min);
//                   read_probe(x).min() is x.min().
//
// Why not a copy: a store retires into the L2 without waiting for DRAM, and at 33.5 MB a copy's
// stores fit in an H100's L2, which can write them back after the copy has ended; a load is not
// done until DRAM answers. So at this size a copy counts bytes faster than any read moves them,
// and this probe reaches well under 80% of a same-size copy's bandwidth (notebook 07 measures
// both in one run). At 1 GiB, where the L2 holds a small part of the stores, a pure read keeps
// pace with a copy: the shortfall is the small size's. Of the pure reads tried (1 to 16 float4s
// per thread, bulk async copies into shared memory) this, the simplest, was the fastest
// (experiments/memory_bound/README.md).
#include "common/check.cuh"
#include "common/elementwise.cuh"
#include "common/reduce.cuh"

constexpr int kProbeThreads = 256;

__global__ void __launch_bounds__(kProbeThreads)
    read_probe_kernel(const float* __restrict__ x, float* __restrict__ block_min_out, int64_t n4) {
  __shared__ float scratch[32];
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kProbeThreads + threadIdx.x;
  float m = INFINITY;
  if (i < n4) {
    const float4 v = load4(x + 4 * i);
    m = nan_min(nan_min(v.x, v.y), nan_min(v.z, v.w));
  }
  m = block_min(m, scratch);  // every thread calls: block_min synchronises the block
  if (threadIdx.x == 0) block_min_out[blockIdx.x] = m;
}

// @export: read every float of x once (float4 loads) and return each block's minimum: the pure-read yardstick
torch::Tensor read_probe(torch::Tensor x) {
  CHECK_FLOAT_CUDA_INPUT(x);
  TORCH_CHECK(x.numel() % 4 == 0, "read_probe reads float4s: x must hold a multiple of 4 floats, got ",
              num(x.numel()), " (shape ", shape_string(x), ")");
  TORCH_CHECK(aligned16(x.data_ptr()), "read_probe reads float4s: x must start on a 16-byte boundary "
              "(a view into another tensor may not; pass x.clone())");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t n4 = x.numel() / 4;
  const int64_t blocks = (n4 + kProbeThreads - 1) / kProbeThreads;
  TORCH_CHECK(blocks <= INT32_MAX, "x is too large for one grid: ", num(x.numel()), " floats");
  torch::Tensor out = torch::empty({blocks}, x.options());
  if (blocks == 0) return out;
  read_probe_kernel<<<static_cast<unsigned int>(blocks), kProbeThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), out.data_ptr<float>(), n4);
  LAUNCH_CHECK();
  return out;
}
