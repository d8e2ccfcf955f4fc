// The one-shot MSD sort's second level (src/cuda/msd_levels.hpp, run by sort_narrow_msd), checked
// on the host where CI has no GPU: its level passes emulated on plan_levels' tiles, cells and
// batches (each tile ranked as level_scatter_kernel ranks it: stable by digit) must sort every
// bucket stably by its key's low `shift` bits, with every write inside the batch's scratch or its
// own range, every cell written once, and the scratch within E / batch_div edges unless one bucket
// is larger. The GPU test (CudaAggregate.OneShotMsdSortGivesTheOneSortsBits) checks the kernels
// themselves against the one sort's bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../src/cuda/msd_levels.hpp"
#include "test_util.hpp"  // fresh_seed: PIPELINK_TEST_SEED replays a run

namespace pipelink::test {
namespace {

namespace msd = pipelink::cuda::msd;
using i64 = std::int64_t;
using u16 = std::uint16_t;
using u32 = std::uint32_t;

struct Item {
  u16 key;
  i64 id;
};

// A level pass's counts over tiles [g0, g0 + nt), at cells - cell0 (each written once), then their
// exclusive sum: level_counts_kernel and the scan. in(p) reads position p.
template <class In>
std::vector<u32> level_offsets(const msd::BucketTiles& bt, u32 g0, u32 nt, int dshift, u32 dmask, i64 cell0, In in) {
  std::vector<u32> cells(std::size_t(nt) * msd::kLevelDigits, ~0u);
  for (u32 g = g0; g < g0 + nt; ++g) {
    const msd::TileSpan sp = msd::tile_span(bt, g);
    EXPECT_GT(sp.n, 0) << "tile " << g << " of an empty bucket";
    EXPECT_LE(sp.n, msd::kTile);
    std::vector<u32> h(msd::kLevelDigits, 0);
    for (int i = 0; i < sp.n; ++i) ++h[(u32(in(sp.p0 + i).key) >> dshift) & dmask];
    for (int d = 0; d < msd::kLevelDigits; ++d) {
      const i64 c = msd::level_cell(bt, sp, d) - cell0;
      if (c < 0 || c >= i64(cells.size()) || cells[std::size_t(c)] != ~0u) {
        ADD_FAILURE() << "tile " << g << " digit " << d << ": cell " << c << " out of range or written twice";
        return {};
      }
      cells[std::size_t(c)] = h[std::size_t(d)];
    }
  }
  u32 sum = 0;
  for (u32& c : cells) {
    if (c == ~0u) {
      ADD_FAILURE() << "a cell no tile wrote";
      return {};
    }
    const u32 v = c;
    c = sum;
    sum += v;
  }
  return cells;
}

// A level pass's scatter of tiles [g0, g0 + nt): each tile's entries in position order (the
// kernel's warp, round, lane order) placed stably by digit at offsets[cell - cell0] + their rank +
// out_add, which must lie in [lo, hi): level_scatter_kernel.
template <class In, class Out>
void level_scatter(const msd::BucketTiles& bt, u32 g0, u32 nt, int dshift, u32 dmask, const std::vector<u32>& offsets,
                   i64 cell0, i64 out_add, In in, Out out, i64 lo, i64 hi) {
  ASSERT_FALSE(offsets.empty());
  for (u32 g = g0; g < g0 + nt; ++g) {
    const msd::TileSpan sp = msd::tile_span(bt, g);
    std::vector<u32> rank(msd::kLevelDigits, 0);
    for (int i = 0; i < sp.n; ++i) {
      const Item it = in(sp.p0 + i);
      const u32 d = (u32(it.key) >> dshift) & dmask;
      const i64 c = msd::level_cell(bt, sp, int(d)) - cell0;
      ASSERT_GE(c, 0);
      ASSERT_LT(c, i64(offsets.size()));
      const i64 place = i64(offsets[std::size_t(c)]) + rank[d]++ + out_add;
      ASSERT_GE(place, lo) << "tile " << g;
      ASSERT_LT(place, hi) << "tile " << g;
      out(place, it);
    }
  }
}

// The second level as sort_narrow_msd queues it, run in order, on items grouped by bucket
// (positions [starts[d], starts[d + 1])); returns them in their final order.
std::vector<Item> run_levels(std::vector<Item> a, const std::vector<u32>& starts, int shift, int batch_div, int max_streams) {
  const i64 E = i64(a.size());
  const msd::Levels lv = msd::plan_levels(starts.data(), E, shift, batch_div, max_streams);
  EXPECT_EQ(lv.levels, shift > msd::kLevelBits ? 2 : 1);
  EXPECT_GE(lv.streams, 1);
  EXPECT_LE(lv.streams, max_streams);
  i64 biggest = 0;
  for (int d = 0; d < msd::kTopDigits; ++d) biggest = std::max<i64>(biggest, i64(starts[d + 1]) - starts[d]);
  EXPECT_GE(lv.cap, biggest) << "every bucket fits a scratch";
  EXPECT_LE(lv.streams * lv.cap, std::max<i64>(std::max<i64>(E / batch_div, 1), biggest)) << "the scratch in all";
  // Pass 1's cells and sum, once over every tile: absolute positions.
  const std::vector<u32> offsets1 =
      level_offsets(lv.bt, 0, lv.bt.tile0[msd::kTopDigits], 0, lv.dmask1, 0, [&](i64 p) { return a[std::size_t(p)]; });
  std::vector<std::vector<Item>> scratch(std::size_t(lv.streams), std::vector<Item>(static_cast<std::size_t>(lv.cap)));
  int next = 0;  // the batches cover the non-empty buckets in order, once each
  for (std::size_t bi = 0; bi < lv.batches.size(); ++bi) {
    const msd::Batch& b = lv.batches[bi];
    for (; next < b.d0; ++next) EXPECT_EQ(starts[std::size_t(next)], starts[std::size_t(next) + 1]) << "bucket " << next << " in no batch";
    EXPECT_NE(starts[std::size_t(b.d0)], starts[std::size_t(b.d0) + 1]) << "a batch starts at an empty bucket";
    next = b.d1;
    std::vector<Item>& sc = scratch[bi % std::size_t(lv.streams)];
    const u32 g0 = lv.bt.tile0[b.d0], nt = lv.bt.tile0[b.d1] - g0;
    const i64 p0 = starts[std::size_t(b.d0)], n = i64(starts[std::size_t(b.d1)]) - p0;
    EXPECT_LE(n, lv.cap);
    EXPECT_LE(nt, lv.batch_tiles);
    // Pass 1: the batch's positions of the list into its scratch at position - p0.
    level_scatter(lv.bt, g0, nt, 0, lv.dmask1, offsets1, 0, -p0, [&](i64 p) { return a[std::size_t(p)]; },
                  [&](i64 q, Item it) { sc.at(std::size_t(q)) = it; }, 0, n);  // at(): a batch past its scratch throws
    if (lv.levels == 2) {  // pass 2: its own cells and sum (batch-relative), back to the list at + p0
      const i64 cell0 = i64(g0) * msd::kLevelDigits;
      auto from = [&](i64 p) { return sc.at(std::size_t(p - p0)); };
      const std::vector<u32> offsets2 = level_offsets(lv.bt, g0, nt, msd::kLevelBits, lv.dmask2, cell0, from);
      level_scatter(lv.bt, g0, nt, msd::kLevelBits, lv.dmask2, offsets2, cell0, p0, from,
                    [&](i64 q, Item it) { a[std::size_t(q)] = it; }, p0, p0 + n);
    } else {
      std::copy(sc.begin(), sc.begin() + n, a.begin() + p0);
    }
  }
  for (; next < msd::kTopDigits; ++next) EXPECT_EQ(starts[std::size_t(next)], starts[std::size_t(next) + 1]) << "bucket " << next << " in no batch";
  return a;
}

// PIPELINK_AGG_MSD_LAST=rows as sort_narrow_msd queues it (two levels only): the first level by
// the high digit into each batch's scratch, then a block a sub-bucket (level_rows_kernel) sorting
// msd::sub_bucket_range by the low digit back into the list and writing its rows' offsets (an
// empty bucket's block its rows' the bucket's start); the rows before the first batch's bucket
// zeroed by the host. No fill and no suffix minimum: every row's offset is written, and an
// offset left at the poison (0xFFFFFFFF) fails the caller's check. Returns the items in their
// final order and the row offsets (N + 1).
std::vector<Item> run_rows(std::vector<Item> a, const std::vector<u32>& starts, int shift, i64 N, int batch_div,
                           int max_streams, std::vector<u32>* row_ptr) {
  const i64 E = i64(a.size());
  const msd::Levels lv = msd::plan_levels(starts.data(), E, shift, batch_div, max_streams);
  EXPECT_EQ(lv.levels, 2);
  const int subs = int(lv.dmask2) + 1;
  row_ptr->assign(std::size_t(N) + 1, ~0u);
  (*row_ptr)[std::size_t(N)] = u32(E);
  std::fill(row_ptr->begin(), row_ptr->begin() + msd::rows_before_batches(lv, shift, N), 0u);
  const std::vector<u32> offsets1 = level_offsets(lv.bt, 0, lv.bt.tile0[msd::kTopDigits], msd::kLevelBits, lv.dmask2, 0,
                                                  [&](i64 p) { return a[std::size_t(p)]; });
  if (offsets1.empty()) return a;
  std::vector<Item> sc(static_cast<std::size_t>(lv.cap));
  for (const msd::Batch& b : lv.batches) {
    const u32 g0 = lv.bt.tile0[b.d0], nt = lv.bt.tile0[b.d1] - g0;
    const i64 p0 = starts[std::size_t(b.d0)], n = i64(starts[std::size_t(b.d1)]) - p0;
    level_scatter(lv.bt, g0, nt, msd::kLevelBits, lv.dmask2, offsets1, 0, -p0, [&](i64 p) { return a[std::size_t(p)]; },
                  [&](i64 q, Item it) { sc.at(std::size_t(q)) = it; }, 0, n);
    for (int j = b.d0; j < b.d1; ++j) {
      if (starts[std::size_t(j)] == starts[std::size_t(j) + 1]) {  // the kernel's blocks write the start, return
        for (i64 r = i64(j) << shift; r < std::min(i64(j + 1) << shift, N); ++r)
          (*row_ptr)[std::size_t(r)] = starts[std::size_t(j)];
        continue;
      }
      i64 next = starts[std::size_t(j)];
      for (int h = 0; h < subs; ++h) {
        const msd::Range r = msd::sub_bucket_range(lv.bt, offsets1.data(), j, h, subs);
        EXPECT_EQ(r.first, next) << "bucket " << j << " sub-bucket " << h << " does not start where the last ended";
        EXPECT_LE(r.first, r.end);
        EXPECT_GE(r.first, p0);
        EXPECT_LE(r.end, p0 + n);
        next = r.end;
        // The block: row counts, their sum (each row's start), then a stable placement by row.
        std::vector<u32> start(msd::kLevelDigits + 1, 0);
        for (i64 q = r.first; q < r.end; ++q) ++start[(sc.at(std::size_t(q - p0)).key & 0xFFu) + 1];
        std::partial_sum(start.begin(), start.end(), start.begin());
        for (int d = 0; d < msd::kLevelDigits; ++d) {
          const i64 row = i64(j) << shift | i64(h) << msd::kLevelBits | d;
          if (row < N) (*row_ptr)[std::size_t(row)] = u32(r.first + start[std::size_t(d)]);
        }
        for (i64 q = r.first; q < r.end; ++q) {
          const Item it = sc.at(std::size_t(q - p0));
          a[std::size_t(r.first + start[it.key & 0xFFu]++)] = it;
        }
      }
      EXPECT_EQ(next, i64(starts[std::size_t(j) + 1])) << "bucket " << j << "'s sub-buckets end short";
    }
  }
  return a;
}

struct Graph {
  std::vector<Item> items;  // grouped by bucket, in edge order inside each
  std::vector<u32> starts;
  int shift;
};
// Bucket sizes from `sizes` (kTopDigits of them), keys uniform in [0, 2^shift) unless few_keys.
Graph make_graph(const std::vector<i64>& sizes, int shift, std::mt19937_64& rng, bool few_keys = false) {
  Graph g;
  g.shift = shift;
  g.starts.assign(msd::kTopDigits + 1, 0);
  std::uniform_int_distribution<u32> key(0, few_keys ? 3u : (1u << shift) - 1);
  i64 id = 0;
  for (int d = 0; d < msd::kTopDigits; ++d) {
    g.starts[std::size_t(d) + 1] = g.starts[std::size_t(d)] + u32(sizes[std::size_t(d)]);
    for (i64 i = 0; i < sizes[std::size_t(d)]; ++i) g.items.push_back({u16(key(rng)), id++});
  }
  return g;
}

void expect_sorted_like_stable_sort(const Graph& g, int batch_div, int max_streams) {
  SCOPED_TRACE("shift " + std::to_string(g.shift) + ", batch_div " + std::to_string(batch_div) + ", streams " +
               std::to_string(max_streams) + ", E " + std::to_string(g.items.size()));
  std::vector<Item> want = g.items;
  const u32 low = (1u << g.shift) - 1;
  for (int d = 0; d < msd::kTopDigits; ++d)
    std::stable_sort(want.begin() + g.starts[std::size_t(d)], want.begin() + g.starts[std::size_t(d) + 1],
                     [&](const Item& x, const Item& y) { return (x.key & low) < (y.key & low); });
  const std::vector<Item> got = run_levels(g.items, g.starts, g.shift, batch_div, max_streams);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_TRUE(got[i].id == want[i].id && got[i].key == want[i].key)
        << "position " << i << ": id " << got[i].id << " where the stable sort has " << want[i].id;
}

TEST(MsdLevels, UniformBucketsSortAsStableSort) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<i64> size(0, 3 * msd::kTile);
  for (int shift : {1, 5, 8, 9, 13, 16}) {
    std::vector<i64> sizes(msd::kTopDigits);
    for (i64& s : sizes) s = size(rng);
    const Graph g = make_graph(sizes, shift, rng);
    for (auto [div, streams] : {std::pair{8, 2}, std::pair{64, 1}, std::pair{2, 4}, std::pair{1, 1}})
      expect_sorted_like_stable_sort(g, div, streams);
  }
}

TEST(MsdLevels, TileEdgesEmptyBucketsAndFewKeys) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // Sizes around multiples of a tile, empty runs (the first and last buckets too), one edge.
  const i64 T = msd::kTile;
  std::vector<i64> sizes(msd::kTopDigits, 0);
  const i64 some[] = {T, T - 1, T + 1, 2 * T, 2 * T + 1, 1, 0, 3 * T - 1};
  for (int d = 1; d < msd::kTopDigits - 1; d += 3) sizes[std::size_t(d)] = some[std::size_t(d) % 8];
  for (int shift : {3, 12, 16}) {
    expect_sorted_like_stable_sort(make_graph(sizes, shift, rng), 8, 2);
    expect_sorted_like_stable_sort(make_graph(sizes, shift, rng, /*few_keys=*/true), 4, 4);  // long equal runs
  }
}

TEST(MsdLevels, HubBucketGoesAloneWithFewerStreams) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<i64> sizes(msd::kTopDigits, 2000);
  sizes[17] = 200000;  // ~61% of E: larger than E / 8, so the scratch is this bucket's, one stream
  const Graph g = make_graph(sizes, 16, rng);
  const msd::Levels lv = msd::plan_levels(g.starts.data(), i64(g.items.size()), 16, 8, 4);
  EXPECT_EQ(lv.streams, 1);
  EXPECT_EQ(lv.cap, 200000);
  bool alone = false;
  for (const msd::Batch& b : lv.batches) alone |= b.d0 == 17 && b.d1 == 18;
  EXPECT_TRUE(alone) << "the hub bucket shares a batch";
  expect_sorted_like_stable_sort(g, 8, 4);
}

TEST(MsdLevels, BatchesStopAtTheirScratch) {
  // E = 20000 over three buckets, E / 2 = 10000 edges of scratch on one stream: the first two
  // buckets hold one edge more than that together, so each goes in a batch of its own.
  std::mt19937_64 rng(fresh_seed());
  std::vector<i64> sizes(msd::kTopDigits, 0);
  sizes[0] = 6000;
  sizes[1] = 4001;
  sizes[2] = 9999;
  const Graph g = make_graph(sizes, 14, rng);
  const msd::Levels lv = msd::plan_levels(g.starts.data(), 20000, 14, 2, 1);
  EXPECT_EQ(lv.cap, 10000);
  ASSERT_EQ(lv.batches.size(), 3u);
  expect_sorted_like_stable_sort(g, 2, 1);
}

TEST(MsdLevels, RowsLastLevelSortsAndWritesTheRowOffsets) {
  // PIPELINK_AGG_MSD_LAST=rows: the items in a stable sort's order by row (bucket << shift | low
  // key bits), and row_ptr[r] the first position of a row >= r, for shift 9-16, N cutting the
  // last bucket's rows short, empty buckets (also before the first batch's, and the last ones
  // before N), and a hub sub-bucket larger than a tile.
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<i64> size(0, 2 * msd::kTile);
  for (int shift : {9, 12, 16}) {
    SCOPED_TRACE("shift " + std::to_string(shift));
    std::vector<i64> sizes(msd::kTopDigits, 0);
    for (int d = 0; d < 40; ++d) sizes[std::size_t(d)] = d % 7 == 3 ? 0 : size(rng);
    if (shift == 12) sizes[0] = sizes[1] = 0;  // empty buckets before the first batch's
    if (shift == 9) sizes[38] = sizes[39] = 0;  // empty buckets at the end that hold rows < N
    sizes[5] = 3 * msd::kTile;
    Graph g = make_graph(sizes, shift, rng);
    // A hub: most of bucket 5's edges in one row (one sub-bucket past a tile).
    for (u32 i = g.starts[5]; i < g.starts[6]; i += 4) g.items[i].key = u16(7);
    const i64 N = (i64(39) << shift) + 5;  // bucket 39's rows past its fifth are not rows
    const u32 low = (1u << shift) - 1;
    std::vector<Item> want = g.items;
    for (int d = 0; d < msd::kTopDigits; ++d)
      std::stable_sort(want.begin() + g.starts[std::size_t(d)], want.begin() + g.starts[std::size_t(d) + 1],
                       [&](const Item& x, const Item& y) { return (x.key & low) < (y.key & low); });
    for (auto [div, streams] : {std::pair{8, 2}, std::pair{64, 1}}) {
      std::vector<u32> rp;
      const std::vector<Item> got = run_rows(g.items, g.starts, shift, N, div, streams, &rp);
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i].id, want[i].id) << "position " << i;
      // Row r starts at the first position whose row is >= r (positions' rows ascend).
      std::vector<i64> row_of(got.size());
      for (int d = 0; d < msd::kTopDigits; ++d)
        for (u32 i = g.starts[std::size_t(d)]; i < g.starts[std::size_t(d) + 1]; ++i) row_of[i] = i64(d) << shift | (got[i].key & low);
      for (i64 r = 0, q = 0; r <= N; ++r) {
        while (q < i64(got.size()) && row_of[std::size_t(q)] < r) ++q;
        ASSERT_EQ(rp[std::size_t(r)], u32(r == N ? i64(got.size()) : q)) << "row " << r;
      }
    }
  }
}

TEST(MsdLevels, ProductsLikeShapeMakesBatchesOfOneAndTwoBuckets) {
  // products-like's shape (E = 61.9M, N = 2.45M: 22-bit keys, top digits 0-37 of ~1.63M edges),
  // checked on the sizes alone (no items): the default since v35 (E / 16 over 2 streams) gives a
  // batch a bucket, 38 of them, 0.63 B/edge of scratch (10.8 in all with the 10 the first pass
  // keeps); v34's E / 8 gives batches of two buckets, 19 of them, 1.25 B/edge (11.4 in all).
  const i64 E = 61859140;
  std::vector<u32> starts(msd::kTopDigits + 1, u32(E));
  for (int d = 0; d <= 37; ++d) starts[std::size_t(d)] = u32(E / 38 * d);
  struct Want {
    int batch;
    std::size_t batches;
    double scratch;
  };
  for (const Want w : {Want{16, 38, 0.63}, Want{8, 19, 1.25}}) {
    SCOPED_TRACE("batch " + std::to_string(w.batch));
    const msd::Levels lv = msd::plan_levels(starts.data(), E, 16, w.batch, 2);
    EXPECT_EQ(lv.streams, 2);
    EXPECT_EQ(lv.batches.size(), w.batches);
    EXPECT_EQ(lv.levels, 2);
    EXPECT_EQ(lv.dmask1, 255u);
    EXPECT_EQ(lv.dmask2, 255u);
    const double scratch_bytes_per_edge = double(lv.streams * lv.cap) * 10.0 / double(E);
    EXPECT_LE(scratch_bytes_per_edge, w.scratch + 1e-9);
    const double cells_bytes_per_edge = double(lv.bt.tile0[msd::kTopDigits]) * msd::kLevelDigits * 4.0 / double(E);
    EXPECT_LE(10.0 + scratch_bytes_per_edge + cells_bytes_per_edge, 12.0);
  }
}

TEST(MsdLevels, LastLevelByRowsUnlessABucketIsSkewed) {
  // PIPELINK_AGG_MSD_LAST=auto (msd::Last::automatic): by rows where the biggest bucket's mean
  // sub-bucket is at most kRowsMeanTiles tiles, else by level passes; =rows and =level force
  // theirs; one level (shift <= kLevelBits) never by rows. Checked on the sizes alone.
  auto by_rows = [](const std::vector<i64>& sizes, i64 E, int shift, msd::Last last) {
    std::vector<u32> starts(msd::kTopDigits + 1, 0);
    for (int d = 0; d < msd::kTopDigits; ++d)
      starts[std::size_t(d) + 1] = u32(i64(starts[std::size_t(d)]) + sizes[std::size_t(d)]);
    EXPECT_EQ(i64(starts[msd::kTopDigits]), E);
    return msd::plan_levels(starts.data(), E, shift, 16, 2, last).by_rows;
  };
  // products-like: 22-bit keys (shift 16, 256 sub-buckets), 38 buckets of ~1.63M: 0.8 tile a sub-bucket.
  {
    const i64 E = 61859140;
    std::vector<i64> sizes(msd::kTopDigits, 0);
    for (int d = 0; d < 38; ++d) sizes[std::size_t(d)] = E / 38 + (d < E % 38 ? 1 : 0);
    EXPECT_TRUE(by_rows(sizes, E, 16, msd::Last::automatic));
    EXPECT_TRUE(by_rows(sizes, E, 16, msd::Last::rows));
    EXPECT_FALSE(by_rows(sizes, E, 16, msd::Last::level));
  }
  // power-law: R-MAT at scale 21 (shift 15, 128 sub-buckets), a dst bit 0 with p = 0.76 a level:
  // bucket d of the top 6 bits holds 0.76^(6 - ones) 0.24^ones of E; bucket 0 ~12M, ~95K (11.6
  // tiles) a sub-bucket.
  {
    const i64 E = 63000000;
    std::vector<i64> sizes(msd::kTopDigits, 0);
    i64 sum = 0;
    for (int d = 0; d < msd::kTopDigits; ++d) {
      const int ones = __builtin_popcount(unsigned(d));
      sizes[std::size_t(d)] = i64(double(E) * std::pow(0.76, 6 - ones) * std::pow(0.24, ones));
      sum += sizes[std::size_t(d)];
    }
    sizes[0] += E - sum;
    EXPECT_GT(sizes[0], 128 * msd::kRowsMeanTiles * msd::kTile);
    EXPECT_FALSE(by_rows(sizes, E, 15, msd::Last::automatic));
    EXPECT_TRUE(by_rows(sizes, E, 15, msd::Last::rows));
  }
  // At the rule's edge: the biggest bucket exactly kRowsMeanTiles tiles a sub-bucket, then one more edge.
  {
    const i64 edge = 256 * msd::kRowsMeanTiles * msd::kTile;
    std::vector<i64> sizes(msd::kTopDigits, 1000);
    sizes[3] = edge;
    const i64 E = edge + 63 * 1000;
    EXPECT_TRUE(by_rows(sizes, E, 16, msd::Last::automatic));
    sizes[3] += 1;
    EXPECT_FALSE(by_rows(sizes, E + 1, 16, msd::Last::automatic));
  }
  // One level (8 bits a bucket): no sub-buckets, never by rows.
  {
    std::vector<i64> sizes(msd::kTopDigits, 5000);
    EXPECT_FALSE(by_rows(sizes, 64 * 5000, 8, msd::Last::rows));
    EXPECT_FALSE(by_rows(sizes, 64 * 5000, 8, msd::Last::automatic));
  }
}

TEST(MsdLevels, SampledSkewInsideBucketsTurnsAutoToLevelPasses) {
  // `auto`'s sample (msd::plan_sample, msd_sample_kernel on the GPU, emulated here): a stride
  // through the keys, a count per 256-row sub-bucket, and the share of the sample in sub-buckets
  // past kRowsSkewTiles tiles' worth. Past kRowsSkewPercent, level passes though every bucket's
  // mean is small; =rows still forces rows.
  {  // products-like's sizes: 65536 keys, one in 943, 17 samples at 2 tiles, 9567 sub-buckets.
    const msd::SubSample s = msd::plan_sample(61859140, 2449029);
    EXPECT_EQ(s.taken, 65536);
    EXPECT_EQ(s.stride, 943);
    EXPECT_EQ(s.big, 17u);
    EXPECT_EQ(s.cells, 9567);
  }
  {  // Fewer keys than the sample: every key, judged exactly at 2 tiles.
    const msd::SubSample s = msd::plan_sample(1000, 5000);
    EXPECT_EQ(s.taken, 1000);
    EXPECT_EQ(s.stride, 1);
    EXPECT_EQ(s.big, u32(2 * msd::kTile));
    EXPECT_EQ(msd::plan_sample(0, 5).taken, 0);
    EXPECT_FALSE(msd::sample_skewed(msd::plan_sample(0, 5)));
  }
  // The kernel's count, on the host.
  auto sampled = [](const std::vector<u32>& dst, i64 N) {
    msd::SubSample s = msd::plan_sample(i64(dst.size()), N);
    std::vector<u32> cells(std::size_t(s.cells), 0);
    for (i64 k = 0; k < s.taken; ++k) ++cells[dst[std::size_t(k * s.stride + s.stride / 2)] >> msd::kLevelBits];
    for (u32 c : cells) s.in_big += c > s.big ? c : 0u;  // the samples in sub-buckets past `big`
    return s;
  };
  // N = 2^20 (shift 14: 64 sub-buckets a bucket), E = 2^23 uniform: 8 edges a row, a sub-bucket
  // ~2K edges (a quarter tile); then 10% of the edges moved into rows 0-255 (~0.84M edges, 102
  // tiles, one sub-bucket): bucket 0's mean ~15K edges (1.8 tiles), so the sizes alone say rows.
  const i64 N = i64(1) << 20, E = i64(1) << 23;
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<u32> dst(static_cast<std::size_t>(E));
  for (u32& d : dst) d = u32(rng() % std::uint64_t(N));
  auto starts_of = [&](const std::vector<u32>& keys) {
    std::vector<u32> starts(msd::kTopDigits + 1, 0);
    for (u32 d : keys) ++starts[std::size_t(d >> 14) + 1];
    for (int d = 0; d < msd::kTopDigits; ++d) starts[std::size_t(d) + 1] += starts[std::size_t(d)];
    return starts;
  };
  const msd::SubSample flat = sampled(dst, N);
  EXPECT_EQ(flat.in_big, 0u);
  EXPECT_TRUE(msd::plan_levels(starts_of(dst).data(), E, 14, 16, 2, msd::Last::automatic, flat).by_rows);
  for (u32& d : dst)
    if (rng() % 10 == 0) d = u32(rng() % 256);
  const msd::SubSample skewed = sampled(dst, N);
  EXPECT_GT(i64(skewed.in_big) * 100, 9 * skewed.taken) << "about a tenth of the sample in the hub sub-bucket";
  EXPECT_TRUE(msd::plan_levels(starts_of(dst).data(), E, 14, 16, 2).by_rows) << "the sizes alone say rows";
  EXPECT_FALSE(msd::plan_levels(starts_of(dst).data(), E, 14, 16, 2, msd::Last::automatic, skewed).by_rows);
  EXPECT_TRUE(msd::plan_levels(starts_of(dst).data(), E, 14, 16, 2, msd::Last::rows, skewed).by_rows);
  // The rule's edge: 5% of the sample, then one more.
  msd::SubSample edge = flat;
  edge.in_big = u32(edge.taken * msd::kRowsSkewPercent / 100);
  EXPECT_FALSE(msd::sample_skewed(edge));
  edge.in_big += 1;
  EXPECT_TRUE(msd::sample_skewed(edge));
}

}  // namespace
}  // namespace pipelink::test
