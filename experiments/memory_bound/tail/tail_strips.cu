// DRAFT: problem 75's tail as two kernels that overlap: the row minimum announces each finished
// strip of 128 rows; the broadcast, launched as its programmatic dependent (PDL), starts once
// every row-minimum block is running and writes each strip as soon as it is announced.
#include "min_bias_broadcast.cu"

#ifndef STRIP_CHANNELS
#define STRIP_CHANNELS 64
#endif
#ifndef STRIP_TRIGGER
#define STRIP_TRIGGER 1
#endif
#ifndef STRIP_SYNC
#define STRIP_SYNC 1  // 1: red.release / ld.acquire; 0: __threadfence around relaxed accesses
#endif
#ifndef STRIP_BIAS_SMEM
#define STRIP_BIAS_SMEM 0
#endif
constexpr int kStrip = 128;
__device__ __forceinline__ void announce(int* p) {
  if (STRIP_SYNC) {
    asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(p) : "memory");
  } else {
    __threadfence();
    atomicAdd(p, 1);
  }
}
__device__ __forceinline__ int load_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}  // rows per strip: a warp's 32 float4s

__device__ __forceinline__ int volatile_load(const int* p) { return *reinterpret_cast<const volatile int*>(p); }

template <int L, int V>
__global__ void __launch_bounds__(kTeamThreads)
    row_min_strips_kernel(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                          float* __restrict__ rowmin, int* strip_done, int64_t N, int64_t G, int D, float eps) {
  if (STRIP_TRIGGER) asm volatile("griddepcontrol.launch_dependents;");
  constexpr int kTeams = 32 / L;
  __shared__ float scratch[32];
  const int lane = threadIdx.x % 32, l = lane % L, team = lane / L;
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    MinSink sink;
    for (int64_t g0 = static_cast<int64_t>(warp) * kTeams * kRowMinUnroll; g0 < G;
         g0 += static_cast<int64_t>(warps) * kTeams * kRowMinUnroll) {
      team_trip<L, V, kRowMinUnroll, WelfordStats>(x, gamma, beta, eps, Identity{}, sink, [&](int u) {
        const int64_t g = g0 + u * kTeams + team;
        return team_slot<L, V>(n * G + g, g * D, g < G, l, D);
      });
    }
    const float m = block_min(sink.m, scratch);
    if (threadIdx.x == 0) {
      rowmin[n] = m;
      announce(strip_done + n / kStrip);  // the minimum is visible before the count that announces it
    }
  }
}

// Block (k, s): channels k * STRIP_CHANNELS ... of strip s (rows s * 128 ...), once announced.
__global__ void __launch_bounds__(256)
    broadcast_strips_kernel(const float* __restrict__ rowmin, const float* __restrict__ bias, float* __restrict__ out,
                            const int* strip_done, int64_t N, int64_t C) {
  const int64_t s = blockIdx.y, n0 = s * kStrip;
  const int rows = static_cast<int>(std::min<int64_t>(kStrip, N - n0));
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * STRIP_CHANNELS;
  const int q = threadIdx.x % 32, w = threadIdx.x / 32;
  __shared__ float bias_s[STRIP_CHANNELS];
  if (STRIP_BIAS_SMEM) {
    for (int j = threadIdx.x; j < STRIP_CHANNELS; j += blockDim.x) bias_s[j] = c0 + j < C ? bias[c0 + j] : 0.f;
  }
  if (threadIdx.x == 0) {
    if (STRIP_SYNC) {
      while (load_acquire(strip_done + s) < rows) __nanosleep(200);
    } else {
      while (volatile_load(strip_done + s) < rows) __nanosleep(200);
      __threadfence();
    }
  }
  __syncthreads();
  if (4 * q >= rows) return;
  const float4 m = __ldcg(reinterpret_cast<const float4*>(rowmin + n0) + q);
#pragma unroll 8
  for (int k = w; k < STRIP_CHANNELS; k += 8) {
    const int64_t c = c0 + k;
    if (c < C) {
      const float b = STRIP_BIAS_SMEM ? bias_s[k] : bias[c];
      store4(out + c * N + n0 + 4 * q, make_float4(m.x + b, m.y + b, m.z + b, m.w + b));
    }
  }
}

// @export: DRAFT the whole tail, strips overlapped (pdl) or not; memset: zero the flags with cudaMemsetAsync, not torch::zeros
torch::Tensor group_norm_min_bias_strips(torch::Tensor x, int64_t G, torch::Tensor gamma, torch::Tensor beta, double eps,
                                         torch::Tensor bias, bool pdl, bool memset) {
  check_group_norm_inputs(x, gamma, beta, G);
  check_broadcast_bias(x, bias);
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t N = x.size(0), C = x.size(1), D = C / G;
  TORCH_CHECK(N % 4 == 0 && team_path_ok(D, {x.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>()}),
              "draft: team path, N % 4 == 0");
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int64_t S = (N + kStrip - 1) / kStrip;
  torch::Tensor rowmin = torch::empty({N}, x.options());
  torch::Tensor done;
  if (memset) {
    done = torch::empty({S}, x.options().dtype(torch::kInt32));
    C10_CUDA_CHECK(cudaMemsetAsync(done.data_ptr<int>(), 0, S * sizeof(int), stream));
  } else {
    done = torch::zeros({S}, x.options().dtype(torch::kInt32));
  }
  with_team_lanes(D, [&](auto lanes) {
    auto kernel = row_min_strips_kernel<decltype(lanes)::value, GROUPNORM_TEAM_VECS>;
    const unsigned int grid = resident_grid(kernel, kTeamThreads, 0, N, x.get_device());
    kernel<<<grid, kTeamThreads, 0, stream>>>(x.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(),
                                              rowmin.data_ptr<float>(), done.data_ptr<int>(), N, G,
                                              static_cast<int>(D), static_cast<float>(eps));
    LAUNCH_CHECK();
  });
  torch::Tensor out = torch::empty({1, C, N, 1}, x.options());
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned int>((C + STRIP_CHANNELS - 1) / STRIP_CHANNELS), static_cast<unsigned int>(S));
  cfg.blockDim = dim3(256);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  C10_CUDA_CHECK(cudaLaunchKernelEx(&cfg, broadcast_strips_kernel, rowmin.data_ptr<float>(), bias.data_ptr<float>(),
                                    out.data_ptr<float>(), static_cast<const int*>(done.data_ptr<int>()), N, C));
  LAUNCH_CHECK();
  return out;
}

// @export: DRAFT the strip-announcing row minimum alone into rowmin (N) and done (S)
void row_min_strips_only(torch::Tensor x, int64_t G, torch::Tensor gamma, torch::Tensor beta, double eps,
                         torch::Tensor rowmin, torch::Tensor done) {
  const int64_t N = x.size(0), C = x.size(1), D = C / G;
  with_team_lanes(D, [&](auto lanes) {
    auto kernel = row_min_strips_kernel<decltype(lanes)::value, GROUPNORM_TEAM_VECS>;
    const unsigned int grid = resident_grid(kernel, kTeamThreads, 0, N, x.get_device());
    kernel<<<grid, kTeamThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(), rowmin.data_ptr<float>(),
        done.data_ptr<int>(), N, G, static_cast<int>(D), static_cast<float>(eps));
    LAUNCH_CHECK();
  });
}

// @export: DRAFT the strip broadcast alone (flags already set)
void broadcast_strips_only(torch::Tensor rowmin, torch::Tensor bias, torch::Tensor done, torch::Tensor out) {
  const int64_t C = out.size(1), N = out.size(2);
  const int64_t S = (N + kStrip - 1) / kStrip;
  dim3 grid(static_cast<unsigned int>((C + STRIP_CHANNELS - 1) / STRIP_CHANNELS), static_cast<unsigned int>(S));
  broadcast_strips_kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      rowmin.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), done.data_ptr<int>(), N, C);
  LAUNCH_CHECK();
}
