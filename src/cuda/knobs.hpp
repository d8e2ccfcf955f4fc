// The CUDA aggregate's knobs (PIPELINK_AGG_* environment variables): their defaults, ranges and
// parsing. Host-only C++ (no CUDA header), so that the parsing and its errors are tested where
// there is no GPU (tests/test_cuda_knobs.cpp, in CI) and src/cuda/aggregate.cu compiles less.
// Every knob, its default and the measurement behind it: docs/KNOBS.md. Why each default is what
// it is: the comments here and in knobs.cpp, and docs/perf-notes.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>

#include "cuda/msd_levels.hpp"
#include "cuda/short_build.hpp"

namespace pipelink::cuda::knobs {

// A knob of a few values, read where it is called: unset, empty or values[0] (its default) gives
// 0, values[i] gives i, any other value is an error naming the knob and every value.
int knob_choice(const char* name, std::initializer_list<const char*> values);
// Two values: false for `first` (the default), true for `second`.
bool knob_is_second(const char* name, const char* first, const char* second);
// An integer knob in [lo, hi], read where it is called: unset or empty gives dflt; decimal digits
// with an optional '-' in range give their value; anything else (white space, '+', a unit, past
// 2^63) is an error naming the knob and the range. parse_knob_int is its test of one value.
std::int64_t int_knob(const char* name, std::int64_t lo, std::int64_t hi, std::int64_t dflt);
std::optional<std::int64_t> parse_knob_int(const char* v, std::int64_t lo, std::int64_t hi);

// Rows longer than kSegment edges (power-law hubs reach ~198k) are split into segments of
// kSegment edges, each a warp's work item; their double partial sums are combined per row in
// segment order (deterministic). v2 without splitting: power-law planned 32.9 ms, lean 13.3 ms.
// 1024 rather than v8's 2048, with kRowsPerEdge: see plan_knobs for the measured A/B.
// PIPELINK_AGG_SEGMENT overrides it per plan build (see plan_knobs).
inline constexpr std::int64_t kSegment = 1024;
// Groups of the staged walk count every kRowsPerEdge rows as kEdgesPerRow edges, so that a group
// of many short rows (and their output writes) is not as long as one of few long rows. A row is
// counted as one edge since v40 (k = 4 before, a quarter of an edge): ncu on power-law's planned
// run (H200, 9ad1bdc) read 40% achieved occupancy against products-like's 48% and issue slots 76%
// busy against 89%, and `bench --ab` in the same rounds put k = 1 at 0.952x k = 4's time there
// (k = 2 0.970x, k = 8 1.042x; one-shot 0.966x), products-like 1.001x (no row that short).
inline constexpr std::int64_t kRowsPerEdge = 1, kEdgesPerRow = 1;
// Rows of more than kLongRow edges (and at most kSegment) are a warp's work item each, as in v3;
// the lane-group walk of csr_rows_kernel keeps only U = 4 rows in flight per 16 lanes and took
// power-law from 8.97 to 12.2 ms when it walked them too (most of power-law's edges lie in rows
// of 200-2000 edges); products-like has no row that long.
// PIPELINK_AGG_LONG_ROW overrides it (0: every non-empty row is a warp's item, as in v3/v4).
inline constexpr std::int64_t kLongRow = 64;

// The knobs read once a process (PIPELINK_AGG_LONG_ROW here, PIPELINK_AGG_STAGED in staged_fits)
// and PIPELINK_AGG_FORCE_WIDE (read at each build) are checked at every build, one-shot call and
// planned run, before any work, like every other knob: a bad value is an error that names it,
// not a silent default (a non-number read as 0 here before session 41, and any value but "0"
// left the staged walk on).
void check_fixed_knobs();
// PIPELINK_AGG_LONG_ROW, or kLongRow; read once a process (capped at the segment length by the
// build).
std::int64_t long_row_threshold();

// Work-split knobs, read at each plan build (so that one process can build plans under several,
// as the tests do), for A/B of the launch's balance. Why the defaults (S = 1024; k = 1 since v40,
// see kRowsPerEdge; the history below is of k = 4):
// bench/micro/balance_model.py put power-law's makespan at 1.135-1.197x the ideal against
// products-like's 1.049 with v8's split (S = 2048, k = 0), and at ~1.06 with S = 1024, k = 4.
// Measured on the H200 (1f8f9bd, `bench --ab`, interleaved in one process, planned, random order):
// power-law 5.71 ms (v8 split) -> 5.53 (S = 1024) -> 5.01 (S = 1024, k = 4) -> 4.98 (plus C = 512,
// no measured difference, so the chunk keeps chunk_for(E)); products-like 5.14 under all four.
//   PIPELINK_AGG_SEGMENT: split rows longer than this, in segments of this many edges [32, 2^20]
//   PIPELINK_AGG_CHUNK: edges per group [32, 2^20] (default: chunk_for(E))
//   PIPELINK_AGG_ROWS_PER_EDGE: count every k rows as m edges when forming groups [0, 2^20]
//     (default 1 since v40; 4 before; 0: edges alone)
//   PIPELINK_AGG_EDGES_PER_ROW: that m [1, 64] (default 1; a row then weighs m / k edges,
//     and with k = 0 m is unused)
//   PIPELINK_AGG_ITEM_ORDER: 'weight' (the default from v41) or 'plain' (v1-v40's order): see order_items
//   PIPELINK_AGG_BUILD_CHUNKS: sort the narrow plan in this many destination ranges [0, 4096]
//     (0: one sort, and ranges only when its buffers do not fit; see sort_narrow_chunked)
//   PIPELINK_AGG_ONESHOT_CHUNKS: a one-shot call in this many edge ranges, each built and run
//     on its own, the later ones accumulating [0, 4096] (0: one plan; where its sort does not
//     fit, destination ranges beside its pairs (the same plan and bits) while at most 16 do,
//     else edge ranges, as many as the free memory suggests and split further where a range's
//     build runs out of it, so their bits follow the device's state (a warning says so); 1: one
//     plan; K >= 2: K ranges, the same bits every call; see aggregate_one_shot)
//   PIPELINK_AGG_BUILD_MEMORY: the transient device memory, in MiB, a build's sort may take
//     beside the plan it keeps [1, 2^30] (unset: what the device has free). Past it a build
//     sorts destination ranges and a one-shot call runs edge ranges (never holding the whole
//     list's pairs; their count follows the cap, so an info line, not a warning).
//     Narrow plans only (E < 2^31 - 4096, N < 2^31 - 1); PIPELINK_AGG_BUILD_CHUNKS >= 1 overrides
//     it; a destination range is whole rows, so a hub row can take more; with
//     PIPELINK_AGG_ONESHOT_CHUNKS=1 a one-shot call sorts destination ranges instead.
//   PIPELINK_AGG_TEST_RANGE_OOM_ABOVE (tests only; read in aggregate_one_shot): edge ranges of
//     more edges than this fail as if out of memory, to make the unforced splits happen (0: off).
//   PIPELINK_AGG_TEST_RUN_OOM_ABOVE (tests only; read in aggregate_one_shot): a one-shot plan of
//     more edges than this fails its run as if its partial sums found no room (0: off).
//   PIPELINK_AGG_TEST_ONESHOT_DEST_RANGES (tests only; read in sort_narrow): the most
//     destination ranges a one-shot call short of memory sorts before edge ranges take over
//     [0, 16] (default 16, short_build::kOneShotDestRanges; 0: edge ranges at once), so that a
//     test reaches the hand-over with its pairs held.
//   PIPELINK_AGG_TEST_MSD_SCRATCH_FAIL=1 (tests only): the one-shot's MSD sort hands back to the
//     one sort after its first pass, as where its bucket scratch does not fit (sort_narrow_msd).
//   PIPELINK_AGG_BUILD_FIRST: 'warp' (the default from v25: the one sort's first radix pass reads
//     src and dst itself, see first_digit_scatter_kernel, with each warp's bases from its counts
//     kernel, first_digit_warp_counts_kernel; first pass 0.843 against 0.940 ms, H200 session 21),
//     'fused' (the same pass counting in its own first phase; the default v23-v24) or 'cub'
//     (v1-v22's init kernel, then CUB over every bit). Narrow plans' one sort only; ranges and
//     wide plans sort as before.
//   PIPELINK_AGG_ROW_PTR: 'scan' (the default from v26: row starts from one pass over the sorted
//     keys, then a suffix minimum; see row_starts_kernel) or 'search' (a binary search a row).
//     The narrow one sort only; ranges and wide plans search. (v39 measured a third form, 'runs':
//     each row's offset in one pass with the empty rows' gaps filled there, no fill or suffix
//     minimum; plan build 1.98 ms either way, 1.000x in the same rounds, H200, products-like:
//     removed.)
//   PIPELINK_AGG_ONESHOT_W: 'ranked' (the default: a one-shot build's first pass loads w with the
//     indices and ranks it with them) or 'late' (it ranks the edge id and reads w at its
//     write-out; see first_digit_scatter_kernel, FW = 2; 1.028x the time, v26). Warp form only.
// Side streams the MSD sort's batches may go round (PIPELINK_AGG_MSD_STREAMS).
inline constexpr int kMsdStreams = 4;
// Where a plan build's CUB passes get their digit counts (PIPELINK_AGG_BUILD_HIST, PlanKnobs).
enum class BuildHist { scatter, own, cub };
struct PlanKnobs {
  std::int64_t segment = kSegment, chunk = 0, rows_per_edge = kRowsPerEdge, edges_per_row = kEdgesPerRow;
  // PIPELINK_AGG_ITEM_ORDER: 'weight' (the default from v41: a plan with split or long rows
  // launches the staged walk's items heaviest first, see order_items) or 'plain' (segments, then
  // groups in row order, as in v1-v40).
  bool item_order = true;
  std::int64_t build_chunks = 0;          // 0: one sort, or destination-range chunks when that does not fit
  std::int64_t oneshot_chunks = 0;        // 0: one plan (destination or edge ranges when its sort does not fit)
  std::size_t build_memory = 0;           // bytes; 0: no cap
  std::int64_t test_range_oom_above = 0;  // PIPELINK_AGG_TEST_RANGE_OOM_ABOVE (0: off)
  std::int64_t test_run_oom_above = 0;    // PIPELINK_AGG_TEST_RUN_OOM_ABOVE (0: off)
  std::int64_t test_oneshot_dest_ranges = short_build::kOneShotDestRanges;  // PIPELINK_AGG_TEST_ONESHOT_DEST_RANGES
  // PIPELINK_AGG_TEST_MSD_SCRATCH_FAIL=1 (tests only): the MSD sort's bucket scratch fails as if
  // out of memory, after its first pass, so that its hand-back to the one sort runs.
  bool test_msd_scratch_fail = false;
  // PIPELINK_AGG_TEST_POISON_ROWS=1 (tests only): the MSD sort's by-rows offsets are filled with
  // 0xAB bytes before the batches, so that a row no block writes shows (a fresh allocation may
  // hold zeros, or the right offsets from the call before).
  bool test_poison_rows = false;
  int build_first = 0;          // PIPELINK_AGG_BUILD_FIRST: 0 warp, 1 fused, 2 cub
  bool row_ptr_scan = true;     // PIPELINK_AGG_ROW_PTR: 'scan' (the default) or 'search'
  bool oneshot_w_late = false;  // PIPELINK_AGG_ONESHOT_W=late: w read at the first pass's write-out (opt-in)
  // PIPELINK_AGG_ONESHOT_POOL: 'own' (the default: one-shot calls allocate from PipeLink's
  // scratch pool, see ScratchPoolScope) or 'default' (the device's default pool, as before v30).
  bool oneshot_own_pool = true;
  // PIPELINK_AGG_BUILD_POOL: 'default' (the default) or 'own': two of a plan build's transient
  // arenas, the one narrow sort's and the w permutation tables', from the scratch pool too, and
  // the MSD build's transient buffers (not destination-range or wide builds' scratch, nor
  // finish_plan's). Opt-in: measured (H200,
  // products-like, compare_torch --prepare-weights, one process each, v31) the plan-build row
  // 7.42 -> 6.89 ms with the default pool holding other plans, but the process peak 1.41 -> 1.91
  // GiB and the planned call's judged extra memory 12.32 -> 12.66 B/edge; the C++ bench's A/B
  // (planned, one-shot, lean) showed no difference, and it did not A/B the build.
  bool build_own_pool = false;
  // PIPELINK_AGG_ONESHOT_SORT: 'msd' (the default since v34: a one-shot call with float32
  // weights, N in (2^6, 2^22], no PIPELINK_AGG_BUILD_MEMORY sorts by sort_narrow_msd, ~12 bytes an
  // edge at its peak against the one sort's 24; same bits) or 'lsd' (the one sort below, always).
  bool oneshot_msd = true;
  // PIPELINK_AGG_BUILD_SORT: 'lsd' (the default: a plan build, or a one-shot call without float32
  // weights, sorts by the one sort) or 'msd' (opt-in, v35: by sort_narrow_msd where it applies,
  // as the one-shot's default does, its pairs holding the edge id instead of w's bits; same
  // plan). Why try it: the one-shot's MSD sort by rows with one-tile sub-buckets ranked directly
  // ran about as fast as the one sort (v35), at about half the build's transient memory.
  bool build_msd = false;
  // PIPELINK_AGG_MSD_BATCH [1, 64]: the MSD sort's second-level scratch, over all its streams,
  // holds E / this many edges (or the biggest bucket, if more): 16 (the default since v35), 0.63
  // bytes an edge. Why 16, not v34's 8: the one-shot's peak 674.8 MB against 713.5 (11.42 B/edge
  // judged from Python instead of 11.97, under issue 4's 12), 6.17 against 6.15 ms in the same
  // rounds (1.004x; H200, products-like, v35).
  // PIPELINK_AGG_MSD_STREAMS [1, kMsdStreams]: side streams its batches go round (fewer where a
  // bucket is large).
  int msd_batch = 16, msd_streams = 2;
  // PIPELINK_AGG_MSD_LAST: 'auto' (the default since v36: by rows unless the buckets are skewed,
  // see msd::Last), 'rows' (v34-v35's default: where it sorts two levels, the high digit's level
  // pass, then a block a 256-row sub-bucket, level_rows_kernel) or 'level' (the second level's
  // two level passes, then the row starts kernel).
  msd::Last msd_last = msd::Last::automatic;
  // PIPELINK_AGG_MSD_ONE_TILE: 'direct' (the default since v35: a sub-bucket of at most a tile,
  // every one on products-like, is ranked at once and its row offsets read from the ranking's
  // digit starts, with no counting pass; 6.07 against 6.15 ms in the same rounds, 0.987x, H200,
  // products-like, v35) or 'count' (v34: level_rows_kernel counts every sub-bucket's rows in a
  // pass of its own, then ranks it a tile at a time, as it still does past a tile).
  bool msd_one_tile_direct = true;
  // PIPELINK_AGG_BUILD_HIST: 'scatter' (the default since v39: the first pass's scatter counts
  // the later passes' digits at its write-out, for own_onesweep; plan builds 2.00 against 2.06 ms
  // for 'own' in the same rounds, 0.972x, H200, products-like, v39), 'own' (v38's default: the
  // first pass's counts kernel counts them, two more shared-memory atomics a key there) or 'cub'
  // (CUB's public SortPairs, which counts them in a histogram kernel of its own: a read of every
  // key; 2.09 ms in those rounds). One-shot builds by the one sort take the counts kernel's.
  BuildHist build_hist = BuildHist::scatter;
  // PIPELINK_AGG_PLAN_TAIL: 'fused' (the default since v39: the work split and the segment
  // totals as one kernel, whose last block writes the build's status into host-mapped pinned
  // memory; see plan_tail_kernel) or 'split' (v38: two kernels, then the status copied to
  // pageable memory). Measured (H200, products-like, v39, same rounds): plan build 1.98 against
  // 2.00 ms (1.009x), one-shot 5.99 against 6.01 (1.002x); traced, the tail 0.026-0.036 against
  // 0.047-0.081 ms.
  bool plan_tail_split = false;
};
// Every knob above, read and checked now: a bad value is an Error naming it, before any work.
PlanKnobs plan_knobs();

int staged_issue_knob();      // PIPELINK_AGG_STAGED_ISSUE (knobs.cpp: the values and their history)
bool staged_wmode_runtime();  // PIPELINK_AGG_STAGED_WMODE
bool staged_tanh_libm();      // PIPELINK_AGG_TANH
// The run's knobs (the three above and check_fixed_knobs), read now: a bad value is an Error
// naming it, raised before any work (each planned run).
void check_run_knobs();

// The w permutation's tiles (see src/cuda/aggregate.cu's pass kernels).
inline constexpr int kWPermTile = 49152;                   // the micro's fastest of 49152, 32768, 24576
inline constexpr std::int64_t kWPermMinEdges = 1 << 22;    // auto: below this w (16 MB) sits in L2 anyway; not measured
inline constexpr double kWPermMaxTableBytesPerEdge = 0.5;  // auto: the run tables' growth (E^2) capped
// PIPELINK_AGG_W_PERMUTE: the tile size for a plan of E edges (0: gather w by edge id).
int w_permute_tile(std::int64_t E, bool split_rows);

// PIPELINK_AGG_W_PERMUTE_COMPACT: "lidx" (the default), "1" or "24" compact a plan when its tables
// are built (its pairs become their src column: 4 bytes an edge less, so the plan keeps 8.47
// instead of 12.47 B/edge on products-like, under issue 3's 12; "1" in the plain 32-bit column);
// "0" keeps the pairs (a plan that can still gather by edge id); another value is an error.
// Compaction is the default since session 16: on the H200 (products-like, `bench --ab`, same
// rounds) compact plans ran in 4.88 ms against 4.88 for plans that keep their pairs, and the tests
// and both compact mutants held on the GPU. "24" compacts into a 24-bit src column where N <= 2^24
// (3 bytes an edge for 4: plan 8.47 -> 7.47 B/edge on products-like, and a warm planned call given
// w in edge order 12.81 -> 11.81 B/edge by the process, under issue 4's 12). Opt-in because it
// costs time: the planned call took 4.63 ms against 4.47 with 32-bit srcs (H200, products-like,
// `bench --ab`, same rounds, 8beb24e; w in plan order 4.16 with it); with its join deferred a stage
// (f476127), 1.087x the default's time in the same rounds (v32, f0669c6). "lidx" (the default since
// session 29; unset means it): the 32-bit column, and where N <= 2^24 lidx's low byte in its top 8
// bits ("packed lidx" below; the plain column past 2^24): plan 8.32
// -> 7.32 B/edge and a warm planned call 12.32 -> 11.32 on products-like (under issue 4's 12). It
// cost 0.11 ms in v29 (4.36 against 4.25); with its mask deferred a stage (v32, f0669c6, H200,
// products-like, compare_torch --kernel-profile, one process each) the staged walk took 3.817 ms
// against 3.814 for the plain column, pass 2 0.201 against 0.162, the planned row 4.35 against
// 4.35 ms; `bench --ab` in the same rounds 1.018x the time (no measured difference at its
// precision). "1" keeps the plain 32-bit column.
enum class Compact { keep, src32, src24, lidx };
Compact w_permute_compact();

bool lean_spread_order();  // PIPELINK_AGG_LEAN_ORDER

}  // namespace pipelink::cuda::knobs
