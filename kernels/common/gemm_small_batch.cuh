// kernels/common/gemm_small_batch.cuh: out = x @ w.T + bias at small M (1 to 64 rows of x), the
// schedule `linear` (gemm_10_3xtf32.cu) takes there at both tiers.
//
// At M <= 64 and a large weight (N = K = 8192: 268 MB) the time is one read of w: 0.086 ms at the
// H100's 3.1 TB/s, whatever the FLOPs. The wgmma kernels tile M by 128 rows of x, so a small batch
// gets one row of tiles (64 blocks for 132 SMs) and, at the strict tier, a pass that splits w on
// every call: several times that floor (the record below). Here:
//
// - The product is computed transposed, out.T (N, M) = w (N, K) @ x.T (K, M), on mma.sync m16n8k8
//   (TF32): w fills the instruction's 16 rows, the batch its 8 columns (a batch of 1 wastes 7 of 8
//   columns, which costs nothing where the time is the read of w).
// - A producer warp has the copy engine (TMA) bring boxes of w (16 CW rows x 32 floats) and of x (8 NT
//   rows x 32 floats, NT = M / 8 rounded up) into a ring of STAGES stages; CW consumer warps of 16
//   rows each read their fragments from shared memory. Whole 128-byte lines from DRAM, and nothing
//   held in registers while they travel.
// - The boxes arrive with the 128-byte swizzle (chunk c of row r at chunk c ^ (r % 8)). A fragment's
//   row g reads shared-memory row sigma(g) = g / 2 + 4 (g % 2), for w and for x, so that the two rows a
//   quarter-warp reads at once differ in bit 2 of the swizzle: the eight 16-byte chunks meet all 32
//   banks once. The output row of fragment row g is then sigma(g).
// - Sixteen k values per step, in an order of our choosing (the sum does not care, as long as w and
//   x agree): a lane's float4 at k + 4t holds k positions t and t + 4 of two consecutive k8
//   instructions, exactly where the fragments want them.
// - Strict tier (3xTF32): x is split into big and small parts once per call (M x K floats); w is
//   split in registers on its way to the tensor cores, hi = rna(w), lo = w - hi (the tensor core reads
//   lo's top bits: lo's error is below 2^-21 |w|), with common/tensor_core.cuh's exact split for any
//   warp step that holds a non-finite w (inf and NaN land where fp32 puts them). No pass over w, so
//   a kept w_residual (a drop-in's freeze()) buys nothing here. Three products per pair, the sums
//   promoted into fp32 registers every 256 k, as rung 10.
// - TF32 tier: no conversion at all; the tensor cores read each fp32 value's top 19 bits.
// - K is cut into slices when one slice would leave SMs idle (132 / the blocks of one slice);
//   the slices' partial sums go to a workspace and a second kernel adds them, in order, with the bias.
//
// Measured on the H100 against cuBLAS and the floor: results/nvidia-h100-80gb-hbm3/logs/small_batch/
// (experiments/small_batch/swapped_mma.cu holds the variants this one won against).
#pragma once

#include <algorithm>
#include <cfloat>  // FLT_MAX
#include <cstdint>

#include "common/check.cuh"
#include "common/device_cache.cuh"
#include "common/hopper.cuh"
#include "common/tensor_core.cuh"

namespace small_batch {

constexpr int64_t kMaxM = 64;  // rows of x this schedule takes: 8 tiles of 8 batch columns
constexpr int kBoxK = 32;      // floats of k per box: one 128-byte swizzle row
constexpr int kPromote = 16;   // strict: k16 steps per promoted chunk (256 k, as rung 10)

// The ring's shape: CW consumer warps (16 CW rows of w), KC floats of k per stage, STAGES stages, NT
// tiles of 8 rows of x, STRICT: x's small parts beside its big ones.
template <int NT_, bool STRICT_, int CW_, int KC_, int STAGES_>
struct Config {
  static constexpr int NT = NT_, CW = CW_, KC = KC_, STAGES = STAGES_;
  static constexpr bool STRICT = STRICT_;
  static constexpr int R = 16 * CW, XR = 8 * NT, BOXES = KC / kBoxK;
  static constexpr int W_BOX = R * kBoxK, X_BOX = XR * kBoxK;  // floats
  static constexpr int STAGE = BOXES * (W_BOX + (STRICT ? 2 : 1) * X_BOX);  // floats
  static constexpr int SMEM = STAGES * STAGE * 4 + 1024;  // + room to align the ring to the swizzle's 1024 bytes
  static_assert(KC % kBoxK == 0, "a stage is whole boxes");
  static_assert(SMEM <= 227 * 1024, "the ring must fit an SM's shared memory");
};
// At N = 8192: TF32, 64 rows a block and no split of K (128 blocks); strict, 128 rows a block and two
// slices of K; short stages for up to 16 rows of x, longer ones beyond (the measured best of four).
template <int NT>
using Tf32Config = Config<NT, false, 4, 64, 4>;
template <int NT>
using StrictConfig = std::conditional_t<(NT <= 2), Config<NT, true, 8, 32, 6>, Config<NT, true, 8, 64, 3>>;

__device__ __forceinline__ int sigma(int g) { return (g >> 1) | ((g & 1) << 2); }

__device__ __forceinline__ bool finite4(const float4& v) {
  return fabsf(v.x) <= FLT_MAX && fabsf(v.y) <= FLT_MAX && fabsf(v.z) <= FLT_MAX && fabsf(v.w) <= FLT_MAX;
}

// Promotion (rung 10's): the mma accumulators added into fp32 registers with FADD, and restarted from zero.
template <int NT>
__device__ __forceinline__ void promote(float (&acc)[NT][4], float (&total)[NT][4]) {
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      total[j][i] += acc[j][i];
      acc[j][i] = 0.f;
    }
}

// After the last chunk: the promoted sums added to the last chunk's.
template <int NT>
__device__ __forceinline__ void add_total(float (&acc)[NT][4], const float (&total)[NT][4]) {
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[j][i] += total[j][i];
}

// x's big and small parts, once per call.
__global__ void split_x_kernel(const float4* __restrict__ x, float4* __restrict__ big, float4* __restrict__ small,
                               int64_t n4) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float4 b, s;
    tc::split_tf32x4(x[i], b, s);
    big[i] = b;
    small[i] = s;
  }
}

// One k16 step of a warp: two k8 instructions per tile of 8 rows of x (three products each when STRICT).
template <class C>
__device__ __forceinline__ void step(float (&acc)[C::NT][4], const float4& wa, const float4& wb,
                                     const float4 (&xb)[C::NT], const float4 (&xs)[C::NT], bool exact) {
  const float a0[4] = {wa.x, wb.x, wa.y, wb.y};  // rows g, g + 8 at k positions t, t + 4: the first k8
  const float a1[4] = {wa.z, wb.z, wa.w, wb.w};  // the second
  uint32_t ab0[4], ab1[4], as0[4], as1[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (C::STRICT) {
      if (exact) {
        tc::split_tf32(a0[i], ab0[i], as0[i]);
        tc::split_tf32(a1[i], ab1[i], as1[i]);
      } else {
        ab0[i] = tc::to_tf32(a0[i]);
        ab1[i] = tc::to_tf32(a1[i]);
        as0[i] = __float_as_uint(a0[i] - __uint_as_float(ab0[i]));
        as1[i] = __float_as_uint(a1[i] - __uint_as_float(ab1[i]));
      }
    } else {
      ab0[i] = __float_as_uint(a0[i]);
      ab1[i] = __float_as_uint(a1[i]);
    }
  }
#pragma unroll
  for (int j = 0; j < C::NT; ++j) {
    const uint32_t bb0[2] = {__float_as_uint(xb[j].x), __float_as_uint(xb[j].y)};
    const uint32_t bb1[2] = {__float_as_uint(xb[j].z), __float_as_uint(xb[j].w)};
    if constexpr (C::STRICT) {  // the small products first, while the accumulator is small
      const uint32_t bs0[2] = {__float_as_uint(xs[j].x), __float_as_uint(xs[j].y)};
      const uint32_t bs1[2] = {__float_as_uint(xs[j].z), __float_as_uint(xs[j].w)};
      tc::mma_tf32(acc[j], as0, bb0);
      tc::mma_tf32(acc[j], ab0, bs0);
      tc::mma_tf32(acc[j], as1, bb1);
      tc::mma_tf32(acc[j], ab1, bs1);
    }
    tc::mma_tf32(acc[j], ab0, bb0);
    tc::mma_tf32(acc[j], ab1, bb1);
  }
}

// Block (i, s): rows 16 CW i .. of w against every row of x over slice s of K, into out (one slice, with
// the bias) or into slice s of the workspace (several; bias == nullptr).
template <class C>
__global__ void __launch_bounds__((C::CW + 1) * 32)
    swapped_kernel(const __grid_constant__ CUtensorMap tmap_w, const __grid_constant__ CUtensorMap tmap_xb,
                   const __grid_constant__ CUtensorMap tmap_xs, const float* __restrict__ bias,
                   float* __restrict__ out, int M, int N, int K, int k_per_split) {
  using namespace hopper;
  extern __shared__ __align__(1024) float smem_raw[];
  float* ring = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  __shared__ __align__(8) uint64_t full[C::STAGES], empty[C::STAGES];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row_base = blockIdx.x * C::R;
  const int k_begin = blockIdx.y * k_per_split;
  const int k_end = min(K, k_begin + k_per_split);
  const int chunks = (k_end - k_begin + C::KC - 1) / C::KC;
  if (threadIdx.x == 0) {
    for (int s = 0; s < C::STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], C::CW);
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (warp == C::CW) {  // the producer: one thread keeps the ring full
    if (lane == 0) {
      for (int c = 0; c < chunks; ++c) {
        const int s = c % C::STAGES;
        if (c >= C::STAGES) mbar_wait(&empty[s], ((c / C::STAGES) - 1) & 1);
        mbar_arrive_expect_tx(&full[s], C::STAGE * 4);  // boxes count whole, their zero fill included
        const int k = k_begin + c * C::KC;
        float* stage = ring + s * C::STAGE;
        for (int b = 0; b < C::BOXES; ++b) {
          tma_load_2d(stage + b * C::W_BOX, &tmap_w, &full[s], k + b * kBoxK, row_base);
          tma_load_2d(stage + C::BOXES * C::W_BOX + b * C::X_BOX, &tmap_xb, &full[s], k + b * kBoxK, 0);
          if constexpr (C::STRICT)
            tma_load_2d(stage + C::BOXES * (C::W_BOX + C::X_BOX) + b * C::X_BOX, &tmap_xs, &full[s], k + b * kBoxK, 0);
        }
      }
    }
    return;
  }

  const int sg = sigma(g);
  const int srow = warp * 16 + sg;  // this lane's rows of w in a box: srow and srow + 8 (both sg mod 8)
  const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
  float acc[C::NT][4] = {};
  float total[C::STRICT ? C::NT : 1][4] = {};
  int steps_in_chunk = 0;
  for (int c = 0; c < chunks; ++c) {
    const int s = c % C::STAGES;
    mbar_wait(&full[s], (c / C::STAGES) & 1);
    const int k = k_begin + c * C::KC;
    const float* stage = ring + s * C::STAGE;
#pragma unroll
    for (int b = 0; b < C::BOXES; ++b) {
      const float* wbox = stage + b * C::W_BOX;
      const float* xbox = stage + C::BOXES * C::W_BOX + b * C::X_BOX;
      const float* sbox = stage + C::BOXES * (C::W_BOX + C::X_BOX) + b * C::X_BOX;
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int chunk = (4 * u + t) ^ sg;
        // Beyond K the boxes hold zeros; beyond this slice, the next slice's k: zeroed here, w too (it may
        // hold an inf, and inf * 0 is NaN).
        const bool in = k + b * kBoxK + 16 * u + 4 * t < k_end;
        const float4 wa = in ? *reinterpret_cast<const float4*>(wbox + srow * kBoxK + 4 * chunk) : zero;
        const float4 wb = in ? *reinterpret_cast<const float4*>(wbox + (srow + 8) * kBoxK + 4 * chunk) : zero;
        float4 xb[C::NT], xs[C::NT];
#pragma unroll
        for (int j = 0; j < C::NT; ++j) {
          xb[j] = in ? *reinterpret_cast<const float4*>(xbox + (j * 8 + sg) * kBoxK + 4 * chunk) : zero;
          xs[j] = C::STRICT && in ? *reinterpret_cast<const float4*>(sbox + (j * 8 + sg) * kBoxK + 4 * chunk) : zero;
        }
        const bool exact = C::STRICT && __any_sync(0xffffffffu, !(finite4(wa) && finite4(wb)));
        step<C>(acc, wa, wb, xb, xs, exact);
      }
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[s]);  // this warp is done with stage s
    if constexpr (C::STRICT) {
      steps_in_chunk += C::KC / 16;
      if (steps_in_chunk >= kPromote) {
        steps_in_chunk = 0;
        promote(acc, total);
      }
    }
  }
  if constexpr (C::STRICT) add_total(acc, total);
  // d[0], d[1]: w's row sigma(g), fragment columns 2t and 2t + 1; d[2], d[3]: row sigma(g) + 8. Fragment
  // column c of tile j is row 8j + sigma(c) of x.
  float* dst = out + static_cast<int64_t>(blockIdx.y) * M * N;
  const int row0 = row_base + warp * 16;
#pragma unroll
  for (int j = 0; j < C::NT; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = 8 * j + sigma(2 * t + (i & 1)), n = row0 + sg + (i >= 2 ? 8 : 0);
      if (m < M && n < N) dst[static_cast<int64_t>(m) * N + n] = acc[j][i] + (bias != nullptr ? bias[n] : 0.f);
    }
  }
}

// out[m][n] = bias[n] + the slices' partial sums, added in slice order (the same result on every run).
__global__ void sum_slices_kernel(const float* __restrict__ parts, const float* __restrict__ bias,
                                  float* __restrict__ out, int64_t MN, int N, int slices) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < MN;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float s = 0.f;
    for (int p = 0; p < slices; ++p) s += parts[p * MN + i];
    out[i] = s + bias[i % N];
  }
}

// Whether this schedule takes x (M, K) and w (N, K): an sm_90 GPU (TMA), 1 <= M <= 64, K a positive
// multiple of 4 (TMA's 16-byte row stride), sizes in int.
inline bool applies(const torch::Tensor& x, const torch::Tensor& w) {
  return x.is_cuda() && x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && x.size(0) >= 1 &&
         x.size(0) <= kMaxM && w.size(0) >= 1 && x.size(1) > 0 && x.size(1) % 4 == 0 && w.size(0) <= INT32_MAX / 2 &&
         x.size(1) <= INT32_MAX / 2 && is_sm90(x.get_device());
}

// TMA's rules: contiguous, 16-byte aligned (a copy when not).
inline torch::Tensor tma_ready(const torch::Tensor& t) {
  torch::Tensor c = t.contiguous();
  return aligned16(c.data_ptr()) ? c : c.clone();
}

// slices: how many slices of K (0: as many as leave no SM idle, each at least 4 stages long).
template <class C>
torch::Tensor run(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias, int slices = 0) {
  const int M = static_cast<int>(x.size(0)), K = static_cast<int>(x.size(1)), N = static_cast<int>(w.size(0));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  allow_dynamic_smem(swapped_kernel<C>, C::SMEM);  // more than 48 KB: once per device
  // Slices of K: enough blocks for one per SM, each slice at least 4 stages long.
  const int row_blocks = (N + C::R - 1) / C::R;
  const int k_chunks = (K + C::KC - 1) / C::KC;
  if (slices <= 0) {
    const int sms = device_attribute<cudaDevAttrMultiProcessorCount>(x.get_device());
    slices = std::max(1, std::min(std::max(1, sms / row_blocks), k_chunks / 4));
  }
  const int k_per_split = ((k_chunks + slices - 1) / slices) * C::KC;
  slices = (K + k_per_split - 1) / k_per_split;  // none empty

  torch::Tensor out = torch::empty({M, N}, x.options());
  torch::Tensor xb = x, xs = x;
  if constexpr (C::STRICT) {
    xb = torch::empty_like(x);
    xs = torch::empty_like(x);
    const int64_t n4 = x.numel() / 4;
    split_x_kernel<<<static_cast<unsigned>(std::min<int64_t>((n4 + 255) / 256, 1024)), 256, 0, stream>>>(
        reinterpret_cast<const float4*>(x.data_ptr<float>()), reinterpret_cast<float4*>(xb.data_ptr<float>()),
        reinterpret_cast<float4*>(xs.data_ptr<float>()), n4);
    LAUNCH_CHECK();
  }
  const CUtensorMap tw = hopper::make_tensor_map_2d(w.data_ptr<float>(), N, K, C::R, kBoxK);
  const CUtensorMap tb = hopper::make_tensor_map_2d(xb.data_ptr<float>(), M, K, C::XR, kBoxK);
  const CUtensorMap ts = hopper::make_tensor_map_2d(xs.data_ptr<float>(), M, K, C::XR, kBoxK);
  torch::Tensor parts = slices == 1 ? out : torch::empty({slices, M, N}, x.options());
  swapped_kernel<C><<<dim3(row_blocks, slices), (C::CW + 1) * 32, C::SMEM, stream>>>(
      tw, tb, ts, slices == 1 ? bias.data_ptr<float>() : nullptr, parts.data_ptr<float>(), M, N, K, k_per_split);
  LAUNCH_CHECK();
  if (slices > 1) {
    const int64_t MN = static_cast<int64_t>(M) * N;
    sum_slices_kernel<<<static_cast<unsigned>(std::min<int64_t>((MN + 255) / 256, 1024)), 256, 0, stream>>>(
        parts.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), MN, N, slices);
    LAUNCH_CHECK();
  }
  return out;
}

// f(std::integral_constant<int, NT>{}) for the tiles of 8 rows that M rows of x take: 1, 2, 4 or 8.
template <class F>
decltype(auto) with_tiles(int64_t M, F&& f) {
  if (M <= 8) return f(std::integral_constant<int, 1>{});
  if (M <= 16) return f(std::integral_constant<int, 2>{});
  if (M <= 32) return f(std::integral_constant<int, 4>{});
  return f(std::integral_constant<int, 8>{});
}

template <template <int> class Cfg>
torch::Tensor run_tiles(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias, int slices = 0) {
  return with_tiles(x.size(0), [&](auto nt) { return run<Cfg<decltype(nt)::value>>(x, w, bias, slices); });
}

// out = x @ w.T + bias for inputs `applies` takes (the caller has checked dtype, device and shapes), at the
// TF32 tier when tf32, else the strict tier.
inline torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias, bool tf32) {
  const c10::cuda::CUDAGuard guard(x.device());
  const torch::Tensor xc = tma_ready(x), wc = tma_ready(w), bc = bias.contiguous();
  return tf32 ? run_tiles<Tf32Config>(xc, wc, bc) : run_tiles<StrictConfig>(xc, wc, bc);
}

}  // namespace small_batch
