// The reference answer of notebook 12's exercise (no chapter renders it): float32 to bf16 by hand, two values packed
// in one 32-bit word, as the mixed-input main loop hands them to the tensor cores.

// bf16's bits of v: the float's top 16 bits, rounded on the 16 below them to nearest, ties to even. Adding 0x7fff
// and the kept part's lowest bit carries into the kept part exactly when the dropped part is above half, or half
// with the kept part odd; a carry out of the significand moves the exponent up, which is right (up to infinity).
// A NaN whose payload sits in the dropped bits would round to infinity that way: it becomes the quiet NaN.
__device__ unsigned bf16_bits(float v) {
  const unsigned u = __float_as_uint(v);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0u) return 0x7fc0u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// @launch
__global__ void to_bf16x2_kernel(const float* __restrict__ x, int* __restrict__ out, int pairs) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < pairs) out[i] = static_cast<int>(bf16_bits(x[2 * i]) | (bf16_bits(x[2 * i + 1]) << 16));
}
