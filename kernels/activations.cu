// activations.cu: the elementwise epilogues that follow the GEMMs, one pass each
// (notebooks/05_fused_activations.ipynb).
//
//   bias_hardtanh_mish(x, bias, min_val, max_val)   problem 94: mish(hardtanh(x + bias[col]))
//   swish_bias(x, bias)                             problem 37: x * sigmoid(x) + bias[col]
//   leaky_relu_x2(x, negative_slope)                problem 62: y = leaky_relu(x); y + y
//   mish(x)                                         the activation alone, any shape
//
// x is (rows, cols) row-major float32 (leaky_relu_x2 and mish take any shape), bias (cols,).
// The functions are PyTorch's, to a few units in the last place, special values included
// (common/activations.cuh says how each is written and why; Mish takes one exp where PyTorch
// takes exp, log1p and tanh). One of the seeds' slips lives here: nn.Hardtanh() clamps to
// [-1, 1], not [0, 2] (000) or [0, 20] (001). The range is a parameter, so a drop-in passes its
// module's min_val and max_val.
//
// The idea. Eager PyTorch runs one kernel per operator: x + bias, then hardtanh, then mish, each
// reading the whole tensor and writing a new one. These ops are a few dozen FLOPs per element,
// so each kernel is memory-bound, and the chain costs one round trip to DRAM per operator. A
// fused kernel loads an element once, applies the whole chain in registers, stores it once.
//
// Thread -> data: a grid-stride loop over the tensor viewed as float4s: thread i of the grid
// handles float4s i, i + S, i + 2S, ... (S = threads in the grid, sized by resident_grid in
// common/elementwise.cuh; two per trip, loaded together), so a warp moves 512 contiguous bytes
// per instruction. The channel of float4 i is (4i) % cols; with cols a multiple of 4 its 4
// floats share a row, and the 4 biases come in one 16-byte load (the 32 KB bias vector stays in
// L1/L2). Tensors whose cols is not a multiple of 4, or whose pointers are not 16-byte aligned,
// take a scalar loop with the same structure.
//
// Bytes and FLOPs: each element is read once (4 B) and written once (4 B); the bias adds
// cols * 4 B, from cache. Problem 94 (1024 x 8192) and 62 (1024 x 8192): 67.1 MB; problem 37
// (32768 x 4096): 1.07 GB. Eager moves 2 x that per operator: 94's three kernels 201 MB, 37's
// three (sigmoid, *, + bias; the * reads two tensors) 3.8 GB, 62's two (LeakyReLU, x + x) 134 MB.
// Intensity: 94 ~ 25 FLOP per 8 B (one expf and a division: 3 FLOP/B), 37 ~ 25 (3 FLOP/B),
// 62 ~ 3 (0.4 FLOP/B): far below the ridge point of an H100 (notebook 05 computes it from the
// recorded ceilings), so all three are memory-bound. (With PyTorch's exp-log1p-tanh form of Mish,
// ~50 instructions per element, 94 came close to what the SMs can issue per element at full
// bandwidth; the PREDICTION below was written for that form.)
//
// PREDICTION (written before measuring, H100, copy bandwidth ~3000 GB/s): swish_bias and
// leaky_relu_x2 at 85-90% of copy bandwidth (67.1 MB in ~25 us; 1.07 GB in ~0.40 ms),
// bias_hardtanh_mish at 75-85% (issue-bound in places); each 2.5-3.5x faster than the eager
// chain it replaces (2-3 kernels of the same memory-bound kind, plus launches).
//
// MEASURED: notebook 05 times each kernel against a copy of the same size and the eager chain it
// replaces, in one run, records it in results/<device>/fused_activations.json (with the device,
// torch version and commit) and holds the PREDICTION against it. The yardstick is the same-size
// copy, not the 1 GiB copy bandwidth the PREDICTION assumed: at 33.5 MB a copy's stores fit in the
// L2 and it measures faster than at 1 GiB; the kernels write the same bytes, and no kernel moves
// them faster than a copy does. The history: experiments/memory_bound/README.md.

#include "common/activations.cuh"
#include "common/check.cuh"
#include "common/elementwise.cuh"

constexpr int kThreads = 256;

// y = op(x) over float4 i of n4, channel (4i) % cols (only computed when op has a bias).
// Each trip through the loop handles two float4s a grid apart, both loads issued before either
// is used: 32 bytes in flight per thread rather than 16, so that memory stays busy while a
// thread spends its time on Mish's exp and division.
template <class Op>
__global__ void __launch_bounds__(kThreads)
    map_vec4_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n4, int64_t cols, Op op) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += 2 * stride) {
    const int64_t j = i + stride;
    const float4 a = load4(x + 4 * i);
    const float4 b = j < n4 ? load4(x + 4 * j) : a;
    store4(y + 4 * i, apply4(op, a, Op::kHasBias ? index_mod(4 * i, cols) : 0));
    if (j < n4) store4(y + 4 * j, apply4(op, b, Op::kHasBias ? index_mod(4 * j, cols) : 0));
  }
}

// Problem 94's chain as notebook 05 launches it from Python (`// @launch`): the loop of
// map_vec4_kernel for BiasHardtanhMish, the operation built from plain arguments (a launchable
// kernel takes pointers and numbers). bias_hardtanh_mish below runs the same code.
// @launch
__global__ void __launch_bounds__(kThreads)
    bias_hardtanh_mish_vec4(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ y,
                            int64_t n4, int64_t cols, float lo, float hi) {
  const BiasHardtanhMish op{bias, lo, hi};
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += 2 * stride) {
    const int64_t j = i + stride;
    const float4 a = load4(x + 4 * i);
    const float4 b = j < n4 ? load4(x + 4 * j) : a;
    store4(y + 4 * i, apply4(op, a, index_mod(4 * i, cols)));
    if (j < n4) store4(y + 4 * j, apply4(op, b, index_mod(4 * j, cols)));
  }
}

// The same, one float at a time: any cols, any alignment.
template <class Op>
__global__ void __launch_bounds__(kThreads)
    map_scalar_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, int64_t cols, Op op) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = apply1(op, x[i], Op::kHasBias ? index_mod(i, cols) : 0);
  }
}

// y = op(x) elementwise, for x already checked (float32 CUDA contiguous). cols: the channel count
// for an op with a bias (x is (rows, cols)), ignored otherwise.
template <class Op>
static torch::Tensor map(const torch::Tensor& x, int64_t cols, Op op) {
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor y = torch::empty_like(x);
  const int64_t n = x.numel();
  if (n == 0) {
    return y;  // nothing to do, and a launch with zero blocks is an error
  }
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const bool vec = n % 4 == 0 && (!Op::kHasBias || cols % 4 == 0) && aligned16(xp) && aligned16(yp) &&
                   (!Op::kHasBias || aligned16(op.bias));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (vec) {
    const int64_t n4 = n / 4;
    const unsigned int grid = resident_grid(map_vec4_kernel<Op>, kThreads, 0, (n4 + 2 * kThreads - 1) / (2 * kThreads),
                                            x.get_device());
    map_vec4_kernel<Op><<<grid, kThreads, 0, stream>>>(xp, yp, n4, cols, op);
  } else {
    const unsigned int grid = resident_grid(map_scalar_kernel<Op>, kThreads, 0, (n + kThreads - 1) / kThreads,
                                            x.get_device());
    map_scalar_kernel<Op><<<grid, kThreads, 0, stream>>>(xp, yp, n, cols, op);
  }
  LAUNCH_CHECK();
  return y;
}

// x (rows, cols) and bias (cols,), both float32 CUDA contiguous on one device.
static void check_x_and_bias(const torch::Tensor& x, const torch::Tensor& bias) {
  CHECK_FLOAT_CUDA_INPUT(x);
  CHECK_FLOAT_CUDA_INPUT(bias);
  CHECK_SAME_DEVICE(x, bias);
  TORCH_CHECK(x.dim() == 2, "x must be 2-D (rows, cols), got shape ", shape_string(x));
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(1), "bias must have shape [", num(x.size(1)),
              "] (one per column of x ", shape_string(x), "), got ", shape_string(bias));
}

// @export: problem 94: mish(hardtanh(x + bias, min_val, max_val)) for x (rows, cols), bias (cols,); nn.Hardtanh() is [-1, 1]
torch::Tensor bias_hardtanh_mish(torch::Tensor x, torch::Tensor bias, double min_val, double max_val) {
  check_x_and_bias(x, bias);
  TORCH_CHECK(min_val <= max_val, "Hardtanh needs min_val <= max_val, got ", num(min_val), " and ",
              num(max_val));
  return map(x, x.size(1), BiasHardtanhMish{bias.data_ptr<float>(), static_cast<float>(min_val),
                                            static_cast<float>(max_val)});
}

// @export: problem 37: x * sigmoid(x) + bias for x (rows, cols), bias (cols,)
torch::Tensor swish_bias(torch::Tensor x, torch::Tensor bias) {
  check_x_and_bias(x, bias);
  return map(x, x.size(1), SwishBias{bias.data_ptr<float>()});
}

// @export: problem 62: y = leaky_relu(x, negative_slope); y + y, for x of any shape
torch::Tensor leaky_relu_x2(torch::Tensor x, double negative_slope) {
  CHECK_FLOAT_CUDA_INPUT(x);
  return map(x, 1, LeakyReluX2{nullptr, static_cast<float>(negative_slope)});
}

// @export: mish(x) = x * tanh(softplus(x)) as torch.nn.functional.mish computes it, for x of any shape
torch::Tensor mish(torch::Tensor x) {
  CHECK_FLOAT_CUDA_INPUT(x);
  return map(x, 1, MishOp{});
}
