// wgmma_peak_probe.cu: the tensor cores' yardstick for the wgmma rungs (gemm_09, gemm_10). Rung 9's
// main loop with everything but the wgmmas taken out: no TMA, no mbarriers, no epilogue inside the
// loop. Each block loads one stage (an x tile of 128 x 32, a w tile of 256 x 32) into shared memory
// once, in the 128-byte swizzle TMA would have written, and its two warp groups then run rung 9's
// k-tile, 4 wgmma m64n256k8 per warp group (one group committed, one waited for), `iters` times over
// the same stage. Its time per iteration is what rung 9's time per k tile cannot beat on this
// device. Not a fixed number: held for long, an H100 runs at its power limit, and the clock it can
// keep depends on the energy each FLOP costs. This probe, moving no operands, held 1680 MHz there;
// a TF32 GEMM, which moves them, about 1400 (experiments/wgmma_schedule/peak_probe.py).
// @arch: 9.0a
//
//   wgmma_peak_probe(x, w, iters, blocks)   x (128, 32) and w (256, 32) float32 CUDA, contiguous;
//                                           out (blocks, 128, 256) float32, every block's
//                                           iters * (x @ w.T) in TF32 (x and w truncated to
//                                           TF32, fp32 accumulation), every element written.
//
// One block per SM (blocks = the SM count) measures the whole device; per iteration each block
// does 128 x 256 x 32 multiply-adds, rung 9's k tile, so the figure reads directly against
// the time per k tile of rung 9's main loop (experiments/wgmma_schedule/README.md, "Where a block's
// time goes").
#include "common/check.cuh"
#include "common/hopper.cuh"

namespace {

constexpr int kRows = 128;      // x tile rows: two warp groups x wgmma's M of 64
constexpr int kCols = 256;      // w tile rows: wgmma's N
constexpr int kK = 32;          // one 128-byte swizzle row of floats
constexpr int kThreads = 256;   // two warp groups, both issuing wgmmas (no producer: nothing to load)
constexpr int kSmemBytes = (kRows + kCols) * kK * 4 + 1024;  // + slack to align the tiles to 1024

// Float k of row r of a K-major tile in the 128-byte swizzle: 16-byte chunk k / 4 of the row's 8
// sits at chunk (k / 4) ^ (r % 8), as TMA writes it and as wgmma_desc_sw128 describes it.
__device__ __forceinline__ int swizzled(int r, int k) { return r * kK + (((k / 4) ^ (r % 8)) * 4) + k % 4; }

__global__ void __launch_bounds__(kThreads)
    wgmma_peak_probe_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
                            int iters) {
  extern __shared__ unsigned char smem_raw[];
  float* a = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  float* b = a + kRows * kK;
  for (int i = threadIdx.x; i < kRows * kK; i += kThreads) a[swizzled(i / kK, i % kK)] = x[i];
  for (int i = threadIdx.x; i < kCols * kK; i += kThreads) b[swizzled(i / kK, i % kK)] = w[i];
  hopper::fence_proxy_async();  // ordinary stores, read by wgmma (the async proxy)
  __syncthreads();

  const int group = threadIdx.x / 128;
  const uint64_t desc_a = hopper::wgmma_desc_sw128(a + 64 * group * kK);
  const uint64_t desc_b = hopper::wgmma_desc_sw128(b);
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;

  for (int it = 0; it < iters; ++it) {
    hopper::fence_operands(acc);
    hopper::wgmma_fence();
#pragma unroll
    for (int s = 0; s < kK / 8; ++s) {
      hopper::wgmma_m64n256k8_tf32(acc, desc_a + s * hopper::WGMMA_DESC_K8_STEP, desc_b + s * hopper::WGMMA_DESC_K8_STEP,
                                   1);
    }
    hopper::wgmma_commit();
    hopper::wgmma_wait<1>();  // rung 9's cadence: one group queued behind the running one
  }
  hopper::wgmma_wait<0>();
  hopper::fence_operands(acc);

  // Accumulator layout (hopper.cuh): warp v, lane (g, t): acc[4j + 2h + e] = D[16v + g + 8h][8j + 2t + e].
  const int warp = (threadIdx.x % 128) / 32;
  const int lane = threadIdx.x % 32;
  float* tile = out + static_cast<int64_t>(blockIdx.x) * kRows * kCols;
#pragma unroll
  for (int j = 0; j < kCols / 8; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 64 * group + 16 * warp + lane / 4 + 8 * h;
      const int c = 8 * j + 2 * (lane % 4);
      *reinterpret_cast<float2*>(tile + r * kCols + c) = make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
    }
  }
}

}  // namespace

// @export: the tensor cores' yardstick: `blocks` blocks each run rung 9's k tile (4 wgmma m64n256k8 TF32 per warp group) `iters` times on x (128, 32) and w (256, 32) held in shared memory; out (blocks, 128, 256) = iters * (x @ w.T) in TF32
torch::Tensor wgmma_peak_probe(torch::Tensor x, torch::Tensor w, int64_t iters, int64_t blocks) {
  CHECK_FLOAT_CUDA_INPUT(x);
  CHECK_FLOAT_CUDA_INPUT(w);
  CHECK_SAME_DEVICE(x, w);
  TORCH_CHECK(x.dim() == 2 && x.size(0) == kRows && x.size(1) == kK, "wgmma_peak_probe: x must be (", num(kRows), ", ", num(kK),
              "), got ", shape_string(x));
  TORCH_CHECK(w.dim() == 2 && w.size(0) == kCols && w.size(1) == kK, "wgmma_peak_probe: w must be (", num(kCols), ", ", num(kK),
              "), got ", shape_string(w));
  TORCH_CHECK(iters >= 1 && iters <= INT32_MAX, "wgmma_peak_probe: iters must be in 1 .. 2^31 - 1, got ", num(iters));
  TORCH_CHECK(blocks >= 1 && blocks <= 65535, "wgmma_peak_probe: blocks must be in 1 .. 65535, got ", num(blocks));
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor out = torch::empty({blocks, kRows, kCols}, x.options());
  C10_CUDA_CHECK(cudaFuncSetAttribute(wgmma_peak_probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  wgmma_peak_probe_kernel<<<static_cast<unsigned int>(blocks), kThreads, kSmemBytes,
                            at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), w.data_ptr<float>(),
                                                                out.data_ptr<float>(), static_cast<int>(iters));
  LAUNCH_CHECK();
  return out;
}
