// kernels/common/gemm_wgmma.cuh: the Hopper GEMM of rungs 9 and 10 (wgmma + TMA + mbarriers, a
// producer warp group and two consumer warp groups), written once: gemm_09_wgmma_tf32.cu explains
// it and runs it in TF32, gemm_10_3xtf32.cu runs it with the 3xTF32 split and promoted
// accumulation. sm_90a only (wgmma, setmaxnreg): a kernel file including this says `// @arch: 9.0a`.
// This file is the configuration and the kernel; common/gemm_wgmma_writers.cuh holds where an
// epilogue's values go, common/gemm_wgmma_host.cuh the host side (what a launcher includes).
//
//   Config<BN, STAGES, SPLIT, PROMOTE, PRESPLIT>   tile width, pipeline depth, TF32 or 3xTF32,
//                                        promotion, where the 3xTF32 split happens; and the types it
//                                        is built from (common/gemm_wgmma_types.cuh): its Operand
//                                        (what the tensor cores read) and its Scheduler (which tiles
//                                        a block computes);
//   Tf32Mainloop, Split3xTf32Mainloop,   the main loops: what the consumers issue on one k tile,
//   SplitW3xTf32Mainloop                 TF32 (one product per k step of the operand), 3xTF32 with
//                                        promoted accumulation, or 3xTF32 making w's small parts;
//   Tf32Config, PresplitConfig,          the configurations the rungs, `linear` and the whole
//   SplitWConfig                         models run;
//   gemm_wgmma_kernel<C, Epi>            the kernel, persistent blocks ending each tile in the
//                                        epilogue Epi;
//   init_ring                            its ring's barriers (common/gemm_mixed_input.cuh's too).
//
// It has one schedule, the one every kernel runs: persistent blocks, no clusters, the epilogue
// storing from registers. The others measured (one tile per block, clusters of 2 with TMA
// multicast, ping-pong warp groups, the epilogue staged in shared memory) are in the history with
// the study that measured them (experiments/wgmma_schedule/README.md; experiments/README.md,
// "Historical scripts and logs").
//
// out = x @ w.T, x (M, K) and w (N, K) row-major: both K-major, the only layout TF32 wgmma takes.

#pragma once

#include <cstdint>
#include <type_traits>

#include "common/gemm_wgmma_types.cuh"
#include "common/gemm_wgmma_writers.cuh"
#include "common/hopper.cuh"
#include "common/tensor_core.cuh"

namespace gemm_wgmma {

constexpr int BM = 128;         // rows of a block tile: 2 consumer warp groups x 64 (wgmma's M)
constexpr int BK = 32;          // k values per stage of an fp32 operand: 32 floats = 128 bytes, one row of the 128-byte swizzle (Tf32Operand::K_TILE; a Config's own is C::BK)
constexpr int CONSUMERS = 2;    // consumer warp groups
constexpr int THREADS = 128 * (1 + CONSUMERS);  // warp group 0 produces, 1 and 2 consume
constexpr int GROUP_M = 16;     // tc::grouped_tile's raster
constexpr int PRODUCER_REGS = 40;   // setmaxnreg: the producer keeps 40 registers per thread ...
constexpr int CONSUMER_REGS = 232;  // ... and the consumers take 232: 128 x 40 + 256 x 232 <= 64K

// The ring's barriers, made by thread 0 before any thread waits on one: full[s] completes on the producer's
// arrival and TMA's bytes, empty[s] on one arrival per consumer warp group.
__device__ __forceinline__ void init_ring(uint64_t* full, uint64_t* empty, int stages) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      hopper::mbar_init(&full[s], 1);
      hopper::mbar_init(&empty[s], CONSUMERS);
    }
    hopper::mbar_init_fence();
  }
  __syncthreads();
}

// ---- the main loops -------------------------------------------------------------------------------
//
// What the consumers do with one k tile once its stage has landed, per precision scheme: each is a
// struct whose `step` the kernel calls between the wait on full[s] and the release of the previous
// stage, with the stage's shared memory (Stages), the descriptors of the tile's x rows (this warp
// group's 64) and w rows, the accumulators and, for a promoted scheme, the fp32 totals. A Config
// names its main loop; the kernel around it, the ring, the schedule and the epilogue, is the same.

// Where stage s's tiles sit in shared memory (the kernel's layout, below): [x][w], then under
// PRESPLIT [x small][w small] (or [x small] alone when w's small parts are made in the loop); after
// the STAGES stages, RING buffers for small parts made in shared memory: a stage's size each, [x][w]
// (ring_x, ring_w), or w's size each under SplitWConfig (w_ring).
template <class C>
struct Stages {
  unsigned char* smem;  // 1024-byte aligned
  __device__ __forceinline__ unsigned char* x(int s) const { return smem + s * C::STAGE_BYTES; }
  __device__ __forceinline__ unsigned char* w(int s) const { return smem + s * C::STAGE_BYTES + C::A_BYTES; }
  __device__ __forceinline__ unsigned char* x_small(int s) const { return smem + s * C::STAGE_BYTES + C::OPERAND_BYTES; }
  __device__ __forceinline__ unsigned char* w_small(int s) const {
    return smem + s * C::STAGE_BYTES + C::OPERAND_BYTES + C::A_BYTES;
  }
  __device__ __forceinline__ unsigned char* ring_x(int r) const { return smem + (C::STAGES + r) * C::STAGE_BYTES; }
  __device__ __forceinline__ unsigned char* ring_w(int r) const {
    return smem + (C::STAGES + r) * C::STAGE_BYTES + C::A_BYTES;
  }
  __device__ __forceinline__ unsigned char* w_ring(int r) const {
    return smem + C::STAGES * C::STAGE_BYTES + r * C::RING_BYTES;
  }
};

// TF32 (rung 9): four wgmma m64nBNk8 per k tile (k = 0, 8, 16, 24: the descriptors advance 32 bytes)
// on the raw values, whose top 19 bits the tensor cores read; committed as one group, then a wait
// until at most this group runs, i.e. the previous k tile's group is done.
struct Tf32Mainloop {
  template <class C, class Total>
  static __device__ __forceinline__ void step(float (&acc)[C::ACC], Total& /*total*/, const Stages<C>& /*st*/,
                                              uint64_t a_big, uint64_t b_big, int /*s*/, int /*it*/, int /*kt*/,
                                              int /*k_tiles*/, int /*c*/, int /*ct*/) {
    hopper::fence_operands(acc);
    hopper::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < C::BK / C::Operand::K_PER_MMA; ++kk) {
      const uint64_t step = kk * C::Operand::DESC_STEP;
      C::Operand::mma(acc, a_big + step, b_big + step, 1);
    }
    hopper::wgmma_commit();
    hopper::fence_operands(acc);
    hopper::wgmma_wait<1>();  // the previous k tile's wgmmas are done...
  }
};

// 3xTF32 (rung 10): three products per k8 step, small·big + big·small + big·big, the small parts
// either from the stage's own boxes (PRESPLIT) or split here in shared memory (the kernel's comment
// says how), and every PROMOTE k tiles the accumulators added into fp32 totals.
struct Split3xTf32Mainloop {
  // The three products of one k tile, on the descriptors of its big and small parts, and the
  // promotion (SplitW3xTf32Mainloop's too).
  template <class C, class Total>
  static __device__ __forceinline__ void products(float (&acc)[C::ACC], Total& total, uint64_t a_small, uint64_t a_big,
                                                  uint64_t b_small, uint64_t b_big, int kt, int k_tiles) {
    // The first k tile of a chunk starts from D = 0 (scale-d = 0); the others accumulate.
    const int chunk_start = C::PROMOTE > 0 ? kt % C::PROMOTE == 0 : kt == 0;
    hopper::fence_operands(acc);
    hopper::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < C::BK / C::Operand::K_PER_MMA; ++kk) {
      const uint64_t step = kk * hopper::WGMMA_DESC_K8_STEP;
      C::Operand::mma(acc, a_small + step, b_big + step, kk == 0 && chunk_start ? 0 : 1);
      C::Operand::mma(acc, a_big + step, b_small + step, 1);
      C::Operand::mma(acc, a_big + step, b_big + step, 1);
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
  }

  template <class C, class Total>
  static __device__ __forceinline__ void step(float (&acc)[C::ACC], Total& total, const Stages<C>& st, uint64_t a_big,
                                              uint64_t b_big, int s, int it, int kt, int k_tiles, int c, int ct) {
    uint64_t a_small, b_small;
    if constexpr (C::PRESPLIT) {
      a_small = hopper::wgmma_desc_sw128(st.x_small(s) + c * C::A_WG_BYTES);
      b_small = hopper::wgmma_desc_sw128(st.w_small(s));
    } else {
      const int r = it % C::RING;
      float4* raw = reinterpret_cast<float4*>(st.x(s));  // the whole stage: x tile, then w tile
      float4* small = reinterpret_cast<float4*>(st.ring_x(r));
#pragma unroll 4
      for (int i = ct; i < C::STAGE_BYTES / 16; i += 128 * CONSUMERS) {
        tc::split_tf32x4(raw[i], raw[i], small[i]);  // big over the raw value, in place
      }
      hopper::fence_proxy_async();
      hopper::named_barrier(1, 128 * CONSUMERS);
      a_small = hopper::wgmma_desc_sw128(st.ring_x(r) + c * C::A_WG_BYTES);
      b_small = hopper::wgmma_desc_sw128(st.ring_w(r));
    }
    products<C>(acc, total, a_small, a_big, b_small, b_big, kt, k_tiles);
  }
};

// 3xTF32 with x's parts by TMA and w's small parts made here, in shared memory: no pass over w per
// call. x arrives as big (raw) and small boxes, split before the kernel (its pass reads M x K, the
// batch: small beside w's N x K at the problems' shapes); w arrives raw, which is its own big part
// (the tensor cores truncate it: common/tf32_operands.cuh), and the 256 consumer threads write its
// small parts, tc::tf32_residual of each value, into ring buffer it % RING at the same offset, so
// that the swizzled layout and the descriptors carry over. A proxy fence and a barrier of the
// consumers (each warp group reads the whole w tile, which both wrote), then the three products and
// the promotion of Split3xTf32Mainloop. The ring of 3 is that loop's too (why 3: the kernel's comment).
// Against splitting both operands in shared memory (Split3xTf32Mainloop without PRESPLIT): w's small
// parts only, and no big part written back: a quarter of its shared-memory traffic at BN = 128.
struct SplitW3xTf32Mainloop {
  template <class C, class Total>
  static __device__ __forceinline__ void step(float (&acc)[C::ACC], Total& total, const Stages<C>& st, uint64_t a_big,
                                              uint64_t b_big, int s, int it, int kt, int k_tiles, int c, int ct) {
    const uint64_t a_small = hopper::wgmma_desc_sw128(st.x_small(s) + c * C::A_WG_BYTES);
    const int r = it % C::RING;
    const float4* raw = reinterpret_cast<const float4*>(st.w(s));
    float4* small = reinterpret_cast<float4*>(st.w_ring(r));
#pragma unroll 4
    for (int i = ct; i < C::B_BYTES / 16; i += 128 * CONSUMERS) {
      const float4 v = raw[i];
      small[i] = make_float4(tc::tf32_residual(v.x), tc::tf32_residual(v.y), tc::tf32_residual(v.z),
                             tc::tf32_residual(v.w));
    }
    hopper::fence_proxy_async();
    hopper::named_barrier(1, 128 * CONSUMERS);
    const uint64_t b_small = hopper::wgmma_desc_sw128(st.w_ring(r));
    Split3xTf32Mainloop::products<C>(acc, total, a_small, a_big, b_small, b_big, kt, k_tiles);
  }
};

// The schedule (PersistentTiles, common/gemm_wgmma_types.cuh), with every contender timed in turn
// (utils.bench.time_interleaved): 4.6% faster than one tile per block at 32768 x 4096 x 1024 and level
// at 1024 x 8192 x 8192; timed one after another, the order had hidden that (it favours whoever runs
// first after a pause). Measured and not taken (experiments/wgmma_schedule/README.md):
// - one tile per block, both consumer warp groups on it, as the rungs first ran;
// - clusters of 2 blocks stacked in M sharing the loads of their common w tile (TMA multicast):
//   2-10% slower (1.5x while the arrive on the peer's barrier released at cluster scope);
// - ping-pong, persistent blocks whose two consumer warp groups each compute a whole 128 x 128
//   tile, taking turns on the tensor cores, so that one warp group's epilogue runs beside the
//   other's main loop. cuBLAS runs a 128 x 128 tile per warp group at 32768 x 4096 x 1024. Here it
//   was 19-24% slower than one 128 x 256 tile per block, held by the L2 (Nsight Compute: 80% busy):
//   a 128 x 128 tile asks a third more L2 bytes per multiply-add (the README's "Ping-pong").
template <class Operand_, int BN_, int STAGES_, bool SPLIT_, int PROMOTE_, bool PRESPLIT_>
struct ConfigOf {
  static constexpr int BN = BN_;          // columns of a block tile: the wgmma's N (64, 128 or 256)
  static constexpr int STAGES = STAGES_;  // TMA ring depth
  static constexpr bool SPLIT = SPLIT_;   // 3xTF32 (see the kernel)
  static constexpr int PROMOTE = PROMOTE_;  // k tiles per promoted chunk; 0 = never
  static constexpr bool PRESPLIT = PRESPLIT_;  // 3xTF32 on operands split before the kernel (see the kernel)
  using Operand = Operand_;                         // what the tensor cores read
  using Scheduler = PersistentTiles<BM, BN, GROUP_M>;  // which tiles a block computes, in which order
  using Mainloop = std::conditional_t<SPLIT, Split3xTf32Mainloop, Tf32Mainloop>;  // what one k tile issues
  static constexpr int BK = Operand::K_TILE;  // k values per stage: one 128-byte swizzle row of the operand
  static constexpr int A_BYTES = BM * BK * Operand::BYTES;
  static constexpr int A_WG_BYTES = A_BYTES / CONSUMERS;  // one consumer warp group's 64 rows of an x tile
  static constexpr int B_BYTES = BN * BK * Operand::BYTES;
  static constexpr int OPERAND_BYTES = A_BYTES + B_BYTES;  // one x tile and one w tile
  static constexpr int STAGE_BYTES = OPERAND_BYTES * (PRESPLIT ? 2 : 1);  // what TMA brings per stage
  static constexpr int RING = SPLIT && !PRESPLIT ? 3 : 0;  // buffers for the small parts (3: see the consumer loop)
  static constexpr int RING_BYTES = STAGE_BYTES;           // one ring buffer: an x and a w tile's small parts
  static constexpr bool LOADS_W_SMALL = PRESPLIT;          // the producer brings w's small parts (TMA)
  static constexpr int ACC = BN / 2;          // accumulators per consumer thread and 64 rows: 64 x BN / 128
  static constexpr int BARRIERS = 2 * STAGES;  // full[STAGES], empty[STAGES]
  static constexpr size_t SMEM_BYTES = 1024 /* to align the tiles to 1024 bytes */ +
                                       static_cast<size_t>(STAGE_BYTES) * STAGES + static_cast<size_t>(RING_BYTES) * RING +
                                       BARRIERS * sizeof(uint64_t);
  static_assert(BN == 64 || BN == 128 || BN == 256, "wgmma wrappers exist for n64, n128 and n256");
  static_assert(BK * Operand::BYTES == 128 && BK % Operand::K_PER_MMA == 0, "a stage is whole wgmmas of one swizzle row");
  static_assert(BN <= 256, "a TMA box is at most 256 rows");
  static_assert(SMEM_BYTES <= 227 * 1024, "more shared memory than a block may have on sm_90");
  static_assert(PROMOTE >= 0 && (PROMOTE == 0 || SPLIT), "promotion is part of the 3xTF32 path");
  static_assert(!PRESPLIT || SPLIT, "pre-split operands are a 3xTF32 path");
  static_assert(!SPLIT || std::is_same_v<Operand, Tf32Operand>, "3xTF32 splits fp32 operands");
};
// The configurations of fp32 operands (the rungs and the drop-ins): a type of its own, so that their
// kernels keep their names.
template <int BN_, int STAGES_, bool SPLIT_, int PROMOTE_, bool PRESPLIT_ = false>
struct Config : ConfigOf<Tf32Operand, BN_, STAGES_, SPLIT_, PROMOTE_, PRESPLIT_> {};

// The two configurations the rungs run (and the whole-model kernels with them):
// rung 9, TF32: block 128 x 256, 4 stages of 48 KB;
using Tf32Config = Config</*BN*/ 256, /*STAGES*/ 4, /*SPLIT*/ false, /*PROMOTE*/ 0>;
// rung 10, 3xTF32 on pre-split operands: block 128 x 128 (the promoted sums double the
// accumulators), 3 stages of four boxes (x big, w big, x small, w small: 64 KB each), promotion
// every PROMOTE k tiles.
constexpr int PROMOTE_K = 256;  // k values per promoted chunk (gemm_10_3xtf32.cu measures the choice)
template <int PROMOTE = PROMOTE_K / BK>
using PresplitConfig = Config</*BN*/ 128, /*STAGES*/ 3, /*SPLIT*/ true, PROMOTE, /*PRESPLIT*/ true>;
// 3xTF32 with no pass over w (SplitW3xTf32Mainloop): Config's pre-split layout less w's small box,
// whose parts a ring of 3 w-sized buffers holds instead.
template <int BN_, int STAGES_, int PROMOTE_ = PROMOTE_K / BK>
struct SplitWConfig : Config<BN_, STAGES_, true, PROMOTE_, true> {
  using Base = Config<BN_, STAGES_, true, PROMOTE_, true>;
  using Mainloop = SplitW3xTf32Mainloop;
  static constexpr bool LOADS_W_SMALL = false;
  static constexpr int STAGE_BYTES = 2 * Base::A_BYTES + Base::B_BYTES;  // [x][w][x small]
  static constexpr int RING = 3, RING_BYTES = Base::B_BYTES;
  static constexpr size_t SMEM_BYTES = 1024 + static_cast<size_t>(STAGE_BYTES) * STAGES_ +
                                       static_cast<size_t>(RING_BYTES) * RING + Base::BARRIERS * sizeof(uint64_t);
  static_assert(SMEM_BYTES <= 227 * 1024, "more shared memory than a block may have on sm_90");
};
// 16-bit operands (bf16 or fp16: Bf16Operand, Fp16Operand) on the TF32 rung's schedule and main loop,
// block 128 x BN: the same bytes per stage (64 values of k per row), 4 stages at width 256.
template <class Operand, int BN_ = 256, int STAGES_ = 4>
using Half16Config = ConfigOf<Operand, BN_, STAGES_, /*SPLIT*/ false, /*PROMOTE*/ 0, /*PRESPLIT*/ false>;
// 65-256 rows of x (common/gemm_dispatch.cuh's NARROW schedule, at the width narrow_width picks, 64
// or 128): tiles narrow enough that the few block rows still give every SM work. TF32: 6 stages;
// 3xTF32: w's small parts made in the kernel, 4 stages at width 64 and 3 at 128 (what fits beside the
// ring). Measured against the wide tiles and cuBLAS: experiments/gemm_schedules/README.md.
template <int BN_>
using Tf32NarrowConfig = Config<BN_, /*STAGES*/ 6, /*SPLIT*/ false, /*PROMOTE*/ 0>;
template <int BN_, int PROMOTE_ = PROMOTE_K / BK>
using SplitWNarrowConfig = SplitWConfig<BN_, /*STAGES*/ BN_ == 64 ? 4 : 3, PROMOTE_>;
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

// BM x BN tiles of out, in the order of C::Scheduler (persistent blocks over a grouped raster: the
// launcher's grid is the blocks that fit on the device at once, or fewer when there are fewer tiles).
//
// Shared memory: STAGES stages, each [x tile: 128 rows x 128 bytes][w tile: BN rows x 128 bytes],
// exactly as TMA writes them with the 128-byte swizzle (16-byte chunk c of row r stored at chunk
// c ^ (r % 8): the 8 rows of an atom spread any column over all banks), which is also the layout
// the wgmma descriptors describe. SPLIT adds RING buffers of the same size for the small parts.
// Then the barriers: full[s] (the producer's arrival + TMA's bytes) and empty[s] (one arrival per
// consumer warp group once its wgmmas no longer read stage s).
//
// Producer (warp group 0, one thread): for each k tile, wait until its stage is empty, announce
// the bytes, issue the TMA loads. Out-of-bounds rows and k are zero-filled by TMA, so the last,
// partial tiles in M, N and K need no code. The k tiles are counted over all of the block's
// tiles (`it`), so the producer runs on into the next tile while the consumers are still in the
// last one's epilogue: the ring is full again when they come back.
//
// Consumers (warp groups 1 and 2, rows 64c .. 64c + 63 of the tile): for each k tile, wait until
// its stage is full, then take C::Mainloop's step. Tf32Mainloop's: issue 4 wgmma m64nBNk8 (k = 0,
// 8, 16, 24: the descriptors advance 32 bytes), commit them as one group, and wait until at most
// this group is running, i.e. the previous k tile's group is done: its stage goes back to the
// producer. The tensor core thus always has the next group queued behind the running one. The
// tile's last stage goes back once its wgmmas are done, before the epilogue.
//
// SPLIT (3xTF32, Split3xTf32Mainloop), split in shared memory (PRESPLIT false): after a stage lands,
// the 256 consumer threads split it in place, element by element: big (round to nearest TF32) over
// the raw value, small (the rest, rounded) into ring buffer it % 3 at the same offset. The split is elementwise, so the swizzled layout carries over
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
                      const Epi epi, int M, int N, int K) {
  // tmap_x and tmap_w: the raw operands, or their big parts under PRESPLIT; tmap_xs and tmap_ws:
  // the small parts under PRESPLIT, unused otherwise.
  extern __shared__ unsigned char smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes and TMA and wgmma compute it from the address
  // bits, so every tile must start on a 1024-byte boundary: align the base (SMEM_BYTES has room).
  unsigned char* smem = smem_raw + ((1024 - (hopper::smem_addr(smem_raw) & 1023)) & 1023);
  const Stages<C> st{smem};
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + C::STAGES * C::STAGE_BYTES + C::RING * C::RING_BYTES);
  uint64_t* empty = full + C::STAGES;
  float* epi_smem = reinterpret_cast<float*>(full + C::BARRIERS);  // Epi::smem_floats<C>() floats

  // The tiles this block computes, as the scheduler deals them out: the producer and the consumers
  // walk the same sequence.
  const typename C::Scheduler tiles(M, N);
  const int units = tiles.units;
  const int first_unit = tiles.first();
  const int unit_step = tiles.step();
  const int k_tiles = (K + C::BK - 1) / C::BK;
  const int wg = threadIdx.x / 128;

  init_ring(full, empty, C::STAGES);

  if (wg == 0) {
    // ---- producer ----
    hopper::setmaxnreg_dec<PRODUCER_REGS>();
    if (threadIdx.x == 0) {
      hopper::tma_prefetch_descriptor(&tmap_x);
      hopper::tma_prefetch_descriptor(&tmap_w);
      if constexpr (C::PRESPLIT) {
        hopper::tma_prefetch_descriptor(&tmap_xs);
        if constexpr (C::LOADS_W_SMALL) hopper::tma_prefetch_descriptor(&tmap_ws);
      }
      // w's tile, BN rows from row n0.
      auto load_w = [&](unsigned char* dst, const CUtensorMap* map, uint64_t* bar, int k, int n0) {
        hopper::tma_load_2d(dst, map, bar, k, n0);
      };
      int it = 0;  // k tiles loaded so far, over all of this block's tiles
      for (int unit = first_unit; unit < units; unit += unit_step) {
        int m0, n0, tile_n;
        tiles.origin(unit, m0, n0, tile_n);
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % C::STAGES;
          if (it >= C::STAGES) {
            hopper::mbar_wait(&empty[s], (it / C::STAGES - 1) & 1);  // every consumer is done with round - 1
          }
          hopper::mbar_arrive_expect_tx(&full[s], C::STAGE_BYTES);  // full boxes, zero-filled parts included
          hopper::tma_load_2d(st.x(s), &tmap_x, &full[s], kt * C::BK, m0);
          load_w(st.w(s), &tmap_w, &full[s], kt * C::BK, n0);
          if constexpr (C::PRESPLIT) {
            hopper::tma_load_2d(st.x_small(s), &tmap_xs, &full[s], kt * C::BK, m0);
            if constexpr (C::LOADS_W_SMALL) load_w(st.w_small(s), &tmap_ws, &full[s], kt * C::BK, n0);
          }
        }
      }
    }
  } else {
    // ---- consumers ----
    hopper::setmaxnreg_inc<CONSUMER_REGS>();
    const int c = wg - 1;                  // rows 64c .. 64c + 63 of the tile
    const int ct = threadIdx.x - 128;      // 0..255 over both consumer warp groups
    constexpr int PARAMS = Epi::template smem_floats<C>();
    // Stage s goes back to the producer: one arrival per warp group on empty[s], from its thread 0.
    auto release = [&](int s) {
      if (threadIdx.x % 128 == 0) hopper::mbar_arrive(&empty[s]);
    };
    int it = 0;  // k tiles consumed so far, as the producer counts them
    for (int unit = first_unit; unit < units; unit += unit_step) {
      int m0, n0, tile_n;
      tiles.origin(unit, m0, n0, tile_n);
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
        const uint64_t a_big = hopper::wgmma_desc_sw128(st.x(s) + c * C::A_WG_BYTES);
        const uint64_t b_big = hopper::wgmma_desc_sw128(st.w(s));
        C::Mainloop::step(acc, total, st, a_big, b_big, s, it, kt, k_tiles, c, ct);  // TF32 or 3xTF32
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
      if constexpr (PARAMS > 0) {
        // Every consumer's wgmmas are done: the last tile's parameters are no longer read.
        hopper::named_barrier(2, 128 * CONSUMERS);
        params.store(epi_smem, ct);
        hopper::named_barrier(2, 128 * CONSUMERS);  // this tile's are all in place
      }
      const typename WriterOf<Epi>::type writer{epi.out, t.row, t.col, M, N};
      if constexpr (C::PROMOTE > 0) {
        epi.template finish<C>(total, ahead, t, epi_smem, writer);
      } else {
        epi.template finish<C>(acc, ahead, t, epi_smem, writer);
      }
    }
  }
}

}  // namespace gemm_wgmma
