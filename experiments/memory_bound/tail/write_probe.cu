// DRAFT probe: the broadcast's write pattern alone. Block (k, s) writes channels k*CPB .. of rows
// s*R .. s*R+R-1: a warp writes R*4 contiguous bytes per channel (R a multiple of 128).
#include "common/check.cuh"
#include "common/elementwise.cuh"

__global__ void __launch_bounds__(256)
    strip_write_kernel(const float* __restrict__ rowmin, const float* __restrict__ bias, float* __restrict__ out,
                       int64_t N, int64_t C, int R, int cpb) {
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * R;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * cpb;
  const int q = threadIdx.x % 32, w = threadIdx.x / 32;
  for (int p = q; p < R / 4; p += 32) {
    const int64_t n = n0 + 4 * p;
    if (n >= N) break;
    const float4 m = load4(rowmin + n);
    for (int k = w; k < cpb; k += 8) {
      const int64_t c = c0 + k;
      if (c < C) {
        const float b = bias[c];
        store4(out + c * N + n, make_float4(m.x + b, m.y + b, m.z + b, m.w + b));
      }
    }
  }
}

// @export: DRAFT out (C, N) = rowmin[n] + bias[c] written in strips of R rows x cpb channels per block
void strip_write(torch::Tensor rowmin, torch::Tensor bias, torch::Tensor out, int64_t R, int64_t cpb) {
  const int64_t C = out.size(0), N = out.size(1);
  dim3 grid(static_cast<unsigned int>((C + cpb - 1) / cpb), static_cast<unsigned int>((N + R - 1) / R));
  strip_write_kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      rowmin.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), N, C, static_cast<int>(R),
      static_cast<int>(cpb));
  LAUNCH_CHECK();
}
