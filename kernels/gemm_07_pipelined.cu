// gemm_07_pipelined.cu: out = x @ w.T in float32, x (M, K) and w (N, K) row-major as nn.Linear
// stores them, out (M, N). Rung 7 of the SGEMM ladder (notebooks/03_tiled_gemm.ipynb): rung 6's
// 128 x 128 tile and 8 x 8 outputs per thread, with the K slices copied by a cp.async pipeline
// and the threads laid out warp by warp. The kernel is in common/gemm_pipelined.cuh, because
// notebook 04's bias epilogue (kernels/gemm_bias.cu) reuses it unchanged.
//
// The idea: never let the arithmetic wait for global memory. In rung 6 a block that copies a slice
// computes nothing, and the copy's latency is hidden only if the SM's other block happens to be
// computing meanwhile. Here:
//   - STAGES shared buffers form a ring: while slice s is computed, the copies of slices s + 1 ..
//     s + STAGES - 1 are already under way.
//   - the copies are cp.async: the SM moves each value from global to shared memory in the
//     background, without a register on the way, and the thread goes straight back to arithmetic.
//     (Double buffering through registers would need 16 more per thread at BK = 16, and rung 6 is
//     at the 128 that 2 blocks per SM allow.)
//   - one barrier per slice instead of two: the barrier that says "slice s has landed" also says
//     "everyone has finished slice s - 1", which is when s - 1's buffer may be refilled.
//   - warp tiling: each warp owns a 32 x 64 piece of the tile, each thread 2 x 2 blocks of 4 x 4
//     outputs, 16 rows and 32 columns apart, so that the 8 lanes of a quarter-warp read 8
//     consecutive float4 of ws (128 bytes, all 32 banks, one pass) where rung 6 took two.
//
// PREDICTION (written before measuring, for BK = 16 and 3 stages): 75-85% of cuBLAS SGEMM. The
// barrier wait that rung 6 exposes is the global-load latency; a 3-stage pipeline should hide
// nearly all of it, and the conflict-free w reads add a few percent. What it cannot fix: 128
// registers per thread hold 64 accumulators and 16 operands, and each 64-FMA step still issues 4
// shared loads, so the FMA pipes stay below ~90% busy even with perfect latency hiding.
//
// TUNED AFTERWARDS: a sweep over BK and STAGES (python -m utils.ladder --tune, recorded as
// ladder_tuning; notebook 03 shows it) made BK = 32 with 2 stages the default: a deeper slice pays
// the fixed work of each slice (cp.async wait, barrier, stage bookkeeping) half as often, and two
// stages of 32 k (66 KiB) still let 2 blocks share an SM. BK = 64 (132 KiB) fits only one.
//
// Requirements: cp.async needs sm_80 or newer. The copies are 4 bytes wide, so they work for any K
// and any alignment of x and w: no scalar fallback on the load side.

#include "common/gemm_pipelined.cuh"

// Rung 7 without an epilogue, launchable from Python with its launch configuration in sight
// (notebook 03): one block per 128 x 128 tile of out (gemm_grid's numbering), 256 threads,
// gemm_pipelined::SMEM_BYTES of dynamic shared memory; vec_stores only when N % 4 == 0 and out is
// 16-byte aligned. The launcher below runs the same block code through gemm_pipelined_kernel.
// @launch
__global__ void __launch_bounds__(gemm_pipelined::THREADS, gemm_pipelined::MIN_BLOCKS_PER_SM)
    gemm_pipelined_plain_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
                                int M, int N, int K, bool vec_stores) {
  gemm_pipelined::gemm_pipelined_block(x, w, out, M, N, K, vec_stores, gemm_pipelined::NoEpilogue{});
}

// @export: out = x @ w.T for float32 CUDA tensors x (M, K) and w (N, K): rung 7, cp.async pipeline (BK = 32, double-buffered) and warp tiling
torch::Tensor gemm(torch::Tensor x, torch::Tensor w) {
  return gemm_pipelined::gemm_pipelined(x, w, gemm_pipelined::NoEpilogue{});
}
