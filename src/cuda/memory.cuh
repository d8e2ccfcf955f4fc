#pragma once
// Stream-ordered device allocations (cudaMallocAsync from the device's default pool) that feed
// the peak/current counters of pipelink::cuda::memory_stats().
#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

namespace pipelink::cuda::detail {

void* alloc_async(std::size_t bytes, cudaStream_t stream);
/// As alloc_async, but nullptr where the device is full (after the pool retry); other errors throw.
void* try_alloc_async(std::size_t bytes, cudaStream_t stream);
void free_async(void* p, std::size_t bytes, cudaStream_t stream) noexcept;
/// Bytes a new allocation could take: what cudaMemGetInfo reports free plus what the current
/// device's default pool holds unused (it keeps freed blocks, which cudaMemGetInfo counts as used).
/// Sizing from cudaMemGetInfo alone made a one-shot call on a full device pick more edge ranges,
/// and so other bits, on its second call than on its first (H200, 828e4e5).
std::size_t free_device_bytes();

/// Owning, stream-ordered device buffer.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::size_t bytes, cudaStream_t stream)
      : p_(bytes ? alloc_async(bytes, stream) : nullptr), bytes_(bytes), stream_(stream) {}
  ~DeviceBuffer() { reset(); }
  /// Empty (get() == nullptr) where the device has no room for `bytes`.
  static DeviceBuffer try_make(std::size_t bytes, cudaStream_t stream) {
    DeviceBuffer b;
    b.p_ = bytes ? try_alloc_async(bytes, stream) : nullptr;
    b.bytes_ = b.p_ ? bytes : 0;
    b.stream_ = stream;
    return b;
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      stream_ = o.stream_;
    }
    return *this;
  }
  void reset() noexcept {
    if (p_) free_async(p_, bytes_, stream_);
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
};

}  // namespace pipelink::cuda::detail
