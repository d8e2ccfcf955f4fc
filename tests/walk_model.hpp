// The CUDA staged walk's work split and ring restarts, on the host (no GPU needed): which graphs
// make staged_rows_kernel (src/cuda/aggregate_walk.cu) restart its ring of stages. A test of the
// restart needs a graph where that happens, and session 40 found that
// CudaAggregate.PlanKnobsKeepTheBitsOfUnsplitRows's graph never did; test_walk_restarts.cpp checks
// the graph here, where CI runs it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace pipelink::test {

// The degrees of CudaAggregate.PlanKnobsKeepTheBitsOfUnsplitRows's graph (3000 rows).
inline std::vector<std::int64_t> unsplit_rows_test_degrees() {
  const std::int64_t N = 3000;
  std::vector<std::int64_t> deg(N, 0);
  for (std::int64_t r = 0; r < 2000; ++r) deg[r] = (r * 7) % 301;
  for (std::int64_t r = 2600; r < N; ++r) deg[r] = r % 5;  // rows 2000-2599: a run of empty rows
  deg[17] += 5000;                                         // split rows under every segment length
  deg[1999] += 2049;
  // Split under S = 100 (the last under S = 512), with short rows after them in their groups
  // (the rows above alone never have one: their split rows come in runs that end in a row
  // longer than the chunk).
  for (const auto& [r, d] :
       {std::pair{2610, 120}, {2660, 140}, {2710, 105}, {2760, 130}, {2810, 115}, {2860, 150}, {2900, 600}})
    deg[r] = d;
  return deg;
}

struct WalkRestarts {
  std::int64_t restarts = 0;     // passes of the ring begun after a split row with rows left in the group
  std::int64_t opened_past = 0;  // groups whose first pass begins past a split row
};

// The work split of group_rows_part (row r in group g when row_ptr[r] + r * m / k lies in
// [g*C, (g+1)*C); k = 0: edges alone) and the walk's settle() (past empty rows and rows of more
// than S edges, which other warps sum in segments), for rows of `deg` edges.
inline WalkRestarts staged_walk_restarts(const std::vector<std::int64_t>& deg, std::int64_t S, std::int64_t C,
                                         std::int64_t k, std::int64_t m) {
  const std::int64_t N = std::int64_t(deg.size());
  std::vector<std::int64_t> key(N);
  std::int64_t E = 0;
  for (std::int64_t r = 0; r < N; ++r) {
    key[r] = E + (k > 0 ? r * m / k : 0);
    E += deg[r];
  }
  const std::int64_t groups = (E + (k > 0 ? N * m / k : 0)) / C + 1;
  std::vector<std::int64_t> first(groups + 1);
  for (std::int64_t g = 0; g <= groups; ++g)
    first[g] = g == groups ? N : std::lower_bound(key.begin(), key.end(), g * C) - key.begin();
  WalkRestarts out;
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::int64_t r0 = first[g], r1 = first[g + 1];
    bool skipped = false;  // a split row passed since the last row walked
    auto settle = [&](std::int64_t r) {
      for (; r < r1 && (deg[r] == 0 || deg[r] > S); ++r) skipped |= deg[r] > S;
      return r;
    };
    std::int64_t r = settle(r0);
    if (r < r1 && skipped) ++out.opened_past;
    while (r < r1) {
      skipped = false;
      r = settle(r + 1);
      if (r < r1 && skipped) ++out.restarts;
    }
  }
  return out;
}

}  // namespace pipelink::test
