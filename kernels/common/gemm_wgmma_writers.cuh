// kernels/common/gemm_wgmma_writers.cuh: where the wgmma GEMM's epilogue puts its values
// (common/gemm_wgmma.cuh's kernel; the rungs 9 and 10 and the whole-model kernels).
//
//   EpilogueTile    where a consumer thread's registers sit in the output;
//   DirectWriter    stores a lane's pairs from registers: the kernel's writer (DirectWriterOf<T> for
//                   another output type, common/gemm_wgmma_writers16.cuh; WriterOf: which one an
//                   epilogue takes, WriterFor: which one an output type takes);
//   ParamElement    a per-column parameter read as a float, whatever its element type;
//   StoreEpilogue   the plain epilogue: out = acc (+ bias).

#pragma once

#include <cstdint>
#include <type_traits>

#include "common/tensor_core.cuh"

namespace gemm_wgmma {

// Where a consumer thread's registers sit in the output (see the end of the kernel).
struct EpilogueTile {
  int row;     // the lane's first row (the second is row + 8)
  int col;     // the lane's first column (then col + 1, and + 8j for n8 block j)
  int n0;      // the tile's first column
  int tile_n;  // the tile's column index
  int M, N;
};

// ---- where an epilogue's values go -------------------------------------------------------------
//
// An epilogue hands its finished values over in the accumulators' layout: pair (h, j) of a lane is
// row t.row + 8h, columns t.col + 8j and + 1 (EpilogueTile), to a writer:
//
// DirectWriter  stores each pair from registers, 8 bytes per lane: one warp's store touches 8
//               rows, 32 bytes of each. Measured at 3.7 us per 128 x 256 tile, a seventh of a
//               block's time at K = 1024 (experiments/wgmma_schedule/README.md, "Where a block's
//               time goes"). The fastest of the four ways measured: the three others staged the
//               tile in shared memory and were 5-8% slower at K = 8192 (the README's "The
//               epilogue through shared memory", which also says where their writer went).
// How a writer stores one value and one pair (at an even column) of its output's element type: float
// here; the 16-bit types in common/gemm_wgmma_writers16.cuh, which only the launchers that take 16-bit
// tensors include.
template <class T>
struct OutputElement;
template <>
struct OutputElement<float> {
  static __device__ __forceinline__ float one(float v) { return v; }
  static __device__ __forceinline__ void pair(float* dst, float v0, float v1) {
    *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
  }
};

template <class T>
struct DirectWriterOf {
  T* out;
  int row, col, M, N;  // EpilogueTile's

  __device__ __forceinline__ void put(int h, int j, float v0, float v1) const {
    const int m = row + 8 * h;
    const int n = col + 8 * j;
    if (m >= M) {
      return;
    }
    T* dst = out + static_cast<int64_t>(m) * N;
    if (N % 2 == 0) {
      if (n < N) {  // N even and n even: n + 1 < N too, and the pair aligned
        OutputElement<T>::pair(dst + n, v0, v1);
      }
    } else {
      if (n < N) dst[n] = OutputElement<T>::one(v0);
      if (n + 1 < N) dst[n + 1] = OutputElement<T>::one(v1);
    }
  }
};
using DirectWriter = DirectWriterOf<float>;

// The writer of an output of element T: DirectWriter for float; the 16-bit types' in
// common/gemm_wgmma_writers16.cuh. An epilogue templated on its output's type names WriterFor<T>::type.
template <class T>
struct WriterFor;
template <>
struct WriterFor<float> {
  using type = DirectWriter;
};

// How an epilogue reads a per-column parameter of element P (a bias, GroupNorm's weight) as a float:
// float here; bf16 and fp16, a model's own parameters in that dtype, in common/gemm_wgmma_writers16.cuh.
template <class P>
struct ParamElement;
template <>
struct ParamElement<float> {
  static __device__ __forceinline__ float load(const float* p) { return __ldg(p); }
};

// The writer the kernel hands an epilogue's values to: Epi::Writer where the epilogue names one (a
// 16-bit output), else DirectWriter (float).
template <class Epi, class = void>
struct WriterOf {
  using type = DirectWriter;
};
template <class Epi>
struct WriterOf<Epi, std::void_t<typename Epi::Writer>> {
  using type = typename Epi::Writer;
};

// out = acc (+ bias (N,), when not null): the GEMM's own epilogue.
struct StoreEpilogue {
  float* out;
  const float* bias;

  // The lane's bias pairs, loaded ahead: loaded beside each store, every store would wait for
  // its load. (At BN = 256, rung 9, which is never given a bias, the 64 registers this takes
  // would be too many beside its 128 accumulators: it adds the bias beside each store instead.)
  template <class C>
  struct Ahead {
    static constexpr bool PRELOAD = C::BN <= 128;
    float2 bias[PRELOAD ? C::BN / 8 : 1];
  };

  template <class C>
  __device__ __forceinline__ Ahead<C> ahead(const EpilogueTile& t) const {
    Ahead<C> a{};
    if constexpr (Ahead<C>::PRELOAD) {
#pragma unroll
      for (int j = 0; j < C::BN / 8; ++j) {
        a.bias[j] = tc::bias_pair(bias, t.col + 8 * j, t.N);
      }
    }
    return a;
  }

  template <class C>
  static constexpr int smem_floats() {
    return 0;  // nothing staged in shared memory, so no param<C>() either
  }

  template <class C, class Writer>
  __device__ __forceinline__ void finish(const float (&v)[C::ACC], const Ahead<C>& a, const EpilogueTile& t,
                                         const float*, const Writer& writer) const {
#pragma unroll
    for (int j = 0; j < C::BN / 8; ++j) {
      const int n = t.col + 8 * j;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float v0 = v[4 * j + 2 * h];
        float v1 = v[4 * j + 2 * h + 1];
        if constexpr (Ahead<C>::PRELOAD) {
          if (bias != nullptr) {
            v0 += a.bias[j].x;
            v1 += a.bias[j].y;
          }
        } else {
          tc::add_bias(bias, n, t.N, v0, v1);
        }
        writer.put(h, j, v0, v1);
      }
    }
  }
};

}  // namespace gemm_wgmma
