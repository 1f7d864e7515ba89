// vector_add.cu: out = a + b, elementwise, for float32 CUDA tensors of any shape.
//
// The workbook's first kernel (notebooks/00_setup.ipynb): the smallest complete path from a
// .cu file to a Python function. utils.build.load_kernel("vector_add") hands this file to
// torch.utils.cpp_extension.load_inline, which compiles it with nvcc and binds every
// launcher marked `// @export` as a Python function.
//
// Two parts, as in every kernel file of the workbook:
//   vector_add_kernel  the __global__ function: what each GPU thread does;
//   vector_add         the host launcher: checks the inputs, picks the grid, launches on
//                      PyTorch's current stream, checks the launch.

#include <algorithm>

#include "common/check.cuh"
#include "common/device_cache.cuh"

// A grid-stride loop: thread t handles elements t, t + stride, t + 2*stride, ... where stride
// is the number of threads in the whole grid. The grid then need not match n: any n works
// (including n smaller than one block, and n not a multiple of the block size), and the
// launcher can size the grid for the GPU rather than for the data.
// __restrict__ promises the compiler that a, b and out do not overlap, so it may load through
// the read-only cache and reorder freely.
__global__ void vector_add_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ out, int64_t n) {
  // int64_t, not int: a tensor can hold more than 2^31 elements.
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = a[i] + b[i];
  }
}

// @export: out = a + b for float32 CUDA tensors of the same shape (a new tensor, computed on the current stream)
torch::Tensor vector_add(torch::Tensor a, torch::Tensor b) {
  // Bad input gets a Python RuntimeError that says what to fix, never a crash or garbage.
  CHECK_FLOAT_CUDA_INPUT(a);
  CHECK_FLOAT_CUDA_INPUT(b);
  CHECK_SAME_SHAPE(a, b);
  CHECK_SAME_DEVICE(a, b);

  // Allocate and launch on the inputs' GPU, whichever GPU is current in the caller.
  const c10::cuda::CUDAGuard guard(a.device());
  torch::Tensor out = torch::empty_like(a);
  const int64_t n = a.numel();
  if (n == 0) {
    return out;  // nothing to do, and a launch with zero blocks is an error
  }

  // 256 threads per block is a good default for a memory-bound kernel. The grid is as many
  // blocks as the GPU can keep resident at once (one full "wave"); the grid-stride loop covers
  // the rest of the elements, so larger n never needs a larger grid. The GPU's SM count and
  // threads per SM never change, so they are asked of the CUDA runtime once per device
  // (common/device_cache.cuh), not again on every call.
  const int threads = 256;
  const int sm_count = device_attribute<cudaDevAttrMultiProcessorCount>(a.get_device());
  const int threads_per_sm = device_attribute<cudaDevAttrMaxThreadsPerMultiProcessor>(a.get_device());
  const int64_t resident_blocks = static_cast<int64_t>(sm_count) * (threads_per_sm / threads);
  const int64_t blocks = std::min((n + threads - 1) / threads, resident_blocks);

  // PyTorch queues its own work on the current stream; launching anywhere else would race
  // with it (e.g. read inputs that an earlier op on that stream has not written yet).
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  vector_add_kernel<<<static_cast<unsigned int>(blocks), threads, 0, stream>>>(
      a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
  LAUNCH_CHECK();
  return out;
}
