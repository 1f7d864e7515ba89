// DRAFT probe: a pure read of x by bulk async copies (cp.async.bulk) into a ring of shared-memory
// stages, each stage's floats min-reduced by the block once it lands. Against the plain-load read probe.
#include <cuda.h>
#include "common/check.cuh"
#include "common/elementwise.cuh"
#include "common/reduce.cuh"
#include "bulk_copy.cuh"  // folded after the runs

#ifndef RB_CHUNK
#define RB_CHUNK (32 * 1024)
#endif
// Block b reads chunks b, b + grid, ... of RB_CHUNK bytes (the last one shorter), `stages` in flight.
__global__ void __launch_bounds__(256) read_bulk_kernel(const float* __restrict__ x, float* __restrict__ out,
                                                        int64_t nbytes, int stages) {
  extern __shared__ __align__(128) float ring[];
  __shared__ __align__(8) uint64_t full[kMaxStages];
  __shared__ float scratch[32];
  const int64_t chunks = (nbytes + RB_CHUNK - 1) / RB_CHUNK;
  const int64_t mine = (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x;
  auto bytes_of = [&](int64_t k) {
    const int64_t c = blockIdx.x + k * gridDim.x;
    return static_cast<uint32_t>(c * RB_CHUNK + RB_CHUNK <= nbytes ? RB_CHUNK : nbytes - c * RB_CHUNK);
  };
  auto issue = [&](int64_t k, int s) {
    const uint32_t b = bytes_of(k);
    mbar_expect_tx(&full[s], b);
    bulk_load(ring + s * (RB_CHUNK / 4), reinterpret_cast<const char*>(x) + (blockIdx.x + k * gridDim.x) * RB_CHUNK, b, &full[s]);
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) mbar_init(&full[s], 1);
    mbar_init_fence();
    for (int64_t k = 0; k < stages && k < mine; ++k) issue(k, static_cast<int>(k));
  }
  __syncthreads();
  float m = INFINITY;
  for (int64_t k = 0; k < mine; ++k) {
    const int s = static_cast<int>(k % stages);
    mbar_wait(&full[s], static_cast<uint32_t>((k / stages) & 1));
    const float4* v = reinterpret_cast<const float4*>(ring + s * (RB_CHUNK / 4));
    const int n4 = static_cast<int>(bytes_of(k) / 16);
    for (int i = threadIdx.x; i < n4; i += blockDim.x) {
      const float4 t = v[i];
      m = nan_min(m, nan_min(nan_min(t.x, t.y), nan_min(t.z, t.w)));
    }
    __syncthreads();  // every thread is done with stage s
    if (threadIdx.x == 0 && k + stages < mine) issue(k + stages, s);
  }
  m = block_min(m, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = m;
}

// @export: DRAFT pure read by bulk copies: each block's minimum; stages in flight per block, blocks_per_sm blocks
torch::Tensor read_bulk(torch::Tensor x, int64_t stages, int64_t blocks_per_sm) {
  CHECK_FLOAT_CUDA_INPUT(x);
  TORCH_CHECK(x.numel() % 4 == 0 && aligned16(x.data_ptr()) && stages <= kMaxStages, "draft");
  const int64_t nbytes = x.numel() * 4;
  const size_t smem = static_cast<size_t>(stages) * RB_CHUNK;
  C10_CUDA_CHECK(cudaFuncSetAttribute(read_bulk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  int sms = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.get_device()));
  const int64_t chunks = (nbytes + RB_CHUNK - 1) / RB_CHUNK;
  const int64_t grid = std::min<int64_t>(chunks, sms * blocks_per_sm);
  torch::Tensor out = torch::empty({grid}, x.options());
  read_bulk_kernel<<<static_cast<unsigned int>(grid), 256, smem, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), out.data_ptr<float>(), nbytes, static_cast<int>(stages));
  LAUNCH_CHECK();
  return out;
}
