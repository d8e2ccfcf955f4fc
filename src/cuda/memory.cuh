#pragma once
// Stream-ordered device allocations (cudaMallocAsync from the device's default pool, or from
// PipeLink's scratch pool under a ScratchPoolScope) that feed the peak/current counters of
// pipelink::cuda::memory_stats().
#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

namespace pipelink::cuda::detail {

void* alloc_async(std::size_t bytes, cudaStream_t stream);
/// As alloc_async, but nullptr where the device is full (after the pool retry); other errors throw.
void* try_alloc_async(std::size_t bytes, cudaStream_t stream);
/// Frees on `stream` with `device` current: a legacy-stream handle (0) means that device's
/// stream, and a plan dropped while the caller had another GPU current freed on that GPU's
/// (a review, session 46, once calls gave the caller's device back).
void free_async(void* p, std::size_t bytes, cudaStream_t stream, int device) noexcept;
int current_device() noexcept;
/// Free device bytes in a state that repeats from call to call: synchronizes `stream`, gives the
/// default and scratch pools' idle blocks back to the driver, then asks cudaMemGetInfo. The pool keeps freed
/// blocks, which cudaMemGetInfo counts as used: sized from it alone, a one-shot call on a full
/// device picked more edge ranges, and so other bits, on its second call than on its first (H200,
/// 828e4e5). Counting the idle blocks as free instead picked too few, and a range's allocation ran
/// out of memory (6324880): idle fragments of the pool need not hold a range's sort.
std::size_t settled_free_bytes(cudaStream_t stream);

/// While one is alive on this thread (and `on`), alloc_async and try_alloc_async draw from
/// PipeLink's scratch pool for the current device instead of its default pool: for allocations
/// that are all freed before the call that made them returns (one-shot calls), so that nothing
/// long-lived sits between them (see runtime.cu). free_async frees from either pool. The pool is
/// the current device's (cudaGetDevice), not the stream's: callers set the device first, as
/// aggregate does before any allocation.
class ScratchPoolScope {
 public:
  explicit ScratchPoolScope(bool on = true);
  ~ScratchPoolScope();
  ScratchPoolScope(const ScratchPoolScope&) = delete;
  ScratchPoolScope& operator=(const ScratchPoolScope&) = delete;

 private:
  bool on_;
};

/// Owning, stream-ordered device buffer.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::size_t bytes, cudaStream_t stream)
      : p_(bytes ? alloc_async(bytes, stream) : nullptr), bytes_(bytes), stream_(stream), device_(current_device()) {}
  ~DeviceBuffer() { reset(); }
  /// Empty (get() == nullptr) where the device has no room for `bytes`.
  static DeviceBuffer try_make(std::size_t bytes, cudaStream_t stream) {
    DeviceBuffer b;
    b.p_ = bytes ? try_alloc_async(bytes, stream) : nullptr;
    b.bytes_ = b.p_ ? bytes : 0;
    b.stream_ = stream;
    b.device_ = current_device();
    return b;
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      stream_ = o.stream_;
      device_ = o.device_;
    }
    return *this;
  }
  void reset() noexcept {
    if (p_) free_async(p_, bytes_, stream_, device_);
    p_ = nullptr;
    bytes_ = 0;
  }
  template <class T> T* as() const noexcept { return static_cast<T*>(p_); }
  void* get() const noexcept { return p_; }
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  int device_ = 0;  // current at the allocation (callers set the device first)
};

}  // namespace pipelink::cuda::detail
