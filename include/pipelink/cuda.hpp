#pragma once
// CUDA runtime pieces usable without CUDA headers: RAII streams and events, and the byte counters
// of every device allocation PipeLink makes. In a build without the CUDA backend each call throws
// BackendUnavailableError.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pipelink/tensor.hpp"

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
/// Waits for the device, then gives the stream-ordered pools' cached (freed) memory back to the
/// driver (the device's default pool and PipeLink's scratch pool), so that a process-level
/// reading (cudaMemGetInfo) afterwards shows what is really held. Leaves the current device as
/// it was. Throws BackendUnavailableError where no device is present, std::invalid_argument for
/// one that does not exist.
void release_cached_memory(int device = 0);

/// PipeLink's scratch pool on a device: the stream-ordered pool that one-shot calls build and run
/// in (PIPELINK_AGG_ONESHOT_POOL=default puts them in the device's default pool instead).
/// `reserved`: bytes it holds from the driver, its freed blocks included (given back by
/// release_cached_memory); `used`: bytes allocated from it now; `used_peak`: the most bytes
/// allocated from it at once since its first use or the last release_cached_memory (which sets it
/// to `used`). Reserved memory grows in the driver's chunks (tens of MiB), so `used_peak`, not
/// `reserved`, tells what one call asked of the pool. All 0 before its first use.
/// Between calls the pool keeps its last one-shot call's peak (~12 bytes an edge; ~24 where the
/// call ran the one sort, PIPELINK_AGG_ONESHOT_SORT=lsd), which other allocators (torch's)
/// cannot take back: call release_cached_memory where they need it.
/// Throws BackendUnavailableError where no device is present, std::invalid_argument for one that
/// does not exist.
struct PoolStats {
  std::size_t reserved = 0;
  std::size_t used = 0;
  std::size_t used_peak = 0;
};
PoolStats scratch_pool_stats(int device = 0);

/// What a benchmark's numbers ran on, beside the device's description: the CUDA driver's version
/// (cudaDriverGetVersion; 1000 major + 10 minor, so 13000 is 13.0), the runtime the process runs
/// on (cudaRuntimeGetVersion) and the one PipeLink was built with (CUDART_VERSION), and the
/// device's rated peak SM and memory clocks in kHz (device attributes: maxima, not the clocks of
/// the moment, which need NVML; 0 where the device does not report one). Throws
/// BackendUnavailableError where no device is present, std::invalid_argument for one that does
/// not exist.
struct RuntimeFacts {
  int driver_version = 0, runtime_version = 0, built_with = 0;
  int sm_clock_peak_khz = 0, memory_clock_peak_khz = 0;
};
RuntimeFacts runtime_facts(int device = 0);

/// Fills a contiguous device tensor with counter-based pseudo-random values (splitmix64 of the
/// seed and the element index, so the same seed gives the same values on any device and grid):
/// float32/float64 uniform in [lo, hi). For inputs too large to draw on the host (the reach
/// sweep's 2^33-edge graphs).
void fill_random_uniform(const TensorView& t, double lo, double hi, std::uint64_t seed, void* stream = nullptr);
/// int32/int64 device tensor: uniform integers in [0, n). Both queue on `stream` (cudaStream_t).
void fill_random_indices(const TensorView& t, std::int64_t n, std::uint64_t seed, void* stream = nullptr);

/// Makes `device` current for its scope and gives the caller's CUDA context back at its end.
/// PipeLink once set the device of each call and left it (a review, session 46): on a host of
/// several GPUs, torch's next allocation on "cuda" could land on another GPU than its caller's.
/// What is restored is the thread's current context itself (the driver's cuCtxGetCurrent /
/// cuCtxSetCurrent, looked up through the runtime), not a device number: restoring "device 0" to
/// a thread that had no context would create one on GPU 0 in a process that never used it.
/// Where the device is already current it does nothing (one GPU: always).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  struct NoThrow {};
  DeviceGuard(int device, NoThrow) noexcept;  // destructors' paths: failures are logged
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  void* prev_ctx_ = nullptr;
  int prev_device_ = 0;
  bool set_ = false;
  bool ctx_saved_ = false;  // prev_ctx_ was read (else the device number is restored)
};

/// Every PIPELINK_AGG_* knob of the CUDA aggregate with the value it has in this process now:
/// "<value> (set)" where the environment sets it, "<value> (default)" where not, and
/// "error: <message>" where its value is refused (the aggregate call would raise that). For a
/// benchmark's pre-registration (PROTOCOL.md 3.1: every tuning knob); docs/KNOBS.md says what each
/// does. Host-only, in every build (the knobs are parsed without CUDA), sorted by name.
std::vector<std::pair<std::string, std::string>> aggregate_knobs();

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
