#pragma once
// Edge-count sweep (PROTOCOL.md §1): E doubles at fixed N until each path runs out of memory (or a
// cap), showing which graph sizes each implementation can reach at all. Writes a versioned JSON;
// bench/plot_sweep.py turns it into PNG plots (time vs edges, memory vs edges).
#include <cstdint>
#include <functional>
#include <string>

#include "pipelink/dtype.hpp"

namespace pipelink::bench {

struct SweepOptions {
  std::string workload = "products-like";  // gives N and F; edges are drawn uniformly
  Device device = Device::cpu();
  std::int64_t start_edges = 1 << 20;
  std::int64_t max_edges = 0;              // 0: until every path has failed (CPU: 2^26 cap)
  int repeats = 3;  // below PROTOCOL.md's 10 (the JSON says so): a point at 2^33 edges takes seconds
  DType index_dtype = DType::i32;  // src and dst (the named workloads' own are int64: --index-dtype)
  std::uint64_t seed = 42;
  std::function<void(const std::string&)> progress;
  /// Where given: the JSON text so far ("complete": false, "partial_after_edges") after each edge
  /// count, so that a sweep cut short (a time limit, a crash at the device's edge) keeps its points.
  std::function<void(const std::string&)> partial;
  /// CPU only: the host memory a path may take (0: MemAvailable, read before each path). A path
  /// whose estimated peak passes 90% of it is recorded out of memory, not run: the kernel's
  /// out-of-memory killer would end the sweep, losing it (a newcomer's review, session 51: at
  /// 2^26 edges the three-op's two [E, F] intermediates are 34 GB). Tests set it small.
  std::int64_t host_memory_bytes = 0;
};

/// Runs the sweep and returns the JSON text (schema_version 2; what 2 changed: run_aggregate_sweep).
/// *disagreements (where given): how many points' outputs disagreed with the first path's at their
/// size (recorded in the JSON; the sweep goes on, and the CLI exits 1 after writing it).
std::string run_aggregate_sweep(const SweepOptions& o, int* disagreements = nullptr);

/// The one-shot's sweep points run one plan: PIPELINK_AGG_ONESHOT_CHUNKS=1 while this lives, unless
/// the environment sets the knob (then its value stands). Under the default (0) a one-shot call
/// short of memory runs edge ranges sized from the free memory, finishing on the lean path if a
/// later range fails: the point would read "ok" at a size one plan cannot reach, with a small
/// memory figure and bits that follow the device's state (a warning on stderr only). A reviewing
/// helper's count, session 51: at 2^32 int32 edges on an 80 GB card the inputs leave ~32 GB, under
/// the plan's 34 GB of pairs. With 1 a call short of memory sorts destination ranges (the same
/// plan) or raises, and the sweep records the out-of-memory error. The JSON's "one_shot" says
/// which ran.
class OneShotOnePlan {
 public:
  static constexpr const char* kKnob = "PIPELINK_AGG_ONESHOT_CHUNKS";
  OneShotOnePlan();
  ~OneShotOnePlan();  // the knob unset again where this set it
  OneShotOnePlan(const OneShotOnePlan&) = delete;
  OneShotOnePlan& operator=(const OneShotOnePlan&) = delete;
  const std::string& value() const { return value_; }
  bool set_by_sweep() const { return set_; }
  std::string means() const;

 private:
  std::string value_;
  bool set_ = false;
};

/// A Markdown table of a sweep's JSON text: one row an edge count, a column a path (median ms and
/// extra peak MB, or what stopped it), then each path's reach.
std::string sweep_markdown(const std::string& json_text);

}  // namespace pipelink::bench
