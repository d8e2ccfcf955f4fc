// The w permutation micro's bank-spread places (bench/micro/bank_spread.hpp; perf-notes v30): on a
// random graph laid out as the micro and the library lay out the permutation's tables (tiles and
// buckets of 49152, runs in edge order, `inter` grouped by bucket then tile), the places chosen
// must keep every run's set of places (so pass 1 copies the same runs) and still give the gather's
// permutation through both passes, while the warp accesses' bank conflicts drop.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "../bench/micro/bank_spread.hpp"
#include "test_util.hpp"

namespace pipelink::test {
namespace {

using micro::i64;
using micro::u16;
using micro::u32;

struct Layout {
  i64 E, nb, tiles;
  int T, B;
  std::vector<u32> perm, pos, bkt, ds;
  std::vector<u16> tl, rs;
};

// The micro's construction (w_permute_micro.cu main), on the host.
Layout layout(i64 E, i64 N, int T, int B, std::uint64_t seed) {
  Layout l{E, (E + B - 1) / B, (E + T - 1) / T, T, B, {}, {}, {}, {}, {}, {}};
  std::mt19937_64 rng(seed);
  std::vector<u32> dst(static_cast<std::size_t>(E));
  for (auto& d : dst) d = u32(rng() % std::uint64_t(N));
  l.perm.resize(dst.size());
  std::iota(l.perm.begin(), l.perm.end(), 0u);
  std::stable_sort(l.perm.begin(), l.perm.end(), [&](u32 a, u32 b) { return dst[a] < dst[b]; });
  l.pos.resize(dst.size());
  for (std::size_t p = 0; p < dst.size(); ++p) l.pos[l.perm[p]] = u32(p);
  l.bkt.resize(dst.size());
  std::vector<u32> key(dst.size());
  for (i64 e = 0; e < E; ++e) {
    l.bkt[std::size_t(e)] = l.pos[std::size_t(e)] / u32(B);
    key[std::size_t(e)] = u32((e / T) * l.nb + l.bkt[std::size_t(e)]);
  }
  std::vector<u32> s(dst.size()), r(dst.size()), q(dst.size());
  std::iota(s.begin(), s.end(), 0u);
  std::stable_sort(s.begin(), s.end(), [&](u32 a, u32 b) { return key[a] < key[b]; });
  l.tl.resize(dst.size());
  for (std::size_t k = 0; k < s.size(); ++k) l.tl[s[k]] = u16(k % std::size_t(T));
  std::iota(r.begin(), r.end(), 0u);
  std::stable_sort(r.begin(), r.end(), [&](u32 a, u32 b) { return l.bkt[a] < l.bkt[b]; });
  for (std::size_t k = 0; k < r.size(); ++k) q[r[k]] = u32(k);
  std::vector<u32> cnt(std::size_t(l.tiles * l.nb), 0u), start(cnt.size(), 0u);
  for (u32 k : key) ++cnt[k];
  u32 acc = 0;
  for (std::size_t k = 0; k < cnt.size(); ++k) {
    start[k] = acc;
    acc += cnt[k];
  }
  l.rs.assign(std::size_t(l.tiles * (l.nb + 1)), 0);
  l.ds.assign(cnt.size(), 0u);
  for (i64 t = 0; t < l.tiles; ++t) {
    for (i64 b = 0; b < l.nb; ++b) {
      const std::size_t c = std::size_t(t * l.nb + b);
      l.rs[std::size_t(t * (l.nb + 1) + b)] = u16(i64(start[c]) - t * T);
      if (cnt[c]) l.ds[c] = q[s[start[c]]];
    }
    l.rs[std::size_t(t * (l.nb + 1) + l.nb)] = u16(std::min<i64>(T, E - t * T));
  }
  return l;
}

// Pass 1 (each edge's w to inter at its run's start there plus its place's offset in the run) and
// pass 2 (plan position p reads its bucket's region at lidx), on the host: the gather's result?
bool gives_the_gather(const Layout& l, const std::vector<u16>& places, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> w(std::size_t(l.E)), inter(w.size(), -1.0f);
  for (auto& x : w) x = float(rng() % 1000000);
  std::vector<i64> q(w.size());
  for (i64 e = 0; e < l.E; ++e) {
    const i64 t = e / l.T, b = l.bkt[std::size_t(e)];
    q[std::size_t(e)] = i64(l.ds[std::size_t(t * l.nb + b)]) + i64(places[std::size_t(e)]) -
                        i64(l.rs[std::size_t(t * (l.nb + 1) + b)]);
    if (q[std::size_t(e)] < 0 || q[std::size_t(e)] >= l.E) return false;
    inter[std::size_t(q[std::size_t(e)])] = w[std::size_t(e)];
  }
  for (i64 p = 0; p < l.E; ++p) {
    const i64 region = (p / l.B) * l.B, lidx = q[l.perm[std::size_t(p)]] - region;
    if (lidx < 0 || lidx >= l.B || inter[std::size_t(region + lidx)] != w[l.perm[std::size_t(p)]]) return false;
  }
  return true;
}

TEST(BankSpread, PlacesKeepTheRunsAndThePermutationAndSpreadTheBanks) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Layout l = layout(600000, 30000, 49152, 49152, seed);
  ASSERT_TRUE(gives_the_gather(l, l.tl, seed + 1)) << "the layout itself is wrong";
  for (const bool both : {false, true}) {
    SCOPED_TRACE(both ? "spread for both passes" : "spread for pass 1");
    std::vector<u16> places;
    const micro::Spread sp = micro::bank_spread_places(l.tl, l.bkt, l.E, l.T, l.nb, l.B, both ? &l.pos : nullptr,
                                                       both ? &l.rs : nullptr, both ? &l.ds : nullptr, places);
    // Every run keeps its set of places.
    for (i64 t0 = 0; t0 < l.E; t0 += l.T) {
      const i64 len = std::min<i64>(l.T, l.E - t0);
      std::vector<std::pair<u32, u16>> a, b;
      for (i64 i = 0; i < len; ++i) {
        a.emplace_back(l.bkt[std::size_t(t0 + i)], l.tl[std::size_t(t0 + i)]);
        b.emplace_back(l.bkt[std::size_t(t0 + i)], places[std::size_t(t0 + i)]);
      }
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      ASSERT_EQ(a, b) << "tile at edge " << t0;
    }
    EXPECT_TRUE(gives_the_gather(l, places, seed + 2));
    EXPECT_GT(sp.p1_before, 3.0);  // random places: ~3.4 of 32 lanes a bank at worst
    EXPECT_LT(sp.p1_after, 1.2);
    if (both) {
      EXPECT_GT(sp.p2_before, 3.0);
      EXPECT_LT(sp.p2_after, 2.5);
    }
  }
}

}  // namespace
}  // namespace pipelink::test
