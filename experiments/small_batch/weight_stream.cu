// weight_stream.cu: a first candidate for the small-batch regime (M <= 16 rows of x), measured against
// cuBLAS and the weight-read floor by probe.py before anything is built on it.
//
// At M <= 64 and K = N = 8192, out = x @ w.T + bias is bound by one read of w (268 MB); the FLOPs are
// 2*M*N*K, 0.13 GFLOP per row of x, which the FMA pipes do in about 2 us per row. So a kernel that streams
// w once, at the device's read bandwidth, and multiplies it on CUDA cores in fp32 (the strict tier's
// accuracy, no tensor cores, no split operands) has the floor within reach at small M.
//
// The shape: each warp owns R consecutive rows of w and walks K in steps of 128 floats, a float4 per lane,
// so every load of w is a coalesced 512-byte line, read once. Each float4 of w meets the same four columns
// of every row of x (read through L1: all warps of a block read the same x), R * MT partial sums per lane
// in registers; at the end a warp's lanes add their sums with shuffles and lane 0 writes R * M outputs.
// A CTA is WARPS warps: N / (R * WARPS) CTAs, 256 at N = 8192, R = 4, WARPS = 8.
//
//   weight_stream(x, w, bias, rows_per_warp)   x (M, K), w (N, K), bias (N,) float32 CUDA, contiguous,
//                                              K % 4 == 0, 1 <= M <= 16, rows_per_warp in {1, 2, 4, 8}
#include "linear_inputs.cuh"

namespace weight_stream_detail {

constexpr int kWarps = 8;

__device__ __forceinline__ float4 load_streaming(const float* p) {  // w: read once, keep it out of L1
  return __ldcs(reinterpret_cast<const float4*>(p));
}

template <int MT, int R>
__global__ void __launch_bounds__(kWarps * 32)
    weight_stream_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                         float* __restrict__ out, int M, int N, int K) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n0 = (blockIdx.x * kWarps + warp) * R;
  if (n0 >= N) return;  // whole warps only: no barrier below
  float acc[R][MT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m) acc[r][m] = 0.f;

  for (int k = lane * 4; k < K; k += 128) {
    float4 wv[R];
#pragma unroll
    for (int r = 0; r < R; ++r)
      wv[r] = n0 + r < N ? load_streaming(w + static_cast<int64_t>(n0 + r) * K + k) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      if (m < M) {
        const float4 xv = __ldg(reinterpret_cast<const float4*>(x + static_cast<int64_t>(m) * K + k));
#pragma unroll
        for (int r = 0; r < R; ++r) {
          acc[r][m] = fmaf(xv.x, wv[r].x, acc[r][m]);
          acc[r][m] = fmaf(xv.y, wv[r].y, acc[r][m]);
          acc[r][m] = fmaf(xv.z, wv[r].z, acc[r][m]);
          acc[r][m] = fmaf(xv.w, wv[r].w, acc[r][m]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      float v = acc[r][m];
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (lane == 0 && m < M && n0 + r < N) out[static_cast<int64_t>(m) * N + n0 + r] = v + bias[n0 + r];
    }
  }
}

template <int MT, int R>
void launch(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias, torch::Tensor& out) {
  const int M = static_cast<int>(x.size(0)), K = static_cast<int>(x.size(1)), N = static_cast<int>(w.size(0));
  const int blocks = (N + R * kWarps - 1) / (R * kWarps);
  weight_stream_kernel<MT, R><<<blocks, kWarps * 32, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), M, N, K);
  LAUNCH_CHECK();
}

template <int MT>
void launch_rows(int rows_per_warp, const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                 torch::Tensor& out) {
  switch (rows_per_warp) {
    case 1: return launch<MT, 1>(x, w, bias, out);
    case 2: return launch<MT, 2>(x, w, bias, out);
    case 4: return launch<MT, 4>(x, w, bias, out);
    case 8: return launch<MT, 8>(x, w, bias, out);
    default: TORCH_CHECK(false, "rows_per_warp must be 1, 2, 4 or 8, got ", num(rows_per_warp));
  }
}

}  // namespace weight_stream_detail

// @export: out = x @ w.T + bias for 1 <= M <= 16 rows of x, streaming w once on CUDA cores (fp32 FMA); rows_per_warp rows of w per warp
torch::Tensor weight_stream(torch::Tensor x, torch::Tensor w, torch::Tensor bias, int64_t rows_per_warp) {
  check_linear_inputs(x, w, bias, "weight_stream", 16);
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor out = torch::empty({x.size(0), w.size(0)}, x.options());
  const int M = static_cast<int>(x.size(0));
  const int rows = static_cast<int>(rows_per_warp);
  using namespace weight_stream_detail;
  if (M <= 1) launch_rows<1>(rows, x, w, bias, out);
  else if (M <= 2) launch_rows<2>(rows, x, w, bias, out);
  else if (M <= 4) launch_rows<4>(rows, x, w, bias, out);
  else if (M <= 8) launch_rows<8>(rows, x, w, bias, out);
  else launch_rows<16>(rows, x, w, bias, out);
  return out;
}
