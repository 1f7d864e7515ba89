// gemm_07_pipelined.cu: out = x @ w.T in float32, x (M, K) and w (N, K) row-major as nn.Linear
// stores them, out (M, N). Rung 7 of the SGEMM ladder (notebooks/03_tiled_gemm.ipynb): rung 6's
// 128 x 128 tile and 8 x 8 outputs per thread, with the K slices copied by a cp.async pipeline
// and the threads laid out warp by warp. The kernel itself is in common/gemm_pipelined.cuh,
// because notebook 04's bias epilogue (kernels/gemm_bias.cu) reuses it unchanged.
//
// The idea: never let the arithmetic wait for global memory.
// In rung 6 every slice goes global -> registers -> shared, then a barrier, then the arithmetic,
// then a barrier before the next copy may start. While a block copies it computes nothing; the
// ~1 us that a load takes from DRAM (or ~0.5 us from L2) is hidden only if the SM's other block
// happens to be computing meanwhile. Here:
//   - STAGES shared buffers form a ring. While slice s is computed, the copies of slices s + 1 ..
//     s + STAGES - 1 are already under way: when the arithmetic reaches a slice, its data has had
//     at least one slice of arithmetic (BK x 64 FMAs per thread) to arrive.
//   - the copies are cp.async (sm_80 and later): the SM moves each value from global to shared
//     memory in the background, without a register on the way. The thread issues a slice's
//     copies and goes straight back to arithmetic; no registers are held for in-flight data (which
//     double buffering through registers would need: 16 more per thread at BK = 16, and rung 6 is
//     at 127 of the 128 that 2 blocks per SM allow).
//   - one barrier per slice instead of two: the barrier that says "slice s has landed" also
//     says "everyone has finished slice s - 1", which is exactly when s - 1's buffer may be refilled.
//   - warp tiling: each warp owns a 32 x 64 piece of the tile and each thread 2 x 2 blocks of 4 x 4
//     outputs, 16 rows and 32 columns apart. At each k, the 8 lanes that share rows read 8
//     consecutive float4 of the w tile (one conflict-free 128-byte read) instead of rung 6's float4
//     32 bytes apart, which cost twice the shared-memory passes.
//
// Thread -> data: warp v (0..7), lane l (0..31): rows tm + {0..3} and tm + 16 + {0..3} with
// tm = 32 * (v / 2) + 4 * (l / 8), columns tn + {0..3} and tn + 32 + {0..3} with
// tn = 64 * (v % 2) + 4 * (l % 8). Copying: load_tile_kmajor's mapping (common/gemm_tile.cuh),
// each element by a 4-byte cp.async that also transposes it into the k-major tile.
//
// Arithmetic intensity: as rungs 5 and 6 (the tile is the same): 32 FLOP per byte from global
// memory, 2 FLOP per byte from shared memory.
//
// PREDICTION (written before measuring, for BK = 16 and 3 stages): 75-85% of cuBLAS SGEMM, up from
// rung 6's 71.5% (H200). The barrier wait that rung 6 exposes is the global-load latency; a 3-stage
// pipeline should hide nearly all of it, and the conflict-free w reads add a few percent. What it
// cannot fix: 128 registers per thread hold 64 accumulators and 16 operands, and each 64-FMA step
// still issues 4 shared loads, so the FMA pipes stay below ~90% busy even with perfect latency
// hiding. cuBLAS's own FP32 kernel is not at the FP32 peak either (about 51 of 67 TFLOP/s).
//
// TUNED AFTERWARDS (python -m utils.ladder --tune; the figures are in notebook 03): BK = 16 with
// 3 stages landed inside the prediction; a sweep over BK and STAGES then found deeper slices worth
// more than deeper pipelines, and BK = 32 with 2 stages (classic double buffering) became the
// default. One slice of 32 k is 2048 FMAs per thread, ample cover for one slice's copy, and the
// per-slice fixed work (cp.async wait, barrier, stage bookkeeping) is paid half as often: Nsight
// Compute shows the schedulers issuing in 80% of cycles instead of 75%. BK = 64 needs 135 KB of
// shared memory per block, so only one block (8 warps) fits an SM, and it is slower again.

// Requirements: cp.async needs sm_80 or newer (the workbook builds for sm_90). The 16-byte
// accesses of rung 6's loads are not used: 4-byte copies work for any K and any alignment of x
// and w, so this rung needs no scalar fallback on the load side.

#include "common/gemm_pipelined.cuh"

// @export: out = x @ w.T for float32 CUDA tensors x (M, K) and w (N, K): rung 7, cp.async pipeline (BK = 32, double-buffered) and warp tiling
torch::Tensor gemm(torch::Tensor x, torch::Tensor w) {
  return gemm_pipelined::gemm_pipelined(x, w, gemm_pipelined::NoEpilogue{});
}
