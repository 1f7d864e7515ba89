// gemm_10_3xtf32.cu: out = x @ w.T at fp32 accuracy on TF32 tensor cores (3xTF32), x (M, K) and
// w (N, K) row-major as nn.Linear stores them, out (M, N) in float32. Rung 10 of the GEMM ladder
// (notebooks/08_tensor_cores_and_precision.ipynb: the split, promotion, the mma.sync path;
// notebooks/09_hopper_gemm_and_epilogue.ipynb: the wgmma paths). The main loops are rung 9's (wgmma,
// common/gemm_wgmma.cuh) and rung 8's (mma.sync, common/gemm_mma.cuh) with two changes: every
// operand is split, and the accumulation is promoted.
//
// PRECISION: fp32 (the strict tier, atol = rtol = 1e-4, against float64), like rungs 1-7.
// @precision: fp32
// @arch: 9.0a
// @ops: its launchers are operators' kernels (utils/ops.py registers them)
//
// The split. Each fp32 value v becomes big = v rounded to TF32 (cvt.rna) and small = v - big
// rounded to TF32; v - big is exact in fp32, and big + small equals v to ~2^-22 relative. Then
//   x·w = xb·wb + xb·ws + xs·wb + xs·ws,
// and the last term is ~2^-22 of the product: dropped. (An inf or NaN goes into small, over a big of
// ±2^-126, so that it gives fp32's ±inf or NaN, not inf - inf: common/tensor_core.cuh.) Three tensor-core products per fragment pair
// (small·big, big·small, then big·big, the small ones first while the accumulator is small).
// Each product of two TF32 values (11 x 11 significant bits) is exact in the tensor core, so the
// PRODUCTS are as good as fp32's.
//
// The key finding: the products are not the problem, the accumulation is. The tensor core adds its
// products into the fp32 accumulator with less care than an FADD (it aligns the terms to the
// largest and keeps a limited number of extra bits, truncating), so a 3xTF32 kernel that lets one
// accumulator run over all of K = 8192 drifts at the problems' data until some elements leave the
// 1e-4 tier (notebook 08's record, kind tensor_cores, has the errors). The fix is the one FP8 GEMMs use: promotion. The mma accumulators
// only ever hold a partial sum over a chunk of at most GEMM10_PROMOTE_K values of k; after each
// chunk every lane adds its partial sums into separate fp32 registers with plain FADD (round to
// nearest, IEEE) and restarts the chunk from zero. The per-chunk error is that of a short sum,
// and the long sum is done in ordinary fp32 arithmetic.
//
// Four kernels do this:
//   - wgmma on pre-split operands (rung 9's machinery, common/gemm_wgmma.cuh), what gemm() and
//     linear() run: an elementwise kernel splits x (and w) into big and small parts in global
//     memory first; each stage is then four TMA boxes (x big, w big, x small, w small) and the
//     consumers only issue wgmmas, three m64n128k8 per k8 step, exactly rung 9's loop otherwise.
//     Block tile 128 x 128 (not rung 9's 128 x 256: the promoted sums double the accumulators,
//     64 + 64 registers per thread), 3 stages of 64 KB, 384 threads. Promotion: every
//     GEMM10_PROMOTE_K values of k, wait for the wgmmas, add, and start the next chunk with
//     scale-d = 0. gemm() splits both operands on every call (read 4, write 8 bytes per element).
//     linear() and linear_backward() need no big parts in memory: the tensor cores truncate an fp32
//     operand to TF32, so with big = trunc(v) the raw values are the big parts and only the small
//     parts rna(v - trunc(v)) are written (±2^-126 where that is 0 and v is not, inf included:
//     common/tf32_operands.cuh; read 4, write 4). Both
//     operands are prepared on every call, the weight too: nothing derived from a weight outlives a
//     call, so no write to it can be missed; a caller that keeps the weight's small parts on
//     purpose hands them in (w_residual: a drop-in's freeze()).
//   - wgmma with x pre-split and w's small parts made in shared memory by the consumers
//     (SplitWConfig, what linear() runs at 65-256 rows of x: common/gemm_dispatch.cuh): no pass over
//     w per call, at the price of making them once per block row, M / 128 times per element of w.
//     At up to 256 rows that is once or twice and beats the pass; beyond it loses to it
//     (experiments/gemm_schedules/README.md).
//   - wgmma splitting in shared memory (gemm_split_in_smem, the first version, kept to compare):
//     TMA brings raw fp32 tiles; the 256 consumer threads split each landed stage in place, big
//     over the raw value and small into a ring of 3 extra buffers, then a proxy fence and a
//     barrier of the consumers, then the same 3 wgmmas. Its shared-memory traffic per k tile (the
//     split reads 32 KB and writes 64 KB, on top of the wgmmas' own operand reads) and the split
//     sitting between a stage's arrival and its wgmmas hold it well below 3x rung 9's time.
//   - mma.sync (rung 8's, common/gemm_mma.cuh): the split in registers, on each fragment value after
//     ldmatrix; three mma.sync per fragment pair. 64 + 64 accumulators and 48 split fragment values
//     per lane need ~220 registers, so 1 block (8 warps) per SM, 4 stages (144 KB). It is the path
//     for inputs TMA cannot describe (K % 4 != 0, misaligned views), and exported on its own as
//     gemm_mma_sync so the paths can be compared.
// `linear` is what the solutions call (utils/ops.py registers it as workbook::linear): nn.Linear's
// forward with the bias added in the epilogue, on this rung when PyTorch asks for IEEE fp32 and
// the GPU is an sm_90, on cuBLAS (as nn.Linear) otherwise. `linear_backward` is its backward,
// dx = dy @ w and dw = dy.T @ x, on the same wgmma kernel at the tier PyTorch's setting asks for
// (3xTF32, or rung 9's TF32 with TF32 allowed): both reduce along an operand's rows (w's, and the
// batch of dy and x), so those operands are copied transposed first (TF32 wgmma reads K-major
// operands only), their small parts written beside them in the same pass.
//
// Everything else (tiles in grouped order, edge handling, 16- and 4-byte load paths) is rung 8's
// and rung 9's; their headers have the fragments, layouts and the pipeline.
//
// Thread -> data: as rung 9 (wgmma path: consumer c, warp v, lane l: rows 64c + 16v + l / 4 (+ 8),
// columns 8j + 2 (l % 4) (+ 1), j in 0..15) and rung 8 (mma.sync path).
//
// GEMM10_PROMOTE_K (default 256): k values per promoted chunk, a multiple of 32; 0 turns promotion
// off (one tensor-core accumulation over all of K), for the study of what it buys, e.g.
//   load_kernel("gemm_10_3xtf32", extra_cuda_cflags=["-DGEMM10_PROMOTE_K=0"])
// GEMM10_WGMMA (default 1): 0 makes gemm() use the mma.sync kernel for every input.
//
// PREDICTION (written before measuring): strict tier met at 1024 x 8192 x 8192 and 32768 x 4096 x
// 1024, max abs error ~1e-5 (and NOT met at K = 8192 with GEMM10_PROMOTE_K=0). Speed: the
// pre-split kernel does 3x rung 9's tensor-core work with no other work in its loop, at a 128-wide
// tile (less reuse per loaded byte than rung 9's 256) and with a pipeline drain every promotion:
// 3.2-3.7x cuBLAS TF32's time (which does a third of the work), i.e. 27-31% of its rate, 2.2-2.6x
// cuBLAS SGEMM for linear() with a kept weight split; gemm() adds the split of both operands (at 1024 x 8192 x 8192 the 256 MB
// weight: read 4 + write 8 bytes per element, ~0.25 ms at ~3 TB/s), ~1.8-2.0x cuBLAS SGEMM. The
// in-shared-memory split should be ~1.5x slower than the pre-split kernel. mma.sync path: 3x rung
// 8's work plus the split at half rung 8's resident warps: 1.0-1.4x cuBLAS SGEMM.
//
// MEASURED (before the prediction was written, and the reason for the pre-split kernel): the
// in-shared-memory split, built first, ran at 1.49x and 1.63x cuBLAS SGEMM at the two shapes.
// What came after the prediction is measured in notebooks 08 (mma.sync) and 09 (wgmma).

#include <algorithm>
#include <tuple>
#include <vector>

#include "common/device_cache.cuh"
#include "common/gemm_dispatch.cuh"
#include "common/gemm_mma.cuh"
#include "common/gemm_small_batch.cuh"
#include "common/gemm_wgmma_host.cuh"
#include "common/tf32_operands.cuh"

#ifndef GEMM10_PROMOTE_K
#define GEMM10_PROMOTE_K (gemm_wgmma::PROMOTE_K)
#endif
#ifndef GEMM10_WGMMA
#define GEMM10_WGMMA 1
#endif

namespace gemm10 {
static_assert(GEMM10_PROMOTE_K >= 0 && GEMM10_PROMOTE_K % 32 == 0,
              "GEMM10_PROMOTE_K must be a multiple of 32, the k depth of a stage in both kernels (or 0: never promote)");
static_assert(gemm_mma::Split3Config::BK == 32 && gemm_wgmma::BK == 32, "PROMOTE counts stages of 32 k");
constexpr int PROMOTE = GEMM10_PROMOTE_K / 32;  // stages per promoted chunk
// Split in shared memory by the consumers: 4 raw stages + a ring of 3 small-part buffers.
using SmemSplitConfig = gemm_wgmma::Config</*BN*/ 128, /*STAGES*/ 4, /*SPLIT*/ true, PROMOTE>;
// Pre-split operands: 3 stages of four boxes (x big, w big, x small, w small: 64 KB each).
using PresplitConfig = gemm_wgmma::PresplitConfig<PROMOTE>;
// 65-256 rows of x (common/gemm_dispatch.cuh): x pre-split, w's small parts made in shared memory, in
// blocks 64 or 128 columns wide.
using SplitW64Config = gemm_wgmma::SplitWNarrowConfig</*BN*/ 64, PROMOTE>;
using SplitW128Config = gemm_wgmma::SplitWNarrowConfig</*BN*/ 128, PROMOTE>;

// The small parts of w that the caller kept (a drop-in's freeze()), or none.
using tf32_operands::kept_residual;

// op(a) @ op(b).T, op transposing where asked (the backward's operands), on the wgmma kernel at the
// tier the caller read: 3xTF32 on raw values and small parts, or TF32.
inline torch::Tensor product(const torch::Tensor& a, bool a_transposed, const torch::Tensor& b, bool b_transposed,
                             bool tf32) {
  const tf32_operands::Operand A = tf32_operands::prepare(a, a_transposed, /*with_residual*/ !tf32);
  const tf32_operands::Operand B = tf32_operands::prepare(b, b_transposed, /*with_residual*/ !tf32);
  TORCH_CHECK(A.k() == B.k(), "internal: the operands' padded K differ (", num(A.k()), " and ", num(B.k()), ")");
  torch::Tensor out = torch::empty({A.rows(), B.rows()}, a.options());
  if (out.numel() == 0) {
    return out;
  }
  if (A.k() == 0) {
    return out.zero_();  // empty sums
  }
  const gemm_wgmma::StoreEpilogue store{out.data_ptr<float>(), nullptr};
  if (tf32) {
    gemm_wgmma::run_epilogue<gemm_wgmma::Tf32Config>(A.big, B.big, store);
  } else {
    gemm_wgmma::run_parts_epilogue<PresplitConfig>(A.big, A.small, B.big, B.small, store);
  }
  return out;
}
}  // namespace gemm10

// @export: out = x @ w.T for float32 CUDA tensors x (M, K) and w (N, K): rung 10, 3xTF32 with promoted accumulation (strict tier), on wgmma (mma.sync where TMA cannot describe the inputs)
torch::Tensor gemm(torch::Tensor x, torch::Tensor w) {
  torch::Tensor out = gemm_new_output(x, w);
  if (out.numel() == 0 || x.size(1) == 0) {
    return out;  // nothing to compute; K == 0: gemm_new_output's zeros
  }
  if (GEMM10_WGMMA && gemm_wgmma::tma_ok(x, w)) {
    gemm_wgmma::run_presplit<gemm10::PresplitConfig>(gemm_wgmma::split_parts(x), gemm_wgmma::split_parts(w), out);
  } else {
    gemm_mma::run<gemm_mma::Split3Config, /*SPLIT*/ true, gemm10::PROMOTE>(x, w, out);
  }
  return out;
}

// @export: rung 10's first wgmma kernel (3xTF32, promoted accumulation, strict tier), which splits each stage in shared memory inside the main loop (gemm pre-splits instead; both take the mma.sync kernel where TMA cannot describe the inputs). Kept for comparing the two
torch::Tensor gemm_split_in_smem(torch::Tensor x, torch::Tensor w) {
  torch::Tensor out = gemm_new_output(x, w);
  if (out.numel() == 0 || x.size(1) == 0) {
    return out;
  }
  if (gemm_wgmma::tma_ok(x, w)) {
    gemm_wgmma::run<gemm10::SmemSplitConfig>(x, w, out);
  } else {
    gemm_mma::run<gemm_mma::Split3Config, /*SPLIT*/ true, gemm10::PROMOTE>(x, w, out);  // as gemm()
  }
  return out;
}

// @export: rung 10's mma.sync kernel alone (3xTF32, promoted accumulation, strict tier), for comparing the two paths
torch::Tensor gemm_mma_sync(torch::Tensor x, torch::Tensor w) {
  return gemm_mma::gemm_mma<gemm_mma::Split3Config, /*SPLIT*/ true, gemm10::PROMOTE>(x, w);
}

// @export: the small parts of w's 3xTF32 split (common/tf32_operands.cuh: w itself is the big parts), for a caller that keeps them between calls (a drop-in's freeze()) and hands them back to linear and the whole-model ops as w_residual
torch::Tensor tf32_residual(torch::Tensor w) {
  CHECK_FLOAT_CUDA_INPUT(w);
  TORCH_CHECK(w.dim() == 2, "w must be 2-D (N, K), got ", shape_string(w));
  return tf32_operands::tf32_residual(w.contiguous());
}

// @export: nn.Linear's forward, x @ w.T + bias, for float32 CUDA x (M, K), w (N, K), bias (N,): on sm_90, up to 64 rows of x at either tier, the small-batch schedule (common/gemm_small_batch.cuh: w read once); beyond, rung 10 (3xTF32, strict tier; w's small parts made in the kernel up to 256 rows) with the bias in its epilogue when PyTorch's fp32 matmul setting is IEEE; otherwise cuBLAS's addmm, exactly what nn.Linear runs (common/gemm_dispatch.cuh chooses). w_residual: tf32_residual(w) kept by the caller, or None: made on this call
torch::Tensor linear(torch::Tensor x, torch::Tensor w, torch::Tensor bias, c10::optional<torch::Tensor> w_residual = c10::nullopt) {
  // The checks of both paths (contiguity is only the kernel's business: it copies views below).
  CHECK_CUDA(x);
  CHECK_CUDA(w);
  CHECK_CUDA(bias);
  CHECK_FLOAT(x);
  CHECK_FLOAT(w);
  CHECK_FLOAT(bias);
  CHECK_SAME_DEVICE(x, w);
  CHECK_SAME_DEVICE(x, bias);
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1),
              "x (M, K) and w (N, K) must be 2-D with the same K, got x ", shape_string(x), " and w ", shape_string(w));
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == w.size(0), "bias must have shape (N,) = (", num(w.size(0)),
              ",), got ", shape_string(bias));
  // The kernel, from the tier (PyTorch's fp32 matmul setting, read on every call) and the rows of x:
  // common/gemm_dispatch.cuh.
  const gemm_dispatch::Plan plan = gemm_dispatch::plan(x, w);
  // A kept w_residual is checked on every path, the ones that do not read it included.
  const torch::Tensor kept = gemm10::kept_residual(w_residual, w);
  // Up to 64 rows of x, at either tier: w read once, as the tensor cores' M operand, split in registers
  // (common/gemm_small_batch.cuh), where the kernels below would leave SMs idle and split w per call.
  if (plan.schedule == gemm_dispatch::Schedule::SMALL_BATCH) {
    return small_batch::linear(x, w, bias, plan.tf32());
  }
  // The dispatch nn.Linear would make: TF32 (or lower) allowed means cuBLAS's TF32 GEMM, which rung 9
  // does not beat (experiments/gemm_schedules/README.md); wgmma and this file's binary exist for sm_90 only.
  if (plan.tf32() || !is_sm90(x.get_device())) {
    return bias.addmm(x, w.t());  // nn.Linear's own GEMM: at::addmm(bias, x, w.t())
  }
  const torch::Tensor xc = x.contiguous();  // any view of x (rows padded, transposed, strided)
  const torch::Tensor wc = w.contiguous();
  const torch::Tensor bc = bias.contiguous();
  torch::Tensor out = gemm_new_output(xc, wc);
  if (out.numel() == 0) {
    return out;
  }
  if (xc.size(1) == 0) {
    return out.copy_(bc.expand_as(out));  // an empty sum: the bias alone
  }
  if (GEMM10_WGMMA && gemm_wgmma::tma_ok(xc, wc)) {
    // x and w are their own big parts; x's small parts are made here.
    const gemm_wgmma::StoreEpilogue store{out.data_ptr<float>(), bc.data_ptr<float>()};
    if (plan.schedule == gemm_dispatch::Schedule::NARROW) {
      // 65-256 rows: w's small parts made in the kernel, where each block column is computed once or
      // twice. A kept w_residual goes unread here: it would be faster only on a pre-split 64-wide
      // configuration this file does not build (0.167 against 0.220 ms at 128 rows on an H200,
      // experiments/gemm_schedules/README.md). x is padded with zero rows to whole tiles first (no
      // TMA box then reads out of bounds, which is slow where w's read bounds the time:
      // common/gemm_wgmma_host.cuh), and its small parts are made from the padded x.
      const int sms = device_attribute<cudaDevAttrMultiProcessorCount>(xc.get_device());
      const torch::Tensor xp = gemm_wgmma::rows_padded_to_tiles(xc);
      const torch::Tensor xs = tf32_operands::tf32_residual(xp);
      if (gemm_dispatch::narrow_width(xc.size(0), wc.size(0), sms) == 64) {
        gemm_wgmma::run_split_w_epilogue<gemm10::SplitW64Config>(xp, xs, wc, store, xc.size(0));
      } else {
        gemm_wgmma::run_split_w_epilogue<gemm10::SplitW128Config>(xp, xs, wc, store, xc.size(0));
      }
    } else {
      // w's small parts made here too, unless the caller kept them.
      gemm_wgmma::run_parts_epilogue<gemm10::PresplitConfig>(
          xc, tf32_operands::tf32_residual(xc), wc, kept.defined() ? kept : tf32_operands::tf32_residual(wc), store);
    }
  } else {
    gemm_mma::run<gemm_mma::Split3Config, /*SPLIT*/ true, gemm10::PROMOTE>(xc, wc, out, bc.data_ptr<float>());
  }
  return out;
}

// @export: nn.Linear's backward for out = x @ w.T + bias: (dx, dw) = (dy @ w, dy.T @ x), each an empty tensor when not needed (need_dx, need_dw), at the tier of PyTorch's fp32 matmul setting: rung 10's 3xTF32 (strict) or rung 9's TF32 (dw; dx with TF32 is cuBLAS's, faster there) on sm_90, the operands that reduce along their rows copied transposed; cuBLAS's mm elsewhere. (The bias's gradient, dy summed over rows, comes with dy from the tail's backward.)
std::tuple<torch::Tensor, torch::Tensor> linear_backward(torch::Tensor dy, torch::Tensor x, torch::Tensor w, bool need_dx,
                                                         bool need_dw) {
  const auto check = [&dy](const torch::Tensor& t, const char* name) {
    check_cuda(t, name);
    check_float(t, name);
    check_same_device(dy, "dy", t, name);
  };
  check(dy, "dy");
  check(x, "x");
  check(w, "w");
  TORCH_CHECK(dy.dim() == 2 && x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && dy.size(0) == x.size(0) &&
                  dy.size(1) == w.size(0),
              "dy (M, N), x (M, K) and w (N, K) must agree, got dy ", shape_string(dy), ", x ", shape_string(x),
              " and w ", shape_string(w));
  for (const auto* t : {&dy, &x, &w}) {
    TORCH_CHECK(t->size(0) <= GEMM_MAX_DIM && t->size(1) <= GEMM_MAX_DIM, "M, N and K must each be at most ",
                num(GEMM_MAX_DIM));
  }
  const c10::cuda::CUDAGuard guard(dy.device());
  const torch::Tensor none = torch::empty({0}, dy.options());
  if (!is_sm90(dy.get_device())) {
    return {need_dx ? dy.mm(w) : none, need_dw ? dy.t().mm(x) : none};  // cuBLAS's, as nn.Linear's backward
  }
  // With TF32 allowed, dx = dy @ w is cuBLAS's: it reads w in place, where the wgmma kernel needs wᵀ
  // copied first (at 8192 x 8192 the copy alone is 0.18 ms on an H100; measured 0.53 ms in all
  // against cuBLAS's 0.34, experiments/training/). dw = dy.T @ x stays on the wgmma kernel, which
  // beats cuBLAS's layout there (0.47 against 0.62 ms) even with both operands copied.
  const bool tf32 = gemm_dispatch::current_tier() == gemm_dispatch::Tier::TF32;
  return {need_dx ? (tf32 ? dy.mm(w) : gemm10::product(dy, /*a_transposed*/ false, w, /*b_transposed*/ true, tf32))
                  : none,
          need_dw ? gemm10::product(dy, /*a_transposed*/ true, x, /*b_transposed*/ true, tf32) : none};
}
