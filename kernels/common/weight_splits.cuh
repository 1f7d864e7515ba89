// kernels/common/weight_splits.cuh: the 3xTF32 split of nn.Linear's weight, kept between calls
// while the weight does not change. Used by rung 10's `linear` (gemm_10_3xtf32.cu) and by the
// whole-model kernels (fused_gemm_groupnorm.cu); each module that compiles this has its own cache.

#pragma once

#include <c10/cuda/CUDAStream.h>

#include <memory>
#include <mutex>
#include <vector>

#include "common/gemm_wgmma.cuh"

namespace weight_split_cache {

// The split of a weight, kept while the weight does not change. nn.Linear's weight is the same
// tensor on every forward and changes only in place (an optimizer step, load_state_dict's copy_,
// `with torch.no_grad(): w.mul_(2)`), and every in-place write bumps the tensor's version counter.
// So an entry is valid while its tensor is alive (a weak reference to the TensorImpl, so that a
// freed weight's address reused by another tensor cannot match), has the same version, the same
// data pointer (`w.data = ...` swaps the storage) and the same shape. Anything else splits anew.
// Not cached: inference tensors (they have no version counter), weights that are views (the
// kernel's contiguous copy is a new tensor on every call) and splits made while a CUDA graph is
// being captured (their memory belongs to the graph's pool).
// An entry split on one stream and used on another: that stream waits for the split's event and
// the parts are recorded as used there, so the caching allocator does not hand them out early.
class WeightSplits {
 public:
  // The split of w (contiguous); kept only when `keep` (the caller's weight is w itself, not a
  // contiguous copy of a view, which is a new tensor on every call).
  torch::Tensor parts(const torch::Tensor& w, bool keep) {
    if (!keep || w.is_inference() || capturing(w.get_device())) {
      return gemm_wgmma::split_parts(w);
    }
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto stream = at::cuda::getCurrentCUDAStream(w.get_device());
    std::vector<Entry> kept;
    torch::Tensor found;
    for (Entry& e : entries_) {
      const auto impl = e.impl.lock();
      if (!impl) {
        continue;  // the weight is gone: drop its split
      }
      if (impl.get() == w.unsafeGetTensorImpl()) {
        if (e.version == w._version() && e.data == w.data_ptr() && e.parts.sizes().slice(1).equals(w.sizes())) {
          found = e.parts;
          if (e.stream != stream) {
            C10_CUDA_CHECK(cudaStreamWaitEvent(stream.stream(), e.ready.get(), 0));
            found.record_stream(stream);
          }
        } else {
          continue;  // the weight changed: its old split goes
        }
      }
      kept.push_back(std::move(e));
    }
    entries_ = std::move(kept);
    if (found.defined()) {
      ++hits_;
      return found;
    }
    ++misses_;
    Entry e{c10::weak_intrusive_ptr<c10::TensorImpl>(w.getIntrusivePtr()), w._version(), w.data_ptr(),
            gemm_wgmma::split_parts(w), stream, new_event()};
    C10_CUDA_CHECK(cudaEventRecord(e.ready.get(), stream.stream()));
    if (entries_.size() >= MAX_ENTRIES) {
      entries_.erase(entries_.begin());  // the oldest
    }
    entries_.push_back(e);
    return e.parts;
  }

  // hits, misses, live entries
  std::vector<int64_t> stats() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return {hits_, misses_, static_cast<int64_t>(entries_.size())};
  }

  void clear() {
    const std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
    hits_ = misses_ = 0;
  }

 private:
  static constexpr size_t MAX_ENTRIES = 16;
  struct Entry {
    c10::weak_intrusive_ptr<c10::TensorImpl> impl;
    int64_t version;
    const void* data;
    torch::Tensor parts;  // (2, N, K): big, small
    c10::cuda::CUDAStream stream;
    std::shared_ptr<CUevent_st> ready;  // recorded after the split, on `stream`
  };
  static std::shared_ptr<CUevent_st> new_event() {
    cudaEvent_t event = nullptr;
    C10_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return std::shared_ptr<CUevent_st>(event, [](cudaEvent_t e) { cudaEventDestroy(e); });
  }
  static bool capturing(int device) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    C10_CUDA_CHECK(cudaStreamIsCapturing(at::cuda::getCurrentCUDAStream(device), &status));
    return status != cudaStreamCaptureStatusNone;
  }
  std::mutex mutex_;
  std::vector<Entry> entries_;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
};

inline WeightSplits& weight_splits() {
  static WeightSplits cache;  // one per process (per module that compiles this header)
  return cache;
}
}  // namespace weight_split_cache
