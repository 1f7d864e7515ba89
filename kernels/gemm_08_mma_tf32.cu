// gemm_08_mma_tf32.cu: out = x @ w.T with TF32 tensor cores, x (M, K) and w (N, K) row-major as
// nn.Linear stores them, out (M, N) in float32. Rung 8 of the GEMM ladder, the first on tensor
// cores (notebooks/08_tensor_cores_and_precision.ipynb): the Ampere way, one warp-wide
// mma.sync.m16n8k8 at a time. The kernel is in common/gemm_mma.cuh, because rung 10 runs the
// same main loop with the 3xTF32 split and rung 9 falls back to it.
//
// PRECISION: TF32 (the tf32 tier, atol = rtol = 1e-2). Each operand is rounded to 10 mantissa
// bits before it is multiplied; at K = 8192 the result is ~1e-3 off, 10x outside the strict tier.
// @precision: tf32
//
// The idea: a tensor core multiplies small matrices, not numbers. One mma.sync.m16n8k8 is a warp
// computing D (16 x 8) += A (16 x 8) · B (8 x 8): 1024 multiply-adds in one instruction, where
// rung 7 issued one FMA per lane per instruction (32 per instruction). The price is precision:
// the tensor core reads its fp32 inputs as TF32 (1 + 10 significant bits instead of 24).
//
// Fragments. No lane holds a whole matrix: each of the 32 lanes holds 4 values of A, 2 of B and
// 4 of D, at places the instruction fixes (common/tensor_core.cuh draws them). With g = lane / 4
// and t = lane % 4: A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]; B[t][g], B[t+4][g];
// D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]. Every kernel on tensor cores is, at heart, a
// way of getting data into these places and out of them. Here:
//   - global -> shared: x's and w's slices stay k-contiguous (no transpose: A is "row" and B is
//     "col" in the instruction, which for x and for w as stored means the same thing, contiguous
//     along k). 16-byte cp.async when K % 4 == 0 and both tensors start 16-byte aligned (each lane
//     copies 4 floats); otherwise a 4-byte cp.async per float, correct for any K and any view.
//   - shared -> registers: ldmatrix.x4. It was made for 16-bit data, 8 x 8 matrices of 16 bytes
//     per row, but it moves bits: an 8 x 8 b16 matrix is an 8 x 4 block of fp32, and the lane that
//     receives word (l / 4, l % 4) of each block is exactly where the A and B fragments want it.
//     One ldmatrix.x4 fills one A fragment (4 blocks) or the B fragments of two n8 tiles.
//   - conflict-free: rows are padded from 32 to 36 floats (144 bytes), so the 8 rows an ldmatrix
//     block reads start in banks 0, 4, ..., 28 and touch each bank once. Unpadded: 8-way conflicts.
//   - rounding: cvt.rna.tf32.f32 on each fragment value (round to nearest; the tensor core alone
//     would truncate, with twice the error and a bias that accumulates along K).
//
// Tiles: block 128 x 128, slices of BK = 32, 3-stage cp.async pipeline (rung 7's ring, one barrier
// per slice), 8 warps as 2 (M) x 4 (N), each owning 64 x 32 outputs = 4 x 4 tiles of m16n8, i.e.
// 16 mma.sync per k8 step from 4 A and 4 B fragments (6 ldmatrix.x4). Shared memory: 3 stages x
// (128 + 128) rows x 144 bytes = 108 KB, so 2 blocks (16 warps) fit an SM. Blocks take tiles in
// grouped order (tc::grouped_tile), so that at 32768 x 4096 x 1024 x is read from DRAM about once.
//
// Thread -> data: warp v (0..7), lane l: outputs at rows 64 * (v / 4) + 16 i + l / 4 (+ 8), i in
// 0..3, and columns 32 * (v % 4) + 8 j + 2 (l % 4) (+ 1), j in 0..3: 64 accumulators per lane.
// Copying (16-byte path): thread t of the block copies floats 4 (t % 8) .. + 3 of rows t / 8 + 32 r,
// r in 0..3, of each tile; (4-byte path) float t % 32 of rows t / 32 + 8 r, r in 0..15.
//
// Arithmetic intensity: as rung 7's tile (128 x 128): 32 FLOP per byte from global memory. From
// shared memory: 16 mma (16 x 8 x 8 MACs each) per 6 ldmatrix.x4 of 512 bytes: 21 FLOP per byte,
// 10x rung 7's, which is what lets the tensor cores be fed.
//
// PREDICTION (written before measuring): 45-60% of cuBLAS with TF32 on (and ~4x cuBLAS SGEMM).
// mma.sync is Ampere's instruction; on Hopper it runs, but its throughput is reported at about
// 60-65% of the wgmma peak that cuBLAS uses, and this kernel keeps no fragments in flight across
// k8 steps (it relies on the 16 warps per SM for latency hiding). Registers: 64 accumulators and
// 24 fragment values per lane; 2 blocks per SM cap them at 128.

#include "common/gemm_mma.cuh"

// The kernel as notebook 08 launches it itself, with the grid, block and shared memory it computes
// from the tiles above: gemm_mma::Tf32Config on the 16-byte load path (K % 4 == 0 and 16-byte
// aligned operands, which the notebook's tensors are), no bias. The launcher below runs the same
// block code through gemm_mma::run, which also takes the 4-byte path for any other input.
// @launch
__global__ void __launch_bounds__(gemm_mma::Tf32Config::THREADS, gemm_mma::Tf32Config::MIN_BLOCKS)
    mma_tf32_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out, int M, int N,
                    int K) {
  gemm_mma::gemm_mma_block<gemm_mma::Tf32Config, /*VEC*/ true, /*SPLIT*/ false, /*PROMOTE*/ 0>(x, w, out, nullptr, M, N,
                                                                                             K, N % 2 == 0);
}

// @export: out = x @ w.T for float32 CUDA tensors x (M, K) and w (N, K): rung 8, TF32 mma.sync.m16n8k8 (tf32 tier)
torch::Tensor gemm(torch::Tensor x, torch::Tensor w) {
  return gemm_mma::gemm_mma<gemm_mma::Tf32Config, /*SPLIT*/ false, /*PROMOTE*/ 0>(x, w);
}
