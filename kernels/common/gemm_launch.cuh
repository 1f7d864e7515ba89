// kernels/common/gemm_launch.cuh: what the launchers of every GEMM kernel share (the ladder
// kernels/gemm_NN_*.cu and the bias epilogue kernels/gemm_bias.cu).
//
// They all take x (M, K) and w (N, K) row-major, nn.Linear's layout, and return x @ w.T (M, N).
// The border checks (dtype, device, contiguity, shapes, sizes the kernels' int arithmetic can
// hold), the output allocation and the grid arithmetic are the same for all of them, so they live
// here once: a rung's file then shows only what that rung changes.
//
//   GEMM_MAX_DIM      the largest M, N or K any kernel here accepts;
//   check_gemm_shapes the checks of x's and w's shapes and device, any element type;
//   check_gemm_inputs the input checks of float32 operands;
//   gemm_new_output   the input checks and the (M, N) output;
//   gemm_grid         a 1-D grid of one block per output tile.

#pragma once

#include <cstdint>

#include "common/check.cuh"

// Tile arithmetic in the kernels is 32-bit (k0 + BK, M + BM - 1, ...): keeping every dimension
// this far below 2^31 means none of it can overflow. Products such as row * K are 64-bit.
constexpr int64_t GEMM_MAX_DIM = INT32_MAX - 1024;

// Checks x (M, K) and w (N, K) of any element type: 2-D, the same K and device, sizes the kernels' 32-bit
// tile arithmetic can hold (a launcher checks their dtype, device and contiguity first).
inline void check_gemm_shapes(const torch::Tensor& x, const torch::Tensor& w) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2, "x and w must be 2-D, x (M, K) and w (N, K), got x ", shape_string(x),
              " and w ", shape_string(w));
  TORCH_CHECK(x.size(1) == w.size(1), "x (M, K) and w (N, K) must have the same K, got x ", shape_string(x),
              " and w ", shape_string(w));
  CHECK_SAME_DEVICE(x, w);
  TORCH_CHECK(x.size(0) <= GEMM_MAX_DIM && w.size(0) <= GEMM_MAX_DIM && x.size(1) <= GEMM_MAX_DIM,
              "M, N and K must each be at most ", num(GEMM_MAX_DIM), ", got x ", shape_string(x), " and w ", shape_string(w));
}

// Checks x (M, K) and w (N, K): float32, CUDA, contiguous, then check_gemm_shapes.
inline void check_gemm_inputs(const torch::Tensor& x, const torch::Tensor& w) {
  CHECK_FLOAT_CUDA_INPUT(x);
  CHECK_FLOAT_CUDA_INPUT(w);
  check_gemm_shapes(x, w);
}

// check_gemm_inputs, then the (M, N) output on their device: zeros when K == 0 (every element is
// an empty sum), uninitialised otherwise (the kernel writes every element).
inline torch::Tensor gemm_new_output(const torch::Tensor& x, const torch::Tensor& w) {
  check_gemm_inputs(x, w);
  const auto options = x.options();
  return x.size(1) == 0 ? torch::zeros({x.size(0), w.size(0)}, options) : torch::empty({x.size(0), w.size(0)}, options);
}

// One block per BM x BN output tile, in a 1-D grid: gridDim.x goes to 2^31 - 1 while gridDim.y
// stops at 65535, so any M and N fit. Block b takes M tile b % tiles_m of N tile b / tiles_m:
// consecutive blocks, which run at the same time, share one tile of w (the larger operand at the
// problems' shape: 8192 x 8192) and read it from L2 rather than each from DRAM.
//
// Rungs 1-3 number their blocks differently (N tile first, see their kernels) but have the same
// number of tiles, so they size their grid with this too.
inline dim3 gemm_grid(int64_t M, int64_t N, int BM, int BN) {
  const int64_t tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
  TORCH_CHECK(tiles <= INT32_MAX, "the output has ", num(tiles), " tiles of ", num(BM), " x ", num(BN),
              ", more than a grid holds (", num(INT32_MAX), ")");
  return dim3(static_cast<unsigned int>(tiles));
}
