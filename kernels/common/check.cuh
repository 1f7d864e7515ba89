// kernels/common/check.cuh: what every kernel file includes first.
//
// A launcher is the border between Python and the GPU. A tensor that is on the CPU, float64,
// a strided view or the wrong shape must stop there with a Python error that names the tensor
// and says what to do, never crash the process or return garbage. These macros are that
// check, one line per rule, with TORCH_CHECK turning a failure into a RuntimeError.
//
// LAUNCH_CHECK() goes after every <<<...>>>: a launch with a bad configuration (too many
// threads, too much shared memory) fails silently otherwise, and the error surfaces later in
// some unrelated call.
//
// The includes are the lightest that give a launcher what it needs, because every kernel file
// parses them three times (nvcc's device pass, its host pass, g++), and they set the cold build time:
// - <ATen/core/Tensor.h> (the tensor and its methods), with `torch::` as another name for `at::`,
//   not <torch/types.h>, which includes every ATen operator (<ATen/ATen.h>) and the autograd headers
//   and doubles nvcc's time on a small kernel.
// - the three factories the launchers allocate with, torch::empty, torch::empty_like and
//   torch::zeros, written below over the operators' own entry points (<ATen/ops/empty_ops.h>).
//   Their usual headers (<ATen/ops/empty.h>) bring ATen's context, device guard and tracer along,
//   which took 5 of the 15 seconds these includes cost a kernel file. Any other operator is a
//   method of the tensor (x.mm(w), bias.addmm(x, w.t()), y.fill_(v)).
// - not <torch/extension.h>: it adds pybind11 and the whole C++ frontend. The Python bindings live
//   in a separate file that load_inline generates (utils/build.py keeps that one light too).
// - not <ATen/cuda/CUDAContext.h>: it includes the cuSPARSE, cuBLAS and cuSOLVER headers, which a
//   minimal CUDA toolkit (nvcc and the runtime only, as on CI) does not have. What a kernel here
//   needs from it comes from the c10 headers below.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like_ops.h>
#include <ATen/ops/empty_ops.h>
#include <ATen/ops/zeros_ops.h>
#include <c10/core/SymIntArrayRef.h>  // c10::fromIntArrayRefSlow: a shape as the operators take it
#include <c10/cuda/CUDAException.h>  // C10_CUDA_CHECK, C10_CUDA_KERNEL_LAUNCH_CHECK
#include <c10/cuda/CUDAGuard.h>      // c10::cuda::CUDAGuard: run on the inputs' GPU
#include <c10/cuda/CUDAStream.h>     // at::cuda::getCurrentCUDAStream: PyTorch's current stream

// torch::Tensor, torch::kFloat, ... as in PyTorch's C++ API, where torch:: is at:: too (<torch/types.h>).
namespace torch {
using namespace at;  // NOLINT

// The factories, as PyTorch's C++ API spells them: torch::empty({M, N}, x.options()). Each passes
// the options on as the operator takes them, dtype, layout, device, pinned memory, memory format.
// They are templates for one reason: where <torch/types.h> comes first (load_inline puts it above a
// kernel's text unless told not to, as in a drop-in's export on an older torch), its torch::empty,
// which is not a template, is then the better match, and no call is ambiguous.
template <class Options = at::TensorOptions>
inline at::Tensor empty(at::IntArrayRef size, Options options) {
  const at::TensorOptions o(options);
  return at::_ops::empty_memory_format::call(c10::fromIntArrayRefSlow(size), c10::optTypeMetaToScalarType(o.dtype_opt()),
                                             o.layout_opt(), o.device_opt(), o.pinned_memory_opt(), o.memory_format_opt());
}

// The options default to the tensor's own; a memory format is options too, as in
// torch::empty_like(v, at::MemoryFormat::Contiguous).
template <class Options = at::TensorOptions>
inline at::Tensor empty_like(const at::Tensor& self, Options options = {}) {
  const at::TensorOptions o(options);
  return at::_ops::empty_like::call(self, c10::optTypeMetaToScalarType(o.dtype_opt()), o.layout_opt(), o.device_opt(),
                                    o.pinned_memory_opt(), o.memory_format_opt());
}

template <class Options = at::TensorOptions>
inline at::Tensor zeros(at::IntArrayRef size, Options options) {
  const at::TensorOptions o(options);
  return at::_ops::zeros::call(c10::fromIntArrayRefSlow(size), c10::optTypeMetaToScalarType(o.dtype_opt()),
                               o.layout_opt(), o.device_opt(), o.pinned_memory_opt());
}
}  // namespace torch

// Each check names the tensor it refuses. The macros take the name from the argument's spelling
// (#x); the functions take it as text, for a helper whose tensor has a different name in each
// caller (GroupNorm's input is x in the forward launchers and y in the backward ones) or for a
// loop over several tensors.
inline void check_cuda(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor, got one on ", t.device(), " (move it with .cuda())");
}

// float32 specifically, so the message can say how to convert.
inline void check_float(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.scalar_type() == at::kFloat, name, " must be float32, got ", t.scalar_type(), " (call .float())");
}

inline void check_contiguous(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous (call .contiguous())");
}

// The usual input of a kernel here: a float32 CUDA tensor whose elements sit densely in memory,
// so element i is at data_ptr<float>()[i].
inline void check_float_cuda_input(const at::Tensor& t, const char* name) {
  check_cuda(t, name);
  check_float(t, name);
  check_contiguous(t, name);
}

inline void check_same_device(const at::Tensor& a, const char* a_name, const at::Tensor& b, const char* b_name) {
  TORCH_CHECK(a.device() == b.device(), a_name, " and ", b_name, " must be on the same device, got ", a.device(),
              " and ", b.device());
}

#define CHECK_CUDA(x) check_cuda((x), #x)
#define CHECK_CONTIGUOUS(x) check_contiguous((x), #x)
#define CHECK_FLOAT(x) check_float((x), #x)
#define CHECK_FLOAT_CUDA_INPUT(x) check_float_cuda_input((x), #x)

#define CHECK_DTYPE(x, dtype) \
  TORCH_CHECK((x).scalar_type() == (dtype), #x " must have dtype ", (dtype), ", got ", (x).scalar_type())

// Numbers in messages. On the GPU machines here (torch 2.11's wheels, nvcc 13.0, g++ 13), streaming
// any number into TORCH_CHECK's message -- an int, a double, a tensor's sizes() -- crashes the
// process with SIGSEGV instead of raising: the message is built with std::ostringstream, and
// number formatting goes through the C++ locale's num_put, which is where the crash is (strings,
// devices and dtypes, which are written as text, raise fine: results/nvidia-h100-80gb-hbm3/logs/
// stream_diag.log has the experiment). So every number in a message goes through one of these,
// which format it with the C library instead; tests/test_kernel_messages.py checks that no kernel
// streams a bare number.

// A number as text: integers exactly, floating point as printf's %g (1e-05, 0.01, 8192).
template <class T>
inline std::string num(T value) {
  static_assert(std::is_arithmetic_v<T>, "num() formats numbers");
  if constexpr (std::is_integral_v<T>) {
    return std::to_string(value);
  } else {
    char text[32];
    std::snprintf(text, sizeof text, "%g", static_cast<double>(value));
    return text;
  }
}

// A shape as text, e.g. "[37, 129]".
inline std::string shape_string(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) {
    s += num(t.size(d));
    if (d + 1 < t.dim()) s += ", ";
  }
  return s + "]";
}

#define CHECK_SAME_SHAPE(a, b) \
  TORCH_CHECK((a).sizes() == (b).sizes(), #a " and " #b " must have the same shape, got ", shape_string(a), " and ", shape_string(b))

#define CHECK_SAME_DEVICE(a, b) check_same_device((a), #a, (b), #b)

#define LAUNCH_CHECK() C10_CUDA_KERNEL_LAUNCH_CHECK()

// float4 (16-byte) accesses need 16-byte-aligned addresses. A fresh tensor is aligned; a view that
// starts inside another tensor (x[1:] of a flat buffer, say) need not be. Launchers test each
// pointer with this and pick the vector or the scalar path.
inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }
