// kernels/common/gemm_wgmma.cuh: the Hopper GEMM of rungs 9 and 10 (wgmma + TMA + mbarriers, a
// producer warp group and two consumer warp groups), written once: gemm_09_wgmma_tf32.cu explains
// it and runs it in TF32, gemm_10_3xtf32.cu runs it with the 3xTF32 split and promoted
// accumulation. sm_90a only (wgmma, setmaxnreg): a kernel file including this says `// @arch: 9.0a`.
//
//   Config<BN, STAGES, SPLIT, PROMOTE>   tile width, pipeline depth, TF32 or 3xTF32, promotion;
//   gemm_wgmma_kernel                    the kernel;
//   tma_ok                               can TMA describe x and w (K % 4 == 0, 16-byte aligned)?
//   run                                  encodes the two tensor maps and launches.
//
// out = x @ w.T, x (M, K) and w (N, K) row-major: both K-major, the only layout TF32 wgmma takes.

#pragma once

#include <cstdint>

#include "common/device_cache.cuh"
#include "common/gemm_launch.cuh"
#include "common/hopper.cuh"
#include "common/tensor_core.cuh"

namespace gemm_wgmma {

constexpr int BM = 128;         // rows of a block tile: 2 consumer warp groups x 64 (wgmma's M)
constexpr int BK = 32;          // k values per stage: 32 floats = 128 bytes, one row of the 128-byte swizzle
constexpr int CONSUMERS = 2;    // consumer warp groups
constexpr int THREADS = 128 * (1 + CONSUMERS);  // warp group 0 produces, 1 and 2 consume
constexpr int GROUP_M = 16;     // tc::grouped_tile's raster
constexpr int PRODUCER_REGS = 40;   // setmaxnreg: the producer keeps 40 registers per thread ...
constexpr int CONSUMER_REGS = 232;  // ... and the consumers take 232: 128 x 40 + 256 x 232 <= 64K

template <int BN_, int STAGES_, bool SPLIT_, int PROMOTE_>
struct Config {
  static constexpr int BN = BN_;          // columns of a block tile: the wgmma's N (128 or 256)
  static constexpr int STAGES = STAGES_;  // TMA ring depth
  static constexpr bool SPLIT = SPLIT_;   // 3xTF32 (see the kernel)
  static constexpr int PROMOTE = PROMOTE_;  // k tiles per promoted chunk; 0 = never
  static constexpr int A_BYTES = BM * BK * 4;
  static constexpr int B_BYTES = BN * BK * 4;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;  // what TMA brings per stage
  static constexpr int RING = SPLIT ? 3 : 0;  // buffers for the small parts (3: see the consumer loop)
  static constexpr int ACC = BN / 2;          // accumulators per consumer thread: 64 x BN / 128
  static constexpr size_t SMEM_BYTES = 1024 /* to align the tiles to 1024 bytes */ +
                                       static_cast<size_t>(STAGE_BYTES) * (STAGES + RING) + 2 * STAGES * sizeof(uint64_t);
  static_assert(BN == 128 || BN == 256, "wgmma wrappers exist for n128 and n256");
  static_assert(BN <= 256, "a TMA box is at most 256 rows");
  static_assert(SMEM_BYTES <= 227 * 1024, "more shared memory than a block may have on sm_90");
  static_assert(PROMOTE >= 0 && (PROMOTE == 0 || SPLIT), "promotion is part of the 3xTF32 path");
};

template <int N>
__device__ __forceinline__ void wgmma_tf32(float (&d)[N], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (N == 64) {
    hopper::wgmma_m64n128k8_tf32(d, desc_a, desc_b, scale_d);
  } else {
    hopper::wgmma_m64n256k8_tf32(d, desc_a, desc_b, scale_d);
  }
}

// One BM x BN tile of out per block (tc::grouped_tile's raster over a 1-D grid).
//
// Shared memory: STAGES stages, each [x tile: 128 rows x 128 bytes][w tile: BN rows x 128 bytes],
// exactly as TMA writes them with the 128-byte swizzle (16-byte chunk c of row r stored at chunk
// c ^ (r % 8): the 8 rows of an atom spread any column over all banks), which is also the layout
// the wgmma descriptors describe. SPLIT adds RING buffers of the same size for the small parts.
// Then the barriers: full[s] (the producer's arrival + TMA's bytes) and empty[s] (one arrival per
// consumer warp group once its wgmmas no longer read stage s).
//
// Producer (warp group 0, one thread): for each k tile, wait until its stage is empty, announce
// the bytes, issue two TMA loads. Out-of-bounds rows and k are zero-filled by TMA, so the last,
// partial tiles in M, N and K need no code.
//
// Consumers (warp groups 1 and 2, rows 64c .. 64c + 63 of the tile): for each k tile, wait until
// its stage is full, issue 4 wgmma m64nBNk8 (k = 0, 8, 16, 24: the descriptors advance 32 bytes),
// commit them as one group, and wait until at most this group is running, i.e. the previous k
// tile's group is done: its stage goes back to the producer. The tensor core thus always has the
// next group queued behind the running one.
//
// SPLIT (3xTF32): after a stage lands, the 256 consumer threads split it in place, element by
// element: big (round to nearest TF32) over the raw value, small (the rest, rounded) into ring
// buffer kt % 3 at the same offset. The split is elementwise, so the swizzled layout carries over
// and the same descriptors address big and small tiles. Then a fence (the async proxy must see
// these ordinary stores), a barrier of the 256 consumer threads (each warp group reads w's tile,
// which both split), and three wgmmas per k8 step: small·big, big·small, big·big. Why a ring of 3:
// ring buffer kt % 3 is written at step kt while the wgmmas of step kt - 3 might still read it;
// every warp group has waited for those (at the end of step kt - 2) before it reaches step kt - 1's
// barrier, which the writer has passed. With 2 buffers it would need a second barrier per step.
// PROMOTE: every PROMOTE k tiles, wait for all wgmmas, add the accumulators into FP32 registers
// (`total`, plain FADD), and start the next chunk with scale-d = 0 (D = A·B, the old D ignored).
template <class C>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_wgmma_kernel(const __grid_constant__ CUtensorMap tmap_x, const __grid_constant__ CUtensorMap tmap_w,
                      float* __restrict__ out, const float* __restrict__ bias, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes and TMA and wgmma compute it from the address
  // bits, so every tile must start on a 1024-byte boundary: align the base (SMEM_BYTES has room).
  unsigned char* smem = smem_raw + ((1024 - (hopper::smem_addr(smem_raw) & 1023)) & 1023);
  auto stage_a = [&](int s) { return smem + s * C::STAGE_BYTES; };
  auto stage_b = [&](int s) { return smem + s * C::STAGE_BYTES + C::A_BYTES; };
  auto ring_a = [&](int r) { return smem + (C::STAGES + r) * C::STAGE_BYTES; };
  auto ring_b = [&](int r) { return smem + (C::STAGES + r) * C::STAGE_BYTES + C::A_BYTES; };
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + (C::STAGES + C::RING) * C::STAGE_BYTES);
  uint64_t* empty = full + C::STAGES;

  int tile_m, tile_n;
  tc::grouped_tile(static_cast<int>(blockIdx.x), (M + BM - 1) / BM, (N + C::BN - 1) / C::BN, GROUP_M, tile_m,
                   tile_n);
  const int m0 = tile_m * BM;
  const int n0 = tile_n * C::BN;
  const int k_tiles = (K + BK - 1) / BK;
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < C::STAGES; ++s) {
      hopper::mbar_init(&full[s], 1);
      hopper::mbar_init(&empty[s], CONSUMERS);
    }
    hopper::mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    // ---- producer ----
    hopper::setmaxnreg_dec<PRODUCER_REGS>();
    if (threadIdx.x == 0) {
      hopper::tma_prefetch_descriptor(&tmap_x);
      hopper::tma_prefetch_descriptor(&tmap_w);
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % C::STAGES;
        if (kt >= C::STAGES) {
          hopper::mbar_wait(&empty[s], (kt / C::STAGES - 1) & 1);  // both consumers are done with round - 1
        }
        hopper::mbar_arrive_expect_tx(&full[s], C::STAGE_BYTES);  // full boxes, zero-filled parts included
        hopper::tma_load_2d(stage_a(s), &tmap_x, &full[s], kt * BK, m0);
        hopper::tma_load_2d(stage_b(s), &tmap_w, &full[s], kt * BK, n0);
      }
    }
    return;
  }

  // ---- consumers ----
  hopper::setmaxnreg_inc<CONSUMER_REGS>();
  const int c = wg - 1;                  // rows 64c .. 64c + 63 of the tile
  const int ct = threadIdx.x - 128;      // 0..255 over both consumer warp groups
  float acc[C::ACC];
  float total[C::PROMOTE > 0 ? C::ACC : 1];
#pragma unroll
  for (int i = 0; i < C::ACC; ++i) {
    acc[i] = 0.0f;
  }
#pragma unroll
  for (int i = 0; i < (C::PROMOTE > 0 ? C::ACC : 1); ++i) {
    total[i] = 0.0f;
  }
  hopper::fence_operands(acc);

  for (int kt = 0; kt < k_tiles; ++kt) {
    const int s = kt % C::STAGES;
    hopper::mbar_wait(&full[s], (kt / C::STAGES) & 1);
    const uint64_t a_big = hopper::wgmma_desc_sw128(stage_a(s) + c * 64 * BK * 4);
    const uint64_t b_big = hopper::wgmma_desc_sw128(stage_b(s));
    if constexpr (C::SPLIT) {
      const int r = kt % C::RING;
      float4* raw = reinterpret_cast<float4*>(stage_a(s));  // the whole stage: x tile, then w tile
      float4* small = reinterpret_cast<float4*>(ring_a(r));
#pragma unroll 4
      for (int i = ct; i < C::STAGE_BYTES / 16; i += 128 * CONSUMERS) {
        const float4 v = raw[i];
        uint32_t b0, b1, b2, b3, s0, s1, s2, s3;
        tc::split_tf32(v.x, b0, s0);
        tc::split_tf32(v.y, b1, s1);
        tc::split_tf32(v.z, b2, s2);
        tc::split_tf32(v.w, b3, s3);
        raw[i] = make_float4(__uint_as_float(b0), __uint_as_float(b1), __uint_as_float(b2), __uint_as_float(b3));
        small[i] = make_float4(__uint_as_float(s0), __uint_as_float(s1), __uint_as_float(s2), __uint_as_float(s3));
      }
      hopper::fence_proxy_async();
      hopper::named_barrier(1, 128 * CONSUMERS);
      const uint64_t a_small = hopper::wgmma_desc_sw128(ring_a(r) + c * 64 * BK * 4);
      const uint64_t b_small = hopper::wgmma_desc_sw128(ring_b(r));
      // The first k tile of a chunk starts from D = 0 (scale-d = 0); the others accumulate.
      const int chunk_start = C::PROMOTE > 0 ? kt % C::PROMOTE == 0 : kt == 0;
      hopper::fence_operands(acc);
      hopper::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 8; ++kk) {
        const uint64_t step = kk * hopper::WGMMA_DESC_K8_STEP;
        wgmma_tf32(acc, a_small + step, b_big + step, kk == 0 && chunk_start ? 0 : 1);
        wgmma_tf32(acc, a_big + step, b_small + step, 1);
        wgmma_tf32(acc, a_big + step, b_big + step, 1);
      }
      hopper::wgmma_commit();
      hopper::fence_operands(acc);
      if (C::PROMOTE > 0 && ((kt + 1) % C::PROMOTE == 0 || kt + 1 == k_tiles)) {
        hopper::wgmma_wait<0>();
        hopper::fence_operands(acc);
#pragma unroll
        for (int i = 0; i < (C::PROMOTE > 0 ? C::ACC : 1); ++i) {
          total[i] += acc[i];
        }
        hopper::fence_operands(acc);
      } else {
        hopper::wgmma_wait<1>();
      }
    } else {
      hopper::fence_operands(acc);
      hopper::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 8; ++kk) {
        const uint64_t step = kk * hopper::WGMMA_DESC_K8_STEP;
        wgmma_tf32(acc, a_big + step, b_big + step, 1);
      }
      hopper::wgmma_commit();
      hopper::fence_operands(acc);
      hopper::wgmma_wait<1>();  // the previous k tile's wgmmas are done...
    }
    if (kt > 0 && threadIdx.x % 128 == 0) {
      hopper::mbar_arrive(&empty[(kt - 1) % C::STAGES]);  // ...so its stage goes back to the producer
    }
  }
  hopper::wgmma_wait<0>();
  hopper::fence_operands(acc);

  // Lane (g, t) of warp v in this consumer: rows 16v + g and 16v + g + 8 of its 64, columns
  // 8j + 2t and 8j + 2t + 1 for each n8 block j.
  const int lane = threadIdx.x % 32;
  const int row = m0 + c * 64 + ((threadIdx.x % 128) / 32) * 16 + lane / 4;
  const int col = n0 + 2 * (lane % 4);
  const bool vec_stores = N % 2 == 0;
#pragma unroll
  for (int j = 0; j < C::BN / 8; ++j) {
    const int n = col + 8 * j;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = row + 8 * h;
      if (m >= M) {
        continue;
      }
      float v0, v1;
      if constexpr (C::PROMOTE > 0) {
        v0 = total[4 * j + 2 * h];
        v1 = total[4 * j + 2 * h + 1];
      } else {
        v0 = acc[4 * j + 2 * h];
        v1 = acc[4 * j + 2 * h + 1];
      }
      tc::add_bias(bias, n, N, v0, v1);
      float* dst = out + static_cast<int64_t>(m) * N;
      if (vec_stores) {
        if (n < N) {  // N even and n even: n + 1 < N too
          *reinterpret_cast<float2*>(dst + n) = make_float2(v0, v1);
        }
      } else {
        if (n < N) dst[n] = v0;
        if (n + 1 < N) dst[n + 1] = v1;
      }
    }
  }
}

// TMA's conditions on a row-major float matrix: a 16-byte-aligned start and a row stride that is
// a multiple of 16 bytes (K % 4 == 0). Launchers take another path when they do not hold.
inline bool tma_ok(const torch::Tensor& x, const torch::Tensor& w) {
  return x.size(1) % 4 == 0 && aligned16(x.data_ptr()) && aligned16(w.data_ptr());
}

// Fills `out` (M, N), allocated by gemm_new_output, with x @ w.T (+ bias (N,), when not null). x
// and w checked, tma_ok(x, w), M, N, K > 0.
template <class C>
void run(const torch::Tensor& x, const torch::Tensor& w, torch::Tensor& out, const float* bias = nullptr) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t M = x.size(0);
  const int64_t N = w.size(0);
  const int64_t K = x.size(1);
  const CUtensorMap tmap_x = hopper::make_tensor_map_2d(x.data_ptr<float>(), M, K, BM, BK);
  const CUtensorMap tmap_w = hopper::make_tensor_map_2d(w.data_ptr<float>(), N, K, C::BN, BK);
  auto kernel = gemm_wgmma_kernel<C>;
  allow_dynamic_smem(kernel, C::SMEM_BYTES);  // over 48 KB: asked for once per kernel and device
  kernel<<<gemm_grid(M, N, BM, C::BN), THREADS, C::SMEM_BYTES, at::cuda::getCurrentCUDAStream()>>>(
      tmap_x, tmap_w, out.data_ptr<float>(), bias, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K));
  LAUNCH_CHECK();
}

}  // namespace gemm_wgmma
