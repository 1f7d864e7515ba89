// swapped_mma.cu: the second small-batch candidate, measured against cuBLAS, weight_stream.cu and the
// weight-read floor by swapped_probe.py before anything is built on it.
//
// out = x @ w.T + bias at small M, computed as its transpose out.T (N, M) = w (N, K) @ x.T (K, M) on the
// tensor cores (mma.sync m16n8k8, TF32): w fills the instruction's 16-row M dimension and the batch its
// 8-column N dimension, so a batch of 1 wastes 7 of 8 columns of a tensor-core instruction, which costs
// nothing where the time is one read of w, and a batch of 64 needs 8 instructions where CUDA cores needed
// 64 FMAs per weight.
//
// Both operands come straight from global memory into registers as float4s, no shared memory: a lane
// (g = lane / 4, t = lane % 4) loads w[row g][k + 4t .. 4t + 3] and w[row g + 8][...], and x[batch g][k +
// 4t .. 4t + 3] for each tile of 8 batch rows. Sixteen k values per step, in an order of our choosing: the
// sum over k does not care, as long as w and x use the same one. Lane t's four values are k positions t and
// t + 4 of two consecutive k8 instructions, which is exactly where the fragments want them (A: a[0] = A[g][t],
// a[2] = A[g][t + 4]; B: b[0] = B[t][g], b[1] = B[t + 4][g]). So every load of w is a 64-byte piece of a row,
// four lanes side by side, read once (streaming: it skips L1); x is read through L1, where the warps of a
// block, all on the same k, share it.
//
// The grid: blocks of WARPS warps, 16 rows of w each, times SPLITS slices of K. With SPLITS > 1 each slice
// writes its partial sums to a workspace (SPLITS, M, N) and a second kernel adds them in order with the bias.
//
// Tiers: TF32 (w and x rounded to TF32, one product) and strict (3xTF32: each operand split into big and
// small TF32 parts in registers, three products; the sums promoted into fp32 registers every PROMOTE steps).
//
//   swapped_linear(x, w, bias, splits, strict, unroll)   x (M, K), w (N, K), bias (N,) float32 CUDA, contiguous,
//                                                K % 4 == 0, 1 <= M <= 64
// @arch: 9.0a
#include "common/gemm_small_batch.cuh"  // variant 3, as linear runs it
#include "common/hopper.cuh"
#include "common/tensor_core.cuh"
#include "linear_inputs.cuh"

namespace swapped {

constexpr int kWarps = 4;     // per block: 64 rows of w
using small_batch::kPromote;  // strict: k16 steps per promoted chunk (256 k, as rung 10)

__device__ __forceinline__ float4 load_w(const float* p) {  // read once: keep it out of L1
  return __ldcs(reinterpret_cast<const float4*>(p));
}

// One k16 step of a warp: two k8 instructions per tile of 8 batch rows.
template <int NT, bool STRICT>
__device__ __forceinline__ void step(float (&acc)[NT][4], const float4& w_lo_row, const float4& w_hi_row,
                                     const float4 (&xv)[NT]) {
  // A fragments of the two instructions: rows g and g + 8, k positions t and t + 4.
  const float a0[4] = {w_lo_row.x, w_hi_row.x, w_lo_row.y, w_hi_row.y};
  const float a1[4] = {w_lo_row.z, w_hi_row.z, w_lo_row.w, w_hi_row.w};
  uint32_t ab0[4], ab1[4], as0[4], as1[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (STRICT) {
      tc::split_tf32(a0[i], ab0[i], as0[i]);
      tc::split_tf32(a1[i], ab1[i], as1[i]);
    } else {
      ab0[i] = tc::to_tf32(a0[i]);
      ab1[i] = tc::to_tf32(a1[i]);
    }
  }
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const float b0[2] = {xv[j].x, xv[j].y};
    const float b1[2] = {xv[j].z, xv[j].w};
    uint32_t bb0[2], bb1[2], bs0[2], bs1[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      if constexpr (STRICT) {
        tc::split_tf32(b0[i], bb0[i], bs0[i]);
        tc::split_tf32(b1[i], bb1[i], bs1[i]);
      } else {
        bb0[i] = tc::to_tf32(b0[i]);
        bb1[i] = tc::to_tf32(b1[i]);
      }
    }
    if constexpr (STRICT) {  // the small products first, then the big one
      tc::mma_tf32(acc[j], as0, bb0);
      tc::mma_tf32(acc[j], ab0, bs0);
      tc::mma_tf32(acc[j], as1, bb1);
      tc::mma_tf32(acc[j], ab1, bs1);
    }
    tc::mma_tf32(acc[j], ab0, bb0);
    tc::mma_tf32(acc[j], ab1, bb1);
  }
}

// Where lane (g, t) reads x: row 8j + g of each tile j (x_in: whether that row exists), from k offset 4t.
template <int NT>
__device__ __forceinline__ void x_rows(const float* x, int M, int K, int g, int t, const float* (&xr)[NT],
                                       bool (&x_in)[NT]) {
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    x_in[j] = j * 8 + g < M;
    xr[j] = x + static_cast<int64_t>(x_in[j] ? j * 8 + g : 0) * K + 4 * t;
  }
}

// out (or the workspace slice of this split) = this block's rows of w times x over this split's K.
template <int NT, bool STRICT, int kUnroll>
__global__ void __launch_bounds__(kWarps * 32)
    swapped_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                   float* __restrict__ out, int M, int N, int K, int k_per_split) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row0 = (blockIdx.x * kWarps + warp) * 16;
  const int k_begin = blockIdx.y * k_per_split;
  const int k_end = min(K, k_begin + k_per_split);
  const bool row_a = row0 + g < N, row_b = row0 + g + 8 < N;
  const float* wa = w + static_cast<int64_t>(row_a ? row0 + g : 0) * K + 4 * t;
  const float* wb = w + static_cast<int64_t>(row_b ? row0 + g + 8 : 0) * K + 4 * t;
  const float* xr[NT];
  bool x_in[NT];
  x_rows(x, M, K, g, t, xr, x_in);
  const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);

  float acc[NT][4] = {};
  float total[STRICT ? NT : 1][4] = {};
  int steps_in_chunk = 0;
  for (int k0 = k_begin; k0 < k_end; k0 += 16 * kUnroll) {
    // w for the next kUnroll steps first (the loads from DRAM, in flight together), then each step's x
    // (from L1) just before its instructions.
    float4 wv[kUnroll][2];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int k = k0 + 16 * u;
      const bool in = k + 4 * t < k_end;  // K % 4 == 0: a float4 is wholly in or out
      wv[u][0] = in && row_a ? load_w(wa + k) : zero;
      wv[u][1] = in && row_b ? load_w(wb + k) : zero;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int k = k0 + 16 * u;
      const bool in = k + 4 * t < k_end;
      float4 xv[NT];
#pragma unroll
      for (int j = 0; j < NT; ++j) xv[j] = in && x_in[j] ? __ldg(reinterpret_cast<const float4*>(xr[j] + k)) : zero;
      step<NT, STRICT>(acc, wv[u][0], wv[u][1], xv);
    }
    if constexpr (STRICT) {
      steps_in_chunk += kUnroll;
      if (steps_in_chunk >= kPromote) {
        steps_in_chunk = 0;
        small_batch::promote(acc, total);
      }
    }
  }
  if constexpr (STRICT) small_batch::add_total(acc, total);
  // acc[j] = out.T[row0 + g (+8)][batch 8j + 2t (+1)]: d[0], d[1] row g, d[2], d[3] row g + 8.
  float* dst = out + static_cast<int64_t>(blockIdx.y) * M * N;  // the split's slice (the output itself when one)
  const bool add_bias = bias != nullptr;
#pragma unroll
  for (int j = 0; j < NT; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = 8 * j + 2 * t + (i & 1), n = row0 + g + (i >= 2 ? 8 : 0);
      if (m < M && n < N) dst[static_cast<int64_t>(m) * N + n] = acc[j][i] + (add_bias ? bias[n] : 0.f);
    }
  }
}

// out[m][n] = bias[n] + the splits' partial sums, added in split order.
__global__ void add_splits_kernel(const float* __restrict__ ws, const float* __restrict__ bias,
                                  float* __restrict__ out, int64_t MN, int N, int splits) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < MN;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float s = 0.f;
    for (int p = 0; p < splits; ++p) s += ws[p * MN + i];
    out[i] = s + bias[i % N];
  }
}

template <int NT, bool STRICT, int U>
void launch(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias, torch::Tensor& out,
            int splits) {
  const int M = static_cast<int>(x.size(0)), K = static_cast<int>(x.size(1)), N = static_cast<int>(w.size(0));
  const int k_steps = (K + 15) / 16;
  const int k_per_split = ((k_steps + splits - 1) / splits) * 16;
  splits = (K + k_per_split - 1) / k_per_split;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const dim3 grid((N + 16 * kWarps - 1) / (16 * kWarps), splits);
  if (splits == 1) {
    swapped_kernel<NT, STRICT, U><<<grid, kWarps * 32, 0, stream>>>(x.data_ptr<float>(), w.data_ptr<float>(),
                                                                  bias.data_ptr<float>(), out.data_ptr<float>(), M,
                                                                  N, K, k_per_split);
    LAUNCH_CHECK();
    return;
  }
  torch::Tensor ws = torch::empty({splits, M, N}, x.options());
  swapped_kernel<NT, STRICT, U><<<grid, kWarps * 32, 0, stream>>>(x.data_ptr<float>(), w.data_ptr<float>(), nullptr,
                                                                ws.data_ptr<float>(), M, N, K, k_per_split);
  LAUNCH_CHECK();
  const int64_t MN = static_cast<int64_t>(M) * N;
  add_splits_kernel<<<static_cast<unsigned>(std::min<int64_t>((MN + 255) / 256, 1024)), 256, 0, stream>>>(
      ws.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), MN, N, splits);
  LAUNCH_CHECK();
}

template <int NT, bool STRICT>
void launch_unroll(int unroll, const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                   torch::Tensor& out, int splits) {
  switch (unroll) {
    case 2: return launch<NT, STRICT, 2>(x, w, bias, out, splits);
    case 4: return launch<NT, STRICT, 4>(x, w, bias, out, splits);
    case 8: return launch<NT, STRICT, 8>(x, w, bias, out, splits);
    default: TORCH_CHECK(false, "unroll must be 2, 4 or 8, got ", num(unroll));
  }
}

template <bool STRICT>
void launch_tiles(int M, int unroll, const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                  torch::Tensor& out, int splits) {
  small_batch::with_tiles(M, [&](auto nt) { launch_unroll<decltype(nt)::value, STRICT>(unroll, x, w, bias, out, splits); });
}


// ---- variant 2: w through shared memory by the copy engine ---------------------------------------
//
// A load instruction of variant 1 reads 64 bytes from each of 8 rows, and holds registers until its data
// lands. Here a producer warp has the copy engine (TMA) bring boxes of 64 rows x 32 floats (8 KB, whole
// lines, zeros beyond the matrix) into a ring of STAGES stages of KC floats of k, and four consumer warps read
// their fragments from shared memory. (A first try copied each row's KC floats with its own 1-D bulk copy,
// 256-512 bytes each: 2-4x the floor, the copies too small.)
//
// The boxes arrive 128-byte swizzled: in each 8-row block, the 16-byte chunk c of row r sits at chunk
// c ^ (r % 8). Fragment row g reads smem row sigma(g) = g / 2 + 4 (g % 2), so that the two rows a quarter
// of the warp reads at once (g = 2q, 2q + 1) differ in bit 2 of the swizzle, and their eight chunks fall on
// all 32 banks once. The output row of fragment row g is then row0 + sigma(g).
using hopper::smem_addr;
using namespace hopper;

constexpr int kRows = 16 * kWarps;  // rows of w per block: one TMA box high
constexpr int kBoxK = 32;           // floats of k per box: one 128-byte swizzle row

template <int KC, int STAGES>
constexpr int bulk_smem_bytes() {
  return STAGES * kRows * KC * 4 + 1024;  // + room to align the ring to 1024 bytes (the swizzle's unit)
}

__device__ __forceinline__ int sigma(int g) { return (g >> 1) | ((g & 1) << 2); }

template <int NT, bool STRICT, int KC, int STAGES>
__global__ void __launch_bounds__((kWarps + 1) * 32)
    bulk_kernel(const __grid_constant__ CUtensorMap tmap_w, const float* __restrict__ x,
                const float* __restrict__ bias, float* __restrict__ out, int M, int N, int K, int k_per_split) {
  static_assert(KC % kBoxK == 0, "a stage is whole boxes");
  constexpr int BOXES = KC / kBoxK, BOX_FLOATS = kRows * kBoxK;
  extern __shared__ __align__(1024) float smem_raw[];
  float* ring = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row_base = blockIdx.x * kRows;
  const int k_begin = blockIdx.y * k_per_split;
  const int k_end = min(K, k_begin + k_per_split);
  const int chunks = (k_end - k_begin + KC - 1) / KC;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kWarps);
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (warp == kWarps) {  // the producer: one thread
    if (lane == 0) {
      for (int c = 0; c < chunks; ++c) {
        const int s = c % STAGES;
        if (c >= STAGES) mbar_wait(&empty[s], ((c / STAGES) - 1) & 1);
        mbar_arrive_expect_tx(&full[s], BOXES * BOX_FLOATS * 4);
        const int k = k_begin + c * KC;
        for (int b = 0; b < BOXES; ++b)
          tma_load_2d(ring + (s * BOXES + b) * BOX_FLOATS, &tmap_w, &full[s], k + b * kBoxK, row_base);
      }
    }
    return;
  }

  const int row0 = row_base + warp * 16;
  const int srow = warp * 16 + sigma(g);  // this lane's row in a box (and srow + 8)
  const float* xr[NT];
  bool x_in[NT];
  x_rows(x, M, K, g, t, xr, x_in);
  const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
  float acc[NT][4] = {};
  float total[STRICT ? NT : 1][4] = {};
  int steps_in_chunk = 0;
  for (int c = 0; c < chunks; ++c) {
    const int s = c % STAGES;
    mbar_wait(&full[s], (c / STAGES) & 1);
    const int k = k_begin + c * KC;
#pragma unroll
    for (int b = 0; b < BOXES; ++b) {
      const float* box = ring + (s * BOXES + b) * BOX_FLOATS;
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int chunk = (4 * u + t) ^ sigma(g);  // the swizzle: row % 8 == sigma(g) for both rows
        const float4 wa = *reinterpret_cast<const float4*>(box + srow * kBoxK + 4 * chunk);
        const float4 wb = *reinterpret_cast<const float4*>(box + (srow + 8) * kBoxK + 4 * chunk);
        const int kk = k + b * kBoxK + 16 * u;
        const bool in = kk + 4 * t < k_end;  // beyond K the box holds zeros, beyond this split the next split's w
        float4 xv[NT];
#pragma unroll
        for (int j = 0; j < NT; ++j) xv[j] = in && x_in[j] ? __ldg(reinterpret_cast<const float4*>(xr[j] + kk)) : zero;
        step<NT, STRICT>(acc, wa, wb, xv);
      }
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[s]);
    if constexpr (STRICT) {
      steps_in_chunk += KC / 16;
      if (steps_in_chunk >= kPromote) {
        steps_in_chunk = 0;
        small_batch::promote(acc, total);
      }
    }
  }
  if constexpr (STRICT) small_batch::add_total(acc, total);
  float* dst = out + static_cast<int64_t>(blockIdx.y) * M * N;
  const bool add_bias = bias != nullptr;
#pragma unroll
  for (int j = 0; j < NT; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = 8 * j + 2 * t + (i & 1), n = row0 + sigma(g) + (i >= 2 ? 8 : 0);
      if (m < M && n < N) dst[static_cast<int64_t>(m) * N + n] = acc[j][i] + (add_bias ? bias[n] : 0.f);
    }
  }
}

template <int NT, bool STRICT, int KC, int STAGES>
void launch_bulk(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias, torch::Tensor& out,
                 int splits) {
  const int M = static_cast<int>(x.size(0)), K = static_cast<int>(x.size(1)), N = static_cast<int>(w.size(0));
  const int k_chunks = (K + KC - 1) / KC;
  const int k_per_split = ((k_chunks + splits - 1) / splits) * KC;
  splits = (K + k_per_split - 1) / k_per_split;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const dim3 grid((N + kRows - 1) / kRows, splits);
  constexpr int smem = bulk_smem_bytes<KC, STAGES>();
  static bool configured = false;  // the experiment runs on one device
  if (!configured) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(bulk_kernel<NT, STRICT, KC, STAGES>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    configured = true;
  }
  const CUtensorMap tmap = make_tensor_map_2d(w.data_ptr<float>(), N, K, kRows, kBoxK);
  torch::Tensor ws = splits == 1 ? out : torch::empty({splits, M, N}, x.options());
  bulk_kernel<NT, STRICT, KC, STAGES><<<grid, (kWarps + 1) * 32, smem, stream>>>(
      tmap, x.data_ptr<float>(), splits == 1 ? bias.data_ptr<float>() : nullptr, ws.data_ptr<float>(), M, N, K,
      k_per_split);
  LAUNCH_CHECK();
  if (splits == 1) return;
  const int64_t MN = static_cast<int64_t>(M) * N;
  add_splits_kernel<<<static_cast<unsigned>(std::min<int64_t>((MN + 255) / 256, 1024)), 256, 0, stream>>>(
      ws.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), MN, N, splits);
  LAUNCH_CHECK();
}

template <int NT, bool STRICT>
void launch_bulk_cfg(int cfg, const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                     torch::Tensor& out, int splits) {
  switch (cfg) {
    case 0: return launch_bulk<NT, STRICT, 128, 4>(x, w, bias, out, splits);  // 129 KB: one block per SM
    case 1: return launch_bulk<NT, STRICT, 64, 4>(x, w, bias, out, splits);   // 65 KB: three
    case 2: return launch_bulk<NT, STRICT, 64, 6>(x, w, bias, out, splits);   // 97 KB: two
    case 3: return launch_bulk<NT, STRICT, 32, 8>(x, w, bias, out, splits);   // 65 KB: three
    default: TORCH_CHECK(false, "cfg must be 0..3, got ", num(cfg));
  }
}

template <bool STRICT>
void launch_bulk_tiles(int M, int cfg, const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                       torch::Tensor& out, int splits) {
  small_batch::with_tiles(M, [&](auto nt) { launch_bulk_cfg<decltype(nt)::value, STRICT>(cfg, x, w, bias, out, splits); });
}


// ---- variant 3: x through the ring as well, x split once, w split cheaply ---------------------------
//
// Nsight Compute on variant 2 (strict, M = 1): 175 warp instructions per KB of w, where the SM has about 75
// cycles per KB at the floor (4 issue slots a cycle), and the warps stalled mostly on x's loads from L1/L2.
// So here:
// - x comes through the ring too, boxes of 8 NT rows x 32 floats beside w's, read from shared memory;
// - at the strict tier x is split into big and small parts once per call (split_x_kernel, M x K floats),
//   not by every warp at every step;
// - w is split as hi = rna(w), lo = w - hi (the tensor core reads lo's top 10 bits: lo's error is below
//   2^-21 |w|), three instructions a value with the finiteness test; a warp whose step holds a non-finite
//   w takes the exact split of common/tensor_core.cuh for that step;
// - at the TF32 tier nothing is converted: the tensor cores read the top 19 bits of each fp32 value;
// - CW consumer warps per block (16 CW rows of w), so that a box of x serves more of w.
// It became kernels/common/gemm_small_batch.cuh, which tma3_linear below runs with the configuration and the
// slices of K given (linear's schedule picks them itself).

}  // namespace swapped

// @export: out = x @ w.T + bias for 1 <= M <= 64 rows of x on the tensor cores with w as the instruction's M operand; K split in `splits` slices; strict: 3xTF32, else TF32; unroll: k16 steps of w loaded together (2, 4, 8)
torch::Tensor swapped_linear(torch::Tensor x, torch::Tensor w, torch::Tensor bias, int64_t splits, bool strict,
                             int64_t unroll) {
  check_linear_inputs(x, w, bias, "swapped_linear", 64);
  TORCH_CHECK(splits >= 1 && splits <= 64, "splits must be 1..64, got ", num(splits));
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor out = torch::empty({x.size(0), w.size(0)}, x.options());
  const int M = static_cast<int>(x.size(0));
  const int u = static_cast<int>(unroll), s = static_cast<int>(splits);
  if (strict) swapped::launch_tiles<true>(M, u, x, w, bias, out, s);
  else swapped::launch_tiles<false>(M, u, x, w, bias, out, s);
  return out;
}

// @export: as swapped_linear, w brought into shared memory by the copy engine (TMA boxes of 64 x 32, a producer warp); cfg 0..3: (KC, STAGES) = (128, 4), (64, 4), (64, 6), (32, 8)
torch::Tensor bulk_linear(torch::Tensor x, torch::Tensor w, torch::Tensor bias, int64_t splits, bool strict,
                          int64_t cfg) {
  check_linear_inputs(x, w, bias, "bulk_linear", 64);
  TORCH_CHECK(splits >= 1 && splits <= 64, "splits must be 1..64, got ", num(splits));
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor out = torch::empty({x.size(0), w.size(0)}, x.options());
  const int M = static_cast<int>(x.size(0)), c = static_cast<int>(cfg), s = static_cast<int>(splits);
  if (strict) swapped::launch_bulk_tiles<true>(M, c, x, w, bias, out, s);
  else swapped::launch_bulk_tiles<false>(M, c, x, w, bias, out, s);
  return out;
}

// @export: variant 3: w and x through the ring by TMA, x split once per call, w split cheaply; cfg 0..3: (consumer warps, KC, STAGES) = (4, 64, 4), (4, 32, 6), (8, 64, 3), (8, 32, 6)
// Variant 3's configurations: consumer warps, KC, STAGES at each tier, for any number of 8-row tiles of x.
template <bool STRICT, int CW, int KC, int STAGES>
struct Tma3 {
  template <int NT>
  using C = small_batch::Config<NT, STRICT, CW, KC, STAGES>;
};

torch::Tensor tma3_linear(torch::Tensor x, torch::Tensor w, torch::Tensor bias, int64_t splits, bool strict,
                          int64_t cfg) {
  check_linear_inputs(x, w, bias, "tma3_linear", 64);
  TORCH_CHECK(splits >= 1 && splits <= 64, "splits must be 1..64, got ", num(splits));
  const int cut = static_cast<int>(splits);
  const torch::Tensor xc = small_batch::tma_ready(x), wc = small_batch::tma_ready(w);
  const c10::cuda::CUDAGuard guard(x.device());
  switch (cfg) {
    case 0: return strict ? small_batch::run_tiles<Tma3<true, 4, 64, 4>::C>(xc, wc, bias, cut)
                          : small_batch::run_tiles<Tma3<false, 4, 64, 4>::C>(xc, wc, bias, cut);
    case 1: return strict ? small_batch::run_tiles<Tma3<true, 4, 32, 6>::C>(xc, wc, bias, cut)
                          : small_batch::run_tiles<Tma3<false, 4, 32, 6>::C>(xc, wc, bias, cut);
    case 2: return strict ? small_batch::run_tiles<Tma3<true, 8, 64, 3>::C>(xc, wc, bias, cut)
                          : small_batch::run_tiles<Tma3<false, 8, 64, 3>::C>(xc, wc, bias, cut);
    case 3: return strict ? small_batch::run_tiles<Tma3<true, 8, 32, 6>::C>(xc, wc, bias, cut)
                          : small_batch::run_tiles<Tma3<false, 8, 32, 6>::C>(xc, wc, bias, cut);
    default: TORCH_CHECK(false, "cfg must be 0..3, got ", num(cfg));
  }
}
