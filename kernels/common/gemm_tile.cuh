// kernels/common/gemm_tile.cuh: the copy that the register-blocked GEMM rungs share (gemm_04,
// gemm_05, gemm_06; notebooks/03_tiled_gemm.ipynb): load_tile_kmajor, one slice of x or w from
// global memory into a shared tile, stored transposed (k-major). What every rung's launcher shares
// is in common/gemm_launch.cuh.

#pragma once

#include <cstdint>

#include "common/gemm_launch.cuh"

// Shared tiles are float tile[BK][ROWS + GEMM_SMEM_PAD]: k-major, the transpose of how x and w
// sit in global memory. The compute loop wants, at one k, a run of consecutive rows (a thread's
// 8 rows of x, a warp's 32 columns of w); k-major puts exactly those side by side, so they come
// out of shared memory as one contiguous, conflict-free read (or a few 16-byte ones). The copy
// from global memory, which must read along K to be coalesced, transposes on the way: it goes
// through a register anyway, so writing down a column instead of along a row costs nothing more.
//
// Why a pad of 4 floats per tile row: one warp of the copy writes 8 k-values of 4 rows. Unpadded,
// element (k, r) sits at word k * ROWS + r, and with ROWS a multiple of 32 the 8 k-values of a
// row all fall in one bank: 8-way conflicts. Padded, (k, r) is in bank (4k + r) % 32, and the
// warp's 32 writes hit 32 different banks. A pad of 4 rather than 1 keeps every tile row a
// multiple of 16 bytes long, so the compute loop's 16-byte reads (LDS.128) stay aligned.
constexpr int GEMM_SMEM_PAD = 4;

// Copies rows [row0, row0 + ROWS) x columns [k0, k0 + BK) of a row-major (rows, K) matrix into
// tile[k - k0][row - row0], zero where the row is past `rows` or the column past K, so partial
// edge tiles contribute nothing to the sum and no thread ever reads outside the matrix.
//
// Thread t copies column k0 + t % 8 (+ 8, + 16, ... up to BK) of rows row0 + t / 8 (+ THREADS / 8,
// ...). A warp's 32 threads thus read 8 consecutive k (32 bytes: one memory sector) of 4
// consecutive rows, so every sector a warp touches is used in full, and its shared-memory writes
// are conflict-free (see GEMM_SMEM_PAD).
template <int ROWS, int BK, int THREADS>
__device__ __forceinline__ void load_tile_kmajor(float (&tile)[BK][ROWS + GEMM_SMEM_PAD], const float* __restrict__ src,
                                                 int rows, int K, int row0, int k0, int tid) {
  constexpr int ROW_STEP = THREADS / 8;
  static_assert(BK % 8 == 0 && THREADS % 32 == 0 && ROWS % ROW_STEP == 0,
                "the threads must cover whole 8 (k) x THREADS / 8 (rows) blocks of the tile");
  const int kt = tid % 8;
  const int rt = tid / 8;
#pragma unroll
  for (int kh = 0; kh < BK; kh += 8) {
#pragma unroll
    for (int rh = 0; rh < ROWS; rh += ROW_STEP) {
      const int kk = kh + kt;
      const int rr = rh + rt;
      const int row = row0 + rr;
      const int k = k0 + kk;
      tile[kk][rr] = (row < rows && k < K) ? src[static_cast<int64_t>(row) * K + k] : 0.0f;
    }
  }
}
