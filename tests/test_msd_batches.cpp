// The MSD sort micro's batches and digits (bench/micro/msd_batches.hpp; perf-notes v31), checked
// on the host: the micro's three passes emulated as stable counting sorts on the batches that
// plan_batches makes must give std::stable_sort's order by destination and the row offsets, with
// every batch inside its scratch. Graphs: uniform, one hub bucket larger than an eighth of E (it
// must go alone), and an empty top bucket (its rows still need offsets).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../bench/micro/msd_batches.hpp"
#include "test_util.hpp"  // fresh_seed: PIPELINK_TEST_SEED replays a run

namespace pipelink::test {
namespace {

using msd::i64;
using msd::u16;
using msd::u32;

struct Pair {
  i64 src, id;
  bool operator==(const Pair&) const = default;
};

// Stable counting sort of items [0, n) by digit(i) < digits: each item's place.
template <class Digit>
std::vector<i64> stable_places(i64 n, int digits, Digit digit, std::vector<i64>* starts = nullptr) {
  std::vector<i64> count(static_cast<std::size_t>(digits) + 1, 0), place(static_cast<std::size_t>(n));
  for (i64 i = 0; i < n; ++i) ++count[digit(i) + 1];
  std::partial_sum(count.begin(), count.end(), count.begin());
  if (starts) *starts = count;
  for (i64 i = 0; i < n; ++i) place[std::size_t(i)] = count[digit(i)]++;
  return place;
}

struct Sorted {
  std::vector<Pair> pairs;
  std::vector<i64> row_ptr;
  std::vector<msd::Batch> batches;
  i64 scratch = 0;
};

// The micro's passes on the host.
Sorted msd_sort(const std::vector<i64>& src, const std::vector<i64>& dst, i64 N) {
  const i64 E = i64(dst.size());
  Sorted out;
  // Pass 1: by dst >> 16 into A (u16 key, pair).
  std::vector<i64> top_starts;
  const auto p1 = stable_places(E, msd::kTopDigits, [&](i64 e) { return int(dst[std::size_t(e)] >> msd::kTopShift); }, &top_starts);
  std::vector<u16> akey(static_cast<std::size_t>(E));
  std::vector<Pair> apair(static_cast<std::size_t>(E));
  for (i64 e = 0; e < E; ++e) {
    akey[std::size_t(p1[std::size_t(e)])] = u16(dst[std::size_t(e)] & 0xFFFF);
    apair[std::size_t(p1[std::size_t(e)])] = Pair{src[std::size_t(e)], e};
  }
  std::vector<u32> first(msd::kTopDigits);
  for (int d = 0; d < msd::kTopDigits; ++d) first[std::size_t(d)] = u32(top_starts[std::size_t(d)]);
  out.scratch = msd::scratch_edges_for(first, E);
  out.batches = msd::plan_batches(first, E, N, out.scratch);
  out.row_ptr.assign(std::size_t(N) + 1, -1);
  for (const msd::Batch& b : out.batches) {
    // Pass 2: the batch's range of A by digit2 into the scratch (of at most out.scratch edges).
    std::vector<i64> sub_starts;
    const auto p2 = stable_places(b.n, msd::kDigits2, [&](i64 p) { return int(msd::digit2(b, p, akey[std::size_t(b.ea + p)])); },
                                  &sub_starts);
    std::vector<u16> skey(static_cast<std::size_t>(b.n));
    std::vector<Pair> spair(static_cast<std::size_t>(b.n));
    for (i64 p = 0; p < b.n; ++p) {
      skey[std::size_t(p2[std::size_t(p)])] = akey[std::size_t(b.ea + p)];
      spair[std::size_t(p2[std::size_t(p)])] = apair[std::size_t(b.ea + p)];
    }
    // Pass 3: each sub-bucket by row, back into A at the batch's range; the rows' offsets.
    for (int d = 0; d < b.nb << msd::kSubBits; ++d) {
      const i64 lo = sub_starts[std::size_t(d)], n = sub_starts[std::size_t(d) + 1] - lo;
      std::vector<i64> rs;
      const auto p3 = stable_places(n, msd::kRows, [&](i64 i) { return int(skey[std::size_t(lo + i)] & (msd::kRows - 1)); }, &rs);
      for (int r = 0; r < msd::kRows; ++r) {
        const i64 row = msd::row_of(b, d, r);
        if (row < N) out.row_ptr[std::size_t(row)] = b.ea + lo + rs[std::size_t(r)];
      }
      for (i64 i = 0; i < n; ++i) apair[std::size_t(b.ea + lo + p3[std::size_t(i)])] = spair[std::size_t(lo + i)];
    }
  }
  out.row_ptr[std::size_t(N)] = E;
  out.pairs = std::move(apair);
  return out;
}

void expect_sorted_as_stable_sort(const std::vector<i64>& src, const std::vector<i64>& dst, i64 N) {
  const i64 E = i64(dst.size());
  const Sorted got = msd_sort(src, dst, N);
  std::vector<i64> order(static_cast<std::size_t>(E));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](i64 a, i64 b) { return dst[std::size_t(a)] < dst[std::size_t(b)]; });
  std::vector<i64> row_ptr(static_cast<std::size_t>(N) + 1, 0);
  for (i64 d : dst) ++row_ptr[std::size_t(d) + 1];
  std::partial_sum(row_ptr.begin(), row_ptr.end(), row_ptr.begin());
  for (i64 i = 0; i < E; ++i)
    ASSERT_EQ(got.pairs[std::size_t(i)], (Pair{src[std::size_t(order[std::size_t(i)])], order[std::size_t(i)]})) << "position " << i;
  EXPECT_EQ(got.row_ptr, row_ptr);
  // The batches: consecutive, covering every top bucket below N and every edge, each within the
  // scratch and at most kBatchTops buckets.
  const int tops = int((N - 1) >> msd::kTopShift) + 1;
  int next_top = 0;
  i64 next_edge = 0;
  for (const msd::Batch& b : got.batches) {
    EXPECT_EQ(b.top0, next_top);
    EXPECT_EQ(b.ea, next_edge);
    EXPECT_GE(b.nb, 1);
    EXPECT_LE(b.nb, msd::kBatchTops);
    EXPECT_LE(b.n, got.scratch);
    EXPECT_EQ(b.starts[0], 0);
    EXPECT_EQ(b.starts[b.nb], b.n);
    next_top += b.nb;
    next_edge += b.n;
  }
  EXPECT_EQ(next_top, tops);
  EXPECT_EQ(next_edge, E);
}

struct Edges {
  std::vector<i64> src, dst;
};

// E edges drawn uniformly over N nodes.
Edges uniform_edges(i64 N, i64 E, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<i64> node(0, N - 1);
  Edges g{std::vector<i64>(static_cast<std::size_t>(E)), std::vector<i64>(static_cast<std::size_t>(E))};
  for (std::size_t e = 0; e < g.src.size(); ++e) {
    g.src[e] = node(rng);
    g.dst[e] = node(rng);
  }
  return g;
}

TEST(MsdBatches, UniformGraphSortsAsStableSort) {
  const i64 N = (i64(1) << 22) - 1000;  // 64 top buckets of ~9.4K edges: batches of 4
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Edges g = uniform_edges(N, 600000, seed);
  expect_sorted_as_stable_sort(g.src, g.dst, N);
  // Batches of several buckets, so that pass 2's digit must tell the buckets apart.
  const Sorted got = msd_sort(g.src, g.dst, N);
  EXPECT_TRUE(std::any_of(got.batches.begin(), got.batches.end(), [](const msd::Batch& b) { return b.nb == msd::kBatchTops; }));
}

TEST(MsdBatches, HubBucketGoesAloneAndEmptyBucketKeepsItsRows) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const i64 N = (i64(1) << 19) + 777, E = 500000;  // 9 top buckets
  std::uniform_int_distribution<i64> node(0, N - 1), hub_row(0, 40);
  std::vector<i64> src(static_cast<std::size_t>(E)), dst(static_cast<std::size_t>(E));
  for (i64 e = 0; e < E; ++e) {
    src[std::size_t(e)] = node(rng);
    i64 d = node(rng);
    if (e % 3 == 0) d = (i64(3) << msd::kTopShift) + hub_row(rng);  // a third of E in bucket 3
    if ((d >> msd::kTopShift) == 5) d -= i64(1) << msd::kTopShift;  // bucket 5 empty
    dst[std::size_t(e)] = d;
  }
  expect_sorted_as_stable_sort(src, dst, N);
  std::vector<u32> first(msd::kTopDigits, 0);
  {
    std::vector<i64> count(msd::kTopDigits + 1, 0);
    for (i64 d : dst) ++count[std::size_t(d >> msd::kTopShift) + 1];
    std::partial_sum(count.begin(), count.end(), count.begin());
    for (int d = 0; d < msd::kTopDigits; ++d) first[std::size_t(d)] = u32(count[std::size_t(d)]);
  }
  const i64 scratch = msd::scratch_edges_for(first, E);
  EXPECT_GT(scratch, E / 8);  // the hub bucket sets it
  for (const msd::Batch& b : msd::plan_batches(first, E, N, scratch))
    if (b.top0 <= 3 && 3 < b.top0 + b.nb) {
      EXPECT_EQ(b.top0, 3);
      EXPECT_EQ(b.nb, 1) << "the hub bucket fills the scratch alone";
    }
}

TEST(MsdBatches, OneTopBucketGraph) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Edges g = uniform_edges(1000, 20000, seed);
  expect_sorted_as_stable_sort(g.src, g.dst, 1000);
}

}  // namespace
}  // namespace pipelink::test
