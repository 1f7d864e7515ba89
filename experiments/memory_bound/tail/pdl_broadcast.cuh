// DRAFT (exploration run 7): the broadcast as a programmatic dependent (PDL) of the kernel before
// it, shared by tail_pdl.cu and ../bulk/rowmin_bulk.cu (folded here after the runs; each defined
// it inline).
#pragma once
#include "common/check.cuh"
#include "common/elementwise.cuh"

constexpr int kPdlThreads = 256;

template <bool kWait>
__global__ void __launch_bounds__(kPdlThreads)
    broadcast_pdl_kernel(const float* __restrict__ rowmin, const float* __restrict__ bias, float* __restrict__ out,
                         int64_t N, int64_t C) {
  if (kWait) asm volatile("griddepcontrol.wait;" ::: "memory");  // rowmin is complete and visible
  const int64_t n = 4 * (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x);
  if (n >= N) return;
  const float4 m = load4(rowmin + n);
  for (int64_t c = blockIdx.y; c < C; c += gridDim.y) {
    const float b = bias[c];
    store4(out + c * N + n, make_float4(m.x + b, m.y + b, m.z + b, m.w + b));
  }
}

// out (1, C, N, 1) = rowmin + bias, the broadcast launched as a PDL dependent when pdl.
inline torch::Tensor broadcast_pdl(const torch::Tensor& rowmin, const torch::Tensor& bias, int64_t N, int64_t C,
                                   bool pdl) {
  TORCH_CHECK(N % 4 == 0, "draft: N % 4 == 0");
  torch::Tensor out = torch::empty({1, C, N, 1}, rowmin.options());
  const int64_t n4 = N / 4;
  const int threads = static_cast<int>(std::min<int64_t>(kPdlThreads, (n4 + 31) / 32 * 32));
  const int64_t grid_x = (n4 + threads - 1) / threads;
  const int64_t resident = resident_blocks(broadcast_pdl_kernel<true>, threads, 0, rowmin.get_device());
  const int64_t grid_y = std::max<int64_t>(1, std::min<int64_t>({C, 65535, resident / grid_x}));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned int>(grid_x), static_cast<unsigned int>(grid_y));
  cfg.blockDim = dim3(threads);
  cfg.stream = at::cuda::getCurrentCUDAStream();
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  const float* mp = rowmin.data_ptr<float>();
  const float* bp = bias.data_ptr<float>();
  float* op = out.data_ptr<float>();
  if (pdl) {
    C10_CUDA_CHECK(cudaLaunchKernelEx(&cfg, broadcast_pdl_kernel<true>, mp, bp, op, N, C));
  } else {
    C10_CUDA_CHECK(cudaLaunchKernelEx(&cfg, broadcast_pdl_kernel<false>, mp, bp, op, N, C));
  }
  LAUNCH_CHECK();
  return out;
}
