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

// Ranges whose sorts (16 bytes an edge of the range, and CUB's temp storage) each fit in `cap`
// (PIPELINK_AGG_BUILD_MEMORY), with `temp` (the whole list's temp storage) taken in shares by
// edges: a range's onesweep look-back state and our own passes' cells grow with its tiles, and
// the fixed part (its digit bins) is a few KB. Why not the whole list's temp in each range, as the
// device's room below does: a cap at or just above it left almost no room, so the count went to
// kMaxRanges, 4096 selects over all of dst (a plan build), or no edge range at all (a one-shot
// call, which then warned that it "ran out of memory" and ran 2 edge ranges anyway): found by
// reading in session 49, not measured on a GPU. Not shared out: a destination range's select runs over
// the whole list (sort_narrow_chunked sizes its buffer for the larger of the two), so a range can
// pass the cap by that select's temp storage: the cap is a target for the count.
inline std::int64_t cap_ranges(std::int64_t E, double temp, double cap) {
  return ranges_for(16.0 + temp / double(std::max<std::int64_t>(E, 1)), E, cap);
}

// Destination ranges for a build whose plan pairs are held: each range's sort (16 bytes an edge
// of the range) in 90% of `free_bytes` (what is free beside the pairs) less CUB's temp storage,
// and in `cap` (PIPELINK_AGG_BUILD_MEMORY; 0: none; cap_ranges). One more than the estimate, for
// the ranges' uneven sizes (they hold whole rows).
inline std::int64_t destination_ranges(std::int64_t E, double free_bytes, double temp, double cap = 0) {
  const std::int64_t dev = ranges_for(16.0, E, 0.9 * free_bytes - temp);
  return std::min(std::max(dev, cap > 0 ? cap_ranges(E, temp, cap) : 1) + 1, kMaxRanges);
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
// (0: none; cap_ranges). 0 where the device has no room for CUB's temp storage (the caller
// raises OutOfMemoryError); a cap alone never gives 0.
inline std::int64_t one_shot_edge_ranges(std::int64_t E, double free_bytes, double temp, double cap = 0) {
  const double dev_room = 0.9 * free_bytes - temp;
  if (!(dev_room > 0)) return 0;
  return std::min(std::max(ranges_for(24.0, E, dev_room), cap > 0 ? cap_ranges(E, temp, cap) : 1) + 1, kMaxRanges);
}

}  // namespace pipelink::cuda::short_build
