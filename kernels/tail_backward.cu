// tail_backward.cu: the backward of each problem's tail, everything after the GEMM, as fused kernels
// (the training step of the drop-ins: utils/ops.py registers these as the tail ops' backward;
// notebook 10). y is the GEMM's output (nn.Linear's bias included), which the forward keeps.
//
//   bias_hardtanh_mish_group_norm_backward(grad, y, bias, lo, hi, G, gamma, beta, eps)
//       94: out = group_norm(mish(hardtanh(y + bias, lo, hi)))   -> (dy, dbias, dgamma, dbeta)
//   swish_bias_group_norm_backward(grad, y, bias, G, gamma, beta, eps)
//       37: out = group_norm(y * sigmoid(y) + bias)   -> (dy, dbias, dgamma, dbeta, dlinear_bias)
//   group_norm_leaky_relu_x2_backward(grad, y, G, gamma, beta, eps, slope)
//       62: n = group_norm(y); l = leaky_relu(n); out = l + l   -> (dy, dgamma, dbeta, dlinear_bias)
//   group_norm_min_bias_backward(grad, y, G, gamma, beta, eps)
//       75: out (1, C, M, 1) = min(group_norm(y), dim=1) + bias   -> (dy, dgamma, dbeta, dbias, dlinear_bias)
//
// What they compute. GroupNorm's backward, per (row, group) of D = C / G channels, with the
// statistics recomputed from y (a group is 64 to 256 bytes, already in registers: cheaper than
// keeping mean and rstd) in the forward's order of operations, Welford over the lanes of
// common/groupnorm.cuh's team (94's Mish in IEEE float, where the forward kernel may use the
// approximate one: the gradients are held to float64, not to the forward's bits):
//   xhat = (x - mean) * rstd,  u = the gradient arriving at GroupNorm's output,  gx = u * gamma,
//   dx = rstd * (gx - mean_D(gx) - xhat * mean_D(gx * xhat)),
//   dgamma[c] = sum over rows of u * xhat,  dbeta[c] = sum over rows of u,
// and around it each tail's own chain rule (the tail structs below). Every column sum (dgamma,
// dbeta, the biases' gradients, dlinear_bias = the column sum of dy) is deterministic: each block
// sums its rows in a fixed order into a partial of its own, and a second small kernel adds the
// partials in a fixed order. No float atomics, so the same inputs give the same bits every run.
//
// A model in bf16 or fp16 (94, 37, 62): grad, y and dy in its dtype, read and written by the same
// kernels (their element E: common/elementwise16.cuh), every value computed in float and dy rounded
// once, the parameters and the column sums float32. Its bits are the float32 kernels' on the values
// converted, dy then rounded: what converting around the float32 op gave, without the three passes
// that converted (about 3.5 GB at 37's shape). 75 keeps its float32 kernels: the caller converts.
//
// Thread -> data, 94 / 37 / 62 (tail_backward_team_kernel). The team layout of
// common/groupnorm.cuh (its forward's): a team of L lanes owns a group, each lane two float4s of it
// (L = 4 for 94's D = 32, 2 for 62's 16, 8 for 37's 64), a warp 32 / L groups side by side, i.e.
// 256 consecutive columns, 1 KB of a row. The grid is 2-D: blockIdx.x picks those 256 columns,
// blockIdx.y a chunk of rows, and the 8 warps of a block take the chunk's rows in turn, each
// loading y and grad of its row (16-byte loads, 512 contiguous bytes per instruction), computing
// dy in registers (the statistics and the two sums of GroupNorm's backward over the team:
// log2(L) shuffles each) and storing it. A thread's columns never change, so it keeps its
// channels' gamma, beta and bias in registers and its share of the column sums in registers too;
// at the end the block adds its 8 warps' sums (shared memory, warp 0 first) into its partial.
// The number of row chunks fills the GPU once with resident blocks (two per SM at ~120 registers
// a thread: on an H100 8 chunks of 128 rows at 94's and 62's shape, 16 of 2048 rows at 37's); a
// chunk has at least 32 rows, so the partials stay small.
// Any other shape (D not a multiple of 4 such as C = 115, G = 5; D > 256; unaligned views) takes
// a slower general path: a warp per (row, group) computes the statistics and the two sums
// (tail_stats_kernel), then a thread per column walks its chunk of rows (tail_backward_general_kernel).
//
// Thread -> data, 75. Its gradient reaches one element per row, the row's minimum, so the work
// is organised by rows (the minimum spans all C channels of a row), in three kernels:
//   min_grad_sums_kernel    grad (1, C, M, 1) is (C, M) in memory: blocks of (a chunk of channels)
//                           x (128 rows); partial sums over channels of each row (dr[i], the
//                           minimum's gradient) and over rows of each channel (dbias[c]);
//   min_rows_backward_*     a block per row: each group's statistics and normalised values (the
//                           team layout again), the row's first minimum (NaN first, as torch.min),
//                           dy written for the whole row (0 outside the minimum's group), then
//                           the minimum's group rewritten with GroupNorm's backward of a one-hot
//                           gradient; per row it records the minimum's channel, its group's mean
//                           and rstd and dr;
//   min_column_sums_kernel  a block per 32 columns: its 32 warps scan the rows' records 32 at a
//                           time (a ballot finds the rows whose minimum's group meets the
//                           columns) and sum dgamma, dbeta and dlinear_bias over those rows in a
//                           fixed order; dbias from the first kernel's partials.
//
// Bytes at the problems' shapes (each element of y and grad read once, dy written once):
//   94, 62, 75 (M = 1024, C = 8192): y 33.5 MB + grad 33.5 MB + dy 33.5 MB = 100.7 MB; the
//     partials 8 x 8192 x 3 sums x 4 B = 0.8 MB written and read back (L2-resident); 75's records
//     and partials about 1 MB, and its column sums read back the minimum's group of each row of
//     dy and y (64 bytes a row).
//   37 (M = 32768, C = 4096): 3 x 537 MB = 1.61 GB; partials 16 x 4096 x 4 sums x 4 B = 1 MB.
// FLOPs: ~40 instructions per element for 94 (Mish and its derivative: one expf, two divisions),
// ~25 for 37, ~20 for 62, ~15 for 75; an H100 issues ~115 per element while streaming 12 bytes
// per element at 3 TB/s, so all four should be memory-bound.
//
// PREDICTION (written before measuring; H100, copy bandwidth ~3000 GB/s, clean L2): the floor is
// 100.7 MB / 3.0 TB/s = 34 us at 94/62/75's shape and 1.61 GB / 3.0 TB/s = 0.54 ms at 37's.
//   62: 38-42 us (main kernel 35-38 us + the column sums' finish 2-3 us);
//   94: 40-48 us (the most arithmetic: Mish and its derivative in IEEE float; the first at risk
//       of being bound by instruction issue rather than memory);
//   37: 0.58-0.64 ms (84-93% of a copy's bandwidth; the partials are negligible there);
//   75: 45-52 us: the grad pass 14-16 us (a pure read: 70-75% of a copy's bandwidth), the rows
//       26-30 us, the column scan 3-5 us and two launch gaps.

// @ops: its launchers are operators' kernels (utils/ops.py registers them)

#include <cmath>
#include <cstdint>
#include <tuple>

#include "common/activations.cuh"
#include "common/check.cuh"
#include "common/elementwise.cuh"
#include "common/elementwise16.cuh"
#include "common/groupnorm.cuh"
#include "common/reduce.cuh"

// ---- the tails, element by element ---------------------------------------------------------------
//
// A tail tells the kernels, for one element of channel c (y its GEMM output, b its bias if any):
//   pre(y, b, aux)                      the value GroupNorm normalises, in the forward's order of
//                                       operations; aux keeps what the derivative needs later;
//   upstream(grad, xhat, gamma, beta)   u, the gradient arriving at GroupNorm's output;
//   input_grad(dx, y, b, aux)           dy from dx, the gradient GroupNorm passes to its input;
//   accumulate(acc, u, xhat, dx, dy)    its column sums, in the order its launcher returns them.

// mish(h) and mish'(h) from one exp, e = e^h: tanh(softplus(h)) = n / (n + 2) with n = e (e + 2)
// (mish_f's form, common/activations.cuh, so m is mish_f's bits), sigmoid(h) = e / (1 + e), and
// mish'(h) = t + h * sigmoid(h) * (1 - t^2), aten::mish_backward's formula. Past h = 20 both are
// what float gives anyway: t rounds to 1, so m = h and mish' = 1 (n would overflow from h ~ 44).
__device__ __forceinline__ void mish_with_derivative(float h, float& m, float& d) {
  if (h > 20.0f) {
    m = h;
    d = 1.0f;
    return;
  }
  const float e = expf(h);
  const float n = e * (e + 2.0f);
  const float t = n / (n + 2.0f);
  const float s = e / (1.0f + e);
  m = h * t;
  d = t + h * s * (1.0f - t * t);
}

// 94: out = group_norm(mish(hardtanh(y + bias, lo, hi))). dy = dz (the bias adds), so dbias is
// also nn.Linear's bias gradient. Sums: dbias, dgamma, dbeta.
struct HardtanhMishTail {
  static constexpr int kSums = 3;
  static constexpr bool kHasBias = true;
  static constexpr bool kUsesBeta = false;
  const float* bias;
  float lo, hi;
  __device__ float pre(float y, float b, float& aux) const {
    float m;
    mish_with_derivative(hardtanh_f(y + b, lo, hi), m, aux);
    return m;
  }
  __device__ float upstream(float grad, float, float, float) const { return grad; }
  __device__ float input_grad(float dx, float y, float b, float aux) const {
    // aten::hardtanh_backward's rule: nothing passes where z <= lo or z >= hi (a NaN z passes
    // its gradient, as there). A select, not a product: dx may be NaN or inf where it is cut.
    const float z = y + b;
    return (z <= lo || z >= hi) ? 0.0f : dx * aux;
  }
  __device__ void accumulate(float (&acc)[kSums], float u, float xhat, float, float dy) const {
    acc[0] += dy;
    acc[1] += u * xhat;
    acc[2] += u;
  }
};

// 37: out = group_norm(y * sigmoid(y) + bias). z = y s + b exactly as the forward rounds it
// (SwishBias, common/activations.cuh); dy = dz * (s + y s (1 - s)), the product rule on
// sigmoid(y) * y. Sums: dbias (of dz), dgamma, dbeta, dlinear_bias (of dy).
struct SwishBiasTail {
  static constexpr int kSums = 4;
  static constexpr bool kHasBias = true;
  static constexpr bool kUsesBeta = false;
  const float* bias;
  __device__ float pre(float y, float b, float& aux) const {
    const float s = sigmoid_f(y);
    aux = s;
    return __fadd_rn(__fmul_rn(s, y), b);
  }
  __device__ float upstream(float grad, float, float, float) const { return grad; }
  __device__ float input_grad(float dx, float y, float, float s) const { return dx * (s + y * s * (1.0f - s)); }
  __device__ void accumulate(float (&acc)[kSums], float u, float xhat, float dx, float dy) const {
    acc[0] += dx;
    acc[1] += u * xhat;
    acc[2] += u;
    acc[3] += dy;
  }
};

// 62: n = group_norm(y); l = leaky_relu(n, slope); out = l + l. Autograd hands each l the
// gradient once, so l's is grad + grad, and aten::leaky_relu_backward passes it where n > 0, times
// slope elsewhere. n is normalise()'s value, the forward's bits, so the branch is the forward's.
// Sums: dgamma, dbeta, dlinear_bias.
struct LeakyReluX2Tail {
  static constexpr int kSums = 3;
  static constexpr bool kHasBias = false;
  static constexpr bool kUsesBeta = true;
  const float* bias = nullptr;
  float slope;
  __device__ float pre(float y, float, float& aux) const {
    aux = 0.0f;
    return y;
  }
  __device__ float upstream(float grad, float xhat, float gamma, float beta) const {
    const float n = xhat * gamma + beta;  // normalise(): (y - mean) * rstd * gamma + beta
    const float dl = grad + grad;
    return n > 0.0f ? dl : dl * slope;
  }
  __device__ float input_grad(float dx, float, float, float) const { return dx; }
  __device__ void accumulate(float (&acc)[kSums], float u, float xhat, float, float dy) const {
    acc[0] += u * xhat;
    acc[1] += u;
    acc[2] += dy;
  }
};

template <class Tail>
__device__ __forceinline__ float bias_of(const Tail& tail, int64_t c) {
  if constexpr (Tail::kHasBias) {
    return tail.bias[c];
  } else {
    return 0.0f;
  }
}

// GroupNorm's backward at one element, given m1 = mean_D(gx) and m2 = mean_D(gx * xhat).
__device__ __forceinline__ float group_norm_dx(float gx, float xhat, float rstd, float m1, float m2) {
  return rstd * (gx - m1 - xhat * m2);
}

// ---- register arrays of a team lane --------------------------------------------------------------

// A lane's V float4s of one group (team_slot's layout: float4 k at p + 4 * L * k) into floats
// v[0 .. 4V); the float4s past `count` read as 0. E: the tensor's element, float, or a 16-bit one
// read four values at a time (common/elementwise16.cuh) and stored rounded.
template <int L, int V, class E>
__device__ __forceinline__ void lane_load(const E* __restrict__ p, int count, float (&v)[4 * V]) {
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const float4 t = k < count ? load4(p + 4 * L * k) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    v[4 * k] = t.x, v[4 * k + 1] = t.y, v[4 * k + 2] = t.z, v[4 * k + 3] = t.w;
  }
}

template <int L, int V, class E>
__device__ __forceinline__ void lane_store(E* __restrict__ p, int count, const float (&v)[4 * V]) {
#pragma unroll
  for (int k = 0; k < V; ++k) {
    if (k < count) store4(p + 4 * L * k, make_float4(v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]));
  }
}

// ---- 94, 37, 62: the team path ---------------------------------------------------------------------

constexpr int kTailWarps = kTeamThreads / 32;

// Whether a warp of the team kernel loads its next row's y and grad before it computes the
// current one, so that its loads stay in flight while it computes: twice the bytes in flight
// per warp at the same occupancy (two blocks of 256 threads per SM at ~120 registers), for 16
// more registers. (Compile with -DTAIL_BACKWARD_PREFETCH=0 to compare.)
#ifndef TAIL_BACKWARD_PREFETCH
#define TAIL_BACKWARD_PREFETCH 1
#endif
constexpr bool kTailPrefetch = TAIL_BACKWARD_PREFETCH;

// Block (x, y): the 32 / L groups x * 32 / L ... (256 columns at the problems' D), rows
// y * rows_per_chunk ... ; warp w takes the chunk's rows w, w + 8, ... Writes dy and the block's
// column sums, partial[s][blockIdx.y][c] for its columns c. grad, y and dy in E (a model in bf16 or
// fp16: E is its element, the arithmetic float, dy rounded once); the parameters and sums float.
template <int L, int V, class Tail, class E = float>
__global__ void __launch_bounds__(kTeamThreads, 2)
    tail_backward_team_kernel(const E* __restrict__ grad, const E* __restrict__ y,
                              const float* __restrict__ gamma, const float* __restrict__ beta, Tail tail,
                              E* __restrict__ dy, float* __restrict__ partial, int64_t M, int64_t G, int D,
                              float inv_d, float eps, int64_t rows_per_chunk) {
  constexpr int kTeams = 32 / L;
  constexpr int NV = 4 * V;          // floats per lane
  constexpr int S = Tail::kSums;
  constexpr int kMaxWidth = 32 * NV;  // kTeams * D <= kTeams * L * NV: the most columns a block owns
  __shared__ float red[kTailWarps][kMaxWidth];

  const int lane = threadIdx.x % 32;
  const int l = lane % L;
  const int team = lane / L;
  const int warp = threadIdx.x / 32;
  const int64_t C = G * D;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kTeams + team;
  // The lane's place in row 0 (segment q = g): off = c = g * D + 4 * l, its first column; row r
  // is r * C further. count: its float4s holding data (0 for a team past the last group).
  const TeamSlot slot = team_slot<L, V>(g, g * D, g < G, l, D);
  const int count = slot.count;

  // The thread's columns are the same in every row: their parameters load once.
  float gam[NV], bet[NV], bia[NV];
  lane_load<L, V>(gamma + slot.c, count, gam);
  if constexpr (Tail::kUsesBeta) {
    lane_load<L, V>(beta + slot.c, count, bet);
  } else {
#pragma unroll
    for (int j = 0; j < NV; ++j) bet[j] = 0.0f;
  }
  if constexpr (Tail::kHasBias) {
    lane_load<L, V>(tail.bias + slot.c, count, bia);
  } else {
#pragma unroll
    for (int j = 0; j < NV; ++j) bia[j] = 0.0f;
  }

  float acc[NV][S];
#pragma unroll
  for (int j = 0; j < NV; ++j) {
#pragma unroll
    for (int s = 0; s < S; ++s) acc[j][s] = 0.0f;
  }

  // The loop condition depends on the warp alone: its 32 lanes shuffle together.
  const int64_t row_first = static_cast<int64_t>(blockIdx.y) * rows_per_chunk + warp;
  const int64_t row_end = std::min<int64_t>(M, (static_cast<int64_t>(blockIdx.y) + 1) * rows_per_chunk);
  float y_next[NV], g_next[NV];  // with kTailPrefetch: the warp's next row, in flight while this one computes
  if (kTailPrefetch && row_first < row_end) {
    lane_load<L, V>(y + row_first * C + slot.c, count, y_next);
    lane_load<L, V>(grad + row_first * C + slot.c, count, g_next);
  }
  for (int64_t r = row_first; r < row_end; r += kTailWarps) {
    const int64_t off = r * C + slot.c;
    float yv[NV], gv[NV];
    if constexpr (kTailPrefetch) {
#pragma unroll
      for (int j = 0; j < NV; ++j) yv[j] = y_next[j], gv[j] = g_next[j];
      if (r + kTailWarps < row_end) {
        lane_load<L, V>(y + off + kTailWarps * C, count, y_next);
        lane_load<L, V>(grad + off + kTailWarps * C, count, g_next);
      }
    } else {
      lane_load<L, V>(y + off, count, yv);
      lane_load<L, V>(grad + off, count, gv);
    }

    float p[NV], aux[NV];
#pragma unroll
    for (int j = 0; j < NV; ++j) p[j] = tail.pre(yv[j], bia[j], aux[j]);
    const MeanRstd st = WelfordStats::finish(WelfordStats::team<L>(WelfordStats::of(p, 4 * count)), eps);

    float xh[NV], u[NV], gx[NV];
    float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
    for (int j = 0; j < NV; ++j) {
      xh[j] = (p[j] - st.mean) * st.rstd;
      u[j] = tail.upstream(gv[j], xh[j], gam[j], bet[j]);
      gx[j] = u[j] * gam[j];
      if (j / 4 < count) {
        s1 += gx[j];
        s2 += gx[j] * xh[j];
      }
    }
    const float m1 = team_sum<L>(s1) * inv_d;
    const float m2 = team_sum<L>(s2) * inv_d;

    float out[NV];
#pragma unroll
    for (int j = 0; j < NV; ++j) {
      const float dx = group_norm_dx(gx[j], xh[j], st.rstd, m1, m2);
      out[j] = tail.input_grad(dx, yv[j], bia[j], aux[j]);
      if (j / 4 < count) tail.accumulate(acc[j], u[j], xh[j], dx, out[j]);
    }
    lane_store<L, V>(dy + off, count, out);
  }

  // The block's column sums: each warp's into shared memory, then one thread per column adds
  // the 8 in warp order. Column t of the tile is team t / D's, lane-float (t % D) / 4's.
  const int64_t tile_first = static_cast<int64_t>(blockIdx.x) * kTeams * D;
  const int width = static_cast<int>(std::min<int64_t>(static_cast<int64_t>(kTeams) * D, C - tile_first));
  const int64_t chunks = gridDim.y;
#pragma unroll
  for (int s = 0; s < S; ++s) {
    if (s > 0) __syncthreads();  // every thread has read the previous sum's red
#pragma unroll
    for (int j = 0; j < NV; ++j) {
      if (j / 4 < count) red[warp][team * D + 4 * l + 4 * L * (j / 4) + j % 4] = acc[j][s];
    }
    __syncthreads();
    for (int t = threadIdx.x; t < width; t += blockDim.x) {
      float total = 0.0f;
#pragma unroll
      for (int w = 0; w < kTailWarps; ++w) total += red[w][t];
      partial[(s * chunks + blockIdx.y) * C + tile_first + t] = total;
    }
  }
}

// ---- 94, 37, 62: the general path (any D, any alignment) --------------------------------------------

// Welford over the D floats at x, pre(x[e], e) each, by the 32 lanes of a warp: lane holds floats
// lane + 32 r of a chunk of 256 (8 per lane, coalesced), summarised chunk by chunk and merged as
// the forward's block path does; the warp's summary then merges over the lanes. Every lane gets
// the same bits. All 32 lanes call.
template <class Pre, class E>
__device__ __forceinline__ MeanRstd warp_welford(const E* __restrict__ x, int D, float eps, const Pre& pre) {
  constexpr int R = kBlockValues;
  const int lane = threadIdx.x % 32;
  Welford w = {0.0f, 0.0f, 0.0f};
  for (int start = 0; start < D; start += 32 * R) {
    float v[R];
    int count = 0;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int e = start + lane + 32 * r;
      v[r] = 0.0f;
      if (e < D) {
        v[r] = pre(as_float(x[e]), e);
        count = r + 1;
      }
    }
    w = welford_merge(w, welford_of(v, count));
  }
  return WelfordStats::finish(team_welford<32>(w), eps);
}

// One warp per (row, group) segment q: its mean and rstd, and m1 = mean_D(gx), m2 = mean_D(gx * xhat)
// of GroupNorm's backward, into stats[q]. A second pass over the segment (from L1) for the sums.
template <class Tail, class E = float>
__global__ void __launch_bounds__(256)
    tail_stats_kernel(const E* __restrict__ grad, const E* __restrict__ y, const float* __restrict__ gamma,
                      const float* __restrict__ beta, Tail tail, float4* __restrict__ stats, int64_t segments,
                      int64_t G, int D, float inv_d, float eps) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  for (int64_t q = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; q < segments; q += warps) {
    const int64_t base = q * D;                 // the segment's first float
    const int64_t cbase = index_mod(q, G) * D;  // and its channel
    const MeanRstd st = warp_welford(y + base, D, eps, [&](float v, int e) {
      float aux;
      return tail.pre(v, bias_of(tail, cbase + e), aux);
    });
    float s1 = 0.0f, s2 = 0.0f;
    for (int e = lane; e < D; e += 32) {
      const int64_t c = cbase + e;
      float aux;
      const float xh = (tail.pre(as_float(y[base + e]), bias_of(tail, c), aux) - st.mean) * st.rstd;
      const float gm = gamma[c];
      const float gx = tail.upstream(as_float(grad[base + e]), xh, gm, Tail::kUsesBeta ? beta[c] : 0.0f) * gm;
      s1 += gx;
      s2 += gx * xh;
    }
    s1 = warp_sum(s1);
    s2 = warp_sum(s2);
    if (lane == 0) stats[q] = make_float4(st.mean, st.rstd, s1 * inv_d, s2 * inv_d);
  }
}

// Thread t of block (x, y) owns column c = 256 x + t, for the rows of chunk y (coalesced scalar
// accesses across the block); its column sums go straight to partial[s][y][c].
template <class Tail, class E = float>
__global__ void __launch_bounds__(256)
    tail_backward_general_kernel(const E* __restrict__ grad, const E* __restrict__ y,
                                 const float* __restrict__ gamma, const float* __restrict__ beta, Tail tail,
                                 const float4* __restrict__ stats, E* __restrict__ dy,
                                 float* __restrict__ partial, int64_t M, int64_t G, int D, int64_t rows_per_chunk) {
  constexpr int S = Tail::kSums;
  const int64_t C = G * D;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;  // no barrier below
  const int64_t g = c / D;
  const float gm = gamma[c];
  const float bt = Tail::kUsesBeta ? beta[c] : 0.0f;
  const float b = bias_of(tail, c);
  float acc[S];
#pragma unroll
  for (int s = 0; s < S; ++s) acc[s] = 0.0f;
  const int64_t row_end = std::min<int64_t>(M, (static_cast<int64_t>(blockIdx.y) + 1) * rows_per_chunk);
  for (int64_t r = static_cast<int64_t>(blockIdx.y) * rows_per_chunk; r < row_end; ++r) {
    const float4 st = stats[r * G + g];  // mean, rstd, m1, m2
    const int64_t off = r * C + c;
    const float yv = as_float(y[off]);
    float aux;
    const float xh = (tail.pre(yv, b, aux) - st.x) * st.y;
    const float u = tail.upstream(as_float(grad[off]), xh, gm, bt);
    const float dx = group_norm_dx(u * gm, xh, st.y, st.z, st.w);
    const float out = tail.input_grad(dx, yv, b, aux);
    dy[off] = ElementOf<E>::rounded(out);
    tail.accumulate(acc, u, xh, dx, out);
  }
  const int64_t chunks = gridDim.y;
#pragma unroll
  for (int s = 0; s < S; ++s) partial[(s * chunks + blockIdx.y) * C + c] = acc[s];
}

// ---- the column sums' second pass ------------------------------------------------------------------

struct ColumnSums {
  float* out[4];
};

// out[s][c] = sum over chunks k = 0, 1, ... of partial[s][k][c], in that order.
__global__ void __launch_bounds__(256)
    column_sums_finish_kernel(const float* __restrict__ partial, ColumnSums sums, int S, int64_t chunks, int64_t C) {
  const int64_t total = S * C;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t s = i / C;
    const int64_t c = i - s * C;
    const float* p = partial + s * chunks * C + c;
    float t = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) t += p[k * C];
    sums.out[s][c] = t;
  }
}

// ---- 75: GroupNorm -> row minimum -> + bias(1, C, 1, 1) ----------------------------------------------

// The row minimum's candidate: its value and channel; c < 0 is no candidate yet.
struct ArgMin {
  float v;
  int c;
};

// torch.min(dim=1)'s choice between two candidates: a NaN is smaller than any number (torch.min
// propagates it), equal values go to the smaller channel. A total order on (value, channel), so
// any order of merging picks the same element: every lane and every run agree.
__device__ __forceinline__ ArgMin argmin_merge(ArgMin a, ArgMin b) {
  if (a.c < 0) return b;
  if (b.c < 0) return a;
  const bool a_nan = a.v != a.v;
  const bool b_nan = b.v != b.v;
  if (a_nan != b_nan) return a_nan ? a : b;
  if (!a_nan && a.v != b.v) return a.v < b.v ? a : b;
  return a.c < b.c ? a : b;
}

struct WarpArgMin {
  __device__ ArgMin operator()(ArgMin a) const {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      const ArgMin b = {__shfl_xor_sync(kFullMask, a.v, offset), __shfl_xor_sync(kFullMask, a.c, offset)};
      a = argmin_merge(a, b);
    }
    return a;
  }
};

// A lane's running minimum over the values it meets. Each lane meets its channels in increasing
// order (both row kernels' loops go up in group, float4 and float), so keeping the first of
// equal values, and the first NaN, is what argmin_merge would do, with fewer instructions.
__device__ __forceinline__ void consider(ArgMin& best, float v, int64_t c) {
  if (best.c < 0 || (v != v ? best.v == best.v : v < best.v)) best = {v, static_cast<int>(c)};
}

// dr[n] = the sum over channels of grad[0, :, n, 0], from min_grad_sums_kernel's partials over
// chunks of channels, in chunk order (lane k adds chunks k, k + 32, ...; then the butterfly).
// All 32 lanes of the warp call; every lane gets it.
__device__ __forceinline__ float row_gradient(const float* __restrict__ dr_partial, int64_t chunks, int64_t M,
                                              int64_t n) {
  float t = 0.0f;
  for (int64_t k = threadIdx.x % 32; k < chunks; k += 32) t += dr_partial[k * M + n];
  return warp_sum(t);
}

// What the sweep writes at an element of a group whose output gets no gradient: GroupNorm's
// backward with u = 0 there, rstd * (0 - xhat * 0): 0, or NaN where the group's statistics are
// NaN (a NaN or inf in it), as PyTorch's backward gives (0 times a NaN xhat).
__device__ __forceinline__ float no_gradient_dx(float xhat, float rstd) { return rstd * (0.0f - xhat * 0.0f); }

// Row n, once its minimum `win` and its group's statistics st are known, by the 32 lanes of one
// warp: dy over the minimum's group (the sweep wrote the rest of the row), GroupNorm's backward of
// the one-hot gradient dn = dr at the minimum: gx = dr * gamma[c*] there and 0 elsewhere, so
// mean_D(gx) = gx* / D and mean_D(gx * xhat) = gx* xhat* / D; and row n's record for
// min_column_sums_kernel: the minimum's channel; mean, rstd, dr, and whether the minimum is NaN.
__device__ __forceinline__ void finish_min_row(const float* __restrict__ yrow, const float* __restrict__ gamma,
                                               float* __restrict__ dyrow, ArgMin win, int D, MeanRstd st, float dr,
                                               float inv_d, int* __restrict__ cstar, float4* __restrict__ rec,
                                               int64_t n) {
  const int lane = threadIdx.x % 32;
  const int64_t cs = win.c;
  const int64_t first = cs / D * D;
  const float gxs = dr * gamma[cs];
  const float xs = (yrow[cs] - st.mean) * st.rstd;
  const float m1 = gxs * inv_d;
  const float m2 = (gxs * xs) * inv_d;
  for (int e = lane; e < D; e += 32) {
    const int64_t c = first + e;
    const float xh = (yrow[c] - st.mean) * st.rstd;
    dyrow[c] = group_norm_dx(c == cs ? gxs : 0.0f, xh, st.rstd, m1, m2);
  }
  if (lane == 0) {
    cstar[n] = win.c;
    rec[n] = make_float4(st.mean, st.rstd, dr, win.v != win.v ? 1.0f : 0.0f);
  }
}

constexpr int kGradTile = 128;  // rows (i) per block of min_grad_sums_kernel: 32 lanes x 4
constexpr int kGradWarps = 8;

// grad (C, M) in memory (the contiguous (1, C, M, 1)). Block (x, y): rows i of tile x (128),
// channels of chunk y; warp w takes channels w, w + 8, ... of the chunk, each lane 4 of the tile's
// rows (a float4 when kVec: M % 4 == 0 and grad 16-byte aligned; else 4 warp-strided floats).
// Writes db_partial[x][c] = the channel's sum over the tile's rows (a warp sum) and
// dr_partial[y][i] = row i's sum over the chunk's channels (the warps' sums added in warp order).
template <bool kVec>
__global__ void __launch_bounds__(kGradWarps * 32)
    min_grad_sums_kernel(const float* __restrict__ grad, float* __restrict__ dr_partial,
                         float* __restrict__ db_partial, int64_t M, int64_t C, int64_t channels_per_chunk) {
  __shared__ float red[kGradWarps][kGradTile];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kGradTile;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * channels_per_chunk;
  const int64_t c1 = std::min(C, c0 + channels_per_chunk);
  // The tile row of this lane's value j.
  auto at = [&](int j) { return kVec ? 4 * lane + j : lane + 32 * j; };
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 4
  for (int64_t c = c0 + warp; c < c1; c += kGradWarps) {  // warp-uniform: the warp sum below
    const float* row = grad + c * M + i0;
    float v[4];
    if constexpr (kVec) {
      // M % 4 == 0 and i0 % 4 == 0: a float4 is wholly inside the rows or wholly past them
      const float4 t = i0 + at(0) < M ? load4(row + at(0)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = i0 + at(j) < M ? row[at(j)] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[j] += v[j];
    const float channel_sum = warp_sum((v[0] + v[1]) + (v[2] + v[3]));
    if (lane == 0) db_partial[blockIdx.x * C + c] = channel_sum;
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) red[warp][at(j)] = acc[j];
  __syncthreads();
  const int64_t i = i0 + threadIdx.x;
  if (threadIdx.x < kGradTile && i < M) {
    float t = 0.0f;
#pragma unroll
    for (int w = 0; w < kGradWarps; ++w) t += red[w][threadIdx.x];
    dr_partial[blockIdx.y * M + i] = t;
  }
}

constexpr int kMinRowsUnroll = 2;  // runs per trip, as the forward's row minimum (min_bias_broadcast.cu)

// A block per row n (team layout, as group_norm_row_min_team_kernel): per trip, warp w takes
// kMinRowsUnroll runs of 32 / L groups, all loads first. Each group: statistics, normalised values
// (the running minimum), and dy = no_gradient_dx stored. Then the row's minimum over the block,
// and warp 0 recomputes the minimum's group statistics (team 0, the same lane layout: the same
// bits) and finishes the row.
template <int L, int V>
__global__ void __launch_bounds__(kTeamThreads)
    min_rows_backward_team_kernel(const float* __restrict__ y, const float* __restrict__ gamma,
                                  const float* __restrict__ beta, const float* __restrict__ dr_partial,
                                  int64_t dr_chunks, float* __restrict__ dy, int* __restrict__ cstar,
                                  float4* __restrict__ rec, int64_t M, int64_t G, int D, float inv_d, float eps) {
  constexpr int kTeams = 32 / L;
  constexpr int NV = 4 * V;
  constexpr int U = kMinRowsUnroll;
  __shared__ ArgMin scratch[32];
  const int lane = threadIdx.x % 32;
  const int l = lane % L;
  const int team = lane / L;
  const int warp = threadIdx.x / 32;
  const int64_t C = G * D;
  for (int64_t n = blockIdx.x; n < M; n += gridDim.x) {  // the same n for the whole block
    // Warp 0 adds up dr first: its loads overlap the other warps' sweep.
    const float dr = warp == 0 ? row_gradient(dr_partial, dr_chunks, M, n) : 0.0f;
    ArgMin best = {INFINITY, -1};
    for (int64_t g0 = static_cast<int64_t>(warp) * kTeams * U; g0 < G; g0 += static_cast<int64_t>(kTailWarps) * kTeams * U) {
      TeamSlot slot[U];
      float4 raw[U][V];
      TeamParams<V> prm[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t g = g0 + u * kTeams + team;
        slot[u] = team_slot<L, V>(n * G + g, g * D, g < G, l, D);
        team_load<L>(y, slot[u], raw[u]);
        team_load_params<L>(gamma, beta, slot[u], prm[u]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float v[NV];
#pragma unroll
        for (int k = 0; k < V; ++k) {
          v[4 * k] = raw[u][k].x, v[4 * k + 1] = raw[u][k].y, v[4 * k + 2] = raw[u][k].z, v[4 * k + 3] = raw[u][k].w;
        }
        const MeanRstd st = WelfordStats::finish(WelfordStats::team<L>(WelfordStats::of(v, 4 * slot[u].count)), eps);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          if (k < slot[u].count) {
            const float gk[4] = {prm[u].gamma[k].x, prm[u].gamma[k].y, prm[u].gamma[k].z, prm[u].gamma[k].w};
            const float bk[4] = {prm[u].beta[k].x, prm[u].beta[k].y, prm[u].beta[k].z, prm[u].beta[k].w};
            float out[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              const float x = v[4 * k + j];
              consider(best, normalise(x, st, gk[j], bk[j]), slot[u].c + 4 * L * k + j);
              out[j] = no_gradient_dx((x - st.mean) * st.rstd, st.rstd);
            }
            store4(dy + slot[u].off + 4 * L * k, make_float4(out[0], out[1], out[2], out[3]));
          }
        }
      }
    }
    // block_reduce's barriers also order every sweep store of this row before warp 0's rewrite below.
    const ArgMin win = block_reduce(best, scratch, ArgMin{INFINITY, -1}, WarpArgMin{});
    if (warp == 0) {
      const int64_t gs = win.c / D;
      const TeamSlot s = team_slot<L, V>(n * G + gs, gs * D, team == 0, l, D);
      float v[NV];
      lane_load<L, V>(y + s.off, s.count, v);
      const MeanRstd own = WelfordStats::finish(WelfordStats::team<L>(WelfordStats::of(v, 4 * s.count)), eps);
      const MeanRstd st = {__shfl_sync(kFullMask, own.mean, 0), __shfl_sync(kFullMask, own.rstd, 0)};  // team 0's
      finish_min_row(y + n * C, gamma, dy + n * C, win, D, st, dr, inv_d, cstar, rec, n);
    }
  }
}

// The same for any D and alignment: a block per row, warp w takes groups w, w + 8, ..., each
// with warp_welford and a second pass over it (from L1) that normalises and stores.
__global__ void __launch_bounds__(kTailWarps * 32)
    min_rows_backward_warp_kernel(const float* __restrict__ y, const float* __restrict__ gamma,
                                  const float* __restrict__ beta, const float* __restrict__ dr_partial,
                                  int64_t dr_chunks, float* __restrict__ dy, int* __restrict__ cstar,
                                  float4* __restrict__ rec, int64_t M, int64_t G, int D, float inv_d, float eps) {
  __shared__ ArgMin scratch[32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int64_t C = G * D;
  const auto identity = [](float v, int) { return v; };
  for (int64_t n = blockIdx.x; n < M; n += gridDim.x) {
    const float dr = warp == 0 ? row_gradient(dr_partial, dr_chunks, M, n) : 0.0f;
    const float* yrow = y + n * C;
    float* dyrow = dy + n * C;
    ArgMin best = {INFINITY, -1};
    for (int64_t g = warp; g < G; g += kTailWarps) {
      const MeanRstd st = warp_welford(yrow + g * D, D, eps, identity);
      for (int e = lane; e < D; e += 32) {
        const int64_t c = g * D + e;
        const float x = yrow[c];
        consider(best, normalise(x, st, gamma[c], beta[c]), c);
        dyrow[c] = no_gradient_dx((x - st.mean) * st.rstd, st.rstd);
      }
    }
    const ArgMin win = block_reduce(best, scratch, ArgMin{INFINITY, -1}, WarpArgMin{});
    if (warp == 0) {
      const MeanRstd st = warp_welford(yrow + win.c / D * D, D, eps, identity);
      finish_min_row(yrow, gamma, dyrow, win, D, st, dr, inv_d, cstar, rec, n);
    }
  }
}

constexpr int kScanWarps = 32;

// Block x owns columns 32 x ... 32 x + 31, lane j column 32 x + j; warp w scans rows in batches of
// 32 (batch w, w + 32, ...), one row per lane: a ballot marks the rows whose minimum's group
// meets the block's columns, or whose minimum is NaN (other groups of such a row may hold NaN
// too, which dy and these sums must carry), and the warp visits them in row order:
//   dlinear_bias[c] += dy[r, c];
//   in the minimum's group: dn = dr at the minimum's channel, 0 elsewhere: dgamma += dn * xhat
//     (xhat recomputed as finish_min_row did), dbeta += dn;
//   elsewhere in a NaN row: dgamma += dy[r, c] * 0 (0 times xhat, NaN where xhat is).
// Rows that do not match add nothing: dy is +0 there and so is every term. The 32 warps' sums
// are added in warp order, and dbias from min_grad_sums_kernel's partials in tile order.
__global__ void __launch_bounds__(kScanWarps * 32)
    min_column_sums_kernel(const float* __restrict__ y, const float* __restrict__ dy, const int* __restrict__ cstar,
                           const float4* __restrict__ rec, const float* __restrict__ db_partial, int64_t db_tiles,
                           float* __restrict__ dgamma, float* __restrict__ dbeta, float* __restrict__ dbias,
                           float* __restrict__ dlinear_bias, int64_t M, int64_t C, int D) {
  __shared__ float red[3][kScanWarps][32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * 32;  // the block's columns first .. last
  const int64_t last = std::min(first + 32, C) - 1;
  const int64_t c = first + lane;
  const bool c_ok = c < C;
  float dg = 0.0f, db = 0.0f, lb = 0.0f;
  for (int64_t r0 = static_cast<int64_t>(warp) * 32; r0 < M; r0 += kScanWarps * 32) {  // warp-uniform
    const int64_t r = r0 + lane;
    int cs = 0;
    float4 rc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    bool match = false;
    if (r < M) {
      cs = cstar[r];
      rc = rec[r];
      const int64_t group_first = static_cast<int64_t>(cs) / D * D;
      match = rc.w != 0.0f || (group_first <= last && group_first + D - 1 >= first);
    }
    for (unsigned int hits = __ballot_sync(kFullMask, match); hits != 0; hits &= hits - 1) {
      const int j = __ffs(hits) - 1;  // rows in increasing order
      const int64_t row = r0 + j;
      const int64_t cs_r = __shfl_sync(kFullMask, cs, j);
      const float mean = __shfl_sync(kFullMask, rc.x, j);
      const float rstd = __shfl_sync(kFullMask, rc.y, j);
      const float dr = __shfl_sync(kFullMask, rc.z, j);
      if (c_ok) {
        const float d = dy[row * C + c];
        lb += d;
        if (c / D == cs_r / D) {
          const float dn = c == cs_r ? dr : 0.0f;
          dg += dn * ((y[row * C + c] - mean) * rstd);
          db += dn;
        } else {
          dg += d * 0.0f;
        }
      }
    }
  }
  red[0][warp][lane] = dg;
  red[1][warp][lane] = db;
  red[2][warp][lane] = lb;
  __syncthreads();
  if (warp == 0 && c_ok) {
    float sg = 0.0f, sb = 0.0f, sl = 0.0f;
    for (int w = 0; w < kScanWarps; ++w) {
      sg += red[0][w][lane];
      sb += red[1][w][lane];
      sl += red[2][w][lane];
    }
    dgamma[c] = sg;
    dbeta[c] = sb;
    dlinear_bias[c] = sl;
    float t = 0.0f;
    for (int64_t k = 0; k < db_tiles; ++k) t += db_partial[k * C + c];
    dbias[c] = t;
  }
}

// ---- host side -----------------------------------------------------------------------------------

// How the rows are cut into chunks, one partial sum per (chunk, column): enough chunks that the
// grid fills the GPU once with resident blocks (`resident`), each at least kMinChunkRows rows so
// that the partials (4 bytes per chunk, column and sum, written and read back) stay a few
// percent of the 12 bytes per element the kernel streams.
constexpr int64_t kMinChunkRows = 32;

struct RowChunks {
  int64_t count, rows;
};

inline RowChunks plan_row_chunks(int64_t M, int64_t col_tiles, int64_t resident) {
  int64_t count = std::max<int64_t>(1, resident / std::max<int64_t>(1, col_tiles));
  count = std::min(count, std::max<int64_t>(1, M / kMinChunkRows));
  count = std::min<int64_t>(count, 65535);  // gridDim.y
  const int64_t rows = (M + count - 1) / count;
  return {(M + rows - 1) / rows, rows};
}

// The checks every launcher makes of the saved tensors: y (M, C), GroupNorm's gamma and beta (C,)
// and num_groups as the forward's launchers check them (common/groupnorm.cuh, the messages calling
// the tensor y), and eps. half16: y may also be bfloat16 or float16 (a model in that dtype; the
// parameters stay float32, as the caller converts them).
static void check_saved(const torch::Tensor& y, const torch::Tensor& gamma, const torch::Tensor& beta,
                        int64_t num_groups, double eps, bool half16 = false) {
  const bool y16 = y.scalar_type() == torch::kBFloat16 || y.scalar_type() == torch::kHalf;
  if (half16 && y16) {
    check_cuda(y, "y");
    check_contiguous(y, "y");
    check_group_norm_shapes(y, gamma, beta, num_groups, "y");
  } else {
    TORCH_CHECK(!half16 || y.scalar_type() == torch::kFloat, "y must be float32, bfloat16 or float16, got ",
                y.scalar_type(), " (call .float())");
    check_group_norm_inputs(y, gamma, beta, num_groups, "y");
  }
  TORCH_CHECK(eps >= 0.0, "eps must be non-negative, got ", num(eps));
}

// grad: y's dtype on y's device, any strides (the launchers make it contiguous).
static void check_grad(const torch::Tensor& grad, const torch::Tensor& y) {
  CHECK_CUDA(grad);
  if (y.scalar_type() == torch::kFloat) {
    CHECK_FLOAT(grad);
  } else {
    TORCH_CHECK(grad.scalar_type() == y.scalar_type(), "grad must have y's dtype ", y.scalar_type(), ", got ",
                grad.scalar_type());
  }
  CHECK_SAME_DEVICE(y, grad);
}

// What every launch of the launchers here shares: the saved tensors' data and dy's, the group
// width D, 1 / D (for GroupNorm's backward means), eps, the device and the current stream.
struct Launch {
  const float* y;
  const float* gamma;
  const float* beta;
  float* dy;
  int64_t D;
  float inv_d, eps;
  int device;
  cudaStream_t stream;
};

static Launch launch_of(const torch::Tensor& y, const torch::Tensor& gamma, const torch::Tensor& beta,
                        const torch::Tensor& dy, int64_t G, double eps) {
  const int64_t D = y.size(1) / G;
  return {y.data_ptr<float>(),  gamma.data_ptr<float>(), beta.data_ptr<float>(),
          dy.data_ptr<float>(), D,                       static_cast<float>(1.0 / static_cast<double>(D)),
          static_cast<float>(eps), y.get_device(),      at::cuda::getCurrentCUDAStream()};
}

template <class Tail>
struct TailGrads {
  torch::Tensor dy;
  torch::Tensor sums[Tail::kSums];
};

// dy and the tail's column sums for grad (M, C) and y (M, C), inputs already checked: the main
// kernel (team or general path), then the column sums' second pass, on the current stream. grad, y
// and dy in y's dtype (float32, or bfloat16 or float16: the element E the kernels read and write);
// the sums and every buffer between the kernels float32.
template <class Tail>
static TailGrads<Tail> tail_backward(const torch::Tensor& grad_in, const torch::Tensor& y, const torch::Tensor& gamma,
                                     const torch::Tensor& beta, int64_t G, double eps, const Tail& tail) {
  constexpr int S = Tail::kSums;
  const c10::cuda::CUDAGuard guard(y.device());
  const torch::Tensor grad = grad_in.contiguous();  // autograd may hand an expanded or strided gradient
  const int64_t M = y.size(0);
  const int64_t C = y.size(1);
  const torch::TensorOptions sums_options = y.options().dtype(torch::kFloat);
  TailGrads<Tail> out;
  out.dy = torch::empty_like(y);
  if (M == 0 || C == 0) {
    for (int s = 0; s < S; ++s) out.sums[s] = torch::zeros({C}, sums_options);
    return out;
  }
  for (int s = 0; s < S; ++s) out.sums[s] = torch::empty({C}, sums_options);
  const int64_t D64 = C / G;
  const int D = static_cast<int>(D64);
  const float inv_d = static_cast<float>(1.0 / static_cast<double>(D64));
  const float e = static_cast<float>(eps);
  const int device = y.get_device();
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* gamma_p = gamma.data_ptr<float>();
  const float* beta_p = beta.data_ptr<float>();

  torch::Tensor partial;
  int64_t chunks = 0;
  with_float_element(y.scalar_type(), [&](auto element) {
    using E = decltype(element);
    const E* gp = data_as<const E>(grad);
    const E* yp = data_as<const E>(y);
    E* dyp = data_as<E>(out.dy);
    if (team_path_ok(D, {gp, yp, dyp, gamma_p, beta_p, tail.bias})) {
      with_team_lanes(D, [&](auto lanes) {
        constexpr int L = decltype(lanes)::value;
        auto kernel = tail_backward_team_kernel<L, GROUPNORM_TEAM_VECS, Tail, E>;
        const int64_t col_tiles = (G + 32 / L - 1) / (32 / L);
        const RowChunks plan = plan_row_chunks(M, col_tiles, resident_blocks(kernel, kTeamThreads, 0, device));
        chunks = plan.count;
        partial = torch::empty({S, chunks, C}, sums_options);
        const dim3 grid(static_cast<unsigned int>(col_tiles), static_cast<unsigned int>(chunks));
        kernel<<<grid, kTeamThreads, 0, stream>>>(gp, yp, gamma_p, beta_p, tail, dyp, partial.data_ptr<float>(), M, G,
                                                  D, inv_d, e, plan.rows);
        LAUNCH_CHECK();
      });
    } else {
      const int64_t segments = M * G;
      torch::Tensor stats = torch::empty({segments, 4}, sums_options);
      float4* sp = reinterpret_cast<float4*>(stats.data_ptr<float>());
      auto stats_kernel = tail_stats_kernel<Tail, E>;
      const unsigned int stats_grid = resident_grid(stats_kernel, 256, 0, (segments + 7) / 8, device);
      stats_kernel<<<stats_grid, 256, 0, stream>>>(gp, yp, gamma_p, beta_p, tail, sp, segments, G, D, inv_d, e);
      LAUNCH_CHECK();
      auto kernel = tail_backward_general_kernel<Tail, E>;
      const int64_t col_tiles = (C + 255) / 256;
      const RowChunks plan = plan_row_chunks(M, col_tiles, resident_blocks(kernel, 256, 0, device));
      chunks = plan.count;
      partial = torch::empty({S, chunks, C}, sums_options);
      const dim3 grid(static_cast<unsigned int>(col_tiles), static_cast<unsigned int>(chunks));
      kernel<<<grid, 256, 0, stream>>>(gp, yp, gamma_p, beta_p, tail, sp, dyp, partial.data_ptr<float>(), M, G, D,
                                       plan.rows);
      LAUNCH_CHECK();
    }
  });

  ColumnSums sums = {};
  for (int s = 0; s < S; ++s) {
    const torch::Tensor& sum = out.sums[s];
    sums.out[s] = sum.data_ptr<float>();
  }
  const unsigned int grid = static_cast<unsigned int>(std::min<int64_t>((S * C + 255) / 256, 65535));
  column_sums_finish_kernel<<<grid, 256, 0, stream>>>(partial.data_ptr<float>(), sums, S, chunks, C);
  LAUNCH_CHECK();
  return out;
}

// ---- exports -------------------------------------------------------------------------------------

// @export: problem 94's tail backward: (dy, dbias, dgamma, dbeta) of group_norm(mish(hardtanh(y + bias, min_val, max_val)), num_groups, gamma, beta, eps)
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor> bias_hardtanh_mish_group_norm_backward(
    torch::Tensor grad, torch::Tensor y, torch::Tensor bias, double min_val, double max_val, int64_t num_groups,
    torch::Tensor gamma, torch::Tensor beta, double eps) {
  check_saved(y, gamma, beta, num_groups, eps, /*half16=*/true);
  check_channel_bias(y, bias, "y");
  check_grad(grad, y);
  CHECK_SAME_SHAPE(grad, y);
  TORCH_CHECK(min_val <= max_val, "Hardtanh needs min_val <= max_val, got ", num(min_val), " and ", num(max_val));
  const HardtanhMishTail tail{bias.data_ptr<float>(), static_cast<float>(min_val), static_cast<float>(max_val)};
  const auto r = tail_backward(grad, y, gamma, beta, num_groups, eps, tail);
  return {r.dy, r.sums[0], r.sums[1], r.sums[2]};
}

// @export: problem 37's tail backward: (dy, dbias, dgamma, dbeta, dlinear_bias) of group_norm(y * sigmoid(y) + bias, num_groups, gamma, beta, eps)
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor> swish_bias_group_norm_backward(
    torch::Tensor grad, torch::Tensor y, torch::Tensor bias, int64_t num_groups, torch::Tensor gamma,
    torch::Tensor beta, double eps) {
  check_saved(y, gamma, beta, num_groups, eps, /*half16=*/true);
  check_channel_bias(y, bias, "y");
  check_grad(grad, y);
  CHECK_SAME_SHAPE(grad, y);
  const auto r = tail_backward(grad, y, gamma, beta, num_groups, eps, SwishBiasTail{bias.data_ptr<float>()});
  return {r.dy, r.sums[0], r.sums[1], r.sums[2], r.sums[3]};
}

// @export: problem 62's tail backward: (dy, dgamma, dbeta, dlinear_bias) of l = leaky_relu(group_norm(y, num_groups, gamma, beta, eps), negative_slope); l + l
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor> group_norm_leaky_relu_x2_backward(
    torch::Tensor grad, torch::Tensor y, int64_t num_groups, torch::Tensor gamma, torch::Tensor beta, double eps,
    double negative_slope) {
  check_saved(y, gamma, beta, num_groups, eps, /*half16=*/true);
  check_grad(grad, y);
  CHECK_SAME_SHAPE(grad, y);
  const LeakyReluX2Tail tail{nullptr, static_cast<float>(negative_slope)};
  const auto r = tail_backward(grad, y, gamma, beta, num_groups, eps, tail);
  return {r.dy, r.sums[0], r.sums[1], r.sums[2]};
}

// @export: problem 75's tail backward: (dy, dgamma, dbeta, dbias, dlinear_bias) of torch.min(group_norm(y, num_groups, gamma, beta, eps), dim=1, keepdim=True)[0] + bias(1, C, 1, 1); grad (1, C, M, 1)
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor> group_norm_min_bias_backward(
    torch::Tensor grad, torch::Tensor y, int64_t num_groups, torch::Tensor gamma, torch::Tensor beta, double eps) {
  check_saved(y, gamma, beta, num_groups, eps);
  check_grad(grad, y);
  const int64_t M = y.size(0);
  const int64_t C = y.size(1);
  TORCH_CHECK(grad.dim() == 4 && grad.size(0) == 1 && grad.size(1) == C && grad.size(2) == M && grad.size(3) == 1,
              "grad must have the output's shape [1, ", num(C), ", ", num(M),
              ", 1] (rowmin (M, 1) + bias (1, C, 1, 1) broadcasts to (1, C, M, 1)), got ", shape_string(grad));
  TORCH_CHECK(C > 0 || M == 0, "the minimum over dim 1 of y ", shape_string(y),
              " is undefined: it has no channels (torch.min raises the same)");
  TORCH_CHECK(C <= INT32_MAX, "C = ", num(C), " channels is more than the row minimum's 32-bit channel index holds");
  const c10::cuda::CUDAGuard guard(y.device());
  torch::Tensor dy = torch::empty_like(y);
  if (M == 0) {
    return {dy, torch::zeros({C}, y.options()), torch::zeros({C}, y.options()), torch::zeros({1, C, 1, 1}, y.options()),
            torch::zeros({C}, y.options())};
  }
  torch::Tensor dgamma = torch::empty({C}, y.options());
  torch::Tensor dbeta = torch::empty({C}, y.options());
  torch::Tensor dbias = torch::empty({1, C, 1, 1}, y.options());
  torch::Tensor dlinear_bias = torch::empty({C}, y.options());
  const torch::Tensor g = grad.contiguous();  // (C, M) in memory
  const int64_t G = num_groups;
  const Launch k = launch_of(y, gamma, beta, dy, G, eps);
  const int D = static_cast<int>(k.D);
  const float* gp = g.data_ptr<float>();

  // 1. grad's sums: over channels per row (dr, in chunks of channels), over rows per channel (dbias, in tiles of rows)
  const bool vec = M % 4 == 0 && aligned16(gp);
  auto grad_kernel = vec ? min_grad_sums_kernel<true> : min_grad_sums_kernel<false>;
  const int64_t tiles = (M + kGradTile - 1) / kGradTile;
  const int64_t resident = resident_blocks(grad_kernel, kGradWarps * 32, 0, k.device);
  int64_t grad_chunks = std::min<int64_t>({std::max<int64_t>(1, resident / tiles), C, 65535});
  const int64_t channels_per_chunk = (C + grad_chunks - 1) / grad_chunks;
  grad_chunks = (C + channels_per_chunk - 1) / channels_per_chunk;
  torch::Tensor dr_partial = torch::empty({grad_chunks, M}, y.options());
  torch::Tensor db_partial = torch::empty({tiles, C}, y.options());
  grad_kernel<<<dim3(static_cast<unsigned int>(tiles), static_cast<unsigned int>(grad_chunks)), kGradWarps * 32, 0,
                k.stream>>>(gp, dr_partial.data_ptr<float>(), db_partial.data_ptr<float>(), M, C, channels_per_chunk);
  LAUNCH_CHECK();

  // 2. the rows: dy, and each row's record
  torch::Tensor cstar = torch::empty({M}, y.options().dtype(at::kInt));
  torch::Tensor rec = torch::empty({M, 4}, y.options());
  int* csp = cstar.data_ptr<int>();
  float4* rp = reinterpret_cast<float4*>(rec.data_ptr<float>());
  const float* drp = dr_partial.data_ptr<float>();
  if (team_path_ok(D, {k.y, k.dy, k.gamma, k.beta})) {
    with_team_lanes(D, [&](auto lanes) {
      auto kernel = min_rows_backward_team_kernel<decltype(lanes)::value, GROUPNORM_TEAM_VECS>;
      const unsigned int grid = resident_grid(kernel, kTeamThreads, 0, M, k.device);
      kernel<<<grid, kTeamThreads, 0, k.stream>>>(k.y, k.gamma, k.beta, drp, grad_chunks, k.dy, csp, rp, M, G, D,
                                                  k.inv_d, k.eps);
      LAUNCH_CHECK();
    });
  } else {
    const unsigned int grid = resident_grid(min_rows_backward_warp_kernel, kTailWarps * 32, 0, M, k.device);
    min_rows_backward_warp_kernel<<<grid, kTailWarps * 32, 0, k.stream>>>(k.y, k.gamma, k.beta, drp, grad_chunks, k.dy,
                                                                           csp, rp, M, G, D, k.inv_d, k.eps);
    LAUNCH_CHECK();
  }

  // 3. the column sums
  min_column_sums_kernel<<<static_cast<unsigned int>((C + 31) / 32), kScanWarps * 32, 0, k.stream>>>(
      k.y, k.dy, csp, rp, db_partial.data_ptr<float>(), tiles, dgamma.data_ptr<float>(), dbeta.data_ptr<float>(),
      dbias.data_ptr<float>(), dlinear_bias.data_ptr<float>(), M, C, D);
  LAUNCH_CHECK();
  return {dy, dgamma, dbeta, dbias, dlinear_bias};
}
