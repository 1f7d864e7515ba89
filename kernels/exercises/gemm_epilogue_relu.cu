// exercises/gemm_epilogue_relu.cu: YOUR TURN (notebooks/04_bias_fusion.ipynb).
//
//   linear_relu(x, w, bias) = relu(x @ w.T + bias)      (F.relu(F.linear(x, w, bias)))
//
// x (M, K), w (N, K) and bias (N,) as nn.Linear stores them; out (M, N), float32.
//
// kernels/gemm_bias.cu fuses a bias into rung 7's GEMM; this file fuses one more step. Neither
// touches the GEMM itself: the kernel, its tiles and its pipeline are common/gemm_pipelined.cuh's,
// unchanged. A new fusion is a new epilogue: a small struct whose
//     __device__ float operator()(float acc, int m, int n) const
// returns what to store at out[m][n], given the finished dot product acc. It runs once per
// output, in registers, after the K loop; the launcher passes it to gemm_pipelined::gemm_pipelined.
//
// The starting point adds the bias and stops there, so the checker in notebook 04 reports
// "Not yet" and says which expression the kernel computes instead. Your job: finish
// ReluBiasEpilogue::operator() below (one line), then re-run the notebook's checker cell.
// Before you do, decide: is relu(acc) + bias the same thing as relu(acc + bias)?

#include "common/gemm_pipelined.cuh"

// out = relu(acc + bias[n]). bias is read-only for the kernel's whole life (__ldg: the read-only
// path); a block's 256 threads read the same 128 of its values, which stay in L1.
struct ReluBiasEpilogue {
  const float* bias;
  __device__ __forceinline__ float operator()(float acc, int, int n) const {
    const float v = acc + __ldg(bias + n);
    return v;  // TODO: the ReLU
  }
};

// @export: relu(x @ w.T + bias), the bias and the ReLU in rung 7's epilogue
torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor bias) {
  check_gemm_inputs(x, w);
  CHECK_FLOAT_CUDA_INPUT(bias);
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == w.size(0), "bias must have shape [N] = [", num(w.size(0)),
              "] (one value per output column, w is ", shape_string(w), "), got ", shape_string(bias));
  CHECK_SAME_DEVICE(x, bias);
  return gemm_pipelined::gemm_pipelined(x, w, ReluBiasEpilogue{bias.data_ptr<float>()});
}
