// kernels/common/gemm_dispatch.cuh: which GEMM computes x (M, K) @ w.T (N, K) for `linear`
// (gemm_10_3xtf32.cu) and the whole-model ops (fused_gemm_groupnorm.cu). The one place that reads
// PyTorch's fp32 matmul setting (once per op call: `plan`) and chooses from it, the inputs and M:
//
//   rows of x    strict tier (3xTF32)                           TF32 tier
//   1-64         the small-batch schedule (common/gemm_small_batch.cuh): w read once, either tier
//   65-256       wgmma, w's small parts made in shared memory,  cuBLAS's TF32 GEMM (linear); the
//                at the width the waves pick (narrow_width);    whole models: wgmma at the width
//                the whole models: linear + their tail          the waves pick, the tail fused
//   257-         wgmma on pre-split operands (a pass over w     cuBLAS (linear); the whole models:
//                per call, unless the caller kept it)           wgmma, 128 x 256 tiles
//
// x in bfloat16 or float16 beside a float32 w is what the whole models get under torch.autocast
// (utils/ops.py), the weight left the float32 parameter it is. Up to 256 rows: the TF32 tier whatever
// the setting, since the 16-bit GEMM autocast asks for keeps fewer significand bits than TF32 (bf16 8,
// fp16 and TF32 11), on the narrow tiles (below 65 rows too: the whole model stays one kernel), x
// converted to float32. From 257 rows to kMixedInputMaxM: the mixed-input GEMM
// (common/gemm_mixed_input.cuh), w converted to x's dtype in registers, as autocast's GEMM would have
// it, without a pass over w. Beyond, w is converted to x's dtype for rung 11's 16-bit GEMM.
//
// x and w both bfloat16 or float16 (a model in that dtype: the whole models only) take rung 11's 16-bit
// GEMM: the narrow tiles up to 256 rows (the small-batch schedule is float32's), the wide ones beyond.
//
// The whole models run in one kernel (fused_gemm_groupnorm.cu) where the table says so; elsewhere
// as `linear` and their tail (fused_gemm_groupnorm.cu's fused_here says why, with the figures).
// Measured: experiments/gemm_schedules/README.md (65-256 rows and beyond),
// results/nvidia-h100-80gb-hbm3/logs/small_batch/README.md (1-64).

#pragma once

#include <ATen/Context.h>  // at::globalContext(): PyTorch's fp32 matmul setting

#include <cstdint>

#include "common/device_cache.cuh"
#include "common/gemm_small_batch.cuh"

namespace gemm_dispatch {

enum class Tier { STRICT, TF32 };

// The tier PyTorch's fp32 matmul setting asks for: TF32 allowed (allow_tf32, or
// set_float32_matmul_precision("high") or lower), or IEEE fp32.
inline Tier current_tier() { return at::globalContext().allowTF32CuBLAS() ? Tier::TF32 : Tier::STRICT; }

enum class Schedule {
  SMALL_BATCH,  // 1-64 rows of x: small_batch::applies
  NARROW,       // 65-256 rows on an sm_90 GPU: tiles narrow enough to give every SM work
  WIDE,         // the rest: the whole-model kernels' tiles, or what the caller does off sm_90
};

constexpr int64_t kNarrowMaxM = 256;  // where 128 x 128 tiles give N / 128 x 2 blocks: 128 at N = 8192
// Autocast's call (16-bit x, float32 w) runs the mixed-input GEMM up to this many rows of x, and converts w
// for rung 11's GEMM beyond. The mixed main loop costs about 1.2x rung 11's per FLOP, and the conversion it
// saves is one pass over w, 6 bytes a weight, whatever the rows: the GEMMs alone at N = K = 8192 (H200, bf16)
// took 0.136 against 0.205 ms at 512 rows, 0.243 against 0.290 at 1,024, 0.476 against 0.481 at 2,048 and
// 0.742 against 0.696 at 3,072 (the faster of conversion-then-rung 11 and conversion-then-cuBLAS;
// experiments/bf16/README.md, "Autocast's route at 257-512 rows, measured, and the mixed-input GEMM").
constexpr int64_t kMixedInputMaxM = 2048;

struct Plan {
  Tier tier;
  Schedule schedule;
  bool tf32() const { return tier == Tier::TF32; }
};

// 16-bit x with a float32 w: autocast's call (above).
inline bool mixed_operands(const torch::Tensor& x, const torch::Tensor& w) {
  return (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf) && w.scalar_type() == at::kFloat;
}

// The plan for x (M, K) @ w.T (N, K). Made before the caller's checks: inputs they will reject (not
// 2-D, not CUDA) get WIDE, whose path checks them.
inline Plan plan(const torch::Tensor& x, const torch::Tensor& w) {
  const bool mixed = mixed_operands(x, w);
  const Tier tier = mixed ? Tier::TF32 : current_tier();
  if (!mixed && x.scalar_type() == at::kFloat && small_batch::applies(x, w)) return {tier, Schedule::SMALL_BATCH};
  if (x.dim() == 2 && w.dim() == 2 && x.size(0) <= kNarrowMaxM && x.is_cuda() && is_sm90(x.get_device())) {
    return {tier, Schedule::NARROW};
  }
  return {tier, Schedule::WIDE};
}

// The block width, 64 or 128, for out (M, N) in tiles of 128 rows: the one whose tiles, counted in
// whole waves of `sms` blocks, give each SM the fewest columns of out to compute; 128 on a tie (its
// tiles read each row of x half as often). At N = 8192 on 132 SMs: 64 up to 128 rows (128 tiles, one
// wave, where width 128 leaves 68 SMs idle), 128 from 129 rows.
inline int narrow_width(int64_t M, int64_t N, int sms) {
  const auto columns = [&](int64_t bn) {
    const int64_t tiles = (M + 127) / 128 * ((N + bn - 1) / bn);
    return (tiles + sms - 1) / sms * bn;
  };
  return columns(64) < columns(128) ? 64 : 128;
}

}  // namespace gemm_dispatch
