// experiments/gemm_schedules/variants.cu: the wgmma engine's (common/gemm_wgmma.cuh) configurations
// side by side, out = x @ w.T, for probe.py: TF32 at block widths 64, 128 and 256; 3xTF32 on
// pre-split operands (today's strict tier: x's and w's small parts made before the kernel) and with
// w's small parts made in shared memory by the consumers (no pass over w), each at widths 64 and 128.
// (The producer's idle warps making them instead measured slower: README.md.)
// @arch: 9.0a

#include "common/gemm_wgmma_host.cuh"
#include "common/tf32_operands.cuh"

namespace {
using namespace gemm_wgmma;

torch::Tensor output_for(const torch::Tensor& x, const torch::Tensor& w) {
  CHECK_FLOAT_CUDA_INPUT(x);
  CHECK_FLOAT_CUDA_INPUT(w);
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && x.size(1) % 4 == 0 && x.size(0) > 0 &&
                  w.size(0) > 0,
              "x (M, K) and w (N, K), K % 4 == 0 and every size positive");
  TORCH_CHECK(tma_ok(x, w), "x and w must be 16-byte aligned");
  return torch::empty({x.size(0), w.size(0)}, x.options());
}
}  // namespace

// @export: TF32, block 128 x bn (64, 128 or 256)
torch::Tensor tf32(torch::Tensor x, torch::Tensor w, int64_t bn) {
  torch::Tensor out = output_for(x, w);
  const StoreEpilogue epi{out.data_ptr<float>(), nullptr};
  switch (bn) {
    case 64: run_epilogue<Config<64, 6, false, 0>>(x, w, epi); break;
    case 128: run_epilogue<Config<128, 6, false, 0>>(x, w, epi); break;
    case 256: run_epilogue<Tf32Config>(x, w, epi); break;
    default: TORCH_CHECK(false, "bn must be 64, 128 or 256, got ", num(bn));
  }
  return out;
}

// @export: 3xTF32 on pre-split operands: x and its small parts, w and its small parts (tf32_residual), block 128 x bn (64 or 128)
torch::Tensor presplit(torch::Tensor x, torch::Tensor x_small, torch::Tensor w, torch::Tensor w_small, int64_t bn) {
  torch::Tensor out = output_for(x, w);
  const StoreEpilogue epi{out.data_ptr<float>(), nullptr};
  switch (bn) {
    case 64: run_parts_epilogue<Config<64, 4, true, PROMOTE_K / BK, true>>(x, x_small, w, w_small, epi); break;
    case 128: run_parts_epilogue<PresplitConfig<>>(x, x_small, w, w_small, epi); break;
    default: TORCH_CHECK(false, "bn must be 64 or 128, got ", num(bn));
  }
  return out;
}

// @export: 3xTF32 with w's small parts made in shared memory by the consumers (SplitWConfig): x and its small parts, w raw, block 128 x bn (64 or 128)
torch::Tensor split_w(torch::Tensor x, torch::Tensor x_small, torch::Tensor w, int64_t bn) {
  torch::Tensor out = output_for(x, w);
  const StoreEpilogue epi{out.data_ptr<float>(), nullptr};
  switch (bn) {
    case 64: run_split_w_epilogue<SplitWConfig<64, 4>>(x, x_small, w, epi); break;
    case 128: run_split_w_epilogue<SplitWConfig<128, 3>>(x, x_small, w, epi); break;
    default: TORCH_CHECK(false, "bn must be 64 or 128, got ", num(bn));
  }
  return out;
}

// @export: the small parts of v's 3xTF32 split, v itself the big parts (one pass over v)
torch::Tensor residual(torch::Tensor v) {
  CHECK_FLOAT_CUDA_INPUT(v);
  return tf32_operands::tf32_residual(v.contiguous());
}
