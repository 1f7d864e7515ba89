// kernels/common/device_cache.cuh: the launchers' questions to the GPU, asked once per device.
//
// A launcher runs on every call from Python, and some of what it asks the CUDA runtime has the
// same answer every time while the process lives: a device's attributes (its SM count, its
// compute capability), how many blocks of a kernel an SM keeps resident at a given block size,
// and whether a kernel may use more than 48 KB of dynamic shared memory (cudaFuncSetAttribute
// sets that once, for that kernel on that device). Each query is a call into the CUDA runtime,
// and the occupancy query works its answer out from the kernel's resources every time: together
// up to microseconds of host time per launch, while the memory-bound kernels here run for tens of
// microseconds. So each question is asked the first time and its answer looked up afterwards:
//
//   device_attribute<ATTR>(device)       cudaDeviceGetAttribute(ATTR), once per device;
//   is_sm90(device)                      compute capability 9.0 (the wgmma kernels' GPU);
//   occupancy_blocks_per_sm(kernel, threads, smem_bytes)
//                                        cudaOccupancyMaxActiveBlocksPerMultiprocessor, once
//                                        per (current device, kernel, threads, shared memory);
//   max_active_clusters(kernel, ...)     cudaOccupancyMaxActiveClusters: the clusters that run at
//                                        once (a persistent kernel's grid)
//   allow_dynamic_smem(kernel, bytes)    cudaFuncSetAttribute(MaxDynamicSharedMemorySize), once
//                                        per (current device, kernel, bytes); a kernel must be
//                                        allowed more than 48 KB before its first launch.
//
// The kernel questions are about the current device, the one the launcher's CUDAGuard selected,
// and are remembered under it. A query that fails throws (C10_CUDA_CHECK) and leaves nothing
// behind, so the next call asks again. The answers are shared by every thread of the process
// (a mutex guards them; looking one up costs far less than the query).

#pragma once

#include <map>
#include <mutex>
#include <tuple>

#include "common/check.cuh"

// Answers by key, each computed by `query()` the first time its key is asked for.
template <class Key, class Value>
class HostCache {
 public:
  template <class Query>
  Value get(const Key& key, Query&& query) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto found = values_.find(key);
    if (found != values_.end()) return found->second;
    const Value value = query();  // a throw here remembers nothing
    values_.emplace(key, value);
    return value;
  }

 private:
  std::mutex mutex_;
  std::map<Key, Value> values_;
};

// The index of the device that the calling thread's CUDA calls go to (the launcher's CUDAGuard).
inline int current_device() {
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

// cudaDeviceGetAttribute(ATTR) of `device`, asked once per device.
template <cudaDeviceAttr ATTR>
inline int device_attribute(int device) {
  static HostCache<int, int> cache;  // one per attribute
  return cache.get(device, [&] {
    int value = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&value, ATTR, device));
    return value;
  });
}

// How many blocks of `kernel` (with `threads` threads and `smem_bytes` of dynamic shared memory)
// one SM of the current device keeps resident at once: the occupancy query, which looks at the
// kernel's actual registers and shared memory, asked once per kernel and launch shape.
template <class Kernel>
inline int occupancy_blocks_per_sm(Kernel kernel, int threads, size_t smem_bytes) {
  static HostCache<std::tuple<int, const void*, int, size_t>, int> cache;
  const auto key = std::make_tuple(current_device(), reinterpret_cast<const void*>(kernel), threads, smem_bytes);
  return cache.get(key, [&] {
    int blocks = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem_bytes));
    return blocks;
  });
}

// The launch attribute that groups blocks into clusters of `cluster` along x (cudaLaunchKernelEx).
inline cudaLaunchAttribute cluster_dimension(int cluster) {
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(cluster);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  return attribute;
}

// How many clusters of `cluster` blocks of `kernel` (`threads` threads, `smem_bytes` of dynamic
// shared memory, already allowed) the current device runs at once: a persistent kernel's grid.
// A cluster's blocks must sit on SMs of one GPC, so this can be less than the SMs / cluster.
template <class Kernel>
inline int max_active_clusters(Kernel kernel, int cluster, int threads, size_t smem_bytes) {
  static HostCache<std::tuple<int, const void*, int, int, size_t>, int> cache;
  const auto key =
      std::make_tuple(current_device(), reinterpret_cast<const void*>(kernel), cluster, threads, smem_bytes);
  return cache.get(key, [&] {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(static_cast<unsigned>(cluster));
    config.blockDim = dim3(static_cast<unsigned>(threads));
    config.dynamicSmemBytes = smem_bytes;
    cudaLaunchAttribute attribute = cluster_dimension(cluster);
    config.attrs = &attribute;
    config.numAttrs = 1;
    int clusters = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
    TORCH_CHECK(clusters > 0, "no cluster of ", num(cluster), " blocks of ", num(threads), " threads and ",
                num(static_cast<int64_t>(smem_bytes)), " bytes of shared memory fits on this device");
    return clusters;
  });
}

// Lets `kernel` use `bytes` of dynamic shared memory per block on the current device: needed
// above 48 KB, once per kernel and device, before the kernel's first launch there.
template <class Kernel>
inline void allow_dynamic_smem(Kernel kernel, size_t bytes) {
  static HostCache<std::tuple<int, const void*, size_t>, bool> cache;
  const auto key = std::make_tuple(current_device(), reinterpret_cast<const void*>(kernel), bytes);
  cache.get(key, [&] {
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    return true;
  });
}

// Whether a device is an sm_90 (compute capability 9.0): the only GPU the wgmma kernels are built for.
inline bool is_sm90(int device) {
  return device_attribute<cudaDevAttrComputeCapabilityMajor>(device) == 9 &&
         device_attribute<cudaDevAttrComputeCapabilityMinor>(device) == 0;
}
