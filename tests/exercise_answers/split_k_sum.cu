// The reference answer of notebook 11's from-scratch exercise (no chapter renders this folder): split-K's fix-up,
// out[m, n] = bias[n] + the sum over s of partials[s, m, n], one thread per element of out. Self-contained.

// @launch
__global__ void split_k_sum_kernel(const float* __restrict__ partials, const float* __restrict__ bias,
                                   float* __restrict__ out, int S, int M, int N) {
  const long long total = static_cast<long long>(M) * N;  // the elements of out, and the distance between two slices
  // A grid-stride loop: right with any grid, the launch cell's ceil(M * N / THREADS_SPLIT_K) blocks included;
  // a thread of the last, partial block past M * N does nothing.
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    float acc = 0.0f;
    for (int s = 0; s < S; ++s) acc += partials[s * total + i];  // the slices in order; a warp reads 32 neighbours
    out[i] = acc + bias[i % N];  // element i is (m, n) = (i / N, i % N)
  }
}
