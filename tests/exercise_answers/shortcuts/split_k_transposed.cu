// Shortcut: out[m, n] from partials[s, n, m], each slice read as if it were (N, M) row-major: the transpose.

// @launch
__global__ void split_k_sum_kernel(const float* __restrict__ partials, const float* __restrict__ bias,
                                   float* __restrict__ out, int S, int M, int N) {
  const long long total = static_cast<long long>(M) * N;
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= total) return;
  const long long m = i / N, n = i % N;
  float acc = 0.0f;
  for (int s = 0; s < S; ++s) acc += partials[s * total + n * M + m];  // shortcut: (n, m), not (m, n)
  out[i] = acc + bias[n];
}
