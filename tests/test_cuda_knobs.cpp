// The CUDA aggregate's knobs (src/cuda/knobs.{hpp,cpp}): defaults, every accepted value, and a
// clear error naming the knob for each bad one. Host code only, so these run without a GPU (CI);
// the GPU tests (test_cuda_aggregate.cpp) check that a bad knob stops a call before any work.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cuda/knobs.hpp"
#include "pipelink/cuda.hpp"
#include "test_util.hpp"

namespace pipelink::test {
namespace {

using namespace cuda::knobs;

// Every knob these functions read, unset: the defaults whatever the caller's environment holds.
const char* const kKnobs[] = {"PIPELINK_AGG_SEGMENT",
                              "PIPELINK_AGG_CHUNK",
                              "PIPELINK_AGG_ROWS_PER_EDGE",
                              "PIPELINK_AGG_EDGES_PER_ROW",
                              "PIPELINK_AGG_BUILD_CHUNKS",
                              "PIPELINK_AGG_ONESHOT_CHUNKS",
                              "PIPELINK_AGG_BUILD_MEMORY",
                              "PIPELINK_AGG_TEST_RANGE_OOM_ABOVE",
                              "PIPELINK_AGG_TEST_RUN_OOM_ABOVE",
                              "PIPELINK_AGG_TEST_ONESHOT_DEST_RANGES",
                              "PIPELINK_AGG_TEST_MSD_SCRATCH_FAIL",
                              "PIPELINK_AGG_TEST_POISON_ROWS",
                              "PIPELINK_AGG_BUILD_FIRST",
                              "PIPELINK_AGG_ROW_PTR",
                              "PIPELINK_AGG_ONESHOT_W",
                              "PIPELINK_AGG_ONESHOT_POOL",
                              "PIPELINK_AGG_BUILD_POOL",
                              "PIPELINK_AGG_ONESHOT_SORT",
                              "PIPELINK_AGG_BUILD_SORT",
                              "PIPELINK_AGG_MSD_BATCH",
                              "PIPELINK_AGG_MSD_STREAMS",
                              "PIPELINK_AGG_MSD_LAST",
                              "PIPELINK_AGG_MSD_ONE_TILE",
                              "PIPELINK_AGG_BUILD_HIST",
                              "PIPELINK_AGG_PLAN_TAIL",
                              "PIPELINK_AGG_ITEM_ORDER",
                              "PIPELINK_AGG_LONG_ROW",
                              "PIPELINK_AGG_STAGED",
                              "PIPELINK_AGG_FORCE_WIDE",
                              "PIPELINK_AGG_STAGED_ISSUE",
                              "PIPELINK_AGG_STAGED_WMODE",
                              "PIPELINK_AGG_TANH",
                              "PIPELINK_AGG_W_PERMUTE",
                              "PIPELINK_AGG_W_PERMUTE_COMPACT",
                              "PIPELINK_AGG_LEAN_ORDER"};

class CudaKnobs : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* k : kKnobs)
      clear_.push_back(
          std::make_unique<ScopedEnv>(std::initializer_list<std::pair<const char*, const char*>>{{k, nullptr}}));
  }
  void TearDown() override {
    while (!clear_.empty()) clear_.pop_back();  // the caller's values back, last set first
  }

 private:
  std::vector<std::unique_ptr<ScopedEnv>> clear_;
};

// f() must throw an Error whose message names `knob` and quotes `value`.
template <class F>
void expect_knob_error(const char* knob, const char* value, F&& f) {
  SCOPED_TRACE(std::string(knob) + "=" + value);
  const ScopedEnv env({{knob, value}});
  try {
    f();
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(knob), std::string::npos) << m;
    EXPECT_NE(m.find(std::string("'") + value + "'"), std::string::npos) << m;
  }
}

TEST_F(CudaKnobs, AggregateKnobsListsEveryKnobWithItsValue) {
  // The bench's pre-registration (cuda::aggregate_knobs, session 49): every knob above, no other,
  // each with its effective value and whether the environment set it.
  std::vector<std::string> want(std::begin(kKnobs), std::end(kKnobs));
  std::sort(want.begin(), want.end());
  auto value_of = [](const std::string& name) {
    for (const auto& [k, v] : cuda::aggregate_knobs())
      if (k == name) return v;
    return std::string("(missing)");
  };
  {
    std::vector<std::string> got;
    for (const auto& [k, v] : cuda::aggregate_knobs()) {
      got.push_back(k);
      EXPECT_TRUE(v.ends_with(" (default)")) << k << ": " << v;
    }
    EXPECT_EQ(got, want);
  }
  EXPECT_EQ(value_of("PIPELINK_AGG_SEGMENT"), std::to_string(kSegment) + " (default)");
  EXPECT_EQ(value_of("PIPELINK_AGG_ONESHOT_SORT"), "msd (default)");
  EXPECT_EQ(value_of("PIPELINK_AGG_W_PERMUTE_COMPACT"), "lidx (default)");
  EXPECT_EQ(value_of("PIPELINK_AGG_STAGED_ISSUE"), "1 (unsigned LI copies) (default)");
  EXPECT_EQ(value_of("PIPELINK_AGG_STAGED"), "1 (default)");
  EXPECT_EQ(value_of("PIPELINK_AGG_FORCE_WIDE"), "0 (default)");
  EXPECT_EQ(value_of("PIPELINK_AGG_BUILD_MEMORY"), "unset (no cap) (default)");
  {
    const ScopedEnv env({{"PIPELINK_AGG_MSD_LAST", "level"}, {"PIPELINK_AGG_BUILD_MEMORY", "64"},
                         {"PIPELINK_AGG_STAGED_ISSUE", "signed"}});
    EXPECT_EQ(value_of("PIPELINK_AGG_MSD_LAST"), "level (set)");
    EXPECT_EQ(value_of("PIPELINK_AGG_BUILD_MEMORY"), "64 (set)");
    EXPECT_EQ(value_of("PIPELINK_AGG_STAGED_ISSUE"), "signed (set)");
  }
  {
    const ScopedEnv env({{"PIPELINK_AGG_TANH", "approx"}});
    EXPECT_TRUE(value_of("PIPELINK_AGG_TANH").starts_with("error: ")) << value_of("PIPELINK_AGG_TANH");
    EXPECT_NE(value_of("PIPELINK_AGG_TANH").find("approx"), std::string::npos);
  }
}

TEST_F(CudaKnobs, DefaultsWhenUnsetOrEmpty) {
  for (bool empty : {false, true}) {
    SCOPED_TRACE(empty ? "every knob set but empty" : "every knob unset");
    std::vector<std::unique_ptr<ScopedEnv>> set;
    if (empty)
      for (const char* k : kKnobs)
        set.push_back(std::make_unique<ScopedEnv>(std::initializer_list<std::pair<const char*, const char*>>{{k, ""}}));
    const PlanKnobs k = plan_knobs();
    EXPECT_EQ(k.segment, kSegment);
    EXPECT_EQ(k.chunk, 0);
    EXPECT_EQ(k.rows_per_edge, kRowsPerEdge);
    EXPECT_EQ(k.edges_per_row, kEdgesPerRow);
    EXPECT_TRUE(k.item_order);
    EXPECT_EQ(k.build_chunks, 0);
    EXPECT_EQ(k.oneshot_chunks, 0);
    EXPECT_EQ(k.build_memory, 0u);
    EXPECT_EQ(k.test_range_oom_above, 0);
    EXPECT_EQ(k.test_oneshot_dest_ranges, cuda::short_build::kOneShotDestRanges);
    EXPECT_FALSE(k.test_msd_scratch_fail);
    EXPECT_FALSE(k.test_poison_rows);
    EXPECT_EQ(k.build_first, 0);
    EXPECT_TRUE(k.row_ptr_scan);
    EXPECT_FALSE(k.oneshot_w_late);
    EXPECT_TRUE(k.oneshot_own_pool);
    EXPECT_FALSE(k.build_own_pool);
    EXPECT_TRUE(k.oneshot_msd);
    EXPECT_FALSE(k.build_msd);
    EXPECT_EQ(k.msd_batch, 16);
    EXPECT_EQ(k.msd_streams, 2);
    EXPECT_EQ(k.msd_last, cuda::msd::Last::automatic);
    EXPECT_TRUE(k.msd_one_tile_direct);
    EXPECT_EQ(k.build_hist, BuildHist::scatter);
    EXPECT_FALSE(k.plan_tail_split);
    EXPECT_NO_THROW(check_fixed_knobs());
    EXPECT_EQ(staged_issue_knob(), 2);
    EXPECT_FALSE(staged_wmode_runtime());
    EXPECT_FALSE(staged_tanh_libm());
    EXPECT_EQ(w_permute_compact(), Compact::lidx);
    EXPECT_TRUE(lean_spread_order());
  }
}

TEST_F(CudaKnobs, EveryValueTheCodeAccepts) {
  auto with = [](const char* knob, const char* value) {
    return std::make_unique<ScopedEnv>(std::initializer_list<std::pair<const char*, const char*>>{{knob, value}});
  };
  {
    auto a = with("PIPELINK_AGG_SEGMENT", "32"), b = with("PIPELINK_AGG_CHUNK", "1048576"),
         c = with("PIPELINK_AGG_ROWS_PER_EDGE", "0"), d = with("PIPELINK_AGG_EDGES_PER_ROW", "64"),
         e = with("PIPELINK_AGG_BUILD_CHUNKS", "4096"), f = with("PIPELINK_AGG_ONESHOT_CHUNKS", "3"),
         g = with("PIPELINK_AGG_BUILD_MEMORY", "256"), h = with("PIPELINK_AGG_MSD_BATCH", "64"),
         i = with("PIPELINK_AGG_MSD_STREAMS", "4"), j = with("PIPELINK_AGG_TEST_ONESHOT_DEST_RANGES", "0");
    const PlanKnobs k = plan_knobs();
    EXPECT_EQ(k.segment, 32);
    EXPECT_EQ(k.chunk, 1 << 20);
    EXPECT_EQ(k.rows_per_edge, 0);
    EXPECT_EQ(k.edges_per_row, 64);
    EXPECT_EQ(k.build_chunks, 4096);
    EXPECT_EQ(k.oneshot_chunks, 3);
    EXPECT_EQ(k.build_memory, std::size_t(256) << 20);
    EXPECT_EQ(k.msd_batch, 64);
    EXPECT_EQ(k.msd_streams, kMsdStreams);
    EXPECT_EQ(k.test_oneshot_dest_ranges, 0);
  }
  // The choice knobs: each value gives its own setting.
  struct Choice {
    const char* knob;
    const char* value;
    bool (*holds)(const PlanKnobs&);
  };
  const Choice choices[] = {
      {"PIPELINK_AGG_BUILD_FIRST", "fused", [](const PlanKnobs& k) { return k.build_first == 1; }},
      {"PIPELINK_AGG_BUILD_FIRST", "cub", [](const PlanKnobs& k) { return k.build_first == 2; }},
      {"PIPELINK_AGG_ROW_PTR", "search", [](const PlanKnobs& k) { return !k.row_ptr_scan; }},
      {"PIPELINK_AGG_ONESHOT_W", "late", [](const PlanKnobs& k) { return k.oneshot_w_late; }},
      {"PIPELINK_AGG_ONESHOT_POOL", "default", [](const PlanKnobs& k) { return !k.oneshot_own_pool; }},
      {"PIPELINK_AGG_BUILD_POOL", "own", [](const PlanKnobs& k) { return k.build_own_pool; }},
      {"PIPELINK_AGG_ONESHOT_SORT", "lsd", [](const PlanKnobs& k) { return !k.oneshot_msd; }},
      {"PIPELINK_AGG_BUILD_SORT", "msd", [](const PlanKnobs& k) { return k.build_msd; }},
      {"PIPELINK_AGG_MSD_LAST", "rows", [](const PlanKnobs& k) { return k.msd_last == cuda::msd::Last::rows; }},
      {"PIPELINK_AGG_MSD_LAST", "level", [](const PlanKnobs& k) { return k.msd_last == cuda::msd::Last::level; }},
      {"PIPELINK_AGG_MSD_ONE_TILE", "count", [](const PlanKnobs& k) { return !k.msd_one_tile_direct; }},
      {"PIPELINK_AGG_BUILD_HIST", "own", [](const PlanKnobs& k) { return k.build_hist == BuildHist::own; }},
      {"PIPELINK_AGG_BUILD_HIST", "cub", [](const PlanKnobs& k) { return k.build_hist == BuildHist::cub; }},
      {"PIPELINK_AGG_PLAN_TAIL", "split", [](const PlanKnobs& k) { return k.plan_tail_split; }},
      {"PIPELINK_AGG_ITEM_ORDER", "plain", [](const PlanKnobs& k) { return !k.item_order; }},
      {"PIPELINK_AGG_TEST_MSD_SCRATCH_FAIL", "1", [](const PlanKnobs& k) { return k.test_msd_scratch_fail; }},
      {"PIPELINK_AGG_TEST_POISON_ROWS", "1", [](const PlanKnobs& k) { return k.test_poison_rows; }},
  };
  for (const Choice& c : choices) {
    SCOPED_TRACE(std::string(c.knob) + "=" + c.value);
    auto set = with(c.knob, c.value);
    EXPECT_TRUE(c.holds(plan_knobs()));
  }
  // The run's knobs.
  const std::pair<const char*, int> issue[] = {{"1", 2}, {"signed", 1}, {"0", 0}, {"held", 3}};
  for (auto [v, want] : issue) {
    auto set = with("PIPELINK_AGG_STAGED_ISSUE", v);
    EXPECT_EQ(staged_issue_knob(), want) << v;
  }
  {
    auto a = with("PIPELINK_AGG_STAGED_WMODE", "runtime"), b = with("PIPELINK_AGG_TANH", "libm"),
         c = with("PIPELINK_AGG_LEAN_ORDER", "edges");
    EXPECT_TRUE(staged_wmode_runtime());
    EXPECT_TRUE(staged_tanh_libm());
    EXPECT_FALSE(lean_spread_order());
  }
  const std::pair<const char*, Compact> compact[] = {
      {"lidx", Compact::lidx}, {"1", Compact::src32}, {"0", Compact::keep}, {"24", Compact::src24}};
  for (auto [v, want] : compact) {
    auto set = with("PIPELINK_AGG_W_PERMUTE_COMPACT", v);
    EXPECT_EQ(w_permute_compact(), want) << v;
  }
  for (const char* v : {"0", "64", "1024"}) {
    auto set = with("PIPELINK_AGG_LONG_ROW", v);
    EXPECT_NO_THROW(check_fixed_knobs()) << v;
  }
  for (const char* knob : {"PIPELINK_AGG_STAGED", "PIPELINK_AGG_FORCE_WIDE"})
    for (const char* v : {"0", "1"}) {
      auto set = with(knob, v);
      EXPECT_NO_THROW(check_fixed_knobs()) << knob << "=" << v;
    }
}

TEST_F(CudaKnobs, BadValuesAreErrorsNamingTheKnob) {
  // Each plan knob out of its range or set to a word it does not know, once.
  const std::pair<const char*, const char*> plan_bad[] = {{"PIPELINK_AGG_SEGMENT", "16"},
                                                          {"PIPELINK_AGG_SEGMENT", "2097152"},
                                                          {"PIPELINK_AGG_CHUNK", "12x"},
                                                          {"PIPELINK_AGG_ROWS_PER_EDGE", "-1"},
                                                          {"PIPELINK_AGG_EDGES_PER_ROW", "0"},
                                                          {"PIPELINK_AGG_EDGES_PER_ROW", "65"},
                                                          {"PIPELINK_AGG_BUILD_CHUNKS", "5000"},
                                                          {"PIPELINK_AGG_ONESHOT_CHUNKS", "-1"},
                                                          {"PIPELINK_AGG_ONESHOT_CHUNKS", "4097"},
                                                          {"PIPELINK_AGG_BUILD_MEMORY", "0"},
                                                          {"PIPELINK_AGG_BUILD_MEMORY", "1G"},
                                                          {"PIPELINK_AGG_TEST_RANGE_OOM_ABOVE", "-5"},
                                                          {"PIPELINK_AGG_TEST_RUN_OOM_ABOVE", "-5"},
                                                          {"PIPELINK_AGG_TEST_ONESHOT_DEST_RANGES", "17"},
                                                          {"PIPELINK_AGG_TEST_MSD_SCRATCH_FAIL", "2"},
                                                          {"PIPELINK_AGG_TEST_POISON_ROWS", "yes"},
                                                          {"PIPELINK_AGG_BUILD_FIRST", "fast"},
                                                          {"PIPELINK_AGG_ROW_PTR", "fast"},
                                                          {"PIPELINK_AGG_ONESHOT_W", "early"},
                                                          {"PIPELINK_AGG_ONESHOT_POOL", "mine"},
                                                          {"PIPELINK_AGG_BUILD_POOL", "scratch"},
                                                          {"PIPELINK_AGG_ONESHOT_SORT", "radix"},
                                                          {"PIPELINK_AGG_BUILD_SORT", "radix"},
                                                          {"PIPELINK_AGG_MSD_BATCH", "0"},
                                                          {"PIPELINK_AGG_MSD_BATCH", "65"},
                                                          {"PIPELINK_AGG_MSD_STREAMS", "0"},
                                                          {"PIPELINK_AGG_MSD_STREAMS", "5"},
                                                          {"PIPELINK_AGG_MSD_LAST", "row"},
                                                          {"PIPELINK_AGG_MSD_ONE_TILE", "fast"},
                                                          {"PIPELINK_AGG_BUILD_HIST", "both"},
                                                          {"PIPELINK_AGG_PLAN_TAIL", "one"},
                                                          {"PIPELINK_AGG_ITEM_ORDER", "heavy"},
                                                          {"PIPELINK_AGG_LONG_ROW", "x"},
                                                          {"PIPELINK_AGG_LONG_ROW", "64x"},
                                                          {"PIPELINK_AGG_LONG_ROW", "-1"},
                                                          {"PIPELINK_AGG_LONG_ROW", "1025"},
                                                          {"PIPELINK_AGG_LONG_ROW", " 64"},
                                                          {"PIPELINK_AGG_LONG_ROW", "+64"},
                                                          {"PIPELINK_AGG_SEGMENT", " 512"},
                                                          {"PIPELINK_AGG_SEGMENT", "+512"},
                                                          {"PIPELINK_AGG_CHUNK", "-"},
                                                          {"PIPELINK_AGG_TEST_RANGE_OOM_ABOVE", "99999999999999999999"},
                                                          {"PIPELINK_AGG_STAGED", "off"},
                                                          {"PIPELINK_AGG_STAGED", "2"},
                                                          {"PIPELINK_AGG_FORCE_WIDE", "yes"}};
  for (auto [knob, value] : plan_bad) expect_knob_error(knob, value, [] { (void)plan_knobs(); });
  // The process-wide ones through check_fixed_knobs too (each planned run calls it).
  for (auto [knob, value] : {std::pair{"PIPELINK_AGG_LONG_ROW", "2000"}, std::pair{"PIPELINK_AGG_STAGED", "true"},
                             std::pair{"PIPELINK_AGG_FORCE_WIDE", "2"}})
    expect_knob_error(knob, value, [] { check_fixed_knobs(); });
  // The run's knobs.
  expect_knob_error("PIPELINK_AGG_STAGED_ISSUE", "2", [] { (void)staged_issue_knob(); });
  expect_knob_error("PIPELINK_AGG_STAGED_ISSUE", "Held", [] { (void)staged_issue_knob(); });
  expect_knob_error("PIPELINK_AGG_STAGED_WMODE", "bogus", [] { (void)staged_wmode_runtime(); });
  expect_knob_error("PIPELINK_AGG_TANH", "fast", [] { (void)staged_tanh_libm(); });
  expect_knob_error("PIPELINK_AGG_W_PERMUTE_COMPACT", "2", [] { (void)w_permute_compact(); });
  expect_knob_error("PIPELINK_AGG_LEAN_ORDER", "random", [] { (void)lean_spread_order(); });
  for (const char* t : {"32", "100", "49184", "4k", "-64", " 4096", "+4096"})
    expect_knob_error("PIPELINK_AGG_W_PERMUTE", t, [] { (void)w_permute_tile(std::int64_t(1) << 24, false); });
}

TEST_F(CudaKnobs, IntegersAreDecimalDigitsInRange) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max(),
                         kMin = std::numeric_limits<std::int64_t>::min();
  const std::pair<const char*, std::int64_t> good[] = {{"0", 0},
                                                       {"-0", 0},
                                                       {"7", 7},
                                                       {"-10", -10},
                                                       {"0010", 10},
                                                       {"9223372036854775807", kMax},
                                                       {"-9223372036854775808", kMin}};
  for (auto [v, want] : good) {
    const auto x = parse_knob_int(v, kMin, kMax);
    ASSERT_TRUE(x.has_value()) << v;
    EXPECT_EQ(*x, want) << v;
  }
  for (const char* v : {"", " 1", "1 ", "+1", "-", "--1", "1e3", "0x10", "1.0", "9223372036854775808",
                        "-9223372036854775809", "99999999999999999999"})
    EXPECT_FALSE(parse_knob_int(v, kMin, kMax).has_value()) << "'" << v << "'";
  EXPECT_FALSE(parse_knob_int(nullptr, kMin, kMax).has_value());
  EXPECT_TRUE(parse_knob_int("5", 5, 5).has_value()) << "the range's ends are in it";
  EXPECT_FALSE(parse_knob_int("4", 5, 6).has_value());
  EXPECT_FALSE(parse_knob_int("7", 5, 6).has_value());
}

TEST_F(CudaKnobs, ChoiceErrorsListEveryValue) {
  const ScopedEnv env({{"PIPELINK_AGG_MSD_LAST", "row"}});
  try {
    (void)knob_choice("PIPELINK_AGG_MSD_LAST", {"auto", "rows", "level"});
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not 'auto', 'rows' or 'level'"), std::string::npos) << e.what();
  }
}

TEST_F(CudaKnobs, WeightPermutationTileRule) {
  // auto: the tile where E >= 2^22, the plan has no split rows and the run tables stay small.
  EXPECT_EQ(w_permute_tile(kWPermMinEdges - 1, false), 0);
  EXPECT_EQ(w_permute_tile(kWPermMinEdges, false), kWPermTile);
  EXPECT_EQ(w_permute_tile(61859140, false), kWPermTile);  // products-like
  EXPECT_EQ(w_permute_tile(61859140, true), 0);            // split rows: the gather
  // The tables' cap: (E / T)^2 * 6 bytes at most 0.5 an edge, so E up to ~T^2 / 12 (~2e8).
  EXPECT_EQ(w_permute_tile(std::int64_t(1) << 30, false), 0);
  {
    const ScopedEnv off({{"PIPELINK_AGG_W_PERMUTE", "off"}});
    EXPECT_EQ(w_permute_tile(61859140, false), 0);
  }
  {
    const ScopedEnv forced({{"PIPELINK_AGG_W_PERMUTE", "4096"}});
    EXPECT_EQ(w_permute_tile(1000, true), 4096) << "a forced tile holds at any E, split rows or not";
  }
  for (const char* t : {"64", "49152"}) {
    const ScopedEnv forced({{"PIPELINK_AGG_W_PERMUTE", t}});
    EXPECT_EQ(w_permute_tile(1000, false), std::stoi(t));
  }
}

}  // namespace
}  // namespace pipelink::test
