// gemm_bias.cu: nn.Linear with its bias fused into the GEMM's epilogue, and problem 94's second
// bias with it (notebooks/04_bias_fusion.ipynb).
//
//   linear_bias(x, w, bias)                    = x @ w.T + bias                 (F.linear(x, w, bias))
//   linear_two_biases(x, w, bias, extra_bias)  = (x @ w.T + bias) + extra_bias  (94's gemm, then + self.bias)
//
// x (M, K), w (N, K) and the biases (N,) as nn.Linear and problem 94 store them; out (M, N).
//
// The idea: the seeds weigh fusing the bias into the GEMM and back away from it. Seed 001 keeps
// cuBLAS and adds the biases in a second kernel, since fusing them "would require a custom GEMM
// implementation, which is not practical"; seed 000 plans a fused GEMM + bias kernel, then leaves
// the Linear to PyTorch because cuBLAS is faster than its GEMM (and along the way believes
// nn.Linear's bias starts at zero: it starts uniform in +-1/sqrt(in_features), like the weight).
// With a GEMM of our own (rung 7) the fusion is nearly free: the epilogue already holds every
// finished dot product in a register just before storing it, so adding bias[n] there costs one
// load (of N floats shared by all M rows: it stays in L1/L2) and one add per output, against
// K = 8192 FMAs per output. A separate pass instead reads and writes the whole (M, N) output once
// more: 2 x 4 x M x N bytes, 64 MB at 1024 x 8192, about 20 us at 3.3 TB/s, for every bias added
// that way.
//
// Both functions run rung 7's kernel (common/gemm_pipelined.cuh, the fastest rung of the ladder)
// unchanged, with a different epilogue: the main loop, its tiles and its pipeline are identical,
// so a difference in time between gemm_07_pipelined's `gemm` and these comes from the epilogue or
// from the compiler scheduling each instantiation a little differently (notebook 04 separates the
// two: a second bias that is faster than one is not the bias).
//
// The two biases of problem 94 stay two parameters: they are `gemm.bias` and `self.bias` in the
// model's state dict, and a drop-in replacement must load that state dict unchanged. Summing them
// once per call into one vector would cost a tiny extra kernel; summing them once at load time
// would break training and any later edit of either parameter. The epilogue adds both, in the
// order eager PyTorch does: (acc + bias) + extra_bias, each a float32 rounding.
//
// PREDICTION (written before measuring): the fused bias costs < 1% over the same GEMM without a
// bias (the issue's target), most likely below the run-to-run noise of about 0.3%; GEMM + a
// separate add costs about 20 us more per bias, some 0.6% of the 3.1 ms GEMM (H100): so even a
// perfect fusion buys ~1% for 94's first two ops. The GEMM is over 90% of these models' eager
// time (notebook 01): fusing what comes after it cannot buy more than the remaining 10%.

#include "common/gemm_pipelined.cuh"

// out = acc + bias[n]. __ldg: bias is read-only for the kernel's whole life, so it may come
// through the read-only path; all the block's threads reading the same 128 columns hit in L1.
struct BiasEpilogue {
  const float* bias;
  __device__ __forceinline__ float operator()(float acc, int, int n) const { return acc + __ldg(bias + n); }
};

// out = (acc + bias[n]) + extra_bias[n]: two roundings, as eager's addmm then add.
struct TwoBiasEpilogue {
  const float* bias;
  const float* extra_bias;
  __device__ __forceinline__ float operator()(float acc, int, int n) const {
    return (acc + __ldg(bias + n)) + __ldg(extra_bias + n);
  }
};

// A bias for the output columns of x @ w.T: float32, contiguous, (N,), on x's device. x and w are
// checked first, so that w.size(0) below is N.
static void check_bias(const torch::Tensor& bias, const char* name, const torch::Tensor& x, const torch::Tensor& w) {
  check_gemm_inputs(x, w);
  TORCH_CHECK(bias.is_cuda(), name, " must be a CUDA tensor, got one on ", bias.device(), " (move it with .cuda())");
  TORCH_CHECK(bias.scalar_type() == at::kFloat, name, " must be float32, got ", bias.scalar_type(), " (call .float())");
  TORCH_CHECK(bias.is_contiguous(), name, " must be contiguous (call .contiguous())");
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == w.size(0), name, " must have shape [N] = [", num(w.size(0)),
              "] (one value per output column, w is ", shape_string(w), "), got ", shape_string(bias));
  TORCH_CHECK(bias.device() == x.device(), name, " must be on x's device ", x.device(), ", got ", bias.device());
}

// @export: F.linear(x, w, bias) = x @ w.T + bias, the bias added in the GEMM's epilogue (rung 7's kernel)
torch::Tensor linear_bias(torch::Tensor x, torch::Tensor w, torch::Tensor bias) {
  check_bias(bias, "bias", x, w);
  return gemm_pipelined::gemm_pipelined(x, w, BiasEpilogue{bias.data_ptr<float>()});
}

// @export: problem 94's first two ops: (x @ w.T + bias) + extra_bias, both biases added in the epilogue
torch::Tensor linear_two_biases(torch::Tensor x, torch::Tensor w, torch::Tensor bias, torch::Tensor extra_bias) {
  check_bias(bias, "bias", x, w);
  check_bias(extra_bias, "extra_bias", x, w);
  return gemm_pipelined::gemm_pipelined(x, w, TwoBiasEpilogue{bias.data_ptr<float>(), extra_bias.data_ptr<float>()});
}
