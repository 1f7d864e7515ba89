// A shortcut of notebook 12's exercise that its checker must refuse: the conversion left to an intrinsic (right, but not the exercise).

#include <cuda_bf16.h>

// @launch
__global__ void to_bf16x2_kernel(const float* __restrict__ x, int* __restrict__ out, int pairs) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < pairs) {
    const __nv_bfloat162 two = __floats2bfloat162_rn(x[2 * i], x[2 * i + 1]);
    out[i] = *reinterpret_cast<const int*>(&two);
  }
}
