// kernels/common/gemm_mixed_input.cuh: the mixed-input GEMM, x (M, K) in bfloat16 or float16 @ w (N, K) in
// float32 .T, w converted to x's dtype in registers on its way to the tensor cores and never written back:
// what torch.autocast computes as w.to(x.dtype) and then a 16-bit GEMM, without that conversion's pass over
// w (a read of 4 bytes and a write of 2 per weight, on every call). Each finished tile goes to an epilogue of
// common/gemm_wgmma.cuh's kind (StoreEpilogue, gemm_epilogue::GroupNormEpilogue) in the layout those take.
// The whole models run it under autocast at inference (fused_gemm_groupnorm.cu, the bounds in
// common/gemm_dispatch.cuh); experiments/bf16/mixed16.cu times it alone.
//
//   MixedOperand<Operand>     x's 16-bit kind: packing a float pair, the register-A wgmma m64n256k16
//   mixed_input_kernel        persistent blocks over out.T tiles, the main loop, the transposing epilogue
//   run_mixed_epilogue        the tensor maps and the launch
//
// Why w is the A operand. wgmma reads B from shared memory only; A may come from registers. Converting w in
// shared memory and handing wgmma the converted tile as B would cost about twice rung 11's shared-memory
// traffic (experiments/bf16/README.md counts it), so w is loaded from shared memory straight into A's
// register fragments, converted there, and the kernel computes out.T: a block's tile is BW = 128 channels
// (rows of w; 64 per consumer warp group, wgmma's m) by BX = 256 rows of x (wgmma's n), x's tile the B
// operand as in rung 11.
//
// Shared memory, per stage (3 stages, 64 KB each): w's float32 tile as two TMA boxes, k 0..31 and k 32..63
// of the stage, each BW rows of 128 bytes with the 128-byte swizzle (16-byte chunk c of row r at chunk
// c ^ r % 8); then x's tile, BX rows of 64 16-bit values (128 bytes) with the same swizzle, as rung 11's.
// After the stages: the barriers, then each consumer warp group's epilogue parameters.
//
// A's fragments (the register A of a 16-bit wgmma, mma.sync's m16n8k16 layout per warp): warp v of the
// group, lane (g, q) = (lane / 4, lane % 4), for the k16 step at k0: a0 = rows 16v + g, k0 + 2q and + 1;
// a1 = row + 8, same k; a2 = row 16v + g, k0 + 2q + 8 and + 9; a3 = row + 8, those k. Each pair is one float2
// in a single 16-byte chunk of the float32 tile, converted to a packed 16-bit pair (round to nearest even,
// as Tensor.to rounds). A warp's float2 loads touch each chunk position twice over its 8 rows: 2 wavefronts
// for 256 bytes, no conflict beyond the minimum.
//
// The register hazard. A wgmma reads its A registers asynchronously, until a wait says its group is done.
// Where an ordinary instruction writes a register that a wgmma still in flight reads, ptxas waits for every
// wgmma after each one (its C7513 "wgmma.mma_async instructions are serialized"). Double-buffering the
// fragments, so that the next k tile's could load while this one's wgmmas ran, got both buffers the same
// four registers at the 168 a thread has here (128 of them accumulators) and serialized every wgmma. So each
// k tile loads its four steps' fragments (16 registers), issues its four wgmmas as one group and waits for
// it before the next k tile's loads: the tensor cores idle for one warp group's loads per k tile (about a
// tenth of its 1,024 clocks of wgmma), while the other consumer warp group, out of step with it, keeps them
// busy.
//
// The epilogue. The accumulators hold out.T: lane (g, q) of warp v has channels 16v + g and + 8 of its warp
// group's 64, for rows 8j + 2q and + 1 of the tile's 256 (j = 0..31). The epilogues take out's own layout
// (rows on the lanes' g, a row's columns on a quad), where a GroupNorm group is one quad's registers; here a
// group of 16-64 channels would span the lanes of up to four warps. So each warp group turns its 64 x 256
// block around through shared memory, 64 rows of x at a time, into exactly what a 64 x 64 wgmma tile of out
// would have left in its registers, and hands each such chunk to the epilogue as a tile of width 64
// (ChunkConfig). A group of up to 64 channels then lies inside one warp group's 64: the kernel takes groups
// dividing 64 (its launcher's callers check). The buffer costs no shared memory of its own: it is the warp
// group's own rows of w (16 KB) in the tile's last stage, which nothing reads once its fragments are loaded;
// the warp group hands that stage back to the producer after the epilogue instead of after the main loop,
// and the producer runs on into the next tile on the other two stages meanwhile. The buffer is 64 rows of
// 64 floats in two 8 KB pieces (channels 0-31 and 32-63), the word of channel ch in row r at
// (ch % 32) ^ 8 * ((r ^ r / 4) % 4): the warp's stores (4 rows by 8 channels) and its float2 loads (a half
// warp's 4 rows by 8 channels) then each cover all 32 banks once.
// @arch: 9.0a (a kernel file including this says so)

#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/device_cache.cuh"
#include "common/gemm_launch.cuh"
#include "common/gemm_wgmma.cuh"

namespace gemm_mixed {

using gemm_wgmma::CONSUMER_REGS;
using gemm_wgmma::CONSUMERS;
using gemm_wgmma::GROUP_M;
using gemm_wgmma::PRODUCER_REGS;
using gemm_wgmma::THREADS;

constexpr int BW = 128;                            // channels (rows of w) per tile: 2 consumer warp groups x 64
constexpr int BX = 256;                            // rows of x per tile: wgmma's n
constexpr int BK = 64;                             // k per stage: one 128-byte row of x, two of w
constexpr int STAGES = 3;
constexpr int W_HALF_BYTES = BW * 128;             // one float32 box of w: k 32 wide
constexpr int W_BYTES = 2 * W_HALF_BYTES;          // 32 KB
constexpr int X_BYTES = BX * 128;                  // 32 KB
constexpr int STAGE_BYTES = W_BYTES + X_BYTES;     // 64 KB
constexpr int ACC = BX / 2;                        // accumulators per consumer thread: 64 x 256 / 128
constexpr int CHUNK = 64;                          // rows of x per epilogue chunk, channels per warp group
constexpr size_t SMEM_BYTES = 1024 + static_cast<size_t>(STAGE_BYTES) * STAGES + 2 * STAGES * sizeof(uint64_t);

// What an epilogue reads of its Config, for one chunk: a tile CHUNK columns (channels) wide, a warp
// group's 64 rows of it in 32 accumulators a thread, as a wgmma m64n64 would leave them.
struct ChunkConfig {
  static constexpr int BN = CHUNK;
  static constexpr int ACC = CHUNK / 2;
};

// x's 16-bit kind (gemm_wgmma's Bf16Operand or Fp16Operand): a float pair packed as two values of it (the
// lower k in the low half), and the register-A wgmma m64n256k16 on it.
template <class Operand>
struct MixedOperand;

#define GEMM_MIXED_RS_WGMMA(INSTR)                                                                                \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n" INSTR " {" HOPPER_WGMMA_REGS_128 "}, "              \
               "{%128, %129, %130, %131}, %132, p, 1, 1, 0;\n}\n"                                                \
               : HOPPER_WGMMA_OUTS_128                                                                          \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d))

template <>
struct MixedOperand<gemm_wgmma::Bf16Operand> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&p);
  }
  static __device__ __forceinline__ void mma(float (&d)[ACC], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
    GEMM_MIXED_RS_WGMMA("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16");
  }
};

template <>
struct MixedOperand<gemm_wgmma::Fp16Operand> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __half2 p = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&p);
  }
  static __device__ __forceinline__ void mma(float (&d)[ACC], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
    GEMM_MIXED_RS_WGMMA("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16");
  }
};

#undef GEMM_MIXED_RS_WGMMA

// An empty asm on each fragment register: the compiler may not move the fragments' loads across it.
template <int N>
__device__ __forceinline__ void fence_fragments(uint32_t (&a)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(a[i][j])::"memory");
  }
}

// The float2 at (row r, k) of a stage's float32 w tile (k even, 0..63): box k / 32, chunk (k % 32) / 4 swizzled.
__device__ __forceinline__ float2 w_pair(const unsigned char* w_tile, int r, int k) {
  const int half = k / 32;
  const int kk = k % 32;
  const int chunk = (kk / 4) ^ (r % 8);
  return *reinterpret_cast<const float2*>(w_tile + half * W_HALF_BYTES + r * 128 + chunk * 16 + (kk % 4) * 4);
}

// One k tile of a consumer warp group: its four k16 steps' fragments into a (rows r0 and r0 + 8 of the tile),
// converted, then four wgmmas reading them and x's tile, committed as one group and waited for (above).
template <class Operand>
__device__ __forceinline__ void k_tile(float (&acc)[ACC], const unsigned char* stage, int r0, int q, int first) {
  uint32_t a[4][4];
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const int k0 = 16 * s + 2 * q;
    const float2 v0 = w_pair(stage, r0, k0);
    const float2 v1 = w_pair(stage, r0 + 8, k0);
    const float2 v2 = w_pair(stage, r0, k0 + 8);
    const float2 v3 = w_pair(stage, r0 + 8, k0 + 8);
    a[s][0] = MixedOperand<Operand>::pack(v0.x, v0.y);
    a[s][1] = MixedOperand<Operand>::pack(v1.x, v1.y);
    a[s][2] = MixedOperand<Operand>::pack(v2.x, v2.y);
    a[s][3] = MixedOperand<Operand>::pack(v3.x, v3.y);
  }
  const uint64_t desc_x = hopper::wgmma_desc_sw128(stage + W_BYTES);
  fence_fragments(a);
  hopper::fence_operands(acc);
  hopper::wgmma_fence();
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    MixedOperand<Operand>::mma(acc, a[s], desc_x + s * hopper::WGMMA_DESC_K8_STEP, s == 0 && first ? 0 : 1);
  }
  hopper::wgmma_commit();
  hopper::wgmma_wait<0>();  // the fragments are free again (above)
  hopper::fence_operands(acc);
  fence_fragments(a);
}

// The transposing buffer (above): the float at (row r, channel ch) of a chunk, r and ch in 0..63, in the buffer
// whose first piece starts at `buffer` (the second W_HALF_BYTES after it).
__device__ __forceinline__ float* chunk_float(float* buffer, int r, int ch) {
  return buffer + (ch / 32) * (W_HALF_BYTES / 4) + r * 32 + ((ch % 32) ^ (8 * ((r ^ (r / 4)) % 4)));
}

// out.T tiles, BW channels x BX rows of x, over persistent blocks (PersistentTiles with x's rows as its M
// and the channels as its N), each finished by `epi` 64 rows by 64 channels at a time. Warp group 0
// produces (one thread: TMA), 1 and 2 consume: channels 64c .. 64c + 63 of the tile.
template <class Operand, class Epi>
__global__ void __launch_bounds__(THREADS, 1)
    mixed_input_kernel(const __grid_constant__ CUtensorMap tmap_w, const __grid_constant__ CUtensorMap tmap_x,
                       const Epi epi, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (hopper::smem_addr(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + STAGES * STAGE_BYTES);
  uint64_t* empty = full + STAGES;
  constexpr int PARAMS = Epi::template smem_floats<ChunkConfig>();  // per consumer warp group
  float* epi_smem = reinterpret_cast<float*>(empty + STAGES);
  const gemm_wgmma::PersistentTiles<BX, BW, GROUP_M> tiles(M, N);
  const int k_tiles = (K + BK - 1) / BK;
  const int wg = threadIdx.x / 128;

  gemm_wgmma::init_ring(full, empty, STAGES);

  if (wg == 0) {
    hopper::setmaxnreg_dec<PRODUCER_REGS>();
    if (threadIdx.x == 0) {
      hopper::tma_prefetch_descriptor(&tmap_w);
      hopper::tma_prefetch_descriptor(&tmap_x);
      int it = 0;
      for (int unit = tiles.first(); unit < tiles.units; unit += tiles.step()) {
        int m0, n0, tile_n;
        tiles.origin(unit, m0, n0, tile_n);
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % STAGES;
          if (it >= STAGES) hopper::mbar_wait(&empty[s], (it / STAGES - 1) & 1);
          unsigned char* stage = smem + s * STAGE_BYTES;
          hopper::mbar_arrive_expect_tx(&full[s], STAGE_BYTES);
          hopper::tma_load_2d(stage, &tmap_w, &full[s], kt * BK, n0);
          hopper::tma_load_2d(stage + W_HALF_BYTES, &tmap_w, &full[s], kt * BK + BK / 2, n0);
          hopper::tma_load_2d(stage + W_BYTES, &tmap_x, &full[s], kt * BK, m0);
        }
      }
    }
  } else {
    hopper::setmaxnreg_inc<CONSUMER_REGS>();
    const int c = wg - 1;
    const int wt = static_cast<int>(threadIdx.x % 128);  // the thread in its warp group
    const int lane = wt % 32;
    const int warp = wt / 32;
    const int g = lane / 4, q = lane % 4;
    const int r0 = 64 * c + 16 * warp + g;  // this thread's first row of the w tile (and of out.T's tile)
    const int barrier = 3 + c;             // the warp group's named barrier (1 and 2: the engine's)
    float* params_smem = epi_smem + c * PARAMS;
    int it = 0;
    for (int unit = tiles.first(); unit < tiles.units; unit += tiles.step()) {
      int m0, n0, tile_n;
      tiles.origin(unit, m0, n0, tile_n);
      const int nc = n0 + CHUNK * c;  // this warp group's first channel
      gemm_wgmma::TileParams<ChunkConfig, Epi, 128> params;
      params.load(epi, wt, nc, N);
      float acc[ACC];
#pragma unroll
      for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;
      // Each k tile: wait for its stage, load, convert and issue, wait for the group, hand the stage back;
      // the last one's stage is kept for the epilogue.
      int s = 0;
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        s = it % STAGES;
        hopper::mbar_wait(&full[s], (it / STAGES) & 1);
        k_tile<Operand>(acc, smem + s * STAGE_BYTES, r0, q, kt == 0);
        if (kt + 1 < k_tiles && wt == 0) hopper::mbar_arrive(&empty[s]);
      }
      // This warp group's rows of w in the kept stage, in both boxes: the two 8 KB pieces of the transposing
      // buffer.
      float* buffer = reinterpret_cast<float*>(smem + s * STAGE_BYTES + CHUNK * c * 128);
      if constexpr (PARAMS > 0) params.store(params_smem, wt);  // the last tile's were read before its release
      // acc[4j + 2h + e] = out.T[nc + 16 warp + g + 8h][m0 + 8j + 2q + e]
#pragma unroll
      for (int chunk = 0; chunk < BX / CHUNK; ++chunk) {
        if (m0 + CHUNK * chunk >= M) break;  // the same for the whole warp group
        // Before the first chunk: every warp's fragment loads from these rows are done (a warp past its last
        // wgmma group knows its own are, not the others': racecheck saw the difference); before the others:
        // the last chunk's loads from the buffer are.
        hopper::named_barrier(barrier, 128);
#pragma unroll
        for (int jj = 0; jj < CHUNK / 8; ++jj) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int r = 8 * jj + 2 * q + e, ch = 16 * warp + g + 8 * h;
              *chunk_float(buffer, r, ch) = acc[4 * (8 * chunk + jj) + 2 * h + e];
            }
          }
        }
        hopper::named_barrier(barrier, 128);  // the chunk (and, first, the parameters) in place
        // As a wgmma m64n64 tile of out: lane (g, q) of warp v holds rows 16v + g and + 8, channels 8j + 2q
        // and + 1, value 4j + 2h + e.
        float tile[ChunkConfig::ACC];
#pragma unroll
        for (int j = 0; j < CHUNK / 8; ++j) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = 16 * warp + g + 8 * h, ch = 8 * j + 2 * q;
            const float2 v = *reinterpret_cast<const float2*>(chunk_float(buffer, r, ch));
            tile[4 * j + 2 * h] = v.x;
            tile[4 * j + 2 * h + 1] = v.y;
          }
        }
        const gemm_wgmma::EpilogueTile t{m0 + CHUNK * chunk + 16 * warp + g, nc + 2 * q, nc, nc / CHUNK, M, N};
        const auto ahead = epi.template ahead<ChunkConfig>(t);
        const typename gemm_wgmma::WriterOf<Epi>::type writer{epi.out, t.row, t.col, M, N};
        epi.template finish<ChunkConfig>(tile, ahead, t, params_smem, writer);
      }
      // The stage goes back once every thread of the warp group is done with it (the buffer and the
      // parameters), its ordinary stores ordered before the producer's next TMA write there.
      hopper::fence_proxy_async();
      hopper::named_barrier(barrier, 128);
      if (wt == 0) hopper::mbar_arrive(&empty[s]);
    }
  }
}

// Computes x @ w.T for x (M, K) of Operand's 16-bit element and w (N, K) float32 and hands it to `epi` in
// tiles of 64 x 64, as common/gemm_wgmma.cuh's kernel hands its tiles over (a tile's column index, for
// an epilogue that keeps one value per row and tile, counts 64-channel tiles: mixed_tiles_n). Both
// contiguous, 16-byte aligned, K % 8 == 0, M, N, K > 0; epi's groups, if any, divide 64 (the caller's
// checks). rows: the rows of out to compute (the first of x's, where x was padded to whole tiles of BX
// rows: gemm_wgmma::rows_padded_to_tiles), or -1 for all of x's.
template <class Operand, class Epi>
void run_mixed_epilogue(const torch::Tensor& x, const torch::Tensor& w, const Epi& epi, int64_t rows = -1) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t M = rows < 0 ? x.size(0) : rows, N = w.size(0), K = x.size(1);
  const CUtensorMap tmap_w = hopper::make_tensor_map_2d(w.data_ptr<float>(), N, K, BW, BK / 2,
                                                        CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  const CUtensorMap tmap_x = hopper::make_tensor_map_2d(x.data_ptr<typename Operand::Element>(), x.size(0), K, BX,
                                                        BK, Operand::TMA_TYPE);
  auto kernel = mixed_input_kernel<Operand, Epi>;
  constexpr size_t smem = SMEM_BYTES + CONSUMERS * Epi::template smem_floats<ChunkConfig>() * sizeof(float);
  static_assert(smem <= 227 * 1024, "more shared memory than a block may have on sm_90");
  allow_dynamic_smem(kernel, smem);
  using Tiles = gemm_wgmma::PersistentTiles<BX, BW, GROUP_M>;
  const int64_t tiles = Tiles::tiles(M, N);
  TORCH_CHECK(tiles <= INT32_MAX, "the output has ", num(tiles), " tiles of ", num(BX), " x ", num(BW),
              ", more than a grid holds (", num(INT32_MAX), ")");
  const int64_t blocks = Tiles::blocks(tiles, max_active_clusters(kernel, 1, THREADS, smem));
  kernel<<<static_cast<unsigned>(blocks), THREADS, smem, at::cuda::getCurrentCUDAStream()>>>(
      tmap_w, tmap_x, epi, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K));
  LAUNCH_CHECK();
}

// The column tiles of run_mixed_epilogue's output for N channels: an epilogue keeping one value per row and
// tile keeps this many per row.
inline int64_t mixed_tiles_n(int64_t N) { return (N + CHUNK - 1) / CHUNK; }

}  // namespace gemm_mixed
