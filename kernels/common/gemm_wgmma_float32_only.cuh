// kernels/common/gemm_wgmma_float32_only.cuh: what a one-file export of a float32 drop-in includes in place of
// common/gemm_wgmma_writers16.cuh (utils/export.py, FLOAT32_ONLY). KernelBench's static rules refuse a float32
// solution whose text holds a conversion to a narrower type, and the 16-bit writers are such conversions; here
// with_half16 stands in for that header's, so that no 16-bit kernel is built, and a 16-bit tensor that reaches
// it gets an error that says where its kernels are.

#pragma once

#include "common/gemm_wgmma_types.cuh"

namespace gemm_wgmma {

template <class T>
struct OperandFor;  // named by the 16-bit branches, which nothing instantiates here

template <class F>
void with_half16(c10::ScalarType dtype, F&&) {
  TORCH_CHECK(false, "this file is the float32 drop-in's export: its kernels take float32 alone, got ",
              c10::toString(dtype), " (a model in bfloat16 or float16 runs on the workbook's kernels/fused_gemm_groupnorm.cu)");
}

}  // namespace gemm_wgmma
