// DRAFT: GroupNorm + row minimum with rows streamed into shared memory by bulk async copies
// (cp.async.bulk, Hopper's TMA in its 1-D form), and the broadcast launched as a programmatic
// dependent (PDL) of it.
#include <cuda.h>
#include "common/check.cuh"
#include "common/elementwise.cuh"
#include "common/groupnorm.cuh"
#include "common/reduce.cuh"
#include "bulk_copy.cuh"  // folded after the runs
#include "../tail/pdl_broadcast.cuh"  // folded after the runs

#ifndef BULK_SMEM
#define BULK_SMEM (96 * 1024)  // bytes of row stages per block
#endif
#ifndef BULK_RUNS
#define BULK_RUNS 2
#endif
#ifndef BULK_TRIGGER
#define BULK_TRIGGER 1  // the row minimum lets its dependent launch at once
#endif

template <int L, int V>
__global__ void __launch_bounds__(kTeamThreads)
    row_min_bulk_kernel(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                        float* __restrict__ rowmin, int64_t N, int64_t C, int64_t G, int D, float eps, int stages) {
  extern __shared__ __align__(128) float rows[];
  __shared__ __align__(8) uint64_t full[kMaxStages];
  __shared__ float scratch[32];
  constexpr int kTeams = 32 / L;
  const int lane = threadIdx.x % 32, l = lane % L, team = lane / L;
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const uint32_t row_bytes = static_cast<uint32_t>(C * 4);
  const int64_t mine = (N - blockIdx.x + gridDim.x - 1) / gridDim.x;  // rows blockIdx.x + k * gridDim.x
  if (BULK_TRIGGER) asm volatile("griddepcontrol.launch_dependents;");
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) mbar_init(&full[s], 1);
    mbar_init_fence();
    for (int64_t k = 0; k < stages && k < mine; ++k) {
      mbar_expect_tx(&full[k], row_bytes);
      bulk_load(rows + k * C, x + (blockIdx.x + k * gridDim.x) * C, row_bytes, &full[k]);
    }
  }
  __syncthreads();
  for (int64_t k = 0; k < mine; ++k) {
    const int s = static_cast<int>(k % stages);
    mbar_wait(&full[s], static_cast<uint32_t>((k / stages) & 1));
    const float* row = rows + s * C;
    MinSink sink;
    for (int64_t g0 = static_cast<int64_t>(warp) * kTeams * BULK_RUNS; g0 < G; g0 += static_cast<int64_t>(warps) * kTeams * BULK_RUNS) {
      team_trip<L, V, BULK_RUNS, WelfordStats>(row, gamma, beta, eps, Identity{}, sink, [&](int u) {
        const int64_t g = g0 + u * kTeams + team;
        return team_slot<L, V>(g, g * D, g < G, l, D);
      });
    }
    const float m = block_min(sink.m, scratch);  // its first __syncthreads: every thread is done with stage s
    if (threadIdx.x == 0) {
      rowmin[blockIdx.x + k * gridDim.x] = m;
      if (k + stages < mine) {
        mbar_expect_tx(&full[s], row_bytes);
        bulk_load(rows + s * C, x + (blockIdx.x + (k + stages) * gridDim.x) * C, row_bytes, &full[s]);
      }
    }
  }
}

static torch::Tensor row_min_bulk_impl(const torch::Tensor& x, int64_t G, const torch::Tensor& gamma,
                                       const torch::Tensor& beta, double eps) {
  check_group_norm_inputs(x, gamma, beta, G);
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t N = x.size(0), C = x.size(1), D = C / G;
  TORCH_CHECK(team_path_ok(D, {x.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>()}) && N > 0 &&
                  C % 4 == 0 && C * 4 <= BULK_SMEM,
              "draft: aligned rows that fit");
  torch::Tensor rowmin = torch::empty({N, 1}, x.options());
  const int stages = static_cast<int>(std::min<int64_t>(kMaxStages, BULK_SMEM / (C * 4)));
  const size_t smem = static_cast<size_t>(stages) * C * 4;
  with_team_lanes(D, [&](auto lanes) {
    auto kernel = row_min_bulk_kernel<decltype(lanes)::value, GROUPNORM_TEAM_VECS>;
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    const unsigned int grid = static_cast<unsigned int>(std::min<int64_t>(N, resident_blocks(kernel, kTeamThreads, smem, x.get_device())));
    kernel<<<grid, kTeamThreads, smem, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(), rowmin.data_ptr<float>(), N, C, G,
        static_cast<int>(D), static_cast<float>(eps), stages);
    LAUNCH_CHECK();
  });
  return rowmin;
}

// @export: DRAFT the row minimum with bulk async copies of the rows: (N, 1)
torch::Tensor row_min_bulk(torch::Tensor x, int64_t G, torch::Tensor gamma, torch::Tensor beta, double eps) {
  return row_min_bulk_impl(x, G, gamma, beta, eps);
}

// @export: DRAFT the whole tail: bulk row minimum, then the broadcast (as a PDL dependent when pdl)
torch::Tensor min_bias_bulk(torch::Tensor x, int64_t G, torch::Tensor gamma, torch::Tensor beta, double eps,
                            torch::Tensor bias, bool pdl) {
  torch::Tensor rowmin = row_min_bulk_impl(x, G, gamma, beta, eps);
  return broadcast_pdl(rowmin, bias, x.size(0), x.size(1), pdl);
}
