// kernels/common/gemm_mixed_input_float32_only.cuh: what a one-file export of a float32 drop-in includes in place of
// common/gemm_mixed_input.cuh (utils/export.py, FLOAT32_ONLY). The mixed-input GEMM converts a float32 w to 16
// bits on its way to the tensor cores, a conversion to a narrower type that a float32 solution's text may not
// hold (KernelBench's static rules), and only 16-bit x beside a float32 w (autocast's call) runs it. Here its
// names stand with nothing behind them: the launchers' branch that calls it is reached only through with_half16,
// whose stand-in (common/gemm_wgmma_float32_only.cuh) calls nothing, so no template below is ever instantiated.

#pragma once

#include <cstdint>

namespace gemm_mixed {

constexpr int BX = 256;    // the mixed-input GEMM's rows of x per tile, as common/gemm_mixed_input.cuh has them
constexpr int CHUNK = 64;  // and the channels of the tiles its epilogue takes

template <class Operand, class Epi>
void run_mixed_epilogue(const torch::Tensor& x, const torch::Tensor& w, const Epi& epi, int64_t rows = -1);

}  // namespace gemm_mixed
