#pragma once
// The JSON half of DeviceFacts (measure.hpp), apart so that the headers the tests include stay
// free of nlohmann's: only the benchmarks' .cpp files write JSON.
#include <nlohmann/json_fwd.hpp>

#include "measure.hpp"

namespace pipelink::bench {

/// Adds f's fields to a JSON "device" object: sms, compute_capability, l2_bytes, memory_bytes,
/// cuda_driver_version, cuda_runtime_version, cuda_built_with, sm_clock_peak_khz,
/// memory_clock_peak_khz, and versions_and_clocks (what they count).
void put_device_facts(nlohmann::json& device, const DeviceFacts& f);

}  // namespace pipelink::bench
