// gemm_09_wgmma_tf32.cu: out = x @ w.T with Hopper's TF32 tensor cores the Hopper way, x (M, K)
// and w (N, K) row-major as nn.Linear stores them, out (M, N) in float32. Rung 9 of the GEMM
// ladder (notebooks/09_hopper_gemm_and_epilogue.ipynb). The kernel is in common/gemm_wgmma.cuh
// (rung 10 runs it with the 3xTF32 split); the instruction wrappers are in common/hopper.cuh.
//
// PRECISION: TF32 (the tf32 tier, atol = rtol = 1e-2). wgmma reads the fp32 words that TMA copied
// and ignores their low 13 bits: TF32 by truncation (rung 8 rounds to nearest, which this path
// could only do with an extra pass over every tile in shared memory).
// @precision: tf32
// @arch: 9.0a
//
// What changes from rung 8 (mma.sync):
//   - the MMA is issued by a warp GROUP (4 warps, 128 threads) and is asynchronous: wgmma.mma_async
//     m64n256k8 computes a 64 x 256 x 8 product (131072 MACs, 128 times one mma.sync) reading
//     BOTH operands straight from shared memory through descriptors. No thread loads a fragment;
//     the accumulators (64 x 256 floats = 128 registers per thread) are the only registers it
//     uses. The warp group issues, commits, goes on, and waits only when it must (wait_group).
//   - shared memory is filled by TMA: one thread describes a box (the x tile, 128 rows x 32 k; the
//     w tile, 256 rows x 32 k) and the copy engine moves it, with no address arithmetic in any
//     thread and zero fill outside the matrix (edge tiles in M, N and K come for free). The layout
//     it writes is the 128-byte swizzle (16-byte chunk c of row r lands at chunk c ^ (r % 8)),
//     which is the layout wgmma's descriptor reads without bank conflicts; nothing is padded.
//   - the pipeline is a producer/consumer ring with mbarriers instead of cp.async groups and
//     __syncthreads: warp group 0 (the producer, one thread of it) waits for a stage to be empty,
//     tells its "full" barrier how many bytes to expect, and starts the two TMA copies; warp groups
//     1 and 2 (the consumers, 64 rows each) wait on "full", issue their wgmmas and, once those are
//     done, arrive on "empty". No barrier ever stops the whole block.
//   - registers move: setmaxnreg gives the producer 40 per thread and the consumers 232.
//
// Tiles: block 128 x 256, BK = 32 (one 128-byte swizzle row), 4 stages of 48 KB (192 KB: one
// block per SM), 384 threads. Per stage each consumer issues 4 wgmma m64n256k8 (k = 0, 8, 16,
// 24: the descriptors advance 32 bytes within the swizzle atom) as one group, then waits for the
// previous stage's group, so one group is always queued behind the running one. Blocks take tiles
// in grouped order (tc::grouped_tile), as in rung 8.
//
// Thread -> data: consumer c (warp groups 1, 2), warp v of it, lane l: rows 64c + 16v + l / 4
// (+ 8), columns 8j + 2 (l % 4) (+ 1) for j in 0..31; stored straight from registers, 8 bytes
// per lane, 32-byte runs per row.
//
// Requirements: TMA needs the row stride (K * 4 bytes) to be a multiple of 16 and the matrices to
// start 16-byte aligned. A drop-in must accept any K and any tensor, so for K % 4 != 0 or a
// misaligned view this launcher runs rung 8's kernel instead (same tier, correct for any input;
// slower, and the caller does not have to know).
//
// Arithmetic intensity: 128 x 256 x 32 MACs per 48 KB stage: 43 FLOP per byte from L2, a third
// more than rung 8's 128 x 128 tile. At TF32 rates that matters: 494 TFLOP/s at 43 FLOP/B is
// 11.5 TB/s of L2 traffic, near what the L2 can deliver.
//
// PREDICTION (written before measuring): 65-80% of cuBLAS with TF32 on at 1024 x 8192 x 8192 (one
// wave and a bit: 256 tiles on 132 SMs), 60-75% at 32768 x 4096 x 1024 (K = 1024 is only 32 k tiles,
// so the prologue and the epilogue, not overlapped with another tile's main loop, weigh more).
//
// MEASURED (after the prediction, on the H100: notebook 09 has this rung's timing; the runs below
// are in experiments/wgmma_schedule/README.md). What cuBLAS runs instead (its kernel names,
// torch.profiler): at 1024 x 8192 x 8192 this rung's own shape of work, a 128 x 256 x 32 tile for
// two consumer warp groups, "segment_k_off"; at 32768 x 4096 x 1024 a 128 x 128 x 32 tile for one
// warp group, "segment_k_on", after a memset (by the name and the memset, K cut into segments that
// blocks share, as in stream-K). The schedule is persistent: one block per SM loops over tiles
// (common/gemm_wgmma.cuh), 4.6% faster than one tile per block at K = 1024 and level at K = 8192,
// timed in turn. Clusters with TMA multicast, an epilogue through shared memory and TMA stores,
// ping-pong warp groups and stream-K were measured too and made this kernel slower (clusters of 2:
// 2-10%, the staged epilogue 5-8% at K = 8192, stream-K 2.8x at K = 8192). The tensor cores alone,
// rung 9's k tile and nothing else (probes/wgmma_peak_probe.cu), held for seconds at the H100's
// 700 W limit: 0.63 us per k tile at 1680 MHz. Rung 9 and cuBLAS, which also move their operands,
// hold only 1365-1455 MHz at the same power; in a burst rung 9's main loop takes 0.67 us. Power,
// not the instruction stream, sets the ceiling.

#include "common/gemm_mma.cuh"
#include "common/gemm_wgmma_host.cuh"


// @export: out = x @ w.T for float32 CUDA tensors x (M, K) and w (N, K): rung 9, TF32 wgmma + TMA, warp-specialised (tf32 tier; K % 4 != 0 or misaligned: rung 8's kernel)
torch::Tensor gemm(torch::Tensor x, torch::Tensor w) {
  torch::Tensor out = gemm_new_output(x, w);
  if (out.numel() == 0 || x.size(1) == 0) {
    return out;  // nothing to compute; K == 0: gemm_new_output's zeros
  }
  if (gemm_wgmma::tma_ok(x, w)) {
    gemm_wgmma::run<gemm_wgmma::Tf32Config>(x, w, out);
  } else {
    gemm_mma::run<gemm_mma::Tf32Config, /*SPLIT*/ false, /*PROMOTE*/ 0>(x, w, out);
  }
  return out;
}
