// exercises/bias_gelu.cu: YOUR TURN (notebooks/05_fused_activations.ipynb).
//
//   bias_gelu(x, bias) = F.gelu(x + bias)     x (rows, cols), bias (cols,), float32
//
// F.gelu's default (approximate="none") is the exact GELU, v * Phi(v), with Phi the standard
// normal CDF (torch.nn.GELU's documentation writes Phi out; CUDA's math library has the function
// it is built on, in float32). The tanh form is another function: the checker tells them apart.
//
// A new fusion on the elementwise path is a new *operation*: a small struct with
//     __device__ float f(float v, float b) const
// returning what to store for element v of a column whose bias is b, the same interface as
// BiasHardtanhMish, SwishBias and LeakyReluX2 in common/activations.cuh. The kernel below reads
// each element once, applies the operation in registers and writes it once, one float per
// thread per trip (kernels/activations.cu adds the float4 path that makes it fast; the
// arithmetic is the same).
//
// The starting point adds the bias and stops, so the checker in notebook 05 says "Not yet" and
// names the expression the kernel computes instead. Your job: finish gelu_f (one line), then
// re-run the checker cell (it recompiles this file).

#include "common/activations.cuh"
#include "common/check.cuh"
#include "common/elementwise.cuh"

__device__ __forceinline__ float gelu_f(float v) {
  return v;  // TODO: GELU, as F.gelu computes it
}

// y = gelu(v + bias[col]).
struct BiasGelu {
  static constexpr bool kHasBias = true;
  const float* bias;
  __device__ float f(float v, float b) const { return gelu_f(v + b); }
};

constexpr int kThreads = 256;

// Grid-stride over the flat tensor; the channel of element i is i % cols.
template <class Op>
__global__ void __launch_bounds__(kThreads)
    map_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, int64_t cols, Op op) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = apply1(op, x[i], index_mod(i, cols));
  }
}

// @export: F.gelu(x + bias) for x (rows, cols) and bias (cols,), float32 CUDA contiguous
torch::Tensor bias_gelu(torch::Tensor x, torch::Tensor bias) {
  CHECK_FLOAT_CUDA_INPUT(x);
  CHECK_FLOAT_CUDA_INPUT(bias);
  CHECK_SAME_DEVICE(x, bias);
  TORCH_CHECK(x.dim() == 2, "x must be 2-D (rows, cols), got shape ", shape_string(x));
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(1), "bias must have shape [", num(x.size(1)),
              "] (one per column of x ", shape_string(x), "), got ", shape_string(bias));
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor y = torch::empty_like(x);
  const int64_t n = x.numel();
  if (n == 0) return y;
  const BiasGelu op{bias.data_ptr<float>()};
  const unsigned int grid = resident_grid(map_kernel<BiasGelu>, kThreads, 0, (n + kThreads - 1) / kThreads,
                                          x.get_device());
  map_kernel<BiasGelu><<<grid, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(),
                                                                                y.data_ptr<float>(), n, x.size(1), op);
  LAUNCH_CHECK();
  return y;
}
