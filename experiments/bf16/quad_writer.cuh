// experiments/bf16/quad_writer.cuh: a 16-bit output writer for the wgmma engine whose warp stores write whole
// 32-byte sectors, and the plain epilogue on it: the fix README.md proposes for Direct16Writer's half sectors.
// Written and compiled; not yet run on a GPU (probe.py times it as "16-bit out, quad exchange").

#pragma once

#include "common/gemm_wgmma_writers16.cuh"

namespace gemm_wgmma {

// Direct16Writer (common/gemm_wgmma_writers16.cuh) with full sectors: its warp stores write 16 bytes of
// each of 8 rows, half a 32-byte sector, and measured slower than the fp32 output (README.md). Here the pairs of blocks j - 1 and j (held until odd j arrives: the
// epilogues call put with j ascending, h inside) are exchanged within each quad, lane t taking
// columns 4t..4t + 3 of the 16: one 8-byte store per lane, 32 bytes of each row per warp store.
template <class T>
struct Direct16QuadWriter {
  T* out;
  int row, col, M, N;  // EpilogueTile's
  mutable uint32_t held[2];  // the packed pairs of block j - 1, rows h = 0 and 1

  static __device__ __forceinline__ uint32_t pack(float v0, float v1) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      const __nv_bfloat162 p = __floats2bfloat162_rn(v0, v1);
      return *reinterpret_cast<const uint32_t*>(&p);
    } else {
      const __half2 p = __floats2half2_rn(v0, v1);
      return *reinterpret_cast<const uint32_t*>(&p);
    }
  }

  __device__ __forceinline__ void put(int h, int j, float v0, float v1) const {
    const uint32_t mine = pack(v0, v1);
    if ((j & 1) == 0) {
      held[h] = mine;
      return;
    }
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int t = lane & 3;
    const int src = (lane & ~3) + 2 * (t & 1);  // the quad's lanes 0 and 1 (t even) or 2 and 3 (t odd)
    const uint32_t a0 = __shfl_sync(0xffffffffu, held[h], src), a1 = __shfl_sync(0xffffffffu, held[h], src + 1);
    const uint32_t b0 = __shfl_sync(0xffffffffu, mine, src), b1 = __shfl_sync(0xffffffffu, mine, src + 1);
    const int m = row + 8 * h;
    const int n = col - 2 * t + 8 * (j - 1) + 4 * t;  // the block pair's first column, then this lane's 4
    if (m >= M || n >= N) {
      return;
    }
    const uint2 four = t < 2 ? make_uint2(a0, a1) : make_uint2(b0, b1);
    T* dst = out + static_cast<int64_t>(m) * N + n;
    if (N % 4 == 0) {  // n % 4 == 0 too: 8-byte aligned, and n + 3 < N
      *reinterpret_cast<uint2*>(dst) = four;
    } else {
      const T* v = reinterpret_cast<const T*>(&four);
      for (int i = 0; i < 4 && n + i < N; ++i) dst[i] = v[i];
    }
  }
};

template <class T>
struct Store16QuadEpilogue : StoreEpilogue {
  using Writer = Direct16QuadWriter<T>;
  T* out;  // (M, N), hides StoreEpilogue's float out (left null)
};

}  // namespace gemm_wgmma
