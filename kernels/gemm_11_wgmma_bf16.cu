// gemm_11_wgmma_bf16.cu: out = x @ w.T with Hopper's tensor cores on 16-bit operands, x (M, K) and w (N, K)
// both bfloat16 or both float16, row-major as nn.Linear stores them, out (M, N) in the operands' dtype, as
// F.linear gives it. Rung 11 of the GEMM ladder: rung 9's kernel (common/gemm_wgmma.cuh) with the operand
// trait swapped (Bf16Operand, Fp16Operand: common/gemm_wgmma_types.cuh) and a 16-bit writer in its epilogue
// (common/gemm_wgmma_writers16.cuh). Measured by `python -m utils.ladder --rungs gemm_11_wgmma_bf16` and
// experiments/bf16/probe.py.
//
// PRECISION: the tensor cores read bf16 and fp16 exactly and accumulate in fp32; the output is rounded
// once, to nearest even, as it is stored. The bf16 tier for bf16 operands, the fp16 tier for fp16
// (utils.check.TIERS): the error is the output's own rounding, 2^-9 of its value in bf16, 2^-12 in fp16.
// @precision: bf16
// @arch: 9.0a
//
// What changes from rung 9 (TF32 wgmma), and what does not:
//   - the instruction: wgmma m64n256k16 .bf16 or .f16 multiplies k = 16 per instruction where .tf32
//     multiplies 8, at twice the rate (990 dense TFLOP/s on an H100 SXM's datasheet against 495).
//   - a stage: 128 bytes of k per row is one row of the 128-byte swizzle in both, so a stage holds
//     64 k of 16-bit values against 32 of fp32, and a k16 step advances the descriptors by the same 32
//     bytes as a k8 step. The ring, the barriers, the producer and the consumers are rung 9's, unchanged:
//     the operand is a type the kernel is built from, and the rest follows from its sizes.
//   - the output: a 16-bit pair is 4 bytes, so rung 9's store of a lane's pair would write half a 32-byte
//     sector per row. Quad16Writer exchanges the pairs of two n8 blocks within each quad first, so that
//     each lane stores 4 values (8 bytes) and a warp store fills whole sectors.
//
// Tiles: block 128 x 256, BK = 64, 4 stages of 48 KB, 384 threads, persistent (rung 9's). Per stage each
// consumer issues 4 wgmma m64n256k16 (k = 0, 16, 32, 48).
//
// Thread -> data: as rung 9 (consumer c, warp v, lane l: rows 64c + 16v + l / 4 (+ 8)) until the store;
// then lane l of a quad holds columns 16i + 4 (l % 4) .. + 3 of n8 blocks 2i and 2i + 1, one 8-byte store.
//
// Requirements: TMA needs the row stride (K * 2 bytes) to be a multiple of 16 and the matrices 16-byte
// aligned. For K % 8 != 0 or a misaligned view this launcher copies x and w into aligned tensors with K
// padded by zeros to a multiple of 8 (zeros add nothing to a dot product): correct for any input, one copy
// of each operand slower.
//
// Arithmetic intensity: 128 x 256 x 64 MACs per 48 KB stage, 85 FLOP per byte from L2: twice rung 9's,
// matching the tensor cores' doubled rate, so the ring feeds them as rung 9's feeds TF32.
//
// PREDICTION (written before measuring): on an H200, rung 9 ran at 87-96% of cuBLAS's TF32 GEMM on this
// schedule, and 16-bit operands feed the tensor cores the same way at twice the rate: 85-95% of cuBLAS's
// bf16 GEMM at 1024 x 8192 x 8192 and 8192^3; 80-90% at 32768 x 4096 x 1024, whose K of 1024 makes 16
// stages per tile and leaves the epilogue a larger share.
//
// MEASURED (after the prediction, on an H200; experiments/bf16/README.md has every run, its logs under
// results/nvidia-h200/logs/bf16/): with an fp32 output, 97% of cuBLAS's bf16 GEMM at 1024 x 8192 x 8192,
// 100% at 8192^3, 88% at 32768 x 4096 x 1024, where ours wrote twice cuBLAS's bytes. The 16-bit output
// stored pair by pair was the miss: slower than the fp32 output (0.558 against 0.483 ms at 32768 x 4096 x
// 1024), half-sector stores. With the quad exchange: 0.469 ms, 91.5% of cuBLAS's 0.429 ms there, and 98%
// at 1024 x 8192 x 8192 (fp16: 92% and 98%). What cuBLAS does at K = 1024 that this schedule does not
// is rung 9's open question too (its "segment_k_on" kernel: K cut into segments that blocks share).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/gemm_launch.cuh"
#include "common/gemm_wgmma_host.cuh"
#include "common/gemm_wgmma_writers16.cuh"

namespace {

using namespace gemm_wgmma;

template <class Operand>
using Rung11Config = Half16Config<Operand, /*BN*/ 256, /*STAGES*/ 4>;

// x and w as TMA takes them: contiguous, 16-byte aligned, K * 2 bytes a multiple of 16 (K padded with zeros
// to a multiple of 8 where it is not: copies of both).
std::pair<torch::Tensor, torch::Tensor> tma_operands(const torch::Tensor& x, const torch::Tensor& w) {
  if (tma_ok(x, w)) return {x, w};
  const int64_t K = x.size(1), K8 = (K + 7) / 8 * 8;
  const auto padded = [K, K8](const torch::Tensor& t) {
    torch::Tensor p = torch::zeros({t.size(0), K8}, t.options());  // fresh: 16-byte aligned
    p.narrow(1, 0, K).copy_(t);
    return p;
  };
  return {padded(x), padded(w)};
}

template <class Operand, class T>
void run16(const torch::Tensor& x, const torch::Tensor& w, torch::Tensor& out) {
  const auto [xt, wt] = tma_operands(x, w);
  Store16Epilogue<T> epi{};
  epi.out = reinterpret_cast<T*>(out.data_ptr());
  run_epilogue<Rung11Config<Operand>>(xt, wt, epi);
}

}  // namespace

// @export: out = x @ w.T for CUDA tensors x (M, K) and w (N, K), both bfloat16 or both float16 (out in their dtype): rung 11, 16-bit wgmma + TMA, rung 9's schedule (bf16/fp16 tier; K % 8 != 0 or misaligned: copies with K padded)
torch::Tensor gemm(torch::Tensor x, torch::Tensor w) {
  CHECK_CUDA(x);
  CHECK_CUDA(w);
  TORCH_CHECK(x.scalar_type() == w.scalar_type() &&
                  (x.scalar_type() == torch::kBFloat16 || x.scalar_type() == torch::kHalf),
              "x and w must share one 16-bit dtype, bfloat16 or float16; got x ", x.scalar_type(), " and w ",
              w.scalar_type());
  CHECK_CONTIGUOUS(x);
  CHECK_CONTIGUOUS(w);
  check_gemm_shapes(x, w);
  TORCH_CHECK(is_sm90(x.get_device()), "rung 11 runs on sm_90 GPUs only (wgmma)");
  const c10::cuda::CUDAGuard guard(x.device());
  if (x.size(1) == 0) return torch::zeros({x.size(0), w.size(0)}, x.options());  // every element an empty sum
  torch::Tensor out = torch::empty({x.size(0), w.size(0)}, x.options());
  if (out.numel() == 0) return out;
  with_half16(x.scalar_type(), [&](auto operand, auto element) {
    run16<decltype(operand), decltype(element)>(x, w, out);
  });
  return out;
}
