#pragma once
// How a narrow plan build that is short of memory for its one sort goes on (sort_narrow in
// src/cuda/aggregate.cu): destination ranges (the same plan, so the same bits) or, for a one-shot
// call, edge ranges (their count chosen by free memory, so the bits can change from call to
// call). Plain C++ with no CUDA header, so that the test suite checks the choice on the host
// (tests/test_short_build.cpp), where CI has no GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace pipelink::cuda::short_build {

// Each destination range selects over the whole edge list (4 bytes of dst an edge read per
// range). Past this many ranges that read (68 bytes an edge and more) costs several times the one
// sort's own traffic, and near the pairs' own limit the count would grow towards kMaxRanges
// passes over dst (35 TB of reads, hours, at a narrow plan's 2^31 edges), so a one-shot call runs
// edge ranges there instead.
constexpr std::int64_t kOneShotDestRanges = 16;
constexpr std::int64_t kMaxRanges = 4096;  // PIPELINK_AGG_BUILD_CHUNKS' and _ONESHOT_CHUNKS' maximum

// How many ranges of `per_edge` bytes an edge for E edges fit in `room` bytes, clamped to
// [1, kMaxRanges] as a double before it becomes an integer (room <= 0: kMaxRanges).
inline std::int64_t ranges_for(double per_edge, std::int64_t E, double room) {
  if (!(room > 0)) return kMaxRanges;
  return std::int64_t(std::clamp(std::ceil(per_edge * double(E) / room), 1.0, double(kMaxRanges)));
}

// Destination ranges for a build whose plan pairs are held: each range's sort (16 bytes an edge
// of the range) in 90% of `free_bytes` (what is free beside the pairs) less CUB's temp storage,
// and in `cap` (PIPELINK_AGG_BUILD_MEMORY; 0: none). One more than the estimate, for the
// ranges' uneven sizes (they hold whole rows).
inline std::int64_t destination_ranges(std::int64_t E, double free_bytes, double temp, double cap = 0) {
  const double room = std::min(0.9 * free_bytes, cap > 0 ? cap : 1e300) - temp;
  return std::min(ranges_for(16.0, E, room) + 1, kMaxRanges);
}

// A one-shot call's destination ranges beside its held pairs (no cap), or 0 where edge ranges
// are to take over: no room, or more than `limit` ranges (kOneShotDestRanges;
// PIPELINK_AGG_TEST_ONESHOT_DEST_RANGES lowers it in tests).
inline std::int64_t one_shot_destination_ranges(std::int64_t E, double free_bytes, double temp,
                                                std::int64_t limit = kOneShotDestRanges) {
  if (!(0.9 * free_bytes - temp > 0)) return 0;
  const std::int64_t k = destination_ranges(E, free_bytes, temp);
  return k <= limit ? k : 0;
}

// A one-shot call's edge ranges (the pairs not held): each range's plan (8 bytes an edge) and
// sort (16) at once in 90% of `free_bytes` less CUB's temp storage, and its sort within `cap`
// (0: none). 0 where even that has no room (the caller raises OutOfMemoryError).
inline std::int64_t one_shot_edge_ranges(std::int64_t E, double free_bytes, double temp, double cap = 0) {
  const double dev_room = 0.9 * free_bytes - temp, cap_room = cap > 0 ? cap - temp : 0.0;
  if (!(dev_room > 0) || (cap > 0 && !(cap_room > 0))) return 0;
  return std::min(std::max(ranges_for(24.0, E, dev_room), cap > 0 ? ranges_for(16.0, E, cap_room) : 1) + 1, kMaxRanges);
}

}  // namespace pipelink::cuda::short_build
