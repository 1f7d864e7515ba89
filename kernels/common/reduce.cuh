// kernels/common/reduce.cuh: sums across the 32 threads of a warp, without shared memory.
//
// First used by the GEMM ladder's second rung (kernels/gemm_02_coalesced.cu,
// notebooks/02_naive_gemm.ipynb), where the 32 lanes of a warp each accumulate a partial dot
// product over their share of K and must add them up; later the GroupNorm kernels
// (notebooks/06_groupnorm_reduction.ipynb) reduce each group's sum and sum of squares the same way.
//
// __shfl_xor_sync(mask, v, offset) hands each lane the value of v held by lane (lane ^ offset),
// register to register, in one instruction. Adding it for offsets 16, 8, 4, 2, 1 is a butterfly:
// each step doubles the number of lanes whose values a lane's sum contains (2, 4, 8, 16, 32), so
// five steps sum all 32 where a chain of additions would take 31. Lanes l and l ^ offset add the
// same two numbers, only in swapped order, and float addition is commutative, so all 32 lanes end
// with the bit-identical total: any lane may write it out, and a warp computing several sums can
// let lane j write sum j, all in one coalesced store.
#pragma once

// The sum of v over the 32 lanes of the calling warp, returned to every lane.
// All 32 lanes must call it together (the full mask 0xffffffff names them); a lane that has
// nothing to contribute passes 0.0f rather than skipping the call.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}
