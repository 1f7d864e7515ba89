// dependent_launch.cuh: programmatic dependent launch (PDL, Hopper and later): a kernel that
// consumes what the previous kernel on the stream produced may be *launched* before that kernel
// has finished, so its launch and block scheduling overlap the producer's last blocks instead
// of following them.
//
//   wait_for_producer()    (device) the first statement of a dependent kernel: returns once the
//                          previous kernel on the stream has completed and its writes are
//                          visible. Nothing before it may read what the producer writes. It
//                          returns at once when the kernel was launched the ordinary way, so
//                          the same kernel serves both launches.
//   launch_dependent(kernel, grid, block, stream, args...)   (host) launches `kernel` as a
//                          dependent of the previous kernel on `stream` (no dynamic shared
//                          memory); the launch is checked. On GPUs before compute capability
//                          9.0 it is an ordinary launch.
//
// The producer needs no change: without an explicit trigger its blocks let the dependent go as
// they exit. What PDL saves is the gap between two kernels, not the wait for the producer's
// results: notebook 07 times min_bias_broadcast.cu's tail both ways in one run and says how much.
#pragma once

#include "common/check.cuh"
#include "common/device_cache.cuh"

__device__ __forceinline__ void wait_for_producer() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, Args... args) {
  const int major = device_attribute<cudaDevAttrComputeCapabilityMajor>(current_device());  // asked once per device
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = major >= 9 ? 1 : 0;
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
  LAUNCH_CHECK();
}
