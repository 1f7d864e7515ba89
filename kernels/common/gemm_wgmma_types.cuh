// kernels/common/gemm_wgmma_types.cuh: the parts the Hopper GEMM (common/gemm_wgmma.cuh) is built
// from, each a type of its own, in the manner of CUTLASS's collectives and tile schedulers:
//
//   Tf32Operand        the operand traits: the element the tensor cores read, its size, the k of one
//   Bf16Operand,       wgmma, the k of one pipeline stage, the TMA element type, and which wgmma to
//   Fp16Operand        issue for a block tile's width;
//   PersistentTiles    the tile scheduler: which BM x BN tiles of out a block computes and in which
//                      order (persistent blocks over a grouped raster), on the device for the producer
//                      and the consumers alike, and on the host how many blocks to launch.
//
// A Config (common/gemm_wgmma.cuh) names its operand, its scheduler and its main loop (the main loops,
// TF32 and 3xTF32, live beside the kernel there), so another element type is another trait and a main
// loop for it, and another schedule another scheduler, the rest of the kernel untouched. sm_90a only,
// like the kernel.

#pragma once

#include <algorithm>
#include <cstdint>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <cuda.h>  // CUtensorMapDataType

#include "common/hopper.cuh"
#include "common/tensor_core.cuh"

namespace gemm_wgmma {

// ---- the operand ---------------------------------------------------------------------------------

// float32 in memory, TF32 in the tensor cores (they read a 32-bit register and ignore its low 13
// bits; common/tensor_core.cuh). wgmma's .tf32 kind multiplies k = 8 per instruction, and both
// operands must be K-major. One stage holds 128 bytes of k per row, one row of the 128-byte swizzle.
struct Tf32Operand {
  using Element = float;
  static constexpr int BYTES = 4;                  // one element in memory
  static constexpr int K_PER_MMA = 8;              // k of one wgmma m64nNk8
  static constexpr int K_TILE = 128 / BYTES;       // k per stage: 32, one swizzle row
  static constexpr uint64_t DESC_STEP = K_PER_MMA * BYTES / 16;  // a descriptor's advance per wgmma (16-byte units)
  static constexpr CUtensorMapDataType TMA_TYPE = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;

  // d[N] += a (64 x 8) . b (8 x 2N) from shared memory (the descriptors), or d = a . b with scale_d 0:
  // N = 32 accumulators per thread is a 64 x 64 tile (n64), N = 64 a 64 x 128 one (n128), N = 128 a
  // 64 x 256 one (n256).
  template <int N>
  static __device__ __forceinline__ void mma(float (&d)[N], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    static_assert(N == 32 || N == 64 || N == 128, "wgmma wrappers exist for n64, n128 and n256");
    if constexpr (N == 32) {
      hopper::wgmma_m64n64k8_tf32(d, desc_a, desc_b, scale_d);
    } else if constexpr (N == 64) {
      hopper::wgmma_m64n128k8_tf32(d, desc_a, desc_b, scale_d);
    } else {
      hopper::wgmma_m64n256k8_tf32(d, desc_a, desc_b, scale_d);
    }
  }
};

// bf16 or fp16 in memory and in the tensor cores, which read them exactly: wgmma's .bf16 and .f16
// kinds multiply k = 16 per instruction into fp32 accumulators, both operands K-major. One stage holds
// 128 bytes of k per row (64 values), one row of the 128-byte swizzle as for Tf32Operand, and a k16
// step is the same 32 bytes of a row as TF32's k8 step: the kernel, its ring and its descriptors are
// unchanged, only the instruction differs.
template <class T, CUtensorMapDataType TYPE, bool BF16>
struct Half16Operand {
  using Element = T;
  static constexpr int BYTES = 2;
  static constexpr int K_PER_MMA = 16;             // k of one wgmma m64nNk16
  static constexpr int K_TILE = 128 / BYTES;       // k per stage: 64, one swizzle row
  static constexpr uint64_t DESC_STEP = K_PER_MMA * BYTES / 16;
  static constexpr CUtensorMapDataType TMA_TYPE = TYPE;

  template <int N>
  static __device__ __forceinline__ void mma(float (&d)[N], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    static_assert(N == 32 || N == 64 || N == 128, "wgmma wrappers exist for n64, n128 and n256");
    if constexpr (BF16) {
      if constexpr (N == 32) hopper::wgmma_m64n64k16_bf16(d, desc_a, desc_b, scale_d);
      else if constexpr (N == 64) hopper::wgmma_m64n128k16_bf16(d, desc_a, desc_b, scale_d);
      else hopper::wgmma_m64n256k16_bf16(d, desc_a, desc_b, scale_d);
    } else {
      if constexpr (N == 32) hopper::wgmma_m64n64k16_f16(d, desc_a, desc_b, scale_d);
      else if constexpr (N == 64) hopper::wgmma_m64n128k16_f16(d, desc_a, desc_b, scale_d);
      else hopper::wgmma_m64n256k16_f16(d, desc_a, desc_b, scale_d);
    }
  }
};
using Bf16Operand = Half16Operand<c10::BFloat16, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, true>;
using Fp16Operand = Half16Operand<c10::Half, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, false>;

// ---- the tile scheduler --------------------------------------------------------------------------

// The schedule, as CUTLASS's Hopper GEMMs name theirs (KernelTmaWarpSpecializedPersistent): one
// block per SM looping over tiles, so that the producer loads the next tile's first stages while
// the consumers finish the last one. Tiles come in tc::grouped_tile's order (GROUP M tiles per
// group, so that the blocks resident at once share their rows of x and of w in L2): block b takes
// the tiles b, b + gridDim.x, ... until none is left.
template <int BM, int BN, int GROUP_M>
struct PersistentTiles {
  int tiles_m, tiles_n, units;

  __device__ __forceinline__ PersistentTiles(int M, int N)
      : tiles_m((M + BM - 1) / BM), tiles_n((N + BN - 1) / BN), units(tiles_m * tiles_n) {}

  // The block's first tile and the step to its next; it has tiles while the number is below `units`.
  __device__ __forceinline__ int first() const { return static_cast<int>(blockIdx.x); }
  __device__ __forceinline__ int step() const { return static_cast<int>(gridDim.x); }

  // Tile `unit`'s first row and column of out, and its column of tiles (an epilogue that keeps one
  // value per row and tile, a row minimum, writes it at tile_n).
  __device__ __forceinline__ void origin(int unit, int& m0, int& n0, int& tile_n) const {
    int tile_m;
    tc::grouped_tile(unit, tiles_m, tiles_n, GROUP_M, tile_m, tile_n);
    m0 = tile_m * BM;
    n0 = tile_n * BN;
  }

  // The host's side: how many tiles out (M, N) has, and how many blocks to launch for them: as many
  // as run at once (resident, asked of the device for this kernel), or one per tile when there are
  // fewer tiles.
  static int64_t tiles(int64_t M, int64_t N) { return (M + BM - 1) / BM * ((N + BN - 1) / BN); }
  static int64_t blocks(int64_t tiles, int64_t resident) { return std::min<int64_t>(tiles, resident); }
};

}  // namespace gemm_wgmma
