// pipelink/cuda.hpp in a build without the CUDA backend: every call says so.
#include "pipelink/cuda.hpp"
#include "pipelink/error.hpp"

namespace pipelink::cuda {
namespace {
[[noreturn]] void unavailable() { throw BackendUnavailableError("this PipeLink build has no CUDA backend"); }
}  // namespace
MemoryStats memory_stats() noexcept { return {}; }
void reset_peak_memory() noexcept {}
std::pair<std::size_t, std::size_t> device_memory_info(int) { unavailable(); }
void synchronize(int) { unavailable(); }
void release_cached_memory(int) { unavailable(); }
PoolStats scratch_pool_stats(int) { unavailable(); }
RuntimeFacts runtime_facts(int) { unavailable(); }
void fill_random_uniform(const TensorView&, double, double, std::uint64_t, void*) { unavailable(); }
void fill_random_indices(const TensorView&, std::int64_t, std::uint64_t, void*) { unavailable(); }
DeviceGuard::DeviceGuard(int) { unavailable(); }
DeviceGuard::DeviceGuard(int, NoThrow) noexcept {}
DeviceGuard::~DeviceGuard() = default;
Stream::Stream(int) { unavailable(); }
Stream::~Stream() = default;
void Stream::synchronize() const { unavailable(); }
Event::Event() { unavailable(); }
Event::~Event() = default;
void Event::record(void*) { unavailable(); }
void Event::synchronize() const { unavailable(); }
float Event::elapsed_ms(const Event&) const { unavailable(); }
}  // namespace pipelink::cuda
