// Bandwidth probes: pure reads, pure writes, broadcast-write variants.
#include "common/check.cuh"
#include "common/elementwise.cuh"
#include "common/reduce.cuh"

template <int K>
__global__ void __launch_bounds__(256) read_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t n4) {
  const int64_t base = (static_cast<int64_t>(blockIdx.x) * 256 * K) + threadIdx.x;
  float4 v[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t i = base + k * 256;
    v[k] = i < n4 ? load4(x + 4 * i) : make_float4(INFINITY, INFINITY, INFINITY, INFINITY);
  }
  float m = INFINITY;
#pragma unroll
  for (int k = 0; k < K; ++k) m = nan_min(m, nan_min(nan_min(v[k].x, v[k].y), nan_min(v[k].z, v[k].w)));
  m = warp_min(m);
  if (threadIdx.x % 32 == 0) out[blockIdx.x * 8 + threadIdx.x / 32] = m;
}

template <int K>
__global__ void __launch_bounds__(256) write_kernel(float* __restrict__ y, int64_t n4, float val) {
  const int64_t base = (static_cast<int64_t>(blockIdx.x) * 256 * K) + threadIdx.x;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t i = base + k * 256;
    if (i < n4) store4(y + 4 * i, make_float4(val, val, val, val));
  }
}

// @export: min over blocks of x (contiguous, numel % 4 == 0), K float4 per thread
torch::Tensor read_probe(torch::Tensor x, int64_t K) {
  const int64_t n4 = x.numel() / 4;
  const int64_t per = 256 * K;
  const int64_t blocks = (n4 + per - 1) / per;
  torch::Tensor out = torch::empty({blocks * 8}, x.options());
  auto s = at::cuda::getCurrentCUDAStream();
  switch (K) {
    case 1: read_kernel<1><<<blocks, 256, 0, s>>>(x.data_ptr<float>(), out.data_ptr<float>(), n4); break;
    case 2: read_kernel<2><<<blocks, 256, 0, s>>>(x.data_ptr<float>(), out.data_ptr<float>(), n4); break;
    case 4: read_kernel<4><<<blocks, 256, 0, s>>>(x.data_ptr<float>(), out.data_ptr<float>(), n4); break;
    case 8: read_kernel<8><<<blocks, 256, 0, s>>>(x.data_ptr<float>(), out.data_ptr<float>(), n4); break;
    default: read_kernel<16><<<blocks, 256, 0, s>>>(x.data_ptr<float>(), out.data_ptr<float>(), n4); break;
  }
  LAUNCH_CHECK();
  return out;
}

// @export: fill y with val, K float4 per thread
void write_probe(torch::Tensor y, int64_t K, double val) {
  const int64_t n4 = y.numel() / 4;
  const int64_t per = 256 * K;
  const int64_t blocks = (n4 + per - 1) / per;
  auto s = at::cuda::getCurrentCUDAStream();
  if (K == 1) write_kernel<1><<<blocks, 256, 0, s>>>(y.data_ptr<float>(), n4, val);
  else if (K == 4) write_kernel<4><<<blocks, 256, 0, s>>>(y.data_ptr<float>(), n4, val);
  else write_kernel<8><<<blocks, 256, 0, s>>>(y.data_ptr<float>(), n4, val);
  LAUNCH_CHECK();
}

// broadcast variants: out (C, N) = m[n] + bias[c]
__global__ void __launch_bounds__(256) bc_hoist(const float* __restrict__ m4, const float* __restrict__ bias,
                                                float* __restrict__ out, int64_t N, int64_t C) {
  const int64_t n = 4 * (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x);
  if (n >= N) return;
  const float4 m = load4(m4 + n);
  const int64_t gy = gridDim.y;
  int64_t c = blockIdx.y;
  for (; c + 3 * gy < C; c += 4 * gy) {
    float b[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) b[k] = bias[c + k * gy];
#pragma unroll
    for (int k = 0; k < 4; ++k) store4(out + (c + k * gy) * N + n, make_float4(m.x + b[k], m.y + b[k], m.z + b[k], m.w + b[k]));
  }
  for (; c < C; c += gy) {
    const float b = bias[c];
    store4(out + c * N + n, make_float4(m.x + b, m.y + b, m.z + b, m.w + b));
  }
}

// one block per contiguous run of channels; K channels per block, all loads first
template <int K>
__global__ void __launch_bounds__(256) bc_chunk(const float* __restrict__ m4, const float* __restrict__ bias,
                                                float* __restrict__ out, int64_t N, int64_t C) {
  const int64_t n = 4 * (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x);
  if (n >= N) return;
  const float4 m = load4(m4 + n);
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * K;
  float b[K];
#pragma unroll
  for (int k = 0; k < K; ++k) b[k] = c0 + k < C ? bias[c0 + k] : 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (c0 + k < C) store4(out + (c0 + k) * N + n, make_float4(m.x + b[k], m.y + b[k], m.z + b[k], m.w + b[k]));
}

// flat: float4 i of out, c = i / (N/4)
__global__ void __launch_bounds__(256) bc_flat(const float* __restrict__ m4, const float* __restrict__ bias,
                                               float* __restrict__ out, uint32_t n4, uint32_t total4) {
  for (uint32_t i = blockIdx.x * 256u + threadIdx.x; i < total4; i += gridDim.x * 256u) {
    const uint32_t c = i / n4;
    const uint32_t j = i - c * n4;
    const float4 m = load4(m4 + 4 * j);
    const float b = bias[c];
    store4(out + 4 * static_cast<int64_t>(i), make_float4(m.x + b, m.y + b, m.z + b, m.w + b));
  }
}

// @export: broadcast variant: 0 hoist (grid_y = resident), 1 chunk of 4 channels, 2 chunk of 8, 3 flat
torch::Tensor broadcast_probe(torch::Tensor m, torch::Tensor bias, int64_t variant) {
  const int64_t N = m.numel(), C = bias.numel();
  torch::Tensor out = torch::empty({1, C, N, 1}, m.options());
  auto s = at::cuda::getCurrentCUDAStream();
  const int dev = m.get_device();
  const int64_t gx = (N / 4 + 255) / 256;
  const float* mp = m.data_ptr<float>(); const float* bp = bias.data_ptr<float>(); float* op = out.data_ptr<float>();
  if (variant == 0) {
    const int64_t res = resident_blocks(bc_hoist, 256, 0, dev);
    bc_hoist<<<dim3(gx, std::max<int64_t>(1, std::min<int64_t>(C, res / gx))), 256, 0, s>>>(mp, bp, op, N, C);
  } else if (variant == 1) {
    bc_chunk<4><<<dim3(gx, (C + 3) / 4), 256, 0, s>>>(mp, bp, op, N, C);
  } else if (variant == 2) {
    bc_chunk<8><<<dim3(gx, (C + 7) / 8), 256, 0, s>>>(mp, bp, op, N, C);
  } else {
    const uint32_t total4 = C * N / 4;
    bc_flat<<<std::min<int64_t>((total4 + 255) / 256, resident_blocks(bc_flat, 256, 0, dev) * 4), 256, 0, s>>>(mp, bp, op, N / 4, total4);
  }
  LAUNCH_CHECK();
  return out;
}
