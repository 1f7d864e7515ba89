// kernels/common/gemm_wgmma.cuh: the Hopper GEMM of rungs 9 and 10 (wgmma + TMA + mbarriers, a
// producer warp group and two consumer warp groups), written once: gemm_09_wgmma_tf32.cu explains
// it and runs it in TF32, gemm_10_3xtf32.cu runs it with the 3xTF32 split and promoted
// accumulation. sm_90a only (wgmma, setmaxnreg): a kernel file including this says `// @arch: 9.0a`.
//
//   Config<BN, STAGES, SPLIT, PROMOTE, PRESPLIT, CLUSTER, PERSISTENT, PINGPONG>   tile width,
//                                        pipeline depth, TF32 or 3xTF32, promotion, where the 3xTF32
//                                        split happens, and the schedule (clusters, persistent
//                                        blocks, a tile per consumer warp group);
//   gemm_wgmma_kernel<C, Epi>            the kernel, ending in the epilogue Epi;
//   StoreEpilogue                        the plain epilogue: out = acc (+ bias);
//   tma_ok                               can TMA describe x and w (K % 4 == 0, 16-byte aligned)?
//   run, run_presplit                    encode the tensor maps and launch (run_epilogue and
//                                        run_presplit_epilogue with another epilogue).
//
// out = x @ w.T, x (M, K) and w (N, K) row-major: both K-major, the only layout TF32 wgmma takes.

#pragma once

#include <algorithm>
#include <cstdint>

#include "common/device_cache.cuh"
#include "common/gemm_launch.cuh"
#include "common/hopper.cuh"
#include "common/tensor_core.cuh"

namespace gemm_wgmma {

constexpr int BM = 128;         // rows of a block tile: 2 consumer warp groups x 64 (wgmma's M)
constexpr int BK = 32;          // k values per stage: 32 floats = 128 bytes, one row of the 128-byte swizzle
constexpr int CONSUMERS = 2;    // consumer warp groups
constexpr int THREADS = 128 * (1 + CONSUMERS);  // warp group 0 produces, 1 and 2 consume
constexpr int GROUP_M = 16;     // tc::grouped_tile's raster
constexpr int PRODUCER_REGS = 40;   // setmaxnreg: the producer keeps 40 registers per thread ...
constexpr int CONSUMER_REGS = 232;  // ... and the consumers take 232: 128 x 40 + 256 x 232 <= 64K

// The schedule. Two that CUTLASS's Hopper GEMMs use are here: CLUSTER = 2 blocks stacked in M share
// the loads of their common w tile (TMA multicast), and PERSISTENT blocks loop over tiles, so that
// the producer loads the next tile's first stages while the consumers finish the last one. -D flags
// select them. PERSISTENT is the default: with every contender timed in turn (utils.bench
// .time_interleaved) it was 5% faster than one tile per block at 32768 x 4096 x 1024 and level at
// 1024 x 8192 x 8192; timed one after another, the order had hidden that (it favours whoever runs
// first after a pause). Clusters of 2 are for measuring: 2-10% slower (1.5x before hopper.cuh's
// mbar_arrive_cluster lost its release at cluster scope). experiments/wgmma_schedule/README.md.
#ifndef GEMM_WGMMA_CLUSTER
#define GEMM_WGMMA_CLUSTER 1
#endif
#ifndef GEMM_WGMMA_PERSISTENT
#define GEMM_WGMMA_PERSISTENT 1
#endif
// PINGPONG (a third schedule, for measuring, -DGEMM_WGMMA_PINGPONG=1 makes rung 9's Tf32Config use
// it): persistent blocks whose two consumer warp groups each compute a whole 128 x 128 tile, taking
// turns on the tensor cores, so that one warp group's epilogue runs beside the other's main loop.
// cuBLAS runs a 128 x 128 tile per warp group at 32768 x 4096 x 1024. Here it was 19-24% slower
// than one 128 x 256 tile per block, held by the L2 (Nsight Compute: 80% busy): a 128 x 128 tile
// asks a third more L2 bytes per multiply-add (experiments/wgmma_schedule/README.md, "Ping-pong").
#ifndef GEMM_WGMMA_PINGPONG
#define GEMM_WGMMA_PINGPONG 0
#endif

template <int BN_, int STAGES_, bool SPLIT_, int PROMOTE_, bool PRESPLIT_ = false, int CLUSTER_ = GEMM_WGMMA_CLUSTER,
          bool PERSISTENT_ = GEMM_WGMMA_PERSISTENT, bool PINGPONG_ = false>
struct Config {
  static constexpr int BN = BN_;          // columns of a block tile: the wgmma's N (128 or 256)
  static constexpr int STAGES = STAGES_;  // TMA ring depth
  static constexpr bool SPLIT = SPLIT_;   // 3xTF32 (see the kernel)
  static constexpr int PROMOTE = PROMOTE_;  // k tiles per promoted chunk; 0 = never
  static constexpr bool PRESPLIT = PRESPLIT_;  // 3xTF32 on operands split before the kernel (see the kernel)
  static constexpr int CLUSTER = CLUSTER_;     // blocks per cluster, stacked in M, sharing w's tile: 1 or 2
  static constexpr bool PERSISTENT = PERSISTENT_;  // one block per SM, looping over tiles
  static constexpr bool PINGPONG = PINGPONG_;  // PERSISTENT, each consumer warp group a whole tile (see the kernel)
  static constexpr int EMPTY_ARRIVALS = (PINGPONG ? 1 : CONSUMERS) * CLUSTER;  // releases of a stage per round
  static constexpr int W_ROWS = BN / CLUSTER;  // rows of w's tile each block of a cluster loads (TMA's box)
  static constexpr int A_BYTES = BM * BK * 4;
  static constexpr int B_BYTES = BN * BK * 4;
  static constexpr int OPERAND_BYTES = A_BYTES + B_BYTES;  // one x tile and one w tile
  static constexpr int STAGE_BYTES = OPERAND_BYTES * (PRESPLIT ? 2 : 1);  // what TMA brings per stage
  static constexpr int RING = SPLIT && !PRESPLIT ? 3 : 0;  // buffers for the small parts (3: see the consumer loop)
  static constexpr int ACC = BN / 2;          // accumulators per consumer thread and 64 rows: 64 x BN / 128
  static constexpr int BARRIERS = 2 * STAGES + (PINGPONG ? 2 : 0);  // full[STAGES], empty[STAGES] (, turn[2])
  static constexpr size_t SMEM_BYTES = 1024 /* to align the tiles to 1024 bytes */ +
                                       static_cast<size_t>(STAGE_BYTES) * (STAGES + RING) + BARRIERS * sizeof(uint64_t);
  static_assert(BN == 128 || BN == 256, "wgmma wrappers exist for n128 and n256");
  static_assert(BN <= 256, "a TMA box is at most 256 rows");
  static_assert(SMEM_BYTES <= 227 * 1024, "more shared memory than a block may have on sm_90");
  static_assert(PROMOTE >= 0 && (PROMOTE == 0 || SPLIT), "promotion is part of the 3xTF32 path");
  static_assert(!PRESPLIT || SPLIT, "pre-split operands are a 3xTF32 path");
  static_assert(CLUSTER == 1 || CLUSTER == 2, "clusters of 1 or 2 blocks");
  static_assert(W_ROWS % 8 == 0, "a slice of w's tile is whole 1024-byte swizzle atoms");
  static_assert(!PINGPONG || (PERSISTENT && CLUSTER == 1 && !SPLIT && BN == 128),
                "ping-pong: persistent, no cluster, TF32, 128 x 128 tiles (two halves' accumulators: 128 registers)");
};

// The two configurations the rungs run (and the whole-model kernels with them):
// rung 9, TF32: block 128 x 256, 4 stages of 48 KB (ping-pong: 128 x 128 per warp group, 6 stages
// of 32 KB; the default is spelled first, as notebook 08 reads the tile width from it);
#if !GEMM_WGMMA_PINGPONG
using Tf32Config = Config</*BN*/ 256, /*STAGES*/ 4, /*SPLIT*/ false, /*PROMOTE*/ 0>;
#else
using Tf32Config = Config</*BN*/ 128, /*STAGES*/ 6, /*SPLIT*/ false, /*PROMOTE*/ 0, /*PRESPLIT*/ false, /*CLUSTER*/ 1,
                          /*PERSISTENT*/ true, /*PINGPONG*/ true>;
#endif
// rung 10, 3xTF32 on pre-split operands: block 128 x 128 (the promoted sums double the
// accumulators), 3 stages of four boxes (x big, w big, x small, w small: 64 KB each), promotion
// every PROMOTE k tiles.
constexpr int PROMOTE_K = 256;  // k values per promoted chunk (gemm_10_3xtf32.cu measures the choice)
template <int PROMOTE = PROMOTE_K / BK>
using PresplitConfig = Config</*BN*/ 128, /*STAGES*/ 3, /*SPLIT*/ true, PROMOTE, /*PRESPLIT*/ true>;

template <int N>
__device__ __forceinline__ void wgmma_tf32(float (&d)[N], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (N == 64) {
    hopper::wgmma_m64n128k8_tf32(d, desc_a, desc_b, scale_d);
  } else {
    hopper::wgmma_m64n256k8_tf32(d, desc_a, desc_b, scale_d);
  }
}

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
// row t.row + 8h, columns t.col + 8j and + 1 (EpilogueTile). One of two writers takes them:
//
// DirectWriter  stores each pair from registers, 8 bytes per lane: one warp's store touches 8
//               rows, 32 bytes of each. Measured at 3.7 us per 128 x 256 tile, a seventh of a
//               block's time at K = 1024 (experiments/wgmma_schedule/timeline_probe.py). The
//               default, and the fastest of the four ways measured (below).
// StagedWriter  puts the pairs into shared memory instead, in the layout a TMA load would have
//               written (BN / 32 slabs of 64 rows x 128 bytes per warp group, 128-byte swizzle: a
//               warp's 8-byte stores land on all 32 banks, two wavefronts for 256 bytes, the
//               least there is), and then one thread per warp group hands the slabs to TMA, which
//               writes whole rows of 128 bytes. The shared memory is the ring: once a tile's last
//               wgmma is done nothing reads or fills it, unless the block is persistent (its
//               producer is already loading the next tile), so persistent builds write directly.
//               Where TMA cannot describe `out` (N % 4 != 0, or misaligned) the warp group copies
//               the slabs out itself, a row at a time, with plain stores.
struct DirectWriter {
  float* out;
  int row, col, M, N;  // EpilogueTile's

  __device__ __forceinline__ void put(int h, int j, float v0, float v1) const {
    const int m = row + 8 * h;
    const int n = col + 8 * j;
    if (m >= M) {
      return;
    }
    float* dst = out + static_cast<int64_t>(m) * N;
    if (N % 2 == 0) {
      if (n < N) {  // N even and n even: n + 1 < N too
        *reinterpret_cast<float2*>(dst + n) = make_float2(v0, v1);
      }
    } else {
      if (n < N) dst[n] = v0;
      if (n + 1 < N) dst[n + 1] = v1;
    }
  }
};

// Whether, and how, the StagedWriter is used, for measuring (-DGEMM_WGMMA_STAGED_STORE): 0 = no
// staging (the DirectWriter everywhere: the default), 1 = one TMA store per slab once all are
// written, 2 = each slab's TMA store as soon as it is written, 3 = the warp group copies the slabs
// out with plain stores. Predicted: the epilogue from 3.7 to ~1.2 us, ~9% faster at K = 1024.
// Measured on the H100 (experiments/wgmma_schedule/README.md, "The epilogue through shared
// memory"), rung 9 at 1024 x 8192 x 8192 and 32768 x 4096 x 1024, % of cuBLAS TF32, one run:
// 0: 97.9 / 84.2, 1: 92.8 / 78.5, 2: 90.3 / 86.1, 3: 83.9 / 71.1; the epilogue took 4.6-4.9 us
// with 1 instead of 3.7. A block's 128 KB leave the SM no faster through TMA: what bounds the
// epilogue is the SM's write bandwidth to L2, not the store instructions.
#ifndef GEMM_WGMMA_STAGED_STORE
#define GEMM_WGMMA_STAGED_STORE 0
#endif

// Whether an epilogue's tile goes through the StagedWriter: the epilogue writes a tile of `out`, the
// flag asks for staging, and the ring is free after the main loop (not so for persistent blocks,
// whose producer is already loading the next tile).
template <class C, class Epi>
constexpr bool staged_store() {
  return Epi::kWritesTile && !C::PERSISTENT && GEMM_WGMMA_STAGED_STORE != 0;
}

template <int BN>
struct StagedWriter {
  static constexpr int SLAB_BYTES = 64 * 128;  // 64 rows x 32 floats
  static constexpr int BYTES = BN / 32 * SLAB_BYTES;  // a warp group's 64 x BN floats
  static constexpr bool PER_SLAB = GEMM_WGMMA_STAGED_STORE == 2;
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
      : region(region_), map(map_), by_tma(by_tma_ && GEMM_WGMMA_STAGED_STORE != 3), out(out_), m0(m0_), n0(n0_),
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

// out = acc (+ bias (N,), when not null): the GEMM's own epilogue.
struct StoreEpilogue {
  static constexpr bool kWritesTile = true;  // its values are the tile of `out`: the kernel picks the writer
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

// An epilogue's per-column parameters for one tile (Epi::param), spread over THREADS_ threads
// (thread t takes values t, t + THREADS_, ...): loaded into registers when the tile's main loop
// starts, so the loads land while the wgmmas run, and stored to shared memory after it, where
// Epi::finish reads them.
template <class C, class Epi, int THREADS_>
struct TileParams {
  static constexpr int COUNT = Epi::template smem_floats<C>();
  static constexpr int PER_THREAD = (COUNT + THREADS_ - 1) / THREADS_;
  float v[PER_THREAD > 0 ? PER_THREAD : 1];

  __device__ __forceinline__ void load(const Epi& epi, int thread, int n0, int N) {
    if constexpr (COUNT > 0) {
#pragma unroll
      for (int j = 0; j < PER_THREAD; ++j) {
        const int i = thread + j * THREADS_;
        v[j] = i < COUNT ? epi.template param<C>(i, n0, N) : 0.0f;
      }
    }
  }
  __device__ __forceinline__ void store(float* smem, int thread) const {
#pragma unroll
    for (int j = 0; j < PER_THREAD; ++j) {
      const int i = thread + j * THREADS_;
      if (i < COUNT) smem[i] = v[j];
    }
  }
};

// BM x BN tiles of out (tc::grouped_tile's raster over a 1-D grid): one per block, or, PERSISTENT,
// one block per SM taking tiles first_unit, first_unit + step, ... until none is left.
//
// Shared memory: STAGES stages, each [x tile: 128 rows x 128 bytes][w tile: BN rows x 128 bytes],
// exactly as TMA writes them with the 128-byte swizzle (16-byte chunk c of row r stored at chunk
// c ^ (r % 8): the 8 rows of an atom spread any column over all banks), which is also the layout
// the wgmma descriptors describe. SPLIT adds RING buffers of the same size for the small parts.
// Then the barriers: full[s] (the producer's arrival + TMA's bytes) and empty[s] (one arrival per
// consumer warp group of each block of the cluster once its wgmmas no longer read stage s).
//
// Producer (warp group 0, one thread): for each k tile, wait until its stage is empty, announce
// the bytes, issue the TMA loads. Out-of-bounds rows and k are zero-filled by TMA, so the last,
// partial tiles in M, N and K need no code. The k tiles are counted over all of the block's
// tiles (`it`), so a persistent producer runs on into the next tile while the consumers are
// still in the last one's epilogue: the ring is full again when they come back.
//
// CLUSTER = 2: the two blocks of a cluster compute the tiles (2u, n) and (2u + 1, n) of unit u, so
// they need the same w tile. Each loads its own x tile and one half of w's (W_ROWS rows), and
// multicasts that half into both blocks' stage, at the same offset, counted on both blocks' full
// barrier: per stage each block gets all STAGE_BYTES but L2 serves only two thirds of them (TF32).
// Stage s of a block is then written by both producers, so neither may refill it before both
// blocks' consumers are done with it: each consumer warp group arrives on empty[s] of both
// blocks, and each producer waits for all four arrivals. A peer's tile past the last row of out
// (an odd number of M tiles) is loaded as TMA's zeros and never stored.
//
// Consumers (warp groups 1 and 2, rows 64c .. 64c + 63 of the tile): for each k tile, wait until
// its stage is full, issue 4 wgmma m64nBNk8 (k = 0, 8, 16, 24: the descriptors advance 32 bytes),
// commit them as one group, and wait until at most this group is running, i.e. the previous k
// tile's group is done: its stage goes back to the producer. The tensor core thus always has the
// next group queued behind the running one. The tile's last stage goes back once its wgmmas are
// done, before the epilogue.
//
// SPLIT (3xTF32), split in shared memory (PRESPLIT false): after a stage lands, the 256 consumer threads split it in place, element by
// element: big (round to nearest TF32) over the raw value, small (the rest, rounded) into ring
// buffer it % 3 at the same offset. The split is elementwise, so the swizzled layout carries over
// and the same descriptors address big and small tiles. Then a fence (the async proxy must see
// these ordinary stores), a barrier of the 256 consumer threads (each warp group reads w's tile,
// which both split), and three wgmmas per k8 step: small·big, big·small, big·big. Why a ring of 3:
// ring buffer it % 3 is written at step it while the wgmmas of step it - 3 might still read it;
// every warp group has waited for those (at the end of step it - 2) before it reaches step it - 1's
// barrier, which the writer has passed. With 2 buffers it would need a second barrier per step.
// SPLIT with PRESPLIT: x and w arrive already split, as four matrices in global memory (big and
// small of each, split_tf32_kernel below), and each stage is four TMA boxes: [x big][w big][x small]
// [w small]. The consumers only issue wgmmas, exactly as in the TF32 loop but three per k8 step:
// no split in the loop, no ring, no barrier between the consumers. The price is paid outside: x's
// split is one elementwise pass per call (read 4, write 8 bytes per element), and w's, nn.Linear's
// weight, can be split once and kept while the parameter does not change (gemm_10_3xtf32.cu).
// PROMOTE: every PROMOTE k tiles, wait for all wgmmas, add the accumulators into FP32 registers
// (`total`, plain FADD), and start the next chunk with scale-d = 0 (D = A·B, the old D ignored).
//
// PINGPONG (TF32, persistent): warp group c computes the block's tiles c, c + 2, ... whole, 128 x
// 128, two wgmma m64n128k8 per k8 step (one per 64-row half); each stage has one consumer. The
// warp groups take turns (turn[2]): one waits for its tile's stages only after the other has
// waited for all of the previous tile's, because a full barrier's wait tells phases apart by
// parity only, and so that one's epilogue runs beside the other's main loop.
//
// The epilogue (Epi, after the main loop) gets each consumer thread's finished sums in registers:
// StoreEpilogue below writes them (+ nn.Linear's bias); common/gemm_epilogue_groupnorm.cuh
// finishes a whole model there instead (bias, activations, GroupNorm, a row minimum). An epilogue
// may ask for Epi::smem_floats<C>() floats of shared memory after the barriers: its per-column
// parameters, value i of the tile at column n0 being Epi::param<C>(i, n0, N) (only an epilogue
// asking for some needs param: the kernel calls it under `if constexpr`). Each consumer thread
// loads its share into registers when the tile's main loop starts (the loads land while the
// wgmmas run) and stores it to shared memory after the main loop, where finish() reads it.
template <class C, class Epi>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_wgmma_kernel(const __grid_constant__ CUtensorMap tmap_x, const __grid_constant__ CUtensorMap tmap_w,
                      const __grid_constant__ CUtensorMap tmap_xs, const __grid_constant__ CUtensorMap tmap_ws,
                      const __grid_constant__ CUtensorMap tmap_out, bool out_by_tma, const Epi epi, int M, int N,
                      int K) {
  // tmap_x and tmap_w: the raw operands, or their big parts under PRESPLIT; tmap_xs and tmap_ws:
  // the small parts under PRESPLIT, unused otherwise. w's boxes are W_ROWS rows. tmap_out: epi.out
  // in boxes of 64 rows x 32 columns, for the StagedWriter, when out_by_tma.
  extern __shared__ unsigned char smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes and TMA and wgmma compute it from the address
  // bits, so every tile must start on a 1024-byte boundary: align the base (SMEM_BYTES has room).
  // The offset is the same in every block, as multicast needs.
  unsigned char* smem = smem_raw + ((1024 - (hopper::smem_addr(smem_raw) & 1023)) & 1023);
  auto stage_a = [&](int s) { return smem + s * C::STAGE_BYTES; };
  auto stage_b = [&](int s) { return smem + s * C::STAGE_BYTES + C::A_BYTES; };
  auto stage_as = [&](int s) { return smem + s * C::STAGE_BYTES + C::OPERAND_BYTES; };  // PRESPLIT only
  auto stage_bs = [&](int s) { return smem + s * C::STAGE_BYTES + C::OPERAND_BYTES + C::A_BYTES; };
  auto ring_a = [&](int r) { return smem + (C::STAGES + r) * C::STAGE_BYTES; };
  auto ring_b = [&](int r) { return smem + (C::STAGES + r) * C::STAGE_BYTES + C::A_BYTES; };
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + (C::STAGES + C::RING) * C::STAGE_BYTES);
  uint64_t* empty = full + C::STAGES;
  uint64_t* turn = empty + C::STAGES;  // PINGPONG: turn[c] completes a phase when warp group c's main loop is issued
  float* epi_smem = reinterpret_cast<float*>(full + C::BARRIERS);  // Epi::smem_floats<C>() floats (per warp group: PINGPONG)

  // Units of work: CLUSTER tiles stacked in M, one per block of a cluster, in grouped order.
  const int tiles_m = (M + BM - 1) / BM;
  const int tiles_n = (N + C::BN - 1) / C::BN;
  const int units_m = (tiles_m + C::CLUSTER - 1) / C::CLUSTER;
  const int units = units_m * tiles_n;
  const int rank = C::CLUSTER > 1 ? static_cast<int>(hopper::cluster_rank()) : 0;
  const int first_unit = static_cast<int>(blockIdx.x) / C::CLUSTER;
  const int unit_step = static_cast<int>(gridDim.x) / C::CLUSTER;
  auto tile_origin = [&](int unit, int& m0, int& n0, int& tile_n) {
    int unit_m;
    tc::grouped_tile(unit, units_m, tiles_n, GROUP_M / C::CLUSTER, unit_m, tile_n);
    m0 = (unit_m * C::CLUSTER + rank) * BM;
    n0 = tile_n * C::BN;
  };
  const int k_tiles = (K + BK - 1) / BK;
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < C::STAGES; ++s) {
      hopper::mbar_init(&full[s], 1);
      hopper::mbar_init(&empty[s], C::EMPTY_ARRIVALS);
    }
    if constexpr (C::PINGPONG) {
      hopper::mbar_init(&turn[0], 128);
      hopper::mbar_init(&turn[1], 128);
    }
    hopper::mbar_init_fence();
  }
  if constexpr (C::CLUSTER > 1) {
    hopper::cluster_sync();  // the peer's barriers are initialised before anything signals them
  } else {
    __syncthreads();
  }

  if (wg == 0) {
    // ---- producer ----
    hopper::setmaxnreg_dec<PRODUCER_REGS>();
    if (threadIdx.x == 0) {
      hopper::tma_prefetch_descriptor(&tmap_x);
      hopper::tma_prefetch_descriptor(&tmap_w);
      if constexpr (C::PRESPLIT) {
        hopper::tma_prefetch_descriptor(&tmap_xs);
        hopper::tma_prefetch_descriptor(&tmap_ws);
      }
      // w's tile: all of it, or this block's slice multicast into both blocks of the cluster.
      auto load_w = [&](unsigned char* dst, const CUtensorMap* map, uint64_t* bar, int k, int n0) {
        if constexpr (C::CLUSTER == 1) {
          hopper::tma_load_2d(dst, map, bar, k, n0);
        } else {
          hopper::tma_load_2d_multicast(dst + rank * C::W_ROWS * BK * 4, map, bar, k, n0 + rank * C::W_ROWS,
                                        (1u << C::CLUSTER) - 1);
        }
      };
      int it = 0;  // k tiles loaded so far, over all of this block's tiles
      for (int unit = first_unit; unit < units; unit += unit_step) {
        int m0, n0, tile_n;
        tile_origin(unit, m0, n0, tile_n);
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % C::STAGES;
          if (it >= C::STAGES) {
            hopper::mbar_wait(&empty[s], (it / C::STAGES - 1) & 1);  // every consumer is done with round - 1
          }
          hopper::mbar_arrive_expect_tx(&full[s], C::STAGE_BYTES);  // full boxes, zero-filled parts included
          hopper::tma_load_2d(stage_a(s), &tmap_x, &full[s], kt * BK, m0);
          load_w(stage_b(s), &tmap_w, &full[s], kt * BK, n0);
          if constexpr (C::PRESPLIT) {
            hopper::tma_load_2d(stage_as(s), &tmap_xs, &full[s], kt * BK, m0);
            load_w(stage_bs(s), &tmap_ws, &full[s], kt * BK, n0);
          }
        }
      }
    }
  } else if constexpr (C::PINGPONG) {
    // ---- consumers, ping-pong: warp group c computes the block's tiles c, c + 2, c + 4, ... ----
    hopper::setmaxnreg_inc<CONSUMER_REGS>();
    const int c = wg - 1;
    const int wt = threadIdx.x % 128;  // thread of the warp group
    const int lane = threadIdx.x % 32;
    const int warp = wt / 32;
    using Params = TileParams<C, Epi, 128>;
    float* wg_params = epi_smem + c * Params::COUNT;  // each warp group's tile has its own columns
    int n = 0;  // this warp group's tiles so far
    for (int unit = first_unit + c * unit_step; unit < units; unit += 2 * unit_step, ++n) {
      int m0, n0, tile_n;
      tile_origin(unit, m0, n0, tile_n);
      Params params;
      params.load(epi, wt, n0, N);
      float acc[2][C::ACC];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int i = 0; i < C::ACC; ++i) acc[h][i] = 0.0f;
        hopper::fence_operands(acc[h]);
      }
      // Turns: the stages of the block's tile j follow those of tile j - 1 in the ring, and a wait
      // on a stage's full barrier tells phases apart only by parity, so a warp group may start
      // waiting on its tile's stages only once the other has waited on all of the previous tile's.
      // Tile j = 2n + c waits for the other warp group's previous tile: turn[1 - c], phase n - 1 + c.
      if (n + c > 0) {
        hopper::mbar_wait(&turn[1 - c], (n - 1 + c) & 1);
      }
      int it = (2 * n + c) * k_tiles;  // the producer's count of this tile's first stage
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % C::STAGES;
        hopper::mbar_wait(&full[s], (it / C::STAGES) & 1);
        const uint64_t a0 = hopper::wgmma_desc_sw128(stage_a(s));
        const uint64_t a1 = hopper::wgmma_desc_sw128(stage_a(s) + 64 * BK * 4);
        const uint64_t b = hopper::wgmma_desc_sw128(stage_b(s));
        hopper::fence_operands(acc[0]);
        hopper::fence_operands(acc[1]);
        hopper::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 8; ++kk) {
          const uint64_t step = kk * hopper::WGMMA_DESC_K8_STEP;
          wgmma_tf32(acc[0], a0 + step, b + step, 1);
          wgmma_tf32(acc[1], a1 + step, b + step, 1);
        }
        hopper::wgmma_commit();
        hopper::fence_operands(acc[0]);
        hopper::fence_operands(acc[1]);
        hopper::wgmma_wait<1>();
        if (kt > 0) {
          if (wt == 0) hopper::mbar_arrive(&empty[(it - 1) % C::STAGES]);
        }
      }
      hopper::mbar_arrive(&turn[c]);  // every stage of this tile waited for: the other warp group's turn
      EpilogueTile t[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        t[h] = EpilogueTile{m0 + 64 * h + warp * 16 + lane / 4, n0 + 2 * (lane % 4), n0, tile_n, M, N};
      }
      const auto ahead = epi.template ahead<C>(t[0]);  // per-column values: the same for both halves
      hopper::wgmma_wait<0>();
      hopper::fence_operands(acc[0]);
      hopper::fence_operands(acc[1]);
      if (wt == 0) hopper::mbar_arrive(&empty[(it - 1) % C::STAGES]);
      if constexpr (Params::COUNT > 0) {
        hopper::named_barrier(6 + c, 128);  // this warp group's last tile no longer reads them
        params.store(wg_params, wt);
        hopper::named_barrier(6 + c, 128);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        epi.template finish<C>(acc[h], ahead, t[h], wg_params, DirectWriter{epi.out, t[h].row, t[h].col, M, N});
      }
    }
  } else {
    // ---- consumers ----
    hopper::setmaxnreg_inc<CONSUMER_REGS>();
    const int c = wg - 1;                  // rows 64c .. 64c + 63 of the tile
    const int ct = threadIdx.x - 128;      // 0..255 over both consumer warp groups
    constexpr int PARAMS = Epi::template smem_floats<C>();
    // With -DGEMM_WGMMA_STAGED_STORE, the epilogue's values go through the free ring and TMA.
    constexpr bool STAGED = staged_store<C, Epi>();
    static_assert(!STAGED || 2 * StagedWriter<C::BN>::BYTES <= C::STAGES * C::STAGE_BYTES,
                  "the staged tile fits in the ring");
    // Stage s goes back to the producer(s): one arrival per warp group on empty[s] of each block
    // of the cluster, from its threads 0 .. CLUSTER - 1.
    auto release = [&](int s) {
      const int lane = threadIdx.x % 128;
      if constexpr (C::CLUSTER == 1) {
        if (lane == 0) hopper::mbar_arrive(&empty[s]);
      } else {
        if (lane < C::CLUSTER) hopper::mbar_arrive_cluster(&empty[s], static_cast<unsigned>(lane));
      }
    };
    int it = 0;  // k tiles consumed so far, as the producer counts them
    for (int unit = first_unit; unit < units; unit += unit_step) {
      int m0, n0, tile_n;
      tile_origin(unit, m0, n0, tile_n);
      TileParams<C, Epi, 128 * CONSUMERS> params;
      params.load(epi, ct, n0, N);
      float acc[C::ACC];
      float total[C::PROMOTE > 0 ? C::ACC : 1];
#pragma unroll
      for (int i = 0; i < C::ACC; ++i) {
        acc[i] = 0.0f;
      }
#pragma unroll
      for (int i = 0; i < (C::PROMOTE > 0 ? C::ACC : 1); ++i) {
        total[i] = 0.0f;
      }
      hopper::fence_operands(acc);

      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % C::STAGES;
        hopper::mbar_wait(&full[s], (it / C::STAGES) & 1);
        const uint64_t a_big = hopper::wgmma_desc_sw128(stage_a(s) + c * 64 * BK * 4);
        const uint64_t b_big = hopper::wgmma_desc_sw128(stage_b(s));
        if constexpr (C::SPLIT) {
          uint64_t a_small, b_small;
          if constexpr (C::PRESPLIT) {
            a_small = hopper::wgmma_desc_sw128(stage_as(s) + c * 64 * BK * 4);
            b_small = hopper::wgmma_desc_sw128(stage_bs(s));
          } else {
            const int r = it % C::RING;
            float4* raw = reinterpret_cast<float4*>(stage_a(s));  // the whole stage: x tile, then w tile
            float4* small = reinterpret_cast<float4*>(ring_a(r));
#pragma unroll 4
            for (int i = ct; i < C::STAGE_BYTES / 16; i += 128 * CONSUMERS) {
              tc::split_tf32x4(raw[i], raw[i], small[i]);  // big over the raw value, in place
            }
            hopper::fence_proxy_async();
            hopper::named_barrier(1, 128 * CONSUMERS);
            a_small = hopper::wgmma_desc_sw128(ring_a(r) + c * 64 * BK * 4);
            b_small = hopper::wgmma_desc_sw128(ring_b(r));
          }
          // The first k tile of a chunk starts from D = 0 (scale-d = 0); the others accumulate.
          const int chunk_start = C::PROMOTE > 0 ? kt % C::PROMOTE == 0 : kt == 0;
          hopper::fence_operands(acc);
          hopper::wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < BK / 8; ++kk) {
            const uint64_t step = kk * hopper::WGMMA_DESC_K8_STEP;
            wgmma_tf32(acc, a_small + step, b_big + step, kk == 0 && chunk_start ? 0 : 1);
            wgmma_tf32(acc, a_big + step, b_small + step, 1);
            wgmma_tf32(acc, a_big + step, b_big + step, 1);
          }
          hopper::wgmma_commit();
          hopper::fence_operands(acc);
          if (C::PROMOTE > 0 && ((kt + 1) % C::PROMOTE == 0 || kt + 1 == k_tiles)) {
            hopper::wgmma_wait<0>();
            hopper::fence_operands(acc);
#pragma unroll
            for (int i = 0; i < (C::PROMOTE > 0 ? C::ACC : 1); ++i) {
              total[i] += acc[i];
            }
            hopper::fence_operands(acc);
          } else {
            hopper::wgmma_wait<1>();
          }
        } else {
          hopper::fence_operands(acc);
          hopper::wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < BK / 8; ++kk) {
            const uint64_t step = kk * hopper::WGMMA_DESC_K8_STEP;
            wgmma_tf32(acc, a_big + step, b_big + step, 1);
          }
          hopper::wgmma_commit();
          hopper::fence_operands(acc);
          hopper::wgmma_wait<1>();  // the previous k tile's wgmmas are done...
        }
        if (kt > 0) {
          release((it - 1) % C::STAGES);  // ...so its stage goes back to the producer
        }
      }
      // Lane (g, t) of warp v in this consumer: rows 16v + g and 16v + g + 8 of its 64, columns
      // 8j + 2t and 8j + 2t + 1 for each n8 block j: value 4j + 2h + e of the lane's registers is
      // (row + 8h, col + 8j + e). What the epilogue needs from memory is loaded while the last
      // wgmmas run (Epi::ahead).
      const int lane = static_cast<int>(threadIdx.x % 32);
      const int warp = static_cast<int>(threadIdx.x % 128) / 32;
      const EpilogueTile t{m0 + c * 64 + warp * 16 + lane / 4, n0 + 2 * (lane % 4), n0, tile_n, M, N};
      const auto ahead = epi.template ahead<C>(t);
      hopper::wgmma_wait<0>();
      hopper::fence_operands(acc);
      release((it - 1) % C::STAGES);  // the tile's last stage: the producer may go on to the next tile
      if constexpr (PARAMS > 0 || STAGED) {
        // Every consumer's wgmmas are done: the last tile's parameters are no longer read, nor is
        // the ring, which the StagedWriter then overwrites.
        hopper::named_barrier(2, 128 * CONSUMERS);
      }
      if constexpr (PARAMS > 0) {
        params.store(epi_smem, ct);
        hopper::named_barrier(2, 128 * CONSUMERS);  // this tile's are all in place
      }
      auto finish = [&](const auto& writer) {
        if constexpr (C::PROMOTE > 0) {
          epi.template finish<C>(total, ahead, t, epi_smem, writer);
        } else {
          epi.template finish<C>(acc, ahead, t, epi_smem, writer);
        }
      };
      if constexpr (STAGED) {
        const StagedWriter<C::BN> writer(smem + c * StagedWriter<C::BN>::BYTES, warp, lane, &tmap_out, out_by_tma,
                                         epi.out, m0 + 64 * c, n0, M, N, 3 + c);
        finish(writer);
        writer.flush();
      } else {
        finish(DirectWriter{epi.out, t.row, t.col, M, N});
      }
    }
  }
  if constexpr (C::CLUSTER > 1) {
    hopper::cluster_sync();  // no block exits while its peer may still arrive on its barriers
  }
}

// TMA's conditions on a row-major float matrix: a 16-byte-aligned start and a row stride that is
// a multiple of 16 bytes (K % 4 == 0). Launchers take another path when they do not hold.
inline bool tma_ok(const torch::Tensor& x, const torch::Tensor& w) {
  return x.size(1) % 4 == 0 && aligned16(x.data_ptr()) && aligned16(w.data_ptr());
}

// The StagedWriter's TMA descriptor of epi.out (M, N): boxes of 64 rows x 32 columns, one slab,
// when TMA can describe it; otherwise by_tma is false and the warp groups copy their slabs out.
struct OutMap {
  CUtensorMap map{};
  bool by_tma = false;
};
template <class C, class Epi>
OutMap out_map(const Epi& epi, int64_t M, int64_t N) {
  OutMap o;
  if constexpr (staged_store<C, Epi>()) {
    o.by_tma = N % 4 == 0 && aligned16(epi.out);
    if (o.by_tma) {
      o.map = hopper::make_tensor_map_2d(epi.out, M, N, 64, 32);
    }
  }
  return o;
}

template <class C, class Epi>
void launch(const CUtensorMap& tmap_x, const CUtensorMap& tmap_w, const CUtensorMap& tmap_xs, const CUtensorMap& tmap_ws,
            int64_t M, int64_t N, int64_t K, const Epi& epi) {
  const OutMap out = out_map<C>(epi, M, N);
  auto kernel = gemm_wgmma_kernel<C, Epi>;
  constexpr size_t smem = C::SMEM_BYTES + Epi::template smem_floats<C>() * sizeof(float) * (C::PINGPONG ? 2 : 1);
  static_assert(smem <= 227 * 1024, "more shared memory than a block may have on sm_90");
  allow_dynamic_smem(kernel, smem);  // over 48 KB: asked for once per kernel and device
  const int64_t units = (M + BM * C::CLUSTER - 1) / (BM * C::CLUSTER) * ((N + C::BN - 1) / C::BN);
  TORCH_CHECK(units * C::CLUSTER <= INT32_MAX, "the output has ", num(units * C::CLUSTER), " tiles of ", num(BM),
              " x ", num(C::BN), ", more than a grid holds (", num(INT32_MAX), ")");
  int64_t clusters = units;
  if constexpr (C::PERSISTENT) {
    clusters = std::min<int64_t>(units, max_active_clusters(kernel, C::CLUSTER, THREADS, smem));
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(clusters * C::CLUSTER));
  config.blockDim = dim3(THREADS);
  config.dynamicSmemBytes = smem;
  config.stream = at::cuda::getCurrentCUDAStream();
  cudaLaunchAttribute cluster = cluster_dimension(C::CLUSTER);
  config.attrs = &cluster;
  config.numAttrs = C::CLUSTER > 1 ? 1 : 0;  // a block alone: an ordinary launch, no cluster
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, tmap_x, tmap_w, tmap_xs, tmap_ws, out.map, out.by_tma, epi,
                                    static_cast<int>(M), static_cast<int>(N), static_cast<int>(K)));
  LAUNCH_CHECK();
}

// Tiles of the output in N, for epilogues that keep one value per row and tile (a row minimum).
template <class C>
inline int64_t tiles_n(int64_t N) {
  return (N + C::BN - 1) / C::BN;
}

// Computes x @ w.T and hands each tile to `epi`. x and w checked, tma_ok(x, w), M, N, K > 0.
template <class C, class Epi>
void run_epilogue(const torch::Tensor& x, const torch::Tensor& w, const Epi& epi) {
  static_assert(!C::PRESPLIT, "pre-split operands go through run_presplit");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t M = x.size(0);
  const int64_t N = w.size(0);
  const int64_t K = x.size(1);
  const CUtensorMap tmap_x = hopper::make_tensor_map_2d(x.data_ptr<float>(), M, K, BM, BK);
  const CUtensorMap tmap_w = hopper::make_tensor_map_2d(w.data_ptr<float>(), N, K, C::W_ROWS, BK);
  launch<C>(tmap_x, tmap_w, tmap_x, tmap_w, M, N, K, epi);
}

// Fills `out` (M, N), allocated by gemm_new_output, with x @ w.T (+ bias (N,), when not null).
template <class C>
void run(const torch::Tensor& x, const torch::Tensor& w, torch::Tensor& out, const float* bias = nullptr) {
  run_epilogue<C>(x, w, StoreEpilogue{out.data_ptr<float>(), bias});
}

// ---- pre-split operands (PRESPLIT) ------------------------------------------------------------

// parts[0] = big, parts[1] = small of every value of v (n floats, n % 4 == 0, 16-byte aligned, as
// are both parts: split_parts allocates them). One float4 per thread and step, grid-stride.
__global__ void split_tf32_kernel(const float4* __restrict__ v, float4* __restrict__ big, float4* __restrict__ small,
                                  int64_t n4) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    tc::split_tf32x4(v[i], big[i], small[i]);
  }
}

// The 3xTF32 split of a contiguous (rows, cols) float matrix, cols % 4 == 0 and 16-byte aligned
// (tma_ok): a (2, rows, cols) tensor, [0] the big parts, [1] the small parts. Each part starts
// rows * cols * 4 bytes after the other, a multiple of 16, so both stay TMA-describable.
inline torch::Tensor split_parts(const torch::Tensor& v) {
  TORCH_CHECK(v.is_contiguous() && v.size(-1) % 4 == 0 && aligned16(v.data_ptr()),
              "split_parts needs a contiguous, 16-byte-aligned matrix with a multiple of 4 columns");
  const c10::cuda::CUDAGuard guard(v.device());
  torch::Tensor parts = torch::empty({2, v.size(0), v.size(1)}, v.options());
  const int64_t n4 = v.numel() / 4;
  if (n4 == 0) {
    return parts;
  }
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n4 + threads - 1) / threads,
                                           static_cast<int64_t>(device_attribute<cudaDevAttrMultiProcessorCount>(v.get_device())) * 8);
  split_tf32_kernel<<<static_cast<unsigned>(blocks), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const float4*>(v.data_ptr<float>()), reinterpret_cast<float4*>(parts[0].data_ptr<float>()),
      reinterpret_cast<float4*>(parts[1].data_ptr<float>()), n4);
  LAUNCH_CHECK();
  return parts;
}

// x @ w.T on operands given part by part, each (rows, K) row-major (K-major), K % 4 == 0, 16-byte
// aligned: the big parts x_big (M, K) and w_big (N, K), which may be the raw values themselves (the
// tensor cores truncate them: common/tf32_operands.cuh), and the small parts beside them; each tile
// handed to `epi`: the PRESPLIT kernel. M, N, K > 0.
template <class C, class Epi>
void run_parts_epilogue(const torch::Tensor& x_big, const torch::Tensor& x_small, const torch::Tensor& w_big,
                        const torch::Tensor& w_small, const Epi& epi) {
  static_assert(C::PRESPLIT, "run_parts is the pre-split path");
  const c10::cuda::CUDAGuard guard(x_big.device());
  const int64_t M = x_big.size(0);
  const int64_t N = w_big.size(0);
  const int64_t K = x_big.size(1);
  TORCH_CHECK(w_big.size(1) == K && x_small.sizes() == x_big.sizes() && w_small.sizes() == w_big.sizes() && K % 4 == 0,
              "the operands' parts must agree in shape, with K % 4 == 0");
  const CUtensorMap tmap_x = hopper::make_tensor_map_2d(x_big.data_ptr<float>(), M, K, BM, BK);
  const CUtensorMap tmap_w = hopper::make_tensor_map_2d(w_big.data_ptr<float>(), N, K, C::W_ROWS, BK);
  const CUtensorMap tmap_xs = hopper::make_tensor_map_2d(x_small.data_ptr<float>(), M, K, BM, BK);
  const CUtensorMap tmap_ws = hopper::make_tensor_map_2d(w_small.data_ptr<float>(), N, K, C::W_ROWS, BK);
  launch<C>(tmap_x, tmap_w, tmap_xs, tmap_ws, M, N, K, epi);
}

// x @ w.T from split_parts of x (M, K) and of w (N, K) (big parts rounded to the nearest TF32).
template <class C, class Epi>
void run_presplit_epilogue(const torch::Tensor& x_parts, const torch::Tensor& w_parts, const Epi& epi) {
  run_parts_epilogue<C>(x_parts[0], x_parts[1], w_parts[0], w_parts[1], epi);
}

// The same, filling `out` (M, N) with x @ w.T (+ bias).
template <class C>
void run_presplit(const torch::Tensor& x_parts, const torch::Tensor& w_parts, torch::Tensor& out,
                  const float* bias = nullptr) {
  run_presplit_epilogue<C>(x_parts, w_parts, StoreEpilogue{out.data_ptr<float>(), bias});
}

}  // namespace gemm_wgmma
