// linear_inputs.cuh: the input checks the small-batch candidates' launchers share (weight_stream.cu,
// swapped_mma.cu): x (M, K), w (N, K), bias (N,) float32 CUDA on one device, 1 <= M <= max_m, K a positive
// multiple of 4 (float4 loads), sizes in int, x and w 16-byte aligned.
#pragma once

#include "common/check.cuh"

inline void check_linear_inputs(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                                const char* launcher, int64_t max_m) {
  CHECK_FLOAT_CUDA_INPUT(x);
  CHECK_FLOAT_CUDA_INPUT(w);
  CHECK_FLOAT_CUDA_INPUT(bias);
  CHECK_SAME_DEVICE(x, w);
  CHECK_SAME_DEVICE(x, bias);
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "x (M, K) and w (N, K) must share K, got x ",
              shape_string(x), " and w ", shape_string(w));
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == w.size(0), "bias must have shape (N,), got ", shape_string(bias));
  TORCH_CHECK(x.size(0) >= 1 && x.size(0) <= max_m, launcher, " takes 1 to ", num(max_m), " rows of x, got ",
              num(x.size(0)));
  TORCH_CHECK(x.size(1) % 4 == 0 && x.size(1) > 0, "K must be a positive multiple of 4 (float4 loads), got ",
              num(x.size(1)));
  TORCH_CHECK(w.size(0) <= INT32_MAX / 2 && x.size(1) <= INT32_MAX / 2, "N and K must fit in int32");
  TORCH_CHECK(aligned16(x.data_ptr()) && aligned16(w.data_ptr()), "x and w must start on 16-byte boundaries");
}
