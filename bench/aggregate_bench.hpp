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
  // PROTOCOL.md 3.4's cold first call in a process of its own: the `cold` column is each path's
  // first call in this process, after the rows above it, so kernels and pool memory an earlier
  // row loaded are not paid again (a helper's audit, session 49). With `cold_process_exe` (the
  // pipelink CLI; `--cold-processes`), each row's path is also called once in a fresh process of
  // that program (`bench aggregate --cold-call PATH`: the same workload, its inputs made and
  // copied first, the path's prerequisites built, then one timed call), into cold_process_ms.
  std::string cold_process_exe;
  // CUDA: how often (microseconds) the cold call's second thread asks the driver for free memory,
  // for the process-level peak; 0: no sampler, process_peak_bytes not measured. Under the 50 us
  // default the in-process one-shot cold call took 30.8-39.3 ms (products-like, H100, v54-v55)
  // against 25.7 in a fresh process with no sampler (v54): whether the sampler's cudaMemGetInfo
  // calls cost the call that much is what `--free-sample-us 0` measures.
  int free_sample_us = 50;
  std::string cold_call;  // internal: time only this path's first call (the child's side)
  std::function<void(const std::string&)> progress;  // one line per step, for long runs
};

struct VariantResult {
  std::string name;
  bool timed = false;             // false when it failed verification (protocol: not timed)
  Stats time;                     // ms (GPU: between CUDA events; CPU: wall time)
  Stats wall;                     // ms, the synchronized wall time of each timed call (CPU: = time)
  double cold_ms = 0;
  double cold_process_ms = -1;  // the first call in a process of its own (options.cold_process_exe); -1: not measured
  std::int64_t extra_peak_bytes = 0;  // peak RSS growth of one call, output allocation included
  bool memory_exact = false;
  // GPU: process-level (cudaMemGetInfo) growth at its peak during the cold call, after the
  // allocator caches were emptied; catches memory PipeLink's counters do not see. -1: not measured.
  std::int64_t process_peak_bytes = -1;
  double max_abs_err = 0, rel_l2_err = 0;
  // False for the plan build: no output, so its row is its time and the plan's bytes, with no
  // bandwidth, error or contract to show (the tables read its zeros as measured before).
  bool writes_output = true;
  bool within_tolerance = false;  // the per-element bound (PROTOCOL.md §2) on the cold call
  // The L2 rule (PROTOCOL.md §2): rel_l2_err at most max(1e-6, 2x the in-service reference's own
  // in this run, three-op's). 0: not checked (the plan-build rows, which write no output).
  double rel_l2_limit = 0;
  // The path promises bitwise-identical runs (the GPU's planned and one-shot paths, the CPU's
  // fused and planned ones): a further run that differs from the cold call breaks the contract.
  bool deterministic = false;
  // Paths not promised deterministic (lean): whether a run after the timed ones (the last timed
  // run's output, or one more run into a poisoned output) met the per-element bound too. Checked
  // after timing, so a failure marks a timed row. The deterministic paths' later runs are
  // compared bit for bit instead and counted in bitwise_differing.
  bool later_runs_ok = true;
  double effective_gbs = 0;       // bytes that must move / median time
  // Deterministic GPU paths: further runs compared bit for bit with the verified cold call's
  // output (issue 3: the planned path bitwise identical across 10 runs). -1: not checked.
  int bitwise_runs = 0, bitwise_differing = -1;
  std::string note;

  // Which rule the variant breaks ("" where it meets every rule checked). The CLI exits 1 on any.
  std::string contract_failure() const;
  bool meets_contract() const { return contract_failure().empty(); }
};

// The `pipelink bench aggregate` JSON's schema_version (what each version changed: to_json).
inline constexpr int kBenchSchemaVersion = 2;

struct AggregateBenchResult {
  AggregateBenchOptions options;
  std::string workload_name;
  std::int64_t nodes = 0, edges = 0, features = 0;
  std::string device_name;
  int threads = 0;
  std::string isa;
  double copy_gbs = 0;                  // best of copy_samples_gbs: read + written
  std::vector<double> copy_samples_gbs;
  DeviceFacts facts;  // for the JSON (PROTOCOL.md §3.9); 0 where not known (the CPU's)
  std::string compiler;  // the host compiler that built the benchmark
  double three_op_first_call_ms = -1;  // the first reference-spread run: three-op's cold call
  std::int64_t must_move_bytes = 0;
  std::int64_t output_bytes = 0;
  double reference_spread_max_abs = 0;  // three-op run-to-run
  int reference_spread_runs = 0;
  std::vector<VariantResult> variants;
  double null_ratio = 0;  // time(4E) / time(E), fused (CPU) or one-shot (GPU)
  std::vector<double> null_samples_ms;  // the 4x call's timed samples (JSON null_test.samples_ms)
  // The null test's output, checked on a sample of rows (verify_aggregate_rows): empty where not
  // run, else the report's summary; null_ok false where it failed the per-element bound.
  std::string null_check;
  bool null_ok = true;
  double reference_rel_l2 = -1;  // three-op's rel L2 against the oracle in this run (-1: none)
  std::string git, date;

  const VariantResult* find(const std::string& name) const;
  std::string to_json() const;       // schema_version kBenchSchemaVersion (changes: to_json)
  std::string to_markdown() const;
};

AggregateBenchResult run_aggregate_bench(const AggregateBenchOptions& opts);

// Shared by the CPU and GPU halves. Fills v's errors from rep and applies the contract's
// per-element and L2 rules (the limit from r.reference_rel_l2, which three-op's own report sets);
// true where v may be timed. Sets v.note on a failure.
bool judge(VariantResult& v, const VerifyReport& rep, AggregateBenchResult& r);
// The null test's check: every (N / 2000)-th row of `out` (4x the edges) against the float64
// sums of those rows alone; sets r.null_check and r.null_ok.
void check_null_test(AggregateBenchResult& r, const TensorView& out, const TensorView& x, const EdgeList& g,
                     const TensorView& w);

// The CUDA half (bench/aggregate_bench_cuda.cpp).
CopyBandwidth device_copy_bandwidth(Device dev);

// The null test's graph: the same workload (generator, order, relabelling) with 4x the edges,
// and its weights; x is the run's own (features 0 here). A uniform graph stood in for every
// workload until session 46, so power-law's ratio compared R-MAT with uniform.
WorkloadData null_test_workload(const WorkloadData& d, std::uint64_t seed);

}  // namespace pipelink::bench

namespace pipelink::bench {
// --cold-call on CUDA: the named path's first call, after its inputs are on the device and its
// prerequisites (the plan, w in its order) are built; synchronized wall time.
VariantResult cuda_cold_call(const AggregateBenchResult& r, const WorkloadData& d, const AggregateBenchOptions& o);
void run_cuda_variants(AggregateBenchResult& r, const WorkloadData& d, const AggregateOracle& oracle,
                       const AggregateBenchOptions& o, const std::function<void(const std::string&)>& say);
}  // namespace pipelink::bench
