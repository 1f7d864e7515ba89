// kernels/common/groupnorm.cuh: GroupNorm on an (N, C) tensor, as building blocks that
// kernels/groupnorm.cu (plain and fused GroupNorms) and kernels/min_bias_broadcast.cu
// (GroupNorm + row minimum) put together. Notebook: 06_groupnorm_reduction.ipynb.
//
// What GroupNorm computes on (N, C) with G groups, D = C / G channels per group: for each
// sample n and group g, over the D values x[n, g*D .. g*D + D-1] (seeds 000, 003 and 004 reduce
// over the whole batch instead: wrong),
//   mean = sum(x) / D,  var = sum((x - mean)^2) / D   (biased: divided by D, not D - 1)
//   y[n, c] = (x[n, c] - mean) * rsqrt(var + eps) * gamma[c] + beta[c]   (eps inside the root)
// in that order of operations, PyTorch's own for 2-D input (GroupNorm1dForward).
//
// The layout makes it simpler than it looks: in a contiguous (N, C) tensor, group (n, g) is the
// D consecutive floats starting at (n * G + g) * D. GroupNorm is a *segmented* normalisation of
// the flat array: N * G segments of D floats each, segment q being group q % G of sample q / G.
//
// Two ways to map threads to segments, chosen by the launcher:
//
//   team path   (D a multiple of 4, D <= 256, 16-byte-aligned pointers: the problems' 16, 32
//               and 64 floats). A team of L lanes owns one segment, each lane V = 2 float4s of
//               it in registers (L = 1, 2, 4, ... 32: the fewest that hold D / 4 float4s; 2 for
//               D = 16, 4 for 32, 8 for 64). Lane l holds float4s l and l + L, so a team reads
//               L x 16 contiguous bytes per load. One warp normalises 32 / L segments side by
//               side, 512 contiguous bytes per load when D = 8L. Statistics take log2(L)
//               shuffles, no shared memory, no __syncthreads. Every value is loaded once and
//               stays in registers until it is written.
//   block path  (anything else: D not a multiple of 4 such as C = 115, G = 5; D > 256;
//               unaligned views). A block of T threads owns one segment; thread t holds
//               floats t, t + T, ... (up to R of them, coalesced scalar loads), and the
//               statistics add a shared-memory step across warps (common/reduce.cuh). Groups
//               larger than T * R (R = 8, T <= 1024: 8192 floats) are summarised chunk by chunk
//               and read a second time to normalise, from L2 when the group fits there. A group
//               holds at most 2^24 floats (kMaxGroupSize: the statistics count in float).
//
// Statistics come in two policies with one interface:
//   WelfordStats  (n, mean, M2) per thread, merged with Chan's formula (common/reduce.cuh):
//                 no cancellation, whatever the data's offset;
//   SumSqStats    (n, sum, sum of squares): var = E[x^2] - E[x]^2, which cancels
//                 catastrophically for data far from zero. Kept to show why (notebook 06).
//
// An operation may run on each value as it is loaded (`pre`, with its channel's bias: problems
// 94 and 37 apply their activations *before* GroupNorm) and on each normalised value before it
// is stored (`post`: problem 62's LeakyReLU and x + x). Either way each element is read once and
// written once.

#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "common/activations.cuh"
#include "common/check.cuh"
#include "common/elementwise.cuh"
#include "common/reduce.cuh"

struct MeanRstd {
  float mean, rstd;
};

// ---- statistics policies -------------------------------------------------------------------

struct WelfordStats {
  using Partial = Welford;
  __device__ static Partial empty() { return {0.0f, 0.0f, 0.0f}; }
  template <int K>
  __device__ static Partial of(const float (&v)[K], int count) {
    return welford_of(v, count);
  }
  __device__ static Partial merge(Partial a, Partial b) { return welford_merge(a, b); }
  template <int L>
  __device__ static Partial team(Partial p) {
    return team_welford<L>(p);
  }
  __device__ static Partial block(Partial p, Partial* scratch) { return block_welford(p, scratch); }
  __device__ static MeanRstd finish(Partial p, float eps) { return {p.mean, rsqrtf(__fdividef(p.m2, p.n) + eps)}; }
};

struct SumSq {
  float n, s, ss;
};

struct WarpSumSq {
  __device__ SumSq operator()(SumSq p) const { return {warp_sum(p.n), warp_sum(p.s), warp_sum(p.ss)}; }
};

struct SumSqStats {
  using Partial = SumSq;
  __device__ static Partial empty() { return {0.0f, 0.0f, 0.0f}; }
  template <int K>
  __device__ static Partial of(const float (&v)[K], int count) {
    Partial p = {static_cast<float>(count), 0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (k < count) {
        p.s += v[k];
        p.ss += v[k] * v[k];
      }
    }
    return p;
  }
  __device__ static Partial merge(Partial a, Partial b) { return {a.n + b.n, a.s + b.s, a.ss + b.ss}; }
  template <int L>
  __device__ static Partial team(Partial p) {
    return {team_sum<L>(p.n), team_sum<L>(p.s), team_sum<L>(p.ss)};
  }
  __device__ static Partial block(Partial p, Partial* scratch) {
    return block_reduce(p, scratch, Partial{0.0f, 0.0f, 0.0f}, WarpSumSq{});
  }
  __device__ static MeanRstd finish(Partial p, float eps) {
    const float mean = p.s / p.n;
    // E[x^2] - E[x]^2 can come out slightly negative after cancellation; a variance cannot. A
    // comparison, not fmaxf: fmaxf(NaN, 0) is 0, and a group holding an inf (inf - inf) must come
    // out NaN, as F.group_norm's does, not scaled by 1/sqrt(eps) into ±inf.
    const float raw = p.ss / p.n - mean * mean;
    const float var = raw < 0.0f ? 0.0f : raw;
    return {mean, rsqrtf(var + eps)};
  }
};

// ---- what happens to each normalised value ---------------------------------------------------

// Stores post(v) at y[off]: the GroupNorm kernels.
template <class Post>
struct StoreSink {
  float* __restrict__ y;
  Post post;
  __device__ void put(int64_t off, float v) { y[off] = apply1(post, v, 0); }
  __device__ void put4(int64_t off, float4 v) { store4(y + off, apply4(post, v, 0)); }
};

// Keeps the running minimum (NaN-propagating, as torch.min): GroupNorm + min of problem 75.
struct MinSink {
  float m = INFINITY;
  __device__ void put(int64_t, float v) { m = nan_min(m, v); }
  __device__ void put4(int64_t, float4 v) { m = nan_min(nan_min(m, v.x), nan_min(nan_min(v.y, v.z), v.w)); }
};

__device__ __forceinline__ float normalise(float v, MeanRstd s, float gamma, float beta) {
  return (v - s.mean) * s.rstd * gamma + beta;
}

// ---- team path -----------------------------------------------------------------------------

constexpr int kTeamThreads = 256;

// The team's shape: V = GROUPNORM_TEAM_VECS float4s per lane (1, 2 or 4). What a segment costs
// besides its loads, stores and per-value arithmetic (the shuffles and merges of its statistics,
// their finish, the broadcast) is paid per lane, so holding more of the segment per lane divides
// that cost, at the price of registers. Measured on an H100 at the problems' shapes (clean L2,
// results/<device>/logs/exploration/2_l2_flush_modes.log), against V = 1: GroupNorm + row
// minimum (75) 22.0 -> 18.8 us, 94's fused GroupNorm 32.4 -> 31.0 us, 37's 396 -> 358 us; only
// 62's was faster with V = 1 (24.0 against 25.2 us). V = 4 was slower at every shape (up to
// 1.6x: 80 registers per thread, and with L = 1 each lane reads 16 bytes of every 64, half a
// sector per load).
// (Compile with -DGROUPNORM_TEAM_VECS=1 or 4 to compare.)
#ifndef GROUPNORM_TEAM_VECS
#define GROUPNORM_TEAM_VECS 2
#endif
static_assert(GROUPNORM_TEAM_VECS == 1 || GROUPNORM_TEAM_VECS == 2 || GROUPNORM_TEAM_VECS == 4,
              "GROUPNORM_TEAM_VECS is 1, 2 or 4");

// Each thread works on kTeamUnroll segments per trip through its loop, issuing all their loads
// before it uses any. With one float4 per lane two runs per trip paid off (a thread had 32 bytes
// in flight, not 16); with two float4s per lane a thread has 32 bytes in flight per segment
// already, and a second run only costs registers: 94's fused GroupNorm, at 64 registers per
// thread and 4 blocks per SM with two runs, took 31.0 us; at 36 registers and 6 blocks with one,
// 28.2 us (H100, clean L2, results/<device>/logs/exploration/6_fused_94.log).
// (-DGROUPNORM_TEAM_UNROLL=2 to compare.)
#ifndef GROUPNORM_TEAM_UNROLL
#define GROUPNORM_TEAM_UNROLL 1
#endif
constexpr int kTeamUnroll = GROUPNORM_TEAM_UNROLL;

// Where a lane's float4s of one segment are, and how many hold data. Lane l of a team of L holds
// the segment's float4s l, l + L, l + 2L, ... (its k-th at off + 4 * L * k): for each k the team
// reads L consecutive float4s, so a load uses whole 32-byte sectors when L >= 2. The float4s that
// exist (index < D / 4) are a prefix k < count of the lane's V.
struct TeamSlot {
  int64_t off;  // index of the lane's first float in x (and y)
  int64_t c;    // the channel of that float
  int count;    // float4s k = 0 .. count-1 hold data; 0 when the segment does not exist
};

// Lane l's slot in segment q, whose first float is channel c0 (q_ok: whether q exists).
template <int L, int V>
__device__ __forceinline__ TeamSlot team_slot(int64_t q, int64_t c0, bool q_ok, int l, int D) {
  const int mine = (D / 4 - l + L - 1) / L;  // float4s of the segment at l, l + L, ...
  return {q * D + 4 * l, c0 + 4 * l, q_ok ? max(0, min(V, mine)) : 0};
}

template <int L, int V>
__device__ __forceinline__ void team_load(const float* __restrict__ x, const TeamSlot& s, float4 (&raw)[V]) {
#pragma unroll
  for (int k = 0; k < V; ++k) {
    raw[k] = k < s.count ? load4(x + s.off + 4 * L * k) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

// A lane's gamma and beta for its float4s of one segment, when loaded ahead (below).
template <int V>
struct TeamParams {
  float4 gamma[V], beta[V];
};

// Whether a team kernel loads gamma and beta together with x, so that their latency overlaps
// x's instead of adding an L2 round trip after the statistics. Measured on an H100 (clean L2,
// 33.5 MB, results/<device>/logs/exploration/): the row minimum 19.6 -> 17.2 us, problem 62's
// GroupNorm 25.1 -> 24.6 us. For the kernels with a pre-operation bias (94, 37) loading the
// bias, gamma and beta ahead was no faster: 0-4% slower for 94 (run 6; a first version that
// kept all three in a struct was 22-25% slower for 94 and 37, run 5). Those load as they go:
// the bias when the pre-operation runs, gamma and beta after the statistics.
// (-DGROUPNORM_PREFETCH=0 to compare.)
#ifndef GROUPNORM_PREFETCH
#define GROUPNORM_PREFETCH 1
#endif
template <class Pre>
constexpr bool kPrefetchParams = GROUPNORM_PREFETCH && !Pre::kHasBias;

template <int L, int V>
__device__ __forceinline__ void team_load_params(const float* __restrict__ gamma, const float* __restrict__ beta,
                                                 const TeamSlot& s, TeamParams<V>& p) {
#pragma unroll
  for (int k = 0; k < V; ++k) {
    if (k < s.count) {
      p.gamma[k] = load4(gamma + s.c + 4 * L * k);
      p.beta[k] = load4(beta + s.c + 4 * L * k);
    }
  }
}

// The rest of the work on one segment, once its float4s `raw` have arrived: pre, the statistics
// over the team (log2(L) shuffles, none for L = 1), the normalisation (with gamma and beta from
// p when kPrefetchParams<Pre>, loaded here otherwise), and sink.put4 for each float4 with data.
// All 32 lanes of the warp call together, with data or not: the shuffles need every lane; a lane
// without data contributes an empty summary.
template <int L, int V, class Stats, class Pre, class Sink>
__device__ __forceinline__ void team_group_norm(const float4 (&raw)[V], const TeamParams<V>& p, const TeamSlot& slot,
                                                const float* __restrict__ gamma, const float* __restrict__ beta,
                                                float eps, const Pre& pre, Sink& sink) {
  float v[4 * V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const float4 t = k < slot.count ? apply4(pre, raw[k], slot.c + 4 * L * k) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    v[4 * k] = t.x, v[4 * k + 1] = t.y, v[4 * k + 2] = t.z, v[4 * k + 3] = t.w;
  }
  const MeanRstd s = Stats::finish(Stats::template team<L>(Stats::of(v, 4 * slot.count)), eps);
#pragma unroll
  for (int k = 0; k < V; ++k) {
    if (k < slot.count) {
      const int64_t c = slot.c + 4 * L * k;
      const float4 g = kPrefetchParams<Pre> ? p.gamma[k] : load4(gamma + c);
      const float4 b = kPrefetchParams<Pre> ? p.beta[k] : load4(beta + c);
      sink.put4(slot.off + 4 * L * k,
                make_float4(normalise(v[4 * k], s, g.x, b.x), normalise(v[4 * k + 1], s, g.y, b.y),
                            normalise(v[4 * k + 2], s, g.z, b.z), normalise(v[4 * k + 3], s, g.w, b.w)));
    }
  }
}

// One trip of a team kernel over U segments: every load first (x, and gamma and beta when
// kPrefetchParams<Pre>), then the work. slot_of(u) gives the lane's slot in run u.
template <int L, int V, int U, class Stats, class Pre, class Sink, class SlotOf>
__device__ __forceinline__ void team_trip(const float* __restrict__ x, const float* __restrict__ gamma,
                                          const float* __restrict__ beta, float eps, const Pre& pre, Sink& sink,
                                          SlotOf slot_of) {
  TeamSlot slot[U];
  float4 raw[U][V];
  TeamParams<V> params[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    slot[u] = slot_of(u);
    team_load<L>(x, slot[u], raw[u]);
    if constexpr (kPrefetchParams<Pre>) team_load_params<L>(gamma, beta, slot[u], params[u]);
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    team_group_norm<L, V, Stats>(raw[u], params[u], slot[u], gamma, beta, eps, pre, sink);
  }
}

// GroupNorm over all N * G segments. Per trip, warp w takes kTeamUnroll runs of 32 / L
// consecutive segments, one segment per team per run, then strides by the whole grid's warps.
// The loop condition depends on the warp alone, so a warp's 32 lanes always shuffle together.
template <int L, int V, class Stats, class Pre, class Post>
__global__ void __launch_bounds__(kTeamThreads)
    group_norm_team_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                           const float* __restrict__ beta, float* __restrict__ y, int64_t segments, int64_t G,
                           int D, float eps, Pre pre, Post post) {
  constexpr int kTeams = 32 / L;  // segments per warp per run
  const int lane = threadIdx.x % 32;
  const int l = lane % L;
  const int team = lane / L;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  StoreSink<Post> sink{y, post};
  for (int64_t q0 = warp * kTeams * kTeamUnroll; q0 < segments; q0 += warps * kTeams * kTeamUnroll) {
    team_trip<L, V, kTeamUnroll, Stats>(x, gamma, beta, eps, pre, sink, [&](int u) {
      const int64_t q = q0 + u * kTeams + team;
      return team_slot<L, V>(q, index_mod(q, G) * D, q < segments, l, D);
    });
  }
}

// ---- block path ----------------------------------------------------------------------------

constexpr int kBlockValues = 8;  // R: floats each thread holds in registers

// Segment q, owned by the whole block. Every thread of the block calls together (the statistics
// need __syncthreads). Hands each normalised value to sink.put.
template <class Stats, class Pre, class Sink>
__device__ __forceinline__ void block_group_norm(const float* __restrict__ x, const float* __restrict__ gamma,
                                                 const float* __restrict__ beta, int64_t q, int64_t G, int D,
                                                 float eps, const Pre& pre, Sink& sink,
                                                 typename Stats::Partial* scratch) {
  // Indices within the segment are 32-bit: D <= kMaxGroupSize (2^24, check_group_norm_inputs), so
  // e and start + chunk stay far below 2^31.
  constexpr int R = kBlockValues;
  const int T = blockDim.x;
  const int t = threadIdx.x;
  const int64_t base = q * D;                 // the segment's first float
  const int64_t cbase = index_mod(q, G) * D;  // and its channel
  const int chunk = T * R;

  // Statistics, chunk by chunk (one chunk unless D > T * R). Float e of a chunk sits at
  // t + r * T: a warp reads 32 consecutive floats per load, and this thread's valid values are
  // a prefix v[0 .. count).
  float v[R];
  typename Stats::Partial p = Stats::empty();
  for (int start = 0; start < D; start += chunk) {
    int count = 0;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int e = start + t + r * T;
      if (e < D) {
        v[r] = apply1(pre, x[base + e], cbase + e);
        count = r + 1;
      }
    }
    p = Stats::merge(p, Stats::template of<R>(v, count));
  }
  const MeanRstd s = Stats::finish(Stats::block(p, scratch), eps);

  if (D <= chunk) {  // every value is still in registers
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int e = t + r * T;
      if (e < D) sink.put(base + e, normalise(v[r], s, gamma[cbase + e], beta[cbase + e]));
    }
  } else {  // a group larger than the block holds: read it again (from L2 if it fits there)
    for (int e = t; e < D; e += T) {
      sink.put(base + e, normalise(apply1(pre, x[base + e], cbase + e), s, gamma[cbase + e], beta[cbase + e]));
    }
  }
}

template <class Stats, class Pre, class Post>
__global__ void __launch_bounds__(1024)
    group_norm_block_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                            const float* __restrict__ beta, float* __restrict__ y, int64_t segments, int64_t G,
                            int D, float eps, Pre pre, Post post) {
  __shared__ typename Stats::Partial scratch[32];
  StoreSink<Post> sink{y, post};
  for (int64_t q = blockIdx.x; q < segments; q += gridDim.x) {
    block_group_norm<Stats>(x, gamma, beta, q, G, D, eps, pre, sink, scratch);
  }
}

// ---- host side -----------------------------------------------------------------------------

// The block path's block size: enough threads that T * R covers the group, a whole number of
// warps, at most 1024.
inline int block_path_threads(int64_t D) {
  const int64_t per_thread = (D + kBlockValues - 1) / kBlockValues;
  return static_cast<int>(std::min<int64_t>(1024, std::max<int64_t>(32, (per_thread + 31) / 32 * 32)));
}

// The team size for D floats per group, each lane holding GROUPNORM_TEAM_VECS float4s: the
// fewest lanes that hold the group's D / 4 float4s, a power of two, at most 32. (A group of fewer
// float4s than a lane holds leaves some of them empty: a few registers, no memory traffic.)
inline int team_lanes(int64_t D) {
  int L = 1;
  while (static_cast<int64_t>(L) * GROUPNORM_TEAM_VECS * 4 < D) L *= 2;
  return L;
}

// Whether the team path applies: whole float4s per group, no more than a warp holds (32 lanes of
// GROUPNORM_TEAM_VECS float4s: 32 x 4 x 2 = 256 floats at the default), and every pointer it
// reads or writes with float4 accesses 16-byte aligned.
inline bool team_path_ok(int64_t D, std::initializer_list<const void*> pointers) {
  if (D <= 0 || D % 4 != 0 || D > 32 * 4 * GROUPNORM_TEAM_VECS) return false;
  for (const void* p : pointers) {
    if (p != nullptr && !aligned16(p)) return false;
  }
  return true;
}

// Calls launch(std::integral_constant<int, L>{}) for the team size L of D: the launcher turns it
// into the kernel instantiation for L lanes, so each team size is compiled once per kernel.
template <class Launch>
void with_team_lanes(int64_t D, Launch&& launch) {
  switch (team_lanes(D)) {
    case 1: return launch(std::integral_constant<int, 1>{});
    case 2: return launch(std::integral_constant<int, 2>{});
    case 4: return launch(std::integral_constant<int, 4>{});
    case 8: return launch(std::integral_constant<int, 8>{});
    case 16: return launch(std::integral_constant<int, 16>{});
    default: return launch(std::integral_constant<int, 32>{});
  }
}

// The largest group, D = C / G, the kernels take. The statistics count a group's values in float
// (the n of Welford's summary, the n of sum/sum-of-squares), and float counts exactly only up
// to 2^24: past it, n + 1 rounds back to n and the mean and variance are divided by a wrong
// count. The same bound keeps the block path's 32-bit indices (start + t + r * T, e += T) far
// from overflowing, whatever the block size.
constexpr int64_t kMaxGroupSize = int64_t{1} << 24;

// The launcher's checks for GroupNorm of x (N, C) with `num_groups` groups and affine gamma,
// beta of shape (C,), the messages naming what to fix, but for x's own dtype and layout (which
// check_group_norm_inputs, below, adds). `x_name`: what the launcher calls x (the backward
// launchers of kernels/tail_backward.cu call it y).
inline void check_group_norm_shapes(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& beta,
                                    int64_t num_groups, const char* x_name = "x") {
  CHECK_FLOAT_CUDA_INPUT(gamma);
  CHECK_FLOAT_CUDA_INPUT(beta);
  check_same_device(x, x_name, gamma, "gamma");
  check_same_device(x, x_name, beta, "beta");
  TORCH_CHECK(x.dim() == 2, x_name, " must be 2-D (N, C), got shape ", shape_string(x));
  const int64_t C = x.size(1);
  TORCH_CHECK(num_groups > 0, "num_groups must be positive, got ", num(num_groups));
  TORCH_CHECK(C % num_groups == 0, "the number of channels C = ", num(C),
              " must be divisible by num_groups = ", num(num_groups), " (", x_name, " has shape ", shape_string(x), ")");
  TORCH_CHECK(gamma.dim() == 1 && gamma.size(0) == C, "gamma (the GroupNorm weight) must have shape [",
              num(C), "] to match ", x_name, " ", shape_string(x), ", got ", shape_string(gamma));
  TORCH_CHECK(beta.dim() == 1 && beta.size(0) == C, "beta (the GroupNorm bias) must have shape [", num(C),
              "] to match ", x_name, " ", shape_string(x), ", got ", shape_string(beta));
  TORCH_CHECK(C / num_groups <= kMaxGroupSize, "a group of ", num(C / num_groups), " channels (C = ", num(C),
              ", num_groups = ", num(num_groups), ") is more than the kernels handle (", num(kMaxGroupSize),
              " = 2^24): use more groups, or F.group_norm");
}

// The same checks with x float32, CUDA and contiguous.
inline void check_group_norm_inputs(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& beta,
                                    int64_t num_groups, const char* x_name = "x") {
  check_float_cuda_input(x, x_name);
  check_group_norm_shapes(x, gamma, beta, num_groups, x_name);
}

// A per-channel bias (C,) applied before GroupNorm (problems 94 and 37); x_name as above.
inline void check_channel_bias(const torch::Tensor& x, const torch::Tensor& bias, const char* x_name = "x") {
  CHECK_FLOAT_CUDA_INPUT(bias);
  check_same_device(x, x_name, bias, "bias");
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(1), "bias must have shape [", num(x.size(1)),
              "] (one per column of ", x_name, " ", shape_string(x), "), got ", shape_string(bias));
}

// Launches GroupNorm (with pre and post) of x into y, both (N, C) contiguous, on the current
// stream. `bias` is the pre-operation's bias pointer (nullptr if none), checked for alignment
// with the others.
template <class Stats, class Pre, class Post>
void launch_group_norm(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& beta, torch::Tensor& y,
                       int64_t G, double eps, Pre pre, Post post) {
  const int64_t N = x.size(0);
  const int64_t C = x.size(1);
  if (N == 0 || C == 0) return;
  const int64_t D = C / G;
  const int64_t segments = N * G;
  const int device = x.get_device();
  const float e = static_cast<float>(eps);
  const float* xp = x.data_ptr<float>();
  const float* gp = gamma.data_ptr<float>();
  const float* bp = beta.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();

  if (team_path_ok(D, {xp, gp, bp, yp, pre.bias})) {
    with_team_lanes(D, [&](auto lanes) {
      constexpr int L = decltype(lanes)::value;
      auto kernel = group_norm_team_kernel<L, GROUPNORM_TEAM_VECS, Stats, Pre, Post>;
      const int64_t segments_per_block = kTeamThreads / L * kTeamUnroll;  // per trip
      const unsigned int grid = resident_grid(kernel, kTeamThreads, 0,
                                              (segments + segments_per_block - 1) / segments_per_block, device);
      kernel<<<grid, kTeamThreads, 0, stream>>>(xp, gp, bp, yp, segments, G, static_cast<int>(D), e, pre, post);
      LAUNCH_CHECK();
    });
  } else {
    const int threads = block_path_threads(D);
    auto kernel = group_norm_block_kernel<Stats, Pre, Post>;
    const unsigned int grid = resident_grid(kernel, threads, 0, segments, device);
    kernel<<<grid, threads, 0, stream>>>(xp, gp, bp, yp, segments, G, static_cast<int>(D), e, pre, post);
    LAUNCH_CHECK();
  }
}
