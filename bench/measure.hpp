#pragma once
// Measurement helpers for the benchmark protocol (PROTOCOL.md §3): wall-clock samples and their
// statistics, process peak RSS, and the copy bandwidth the effective bandwidth is compared to.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "pipelink/dtype.hpp"  // Device

namespace pipelink::bench {

struct Stats {
  double median = 0, min = 0, max = 0;
  std::vector<double> samples;  // milliseconds
};
Stats stats_of(std::vector<double> samples_ms);

/// Milliseconds of one call of fn, synchronous wall time.
double time_ms(const std::function<void()>& fn);

/// Current and peak resident set (bytes) from /proc/self/status; 0 where unavailable.
std::int64_t rss_bytes();
std::int64_t peak_rss_bytes();
/// The host memory the kernel says a new allocation can take without swapping (MemAvailable in
/// /proc/meminfo), bytes; 0 where unknown.
std::int64_t host_available_bytes();

/// Resets the kernel's peak-RSS mark (writes 5 to /proc/self/clear_refs). False if unsupported.
bool reset_peak_rss();

/// Peak RSS growth over the current RSS while fn runs (bytes), and whether the reset worked.
struct MemoryGrowth {
  std::int64_t bytes = 0;
  bool exact = false;
};
MemoryGrowth peak_rss_growth(const std::function<void()>& fn);

/// A copy's bandwidth in bytes/s: bytes read + bytes written (PROTOCOL.md §3.6, as the GPU's and
/// the protocol's 4.26 TB/s anchor count it), best of `samples_bps`, each one timed copy.
struct CopyBandwidth {
  double best_bps = 0;
  std::vector<double> samples_bps;
};
/// Host memcpy (multi-threaded, 256 MiB, 10 copies).
CopyBandwidth host_copy_bandwidth();

/// A device's facts for a benchmark's JSON (PROTOCOL.md 3.9): one list for `bench aggregate` and
/// `bench sweep` (the sweep's first JSON wrote its own subset: a helper's audit, session 49).
/// CUDA versions as 1000 major + 10 minor; the clocks are the device's rated maxima. All 0 on
/// the CPU. Written by put_device_facts (device_facts_json.hpp).
struct DeviceFacts {
  int sms = 0, sm = 0;
  std::int64_t l2_bytes = 0, memory_bytes = 0;
  int cuda_driver = 0, cuda_runtime = 0, cuda_built_with = 0, sm_clock_peak_khz = 0, memory_clock_peak_khz = 0;
};
/// CUDA: describe() and cuda::runtime_facts() (BackendUnavailableError without the backend or
/// the device); the CPU: zeros.
DeviceFacts device_facts(const Device& d);

/// The revision the binary was built from (stamped at build time: cmake/GitStamp.cmake).
std::string git_revision();
extern const char* const kBuildRevision;
std::string iso_time_utc();
std::string host_cpu_name();

/// Runs argv[0] with argv (no shell), its stdout captured into `out` and its stderr left as the
/// caller's; returns its exit status, or -1 where it could not start or ended by a signal.
int run_process(const std::vector<std::string>& argv, std::string& out);

/// "2.31x" or, below the 1.5x rule, "no measured difference at this precision".
std::string ratio_text(double ratio);

}  // namespace pipelink::bench
