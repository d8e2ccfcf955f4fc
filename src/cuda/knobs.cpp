// The CUDA aggregate's knobs: see knobs.hpp and docs/KNOBS.md.
#include "cuda/knobs.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "pipelink/cuda.hpp"
#include "pipelink/error.hpp"

namespace pipelink::cuda::knobs {

int knob_choice(const char* name, std::initializer_list<const char*> values) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  int i = 0;
  for (const char* c : values) {
    if (std::string_view(v) == c) return i;
    ++i;
  }
  std::string all;
  i = 0;
  for (const char* c : values) {
    all += std::string(i == 0 ? "'" : i + 1 == int(values.size()) ? " or '" : ", '") + c + "'";
    ++i;
  }
  throw Error(std::string("aggregate: ") + name + "='" + v + "' is not " + all);
}
// Two values: false for `first` (the default), true for `second`.
bool knob_is_second(const char* name, const char* first, const char* second) {
  return knob_choice(name, {first, second}) == 1;
}

std::optional<std::int64_t> parse_knob_int(const char* v, std::int64_t lo, std::int64_t hi) {
  // Decimal digits with an optional '-', nothing else: strtoll alone would also take leading
  // white space and a '+', and read past 2^63 as its limit.
  if (!v || !*v) return std::nullopt;
  const char* digits = *v == '-' ? v + 1 : v;
  if (*digits < '0' || *digits > '9') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  if (*end != '\0' || errno == ERANGE || x < lo || x > hi) return std::nullopt;
  return std::int64_t(x);
}

std::int64_t int_knob(const char* name, std::int64_t lo, std::int64_t hi, std::int64_t dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  if (const auto x = parse_knob_int(v, lo, hi)) return *x;
  throw Error(std::string("aggregate: ") + name + "='" + v + "' is not an integer in [" + std::to_string(lo) + ", " +
              std::to_string(hi) + "]");
}

void check_fixed_knobs() {
  (void)int_knob("PIPELINK_AGG_LONG_ROW", 0, kSegment, kLongRow);
  // These two are read as strings where they act (staged_fits: anything but "0" is on), so only
  // the two strings pass here: "-0" or "01" would read as numbers and not as the code reads them.
  for (const char* name : {"PIPELINK_AGG_STAGED", "PIPELINK_AGG_FORCE_WIDE"}) {
    const char* v = std::getenv(name);
    if (v && *v && std::string_view(v) != "0" && std::string_view(v) != "1")
      throw Error(std::string("aggregate: ") + name + "='" + v + "' is not 0 or 1");
  }
}

std::int64_t long_row_threshold() {
  // Capped at the segment length (in finish_plan): longer rows are always split into segments,
  // and csr_rows_kernel must skip them (a row summed by both would be added twice when
  // accumulating).
  static const std::int64_t t = int_knob("PIPELINK_AGG_LONG_ROW", 0, kSegment, kLongRow);
  return t;
}

PlanKnobs plan_knobs() {
  const auto read = int_knob;
  check_fixed_knobs();
  PlanKnobs k;
  k.segment = read("PIPELINK_AGG_SEGMENT", 32, 1 << 20, kSegment);
  k.chunk = read("PIPELINK_AGG_CHUNK", 32, 1 << 20, 0);
  k.rows_per_edge = read("PIPELINK_AGG_ROWS_PER_EDGE", 0, 1 << 20, kRowsPerEdge);
  k.edges_per_row = read("PIPELINK_AGG_EDGES_PER_ROW", 1, 64, kEdgesPerRow);
  k.build_chunks = read("PIPELINK_AGG_BUILD_CHUNKS", 0, 4096, 0);
  k.oneshot_chunks = read("PIPELINK_AGG_ONESHOT_CHUNKS", 0, 4096, 0);
  k.build_memory = std::size_t(read("PIPELINK_AGG_BUILD_MEMORY", 1, std::int64_t(1) << 30, 0)) << 20;
  k.test_range_oom_above = read("PIPELINK_AGG_TEST_RANGE_OOM_ABOVE", 0, std::int64_t(1) << 62, 0);
  k.test_run_oom_above = read("PIPELINK_AGG_TEST_RUN_OOM_ABOVE", 0, std::int64_t(1) << 62, 0);
  k.test_oneshot_dest_ranges = read("PIPELINK_AGG_TEST_ONESHOT_DEST_RANGES", 0, short_build::kOneShotDestRanges,
                                    short_build::kOneShotDestRanges);
  k.test_msd_scratch_fail = read("PIPELINK_AGG_TEST_MSD_SCRATCH_FAIL", 0, 1, 0) == 1;
  k.test_poison_rows = read("PIPELINK_AGG_TEST_POISON_ROWS", 0, 1, 0) == 1;
  k.build_first = knob_choice("PIPELINK_AGG_BUILD_FIRST", {"warp", "fused", "cub"});
  k.row_ptr_scan = !knob_is_second("PIPELINK_AGG_ROW_PTR", "scan", "search");
  k.oneshot_w_late = knob_is_second("PIPELINK_AGG_ONESHOT_W", "ranked", "late");
  k.oneshot_own_pool = !knob_is_second("PIPELINK_AGG_ONESHOT_POOL", "own", "default");
  k.build_own_pool = knob_is_second("PIPELINK_AGG_BUILD_POOL", "default", "own");
  k.oneshot_msd = !knob_is_second("PIPELINK_AGG_ONESHOT_SORT", "msd", "lsd");
  k.build_msd = knob_is_second("PIPELINK_AGG_BUILD_SORT", "lsd", "msd");
  k.msd_batch = int(read("PIPELINK_AGG_MSD_BATCH", 1, 64, 16));
  k.msd_streams = int(read("PIPELINK_AGG_MSD_STREAMS", 1, kMsdStreams, 2));
  k.msd_last = msd::Last(knob_choice("PIPELINK_AGG_MSD_LAST", {"auto", "rows", "level"}));
  k.msd_one_tile_direct = !knob_is_second("PIPELINK_AGG_MSD_ONE_TILE", "direct", "count");
  k.build_hist = BuildHist(knob_choice("PIPELINK_AGG_BUILD_HIST", {"scatter", "own", "cub"}));
  k.plan_tail_split = knob_is_second("PIPELINK_AGG_PLAN_TAIL", "fused", "split");
  k.item_order = !knob_is_second("PIPELINK_AGG_ITEM_ORDER", "weight", "plain");
  return k;
}

// PIPELINK_AGG_STAGED_ISSUE: unset, empty or "1" the LI copies with an unsigned row stride (2, the
// default); "signed" the LI copies with a signed one (1, v12-v21's); "0" the wide-address copies
// (0); "held" 2's copies with the slots' shared addresses held in registers (3, opt-in; tanh
// only, other transforms take 2). Another value is an error naming the knob, raised by
// CudaPlan::run before any work.
int staged_issue_knob() {
  constexpr int issue[] = {2, 1, 0, 3};
  return issue[knob_choice("PIPELINK_AGG_STAGED_ISSUE", {"1", "signed", "0", "held"})];
}

// PIPELINK_AGG_STAGED_WMODE: unset or "const" (the hot forms with the weights' mode compiled in,
// the default) or "runtime" (every form reads it at run time: v27's kernels), read at each launch
// so that `bench --ab` times both in one process; another value is an error (CudaPlan::run).
bool staged_wmode_runtime() { return knob_is_second("PIPELINK_AGG_STAGED_WMODE", "const", "runtime"); }

// PIPELINK_AGG_TANH: unset or "f32" (tanh_f32, the default) or "libm" (the staged kernel with
// CUDA's tanhf, TR 4), read at each run so that `bench --ab` times both in one process; another
// value is an error, raised by CudaPlan::run before any kernel is queued.
bool staged_tanh_libm() { return knob_is_second("PIPELINK_AGG_TANH", "f32", "libm"); }

void check_run_knobs() {
  (void)staged_tanh_libm();
  (void)staged_issue_knob();
  (void)staged_wmode_runtime();
  check_fixed_knobs();
}

// PIPELINK_AGG_W_PERMUTE: unset or "auto" (kWPermTile where E >= kWPermMinEdges, the tables stay
// under kWPermMaxTableBytesPerEdge and the plan has no split rows), "off" (the w[edge id] gather),
// or a tile size T, a multiple of 32 in [64, 49152], used at any E (tests; the A/B of tile sizes).
// Returns 0 for the gather. (Pass 1 holds T floats and 6 bytes per bucket in shared memory: sm_90
// gives a block 227 KB, so a T of 65504, the u16 limit, never fit; session 15's first run of the
// test found the plan on the gather.)
// Why not on graphs with split rows (hubs of more than the segment length): measured on the H200
// (session 15, `bench --ab`, same rounds), the permutation won on products-like (planned 4.48
// against 5.08 ms for the gather) and lost on power-law (4.87 against 4.49): there x's hub rows
// come from L2, DRAM has room for the gather's sectors beside the run, and the permutation's
// ~0.45 ms is added in front. Split rows are the plan's cheap sign of such skew; a graph with hubs
// and little reuse of x would be misjudged (not measured).
int w_permute_tile(std::int64_t E, bool split_rows) {
  const char* v = std::getenv("PIPELINK_AGG_W_PERMUTE");
  const std::string_view k = v ? v : "";
  if (k.empty() || k == "auto") {
    const double t = double((E + kWPermTile - 1) / kWPermTile);
    return E >= kWPermMinEdges && !split_rows && t * t * 6.0 <= kWPermMaxTableBytesPerEdge * double(E) ? kWPermTile : 0;
  }
  if (k == "off") return 0;
  const auto t = parse_knob_int(v, 64, kWPermTile);
  if (!t || *t % 32 != 0)
    throw Error(std::string("aggregate: PIPELINK_AGG_W_PERMUTE='") + v +
                "' is not 'auto', 'off' or a tile size (a multiple of 32 in [64, 49152])");
  return int(*t);
}

Compact w_permute_compact() {
  constexpr Compact as[] = {Compact::lidx, Compact::src32, Compact::keep, Compact::src24};
  return as[knob_choice("PIPELINK_AGG_W_PERMUTE_COMPACT", {"lidx", "1", "0", "24"})];
}

// PIPELINK_AGG_LEAN_ORDER: "spread" (the default: chunks of edges in the spread order of
// core/spread_order.hpp) or "edges" (consecutive warps take consecutive edges).
// Read at each launch, so that one process can A/B them. Spread is the default since session 13
// (H200, lean ms, edges -> spread in the same rounds): power-law dst-sorted 50.32 -> 7.07,
// products-like dst-sorted 8.78 -> 8.37, seed-40M dst-sorted 5.99 -> 5.51. With warp-wide index
// loads (session 14) it no longer costs anything in random order either (products-like 13.73
// edges against 13.70 spread, power-law 8.86 against 8.82, same rounds). The policy cannot pick
// by input order: telling it would need a scan.
bool lean_spread_order() { return !knob_is_second("PIPELINK_AGG_LEAN_ORDER", "spread", "edges"); }

}  // namespace pipelink::cuda::knobs

namespace pipelink::cuda {

// Each knob's effective value, read by the same parser the aggregate uses. Why: the bench's JSON
// listed only the PIPELINK_* variables that were set, and said the defaults were "in the source";
// a helper's audit of the harness against PROTOCOL.md 3.1 (session 49) asked for the values.
std::vector<std::pair<std::string, std::string>> aggregate_knobs() {
  using namespace knobs;
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](const char* name, const std::function<std::string()>& value) {
    const char* v = std::getenv(name);
    try {
      out.emplace_back(name, value() + (v && *v ? " (set)" : " (default)"));
    } catch (const Error& e) {
      out.emplace_back(name, std::string("error: ") + e.what());
    }
  };
  auto plan = [] { return plan_knobs(); };  // checked whole each time: one bad knob reads as its error
  auto num = [](auto x) { return std::to_string(x); };
  auto pick = [](int i, std::initializer_list<const char*> names) { return std::string(names.begin()[i]); };
  add("PIPELINK_AGG_SEGMENT", [&] { return num(plan().segment); });
  // 0 is each of these two's "unset", outside the range they accept: said so, so that the list
  // can be replayed (a review, session 49).
  add("PIPELINK_AGG_CHUNK", [&] {
    const auto c = plan().chunk;
    return c ? num(c) : std::string("unset (from E: chunk_for)");
  });
  add("PIPELINK_AGG_ROWS_PER_EDGE", [&] { return num(plan().rows_per_edge); });
  add("PIPELINK_AGG_EDGES_PER_ROW", [&] { return num(plan().edges_per_row); });
  add("PIPELINK_AGG_LONG_ROW", [&] { return num(int_knob("PIPELINK_AGG_LONG_ROW", 0, kSegment, kLongRow)); });
  add("PIPELINK_AGG_BUILD_CHUNKS", [&] { return num(plan().build_chunks); });
  add("PIPELINK_AGG_ONESHOT_CHUNKS", [&] { return num(plan().oneshot_chunks); });
  add("PIPELINK_AGG_BUILD_MEMORY", [&] {
    const auto b = plan().build_memory;
    return b ? num(b >> 20) : std::string("unset (no cap)");
  });
  add("PIPELINK_AGG_BUILD_FIRST", [&] { return pick(plan().build_first, {"warp", "fused", "cub"}); });
  add("PIPELINK_AGG_ROW_PTR", [&] { return std::string(plan().row_ptr_scan ? "scan" : "search"); });
  add("PIPELINK_AGG_ONESHOT_W", [&] { return std::string(plan().oneshot_w_late ? "late" : "ranked"); });
  add("PIPELINK_AGG_ONESHOT_POOL", [&] { return std::string(plan().oneshot_own_pool ? "own" : "default"); });
  add("PIPELINK_AGG_BUILD_POOL", [&] { return std::string(plan().build_own_pool ? "own" : "default"); });
  add("PIPELINK_AGG_ONESHOT_SORT", [&] { return std::string(plan().oneshot_msd ? "msd" : "lsd"); });
  add("PIPELINK_AGG_BUILD_SORT", [&] { return std::string(plan().build_msd ? "msd" : "lsd"); });
  add("PIPELINK_AGG_MSD_BATCH", [&] { return num(plan().msd_batch); });
  add("PIPELINK_AGG_MSD_STREAMS", [&] { return num(plan().msd_streams); });
  add("PIPELINK_AGG_MSD_LAST", [&] { return pick(int(plan().msd_last), {"auto", "rows", "level"}); });
  add("PIPELINK_AGG_MSD_ONE_TILE", [&] { return std::string(plan().msd_one_tile_direct ? "direct" : "count"); });
  add("PIPELINK_AGG_BUILD_HIST", [&] { return pick(int(plan().build_hist), {"scatter", "own", "cub"}); });
  add("PIPELINK_AGG_PLAN_TAIL", [&] { return std::string(plan().plan_tail_split ? "split" : "fused"); });
  add("PIPELINK_AGG_ITEM_ORDER", [&] { return std::string(plan().item_order ? "weight" : "plain"); });
  add("PIPELINK_AGG_STAGED_ISSUE", [&] {
    return pick(staged_issue_knob(), {"0 (wide addresses)", "signed", "1 (unsigned LI copies)", "held"});
  });
  add("PIPELINK_AGG_STAGED_WMODE", [&] { return std::string(staged_wmode_runtime() ? "runtime" : "const"); });
  add("PIPELINK_AGG_TANH", [&] { return std::string(staged_tanh_libm() ? "libm" : "f32"); });
  // The two read as strings where they act: only "0" and "1" pass check_fixed_knobs.
  for (const char* name : {"PIPELINK_AGG_STAGED", "PIPELINK_AGG_FORCE_WIDE"})
    add(name, [&, name] {
      check_fixed_knobs();
      const char* v = std::getenv(name);
      return std::string(v && *v ? v : std::string_view(name) == "PIPELINK_AGG_STAGED" ? "1" : "0");
    });
  add("PIPELINK_AGG_W_PERMUTE", [&] {
    const char* v = std::getenv("PIPELINK_AGG_W_PERMUTE");
    (void)w_permute_tile(std::int64_t(1) << 24, false);  // refuses a bad value
    return std::string(v && *v ? v : "auto");
  });
  add("PIPELINK_AGG_W_PERMUTE_COMPACT", [&] {
    constexpr const char* names[] = {"0 (keep)", "1 (src32)", "24 (src24)", "lidx"};
    return std::string(names[int(w_permute_compact())]);
  });
  add("PIPELINK_AGG_LEAN_ORDER", [&] { return std::string(lean_spread_order() ? "spread" : "edges"); });
  // Test hooks: 0 / off unless a test sets them; listed so that a bench run under one shows it.
  add("PIPELINK_AGG_TEST_RANGE_OOM_ABOVE", [&] { return num(plan().test_range_oom_above); });
  add("PIPELINK_AGG_TEST_RUN_OOM_ABOVE", [&] { return num(plan().test_run_oom_above); });
  add("PIPELINK_AGG_TEST_ONESHOT_DEST_RANGES", [&] { return num(plan().test_oneshot_dest_ranges); });
  add("PIPELINK_AGG_TEST_MSD_SCRATCH_FAIL", [&] { return num(int(plan().test_msd_scratch_fail)); });
  add("PIPELINK_AGG_TEST_POISON_ROWS", [&] { return num(int(plan().test_poison_rows)); });
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace pipelink::cuda
