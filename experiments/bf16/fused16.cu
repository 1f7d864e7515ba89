// experiments/bf16/fused16.cu: problems 94, 37 and 62 as a model in bf16 or fp16 would run them, in one kernel:
// x @ w.T on the wgmma engine's 16-bit operands (rung 11's configuration) with the rest of the model in its
// epilogue in float32 (common/gemm_epilogue_groupnorm.cuh with its parameters and its output in the model's
// dtype), the output rounded once as it is stored. For fused16_probe.py: what the drop-ins' bf16 and fp16 forward
// would be, checked and timed before any drop-in runs it. Forward only; wide tiles at every M; groups of 16, 32
// or 64 channels; K % 8 == 0 (TMA's 16-byte rows of 16-bit values); an sm_90 GPU.
// @arch: 9.0a

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/activations.cuh"
#include "common/gemm_epilogue_groupnorm.cuh"
#include "common/gemm_wgmma_host.cuh"
#include "common/gemm_wgmma_writers16.cuh"

namespace {
using namespace gemm_wgmma;
using gemm_epilogue::GroupNormEpilogue;
using gemm_epilogue::Sink;

// x (M, K), w (C, K) and every parameter of one 16-bit dtype, on one sm_90 device; the fused kernel's conditions.
void check16(const torch::Tensor& x, const torch::Tensor& w, const std::vector<torch::Tensor>& params, int64_t G) {
  CHECK_CUDA(x);
  TORCH_CHECK(x.scalar_type() == torch::kBFloat16 || x.scalar_type() == torch::kHalf,
              "x must be bfloat16 or float16, got ", x.scalar_type());
  for (const torch::Tensor& t : params) {
    TORCH_CHECK(t.scalar_type() == x.scalar_type(), "every tensor must have x's dtype ", x.scalar_type(), ", got ",
                t.scalar_type());
    CHECK_SAME_DEVICE(x, t);
  }
  CHECK_SAME_DEVICE(x, w);
  TORCH_CHECK(w.scalar_type() == x.scalar_type(), "w must have x's dtype ", x.scalar_type(), ", got ", w.scalar_type());
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && x.size(1) > 0,
              "x (M, K) and w (C, K) with the same K > 0, got x ", shape_string(x), " and w ", shape_string(w));
  TORCH_CHECK(x.size(1) % 8 == 0, "K % 8 == 0 (TMA's row stride), got K = ", num(x.size(1)));
  const int64_t C = w.size(0);
  TORCH_CHECK(G > 0 && C % G == 0 && (C / G == 16 || C / G == 32 || C / G == 64),
              "groups of 16, 32 or 64 channels, got C = ", num(C), " and num_groups = ", num(G));
  for (const torch::Tensor& t : params) {
    TORCH_CHECK(t.dim() == 1 && t.size(0) == C, "every parameter must have shape [", num(C), "], got ", shape_string(t));
    TORCH_CHECK(t.is_contiguous(), "every parameter must be contiguous (the epilogue reads it by its pointer)");
  }
  TORCH_CHECK(is_sm90(x.get_device()), "wgmma: an sm_90 GPU");
}

// out (M, C) = post(GroupNorm(pre(x @ w.T + lb))) in x's dtype, pre_bias the pre functor's bias (or undefined).
template <class Pre, class Post>
torch::Tensor model16(const torch::Tensor& x_, const torch::Tensor& w_, const torch::Tensor& lb, Pre pre,
                      const torch::Tensor& pre_bias, int64_t G, const torch::Tensor& gamma, const torch::Tensor& beta,
                      double eps, Post post) {
  const torch::Tensor x = x_.contiguous(), w = w_.contiguous();
  TORCH_CHECK(tma_ok(x, w), "x and w must start 16-byte aligned");
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor out = torch::empty({x.size(0), w.size(0)}, x.options());
  if (out.numel() == 0) return out;
  const auto run = [&](auto operand, auto element) {
    using Operand = decltype(operand);
    using T = decltype(element);
    if (pre_bias.defined()) pre.bias = reinterpret_cast<const float*>(pre_bias.data_ptr());  // read as T's
    const auto ptr = [](const torch::Tensor& t) { return reinterpret_cast<const T*>(t.data_ptr()); };
    const auto with_width = [&](auto d) {
      constexpr int D = decltype(d)::value;
      GroupNormEpilogue<D, Pre, Post, Sink::STORE, T, T> epi{ptr(lb), pre, ptr(gamma), ptr(beta),
                                                             static_cast<float>(eps), post,
                                                             reinterpret_cast<T*>(out.data_ptr()), nullptr, nullptr};
      run_epilogue<Half16Config<Operand, 256, 4>>(x, w, epi);
    };
    switch (w.size(0) / G) {
      case 16: with_width(std::integral_constant<int, 16>{}); break;
      case 32: with_width(std::integral_constant<int, 32>{}); break;
      default: with_width(std::integral_constant<int, 64>{});
    }
  };
  if (x.scalar_type() == torch::kBFloat16) {
    run(Bf16Operand{}, __nv_bfloat16{});
  } else {
    run(Fp16Operand{}, __half{});
  }
  return out;
}
}  // namespace

// @export: problem 94 in bf16 or fp16, one kernel: group_norm(mish(hardtanh(x @ w.T + linear_bias + bias, min_val, max_val)), num_groups, gamma, beta, eps), every tensor of x's dtype
torch::Tensor linear_bias_hardtanh_mish_group_norm16(torch::Tensor x, torch::Tensor w, torch::Tensor linear_bias,
                                                     torch::Tensor bias, double min_val, double max_val,
                                                     int64_t num_groups, torch::Tensor gamma, torch::Tensor beta,
                                                     double eps) {
  check16(x, w, {linear_bias, bias, gamma, beta}, num_groups);
  const BiasHardtanhMishFast pre{nullptr, static_cast<float>(min_val), static_cast<float>(max_val)};
  return model16(x, w, linear_bias, pre, bias, num_groups, gamma, beta, eps, Identity{});
}

// @export: problem 37 in bf16 or fp16, one kernel: group_norm(y * sigmoid(y) + bias, num_groups, gamma, beta, eps), y = x @ w.T + linear_bias
torch::Tensor linear_swish_bias_group_norm16(torch::Tensor x, torch::Tensor w, torch::Tensor linear_bias,
                                             torch::Tensor bias, int64_t num_groups, torch::Tensor gamma,
                                             torch::Tensor beta, double eps) {
  check16(x, w, {linear_bias, bias, gamma, beta}, num_groups);
  return model16(x, w, linear_bias, SwishBiasFast{nullptr}, bias, num_groups, gamma, beta, eps, Identity{});
}

// @export: problem 62 in bf16 or fp16, one kernel: z = leaky_relu(group_norm(x @ w.T + linear_bias, ...), negative_slope); z + z
torch::Tensor linear_group_norm_leaky_relu_x2_16(torch::Tensor x, torch::Tensor w, torch::Tensor linear_bias,
                                                 int64_t num_groups, torch::Tensor gamma, torch::Tensor beta,
                                                 double eps, double negative_slope) {
  check16(x, w, {linear_bias, gamma, beta}, num_groups);
  return model16(x, w, linear_bias, Identity{}, torch::Tensor(), num_groups, gamma, beta, eps,
                 LeakyReluX2{nullptr, static_cast<float>(negative_slope)});
}
