// kernels/common/gemm_epilogue_groupnorm.cuh: a whole model in the epilogue of the Hopper GEMM
// (common/gemm_wgmma.cuh): nn.Linear's bias, the activations, GroupNorm and, for problem 75, the
// row minimum, finished on the GEMM's output while it is still in registers. The GEMM's output
// never goes to memory: the model's output is written once (for 75, only one minimum per row
// and tile leaves the block). kernels/fused_gemm_groupnorm.cu launches it; notebook 09 explains it.
//
// Why it fits. A block's tile is BM = 128 rows by BN = 128 (3xTF32) or 256 (TF32) columns, and a
// group of GroupNorm is D consecutive channels of one row. When D divides BN (the problems' D are
// 32, 16, 64 and 16), no group straddles two tiles: every (row, group) is inside one block, and
// GroupNorm needs nothing from any other block. Inside the block, a row's columns sit on the 4
// lanes of one quad (lane 4g + t holds columns 8j + 2t and 8j + 2t + 1 of each n8 block j), so a
// group's D values are D / 4 registers on each of 4 neighbouring lanes: its statistics are a
// Welford summary per lane and two shuffles (team_welford<4>), as in common/groupnorm.cuh's team
// path, with no shared memory and no barrier.
//
// Per group, per lane, for each of its 2 rows:
//   y = pre(acc + linear_bias[c], bias[c])     pre: 94's hardtanh + Mish, 37's Swish + bias, or none
//   mean, rstd of the group's D values of y    Welford per lane, then over the quad
//   z = post(normalise(y))                     post: 62's LeakyReLU and x + x, or none
// then z is stored (through the kernel's writer, as the plain GEMM's output: 8 bytes per lane) or,
// for 75, folded into the row's minimum (NaN-propagating, as torch.min). For training, the
// epilogue also stores acc + linear_bias (`saved`): the backward needs the GEMM's output, and
// keeping it (one more store of the tile, 4 bytes per element) costs far less than recomputing a
// GEMM; the statistics are recomputed from it by the backward, which loads each group anyway. The operations and their
// order are eager PyTorch's: the linear bias added to the finished sum (as cuBLAS's epilogue adds
// it), then the model's steps, with the functions of common/activations.cuh and common/groupnorm.cuh
// that the separate tails use.
//
// Problem 75's minimum spans all C channels of a row, i.e. every column tile. Each block reduces
// its part of a row over the quad (two shuffles) and leaves one value per (row, tile), in one of
// two ways (notebook 09 times both):
//   partials  stored into a (tiles_n, M) array, which a second small kernel reduces per row;
//   atomic    folded into one int per row with atomicMin on an order-preserving integer image of
//             the float (ordered_key), the row's start set to +inf's key by a fill before the GEMM.

#pragma once

#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "common/activations.cuh"
#include "common/dependent_launch.cuh"
#include "common/gemm_wgmma.cuh"
#include "common/groupnorm.cuh"
#include "common/reduce.cuh"

namespace gemm_epilogue {

// ---- an order-preserving integer image of a float, for atomicMin --------------------------------
// Non-negative floats already order as their bit patterns do; negative floats order backwards, so
// their 31 magnitude bits are flipped. Every NaN becomes INT_MIN, below every number's key, so a
// NaN anywhere in a row wins the minimum, as in torch.min.
__device__ __forceinline__ int ordered_key(float f) {
  const int i = __float_as_int(f);
  return f != f ? INT_MIN : (i >= 0 ? i : i ^ 0x7fffffff);
}

__device__ __forceinline__ float key_value(int k) {
  return k == INT_MIN ? __int_as_float(0x7fc00000) : __int_as_float(k >= 0 ? k : k ^ 0x7fffffff);
}

constexpr int kInfinityKey = 0x7f800000;  // ordered_key(+inf): where an atomic minimum starts

// What the epilogue does with the normalised values.
enum class Sink {
  STORE,    // out (M, N)
  ROW_MIN,  // the minimum of each row: partials (tiles_n, M), or keys (M,) when keys != nullptr
};

// The whole-model epilogue for groups of D channels (D a multiple of 8 dividing the tile's BN). P: the
// element of the model's parameters, T: of its output (and of the kept GEMM output): float, or bf16 or
// fp16 for a model in that dtype (its launcher includes common/gemm_wgmma_writers16.cuh). The arithmetic
// is float32 whatever P and T are: the parameters are read as floats, the output rounded as it is stored.
template <int D, class Pre, class Post, Sink SINK, class P = float, class T = float>
struct GroupNormEpilogue {
  // STORE writes a tile of `out` through the kernel's writer; ROW_MIN writes its own few floats (the
  // kernel's writer, a float one, stores nothing). The GEMM's output is kept through KeepWriter.
  using KeepWriter = typename gemm_wgmma::WriterFor<T>::type;
  using Writer = std::conditional_t<SINK == Sink::STORE, KeepWriter, typename gemm_wgmma::WriterFor<float>::type>;
  const P* linear_bias;      // (N,): nn.Linear's bias
  Pre pre;                   // before GroupNorm, with its own bias (common/activations.cuh; a P pointer
                             // held as its float one: param() reads it as P's)
  const P* gamma;            // (N,): GroupNorm's weight
  const P* beta;             // (N,): GroupNorm's bias
  float eps;
  Post post;                 // after GroupNorm
  std::conditional_t<SINK == Sink::STORE, T*, float*> out;  // STORE: (M, N); ROW_MIN: the partials
                                                            // (tiles_n, M), unless keys
  int* keys;                 // ROW_MIN, atomic: (M,) ordered keys, each starting at kInfinityKey
  T* saved;                  // (M, N): the GEMM's output with nn.Linear's bias, kept for the
                             // backward (training); nullptr: not kept (inference)

  // The per-column parameters, staged in shared memory for the tile's BN columns (loaded when the
  // main loop starts, so the epilogue reads them without a trip to L2): [linear_bias | gamma |
  // beta | bias], value i being param<C>(i, n0, N) (common/gemm_wgmma.cuh stages them).
  // Loaded from global memory group by group in the epilogue instead, each group waited for its
  // loads twice (before the activation, before the normalisation), ~16 L2 round trips per tile
  // with only 8 warps per SM to hide them; the first version measured that way was slower than
  // the GEMM and the tail apart (experiments/fused_models/README.md).
  static constexpr int kParams = Pre::kHasBias ? 4 : 3;
  template <class C>
  static constexpr int smem_floats() {
    return kParams * C::BN;
  }
  template <class C>
  __device__ __forceinline__ float param(int i, int n0, int N) const {
    const int p = i / C::BN;
    const int n = n0 + i % C::BN;
    const P* src = p == 0 ? linear_bias : p == 1 ? gamma : p == 2 ? beta : reinterpret_cast<const P*>(pre.bias);
    return n < N ? gemm_wgmma::ParamElement<P>::load(src + n) : 0.0f;
  }

  struct Ahead {};
  template <class C>
  __device__ __forceinline__ Ahead ahead(const gemm_wgmma::EpilogueTile&) const {
    return {};
  }

  template <class C, class Writer>
  __device__ __forceinline__ void finish(const float (&acc)[C::ACC], Ahead, const gemm_wgmma::EpilogueTile& t,
                                         const float* params, const Writer& writer) const {
    static_assert(D % 8 == 0 && C::BN % D == 0, "a group must be whole n8 blocks inside one tile");
    static_assert(std::is_same_v<T, float> || D % 16 == 0,
                  "the 16-bit writer stores n8 blocks in pairs: a group must be whole pairs");
    constexpr int JD = D / 8;  // n8 blocks per group
    // this lane's two columns of n8 block j, parameter p: params[p * BN + 2t + 8j], a float2
    const float* lane_params = params + (t.col - t.n0);
    auto param2 = [&](int p, int j) { return *reinterpret_cast<const float2*>(lane_params + p * C::BN + 8 * j); };
    if (saved != nullptr) {  // the same for every block: one test per tile
      // Training: the GEMM's output with nn.Linear's bias, stored in a pass of its own before the
      // model's steps, so that those stay one straight run of code. Stored beside each value's
      // activation instead (a test per pair of values), the test cut the epilogue into a small
      // block per pair, with the activation copied into each way of storing (none, a float2, two
      // floats: 3x the MUFU instructions), so one value's exp could no longer overlap the next's,
      // and the TF32 epilogue cost about three times as much (the record of notebook 09's
      // whole-model run, kind whole_model_fusion, has the epilogue's price now).
      const KeepWriter keep{saved, t.row, t.col, t.M, t.N};
#pragma unroll
      for (int j = 0; j < C::BN / 8; ++j) {
        const float2 lb = param2(0, j);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          keep.put(h, j, acc[4 * j + 2 * h] + lb.x, acc[4 * j + 2 * h + 1] + lb.y);
        }
      }
    }
    float row_min[2] = {INFINITY, INFINITY};
#pragma unroll
    for (int g = 0; g < C::BN / D; ++g) {
      // N is a multiple of D, so a group is wholly inside the matrix or wholly past its last
      // column (zero fill): past it, so is the rest of the tile. The test is the same for every
      // lane of the block, so the quad's shuffles below always have all their lanes.
      if (t.n0 + g * D >= t.N) {
        break;
      }
      float y[2][2 * JD];  // [row h][2 jj + e]: column col + 8 (g JD + jj) + e
#pragma unroll
      for (int jj = 0; jj < JD; ++jj) {
        const int j = g * JD + jj;
        const float2 lb = param2(0, j);
        const float2 b = Pre::kHasBias ? param2(3, j) : make_float2(0.0f, 0.0f);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          y[h][2 * jj] = pre.f(acc[4 * j + 2 * h] + lb.x, b.x);
          y[h][2 * jj + 1] = pre.f(acc[4 * j + 2 * h + 1] + lb.y, b.y);
        }
      }
      MeanRstd s[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        s[h] = WelfordStats::finish(team_welford<4>(welford_of(y[h], 2 * JD)), eps);
      }
#pragma unroll
      for (int jj = 0; jj < JD; ++jj) {
        const float2 gm = param2(1, g * JD + jj);
        const float2 bt = param2(2, g * JD + jj);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float z0 = post.f(normalise(y[h][2 * jj], s[h], gm.x, bt.x), 0.0f);
          const float z1 = post.f(normalise(y[h][2 * jj + 1], s[h], gm.y, bt.y), 0.0f);
          if constexpr (SINK == Sink::STORE) {
            writer.put(h, g * JD + jj, z0, z1);
          } else {
            row_min[h] = nan_min(row_min[h], nan_min(z0, z1));
          }
        }
      }
    }
    if constexpr (SINK == Sink::ROW_MIN) {
      const bool first = threadIdx.x % 4 == 0;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float v = row_min[h];
        v = nan_min(v, __shfl_xor_sync(kFullMask, v, 1));  // the quad holds the row's columns of this tile
        v = nan_min(v, __shfl_xor_sync(kFullMask, v, 2));
        const int m = t.row + 8 * h;
        if (first && m < t.M) {
          if (keys != nullptr) {
            atomicMin(keys + m, ordered_key(v));
          } else {
            out[static_cast<int64_t>(t.tile_n) * t.M + m] = v;
          }
        }
      }
    }
  }
};

// rowmin[m] = the minimum of column m of partials (tiles, M): one thread per row, coalesced
// across the threads of a warp. A dependent of the GEMM (common/dependent_launch.cuh).
__global__ void row_min_of_partials_kernel(const float* __restrict__ partials, float* __restrict__ rowmin, int tiles,
                                           int M) {
  wait_for_producer();
  const int m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= M) return;
  float v = INFINITY;
  for (int t = 0; t < tiles; ++t) {
    v = nan_min(v, partials[static_cast<int64_t>(t) * M + m]);
  }
  rowmin[m] = v;
}

// rowmin[m] = the float whose ordered_key is keys[m].
__global__ void row_min_of_keys_kernel(const int* __restrict__ keys, float* __restrict__ rowmin, int M) {
  wait_for_producer();
  const int m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m < M) rowmin[m] = key_value(keys[m]);
}

}  // namespace gemm_epilogue
