// A shortcut of notebook 12's exercise that its checker must refuse: rounded to nearest even with no care for NaN: a NaN whose payload is in the dropped bits becomes infinity.

__device__ unsigned bf16_bits(float v) {
  const unsigned u = __float_as_uint(v);
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// @launch
__global__ void to_bf16x2_kernel(const float* __restrict__ x, int* __restrict__ out, int pairs) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < pairs) out[i] = static_cast<int>(bf16_bits(x[2 * i]) | (bf16_bits(x[2 * i + 1]) << 16));
}
