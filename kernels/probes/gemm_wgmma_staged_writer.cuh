// kernels/probes/gemm_wgmma_staged_writer.cuh: a writer of the wgmma GEMM's output that was
// measured slower than the DirectWriter (common/gemm_wgmma_writers.cuh) and is kept for the probes
// that measure it (experiments/wgmma_schedule/schedule_study.py, a Store of 1, 2 or 3). No kernel of
// the workbook includes it: a probe builds a patched copy of kernels/ whose Config's Store is
// StoreStaged<MODE> and whose common/gemm_wgmma.cuh includes this file.
//
// StagedWriter  puts the pairs into shared memory instead, in the layout a TMA load would have
//               written (BN / 32 slabs of 64 rows x 128 bytes per warp group, 128-byte swizzle: a
//               warp's 8-byte stores land on all 32 banks, two wavefronts for 256 bytes, the
//               least there is), and then one thread per warp group hands the slabs to TMA, which
//               writes whole rows of 128 bytes. The shared memory is the ring: once a tile's last
//               wgmma is done nothing reads or fills it, unless the block is persistent (its
//               producer is already loading the next tile), so persistent builds write directly.
//               Where TMA cannot describe `out` (N % 4 != 0, or misaligned) the warp group copies
//               the slabs out itself, a row at a time, with plain stores.
//
// MODE: 1 = one TMA store per slab once all are written, 2 = each slab's TMA store as soon as it
// is written, 3 = the warp group copies the slabs out with plain stores. Predicted: the epilogue
// from 3.7 to ~1.2 us, ~9% faster at K = 1024.
// Measured on the H100 (experiments/wgmma_schedule/README.md, "The epilogue through shared
// memory"), rung 9 at 1024 x 8192 x 8192 and 32768 x 4096 x 1024, % of cuBLAS TF32, one run (0:
// the DirectWriter):
// 0: 97.9 / 84.2, 1: 92.8 / 78.5, 2: 90.3 / 86.1, 3: 83.9 / 71.1; the epilogue took 4.6-4.9 us
// with 1 instead of 3.7. A block's 128 KB leave the SM no faster through TMA: what bounds the
// epilogue is the SM's write bandwidth to L2, not the store instructions.

#pragma once

#include <cstdint>

#include "common/hopper.cuh"

namespace gemm_wgmma {

template <int BN, int MODE>
struct StagedWriter {
  static constexpr int SLAB_BYTES = 64 * 128;  // 64 rows x 32 floats
  static constexpr int BYTES = BN / 32 * SLAB_BYTES;  // a warp group's 64 x BN floats
  static constexpr bool PER_SLAB = MODE == 2;
  unsigned char* region;  // this warp group's slabs, 1024-byte aligned (the swizzle's period)
  int lane_offset;        // the lane's first pair in slab 0: row r = 16 warp + lane / 4, chunk t / 2
  const CUtensorMap* map;  // out in boxes of 64 x 32, used when by_tma
  bool by_tma;
  float* out;
  int m0, n0, M, N;       // the warp group's rows m0 .. m0 + 63, the tile's columns n0 .. n0 + BN - 1
  int barrier_id;         // a named barrier for this warp group's 128 threads

  // Lane (g, t) of warp v: rows r = 16v + g (+ 8), columns 2t (+ 8j) of the warp group's part.
  __device__ __forceinline__ StagedWriter(unsigned char* region_, int warp, int lane, const CUtensorMap* map_,
                                          bool by_tma_, float* out_, int m0_, int n0_, int M_, int N_, int barrier_id_)
      : region(region_), map(map_), by_tma(by_tma_ && MODE != 3), out(out_), m0(m0_), n0(n0_),
        M(M_), N(N_), barrier_id(barrier_id_) {
    const int r = 16 * warp + lane / 4;
    const int t = lane % 4;
    lane_offset = r * 128 + ((t / 2) ^ (r % 8)) * 16 + (t % 2) * 8;
  }

  // Column 8j + 2t of row r: slab j / 4, 16-byte chunk 2 (j % 4) + t / 2 of the slab's 8, stored at
  // chunk position (chunk ^ (r % 8)). Rows r and r + 8 share r % 8, and the XOR with 2 (j % 4), an
  // even number, leaves chunk t / 2's low bit alone: both are lane_offset ^ (2 (j % 4) << 4).
  // Epilogues put their pairs in order of j, (j, 0) before (j, 1), so with PER_SLAB the pair
  // (j, 1) of j % 4 == 3 completes slab j / 4.
  __device__ __forceinline__ void put(int h, int j, float v0, float v1) const {
    const int offset = (lane_offset ^ ((2 * (j % 4)) << 4)) + h * 8 * 128 + (j / 4) * SLAB_BYTES;
    *reinterpret_cast<float2*>(region + offset) = make_float2(v0, v1);
    if (PER_SLAB && by_tma && h == 1 && j % 4 == 3) {
      hopper::fence_proxy_async();
      hopper::named_barrier(barrier_id, 128);
      if (threadIdx.x % 128 == 0) {
        store_slab(j / 4);
        hopper::tma_store_commit();
      }
    }
  }

  __device__ __forceinline__ void store_slab(int s) const {
    if (n0 + 32 * s < N) {
      hopper::tma_store_2d(map, region + s * SLAB_BYTES, n0 + 32 * s, m0);
    }
  }

  // After every put of the warp group (all 128 threads call it): the rest of the slabs to out.
  __device__ __forceinline__ void flush() const {
    const int thread = static_cast<int>(threadIdx.x % 128);
    if (by_tma) {
      // PER_SLAB: an epilogue that stops at the last group before N leaves the slab holding column
      // N - 1 incomplete (never flushed by put) when N - n0 is not a multiple of 32.
      const bool partial = PER_SLAB && N - n0 < BN && (N - n0) % 32 != 0;
      if (!PER_SLAB || partial) {
        hopper::fence_proxy_async();  // TMA (the async proxy) reads what these ordinary stores wrote
        hopper::named_barrier(barrier_id, 128);
      }
      if (thread == 0) {
        if (partial) {
          store_slab((N - n0) / 32);
          hopper::tma_store_commit();
        }
        if (!PER_SLAB) {
#pragma unroll
          for (int s = 0; s < BN / 32; ++s) {
            store_slab(s);
          }
          hopper::tma_store_commit();
        }
        hopper::tma_store_wait_read<0>();  // the block's shared memory must outlive TMA's reads
      }
    } else {
      hopper::named_barrier(barrier_id, 128);
      for (int i = thread; i < 64 * BN; i += 128) {  // a warp stores 32 consecutive floats of a row
        const int r = i / BN;
        const int col = i % BN;
        const int m = m0 + r;
        const int n = n0 + col;
        if (m < M && n < N) {
          const int chunk = (col % 32) / 4;
          const float* src = reinterpret_cast<const float*>(region + (col / 32) * SLAB_BYTES + r * 128 +
                                                            ((chunk ^ (r % 8)) * 16) + (col % 4) * 4);
          out[static_cast<int64_t>(m) * N + n] = *src;
        }
      }
    }
  }
};

// Config's Store for a staged build: STAGED, and its writer.
template <int MODE>
struct StoreStaged {
  static_assert(MODE >= 1 && MODE <= 3, "a staged store is 1, 2 or 3 (0 is StoreDirect)");
  static constexpr bool STAGED = true;
  template <int BN>
  using Writer = StagedWriter<BN, MODE>;
};

}  // namespace gemm_wgmma
