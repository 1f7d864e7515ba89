// kernels/common/reduce.cuh: sums across the 32 threads of a warp, without shared memory.
//
// First used by the GEMM ladder's second rung (kernels/gemm_02_coalesced.cu,
// notebooks/02_naive_gemm.ipynb), where the 32 lanes of a warp each accumulate a partial dot
// product over their share of K and must add them up; later the GroupNorm kernels
// (notebooks/06_groupnorm_reduction.ipynb) reduce each group's sum and sum of squares the same way.
//
// __shfl_xor_sync(mask, v, offset) hands each lane the value of v held by lane (lane ^ offset),
// register to register, in one instruction. Adding it for offsets 16, 8, 4, 2, 1 is a butterfly:
// each step doubles the number of lanes whose values a lane's sum contains (2, 4, 8, 16, 32), so
// five steps sum all 32 where a chain of additions would take 31. Lanes l and l ^ offset add the
// same two numbers, only in swapped order, and float addition is commutative, so all 32 lanes end
// with the bit-identical total: any lane may write it out, and a warp computing several sums can
// let lane j write sum j, all in one coalesced store.
#pragma once

#include <cmath>  // INFINITY

// The sum of v over the 32 lanes of the calling warp, returned to every lane.
// All 32 lanes must call it together (the full mask 0xffffffff names them); a lane that has
// nothing to contribute passes 0.0f rather than skipping the call.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// --------------------------------------------------------------------------------------------
// Everything below was added for the GroupNorm kernels (kernels/groupnorm.cu,
// kernels/min_bias_broadcast.cu; notebooks/06_groupnorm_reduction.ipynb and 07).
//
// A GroupNorm group of the problems is tiny: 16, 32 or 64 floats. Giving it a whole warp (or
// block) would leave most lanes idle, so the kernels let a *team* of WIDTH consecutive lanes
// (a power of two up to 32: 2, 4 and 8 for the problems' groups of 16, 32 and 64) own one group. A butterfly restricted to
// offsets < WIDTH never leaves the team: lane l only ever meets lanes l ^ offset, which differ
// from l in the low log2(WIDTH) bits alone. So one warp reduces 32 / WIDTH groups at once,
// every lane busy. warp_sum above is team_sum<32>.
//
// Groups larger than a warp can hold fall back to a block per group: block_sum, block_min and
// block_welford below add the shared-memory step across warps.

constexpr unsigned int kFullMask = 0xffffffffu;

// The sum of v over each team of WIDTH lanes, returned to every lane of the team (bitwise the
// same on each, as for warp_sum). All 32 lanes of the warp must call it together.
template <int WIDTH>
__device__ __forceinline__ float team_sum(float v) {
  static_assert(WIDTH >= 1 && WIDTH <= 32 && (WIDTH & (WIDTH - 1)) == 0, "a team is 1, 2, 4, 8, 16 or 32 lanes");
#pragma unroll
  for (int offset = WIDTH / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(kFullMask, v, offset);
  }
  return v;
}

// min that propagates NaN, as torch.min does (fminf would drop it: fminf(NaN, 1) == 1, so a row
// with a NaN would get a finite minimum where PyTorch returns NaN). Since sm_80 the hardware has
// it as one instruction, PTX min.NaN; written in C++ it takes a compare, a NaN test and a select.
__device__ __forceinline__ float nan_min(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float m;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(m) : "f"(a), "f"(b));
  return m;
#else
  return (a < b || a != a) ? a : b;  // b when b is NaN (a < NaN is false)
#endif
}

// The NaN-propagating minimum over the 32 lanes of the warp, returned to every lane. min is exact
// and order-free, so every lane gets the same bits and so would any order of reduction.
__device__ __forceinline__ float warp_min(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    v = nan_min(v, __shfl_xor_sync(kFullMask, v, offset));
  }
  return v;
}

// ---- Welford: mean and variance without cancellation --------------------------------------
//
// sum and sum-of-squares gives var = E[x^2] - E[x]^2, a difference of two large numbers when
// the data sit far from zero: at |x| ~ 1e3 with unit spread, E[x^2] ~ 1e6 and float keeps
// about 7 digits of it, so the variance keeps almost none. Welford's form carries instead the
// mean and M2 = sum (x - mean)^2, the squares of *deviations*, which stay small.
//
// Partial results (n, mean, M2) over two disjoint sets merge by Chan et al.'s formula (1979), exact
// in real arithmetic. In float each merge rounds, like any addition, but it only subtracts means,
// never two large sums of squares, so nothing cancels beyond the data's own rounding:
//   n = na + nb,  delta = mean_b - mean_a,
//   mean = mean_a + delta * nb / n,
//   M2 = M2a + M2b + delta^2 * na * nb / n.
// That merge is what makes Welford parallel: every thread summarises its own values, and the
// summaries merge across lanes, teams and warps like the sums do. n is a float: the counts here
// are at most a group's size, which the launchers bound by 2^24 (kMaxGroupSize in
// common/groupnorm.cuh), where float stops counting exactly. The divisions
// are __fdividef (a reciprocal and a multiply, 2 ulp) rather than IEEE division (a dozen
// instructions): they only weigh partial means, exact anyway for the power-of-two counts of
// the problems' groups, and instruction issue, not memory, limits the fused kernels.
struct Welford {
  float n, mean, m2;
};

// Welford over v[0 .. count): the exact two-pass form over values a thread already holds in
// registers (mean first, then squared deviations from it), which is Welford's result with no
// division per element. count may be 0 (a masked-off lane): then the empty summary {0, 0, 0}.
template <int K>
__device__ __forceinline__ Welford welford_of(const float (&v)[K], int count) {
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (k < count) s += v[k];
  }
  const float mean = count > 0 ? __fdividef(s, static_cast<float>(count)) : 0.0f;
  float m2 = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (k < count) {
      const float d = v[k] - mean;
      m2 += d * d;
    }
  }
  return {static_cast<float>(count), mean, m2};
}

// Chan's merge of two summaries; either may be empty (n == 0), both may be.
__device__ __forceinline__ Welford welford_merge(Welford a, Welford b) {
  const float n = a.n + b.n;
  const float wb = n > 0.0f ? __fdividef(b.n, n) : 0.0f;  // b's share of the merged set
  const float delta = b.mean - a.mean;
  return {n, a.mean + delta * wb, a.m2 + b.m2 + delta * delta * a.n * wb};
}

// The merged summary of each team of WIDTH lanes, returned to every lane of the team.
// Unlike a sum, merge(a, b) and merge(b, a) can differ in the last bit, so after the butterfly
// the team takes its first lane's result: every lane then normalises with the same mean and
// variance, bit for bit.
template <int WIDTH>
__device__ __forceinline__ Welford team_welford(Welford w) {
  static_assert(WIDTH >= 1 && WIDTH <= 32 && (WIDTH & (WIDTH - 1)) == 0, "a team is 1, 2, 4, 8, 16 or 32 lanes");
#pragma unroll
  for (int offset = WIDTH / 2; offset > 0; offset /= 2) {
    const Welford other = {__shfl_xor_sync(kFullMask, w.n, offset), __shfl_xor_sync(kFullMask, w.mean, offset),
                           __shfl_xor_sync(kFullMask, w.m2, offset)};
    w = welford_merge(w, other);
  }
  if constexpr (WIDTH == 1) return w;  // a team of one lane: nothing to merge or broadcast
  // width = WIDTH: source lane 0 means the first lane *of each team*.
  return {__shfl_sync(kFullMask, w.n, 0, WIDTH), __shfl_sync(kFullMask, w.mean, 0, WIDTH),
          __shfl_sync(kFullMask, w.m2, 0, WIDTH)};
}

// ---- across a block ------------------------------------------------------------------------
//
// Each warp reduces its 32 lanes with shuffles, lane 0 writes the warp's result to shared
// memory, and then *every* warp reads those (at most 32) partials and reduces them itself: all
// threads get the result, bitwise the same (the same data in the same order), after two
// __syncthreads and without a third one to broadcast it. The first __syncthreads lets a block
// call these helpers again and again with the same scratch: no warp overwrites a partial that a
// slower warp may still be reading from the previous call. Conditions: blockDim.x is a multiple
// of 32 (at most 1024), every thread of the block calls, and `scratch` is 32 entries of shared
// memory.
//
// warp_reduce(v) reduces over the warp and returns the result to every lane; identity is what
// a lane past the last warp contributes (0 for a sum, +inf for a min, an empty summary).
template <class T, class WarpReduce>
__device__ __forceinline__ T block_reduce(T v, T* scratch, T identity, WarpReduce warp_reduce) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  v = warp_reduce(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warp_reduce(lane < warps ? scratch[lane] : identity);
}

struct WarpSum {
  __device__ float operator()(float v) const { return warp_sum(v); }
};
struct WarpMin {
  __device__ float operator()(float v) const { return warp_min(v); }
};
struct WarpWelford {
  __device__ Welford operator()(Welford w) const { return team_welford<32>(w); }
};

__device__ __forceinline__ float block_sum(float v, float* scratch) { return block_reduce(v, scratch, 0.0f, WarpSum{}); }

__device__ __forceinline__ float block_min(float v, float* scratch) {
  return block_reduce(v, scratch, INFINITY, WarpMin{});
}

__device__ __forceinline__ Welford block_welford(Welford w, Welford* scratch) {
  return block_reduce(w, scratch, Welford{0.0f, 0.0f, 0.0f}, WarpWelford{});
}
