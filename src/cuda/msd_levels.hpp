#pragma once
// The MSD sort's second level (sort_narrow_msd in src/cuda/aggregate.cu): its buckets'
// tiles, the cells its level passes count and scan, and its batches. Plain C++ that nvcc also
// compiles for the device, so that the test suite checks this index arithmetic on the host
// (tests/test_msd_levels.cpp: the level passes emulated on it give a stable sort), where CI has
// no GPU. No CUDA header here.
#include <algorithm>
#include <cstdint>
#include <vector>

#ifdef __CUDACC__
#define PIPELINK_MSD_HD __host__ __device__ __forceinline__
#else
#define PIPELINK_MSD_HD inline
#endif

namespace pipelink::cuda::msd {

constexpr int kTopBits = 6, kTopDigits = 1 << kTopBits;  // the first pass's digit: the key's top bits
constexpr int kTile = 8192;                                // positions a tile (the first pass's tile)
constexpr int kLevelBits = 8, kLevelDigits = 1 << kLevelBits;

// Bucket d holds positions [start[d], start[d + 1]) and tiles [tile0[d], tile0[d + 1]) of kTile
// positions each (its last one short): no tile crosses two buckets.
struct BucketTiles {
  std::uint32_t start[kTopDigits + 1];  // start[kTopDigits] = E
  std::uint32_t tile0[kTopDigits + 1];  // tile0[kTopDigits]: every bucket's tiles
};
struct TileSpan {
  int bucket;
  std::uint32_t t, tiles;  // the tile in its bucket, the bucket's tiles
  std::int64_t p0;         // its first position
  int n;                   // its positions
};
// Tile g's bucket is the last d with tile0[d] <= g (an empty bucket's tiles end where they
// start, so it is never found). g < tile0[kTopDigits].
PIPELINK_MSD_HD TileSpan tile_span(const BucketTiles& bt, std::uint32_t g) {
  int lo = 0, hi = kTopDigits;  // tile0[lo] <= g < tile0[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (bt.tile0[mid] <= g) lo = mid;
    else hi = mid;
  }
  TileSpan sp;
  sp.bucket = lo;
  sp.t = g - bt.tile0[lo];
  sp.tiles = bt.tile0[lo + 1] - bt.tile0[lo];
  sp.p0 = std::int64_t(bt.start[lo]) + std::int64_t(sp.t) * kTile;
  const std::int64_t left = std::int64_t(bt.start[lo + 1]) - sp.p0;
  sp.n = int(left < kTile ? left : kTile);
  return sp;
}
// A (tile, digit)'s cell: bucket-major, then digit, then tile, so that an exclusive sum over whole
// buckets' cells gives each its first place in those buckets' stable order by digit.
PIPELINK_MSD_HD std::int64_t level_cell(const BucketTiles& bt, const TileSpan& sp, int d) {
  return std::int64_t(bt.tile0[sp.bucket]) * kLevelDigits + std::int64_t(d) * sp.tiles + sp.t;
}

// PIPELINK_AGG_MSD_LAST=rows: the first level sorts each bucket by the key's high digit (its
// sub-bucket: 2^kLevelBits rows) and a block a sub-bucket sorts it by the low digit. Sub-bucket h
// of bucket j (not empty) spans [first, end) of the list, read from the first level's summed
// cells `offsets` (absolute places): digit h's first place is tile 0's cell, and the next
// digit's (or the bucket's end) closes it.
struct Range {
  std::int64_t first, end;
};
PIPELINK_MSD_HD Range sub_bucket_range(const BucketTiles& bt, const std::uint32_t* offsets, int j, int h, int subs) {
  const std::uint32_t tiles = bt.tile0[j + 1] - bt.tile0[j];
  const std::int64_t c0 = std::int64_t(bt.tile0[j]) * kLevelDigits;
  return {std::int64_t(offsets[c0 + std::int64_t(h) * tiles]),
          h + 1 < subs ? std::int64_t(offsets[c0 + std::int64_t(h + 1) * tiles]) : std::int64_t(bt.start[j + 1])};
}

struct Batch {
  int d0, d1;  // buckets [d0, d1)
};
// PIPELINK_AGG_MSD_LAST: how a two-level sort (shift > kLevelBits) runs its last level.
//   rows: the first level by the key's high digit, then a block a 2^kLevelBits-row sub-bucket
//     (level_rows_kernel), which sorts it a tile at a time and writes its rows' offsets;
//   level: two level passes (low digit, then high), then the row starts kernel;
//   automatic (the default): by rows unless the biggest bucket's mean sub-bucket passes
//     kRowsMeanTiles tiles or a sample of the keys finds sub-buckets past kRowsSkewTiles
//     (SubSample below), then by level passes.
// Why: by rows a sub-bucket is one block's serial work. On power-law (R-MAT, hubs at the low
// ids: bucket 0 holds ~0.76^6 = 19% of E, 12M edges, a mean sub-bucket of ~95K edges or 11.6
// tiles) the one-shot took 12.76 ms by rows against 6.6-6.9 by the one sort (v21-v31); on
// products-like (1.63M a bucket, 6.4K a sub-bucket: 0.8 tile) rows is the faster form (6.23
// against 6.45 ms by level passes, v34). H200, session 33.
enum class Last { automatic, rows, level };
constexpr std::int64_t kRowsMeanTiles = 4;

// `auto`'s second look: a sample of the keys (msd_sample_kernel). `taken` keys, one every
// `stride` positions from stride / 2 (every key where E <= kSampleKeys), are counted a sub-bucket
// (2^kLevelBits rows: key >> kLevelBits, `cells` of them); `in_big` of them lie in sub-buckets
// past `big` samples, kRowsSkewTiles tiles' worth. Past kRowsSkewPercent of the sample, `auto`
// takes the level passes.
// Why: the biggest bucket's mean cannot see a skew inside the buckets. With power-law's nodes
// renamed at random (bench --relabel) its biggest bucket averages 1.06 tiles a sub-bucket (rows),
// but 15% of the edges lie in sub-buckets past 2 tiles (the biggest 25 tiles), and by rows the
// one-shot took 8.00 ms against 6.83 by level passes (H200, session 34). The sample's share past
// 2 tiles, counted on the host from the generators' graphs at 65536 keys: products-like 0.1%
// (exactly 0: its biggest sub-bucket is 0.8 tile), relabelled power-law 18% (exactly 15%),
// power-law 75% (82%).
constexpr std::int64_t kSampleKeys = 65536;
constexpr std::int64_t kRowsSkewTiles = 2;
constexpr std::int64_t kRowsSkewPercent = 5;
struct SubSample {
  std::int64_t taken = 0, stride = 1, cells = 0;
  std::uint32_t big = 0;     // samples a sub-bucket holds at kRowsSkewTiles tiles
  std::uint32_t in_big = 0;  // the count: samples in sub-buckets of more than `big`
};
inline SubSample plan_sample(std::int64_t E, std::int64_t N) {
  SubSample s;
  if (E <= 0 || N <= 0) return s;
  s.taken = std::min(E, kSampleKeys);
  s.stride = E / s.taken;
  s.cells = ((N - 1) >> kLevelBits) + 1;
  s.big = std::uint32_t(kRowsSkewTiles * kTile * s.taken / E);
  return s;
}
inline bool sample_skewed(const SubSample& s) {
  return s.taken > 0 && std::int64_t(s.in_big) * 100 > kRowsSkewPercent * s.taken;
}

// How the level passes run: the tiles, the batches (runs of whole buckets, the first of each not
// empty, of at most `cap` edges: a bucket larger goes alone; a batch takes in the empty buckets
// after it, so the batches cover every bucket from the first non-empty one to the last, which
// rows_before_batches and the by-rows form's offsets rely on), the side streams they go round
// (each with a scratch of cap edges), and the passes' digits (levels: 1 where shift <= kLevelBits).
struct Levels {
  BucketTiles bt{};
  std::vector<Batch> batches;
  int streams = 1;
  std::int64_t cap = 0;
  std::uint32_t batch_tiles = 0;  // the most tiles a batch
  int levels = 1;
  std::uint32_t dmask1 = 0, dmask2 = 0;
  bool by_rows = false;  // the last level by rows (two levels only; see Last)
};
// starts: the kTopDigits + 1 bucket starts (starts[kTopDigits] = E); shift: the bits each bucket
// sorts, in [1, 16]; last: PIPELINK_AGG_MSD_LAST (the form of by_rows); sample: automatic's
// sample of the keys (none taken: the buckets' sizes alone decide). The scratch, streams
// batches of cap, stays within E / batch_div edges where the biggest bucket lets it (fewer
// streams where one is large; one bucket's at least).
inline Levels plan_levels(const std::uint32_t* starts, std::int64_t E, int shift, int batch_div, int max_streams,
                          Last last = Last::automatic, const SubSample& sample = {}) {
  Levels lv;
  std::int64_t biggest = 0;
  for (int d = 0; d < kTopDigits; ++d) {
    const std::int64_t n = std::int64_t(starts[d + 1]) - starts[d];
    biggest = std::max(biggest, n);
    lv.bt.start[d] = starts[d];
    lv.bt.tile0[d + 1] = lv.bt.tile0[d] + std::uint32_t((n + kTile - 1) / kTile);
  }
  lv.bt.start[kTopDigits] = std::uint32_t(E);
  const std::int64_t room = std::max<std::int64_t>(E / batch_div, 1);
  lv.streams = int(std::clamp<std::int64_t>(room / std::max<std::int64_t>(biggest, 1), 1, max_streams));
  lv.cap = std::max(biggest, room / lv.streams);
  for (int d = 0; d < kTopDigits;) {
    if (starts[d + 1] == starts[d]) {
      ++d;
      continue;
    }
    int e = d + 1;
    while (e < kTopDigits && std::int64_t(starts[e + 1]) - starts[d] <= lv.cap) ++e;
    lv.batches.push_back({d, e});
    lv.batch_tiles = std::max(lv.batch_tiles, lv.bt.tile0[e] - lv.bt.tile0[d]);
    d = e;
  }
  lv.levels = shift > kLevelBits ? 2 : 1;
  lv.dmask1 = (1u << std::min(shift, kLevelBits)) - 1;
  lv.dmask2 = (1u << std::max(shift - kLevelBits, 0)) - 1;
  const std::int64_t subs = std::int64_t(lv.dmask2) + 1;
  lv.by_rows =
      lv.levels == 2 && (last == Last::rows || (last == Last::automatic && biggest <= subs * kRowsMeanTiles * kTile &&
                                                !sample_skewed(sample)));
  return lv;
}

// Rows before the first batch's bucket (all of them where there is no batch): rows without edges,
// whose offsets are 0 and which no batch's blocks write (by rows, every other row < N is written
// by its bucket's blocks; see level_rows_kernel).
inline std::int64_t rows_before_batches(const Levels& lv, int shift, std::int64_t N) {
  return lv.batches.empty() ? N : std::min(std::int64_t(lv.batches.front().d0) << shift, N);
}

}  // namespace pipelink::cuda::msd
