// A shortcut of notebook 12's exercise that its checker must refuse: rounded half up: a tie goes up, not to the even neighbour.

__device__ unsigned bf16_bits(float v) {
  const unsigned u = __float_as_uint(v);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0u) return 0x7fc0u;
  return (u + 0x8000u) >> 16;
}

// @launch
__global__ void to_bf16x2_kernel(const float* __restrict__ x, int* __restrict__ out, int pairs) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < pairs) out[i] = static_cast<int>(bf16_bits(x[2 * i]) | (bf16_bits(x[2 * i + 1]) << 16));
}
