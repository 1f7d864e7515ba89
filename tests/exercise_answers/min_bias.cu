// The reference answer of notebook 07's from-scratch exercise (no chapter renders this folder):
// out (1, C, N, 1) = min over row n of x (N, C) + bias[c], one block per row. Self-contained.

// The minimum that keeps a NaN, as torch.min does (fminf would drop it).
__device__ float min_keep_nan(float a, float b) { return (a < b || a != a) ? a : b; }

// @launch
__global__ void min_bias_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                float* __restrict__ out, int N, int C) {
  extern __shared__ float scratch[];  // one float per warp
  const int n = blockIdx.x;
  const float* row = x + static_cast<long long>(n) * C;
  float m = INFINITY;
  for (int c = threadIdx.x; c < C; c += blockDim.x) m = min_keep_nan(m, row[c]);
  for (int off = 16; off > 0; off /= 2) m = min_keep_nan(m, __shfl_xor_sync(0xffffffffu, m, off));
  const int warps = (blockDim.x + 31) / 32;
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = m;
  __syncthreads();
  m = scratch[0];
  for (int w = 1; w < warps; ++w) m = min_keep_nan(m, scratch[w]);
  // out[0, c, n, 0] lives at c * N + n: channel-major, the sample fastest.
  for (int c = threadIdx.x; c < C; c += blockDim.x) out[static_cast<long long>(c) * N + n] = m + bias[c];
}
