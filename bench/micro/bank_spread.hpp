#pragma once
// Host reference of the w permutation's bank-spread places (bench/micro/w_permute_micro.cu, P1b
// and P1b2; tested by tests/test_bank_spread.cpp). Host C++ only, so that the test suite builds it
// without CUDA.
//
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace micro {

using i64 = std::int64_t;
using u16 = std::uint16_t;
using u32 = std::uint32_t;

// P1b (session 27, written after the device time; to run in session 28): ncu on the library's
// pass 1 (products-like, v30) found its shared-memory scatter at 3.7-way bank conflicts (73% of
// its shared-store wavefronts) and half its issue slots busy. Any order of the edges inside a
// (tile, bucket) run gives the same permutation (pass 1 copies a run whole; pass 2's lidx follows
// from where each edge lands in `inter`), so the places inside each run can be chosen so that each
// warp store instruction's 32 places fall in distinct banks. A warp store of load_tile_vec covers
// edges w0 + 4 lane + j of a 128-edge window (j = 0..3); pass2v's warp loads read lidx of plan
// positions the same way. Greedy on the host, tile by tile: each edge takes a free place of its
// run in a bank its pass-1 group has not used (and, with `both`, whose pass-2 bank its pass-2
// group has not used: the place's bank there is its pass-1 bank shifted by the run's ds - rs - the
// bucket's start), else the best it can. Returns the mean wavefronts (the largest bank's count)
// per group, pass 1 before and after, then pass 2 before and after (0 without `both`).
struct Spread {
  double p1_before = 0, p1_after = 0, p2_before = 0, p2_after = 0;
};
inline Spread bank_spread_places(const std::vector<u16>& tl, const std::vector<u32>& bkt, i64 E, int T, i64 nb, int B,
                                 const std::vector<u32>* pos, const std::vector<u16>* rs, const std::vector<u32>* ds,
                                 std::vector<u16>& out) {
  const bool both = pos && rs && ds;
  out.assign(static_cast<std::size_t>(E), 0);
  std::vector<std::vector<u16>> free_places(static_cast<std::size_t>(nb));
  std::vector<u32> touched;
  // Pass 2's groups (128-position windows x 4): the banks used so far, and the count per bank
  // before and after, for the report.
  const i64 groups2 = both ? (E + 127) / 128 * 4 : 0;
  std::vector<unsigned> used2(static_cast<std::size_t>(groups2), 0u);
  std::vector<unsigned char> c2a(both ? static_cast<std::size_t>(groups2) * 32 : 0, 0), c2b(c2a.size(), 0);
  auto group2 = [&](i64 e) { const i64 p = (*pos)[std::size_t(e)]; return (p / 128) * 4 + p % 4; };
  auto bank2 = [&](i64 e, u16 place) {  // the place's bank in pass 2's shared memory (lidx mod 32)
    const i64 t = e / T, b = bkt[std::size_t(e)];
    const i64 q = i64((*ds)[std::size_t(t * nb + b)]) + (i64(place) - i64((*rs)[std::size_t(t * (nb + 1) + b)]));
    return unsigned((q - b * B) & 31);
  };
  Spread r;
  i64 groups = 0;
  auto wavefronts = [](const int* c) {
    int m = 0;
    for (int b = 0; b < 32; ++b) m = c[b] > m ? c[b] : m;
    return m;
  };
  for (i64 t0 = 0; t0 < E; t0 += T) {
    const i64 len = E - t0 < T ? E - t0 : i64(T);
    touched.clear();
    for (i64 i = 0; i < len; ++i) {
      auto& f = free_places[bkt[std::size_t(t0 + i)]];
      if (f.empty()) touched.push_back(bkt[std::size_t(t0 + i)]);
      f.push_back(tl[std::size_t(t0 + i)]);
    }
    for (i64 w0 = 0; w0 < len; w0 += 128) {
      for (int j = 0; j < 4; ++j) {
        unsigned used = 0;
        int c0[32] = {}, c1[32] = {};
        bool any = false;
        for (int lane = 0; lane < 32; ++lane) {
          const i64 i = w0 + 4 * lane + j, e = t0 + i;
          if (i >= len) continue;
          any = true;
          auto& f = free_places[bkt[std::size_t(e)]];
          const std::size_t g2 = both ? std::size_t(group2(e)) : 0;
          std::size_t pick = f.size(), fallback = f.size();
          for (std::size_t k = 0; k < f.size(); ++k) {
            if ((used >> (f[k] & 31u)) & 1u) continue;
            if (!both || !((used2[g2] >> bank2(e, f[k])) & 1u)) {
              pick = k;
              break;
            }
            if (fallback == f.size()) fallback = k;
          }
          if (pick == f.size()) pick = fallback == f.size() ? 0 : fallback;
          const u16 place = f[pick];
          f[pick] = f.back();
          f.pop_back();
          used |= 1u << (place & 31u);
          out[std::size_t(e)] = place;
          ++c0[tl[std::size_t(e)] & 31u];
          ++c1[place & 31u];
          if (both) {
            used2[g2] |= 1u << bank2(e, place);
            ++c2a[g2 * 32 + bank2(e, tl[std::size_t(e)])];
            ++c2b[g2 * 32 + bank2(e, place)];
          }
        }
        if (any) {
          r.p1_before += wavefronts(c0);
          r.p1_after += wavefronts(c1);
          ++groups;
        }
      }
    }
    for (u32 b : touched) free_places[b].clear();
  }
  r.p1_before /= double(groups);
  r.p1_after /= double(groups);
  if (both) {
    i64 n2 = 0;
    for (i64 g = 0; g < groups2; ++g) {
      int a = 0, b = 0, any = 0;
      for (int k = 0; k < 32; ++k) {
        a = std::max<int>(a, c2a[std::size_t(g) * 32 + k]);
        b = std::max<int>(b, c2b[std::size_t(g) * 32 + k]);
        any += c2a[std::size_t(g) * 32 + k];
      }
      if (!any) continue;
      r.p2_before += a;
      r.p2_after += b;
      ++n2;
    }
    r.p2_before /= double(n2);
    r.p2_after /= double(n2);
  }
  return r;
}

}  // namespace micro
