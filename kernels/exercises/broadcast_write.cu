// exercises/broadcast_write.cu: YOUR TURN (notebooks/07_broadcasting_pitfall.ipynb).
//
//   min_bias_broadcast(rowmin, bias) = rowmin + bias      rowmin (N, 1), bias (1, C, 1, 1)
//                                    -> out (1, C, N, 1), out[0, c, n, 0] = rowmin[n] + bias[c]
//
// Problem 75's last step, the broadcast that seed 002 took for an error. The shape is settled
// (notebook 07 derives it); this exercise is about where each element goes. A contiguous
// (1, C, N, 1) tensor is C rows of N floats: element (c, n) sits at flat index c * N + n, so
// consecutive addresses run along n, the sample, and the channel changes every N floats.
//
// The kernel writes the C * N outputs with a grid-stride loop over the flat index i, and must
// recover (c, n) from i. The starting point recovers them as if the output were laid out
// (N, C), sample-major: the shape is right, every element is written, and most values land in
// the wrong place. The checker in notebook 07 says "Not yet" and which layout it found. Fix the
// two lines marked TODO, then re-run the checker cell (it recompiles this file).

#include "common/check.cuh"
#include "common/elementwise.cuh"

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    broadcast_kernel(const float* __restrict__ rowmin, const float* __restrict__ bias, float* __restrict__ out,
                     int64_t N, int64_t C) {
  const int64_t total = N * C;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t n = i / C;  // TODO: which (c, n) does flat index i of a (1, C, N, 1) tensor hold?
    const int64_t c = i % C;  // TODO
    out[i] = rowmin[n] + bias[c];
  }
}

// @export: rowmin (N, 1) + bias (1, C, 1, 1) -> (1, C, N, 1), as PyTorch broadcasts it
torch::Tensor min_bias_broadcast(torch::Tensor rowmin, torch::Tensor bias) {
  CHECK_FLOAT_CUDA_INPUT(rowmin);
  CHECK_FLOAT_CUDA_INPUT(bias);
  CHECK_SAME_DEVICE(rowmin, bias);
  TORCH_CHECK(rowmin.dim() == 2 && rowmin.size(1) == 1, "rowmin must have shape [N, 1], got ", shape_string(rowmin));
  TORCH_CHECK(bias.dim() == 4 && bias.size(0) == 1 && bias.size(2) == 1 && bias.size(3) == 1,
              "bias must have shape [1, C, 1, 1], got ", shape_string(bias));
  const int64_t N = rowmin.size(0);
  const int64_t C = bias.size(1);
  const c10::cuda::CUDAGuard guard(rowmin.device());
  torch::Tensor out = torch::empty({1, C, N, 1}, rowmin.options());
  if (N == 0 || C == 0) return out;
  const unsigned int grid = resident_grid(broadcast_kernel, kThreads, 0, (N * C + kThreads - 1) / kThreads,
                                          rowmin.get_device());
  broadcast_kernel<<<grid, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(rowmin.data_ptr<float>(),
                                                                             bias.data_ptr<float>(),
                                                                             out.data_ptr<float>(), N, C);
  LAUNCH_CHECK();
  return out;
}
