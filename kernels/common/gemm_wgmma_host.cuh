// kernels/common/gemm_wgmma_host.cuh: the host side of the wgmma GEMM (common/gemm_wgmma.cuh):
// what a launcher includes (rungs 9 and 10, the whole-model kernels).
//
//   tma_ok                               can TMA describe x and w (K % 4 == 0, 16-byte aligned)?
//   run, run_epilogue                    encode the tensor maps and launch, with StoreEpilogue or
//                                        another epilogue;
//   split_parts, run_presplit,           the pre-split path of 3xTF32: the operands split into big
//   run_parts_epilogue                   and small parts before the kernel (PRESPLIT configs);
//   run_split_w_epilogue                 x split before the kernel, w's small parts made in it (SplitWConfig);
//   rows_padded_to_tiles                 x padded with zero rows to whole tiles (no box read out of bounds).

#pragma once

#include <algorithm>
#include <cstdint>

#include "common/device_cache.cuh"
#include "common/gemm_launch.cuh"
#include "common/gemm_wgmma.cuh"

namespace gemm_wgmma {

// TMA's conditions on a row-major matrix: a 16-byte-aligned start and a row stride that is a
// multiple of 16 bytes (for floats, K % 4 == 0). Launchers take another path when they do not hold.
inline bool tma_ok(const torch::Tensor& x, const torch::Tensor& w) {
  return x.size(1) * static_cast<int64_t>(x.element_size()) % 16 == 0 && aligned16(x.data_ptr()) &&
         aligned16(w.data_ptr());
}

// A TMA descriptor of an operand of C: a (rows, K) row-major matrix of C's element, in boxes of box_rows
// rows and one stage's k.
template <class C>
inline CUtensorMap operand_map(const torch::Tensor& v, int box_rows) {
  return hopper::make_tensor_map_2d(v.data_ptr<typename C::Operand::Element>(), v.size(0), v.size(1), box_rows, C::BK,
                                    C::Operand::TMA_TYPE);
}

template <class C, class Epi>
void launch(const CUtensorMap& tmap_x, const CUtensorMap& tmap_w, const CUtensorMap& tmap_xs, const CUtensorMap& tmap_ws,
            int64_t M, int64_t N, int64_t K, const Epi& epi) {
  auto kernel = gemm_wgmma_kernel<C, Epi>;
  constexpr size_t smem = C::SMEM_BYTES + Epi::template smem_floats<C>() * sizeof(float);
  static_assert(smem <= 227 * 1024, "more shared memory than a block may have on sm_90");
  allow_dynamic_smem(kernel, smem);  // over 48 KB: asked for once per kernel and device
  const int64_t tiles = C::Scheduler::tiles(M, N);
  TORCH_CHECK(tiles <= INT32_MAX, "the output has ", num(tiles), " tiles of ", num(BM), " x ", num(C::BN),
              ", more than a grid holds (", num(INT32_MAX), ")");
  // The scheduler's grid from the blocks that run at once (asked as clusters of one block, an ordinary
  // launch's blocks).
  const int64_t blocks = C::Scheduler::blocks(tiles, max_active_clusters(kernel, 1, THREADS, smem));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(THREADS);
  config.dynamicSmemBytes = smem;
  config.stream = at::cuda::getCurrentCUDAStream();
  // No launch attributes: a cluster attribute, even of 1, made rung 9 about 9% slower
  // (experiments/wgmma_schedule/README.md, run 1).
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, tmap_x, tmap_w, tmap_xs, tmap_ws, epi, static_cast<int>(M),
                                    static_cast<int>(N), static_cast<int>(K)));
  LAUNCH_CHECK();
}

// out[i] = x[i] for the n_in 16-byte words of x, zeros for the rest up to n_out: rows_padded_to_tiles's
// copy and pad in one launch.
__global__ void rows_padded_kernel(const uint4* __restrict__ x, uint4* __restrict__ out, int64_t n_in, int64_t n_out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n_out;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = i < n_in ? x[i] : make_uint4(0u, 0u, 0u, 0u);
  }
}

// x with zero rows added up to whole BM-row tiles (a copy), or x itself where it has them. TMA fills
// the rows of a box past the tensor's end with zeros, but slowly: where the weight's read bounds the
// time, at 65 rows of x (63 of each box's 128 out of bounds), the TF32 kernel at width 64 took 0.145
// ms against 0.078 on x padded to 128 rows, and at 129 rows 0.176 against 0.112 (H200,
// experiments/gemm_schedules/README.md). The copy is M x K values, a few microseconds of the GPU's; it
// is one launch, since at a few rows the host's time per op shows (copying into a view of the padded
// tensor and zeroing another view took two launches and four ops). The launchers pad at up to 256 rows
// (the narrow tiles), where that read bounds the time, and pass x's own rows as `rows` below: the kernel
// computes and writes those alone. x: contiguous, 16-byte aligned, rows a multiple of 16 bytes (tma_ok).
// tile_rows: the rows of a tile of x (BM here; the mixed-input GEMM's are 256, common/gemm_mixed_input.cuh).
inline torch::Tensor rows_padded_to_tiles(const torch::Tensor& x, int64_t tile_rows = BM) {
  const int64_t M = x.size(0);
  const int64_t pad = (tile_rows - M % tile_rows) % tile_rows;
  if (pad == 0) return x;
  const int64_t row_bytes = x.size(1) * static_cast<int64_t>(x.element_size());
  TORCH_INTERNAL_ASSERT(x.is_contiguous() && aligned16(x.data_ptr()) && row_bytes % 16 == 0,
                        "rows_padded_to_tiles takes what TMA takes: contiguous, aligned rows of 16-byte multiples");
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor padded = torch::empty({M + pad, x.size(1)}, x.options());
  const int64_t n_in = M * row_bytes / 16, n_out = (M + pad) * row_bytes / 16;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n_out + threads - 1) / threads,
                                           static_cast<int64_t>(device_attribute<cudaDevAttrMultiProcessorCount>(x.get_device())) * 8);
  rows_padded_kernel<<<static_cast<unsigned>(blocks), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const uint4*>(x.data_ptr()), reinterpret_cast<uint4*>(padded.data_ptr()), n_in, n_out);
  LAUNCH_CHECK();
  return padded;
}

// Computes x @ w.T and hands each tile to `epi`. x and w checked, tma_ok(x, w), M, N, K > 0. rows: the
// rows of out to compute (the first of x's: rows_padded_to_tiles), or -1 for all of x's.
template <class C, class Epi>
void run_epilogue(const torch::Tensor& x, const torch::Tensor& w, const Epi& epi, int64_t rows = -1) {
  static_assert(!C::PRESPLIT, "pre-split operands go through run_presplit");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t M = rows < 0 ? x.size(0) : rows;
  const int64_t N = w.size(0);
  const int64_t K = x.size(1);
  const CUtensorMap tmap_x = operand_map<C>(x, BM);
  const CUtensorMap tmap_w = operand_map<C>(w, C::BN);
  launch<C>(tmap_x, tmap_w, tmap_x, tmap_w, M, N, K, epi);
}

// Fills `out` (M, N), allocated by gemm_new_output, with x @ w.T (+ bias (N,), when not null).
template <class C>
void run(const torch::Tensor& x, const torch::Tensor& w, torch::Tensor& out, const float* bias = nullptr) {
  run_epilogue<C>(x, w, StoreEpilogue{out.data_ptr<float>(), bias});
}

// ---- pre-split operands (PRESPLIT) ------------------------------------------------------------

// parts[0] = big, parts[1] = small of every value of v (n floats, n % 4 == 0, 16-byte aligned, as
// are both parts: split_parts allocates them). One float4 per thread and step, grid-stride.
__global__ void split_tf32_kernel(const float4* __restrict__ v, float4* __restrict__ big, float4* __restrict__ small,
                                  int64_t n4) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    tc::split_tf32x4(v[i], big[i], small[i]);
  }
}

// The 3xTF32 split of a contiguous (rows, cols) float matrix, cols % 4 == 0 and 16-byte aligned
// (tma_ok): a (2, rows, cols) tensor, [0] the big parts, [1] the small parts. Each part starts
// rows * cols * 4 bytes after the other, a multiple of 16, so both stay TMA-describable.
inline torch::Tensor split_parts(const torch::Tensor& v) {
  TORCH_CHECK(v.is_contiguous() && v.size(-1) % 4 == 0 && aligned16(v.data_ptr()),
              "split_parts needs a contiguous, 16-byte-aligned matrix with a multiple of 4 columns");
  const c10::cuda::CUDAGuard guard(v.device());
  torch::Tensor parts = torch::empty({2, v.size(0), v.size(1)}, v.options());
  const int64_t n4 = v.numel() / 4;
  if (n4 == 0) {
    return parts;
  }
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n4 + threads - 1) / threads,
                                           static_cast<int64_t>(device_attribute<cudaDevAttrMultiProcessorCount>(v.get_device())) * 8);
  split_tf32_kernel<<<static_cast<unsigned>(blocks), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const float4*>(v.data_ptr<float>()), reinterpret_cast<float4*>(parts[0].data_ptr<float>()),
      reinterpret_cast<float4*>(parts[1].data_ptr<float>()), n4);
  LAUNCH_CHECK();
  return parts;
}

// x @ w.T on operands given part by part, each (rows, K) row-major (K-major), K % 4 == 0, 16-byte
// aligned: the big parts x_big (M, K) and w_big (N, K), which may be the raw values themselves (the
// tensor cores truncate them: common/tf32_operands.cuh), and the small parts beside them; each tile
// handed to `epi`: the PRESPLIT kernel. M, N, K > 0.
template <class C, class Epi>
void run_parts_epilogue(const torch::Tensor& x_big, const torch::Tensor& x_small, const torch::Tensor& w_big,
                        const torch::Tensor& w_small, const Epi& epi) {
  static_assert(C::PRESPLIT, "run_parts is the pre-split path");
  const c10::cuda::CUDAGuard guard(x_big.device());
  const int64_t M = x_big.size(0);
  const int64_t N = w_big.size(0);
  const int64_t K = x_big.size(1);
  TORCH_CHECK(w_big.size(1) == K && x_small.sizes() == x_big.sizes() && w_small.sizes() == w_big.sizes() && K % 4 == 0,
              "the operands' parts must agree in shape, with K % 4 == 0");
  const CUtensorMap tmap_x = operand_map<C>(x_big, BM);
  const CUtensorMap tmap_w = operand_map<C>(w_big, C::BN);
  const CUtensorMap tmap_xs = operand_map<C>(x_small, BM);
  const CUtensorMap tmap_ws = operand_map<C>(w_small, C::BN);
  launch<C>(tmap_x, tmap_w, tmap_xs, tmap_ws, M, N, K, epi);
}

// x @ w.T with x given part by part (x_big (M, K), which may be x itself, and x_small) and w raw
// (N, K): w's small parts are made in the kernel, in shared memory (SplitWConfig). M, N, K > 0. rows:
// as run_epilogue's.
template <class C, class Epi>
void run_split_w_epilogue(const torch::Tensor& x_big, const torch::Tensor& x_small, const torch::Tensor& w,
                          const Epi& epi, int64_t rows = -1) {
  static_assert(C::PRESPLIT && !C::LOADS_W_SMALL, "run_split_w takes x's parts and w raw");
  const c10::cuda::CUDAGuard guard(x_big.device());
  const int64_t M = rows < 0 ? x_big.size(0) : rows;
  const int64_t N = w.size(0);
  const int64_t K = x_big.size(1);
  TORCH_CHECK(w.size(1) == K && x_small.sizes() == x_big.sizes() && K % 4 == 0,
              "the operands must agree in K, with x's parts of one shape and K % 4 == 0");
  const CUtensorMap tmap_x = operand_map<C>(x_big, BM);
  const CUtensorMap tmap_w = operand_map<C>(w, C::BN);
  const CUtensorMap tmap_xs = operand_map<C>(x_small, BM);
  launch<C>(tmap_x, tmap_w, tmap_xs, tmap_w, M, N, K, epi);
}

// x @ w.T from split_parts of x (M, K) and of w (N, K) (big parts rounded to the nearest TF32).
template <class C, class Epi>
void run_presplit_epilogue(const torch::Tensor& x_parts, const torch::Tensor& w_parts, const Epi& epi) {
  run_parts_epilogue<C>(x_parts[0], x_parts[1], w_parts[0], w_parts[1], epi);
}

// The same, filling `out` (M, N) with x @ w.T (+ bias).
template <class C>
void run_presplit(const torch::Tensor& x_parts, const torch::Tensor& w_parts, torch::Tensor& out,
                  const float* bias = nullptr) {
  run_presplit_epilogue<C>(x_parts, w_parts, StoreEpilogue{out.data_ptr<float>(), bias});
}

}  // namespace gemm_wgmma
