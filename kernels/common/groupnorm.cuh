// kernels/common/groupnorm.cuh: GroupNorm on an (N, C) tensor, as building blocks that
// kernels/groupnorm.cu (plain and fused GroupNorms) and kernels/min_bias_broadcast.cu
// (GroupNorm + row minimum) put together. Notebook: 06_groupnorm_reduction.ipynb.
//
// What GroupNorm computes on (N, C) with G groups, D = C / G channels per group: for each
// sample n and group g, over the D values x[n, g*D .. g*D + D-1] (seeds 003 and 004 reduce over
// the whole batch instead: wrong),
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
//   team path   (D a multiple of 4, D <= 128, 16-byte-aligned pointers: the problems' 16, 32
//               and 64 floats). A team of L lanes (L = 4, 8, 16 or 32: D / 4 rounded up to a
//               power of two) owns one segment; lane l holds floats 4l .. 4l+3 in one float4
//               register. One warp normalises 32 / L segments side by side, reading 32 x 16 =
//               512 contiguous bytes when D / 4 == L. Statistics take log2(L) shuffles, no
//               shared memory, no __syncthreads. Every value is loaded once and stays in
//               registers until it is written.
//   block path  (anything else: D not a multiple of 4 such as C = 115, G = 5; D > 128;
//               unaligned views). A block of T threads owns one segment; thread t holds
//               floats t, t + T, ... (up to R of them, coalesced scalar loads), and the
//               statistics add a shared-memory step across warps (common/reduce.cuh). Groups
//               larger than T * R (R = 8, T <= 1024: 8192 floats) are summarised chunk by chunk
//               and read a second time to normalise, from L2 when the group fits there.
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
    // E[x^2] - E[x]^2 can come out slightly negative after cancellation; a variance cannot.
    const float var = fmaxf(p.ss / p.n - mean * mean, 0.0f);
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

// Each team normalises kTeamUnroll segments per trip through its loop, issuing all their loads
// before it uses any: a thread then has 2 x 16 bytes in flight rather than 16, and the loads of
// one segment overlap the shuffles and the arithmetic of the other. (At ~40 registers per thread
// an SM holds 1536 threads; one 16-byte load each is about what an H100 needs in flight to
// stream at full bandwidth, with nothing to spare for the time spent computing.)
constexpr int kTeamUnroll = 2;

// Where this lane's float4 of segment q is, and whether it holds data: lane l of a team of L
// holds floats 4l .. 4l+3 of the segment, when 4l < D and the segment exists (q_ok).
struct TeamSlot {
  int64_t off;  // index of its first float in x (and y)
  int64_t c;    // the channel of that float
  bool valid;
};

__device__ __forceinline__ TeamSlot team_slot(int64_t q, bool q_ok, int l, int64_t G, int D) {
  return {q * D + 4 * l, index_mod(q, G) * D + 4 * l, q_ok && 4 * l < D};
}

__device__ __forceinline__ float4 team_load(const float* __restrict__ x, const TeamSlot& s) {
  return s.valid ? load4(x + s.off) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

// The rest of the work on one segment, once its float4 `raw` has arrived: pre, the statistics
// over the team (log2(L) shuffles), the normalisation, and sink.put4 for lanes with data. All
// 32 lanes of the warp call together, valid or not: the shuffles need every lane; a lane without
// data contributes an empty summary.
template <int L, class Stats, class Pre, class Sink>
__device__ __forceinline__ void team_group_norm(float4 raw, const TeamSlot& slot, const float* __restrict__ gamma,
                                                const float* __restrict__ beta, float eps, const Pre& pre,
                                                Sink& sink) {
  float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (slot.valid) {
    const float4 t = apply4(pre, raw, slot.c);
    v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
  }
  const MeanRstd s = Stats::finish(Stats::template team<L>(Stats::of(v, slot.valid ? 4 : 0)), eps);
  if (slot.valid) {
    const float4 g = load4(gamma + slot.c);
    const float4 b = load4(beta + slot.c);
    sink.put4(slot.off, make_float4(normalise(v[0], s, g.x, b.x), normalise(v[1], s, g.y, b.y),
                                    normalise(v[2], s, g.z, b.z), normalise(v[3], s, g.w, b.w)));
  }
}

// GroupNorm over all N * G segments. Per trip, warp w takes kTeamUnroll runs of 32 / L
// consecutive segments, one segment per team per run, then strides by the whole grid's warps.
// The loop condition depends on the warp alone, so a warp's 32 lanes always shuffle together.
template <int L, class Stats, class Pre, class Post>
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
    TeamSlot slot[kTeamUnroll];
    float4 raw[kTeamUnroll];
#pragma unroll
    for (int u = 0; u < kTeamUnroll; ++u) {  // every load first ...
      const int64_t q = q0 + u * kTeams + team;
      slot[u] = team_slot(q, q < segments, l, G, D);
      raw[u] = team_load(x, slot[u]);
    }
#pragma unroll
    for (int u = 0; u < kTeamUnroll; ++u) {  // ... then the work
      team_group_norm<L, Stats>(raw[u], slot[u], gamma, beta, eps, pre, sink);
    }
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

// The team size for D floats per group: D / 4 float4s rounded up to a power of two, at least 4.
inline int team_lanes(int64_t D) {
  int L = 4;
  while (L < D / 4) L *= 2;
  return L;
}

// Whether the team path applies: whole float4s per group, at most one per lane of a warp, and
// every pointer it reads or writes with float4 accesses 16-byte aligned.
inline bool team_path_ok(int64_t D, std::initializer_list<const void*> pointers) {
  if (D % 4 != 0 || D > 128) return false;
  for (const void* p : pointers) {
    if (p != nullptr && !aligned16(p)) return false;
  }
  return true;
}

// The launcher's checks for GroupNorm of x (N, C) with `num_groups` groups and affine gamma,
// beta of shape (C,), the messages naming what to fix.
inline void check_group_norm_inputs(const torch::Tensor& x, const torch::Tensor& gamma, const torch::Tensor& beta,
                                    int64_t num_groups) {
  CHECK_FLOAT_CUDA_INPUT(x);
  CHECK_FLOAT_CUDA_INPUT(gamma);
  CHECK_FLOAT_CUDA_INPUT(beta);
  CHECK_SAME_DEVICE(x, gamma);
  CHECK_SAME_DEVICE(x, beta);
  TORCH_CHECK(x.dim() == 2, "x must be 2-D (N, C), got shape ", shape_string(x));
  const int64_t C = x.size(1);
  TORCH_CHECK(num_groups > 0, "num_groups must be positive, got ", num(num_groups));
  TORCH_CHECK(C % num_groups == 0, "the number of channels C = ", num(C),
              " must be divisible by num_groups = ", num(num_groups), " (x has shape ", shape_string(x), ")");
  TORCH_CHECK(gamma.dim() == 1 && gamma.size(0) == C, "gamma (the GroupNorm weight) must have shape [",
              num(C), "] to match x ", shape_string(x), ", got ", shape_string(gamma));
  TORCH_CHECK(beta.dim() == 1 && beta.size(0) == C, "beta (the GroupNorm bias) must have shape [", num(C),
              "] to match x ", shape_string(x), ", got ", shape_string(beta));
  TORCH_CHECK(C / num_groups <= INT32_MAX, "a group of ", num(C / num_groups),
              " channels is more than the kernels index (2^31 - 1)");
}

// A per-channel bias (C,) applied before GroupNorm (problems 94 and 37).
inline void check_channel_bias(const torch::Tensor& x, const torch::Tensor& bias) {
  CHECK_FLOAT_CUDA_INPUT(bias);
  CHECK_SAME_DEVICE(x, bias);
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(1), "bias must have shape [", num(x.size(1)),
              "] (one per column of x ",
              shape_string(x), "), got ", shape_string(bias));
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
    auto launch = [&](auto kernel, int L) {
      const int64_t segments_per_block = kTeamThreads / L;
      const unsigned int grid = resident_grid(kernel, kTeamThreads, 0,
                                              (segments + segments_per_block - 1) / segments_per_block, device);
      kernel<<<grid, kTeamThreads, 0, stream>>>(xp, gp, bp, yp, segments, G, static_cast<int>(D), e, pre, post);
      LAUNCH_CHECK();
    };
    switch (team_lanes(D)) {
      case 4: launch(group_norm_team_kernel<4, Stats, Pre, Post>, 4); break;
      case 8: launch(group_norm_team_kernel<8, Stats, Pre, Post>, 8); break;
      case 16: launch(group_norm_team_kernel<16, Stats, Pre, Post>, 16); break;
      default: launch(group_norm_team_kernel<32, Stats, Pre, Post>, 32); break;
    }
  } else {
    const int threads = block_path_threads(D);
    auto kernel = group_norm_block_kernel<Stats, Pre, Post>;
    const unsigned int grid = resident_grid(kernel, threads, 0, segments, device);
    kernel<<<grid, threads, 0, stream>>>(xp, gp, bp, yp, segments, G, static_cast<int>(D), e, pre, post);
    LAUNCH_CHECK();
  }
}
