// kernels/common/gemm_mma.cuh: the mma.sync tensor-core GEMM of rungs 8 and 10 (and rung 9's
// fallback), written once: gemm_08_mma_tf32.cu explains it, gemm_10_3xtf32.cu runs it with the
// 3xTF32 split and promoted accumulation, gemm_09_wgmma_tf32.cu calls it for the inputs TMA cannot
// describe (K % 4 != 0, or a view whose data does not start on a 16-byte boundary).
//
//   Config<...>        block tile, slice depth, warp grid, pipeline depth, blocks per SM;
//   gemm_mma_block     one block's tile, for a Config, a load path and a Math (TF32 or 3xTF32);
//   gemm_mma_kernel    the kernel around it;
//   run                launches it into an output the caller allocated and checked;
//   gemm_mma           the whole launcher: checks, output, launch.
//
// out = x @ w.T, x (M, K) and w (N, K) row-major (nn.Linear's layout). Both operands are
// contiguous along K, which is the layout mma.sync's ".row.col" wants: A (x) row-major, B (w^T)
// column-major, i.e. w as it is.

#pragma once

#include <cstdint>

#include "common/device_cache.cuh"
#include "common/gemm_launch.cuh"
#include "common/tensor_core.cuh"

namespace gemm_mma {

// Shared tiles are float tile[rows][BK + PAD]: k-contiguous, as in global memory (no transpose:
// the fragments want runs along k). A pad of 4 floats makes each row 144 bytes at BK = 32, so 8
// consecutive rows start in banks 0, 4, 8, ..., 28: an ldmatrix 8 x 4 block (8 rows x 16 bytes)
// covers all 32 banks once, and the 16-byte cp.async writes of 8 lanes filling one row's 128
// bytes are conflict-free too. Unpadded, every row would start in bank 0 and each ldmatrix block
// would be an 8-way conflict.
constexpr int PAD = 4;
constexpr int GROUP_M = 16;  // tc::grouped_tile: M tiles per group of the block raster

template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_, int MIN_BLOCKS_>
struct Config {
  static constexpr int BM = BM_;          // block tile: BM x BN outputs
  static constexpr int BN = BN_;
  static constexpr int BK = BK_;          // k values per slice (per pipeline stage)
  static constexpr int WARPS_M = WARPS_M_;  // warp grid; each warp owns a WM x WN piece
  static constexpr int WARPS_N = WARPS_N_;
  static constexpr int STAGES = STAGES_;  // slices in flight: STAGES - 1 loading while one is computed
  static constexpr int MIN_BLOCKS = MIN_BLOCKS_;  // __launch_bounds__: caps registers at 64K / (THREADS * this)
  static constexpr int THREADS = WARPS_M * WARPS_N * 32;
  static constexpr int WM = BM / WARPS_M;
  static constexpr int WN = BN / WARPS_N;
  static constexpr int MT = WM / 16;  // m16 tiles per warp
  static constexpr int NT = WN / 8;   // n8 tiles per warp
  static constexpr int LD = BK + PAD;  // floats from one tile row to the next
  static constexpr int STAGE_FLOATS = (BM + BN) * LD;
  static constexpr size_t SMEM_BYTES = sizeof(float) * STAGE_FLOATS * STAGES;
  static_assert(STAGES >= 2, "a pipeline needs one stage being computed and at least one being filled");
  static_assert(BK % 8 == 0 && WM % 16 == 0 && WN % 16 == 0, "whole m16 x k8 A and pairs of n8 x k8 B fragments");
  static_assert(THREADS % (BK / 4) == 0 && BM % (THREADS / (BK / 4)) == 0 && BN % (THREADS / (BK / 4)) == 0,
                "the 16-byte copy covers whole tiles");
  static_assert(THREADS % BK == 0 && BM % (THREADS / BK) == 0 && BN % (THREADS / BK) == 0,
                "the 4-byte copy covers whole tiles");
};

// The two configurations the rungs use (gemm_08 and gemm_10 explain the choices):
//   TF32 (rung 8, and rung 9 for inputs TMA cannot describe): 128 x 128 tiles, BK = 32, 8 warps of
//     64 x 32, 3 stages (108 KB), 2 blocks per SM (at most 128 registers per thread);
//   3xTF32 (rung 10's mma.sync path): the same tiles and warps, 4 stages (144 KB), 1 block per SM
//     (the promoted sums and the split fragments need ~220 registers per thread).
using Tf32Config = Config<128, 128, 32, 2, 4, 3, 2>;
using Split3Config = Config<128, 128, 32, 2, 4, 4, 1>;

// Copies rows [row0, row0 + ROWS) x columns [k0, k0 + BK) of a row-major (rows, K) matrix into
// tile[row - row0][k - k0], zero past the matrix's edge, by cp.async (no registers on the way).
//   VEC (K % 4 == 0, 16-byte-aligned base): 16 bytes per copy; lane c of 8 takes floats 4c..4c+3
//     of a row, so 8 lanes read one row's 128 bytes (whole sectors) and write it conflict-free.
//     K % 4 == 0 makes each 4-float chunk entirely inside or entirely outside the matrix.
//   otherwise: 4 bytes per copy, a warp per row (32 consecutive floats), any K and any alignment.
// An invalid element reads nothing (src-size 0) and its address is the matrix's first element, so
// no pointer outside the matrix is ever formed.
template <class C, int ROWS, bool VEC>
__device__ __forceinline__ void load_tile(float* tile, const float* __restrict__ src, int rows, int K, int row0,
                                          int k0, int tid) {
  if constexpr (VEC) {
    constexpr int CHUNKS = C::BK / 4;
    constexpr int ROW_STEP = C::THREADS / CHUNKS;
    const int c = tid % CHUNKS;
    const int r = tid / CHUNKS;
    const int k = k0 + 4 * c;
#pragma unroll
    for (int rh = 0; rh < ROWS; rh += ROW_STEP) {
      const int row = row0 + rh + r;
      const bool valid = row < rows && k < K;
      tc::cp_async_16(tile + (rh + r) * C::LD + 4 * c, valid ? src + static_cast<int64_t>(row) * K + k : src, valid);
    }
  } else {
    constexpr int ROW_STEP = C::THREADS / C::BK;
    const int c = tid % C::BK;
    const int r = tid / C::BK;
    const int k = k0 + c;
#pragma unroll
    for (int rh = 0; rh < ROWS; rh += ROW_STEP) {
      const int row = row0 + rh + r;
      const bool valid = row < rows && k < K;
      async_copy::cp_async_f32(tile + (rh + r) * C::LD + c, valid ? src + static_cast<int64_t>(row) * K + k : src,
                               valid);
    }
  }
}

// out = x @ w.T for one BM x BN tile per block (tc::grouped_tile's raster over a 1-D grid).
//   VEC        the 16-byte load path (see load_tile);
//   SPLIT      false: TF32, one mma per fragment pair, operands rounded with cvt.rna;
//              true: 3xTF32, each operand split into big + small and three mmas per pair
//              (small·big, big·small, then big·big: the small terms first, while the
//              accumulator is still small, so their low bits are not lost under the big one);
//   PROMOTE    0: the tensor cores accumulate the whole K; > 0: every PROMOTE slices the mma
//              accumulators are added into separate FP32 registers (plain FADD, round to nearest)
//              and restarted from zero, so no tensor-core accumulation runs over more than
//              PROMOTE * BK values of k (gemm_10_3xtf32.cu says why that matters).
// vec_stores: N % 2 == 0, so each lane's two adjacent outputs go out as one 8-byte store.
// The block's whole work is this device function, so that a kernel file can also wrap one instance
// in a kernel of its own that a notebook launches with its own grid, block and shared memory
// (gemm_08_mma_tf32.cu's `// @launch`); gemm_mma_kernel below is the launchers' kernel.
template <class C, bool VEC, bool SPLIT, int PROMOTE>
__device__ __forceinline__ void gemm_mma_block(const float* __restrict__ x, const float* __restrict__ w,
                                               float* __restrict__ out, const float* __restrict__ bias, int M, int N,
                                               int K, bool vec_stores) {
  static_assert(PROMOTE >= 0, "PROMOTE counts slices; 0 means never");
  extern __shared__ __align__(16) float smem[];

  int tile_m, tile_n;
  tc::grouped_tile(static_cast<int>(blockIdx.x), (M + C::BM - 1) / C::BM, (N + C::BN - 1) / C::BN, GROUP_M, tile_m,
                   tile_n);
  const int m0 = tile_m * C::BM;
  const int n0 = tile_n * C::BN;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int wm = (warp / C::WARPS_N) * C::WM;  // the warp's piece of the block tile
  const int wn = (warp % C::WARPS_N) * C::WN;

  const int slices = (K + C::BK - 1) / C::BK;
  auto xs = [&](int stage) { return smem + stage * C::STAGE_FLOATS; };           // [BM][LD]
  auto ws = [&](int stage) { return smem + stage * C::STAGE_FLOATS + C::BM * C::LD; };  // [BN][LD]
  auto issue = [&](int slice) {  // starts copying one slice into its stage; an empty group past the end
    if (slice < slices) {
      const int stage = slice % C::STAGES;
      load_tile<C, C::BM, VEC>(xs(stage), x, M, K, m0, slice * C::BK, tid);
      load_tile<C, C::BN, VEC>(ws(stage), w, N, K, n0, slice * C::BK, tid);
    }
    async_copy::cp_async_commit();  // one group per slice, so "all but STAGES - 2 done" means "this slice is in"
  };

  // The rows each lane points ldmatrix at. For an A fragment (16 x 8 at k8 step kk) the four 8 x 4
  // blocks are rows 0-7 / 8-15 at k 0-3, then the same rows at k 4-7 (the order of a[0..3]): lane
  // l addresses row l % 8 of block l / 8. For B, one ldmatrix.x4 fetches two n8 tiles: blocks
  // (n 0-7, k 0-3), (n 0-7, k 4-7), (n 8-15, k 0-3), (n 8-15, k 4-7), i.e. b[0], b[1] of tile j
  // and b[0], b[1] of tile j + 1.
  const int a_row = wm + lane % 8 + ((lane / 8) % 2) * 8;
  const int a_k = (lane / 16) * 4;
  const int b_row = wn + lane % 8 + (lane / 16) * 8;
  const int b_k = ((lane / 8) % 2) * 4;

#pragma unroll
  for (int s = 0; s < C::STAGES - 1; ++s) {
    issue(s);
  }

  float acc[C::MT][C::NT][4] = {};
  float total[PROMOTE > 0 ? C::MT : 1][PROMOTE > 0 ? C::NT : 1][4] = {};

  for (int slice = 0; slice < slices; ++slice) {
    async_copy::cp_async_wait<C::STAGES - 2>();  // this thread's copies of `slice` have landed...
    __syncthreads();  // ...and everyone's; and everyone is done with slice - 1, whose stage is refilled next
    issue(slice + C::STAGES - 1);

    const float* a_base = xs(slice % C::STAGES) + a_row * C::LD + a_k;
    const float* b_base = ws(slice % C::STAGES) + b_row * C::LD + b_k;
#pragma unroll
    for (int kk = 0; kk < C::BK; kk += 8) {
      uint32_t a[C::MT][4];
      uint32_t b[C::NT][2];
#pragma unroll
      for (int i = 0; i < C::MT; ++i) {
        tc::ldmatrix_x4(a[i], a_base + i * 16 * C::LD + kk);
      }
#pragma unroll
      for (int j = 0; j < C::NT; j += 2) {
        uint32_t r[4];
        tc::ldmatrix_x4(r, b_base + j * 8 * C::LD + kk);
        b[j][0] = r[0];
        b[j][1] = r[1];
        b[j + 1][0] = r[2];
        b[j + 1][1] = r[3];
      }
      if constexpr (SPLIT) {
        uint32_t a_small[C::MT][4];
        uint32_t b_small[C::NT][2];
#pragma unroll
        for (int i = 0; i < C::MT; ++i) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            tc::split_tf32(__uint_as_float(a[i][e]), a[i][e], a_small[i][e]);
          }
        }
#pragma unroll
        for (int j = 0; j < C::NT; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            tc::split_tf32(__uint_as_float(b[j][e]), b[j][e], b_small[j][e]);
          }
        }
#pragma unroll
        for (int i = 0; i < C::MT; ++i) {
#pragma unroll
          for (int j = 0; j < C::NT; ++j) {
            tc::mma_tf32(acc[i][j], a_small[i], b[j]);
            tc::mma_tf32(acc[i][j], a[i], b_small[j]);
            tc::mma_tf32(acc[i][j], a[i], b[j]);
          }
        }
      } else {
#pragma unroll
        for (int i = 0; i < C::MT; ++i) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            a[i][e] = tc::to_tf32(__uint_as_float(a[i][e]));
          }
        }
#pragma unroll
        for (int j = 0; j < C::NT; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            b[j][e] = tc::to_tf32(__uint_as_float(b[j][e]));
          }
        }
#pragma unroll
        for (int i = 0; i < C::MT; ++i) {
#pragma unroll
          for (int j = 0; j < C::NT; ++j) {
            tc::mma_tf32(acc[i][j], a[i], b[j]);
          }
        }
      }
    }

    if constexpr (PROMOTE > 0) {
      if ((slice + 1) % PROMOTE == 0) {  // promote: FP32 adds into `total`, then a fresh chunk
#pragma unroll
        for (int i = 0; i < C::MT; ++i) {
#pragma unroll
          for (int j = 0; j < C::NT; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              total[i][j][e] += acc[i][j][e];
              acc[i][j][e] = 0.0f;
            }
          }
        }
      }
    }
  }
  async_copy::cp_async_wait<0>();  // no copy may still be writing to shared memory when the block exits

  // Lane (g, t) holds, for m16 tile i and n8 tile j, rows g and g + 8 at columns 2t and 2t + 1.
  const int g = lane / 4;
  const int t = lane % 4;
#pragma unroll
  for (int i = 0; i < C::MT; ++i) {
#pragma unroll
    for (int j = 0; j < C::NT; ++j) {
      const int n = n0 + wn + j * 8 + 2 * t;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = m0 + wm + i * 16 + g + 8 * h;
        if (m >= M) {
          continue;
        }
        float v0 = acc[i][j][2 * h];
        float v1 = acc[i][j][2 * h + 1];
        if constexpr (PROMOTE > 0) {  // the last, possibly partial, chunk
          v0 += total[i][j][2 * h];
          v1 += total[i][j][2 * h + 1];
        }
        tc::add_bias(bias, n, N, v0, v1);
        float* row = out + static_cast<int64_t>(m) * N;
        if (vec_stores) {
          if (n < N) {  // N even and n even: n + 1 < N too
            *reinterpret_cast<float2*>(row + n) = make_float2(v0, v1);
          }
        } else {
          if (n < N) row[n] = v0;
          if (n + 1 < N) row[n + 1] = v1;
        }
      }
    }
  }
}

template <class C, bool VEC, bool SPLIT, int PROMOTE>
__global__ void __launch_bounds__(C::THREADS, C::MIN_BLOCKS)
    gemm_mma_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
                    const float* __restrict__ bias, int M, int N, int K, bool vec_stores) {
  gemm_mma_block<C, VEC, SPLIT, PROMOTE>(x, w, out, bias, M, N, K, vec_stores);
}

template <class C, bool VEC, bool SPLIT, int PROMOTE>
void launch(const float* x, const float* w, float* out, const float* bias, int M, int N, int K) {
  auto kernel = gemm_mma_kernel<C, VEC, SPLIT, PROMOTE>;
  // More than 48 KB of shared memory per block must be asked for, once per kernel and device.
  allow_dynamic_smem(kernel, C::SMEM_BYTES);
  kernel<<<gemm_grid(M, N, C::BM, C::BN), C::THREADS, C::SMEM_BYTES, at::cuda::getCurrentCUDAStream()>>>(
      x, w, out, bias, M, N, K, N % 2 == 0);
  LAUNCH_CHECK();
}

// Fills `out` (M, N), allocated by gemm_new_output, with x @ w.T (+ bias (N,), when not null); x
// and w already checked. Picks the 16-byte load path when K % 4 == 0 and both operands start on a
// 16-byte boundary.
template <class C, bool SPLIT, int PROMOTE>
void run(const torch::Tensor& x, const torch::Tensor& w, torch::Tensor& out, const float* bias = nullptr) {
  const int64_t K = x.size(1);
  if (out.numel() == 0 || K == 0) {
    return;  // nothing to compute (a 0-block launch is an error); K == 0: gemm_new_output's zeros
  }
  const c10::cuda::CUDAGuard guard(x.device());
  const int M = static_cast<int>(x.size(0));
  const int N = static_cast<int>(w.size(0));
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  float* outp = out.data_ptr<float>();
  if (K % 4 == 0 && aligned16(xp) && aligned16(wp)) {
    launch<C, true, SPLIT, PROMOTE>(xp, wp, outp, bias, M, N, static_cast<int>(K));
  } else {
    launch<C, false, SPLIT, PROMOTE>(xp, wp, outp, bias, M, N, static_cast<int>(K));
  }
}

// The launcher of a rung: checks, the (M, N) output, the launch.
template <class C, bool SPLIT, int PROMOTE>
torch::Tensor gemm_mma(const torch::Tensor& x, const torch::Tensor& w) {
  torch::Tensor out = gemm_new_output(x, w);
  run<C, SPLIT, PROMOTE>(x, w, out);
  return out;
}

}  // namespace gemm_mma
