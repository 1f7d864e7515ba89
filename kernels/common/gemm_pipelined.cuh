// kernels/common/gemm_pipelined.cuh: the GEMM of rung 7 (kernels/gemm_07_pipelined.cu explains
// it; notebooks/03_tiled_gemm.ipynb), written once with a pluggable epilogue so that the bias
// fusion of kernels/gemm_bias.cu (notebooks/04_bias_fusion.ipynb) runs the very same main loop.
//
//   cp_async_f32 / cp_async_commit / cp_async_wait   the asynchronous-copy instructions (common/cp_async.cuh);
//   copy_tile_kmajor_async   a slice of x or w into a k-major shared tile, without registers;
//   gemm_pipelined_block     what one block does: a STAGES-deep pipeline of slices, warp-tiled;
//   gemm_pipelined_kernel    the kernel, for any epilogue;
//   gemm_pipelined           the launcher every caller uses, for any epilogue;
//   NoEpilogue               out = x @ w.T as it is.
//
// An epilogue is a small struct with `__device__ float operator()(float acc, int m, int n) const`:
// what to store at out[m][n] given the finished dot product. It runs once per output, after the
// K loop, in registers, so whatever it adds costs one pass over the registers, not one over memory.
// It is called only for outputs inside the matrix, 0 <= m < M and 0 <= n < N.

#pragma once

#include <cuda_runtime.h>

#include "common/cp_async.cuh"
#include "common/device_cache.cuh"
#include "common/gemm_launch.cuh"
#include "common/gemm_tile.cuh"  // GEMM_SMEM_PAD: the same padded k-major layout as rungs 4-6

// The slice depth and the pipeline depth. The #ifndef lets a tuning run rebuild the kernel with
// other values without editing the file, e.g.
//   load_kernel("gemm_07_pipelined", extra_cuda_cflags=["-DGEMM07_BK=16", "-DGEMM07_STAGES=3"])
// `python -m utils.ladder --tune` times a grid of them side by side and records the sweep
// (kind ladder_tuning); the defaults are its best pair, and a test checks that they still are.
#ifndef GEMM07_BK
#define GEMM07_BK 32
#endif
#ifndef GEMM07_STAGES
#define GEMM07_STAGES 2
#endif

namespace gemm_pipelined {

constexpr int BM = 128;  // block tile: 128 x 128 outputs
constexpr int BN = 128;
constexpr int BK = GEMM07_BK;          // k values per slice
constexpr int STAGES = GEMM07_STAGES;  // slices in flight: STAGES - 1 loading while one is computed
constexpr int THREADS = 256;           // 8 warps, 8 x 8 outputs per thread
constexpr int MIN_BLOCKS_PER_SM = 2;   // caps registers at 128 per thread
static_assert(STAGES >= 2, "a pipeline needs one stage being computed and at least one being filled");

// Warp tiling. The 8 warps are 4 (along M) x 2 (along N), each owning a 32 x 64 piece of the
// block tile; a warp's 32 lanes are 4 (M) x 8 (N). A thread's 8 x 8 outputs are not one square:
// they are 2 x 2 blocks of 4 x 4, 16 rows and 32 columns apart, so that at each k the 8 lanes that
// share a row read 8 consecutive float4 of w's tile (128 bytes, all 32 banks: no conflict) and
// the 4 lane rows read 4 consecutive float4 of x's tile, every lane of a row the same one (a
// broadcast).
constexpr int WARPS_M = 4;
constexpr int WARPS_N = 2;
constexpr int WARP_M = BM / WARPS_M;  // 32
constexpr int WARP_N = BN / WARPS_N;  // 64
constexpr int LANES_M = 4;
constexpr int LANES_N = 8;
constexpr int HALF_M = WARP_M / 2;  // 16: the second 4-row block of a thread starts here
constexpr int HALF_N = WARP_N / 2;  // 32: the second 4-column block
static_assert(WARPS_M * WARPS_N * 32 == THREADS && LANES_M * LANES_N == 32, "8 warps of 4 x 8 lanes");
static_assert(LANES_M * 4 * 2 == WARP_M && LANES_N * 4 * 2 == WARP_N, "each thread: 2 x 2 blocks of 4 x 4");

// One stage: a slice of x (BM rows) and one of w (BN rows), k-major and padded (see GEMM_SMEM_PAD).
struct Stage {
  float xs[BK][BM + GEMM_SMEM_PAD];
  float ws[BK][BN + GEMM_SMEM_PAD];
};
constexpr size_t SMEM_BYTES = sizeof(Stage) * STAGES;  // 2 x 33 KiB with the defaults: 2 blocks fit an SM

// cp.async (sm_80+, common/cp_async.cuh): a copy from global to shared memory that the SM carries
// out in the background, without a register on the way; the thread waits only when it needs the
// data (cp_async_wait). Rung 7 copies 4 bytes at a time, the form that can transpose a tile.
using async_copy::cp_async_commit;
using async_copy::cp_async_f32;
using async_copy::cp_async_wait;

// Starts copying rows [row0, row0 + ROWS) x columns [k0, k0 + BK) of a row-major (rows, K) matrix
// into tile[k - k0][row - row0]: load_tile_kmajor's mapping (common/gemm_tile.cuh), so a warp reads
// full 32-byte sectors and writes 32 different banks, but with cp.async instead of a load and a store.
template <int ROWS>
__device__ __forceinline__ void copy_tile_kmajor_async(float (&tile)[BK][ROWS + GEMM_SMEM_PAD],
                                                       const float* __restrict__ src, int rows, int K, int row0,
                                                       int k0, int tid) {
  constexpr int ROW_STEP = THREADS / 8;
  static_assert(BK % 8 == 0 && ROWS % ROW_STEP == 0, "the threads cover whole 8 (k) x 32 (rows) blocks");
  const int kt = tid % 8;
  const int rt = tid / 8;
#pragma unroll
  for (int rh = 0; rh < ROWS; rh += ROW_STEP) {
    const int row = row0 + rh + rt;
    // A row past the edge reads nothing (valid = false); its address is clamped into the matrix
    // anyway, so that no out-of-range pointer is ever formed.
    const float* src_row = src + static_cast<int64_t>(min(row, rows - 1)) * K;
#pragma unroll
    for (int kh = 0; kh < BK; kh += 8) {
      const int k = k0 + kh + kt;
      cp_async_f32(&tile[kh + kt][rh + rt], src_row + min(k, K - 1), row < rows && k < K);
    }
  }
}

// out = epilogue(x @ w.T), x (M, K), w (N, K), out (M, N), all row-major; one block per 128 x 128
// tile of out (gemm_grid's numbering). `vec_stores`: N % 4 == 0 and out 16-byte aligned.
// What one block does, inlined into each kernel below: gemm_pipelined_kernel (any epilogue) and
// gemm_07_pipelined.cu's launchable instance without one.
template <class Epilogue>
__device__ __forceinline__ void gemm_pipelined_block(const float* __restrict__ x, const float* __restrict__ w,
                                                     float* __restrict__ out, int M, int N, int K, bool vec_stores,
                                                     Epilogue epilogue) {
  extern __shared__ __align__(16) unsigned char smem_bytes[];
  Stage* stages = reinterpret_cast<Stage*>(smem_bytes);

  const int tiles_m = (M + BM - 1) / BM;
  const int m0 = static_cast<int>(blockIdx.x % tiles_m) * BM;
  const int n0 = static_cast<int>(blockIdx.x / tiles_m) * BN;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int tm = (warp / WARPS_N) * WARP_M + (lane / LANES_N) * 4;  // first row of the thread's 2 row blocks
  const int tn = (warp % WARPS_N) * WARP_N + (lane % LANES_N) * 4;  // first column of its 2 column blocks

  const int slices = (K + BK - 1) / BK;
  auto issue = [&](int slice) {  // starts the copy of one slice into its stage; an empty group past the end
    if (slice < slices) {
      Stage& s = stages[slice % STAGES];
      copy_tile_kmajor_async<BM>(s.xs, x, M, K, m0, slice * BK, tid);
      copy_tile_kmajor_async<BN>(s.ws, w, N, K, n0, slice * BK, tid);
    }
    cp_async_commit();  // always one group per slice, so "all but STAGES - 2 done" means "this slice is in"
  };

  // Prologue: slices 0 .. STAGES - 2 in flight before any arithmetic (with 2 stages: slice 0).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    issue(s);
  }

  float acc[8][8] = {};
  for (int slice = 0; slice < slices; ++slice) {
    cp_async_wait<STAGES - 2>();  // this thread's copies of `slice` have landed...
    __syncthreads();              // ...and everyone's; and everyone has finished computing slice - 1,
                                  // whose stage the next line refills.
    issue(slice + STAGES - 1);

    const Stage& s = stages[slice % STAGES];
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      // Four 16-byte shared loads (the rows are 16-byte aligned: tm, tn, HALF_M, HALF_N and the
      // padded row length are multiples of 4 floats), then their floats by name into a and b.
      const float4 a0 = *reinterpret_cast<const float4*>(&s.xs[k][tm]);
      const float4 a1 = *reinterpret_cast<const float4*>(&s.xs[k][tm + HALF_M]);
      const float4 b0 = *reinterpret_cast<const float4*>(&s.ws[k][tn]);
      const float4 b1 = *reinterpret_cast<const float4*>(&s.ws[k][tn + HALF_N]);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          acc[i][j] += a[i] * b[j];
        }
      }
    }
  }
  cp_async_wait<0>();  // no copy may still be writing to shared memory when the block exits

  // acc[i][j] is out[m0 + tm + (i / 4) * HALF_M + i % 4][n0 + tn + (j / 4) * HALF_N + j % 4].
  // Outputs past M or N (edge tiles) were computed from zero-filled rows: they are not stored, and
  // the epilogue is not even evaluated for them, since it may read per-column data (a bias of N
  // floats) that has no element n >= N. compute-sanitizer's memcheck caught exactly that read.
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int m = m0 + tm + (i / 4) * HALF_M + i % 4;
    if (m >= M) {
      continue;
    }
    float* row = out + static_cast<int64_t>(m) * N;
#pragma unroll
    for (int jb = 0; jb < 8; jb += 4) {
      const int n = n0 + tn + (jb / 4) * HALF_N;
      if (vec_stores) {
        if (n < N) {  // N % 4 == 0: the 4 columns are all inside or all outside
          *reinterpret_cast<float4*>(row + n) =
              make_float4(epilogue(acc[i][jb], m, n), epilogue(acc[i][jb + 1], m, n + 1),
                          epilogue(acc[i][jb + 2], m, n + 2), epilogue(acc[i][jb + 3], m, n + 3));
        }
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          if (n + c < N) {
            row[n + c] = epilogue(acc[i][jb + c], m, n + c);
          }
        }
      }
    }
  }
}

// The kernel every launcher runs: one block per 128 x 128 tile of out, THREADS threads, SMEM_BYTES
// of dynamic shared memory.
template <class Epilogue>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS_PER_SM)
    gemm_pipelined_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out, int M,
                          int N, int K, bool vec_stores, Epilogue epilogue) {
  gemm_pipelined_block(x, w, out, M, N, K, vec_stores, epilogue);
}

// The identity epilogue: out = x @ w.T.
struct NoEpilogue {
  __device__ __forceinline__ float operator()(float acc, int, int) const { return acc; }
};

// Runs gemm_pipelined_kernel for x (M, K) and w (N, K), checked by gemm_new_output, and returns
// out (M, N). The caller has checked whatever its epilogue reads (bias shapes, devices).
template <class Epilogue>
torch::Tensor gemm_pipelined(const torch::Tensor& x, const torch::Tensor& w, const Epilogue& epilogue) {
  torch::Tensor out = gemm_new_output(x, w);
  if (out.numel() == 0) {
    return out;  // a launch with 0 blocks is an error
  }
  // K == 0 still launches: the K loop runs 0 times and the epilogue sees acc = 0 (bias only).
  const int M = static_cast<int>(x.size(0));
  const int N = static_cast<int>(w.size(0));
  const int K = static_cast<int>(x.size(1));
  const c10::cuda::CUDAGuard guard(x.device());
  // More than 48 KB of shared memory per block must be asked for, once per kernel and device.
  allow_dynamic_smem(gemm_pipelined_kernel<Epilogue>, SMEM_BYTES);
  float* outp = out.data_ptr<float>();
  gemm_pipelined_kernel<Epilogue><<<gemm_grid(M, N, BM, BN), THREADS, SMEM_BYTES, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), outp, M, N, K, N % 4 == 0 && aligned16(outp), epilogue);
  LAUNCH_CHECK();
  return out;
}

}  // namespace gemm_pipelined
