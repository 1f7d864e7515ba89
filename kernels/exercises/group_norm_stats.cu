// exercises/group_norm_stats.cu: YOUR TURN (notebooks/06_groupnorm_reduction.ipynb).
//
//   group_norm(x, num_groups, gamma, beta, eps) = F.group_norm(x, num_groups, gamma, beta, eps)
//   x (N, C) float32, gamma and beta (C,); statistics per (sample, group) of D = C / G channels.
//
// The simplest correct layout of the work: one block of 128 threads per (sample, group) segment
// (the block path of common/groupnorm.cuh, without its register caching). Thread t takes the
// segment's elements t, t + 128, ...; the statistics are then reduced across the block with the
// helpers of common/reduce.cuh; every thread normalises its elements with the block's mean and
// rstd.
//
// The statistics are the exercise. group_stats below uses a sum and a sum of squares:
// var = E[x^2] - E[x]^2. That is right in exact arithmetic and wrong in float32 when the data sit
// far from zero: the checker in notebook 06 feeds it data around 100 with unit spread, and it
// says "Not yet". Your job: rewrite group_stats with Welford's summaries (n, mean, M2), which
// common/reduce.cuh provides: a thread starts from the empty summary {0, 0, 0}, merges each of
// its values in as the one-element summary {1, v, 0} with welford_merge, and block_welford
// merges the threads' summaries (it needs the Welford scratch the kernel passes as wscratch).
// Then mean = w.mean and var = w.m2 / w.n. Re-run the checker cell: it recompiles this file.

#include "common/check.cuh"
#include "common/reduce.cuh"

constexpr int kThreads = 128;

struct MeanRstd {
  float mean, rstd;
};

// The mean and 1 / sqrt(var + eps) of seg[0 .. D), for every thread of the block.
// fscratch and wscratch: 32 floats and 32 Welford summaries of shared memory.
__device__ MeanRstd group_stats(const float* __restrict__ seg, int D, float eps, float* fscratch, Welford* wscratch) {
  // TODO: Welford instead of sum and sum of squares.
  float s = 0.0f, ss = 0.0f;
  for (int e = threadIdx.x; e < D; e += blockDim.x) {
    const float v = seg[e];
    s += v;
    ss += v * v;
  }
  s = block_sum(s, fscratch);
  ss = block_sum(ss, fscratch);
  const float mean = s / D;
  const float var = fmaxf(ss / D - mean * mean, 0.0f);  // cancels when mean^2 >> var
  return {mean, rsqrtf(var + eps)};
}

__global__ void __launch_bounds__(kThreads)
    group_norm_kernel(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                      float* __restrict__ y, int64_t G, int D, float eps) {
  __shared__ float fscratch[32];
  __shared__ Welford wscratch[32];
  const int64_t q = blockIdx.x;  // segment q: sample q / G, group q % G
  const float* seg = x + q * D;
  const MeanRstd s = group_stats(seg, D, eps, fscratch, wscratch);
  const int64_t c0 = (q % G) * D;  // the segment's first channel
  for (int e = threadIdx.x; e < D; e += blockDim.x) {
    y[q * D + e] = (seg[e] - s.mean) * s.rstd * gamma[c0 + e] + beta[c0 + e];
  }
}

// @export: F.group_norm(x, num_groups, gamma, beta, eps) for x (N, C), one block per (sample, group)
torch::Tensor group_norm(torch::Tensor x, int64_t num_groups, torch::Tensor gamma, torch::Tensor beta, double eps) {
  CHECK_FLOAT_CUDA_INPUT(x);
  CHECK_FLOAT_CUDA_INPUT(gamma);
  CHECK_FLOAT_CUDA_INPUT(beta);
  CHECK_SAME_DEVICE(x, gamma);
  CHECK_SAME_DEVICE(x, beta);
  TORCH_CHECK(x.dim() == 2, "x must be 2-D (N, C), got shape ", shape_string(x));
  const int64_t C = x.size(1);
  TORCH_CHECK(num_groups > 0 && C % num_groups == 0, "num_groups = ", num(num_groups),
              " must be positive and divide C = ", num(C));
  TORCH_CHECK(gamma.dim() == 1 && gamma.size(0) == C && beta.dim() == 1 && beta.size(0) == C,
              "gamma and beta must have shape [", num(C), "], got ", shape_string(gamma), " and ", shape_string(beta));
  TORCH_CHECK(eps >= 0.0, "eps must be non-negative, got ", num(eps));
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor y = torch::empty_like(x);
  const int64_t segments = x.size(0) * num_groups;
  if (segments == 0 || C == 0) return y;
  TORCH_CHECK(segments <= INT32_MAX, "one block per group: ", num(segments), " groups is too many for one grid");
  group_norm_kernel<<<static_cast<unsigned int>(segments), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(), y.data_ptr<float>(), num_groups,
      static_cast<int>(C / num_groups), static_cast<float>(eps));
  LAUNCH_CHECK();
  return y;
}
