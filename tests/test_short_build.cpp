// The range counts of a narrow build short of memory for its one sort (src/cuda/short_build.hpp,
// used by sort_narrow), checked on the host where CI has no GPU. The GPU tests check what the
// builds do with them: CudaAggregate.OneShotOnAFullDeviceRunsEdgeRanges (a one-shot call on a
// filled device: destination ranges and the one plan's bits while its pairs fit, edge ranges
// past that), BuildMemoryCapSortsRangesAndOneShotRunsEdgeRanges (the cap).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include "../src/cuda/short_build.hpp"
#include "test_util.hpp"  // fresh_seed: PIPELINK_TEST_SEED replays a run

namespace sb = pipelink::cuda::short_build;

namespace {
constexpr double MB = 1024.0 * 1024.0;
}

TEST(ShortBuild, RangesForClampsAndRoundsUp) {
  EXPECT_EQ(sb::ranges_for(16, 1000, 16000), 1);
  EXPECT_EQ(sb::ranges_for(16, 1000, 15999), 2);
  EXPECT_EQ(sb::ranges_for(16, 1000, 1e12), 1) << "at least one range";
  EXPECT_EQ(sb::ranges_for(16, 1000, 1), sb::kMaxRanges) << "clamped before the integer";
  EXPECT_EQ(sb::ranges_for(16, std::int64_t(1) << 40, 1), sb::kMaxRanges) << "no overflow past 2^63";
  EXPECT_EQ(sb::ranges_for(16, 1000, 0), sb::kMaxRanges);
  EXPECT_EQ(sb::ranges_for(16, 1000, -5), sb::kMaxRanges);
}

TEST(ShortBuild, OneShotOnAFilledDeviceSortsDestinationRangesWhileItsPairsFit) {
  // CudaAggregate.OneShotOnAFullDeviceRunsEdgeRanges' call: 8M edges, 160 MB left, 64 MB of it
  // taken by the pairs. CUB's temp for 8M pairs is a few MB.
  const std::int64_t E = 8'000'000;
  const double temp = 4 * MB;
  const std::int64_t k = sb::one_shot_destination_ranges(E, 96 * MB, temp);
  EXPECT_EQ(k, 3);  // 128 MB of sort in ~82 MB of room: 2, plus 1 for the rows' granularity
  // Its largest balanced range's sort fits the room.
  EXPECT_LE(16.0 * double(E) / double(k - 1), 0.9 * 96 * MB - temp);
  // Near the pairs' own limit: 12 MB beside them would take 19 ranges, each a select over all of
  // dst: edge ranges instead.
  EXPECT_EQ(sb::one_shot_destination_ranges(E, 12 * MB, temp), 0);
  EXPECT_EQ(sb::one_shot_destination_ranges(E, 4 * MB, temp), 0) << "no room at all";
  EXPECT_EQ(sb::one_shot_destination_ranges(E, 0, temp), 0);
  // PIPELINK_AGG_TEST_ONESHOT_DEST_RANGES=2 (the GPU test's hand-over with the pairs held).
  EXPECT_EQ(sb::one_shot_destination_ranges(E, 96 * MB, temp, 3), 3);
  EXPECT_EQ(sb::one_shot_destination_ranges(E, 96 * MB, temp, 2), 0);
  EXPECT_EQ(sb::one_shot_destination_ranges(E, 1e12, temp, 0), 0) << "0: edge ranges at once";
  // Then edge ranges, the pairs freed: 24 bytes an edge in 90% of the free memory, plus 1.
  EXPECT_EQ(sb::one_shot_edge_ranges(E, 40 * MB, 0), 7);  // 192 MB in 36 MB: 6, plus 1
  EXPECT_EQ(sb::one_shot_edge_ranges(E, 160 * MB, temp), 3);
}

TEST(ShortBuild, OneShotDestinationRangesStopAtTheLimit) {
  // free bytes for exactly K ranges: 16 E / (K - 1) of room (K - 1 from the estimate, + 1).
  const std::int64_t E = 62'000'000;
  const double temp = 10 * MB;
  auto free_for = [&](std::int64_t ranges) { return (16.0 * double(E) / double(ranges - 1) + temp) / 0.9; };
  EXPECT_EQ(sb::one_shot_destination_ranges(E, free_for(sb::kOneShotDestRanges) * 1.001, temp), sb::kOneShotDestRanges);
  EXPECT_EQ(sb::one_shot_destination_ranges(E, free_for(sb::kOneShotDestRanges) * 0.99, temp), 0);
  // A plan build has no such limit (it must hold its pairs anyway): the count goes on up.
  EXPECT_EQ(sb::destination_ranges(E, free_for(sb::kOneShotDestRanges) * 0.99, temp), sb::kOneShotDestRanges + 1);
  EXPECT_EQ(sb::destination_ranges(E, 1 * MB, temp), sb::kMaxRanges)
      << "no room: the most ranges, and the build says why";
  // A narrow plan's largest edge list (2^31 - 4097 edges) with a GB beside its pairs: edge
  // ranges, not 47 selects of 8.6 GB of dst each.
  EXPECT_EQ(sb::one_shot_destination_ranges((std::int64_t(1) << 31) - 4097, 1024 * MB, 200 * MB), 0);
}

TEST(ShortBuild, CapsBindTheirRanges) {
  // PIPELINK_AGG_BUILD_MEMORY=2 against 1M edges (BuildMemoryCapSortsRangesAndOneShotRunsEdgeRanges).
  const std::int64_t E = 1'000'000;
  const double temp = 0.5 * MB, cap = 2 * MB, plenty = 100e9;
  EXPECT_EQ(sb::destination_ranges(E, plenty, temp), 2) << "uncapped: 16 MB fits at once (1), plus 1";
  // A range's sort and its share of CUB's temp: (16 MB + 0.5 MB) in 2 MB: 8, plus 1.
  EXPECT_EQ(sb::destination_ranges(E, plenty, temp, cap), 9) << "16.5 MB of sort and temp in 2 MB: 8, plus 1";
  EXPECT_EQ(sb::one_shot_edge_ranges(E, plenty, temp, cap), 9) << "the cap's 16 B/edge, not the device's 24";
  EXPECT_EQ(sb::one_shot_edge_ranges(E, plenty, temp), 2);
  EXPECT_EQ(sb::one_shot_edge_ranges(E, 0.5 * MB, temp), 0) << "free memory below CUB's temp";
}

TEST(ShortBuild, CapsAtOrBelowTheWholeListsTempStillGiveRanges) {
  // Session 49: a cap at or below the whole list's CUB temp storage gave a plan build 4096
  // destination ranges (4096 selects over all of dst) and a one-shot call no edge range (an
  // out-of-memory error, caught, a warning, then 2 edge ranges). Each range's sort has its own,
  // smaller temp storage: the count is what the cap holds of 16 bytes an edge and that share.
  const std::int64_t E = 1'000'000;
  const double temp = 0.5 * MB, plenty = 100e9;
  // (16 MB + 0.5 MB) in 0.25 MB: 63.03, so 64, plus 1.
  EXPECT_EQ(sb::one_shot_edge_ranges(E, plenty, temp, 0.25 * MB), 65) << "a cap below CUB's temp";
  EXPECT_EQ(sb::destination_ranges(E, plenty, temp, 0.25 * MB), 65);
  EXPECT_EQ(sb::destination_ranges(E, plenty, temp, temp), 33) << "a cap equal to it: 32, plus 1";
  EXPECT_EQ(sb::destination_ranges(E, plenty, temp, temp * 1.01), 33) << "and just above it: no jump";
  // 61.9M edges (products-like) under an 8 MiB cap, with 15 MB of temp: 121, not 4096.
  EXPECT_EQ(sb::destination_ranges(61'900'000, plenty, 15 * MB, 8 * MB), 121);
  // Each range's sort and share then fit the cap (the + 1 covers uneven rows).
  for (const double cap : {0.1 * MB, 0.25 * MB, temp, 1.5 * MB, 2 * MB, 64 * MB}) {
    const std::int64_t k = sb::destination_ranges(E, plenty, temp, cap);
    EXPECT_LE((16.0 * double(E) + temp) / double(k - 1), cap * 1.0000001) << cap;
  }
  // The device still binds: a cap never gives fewer ranges than free memory alone.
  EXPECT_EQ(sb::destination_ranges(E, 0.1 * MB, temp, 0.25 * MB), sb::kMaxRanges);
  EXPECT_EQ(sb::one_shot_edge_ranges(E, 0.5 * MB, temp, 0.25 * MB), 0) << "no room on the device for the temp";
}

TEST(ShortBuild, MoreFreeMemoryNeverMeansMoreRanges) {
  const auto seed = pipelink::test::fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // Narrow plans' edge counts; CUB's temp up to all the free memory (no room at all there).
  std::uniform_real_distribution<double> log_e(0, 31), log_free(20, 37), frac(0, 0.2), temp_frac(0, 1);
  for (int i = 0; i < 20000; ++i) {
    const auto E = std::int64_t(std::exp2(log_e(rng)));
    const double free_a = std::exp2(log_free(rng)), free_b = free_a * (1 + frac(rng)), temp = temp_frac(rng) * free_a;
    const double cap = i % 2 ? 0.0 : free_a * temp_frac(rng);
    SCOPED_TRACE("E=" + std::to_string(E) + " free=" + std::to_string(free_a) + " temp=" + std::to_string(temp));
    ASSERT_GE(sb::destination_ranges(E, free_a, temp), sb::destination_ranges(E, free_b, temp));
    ASSERT_GE(sb::destination_ranges(E, free_a, temp, cap), sb::destination_ranges(E, free_b, temp, cap));
    ASSERT_GE(sb::destination_ranges(E, free_a, temp, cap), sb::destination_ranges(E, free_a, temp))
        << "a cap never fewer";
    if (cap > 0) {  // a larger cap never more ranges, and a cap alone never "no room" (v52)
      ASSERT_GE(sb::destination_ranges(E, free_a, temp, cap), sb::destination_ranges(E, free_a, temp, cap * 1.2));
      ASSERT_GE(sb::one_shot_edge_ranges(E, free_a, temp, cap), sb::one_shot_edge_ranges(E, free_a, temp, cap * 1.2));
      ASSERT_EQ(sb::one_shot_edge_ranges(E, free_a, temp, cap) > 0, sb::one_shot_edge_ranges(E, free_a, temp) > 0);
    }
    ASSERT_GE(sb::one_shot_edge_ranges(E, free_b, temp), 0);
    const std::int64_t ea = sb::one_shot_edge_ranges(E, free_a, temp), eb = sb::one_shot_edge_ranges(E, free_b, temp);
    if (ea > 0) {
      ASSERT_TRUE(eb > 0 && eb <= ea);
    }
    const std::int64_t da = sb::one_shot_destination_ranges(E, free_a, temp),
                       db = sb::one_shot_destination_ranges(E, free_b, temp);
    ASSERT_LE(da, sb::kOneShotDestRanges);
    if (da > 0) {
      ASSERT_TRUE(db > 0 && db <= da);
      // Where the count is not clamped, a balanced range's sort fits the room.
      ASSERT_LE(16.0 * double(E) / double(da > 1 ? da - 1 : 1), 0.9 * free_a - temp + 1);
    }
  }
}
