// experiments/bf16/gemm16.cu: the wgmma engine (common/gemm_wgmma.cuh) on 16-bit operands, for probe.py:
// out (M, N, fp32 or x's dtype) = x (M, K) @ w (N, K).T, x and w both bf16 or both fp16, on the TF32 rung's schedule and
// main loop with the operand trait swapped (Bf16Operand, Fp16Operand: common/gemm_wgmma_types.cuh) and the
// block's width chosen by the caller. The first test of the engine as types: a new element type as a
// trait, its wgmma wrappers and a Config, the rest of the kernel untouched. The ladder's rung 11
// (kernels/gemm_11_wgmma_bf16.cu) is out_kind 1 at bn = 256.
// @arch: 9.0a

#include "common/gemm_wgmma_host.cuh"
#include "common/gemm_wgmma_writers16.cuh"

namespace {
using namespace gemm_wgmma;

template <class Operand, class Epi>
void run16(const torch::Tensor& x, const torch::Tensor& w, const Epi& epi, int64_t bn) {
  switch (bn) {
    case 128: run_epilogue<Half16Config<Operand, 128, 6>>(x, w, epi); break;
    case 256: run_epilogue<Half16Config<Operand, 256, 4>>(x, w, epi); break;
    default: TORCH_CHECK(false, "bn must be 128 or 256, got ", num(bn));
  }
}
}  // namespace

// @export: out (M, N) = x @ w.T for CUDA x (M, K) and w (N, K), both bfloat16 or both float16, K % 8 == 0 (TMA's 16-byte rows), on wgmma blocks 128 x bn (128 or 256); out_kind: 0 float32, 1 x's dtype (rounded in the epilogue: Quad16Writer)
torch::Tensor gemm16(torch::Tensor x, torch::Tensor w, int64_t bn, int64_t out_kind) {
  CHECK_CUDA(x);
  CHECK_CUDA(w);
  CHECK_SAME_DEVICE(x, w);
  TORCH_CHECK(x.scalar_type() == w.scalar_type() &&
                  (x.scalar_type() == torch::kBFloat16 || x.scalar_type() == torch::kHalf),
              "x and w must both be bfloat16 or both float16, got ", x.scalar_type(), " and ", w.scalar_type());
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && x.size(0) > 0 && w.size(0) > 0 &&
                  x.size(1) > 0,
              "x (M, K) and w (N, K) with every size positive, got x ", shape_string(x), " and w ", shape_string(w));
  TORCH_CHECK(out_kind == 0 || out_kind == 1, "out_kind must be 0 or 1, got ", num(out_kind));
  const torch::Tensor xc = x.contiguous();
  const torch::Tensor wc = w.contiguous();
  TORCH_CHECK(tma_ok(xc, wc), "TMA needs K % 8 == 0 for 16-bit values and 16-byte-aligned x and w");
  torch::Tensor out =
      torch::empty({xc.size(0), wc.size(0)}, out_kind == 0 ? xc.options().dtype(torch::kFloat) : xc.options());
  const bool bf16 = x.scalar_type() == torch::kBFloat16;
  if (out_kind == 0) {
    const StoreEpilogue epi{out.data_ptr<float>(), nullptr};
    bf16 ? run16<Bf16Operand>(xc, wc, epi, bn) : run16<Fp16Operand>(xc, wc, epi, bn);
  } else if (bf16) {
    run16<Bf16Operand>(xc, wc, Store16Epilogue<__nv_bfloat16>{{nullptr, nullptr}, static_cast<__nv_bfloat16*>(out.data_ptr())}, bn);
  } else {
    run16<Fp16Operand>(xc, wc, Store16Epilogue<__half>{{nullptr, nullptr}, static_cast<__half*>(out.data_ptr())}, bn);
  }
  return out;
}
