// The CUDA staged walk's ring restarts, modelled on the host (tests/walk_model.hpp): the GPU test
// of the restart (CudaAggregate.PlanKnobsKeepTheBitsOfUnsplitRows) proves nothing unless its graph
// makes the walk restart, and that is a property of the graph and the knobs alone, checked here
// where there is no GPU. Before session 40 the graph never restarted the walk (0 in every knob
// set), and the mutants of the restart went uncaught on the H200.
#include <gtest/gtest.h>

#include "walk_model.hpp"

namespace pipelink::test {
namespace {

TEST(StagedWalkModel, CountsTheRestartsOfASmallGraph) {
  // One group of C = 256 (keys 0, 4, 155, 158, 159, 164 with a row counted as one edge): rows 0
  // and 2-5 walked, row 1 (150 edges > S = 100) skipped, so one restart with rows left.
  const std::vector<std::int64_t> deg = {3, 150, 2, 0, 4, 1};
  const WalkRestarts w = staged_walk_restarts(deg, 100, 256, 1, 1);
  EXPECT_EQ(w.restarts, 1);
  EXPECT_EQ(w.opened_past, 0);
  // The split row first: the group's first pass opens past it.
  const WalkRestarts first = staged_walk_restarts({150, 2, 3}, 100, 256, 1, 1);
  EXPECT_EQ(first.restarts, 0);
  EXPECT_EQ(first.opened_past, 1);
  // Not split under S = 1024: no restart.
  const WalkRestarts none = staged_walk_restarts(deg, 1024, 256, 1, 1);
  EXPECT_EQ(none.restarts + none.opened_past, 0);
}

TEST(StagedWalkModel, ChunksNoLongerThanTheSegmentNeverRestart) {
  // C <= S (the library's default): a split row is longer than a group, so it ends its group and
  // the walk's `rbeg != kk` restart is a guard there (the kernel's comment).
  const std::vector<std::int64_t> deg = unsplit_rows_test_degrees();
  for (const auto& [S, C] : {std::pair<std::int64_t, std::int64_t>{1024, 64}, {512, 512}, {100, 100}}) {
    const WalkRestarts w = staged_walk_restarts(deg, S, C, 1, 1);
    EXPECT_EQ(w.restarts + w.opened_past, 0) << "S=" << S << " C=" << C;
  }
}

TEST(StagedWalkModel, UnsplitRowsTestGraphRestartsTheRing) {
  // The knob sets of PlanKnobsKeepTheBitsOfUnsplitRows with chunks longer than the segment.
  const std::vector<std::int64_t> deg = unsplit_rows_test_degrees();
  const WalkRestarts a = staged_walk_restarts(deg, 100, 256, 1, 1);   // segment 100, chunk 256
  const WalkRestarts b = staged_walk_restarts(deg, 512, 1024, 8, 1);  // 512, 1024, rows_per_edge 8
  const WalkRestarts c = staged_walk_restarts(deg, 100, 256, 1, 64);  // 100, 256, 1, edges_per_row 64
  EXPECT_GE(a.restarts, 2) << "the S = 100, C = 256 set no longer restarts the walk";
  EXPECT_GE(b.restarts, 1) << "the S = 512, C = 1024 set no longer restarts the walk";
  EXPECT_GE(c.opened_past, 1) << "no group of the edges_per_row 64 set opens past a split row";
  // As counted in session 40 (the Python model then): 4, 1 and 3.
  EXPECT_EQ(a.restarts, 4);
  EXPECT_EQ(b.restarts, 1);
  EXPECT_EQ(c.opened_past, 3);
}

}  // namespace
}  // namespace pipelink::test
