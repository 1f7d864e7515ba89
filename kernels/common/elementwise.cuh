// kernels/common/elementwise.cuh: what the memory-bound kernels share (kernels/activations.cu,
// kernels/groupnorm.cu, kernels/min_bias_broadcast.cu; notebooks 05-07).
//
// Those kernels do a few FLOPs per float and move every byte once, so their speed is the memory
// system's: the aim is to keep enough bytes in flight and to move them in the widest accesses.
// Here lives, once:
//   load4 / store4      16-byte (float4) accesses: one instruction moves 4 floats, so a warp
//                       moves 512 contiguous bytes per instruction instead of 128;
//   index_mod           i % m for the channel of a flat index, 32-bit when the numbers allow;
//   resident_blocks     (host) how many blocks of a kernel the GPU keeps resident at once
//                       (asked once per device and kernel: common/device_cache.cuh);
//   resident_grid       (host) the grid of a grid-stride kernel.

#pragma once

#include <algorithm>
#include <cstdint>

#include "common/check.cuh"
#include "common/device_cache.cuh"

__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }

__device__ __forceinline__ void store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }

// i % m for i >= 0, m > 0. The channel of flat element i of a (rows, cols) tensor is i % cols,
// one per float4 in the kernels here. A 64-bit remainder is a software routine of dozens of
// instructions on the GPU, a 32-bit one about a third of that; tensors under 2^32 elements (all
// the problems' shapes) take the short path. The branch is the same for a whole warp in practice.
__device__ __forceinline__ int64_t index_mod(int64_t i, int64_t m) {
  if (((i | m) >> 32) == 0) {
    return static_cast<int64_t>(static_cast<uint32_t>(i) % static_cast<uint32_t>(m));
  }
  return i % m;
}

// How many blocks of `kernel` (with `threads` threads and `smem_bytes` of dynamic shared memory)
// the GPU keeps resident at once. The occupancy query looks at the kernel's actual registers and
// shared memory, so the answer is right for every instantiation; it and the SM count are asked
// once per device (common/device_cache.cuh), not on every launch. The launcher holds a CUDAGuard
// for `device`, so the occupancy query, which is about the current device, is about it too.
template <class Kernel>
inline int64_t resident_blocks(Kernel kernel, int threads, size_t smem_bytes, int device) {
  const int sm_count = device_attribute<cudaDevAttrMultiProcessorCount>(device);
  const int blocks_per_sm = occupancy_blocks_per_sm(kernel, threads, smem_bytes);
  return static_cast<int64_t>(sm_count) * std::max(blocks_per_sm, 1);
}

// How many resident waves of blocks a grid-stride kernel's grid may span before its loop takes
// over. One wave looks enough (more blocks only wait for the resident ones), but it measured
// slower on an H100 at problem 37's shape (32768 x 4096; experiments/memory_bound/README.md). With
// one wave every thread makes many trips in step with all the others, and the last, partial trip
// leaves SMs idle; blocks that each take one chunk and retire let the block scheduler keep every
// SM busy to the end. At the 33.5 MB shapes of 94, 75 and 62 the two were within run-to-run noise.
// 64 waves covers the problems' tensors with one trip per thread, and the loop still bounds the
// grid for tensors far larger. (Compile with -DWORKBOOK_GRID_WAVES=1 to compare.)
#ifndef WORKBOOK_GRID_WAVES
#define WORKBOOK_GRID_WAVES 64
#endif

// The grid of a grid-stride kernel: enough blocks for `work` blocks' worth of items, at most
// WORKBOOK_GRID_WAVES resident waves of them.
template <class Kernel>
inline unsigned int resident_grid(Kernel kernel, int threads, size_t smem_bytes, int64_t work, int device) {
  const int64_t cap = resident_blocks(kernel, threads, smem_bytes, device) * WORKBOOK_GRID_WAVES;
  return static_cast<unsigned int>(std::max<int64_t>(1, std::min({work, cap, static_cast<int64_t>(INT32_MAX)})));
}
