#pragma once
// CUDA runtime pieces usable without CUDA headers: RAII streams and events, and the byte counters
// of every device allocation PipeLink makes. In a build without the CUDA backend each call throws
// BackendUnavailableError.
#include <cstddef>
#include <memory>

namespace pipelink::cuda {

struct MemoryStats {
  std::size_t current = 0;  // bytes PipeLink holds on CUDA devices now
  std::size_t peak = 0;     // high-water mark since the last reset
};
MemoryStats memory_stats() noexcept;
void reset_peak_memory() noexcept;
/// Free and total bytes of the device (cudaMemGetInfo): the process-level view.
std::pair<std::size_t, std::size_t> device_memory_info(int device = 0);
void synchronize(int device = 0);

class Stream {
 public:
  explicit Stream(int device = 0);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream(Stream&& o) noexcept : handle_(o.handle_), device_(o.device_) { o.handle_ = nullptr; }
  void* get() const noexcept { return handle_; }  // cudaStream_t
  int device() const noexcept { return device_; }
  void synchronize() const;

 private:
  void* handle_ = nullptr;
  int device_ = 0;
};

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(void* stream = nullptr);
  void synchronize() const;
  /// Milliseconds from `start` to this event (both recorded and complete).
  float elapsed_ms(const Event& start) const;
  void* get() const noexcept { return handle_; }  // cudaEvent_t

 private:
  void* handle_ = nullptr;
};

}  // namespace pipelink::cuda
