// kernels/common/gemm_tile.cuh: what the register-blocked GEMM rungs share (gemm_04, gemm_05,
// gemm_06; notebooks/03_tiled_gemm.ipynb).
//
// All of them compute out = x @ w.T with x (M, K) and w (N, K) row-major: nn.Linear's layout,
// where BOTH operands are contiguous along K. Each block computes one tile of `out` by walking
// along K one slice of BK columns at a time: it copies the x rows and the w rows of its tile,
// BK values each, into shared memory, synchronises, and multiplies from there.
//
// Here lives, once:
//   load_tile_kmajor   the global -> shared copy of one such slice, stored TRANSPOSED (k-major);
//   gemm_new_output    the launcher's input checks and the output allocation;
//   gemm_grid          the grid: one block per output tile, numbered M tile first.

#pragma once

#include <cstdint>

#include "common/check.cuh"

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
// multiple of 16 bytes long, so 16-byte reads of 4 consecutive rows stay aligned.
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

// Tile arithmetic in the kernels is 32-bit (k0 + BK, M + BM - 1, ...): keeping every dimension
// this far below 2^31 means none of it can overflow. Products such as row * K are 64-bit.
constexpr int64_t GEMM_MAX_DIM = INT32_MAX - 1024;

// Checks x (M, K) and w (N, K) and returns the (M, N) output on their device: zeros when K == 0
// (every element is an empty sum), uninitialised otherwise (the kernel writes every element).
inline torch::Tensor gemm_new_output(const torch::Tensor& x, const torch::Tensor& w) {
  CHECK_FLOAT_CUDA_INPUT(x);
  CHECK_FLOAT_CUDA_INPUT(w);
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2, "x and w must be 2-D, x (M, K) and w (N, K), got x ", shape_string(x),
              " and w ", shape_string(w));
  TORCH_CHECK(x.size(1) == w.size(1), "x (M, K) and w (N, K) must have the same K, got x ", shape_string(x),
              " and w ", shape_string(w));
  CHECK_SAME_DEVICE(x, w);
  TORCH_CHECK(x.size(0) <= GEMM_MAX_DIM && w.size(0) <= GEMM_MAX_DIM && x.size(1) <= GEMM_MAX_DIM,
              "M, N and K must each be at most ", GEMM_MAX_DIM, ", got x ", shape_string(x), " and w ", shape_string(w));
  const auto options = x.options();
  return x.size(1) == 0 ? torch::zeros({x.size(0), w.size(0)}, options) : torch::empty({x.size(0), w.size(0)}, options);
}

// One block per BM x BN output tile, in a 1-D grid: gridDim.x goes to 2^31 - 1 while gridDim.y
// stops at 65535, so any M and N fit. Block b takes M tile b % tiles_m of N tile b / tiles_m:
// consecutive blocks, which run at the same time, share one tile of w (the larger operand at the
// problems' shape: 8192 x 8192) and read it from L2 rather than each from DRAM.
inline dim3 gemm_grid(int64_t M, int64_t N, int BM, int BN) {
  const int64_t tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
  TORCH_CHECK(tiles <= INT32_MAX, "the output has ", tiles, " tiles of ", BM, " x ", BN, ", more than a grid holds (",
              INT32_MAX, ")");
  return dim3(static_cast<unsigned int>(tiles));
}
