// kernels/common/cp_async.cuh: the cp.async wrappers (sm_80+), written once for the GEMMs that copy
// global memory into shared tiles without registers: rung 7 (common/gemm_pipelined.cuh, where
// notebooks/03_tiled_gemm.ipynb introduces them) and the mma.sync GEMM of rungs 8 and 10
// (common/gemm_mma.cuh, through common/tensor_core.cuh).
//
//   cp_async_f32      a 4-byte copy (.ca), the one that can transpose a tile;
//   cp_async_16       a 16-byte copy (.cg), four consecutive floats;
//   cp_async_commit   closes a group of copies;
//   cp_async_wait     waits until at most PENDING groups are in flight.

#pragma once

#include <cuda_runtime.h>

namespace async_copy {

// cp.async: a copy from global to shared memory that the SM carries out in the background. The
// thread issues it and goes on; no register holds the value on the way, and the thread waits only
// when it needs the data (cp_async_wait). With `src_bytes` = 0 it reads nothing and writes a zero:
// the edge tiles' zero fill, without a branch around the copy.
// The 4-byte form (.ca: through L1) is the one that can transpose: each element goes to its own
// shared address. The 16-byte form copies 4 consecutive floats to 4 consecutive shared words,
// which would keep the tile k-contiguous, the layout rung 7's compute loop does not want.
__device__ __forceinline__ void cp_async_f32(float* smem, const float* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem), "r"(valid ? 4 : 0));
}

// Four consecutive floats from global to shared memory in one asynchronous copy (.cg: cached in
// L2 only, as data used once per block should be). Both addresses must be 16-byte aligned: the
// mma.sync GEMM takes this path only when K % 4 == 0 and x and w start on 16-byte boundaries, so
// every row (K * 4 bytes long) and every 4-float chunk of it is aligned. With `valid` false it
// reads nothing and writes 16 zero bytes (the edge tiles' zero fill).
__device__ __forceinline__ void cp_async_16(float* smem, const float* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0));
}

// Closes the group of copies issued since the last commit: cp_async_wait counts groups.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most PENDING of this thread's groups are still in flight. Only the thread's own
// copies: a __syncthreads() after it makes every thread's copies visible to the block.
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING));
}

}  // namespace async_copy
