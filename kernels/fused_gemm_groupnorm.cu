// fused_gemm_groupnorm.cu: each of the four models in one GEMM kernel: x @ w.T on the tensor
// cores (rung 9's or rung 10's wgmma kernel, common/gemm_wgmma.cuh) with the rest of the model in
// its epilogue (common/gemm_epilogue_groupnorm.cuh). Notebook 09's last part; the drop-ins of
// notebook 10 call these through utils/ops.py.
//
//   linear_bias_hardtanh_mish_group_norm(x, w, lb, bias, lo, hi, G, gamma, beta, eps)   problem 94
//   linear_swish_bias_group_norm(x, w, lb, bias, G, gamma, beta, eps)                   problem 37
//   linear_group_norm_leaky_relu_x2(x, w, lb, G, gamma, beta, eps, slope)               problem 62
//   linear_group_norm_min_bias(x, w, lb, G, gamma, beta, eps, bias)                     problem 75
//   (x (M, K) the model's input, w (C, K) and lb (C,) nn.Linear's weight and bias; each also takes
//   w_residual = None and save_gemm_output = false, and returns (out, the GEMM's output x @ w.T + lb
//   when save_gemm_output: what the backward starts from, tail_backward.cu))
//
// PRECISION: fp32 (the strict tier) at PyTorch's default fp32 setting: the GEMM is rung 10's
// 3xTF32 with promoted accumulation, x and w their own big parts and their small parts made on
// every call (common/tf32_operands.cuh; w's handed in as w_residual when the caller keeps them on
// purpose: a drop-in's freeze()). With TF32 allowed
// (torch.backends.cuda.matmul.allow_tf32, or set_float32_matmul_precision("high")) the GEMM is
// rung 9's 1xTF32 (the tf32 tier), as nn.Linear's cuBLAS GEMM would then be. The setting is read
// once on every call (common/gemm_dispatch.cuh, which also picks narrower tiles for 65-256 rows of x
// at the TF32 tier, and sends the rest of up to 256 rows to `linear` and the tail).
//
// A model in bfloat16 or float16 (`model.to(dtype)`: x, w and every parameter of that dtype) runs the
// same epilogue on rung 11's 16-bit GEMM (Half16Config: 128 x 256 tiles, or the narrow widths up to 256
// rows of x, as at the TF32 tier): the arithmetic
// after the GEMM is float32, the parameters read as floats, and the output (and the kept GEMM output)
// rounded to the dtype once, as it is stored (common/gemm_wgmma_writers16.cuh), where eager rounds after
// every op. Under torch.autocast x comes in the autocast dtype and the parameters stay float32
// (utils/ops.py's autocast kernels), and so does w at inference: up to 256 rows x is converted to float32
// for the narrow TF32 tiles, from 257 rows the mixed-input GEMM (common/gemm_mixed_input.cuh) converts w in
// registers, and beyond gemm_dispatch::kMixedInputMaxM rows w is converted (as autocast converts it) for
// rung 11's GEMM (check_and_prepare says why). The output (and the kept GEMM output) is float32, the
// parameters' dtype, as the reference's under CUDA autocast. It needs K % 8 == 0 (TMA's
// 16-byte rows); elsewhere (K % 8 != 0, a group width not instantiated) the model runs as cuBLAS's
// 16-bit GEMM (aten::linear) and then the tail's float32 op on its output, the result in the
// parameters' dtype (unfused16).
// @precision: fp32
// @arch: 9.0a
// @ops: its launchers are operators' kernels (utils/ops.py registers them)
//
// What fusion saves. Unfused, the GEMM writes its output (M, C) and the tail reads it back and
// writes the model's output: at problem 37's shape (32768 x 4096) that is 537 MB written, read
// and written again, ~0.35 ms of the H100's ~3 TB/s on top of the GEMM; at 94's and 62's
// (1024 x 8192) 33.5 MB each way, ~0.02 ms. Fused, the output is written once, from registers, and
// the GEMM's output never exists in memory. Problem 75 writes even less: its model output is the
// (1, C, M, 1) broadcast of a row minimum, so the epilogue leaves one float per (row, tile), and a
// small kernel reduces those and the broadcast write (common/broadcast_add.cuh) follows.
//
// The price is in the epilogue: it is not overlapped with any main loop (a block's main loop
// ends before its epilogue starts, and each SM holds one block), and it now does the tail's
// arithmetic (Mish's exp, the statistics' shuffles) instead of 16 stores. Per block that is
// 128 x BN elements of work against a main loop of K / 32 stages.
//
// Where it applies: GroupNorm's group width D = C / G must be one of the instantiated widths
// (16, 32, 64: the problems'), K % 4 == 0 (K % 8 == 0 in 16 bits: TMA), an sm_90 GPU.
// `fusable(x, w, G)` says so, and
// each launcher asks it first, and its plan (common/gemm_dispatch.cuh; fused_here below: more than
// 256 rows of x, or more than 64 at the TF32 tier): where either says no, the model runs as two ops,
// workbook::linear
// and then the tail's op, found in PyTorch's dispatcher (utils/ops.py registers them; these
// launchers are those ops' CUDA kernels). Without them (this file loaded alone, an export) and for
// anything else, the launcher rejects its inputs with an error naming the condition.
//
// PREDICTION (written before measuring, H100): strict tier, the fused kernel takes rung 10's
// `linear` time plus 2-4% (the epilogue), so that against `linear` + the tail it saves the tail
// minus that: 37 saves ~0.3 ms of ~3.0 (10%), 94/62/75 ~0.01 ms of ~1.1 (1%). TF32 tier: rung 9's
// time plus 3-6% against cuBLAS TF32 + the tail: 37 saves ~0.3 ms of ~1.1 (25-30%); at 94/62/75
// rung 9 is 87-96% of cuBLAS, so the fused kernel and cuBLAS + tail come out within +-5%.

#include <ATen/core/dispatch/Dispatcher.h>  // the unfused ops, where the fused kernels do not apply
#include <ATen/ops/linear.h>                  // cuBLAS's 16-bit GEMM, where they do not (unfused16)

#include <type_traits>

#include "common/activations.cuh"
#include "common/broadcast_add.cuh"
#include "common/check.cuh"
#include "common/dependent_launch.cuh"
#include "common/device_cache.cuh"
#include "common/gemm_dispatch.cuh"
#include "common/gemm_epilogue_groupnorm.cuh"
#include "common/gemm_launch.cuh"
#include "common/gemm_mixed_input.cuh"
#include "common/gemm_wgmma_host.cuh"
#include "common/gemm_wgmma_writers16.cuh"
#include "common/groupnorm.cuh"
#include "common/tf32_operands.cuh"

namespace fused {

using gemm_epilogue::GroupNormEpilogue;
using gemm_epilogue::Sink;

constexpr int kGroupWidths[] = {16, 32, 64};  // D, the instantiated group widths
constexpr int kKMultipleFloat32 = 4;          // K's multiple: TMA's row stride is a multiple of 16 bytes,
constexpr int kKMultiple16 = 8;               // 4 floats or 8 16-bit values

inline bool width_instantiated(int64_t d) {
  for (const int w : kGroupWidths) {
    if (d == w) return true;
  }
  return false;
}

// Calls f(std::integral_constant<int, D>{}) for the instantiated D == d.
template <class F>
void with_group_width(int64_t d, F&& f) {
  switch (d) {
    case 16: f(std::integral_constant<int, 16>{}); break;
    case 32: f(std::integral_constant<int, 32>{}); break;
    case 64: f(std::integral_constant<int, 64>{}); break;
    default: TORCH_CHECK(false, "group width ", num(d), " is not instantiated (16, 32 or 64)");
  }
}

// `fusable` (below: exported), the inputs' side of the choice.
bool fusable_inputs(const torch::Tensor& x, const torch::Tensor& w, int64_t num_groups);

// A model in bfloat16 or float16, or one under autocast: x's dtype (the checks hold w to it).
inline bool is_half16(const torch::Tensor& x) {
  return x.scalar_type() == torch::kBFloat16 || x.scalar_type() == torch::kHalf;
}

inline int64_t k_multiple(const torch::Tensor& x) { return is_half16(x) ? kKMultiple16 : kKMultipleFloat32; }

// A parameter t's dtype: linear_bias's, which is x's, or float32 where x is 16-bit (under autocast).
inline void check_param_dtype(const torch::Tensor& x, const torch::Tensor& lb, const torch::Tensor& t,
                              const char* name) {
  const bool autocast = is_half16(x) && lb.scalar_type() == torch::kFloat;
  const char* or_float32 = is_half16(x) ? " (or float32, as under autocast)" : "";
  TORCH_CHECK(t.scalar_type() == x.scalar_type() || autocast, name, " must have x's dtype ", x.scalar_type(),
              or_float32, ", got ", t.scalar_type(),
              " (the model and its input in one dtype: model.to(x.dtype))");
  TORCH_CHECK(t.scalar_type() == lb.scalar_type(), name, " must have linear_bias's dtype ", lb.scalar_type(),
              ", got ", t.scalar_type(), " (the model's parameters in one dtype: model.to(dtype))");
}

// A tail's argument as its float32 op takes it: a tensor converted, anything else as it is.
inline torch::Tensor as_float(const torch::Tensor& t) { return t.to(torch::kFloat); }
template <class A>
const A& as_float(const A& a) {
  return a;
}

// unless_fusable's path for x and w in bfloat16 or float16: cuBLAS's GEMM in their dtype (aten::linear, as
// nn.Linear's, the bias in it too, as autocast converts it), then the tail's float32 op on its output
// and the parameters converted, its output in the parameters' dtype (rounded to the 16-bit dtype, or
// float32 under autocast); the GEMM's output kept when save. nullopt when the tail's op is not
// registered.
template <class... Args>
std::optional<std::tuple<torch::Tensor, torch::Tensor>> unfused16(const char* tail,
                                                                  const torch::Tensor& x, const torch::Tensor& w,
                                                                  const torch::Tensor& lb, bool save,
                                                                  const Args&... tail_args) {
  const auto tail_op = c10::Dispatcher::singleton().findSchema({tail, ""});
  if (!tail_op.has_value()) return std::nullopt;
  using T = torch::Tensor;
  const torch::Tensor y = at::linear(x, w.to(x.scalar_type()), lb.to(x.scalar_type()));  // (w float32 under autocast)
  const torch::Tensor out = tail_op->typed<T(T, std::decay_t<Args>...)>().call(as_float(y), as_float(tail_args)...);
  const torch::TensorOptions params = x.options().dtype(lb.scalar_type());  // the output's, the kept GEMM output's
  return std::make_tuple(out.to(params), save ? y.to(params) : torch::empty({0}, params));
}

// Where the fused kernels do not apply (`fusable` false), the tail's op `tail` runs on the GEMM's output
// and tail_args, returning (out, y when save) as the fused launcher would. For float32 x, the GEMM is
// y = workbook::linear(x, w, lb, w_residual); for 16-bit x, unfused16's. Calls go through the dispatcher
// with the launchers' own C++ signature (tensors, doubles and int64_ts by value: what tail_args are),
// which it checks against the registered kernel's. nullopt when the kernels apply, or when the ops are
// not registered (the caller's checks then name the condition that failed).
template <class... Args>
std::optional<std::tuple<torch::Tensor, torch::Tensor>> unless_fusable(bool fusable, const char* tail,
                                                                       const torch::Tensor& x, const torch::Tensor& w,
                                                                       const torch::Tensor& lb,
                                                                       const c10::optional<torch::Tensor>& w_residual,
                                                                       bool save, const Args&... tail_args) {
  if (fusable) return std::nullopt;
  if (is_half16(x)) return unfused16(tail, x, w, lb, save, tail_args...);
  c10::Dispatcher& dispatcher = c10::Dispatcher::singleton();
  const auto linear = dispatcher.findSchema({"workbook::linear", ""});
  const auto tail_op = dispatcher.findSchema({tail, ""});
  if (!linear.has_value() || !tail_op.has_value()) return std::nullopt;
  using T = torch::Tensor;
  const torch::Tensor y = linear->typed<T(T, T, T, c10::optional<T>)>().call(x, w, lb, w_residual);
  torch::Tensor out = tail_op->typed<T(T, std::decay_t<Args>...)>().call(y, tail_args...);
  return std::make_tuple(out, save ? y : torch::empty({0}, x.options()));
}

// The operands as TMA needs them: contiguous and 16-byte aligned (a copy when they are not).
inline torch::Tensor tma_ready(const torch::Tensor& t) {
  torch::Tensor c = t.contiguous();
  return aligned16(c.data_ptr()) ? c : c.clone();
}

// The checks every export makes, then the operands ready for the kernel: x (M, K), w (C, K) CUDA on one
// device (views welcome: copied), lb, gamma, beta (C,) contiguous; x and w float32 or of one 16-bit
// dtype, the parameters of x's dtype or (16-bit operands, under autocast) float32, or 16-bit x with
// float32 w and parameters (autocast's call); G divides C; the fused kernels' own conditions (fusable).
struct Operands {
  torch::Tensor x, w;
  torch::Tensor w_residual;  // w's small parts kept by the caller (freeze()), or undefined: made per call
  bool save;                 // keep the GEMM's output for the backward
  bool half16;               // x and w in bfloat16 or float16: rung 11's GEMM
  c10::ScalarType params;    // the parameters' dtype, the output's and the kept GEMM output's: x's, or
                             // float32 under autocast
  bool tf32;                 // float32's tier, as the launcher's plan read it (common/gemm_dispatch.cuh)
  int narrow;                // the plan's NARROW schedule (65-256 rows at the TF32 tier, up to 256 for a
                             // model in bf16 or fp16): the block width, 64 or 128
                             // (gemm_dispatch::narrow_width); 0: the wide tiles
  bool mixed_input = false;  // 16-bit x and float32 w (autocast's call, 257 to kMixedInputMaxM rows): the
                             // mixed-input GEMM (common/gemm_mixed_input.cuh)
};

inline Operands check_and_prepare(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& lb,
                                  int64_t num_groups, const torch::Tensor& gamma, const torch::Tensor& beta,
                                  double eps, const c10::optional<torch::Tensor>& w_residual, bool save,
                                  const gemm_dispatch::Plan& plan) {
  CHECK_CUDA(x);
  CHECK_CUDA(w);
  const bool half16 = is_half16(x);
  const bool mixed = gemm_dispatch::mixed_operands(x, w);  // autocast's call: w float32 (gemm_dispatch.cuh)
  TORCH_CHECK(half16 || x.scalar_type() == torch::kFloat, "x must be float32, bfloat16 or float16, got ",
              x.scalar_type(), " (call .float())");
  const char* or_float32 = half16 ? " (or float32, as under autocast)" : "";
  TORCH_CHECK(w.scalar_type() == x.scalar_type() || mixed, "w must have x's dtype ", x.scalar_type(), or_float32,
              ", got ", w.scalar_type(),
              " (the model and its input in one dtype: model.to(x.dtype))");
  TORCH_CHECK(!mixed || lb.scalar_type() == torch::kFloat, "with ", x.scalar_type(),
              " x and a float32 w (autocast's call) the parameters must be float32, got linear_bias ",
              lb.scalar_type());
  CHECK_SAME_DEVICE(x, w);
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1),
              "x (M, K) and w (C, K) must be 2-D with the same K, got x ", shape_string(x), " and w ", shape_string(w));
  TORCH_CHECK(x.size(0) <= GEMM_MAX_DIM && w.size(0) <= GEMM_MAX_DIM && x.size(1) <= GEMM_MAX_DIM,
              "M, C and K must each be at most ", num(GEMM_MAX_DIM), ", got x ", shape_string(x), " and w ",
              shape_string(w));
  const int64_t C = w.size(0);
  const auto check = [&](const torch::Tensor& t, const char* name) {
    check_cuda(t, name);
    check_param_dtype(x, lb, t, name);
    check_contiguous(t, name);
    check_same_device(x, "x", t, name);
  };
  check(lb, "linear_bias");
  check(gamma, "gamma");
  check(beta, "beta");
  TORCH_CHECK(lb.dim() == 1 && lb.size(0) == C, "linear_bias must have shape [", num(C), "], got ", shape_string(lb));
  TORCH_CHECK(num_groups > 0, "num_groups must be positive, got ", num(num_groups));
  TORCH_CHECK(C % num_groups == 0, "the number of channels C = ", num(C), " must be divisible by num_groups = ",
              num(num_groups));
  TORCH_CHECK(gamma.dim() == 1 && gamma.size(0) == C, "gamma (the GroupNorm weight) must have shape [", num(C),
              "], got ", shape_string(gamma));
  TORCH_CHECK(beta.dim() == 1 && beta.size(0) == C, "beta (the GroupNorm bias) must have shape [", num(C),
              "], got ", shape_string(beta));
  TORCH_CHECK(eps >= 0.0, "eps must be non-negative, got ", num(eps));
  TORCH_CHECK(is_sm90(x.get_device()), "the fused kernels run on sm_90 GPUs only (wgmma)");
  const char* operands = half16 ? "16-bit" : "float32";
  TORCH_CHECK(x.size(1) % k_multiple(x) == 0, "the fused kernels need K % ", num(k_multiple(x)), " == 0 (", operands,
              " x: TMA's 16-byte row stride), got K = ", num(x.size(1)));
  TORCH_CHECK(!half16 || !w_residual.has_value(),
              "w_residual is float32's 3xTF32 split of w; a model in ", x.scalar_type(), " has none (give None)");
  TORCH_CHECK(width_instantiated(C / num_groups), "the fused kernels take groups of 16, 32 or 64 channels, got ",
              num(C / num_groups), " (C = ", num(C), ", num_groups = ", num(num_groups), ")");
  // Autocast's call, by the rows of x (common/gemm_dispatch.cuh):
  //   up to 256   x converted to float32 (M x K values) for the narrow TF32 tiles, w read once as it is;
  //               converting w there would cost more than the whole GEMM (problem 94 on an H200: this
  //               route's kernels take 84-109 us a call at 16-256 rows, converting w alone about 90 us;
  //               experiments/bf16/README.md, "Autocast at a few rows");
  //   257 to kMixedInputMaxM   the mixed-input GEMM (common/gemm_mixed_input.cuh): x as it is, w float32,
  //               converted to x's dtype in registers;
  //   beyond      w converted to x's dtype (one read of w and a write of half of it, which autocast itself
  //               would make) for rung 11's GEMM.
  // A model in bfloat16 or float16 takes the narrow tiles at up to 256 rows, as float32's TF32 tier does;
  // autocast's training step (x and w converted in Python, the parameters float32) the wide ones.
  const bool mixed_tf32 = mixed && plan.schedule == gemm_dispatch::Schedule::NARROW;
  if (mixed && !mixed_tf32 && x.size(0) <= gemm_dispatch::kMixedInputMaxM) {
    return {tma_ready(x), tma_ready(w), torch::Tensor(), save, false, torch::kFloat, false, 0, true};
  }
  const int narrow = plan.schedule == gemm_dispatch::Schedule::NARROW && (plan.tf32() || half16)
                         ? gemm_dispatch::narrow_width(x.size(0), w.size(0),
                                                       device_attribute<cudaDevAttrMultiProcessorCount>(x.get_device()))
                         : 0;
  if (half16 && !mixed_tf32) {
    const torch::Tensor w16 = tma_ready(mixed ? w.to(x.scalar_type()) : w);
    const bool model16 = lb.scalar_type() == x.scalar_type();
    return {tma_ready(x), w16, torch::Tensor(), save, true, lb.scalar_type(), false, model16 ? narrow : 0};
  }
  const torch::Tensor wc = tma_ready(w);
  return {tma_ready(mixed ? x.to(torch::kFloat) : x), wc, tf32_operands::kept_residual(w_residual, wc), save, false,
          torch::kFloat, plan.tf32(), narrow};
}

// Whether the whole model runs in this file's kernels: `fusable`, and the plan's tiles
// (common/gemm_dispatch.cuh): the wide ones (over 256 rows of x) at either tier, the narrow ones
// (65-256 rows) at the TF32 tier. Elsewhere the model runs as workbook::linear and its tail:
//   1-64 rows    the time is one read of w, which `linear`'s small-batch schedule makes and these
//                kernels' 128-row tiles would not;
//   65-256 rows, strict: on `linear`'s narrow tiles the GEMM alone takes 0.217-0.367 ms, and the
//                tail in its epilogue saved nothing (0.222 against 0.217 + the tail's 0.005 at 65-128
//                rows) or lost (0.398 against 0.364 at 129-192), problem 62 on an H200
//                (experiments/gemm_schedules/README.md). At the TF32 tier the fused kernel is one
//                launch where `linear` + the tail are cuBLAS's and the tail's, and the host's time
//                between them showed at these sizes.
// A model in bfloat16 or float16 runs here at every M: on rung 11's GEMM at the narrow widths up to 256
// rows (Half16Config<Operand, 64 or 128>), the wide ones beyond; under autocast with w float32, the narrow
// TF32 tiles up to 256 rows, then the mixed-input GEMM (check_and_prepare).
// Its arguments are checked here first, so that an error names them as this file's kernels would
// (linear would call linear_bias "bias").
inline bool fused_here(const gemm_dispatch::Plan& plan, const torch::Tensor& x, const torch::Tensor& w,
                       const torch::Tensor& lb, int64_t num_groups, const torch::Tensor& gamma,
                       const torch::Tensor& beta, double eps, const c10::optional<torch::Tensor>& w_residual) {
  if (!fusable_inputs(x, w, num_groups)) return false;
  if (plan.schedule == gemm_dispatch::Schedule::WIDE || is_half16(x)) return true;
  if (plan.schedule == gemm_dispatch::Schedule::NARROW && plan.tf32()) return true;
  check_and_prepare(x, w, lb, num_groups, gamma, beta, eps, w_residual, false, plan);
  return false;
}

// The model's own bias before GroupNorm (94, 37): (C,), of the parameters' dtype.
inline void check_bias(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& lb,
                       const torch::Tensor& bias) {
  CHECK_CUDA(bias);
  check_param_dtype(x, lb, bias, "bias");
  CHECK_CONTIGUOUS(bias);
  CHECK_SAME_DEVICE(x, bias);
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == w.size(0), "bias must have shape [", num(w.size(0)), "], got ",
              shape_string(bias));
}

// x @ w.T through `epi`, at the tier and on the tiles the launcher's plan chose:
//   TF32     Tf32Config, 128 x 256 (over 256 rows); Tf32NarrowConfig, 64 or 128 wide (65-256 rows, and
//            autocast's 1-256)
//   mixed    the mixed-input GEMM's tiles of out.T, 128 channels x 256 rows, handed to the epilogue 64 x 64
//            at a time (autocast's call at 257 to kMixedInputMaxM rows: x 16-bit, w float32)
//   strict   PresplitConfig, 128 x 128 (over 256 rows), w's small parts made before (or kept: freeze())
//   16-bit   rung 11's Half16Config, 128 x 256 (x and w in bf16 or fp16), the epilogue's element T the
//            parameters' (the dtype's, or float32 under autocast); a model in T, up to 256 rows: 64 or
//            128 wide, 6 stages (as Tf32NarrowConfig: 24 or 32 KB a stage)
// x and w are their own big parts (common/tf32_operands.cuh); x's small parts are made here. On the
// narrow tiles x is padded with zero rows to whole tiles first (rows_padded_to_tiles: the TMA boxes
// then read nothing out of bounds, which is slow where w's read bounds the time).
template <class T, class Epi>
void run_gemm(const Operands& o, const Epi& epi) {
  using namespace gemm_wgmma;
  if (o.mixed_input) {
    if constexpr (std::is_same_v<T, float>) {  // under autocast: the parameters and the output float32
      // x padded to whole tiles of 256 rows, as the narrow tiles pad it: at 300 rows the call took 0.188 ms
      // with TMA filling the second tile's 212 missing rows, against 0.144 at 512 rows (problem 94, H200)
      const torch::Tensor x = rows_padded_to_tiles(o.x, gemm_mixed::BX);
      with_half16(o.x.scalar_type(), [&](auto operand, auto) {
        gemm_mixed::run_mixed_epilogue<decltype(operand)>(x, o.w, epi, o.x.size(0));
      });
    } else {
      TORCH_INTERNAL_ASSERT(false, "the mixed-input GEMM's epilogue is float32's");
    }
  } else if (o.half16) {
    if constexpr (std::is_same_v<T, float>) {  // under autocast: x and w of either 16-bit dtype, the wide tiles
      with_half16(o.x.scalar_type(), [&](auto operand, auto) {
        run_epilogue<Half16Config<decltype(operand), /*BN*/ 256, /*STAGES*/ 4>>(o.x, o.w, epi);
      });
    } else {  // a model in T: x and w are T's (the checks), so no kernel pairs one 16-bit type with the other
      using Operand = typename OperandFor<T>::type;
      const torch::Tensor x = o.narrow != 0 ? rows_padded_to_tiles(o.x) : o.x;
      switch (o.narrow) {
        case 64: run_epilogue<Half16Config<Operand, 64, /*STAGES*/ 6>>(x, o.w, epi, o.x.size(0)); break;
        case 128: run_epilogue<Half16Config<Operand, 128, /*STAGES*/ 6>>(x, o.w, epi, o.x.size(0)); break;
        default: run_epilogue<Half16Config<Operand, /*BN*/ 256, /*STAGES*/ 4>>(o.x, o.w, epi);
      }
    }
  } else if constexpr (!std::is_same_v<T, float>) {  // (no float32 kernel for a 16-bit epilogue)
    TORCH_INTERNAL_ASSERT(false, "a 16-bit epilogue on float32 operands");
  } else if (o.tf32) {
    const torch::Tensor x = o.narrow != 0 ? rows_padded_to_tiles(o.x) : o.x;
    switch (o.narrow) {
      case 64: run_epilogue<Tf32NarrowConfig<64>>(x, o.w, epi, o.x.size(0)); break;
      case 128: run_epilogue<Tf32NarrowConfig<128>>(x, o.w, epi, o.x.size(0)); break;
      default: run_epilogue<Tf32Config>(x, o.w, epi);
    }
  } else {
    TORCH_INTERNAL_ASSERT(o.narrow == 0, "the strict tier's fused kernels take the wide tiles only (fused_here)");
    const torch::Tensor ws = o.w_residual.defined() ? o.w_residual : tf32_operands::tf32_residual(o.w);
    run_parts_epilogue<PresplitConfig<>>(o.x, tf32_operands::tf32_residual(o.x), o.w, ws, epi);
  }
}
// The width of run_gemm's block tiles: a ROW_MIN epilogue leaves one value per row and tile.
inline int64_t block_width(const Operands& o) {
  if (o.mixed_input) return gemm_mixed::CHUNK;
  if (o.narrow != 0) return o.narrow;
  if (o.half16) return 256;
  return o.tf32 ? gemm_wgmma::Tf32Config::BN : gemm_wgmma::PresplitConfig<>::BN;
}

// The GEMM's output x @ w.T + lb, kept for the backward when o.save; an empty tensor otherwise.
inline torch::Tensor saved_output(const Operands& o) {
  const torch::TensorOptions options = o.x.options().dtype(o.params);
  return o.save ? torch::empty({o.x.size(0), o.w.size(0)}, options) : torch::empty({0}, options);
}

// Calls f(T{}) for the element of a dtype: float, __nv_bfloat16 or __half.
template <class F>
void with_element(c10::ScalarType dtype, F&& f) {
  if (dtype == torch::kFloat) {
    f(0.0f);
  } else {
    gemm_wgmma::with_half16(dtype, [&](auto, auto element) { f(element); });
  }
}

// A parameter's data as the epilogue's pointers hold it, T's (a float pointer the epilogue reads as its P's).
template <class T>
const T* param_ptr(const torch::Tensor& t) {
  return reinterpret_cast<const T*>(t.data_ptr());
}
template <class T>
T* out_ptr(const torch::Tensor& t) {
  return reinterpret_cast<T*>(t.data_ptr());
}

// The model whose GroupNorm output is stored: out (M, C) = post(GroupNorm(pre(x @ w.T + lb))), and
// the GEMM's output when o.save.
template <class Pre, class Post>
std::tuple<torch::Tensor, torch::Tensor> store_model(const Operands& o, const torch::Tensor& lb, int64_t num_groups,
                                                     const torch::Tensor& gamma, const torch::Tensor& beta, double eps,
                                                     Pre pre, Post post) {
  const int64_t M = o.x.size(0), C = o.w.size(0);
  torch::Tensor out = torch::empty({M, C}, o.x.options().dtype(o.params));
  torch::Tensor saved = saved_output(o);
  if (out.numel() == 0) return {out, saved};
  TORCH_CHECK(o.x.size(1) > 0, "K = 0: the fused kernels need at least one k (the op runs the unfused ops)");
  const c10::cuda::CUDAGuard guard(o.x.device());
  with_group_width(C / num_groups, [&](auto d) {
    with_element(o.params, [&](auto element) {
      constexpr int D = decltype(d)::value;
      using T = decltype(element);
      GroupNormEpilogue<D, Pre, Post, Sink::STORE, T, T> epi{param_ptr<T>(lb), pre, param_ptr<T>(gamma),
                                                             param_ptr<T>(beta), static_cast<float>(eps), post,
                                                             out_ptr<T>(out), nullptr,
                                                             o.save ? out_ptr<T>(saved) : nullptr};
      run_gemm<T>(o, epi);
    });
  });
  return {out, saved};
}

// Problem 75 in a 16-bit dtype T: out (1, C, M, 1) = rowmin (M,) + bias (C,), out[0, c, m, 0] rounded to T
// once (rowmin float32, as the epilogue found it). One value per thread: the output is C x M elements of 2
// bytes, written once. A dependent of the row minimum's kernel.
template <class T>
__global__ void broadcast_add16_kernel(const float* __restrict__ rowmin, const T* __restrict__ bias,
                                       T* __restrict__ out, int64_t M, int64_t total) {
  wait_for_producer();
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t c = i / M;
    out[i] = gemm_wgmma::OutputElement<T>::rounded(rowmin[i - c * M] + gemm_wgmma::ParamElement<T>::load(bias + c));
  }
}

template <class T>
torch::Tensor broadcast_add16(const torch::Tensor& rowmin, const torch::Tensor& bias) {
  const int64_t M = rowmin.size(0), C = bias.size(1);
  torch::Tensor out = torch::empty({1, C, M, 1}, bias.options());
  if (M == 0 || C == 0) return out;
  const int64_t total = C * M;
  const unsigned int grid = resident_grid(broadcast_add16_kernel<T>, kBroadcastThreads, 0,
                                          (total + kBroadcastThreads - 1) / kBroadcastThreads, rowmin.get_device());
  launch_dependent(broadcast_add16_kernel<T>, dim3(grid), dim3(kBroadcastThreads), at::cuda::getCurrentCUDAStream(),
                   static_cast<const float*>(rowmin.data_ptr<float>()), param_ptr<T>(bias), out_ptr<T>(out), M,
                   total);
  return out;
}

// Problem 75: out (1, C, M, 1) = min over c of GroupNorm(x @ w.T + lb) + bias (1, C, 1, 1).
std::tuple<torch::Tensor, torch::Tensor> min_model(const Operands& o, const torch::Tensor& lb, int64_t num_groups,
                                                   const torch::Tensor& gamma, const torch::Tensor& beta, double eps,
                                                   const torch::Tensor& bias, bool atomic) {
  const int64_t M = o.x.size(0), C = o.w.size(0);
  TORCH_CHECK(C > 0 || M == 0, "the minimum over C = 0 channels is undefined");
  if (o.params != torch::kFloat) {
    CHECK_CUDA(bias);
    check_param_dtype(o.x, lb, bias, "bias");
    CHECK_CONTIGUOUS(bias);
    check_same_device(o.x, "x", bias, "bias");
    check_broadcast_bias_shape(bias);
  } else {
    check_broadcast_bias(o.x, bias, "x");
  }
  TORCH_CHECK(bias.size(1) == C, "bias must have shape [1, ", num(C), ", 1, 1], got ", shape_string(bias));
  TORCH_CHECK(o.x.size(1) > 0 || M == 0, "K = 0: the fused kernels need at least one k (the op runs the unfused ops)");
  const c10::cuda::CUDAGuard guard(o.x.device());
  torch::Tensor rowmin = torch::empty({M, 1}, o.x.options().dtype(torch::kFloat));
  torch::Tensor saved = saved_output(o);
  if (M == 0) return {torch::empty({1, C, 0, 1}, bias.options()), saved};
  const int64_t tiles = (C + block_width(o) - 1) / block_width(o);
  torch::Tensor partials, keys;
  if (atomic) {
    keys = torch::empty({M}, o.x.options().dtype(torch::kInt)).fill_(gemm_epilogue::kInfinityKey);
  } else {
    partials = torch::empty({tiles, M}, o.x.options().dtype(torch::kFloat));
  }
  with_group_width(C / num_groups, [&](auto d) {
    with_element(o.params, [&](auto element) {
      constexpr int D = decltype(d)::value;
      using T = decltype(element);
      GroupNormEpilogue<D, Identity, Identity, Sink::ROW_MIN, T, T> epi{
          param_ptr<T>(lb), Identity{}, param_ptr<T>(gamma), param_ptr<T>(beta), static_cast<float>(eps),
          Identity{}, atomic ? nullptr : partials.data_ptr<float>(), atomic ? keys.data_ptr<int>() : nullptr,
          o.save ? out_ptr<T>(saved) : nullptr};
      run_gemm<T>(o, epi);
    });
  });
  const int threads = 256;
  const dim3 grid(static_cast<unsigned>((M + threads - 1) / threads));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (atomic) {
    launch_dependent(gemm_epilogue::row_min_of_keys_kernel, grid, dim3(threads), stream,
                     static_cast<const int*>(keys.data_ptr<int>()), rowmin.data_ptr<float>(), static_cast<int>(M));
  } else {
    launch_dependent(gemm_epilogue::row_min_of_partials_kernel, grid, dim3(threads), stream,
                     static_cast<const float*>(partials.data_ptr<float>()), rowmin.data_ptr<float>(),
                     static_cast<int>(tiles), static_cast<int>(M));
  }
  if (o.params != torch::kFloat) {
    torch::Tensor out;
    with_element(o.params, [&](auto element) {
      if constexpr (!std::is_same_v<decltype(element), float>) out = broadcast_add16<decltype(element)>(rowmin, bias);
    });
    return {out, saved};
  }
  return {broadcast_add(rowmin, bias, /*dependent=*/true), saved};
}

}  // namespace fused

// @export: whether the fused kernels take these inputs: an sm_90 GPU, K % 4 == 0 (float32) or K % 8 == 0 (bfloat16, float16), groups of 16, 32 or 64 channels (x (M, K), w (C, K), C % num_groups == 0)
bool fusable(torch::Tensor x, torch::Tensor w, int64_t num_groups) { return fused::fusable_inputs(x, w, num_groups); }

bool fused::fusable_inputs(const torch::Tensor& x, const torch::Tensor& w, int64_t num_groups) {
  return x.is_cuda() && x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && x.size(1) > 0 &&
         x.size(1) % fused::k_multiple(x) == 0 && num_groups > 0 && w.size(0) % num_groups == 0 &&
         fused::width_instantiated(w.size(0) / num_groups) && is_sm90(x.get_device());
}

// Each whole model returns (out, saved): saved is the GEMM's output x @ w.T + linear_bias (M, C) when
// save_gemm_output (training: the backward's input), an empty tensor otherwise. w_residual: w's small
// parts kept by the caller (tf32_residual of gemm_10_3xtf32.cu, a drop-in's freeze()), or None.

// @export: problem 94 in one kernel: group_norm(mish(hardtanh(x @ w.T + linear_bias + bias, min_val, max_val)), num_groups, gamma, beta, eps)
std::tuple<torch::Tensor, torch::Tensor> linear_bias_hardtanh_mish_group_norm(torch::Tensor x, torch::Tensor w, torch::Tensor linear_bias, torch::Tensor bias,
                                            double min_val, double max_val, int64_t num_groups, torch::Tensor gamma,
                                            torch::Tensor beta, double eps, c10::optional<torch::Tensor> w_residual = c10::nullopt,
                                            bool save_gemm_output = false) {
  const gemm_dispatch::Plan plan = gemm_dispatch::plan(x, w);  // the tier, read once, and the schedule
  const bool fused_here = fused::fused_here(plan, x, w, linear_bias, num_groups, gamma, beta, eps, w_residual);
  const auto unfused = fused::unless_fusable(fused_here, "workbook::bias_hardtanh_mish_group_norm", x, w, linear_bias, w_residual,
                                                   save_gemm_output, bias, min_val, max_val, num_groups, gamma, beta, eps);
  if (unfused.has_value()) return *unfused;
  const fused::Operands o =
      fused::check_and_prepare(x, w, linear_bias, num_groups, gamma, beta, eps, w_residual, save_gemm_output, plan);
  fused::check_bias(x, w, linear_bias, bias);
  TORCH_CHECK(min_val <= max_val, "Hardtanh needs min_val <= max_val, got ", num(min_val), " and ", num(max_val));
  const BiasHardtanhMishFast pre{fused::param_ptr<float>(bias), static_cast<float>(min_val), static_cast<float>(max_val)};
  return fused::store_model(o, linear_bias, num_groups, gamma, beta, eps, pre, Identity{});
}

// @export: problem 37 in one kernel: group_norm(y * sigmoid(y) + bias, num_groups, gamma, beta, eps), y = x @ w.T + linear_bias
std::tuple<torch::Tensor, torch::Tensor> linear_swish_bias_group_norm(torch::Tensor x, torch::Tensor w, torch::Tensor linear_bias, torch::Tensor bias,
                                    int64_t num_groups, torch::Tensor gamma, torch::Tensor beta, double eps,
                                    c10::optional<torch::Tensor> w_residual = c10::nullopt, bool save_gemm_output = false) {
  const gemm_dispatch::Plan plan = gemm_dispatch::plan(x, w);  // the tier, read once, and the schedule
  const bool fused_here = fused::fused_here(plan, x, w, linear_bias, num_groups, gamma, beta, eps, w_residual);
  const auto unfused = fused::unless_fusable(fused_here, "workbook::swish_bias_group_norm", x, w, linear_bias, w_residual,
                                                   save_gemm_output, bias, num_groups, gamma, beta, eps);
  if (unfused.has_value()) return *unfused;
  const fused::Operands o =
      fused::check_and_prepare(x, w, linear_bias, num_groups, gamma, beta, eps, w_residual, save_gemm_output, plan);
  fused::check_bias(x, w, linear_bias, bias);
  return fused::store_model(o, linear_bias, num_groups, gamma, beta, eps, SwishBiasFast{fused::param_ptr<float>(bias)},
                            Identity{});
}

// @export: problem 62 in one kernel: z = leaky_relu(group_norm(x @ w.T + linear_bias, num_groups, gamma, beta, eps), negative_slope); z + z
std::tuple<torch::Tensor, torch::Tensor> linear_group_norm_leaky_relu_x2(torch::Tensor x, torch::Tensor w, torch::Tensor linear_bias, int64_t num_groups,
                                       torch::Tensor gamma, torch::Tensor beta, double eps, double negative_slope,
                                       c10::optional<torch::Tensor> w_residual = c10::nullopt, bool save_gemm_output = false) {
  const gemm_dispatch::Plan plan = gemm_dispatch::plan(x, w);  // the tier, read once, and the schedule
  const bool fused_here = fused::fused_here(plan, x, w, linear_bias, num_groups, gamma, beta, eps, w_residual);
  const auto unfused = fused::unless_fusable(fused_here, "workbook::group_norm_leaky_relu_x2", x, w, linear_bias, w_residual,
                                                   save_gemm_output, num_groups, gamma, beta, eps, negative_slope);
  if (unfused.has_value()) return *unfused;
  const fused::Operands o =
      fused::check_and_prepare(x, w, linear_bias, num_groups, gamma, beta, eps, w_residual, save_gemm_output, plan);
  return fused::store_model(o, linear_bias, num_groups, gamma, beta, eps, Identity{},
                            LeakyReluX2{nullptr, static_cast<float>(negative_slope)});
}

// @export: problem 75 in one GEMM: torch.min(group_norm(x @ w.T + linear_bias, ...), dim=1, keepdim=True)[0] + bias -> (1, C, M, 1); row minima as per-tile partials reduced by a second kernel
std::tuple<torch::Tensor, torch::Tensor> linear_group_norm_min_bias(torch::Tensor x, torch::Tensor w, torch::Tensor linear_bias, int64_t num_groups,
                                  torch::Tensor gamma, torch::Tensor beta, double eps, torch::Tensor bias,
                                  c10::optional<torch::Tensor> w_residual = c10::nullopt, bool save_gemm_output = false) {
  const gemm_dispatch::Plan plan = gemm_dispatch::plan(x, w);  // the tier, read once, and the schedule
  const bool fused_here = fused::fused_here(plan, x, w, linear_bias, num_groups, gamma, beta, eps, w_residual);
  const auto unfused = fused::unless_fusable(fused_here, "workbook::group_norm_min_bias", x, w, linear_bias, w_residual,
                                                   save_gemm_output, num_groups, gamma, beta, eps, bias);
  if (unfused.has_value()) return *unfused;
  const fused::Operands o =
      fused::check_and_prepare(x, w, linear_bias, num_groups, gamma, beta, eps, w_residual, save_gemm_output, plan);
  return fused::min_model(o, linear_bias, num_groups, gamma, beta, eps, bias, /*atomic=*/false);
}

// @export: the same with the row minima folded by atomicMin on ordered integer keys (to compare the two)
std::tuple<torch::Tensor, torch::Tensor> linear_group_norm_min_bias_atomic(torch::Tensor x, torch::Tensor w, torch::Tensor linear_bias, int64_t num_groups,
                                         torch::Tensor gamma, torch::Tensor beta, double eps, torch::Tensor bias,
                                         c10::optional<torch::Tensor> w_residual = c10::nullopt, bool save_gemm_output = false) {
  const gemm_dispatch::Plan wide{gemm_dispatch::current_tier(), gemm_dispatch::Schedule::WIDE};  // the wide tiles at any M
  const fused::Operands o =
      fused::check_and_prepare(x, w, linear_bias, num_groups, gamma, beta, eps, w_residual, save_gemm_output, wide);
  return fused::min_model(o, linear_bias, num_groups, gamma, beta, eps, bias, /*atomic=*/true);
}
