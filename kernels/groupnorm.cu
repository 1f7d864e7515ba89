// groupnorm.cu: GroupNorm on (N, C) float32 tensors, alone and fused with the activations around
// it in problems 94, 37 and 62 (notebooks/06_groupnorm_reduction.ipynb; the drop-ins of
// notebooks/10_fused_solutions.ipynb).
//
//   group_norm_welford(x, G, gamma, beta, eps)       F.group_norm, Welford statistics
//   group_norm_sumsq(x, G, gamma, beta, eps)         the same with sum and sum of squares
//   bias_hardtanh_mish_group_norm(x, bias, lo, hi, G, gamma, beta, eps)    problem 94's tail
//   swish_bias_group_norm(x, bias, G, gamma, beta, eps)                    problem 37's tail
//   group_norm_leaky_relu_x2(x, G, gamma, beta, eps, slope)                problem 62's tail
//
// The idea. GroupNorm needs, for every (sample, group), a mean and a variance of D = C / G
// consecutive floats, then one pass to normalise them. Eager PyTorch spends one kernel on the
// statistics (reading x) and one on the normalisation (reading x again, writing y), after one
// kernel per activation before it, each reading and writing the whole tensor. But a group here is
// tiny (D = 32 floats for 94, 16 for 62 and 75, 64 for 37: 64 to 256 bytes), so it fits in the
// registers of a few lanes: load it once, apply the activation, reduce it with a few shuffles,
// normalise, apply what follows, store. One read and one write of the tensor, whatever the chain.
//
// Thread -> data (common/groupnorm.cuh has the details): on the problems' shapes a team of
// L = D / 8 lanes owns a group, each lane two float4s (L = 4 for 94, 2 for 62, 8 for 37); a
// warp owns 32 / L consecutive groups, i.e. 1 KB of consecutive bytes, and the statistics take
// log2(L) register shuffles per value (Welford: 3 values per step), then a broadcast from the
// team's first lane. A block of 256 threads covers 8 KB per trip; a grid of at most
// WORKBOOK_GRID_WAVES resident waves of blocks (common/elementwise.cuh) strides over the tensor.
// Shapes whose groups are not whole float4s (C = 115, G = 5: D = 23), groups over 256 floats and
// unaligned views take the block path: one block per group, scalar loads, a shared-memory step in
// the reduction. Both paths read each element once.
//
// Why Welford: with data around 1e3 (a GEMM output with a large bias, say) and unit spread,
// sum of squares / D is ~1e6 and float32 holds it to ~0.06, so E[x^2] - E[x]^2 ~ 1 keeps about
// one digit: group_norm_sumsq ends up off by more than 1e-2, while group_norm_welford stays
// under 1e-3, limited by float32's resolution of x itself (6e-5 at 1e3), like F.group_norm (the
// tests check both). The fused kernels all use Welford.
//
// Bytes and FLOPs at the problems' shapes (the GEMM output is the input here):
//   94: x (1024, 8192) read once, y written once: 2 x 33.5 MB = 67.1 MB (+ 3 x 32 KB of bias,
//       gamma, beta, from L2); ~40 FLOP per element: Mish's exp and division, the statistics.
//   37: x (32768, 4096): 2 x 537 MB = 1.07 GB; ~25 FLOP per element.
//   62: x (1024, 8192): 67.1 MB; ~15 FLOP per element.
// Eager moves far more. Each activation reads and writes the tensor, F.group_norm reads it
// twice (statistics, then normalisation) and writes it once: 94's chain (+ bias, Hardtanh, Mish,
// GroupNorm) is 9 passes over 33.5 MB = 302 MB; 37's (sigmoid, *, + bias, GroupNorm) 10 passes
// over 537 MB = 5.4 GB; 62's (GroupNorm, LeakyReLU, x + x) 7 passes = 235 MB. F.group_norm
// alone is 3 passes, and for 2-D input it gives each group a block of its own (524288 blocks of
// 16 floats for 62), so it runs well below bandwidth.
//
// PREDICTION (written before measuring, H100 with ~3000 GB/s measured copy bandwidth): every
// kernel here within 80-90% of copy bandwidth, i.e. 67.1 MB in 25-28 us for 94 and 62 (floor
// 22 us), 1.07 GB in 0.40-0.45 ms for 37 (floor 0.36 ms). 94 is the one at risk: Mish costs
// ~50 instructions per element, close to the ~75 an H100 can issue per element while streaming
// at full bandwidth, so it may land nearer 75%. Against eager: 3-5x faster than each chain it
// replaces, and 1.5-3x faster than F.group_norm alone (which does less work than the fused
// kernels but moves 1.5x the bytes, in two kernels, with poorly occupied blocks). sumsq runs at
// the same speed as Welford: both are memory-bound; the difference is accuracy, not time.
//
// MEASURED: notebook 06 records the run of record in results/<device>/groupnorm_fusion.json and
// holds the PREDICTION against it. Against the same-size copy the plain and fused kernels came out
// at or above the predicted range, 94 lowest. The speedups over eager came out far above it: the
// prediction counted bytes, and F.group_norm's block per (sample, group) runs far below a copy's
// speed, so eager's time is not its bytes'. How 94 went from issue-bound to near a copy's speed
// (the one-exp Mish, one run per trip, mish_fast_f below): experiments/memory_bound/README.md.

// @ops: its launchers are operators' kernels (utils/ops.py registers them)

#include "common/activations.cuh"
#include "common/check.cuh"
#include "common/groupnorm.cuh"

// The launch every export shares, after its checks (check_group_norm_inputs and, for a fused
// bias, check_channel_bias): a new y like x, written by one kernel on the current stream.
template <class Stats, class Pre, class Post>
static torch::Tensor group_norm_with(const torch::Tensor& x, int64_t num_groups, const torch::Tensor& gamma,
                                     const torch::Tensor& beta, double eps, Pre pre, Post post) {
  TORCH_CHECK(eps >= 0.0, "eps must be non-negative, got ", num(eps));
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor y = torch::empty_like(x);
  launch_group_norm<Stats>(x, gamma, beta, y, num_groups, eps, pre, post);
  return y;
}

// @export: F.group_norm(x, num_groups, gamma, beta, eps) for x (N, C): Welford statistics per (sample, group)
torch::Tensor group_norm_welford(torch::Tensor x, int64_t num_groups, torch::Tensor gamma, torch::Tensor beta,
                                 double eps) {
  check_group_norm_inputs(x, gamma, beta, num_groups);
  return group_norm_with<WelfordStats>(x, num_groups, gamma, beta, eps, Identity{}, Identity{});
}

// @export: F.group_norm(x, num_groups, gamma, beta, eps) with var = E[x^2] - E[x]^2 (cancels for data far from 0)
torch::Tensor group_norm_sumsq(torch::Tensor x, int64_t num_groups, torch::Tensor gamma, torch::Tensor beta,
                               double eps) {
  check_group_norm_inputs(x, gamma, beta, num_groups);
  return group_norm_with<SumSqStats>(x, num_groups, gamma, beta, eps, Identity{}, Identity{});
}

// @export: problem 94: group_norm(mish(hardtanh(x + bias, min_val, max_val)), num_groups, gamma, beta, eps), one pass
torch::Tensor bias_hardtanh_mish_group_norm(torch::Tensor x, torch::Tensor bias, double min_val, double max_val,
                                            int64_t num_groups, torch::Tensor gamma, torch::Tensor beta, double eps) {
  check_group_norm_inputs(x, gamma, beta, num_groups);
  check_channel_bias(x, bias);
  TORCH_CHECK(min_val <= max_val, "Hardtanh needs min_val <= max_val, got ", num(min_val), " and ",
              num(max_val));
  const BiasHardtanhMishFast pre{bias.data_ptr<float>(), static_cast<float>(min_val), static_cast<float>(max_val)};
  return group_norm_with<WelfordStats>(x, num_groups, gamma, beta, eps, pre, Identity{});
}

// @export: problem 37: group_norm(x * sigmoid(x) + bias, num_groups, gamma, beta, eps), one pass
torch::Tensor swish_bias_group_norm(torch::Tensor x, torch::Tensor bias, int64_t num_groups, torch::Tensor gamma,
                                    torch::Tensor beta, double eps) {
  check_group_norm_inputs(x, gamma, beta, num_groups);
  check_channel_bias(x, bias);
  return group_norm_with<WelfordStats>(x, num_groups, gamma, beta, eps, SwishBias{bias.data_ptr<float>()},
                                       Identity{});
}

// @export: problem 62: y = leaky_relu(group_norm(x, num_groups, gamma, beta, eps), negative_slope); y + y, one pass
torch::Tensor group_norm_leaky_relu_x2(torch::Tensor x, int64_t num_groups, torch::Tensor gamma, torch::Tensor beta,
                                       double eps, double negative_slope) {
  check_group_norm_inputs(x, gamma, beta, num_groups);
  return group_norm_with<WelfordStats>(x, num_groups, gamma, beta, eps, Identity{},
                                       LeakyReluX2{nullptr, static_cast<float>(negative_slope)});
}

// Problem 62's tail as notebook 06 launches it from Python (`// @launch`), at its shape's team size: the
// body of group_norm_team_kernel (common/groupnorm.cuh) for L = 2 lanes per group of D = 16 (two float4s
// a lane), Welford statistics, nothing before the statistics, LeakyReLU and x + x after. The notebook
// computes the grid the launcher's resident_grid would; group_norm_leaky_relu_x2 above is the same code.
// @launch
__global__ void __launch_bounds__(kTeamThreads)
    group_norm_leaky_relu_x2_team2(const float* __restrict__ x, const float* __restrict__ gamma,
                                   const float* __restrict__ beta, float* __restrict__ y, int64_t segments,
                                   int64_t G, int D, float eps, float negative_slope) {
  constexpr int L = 2;
  constexpr int kTeams = 32 / L;  // segments per warp per run
  const int lane = threadIdx.x % 32;
  const int l = lane % L;
  const int team = lane / L;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  StoreSink<LeakyReluX2> sink{y, LeakyReluX2{nullptr, negative_slope}};
  for (int64_t q0 = warp * kTeams * kTeamUnroll; q0 < segments; q0 += warps * kTeams * kTeamUnroll) {
    team_trip<L, GROUPNORM_TEAM_VECS, kTeamUnroll, WelfordStats>(x, gamma, beta, eps, Identity{}, sink, [&](int u) {
      const int64_t q = q0 + u * kTeams + team;
      return team_slot<L, GROUPNORM_TEAM_VECS>(q, index_mod(q, G) * D, q < segments, l, D);
    });
  }
}
