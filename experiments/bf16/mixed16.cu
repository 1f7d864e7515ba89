// experiments/bf16/mixed16.cu: the mixed-input GEMM (common/gemm_mixed_input.cuh) alone, for mixed16_probe.py:
// out (M, N, float32) = x (M, K, bf16 or fp16) @ w (N, K, float32).T, w read as float32 and converted to x's
// dtype in registers on its way to the tensor cores, never written back; what torch.autocast computes as
// w.to(x.dtype) then a 16-bit GEMM, without the conversion's pass over w. The engine's header says how; this
// file hands its tiles to the plain epilogue (StoreEpilogue), through the same transposition the whole models'
// epilogue takes.
// @arch: 9.0a

#include "common/gemm_mixed_input.cuh"
#include "common/gemm_wgmma_writers16.cuh"

// @export: out (M, N) float32 = x @ w.T for CUDA x (M, K) bfloat16 or float16 and w (N, K) float32, w converted to x's dtype in registers (round to nearest even, as w.to(x.dtype)); K % 8 == 0, both contiguous and 16-byte aligned
torch::Tensor mixed_gemm(torch::Tensor x, torch::Tensor w) {
  CHECK_CUDA(x);
  CHECK_CUDA(w);
  CHECK_SAME_DEVICE(x, w);
  TORCH_CHECK(x.scalar_type() == torch::kBFloat16 || x.scalar_type() == torch::kHalf,
              "x must be bfloat16 or float16, got ", x.scalar_type());
  CHECK_FLOAT(w);
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && x.size(0) > 0 && w.size(0) > 0 &&
                  x.size(1) > 0,
              "x (M, K) and w (N, K) with every size positive, got x ", shape_string(x), " and w ", shape_string(w));
  TORCH_CHECK(x.size(1) % 8 == 0, "K = ", num(x.size(1)), " must be a multiple of 8 (TMA's 16-byte rows of x)");
  TORCH_CHECK(x.size(0) <= INT32_MAX && w.size(0) <= INT32_MAX, "M and N must fit in 32 bits");
  const torch::Tensor xc = x.contiguous();
  const torch::Tensor wc = w.contiguous();
  TORCH_CHECK(aligned16(xc.data_ptr()) && aligned16(wc.data_ptr()), "x and w must be 16-byte aligned");
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor out = torch::empty({xc.size(0), wc.size(0)}, xc.options().dtype(torch::kFloat));
  gemm_wgmma::with_half16(x.scalar_type(), [&](auto operand, auto) {
    gemm_mixed::run_mixed_epilogue<decltype(operand)>(xc, wc, gemm_wgmma::StoreEpilogue{out.data_ptr<float>(), nullptr});
  });
  return out;
}
