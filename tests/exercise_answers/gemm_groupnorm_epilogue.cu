// @arch: 9.0a
#include "exercises/gemm_wgmma_lanes.cuh"

// GroupNorm of y = x @ w.T + bias, per row and group of D columns (the formula and acc's layout: notebook 09)
struct GroupNormEpilogue {
  const float *bias, *gamma, *beta;  // (N,) each
  int D;                             // columns per group, even, dividing lanes::BN
  float eps;

  __device__ void operator()(const float (&acc)[lanes::ACC], const lanes::Tile& t, const lanes::Out& out) const {
    const int first = t.col - t.n0;  // the lane's first column within the tile
    for (int g = 0; g < lanes::BN / D; ++g) {
      if (t.n0 + g * D >= t.N) break;  // N % D == 0: past the matrix, and so is the rest (same for the block)
      for (int h = 0; h < 2; ++h) {
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < lanes::BN / 8; ++j) {
          if ((first + 8 * j) / D == g) {
            const int n = t.col + 8 * j;
            sum += (acc[4 * j + 2 * h] + bias[n]) + (acc[4 * j + 2 * h + 1] + bias[n + 1]);
          }
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);  // the quad holds the row's columns
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const float mean = sum / D;
        float sq = 0.0f;
#pragma unroll
        for (int j = 0; j < lanes::BN / 8; ++j) {
          if ((first + 8 * j) / D == g) {
            const int n = t.col + 8 * j;
            const float d0 = acc[4 * j + 2 * h] + bias[n] - mean;
            const float d1 = acc[4 * j + 2 * h + 1] + bias[n + 1] - mean;
            sq += d0 * d0 + d1 * d1;
          }
        }
        sq += __shfl_xor_sync(0xffffffffu, sq, 1);
        sq += __shfl_xor_sync(0xffffffffu, sq, 2);
        const float rstd = rsqrtf(sq / D + eps);
#pragma unroll
        for (int j = 0; j < lanes::BN / 8; ++j) {
          if ((first + 8 * j) / D == g) {
            const int n = t.col + 8 * j;
            const float z0 = (acc[4 * j + 2 * h] + bias[n] - mean) * rstd * gamma[n] + beta[n];
            const float z1 = (acc[4 * j + 2 * h + 1] + bias[n + 1] - mean) * rstd * gamma[n + 1] + beta[n + 1];
            out.put(h, j, z0, z1);
          }
        }
      }
    }
  }
};

// @export: GroupNorm(x @ w.T + bias) over groups of N / groups columns per row, with gamma and beta, in the wgmma GEMM's epilogue
torch::Tensor linear_groupnorm(torch::Tensor x, torch::Tensor w, torch::Tensor bias, torch::Tensor gamma,
                               torch::Tensor beta, int64_t groups, double eps) {
  const int D = lanes::group_width(x, w, bias, gamma, beta, groups);
  return lanes::run(x, w, GroupNormEpilogue{bias.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(), D, float(eps)});
}
