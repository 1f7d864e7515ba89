// exercises/scale_add.cu: YOUR TURN (notebooks/00_setup.ipynb). out = alpha * a + b.
//
// This starting point compiles and runs, but ignores alpha: the checker in notebook 00
// reports FAIL on purpose. Make it compute alpha * a + b, re-run the checker cell, and the
// report turns to PASS. (The launcher already validates its inputs like vector_add's does.)

#include <algorithm>

#include "common/check.cuh"

__global__ void scale_add_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                 float* __restrict__ out, float alpha, int64_t n) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = a[i] + b[i];  // TODO: use alpha
  }
}

// @export: out = alpha * a + b for float32 CUDA tensors of the same shape
torch::Tensor scale_add(torch::Tensor a, torch::Tensor b, double alpha) {
  CHECK_FLOAT_CUDA_INPUT(a);
  CHECK_FLOAT_CUDA_INPUT(b);
  CHECK_SAME_SHAPE(a, b);
  CHECK_SAME_DEVICE(a, b);
  const c10::cuda::CUDAGuard guard(a.device());
  torch::Tensor out = torch::empty_like(a);
  const int64_t n = a.numel();
  if (n == 0) return out;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 65535);
  scale_add_kernel<<<static_cast<unsigned int>(blocks), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), static_cast<float>(alpha), n);
  LAUNCH_CHECK();
  return out;
}
