#pragma once
// `pipelink bench aggregate`: the CPU half of PROTOCOL.md §3 for the aggregate, comparing the
// fused op with the materialized three-op reference in one run.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "measure.hpp"
#include "pipelink/graph.hpp"
#include "pipelink/verify.hpp"

namespace pipelink::bench {

struct AggregateBenchOptions {
  std::string workload = "arxiv-like";
  std::string order = "random";  // random | dst-sorted
  Device device = Device::cpu();
  int repeats = 10;
  int warmup = 1;
  std::uint64_t seed = 42;
  double edge_scale = 1.0;      // shrink/grow E (tests use small graphs); 1 for the named workload
  bool relabel = false;         // nodes renamed by a random permutation (WorkloadSpec::relabel)
  bool null_test = true;        // 4x edges -> ~4x time?
  // CUDA only: A/B of variants in this process, "tag:VAR=1,VAR2=1" each. Each variant's plan is
  // built under its environment and its planned run timed interleaved with the default's (one
  // sample of each per round), so that drift over the run falls on both alike.
  std::vector<std::string> ab;
  std::function<void(const std::string&)> progress;  // one line per step, for long runs
};

struct VariantResult {
  std::string name;
  bool timed = false;             // false when it failed verification (protocol: not timed)
  Stats time;                     // ms
  double cold_ms = 0;
  std::int64_t extra_peak_bytes = 0;  // peak RSS growth of one call, output allocation included
  bool memory_exact = false;
  // GPU: process-level (cudaMemGetInfo) growth at its peak during the cold call, after the
  // allocator caches were emptied; catches memory PipeLink's counters do not see. -1: not measured.
  std::int64_t process_peak_bytes = -1;
  double max_abs_err = 0, rel_l2_err = 0;
  bool within_tolerance = false;
  double effective_gbs = 0;       // bytes that must move / median time
  // Deterministic GPU paths: further runs compared bit for bit with the verified cold call's
  // output (issue 3: the planned path bitwise identical across 10 runs). -1: not checked.
  int bitwise_runs = 0, bitwise_differing = -1;
  std::string note;
};

struct AggregateBenchResult {
  AggregateBenchOptions options;
  std::string workload_name;
  std::int64_t nodes = 0, edges = 0, features = 0;
  std::string device_name;
  int threads = 0;
  std::string isa;
  double copy_gbs = 0;
  std::int64_t must_move_bytes = 0;
  std::int64_t output_bytes = 0;
  double reference_spread_max_abs = 0;  // three-op run-to-run
  int reference_spread_runs = 0;
  std::vector<VariantResult> variants;
  double null_ratio = 0;                // time(4E) / time(E), fused
  std::string git, date;

  const VariantResult* find(const std::string& name) const;
  std::string to_json() const;       // schema_version 1
  std::string to_markdown() const;
};

AggregateBenchResult run_aggregate_bench(const AggregateBenchOptions& opts);

// The CUDA half (bench/aggregate_bench_cuda.cpp).
double device_copy_bandwidth(Device dev);

}  // namespace pipelink::bench

namespace pipelink::bench {
void run_cuda_variants(AggregateBenchResult& r, const WorkloadData& d, const AggregateOracle& oracle,
                       const AggregateBenchOptions& o, const std::function<void(const std::string&)>& say);
}  // namespace pipelink::bench
