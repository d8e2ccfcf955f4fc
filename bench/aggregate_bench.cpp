#include "aggregate_bench.hpp"
#include "device_facts_json.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>
#include <vector>

#include "pipelink/cuda.hpp"
#include "pipelink/pipelink.hpp"

extern "C" char** environ;  // POSIX: the knobs in effect, for the pre-registration

namespace pipelink::bench {

namespace {

// Every PIPELINK_* variable set for this run (PIPELINK_AGG_W_PERMUTE and the like), sorted; the
// defaults of those not listed are in the source (PROTOCOL.md 3.1: every tuning knob).
std::vector<std::pair<std::string, std::string>> pipelink_environment() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view kv(*e);
    const auto eq = kv.find('=');
    if (kv.starts_with("PIPELINK_") && eq != std::string_view::npos)
      out.emplace_back(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The CPU rows: each path's call on the workload, one list for the bench and its fresh-process
// cold calls. The planned variants run a plan built (and the weights permuted) before their cold
// call.
struct CpuRows {
  struct Path {
    std::string name;
    std::function<void(const TensorView&)> run;
  };
  AggregatePlan plan;
  Tensor wp;
  PlanWeights pw;
  std::vector<Path> paths;
  CpuRows(const WorkloadData& d, std::int64_t N, std::int64_t E) : wp(TensorBuilder().shape({E}).build()) {
    paths = {
        {"three-op", [&d](const TensorView& out) { aggregate_three_op(d.x, d.graph.src, d.graph.dst, d.w.view(), out); }},
        {"fused", [&d](const TensorView& out) { aggregate(d.x, d.graph.src, d.graph.dst, d.w.view(), out); }},
        // The plan's build on its own row, as on the GPU (the planned rows' cold calls take a plan
        // built before them: the build was in no row before session 46).
        {"plan-build", [this, &d, N](const TensorView&) { plan = AggregatePlan::build(d.graph.src, d.graph.dst, N); }},
        {"planned", [this, &d](const TensorView& out) { aggregate(plan, d.x, d.w.view(), out); }},
        {"planned, w in plan order", [this, &d](const TensorView& out) { aggregate(plan, d.x, pw, out); }},
    };
  }
  CpuRows(const CpuRows&) = delete;  // the paths hold `this`
  CpuRows& operator=(const CpuRows&) = delete;
};

// --cold-call on the CPU: the named path's first call into an existing, NaN-filled output, after
// its prerequisites (the plan, w in its order) are built.
VariantResult cpu_cold_call(const AggregateBenchResult& r, const WorkloadData& d, const AggregateBenchOptions& o) {
  CpuRows rows(d, r.nodes, r.edges);
  const CpuRows::Path* p = nullptr;
  for (const auto& q : rows.paths)
    if (q.name == o.cold_call) p = &q;
  if (!p) throw std::invalid_argument("--cold-call: no CPU row named '" + o.cold_call + "'");
  if (o.cold_call.starts_with("planned")) rows.plan = AggregatePlan::build(d.graph.src, d.graph.dst, r.nodes);
  if (o.cold_call == "planned, w in plan order") rows.pw = rows.plan.permute_weights(d.w.view(), rows.wp.view());
  Tensor out = TensorBuilder().shape({r.nodes, r.features}).dtype(DType::f32).build();
  std::fill_n(out.data_as<float>(), out.numel(), std::numeric_limits<float>::quiet_NaN());
  VariantResult v;
  v.name = p->name;
  v.cold_ms = time_ms([&] { p->run(out); });
  return v;
}

// --cold-processes: each row's path once in a fresh process of o.cold_process_exe (the same
// workload, order, seed, scale and device; the environment, PIPELINK_* knobs included, is
// inherited). A child that fails leaves its row's cold_process_ms at -1 and says why; the bench
// goes on.
void run_cold_processes(AggregateBenchResult& r, const AggregateBenchOptions& o,
                        const std::function<void(const std::string&)>& say) {
  if (o.cold_process_exe.empty()) return;
  // The children share the device: this process's pools give back what they cache (three-op's
  // two [E, F] intermediates, 32 GB on products-like) before a child allocates its own.
  if (o.device.kind == DeviceKind::cuda) cuda::release_cached_memory(o.device.index);
  for (VariantResult& v : r.variants) {
    // The --ab rows ("planned [tag]", "... [default, A/B]") run under their own environment: a
    // child would inherit this one's, so they are left out.
    if (v.name.ends_with("]")) continue;
    std::vector<std::string> argv = {o.cold_process_exe, "bench", "aggregate", "--workload", o.workload,
                                     "--order", o.order, "--device", o.device.str(), "--seed", std::to_string(o.seed),
                                     "--edge-scale", fmt::format("{:.17g}", o.edge_scale), "--cold-call", v.name,
                                     "--quiet"};
    if (o.relabel) argv.push_back("--relabel");
    say(fmt::format("{}: its first call in a fresh process", v.name));
    std::string text;
    const int status = run_process(argv, text);
    try {
      if (status != 0) throw std::runtime_error(fmt::format("exit status {}", status));
      // The child's answer is its line starting {"cold_call" (the last such; anything else it
      // printed is passed over).
      const std::size_t at = text.rfind("{\"cold_call\"");
      if (at == std::string::npos) throw std::runtime_error("no answer line on its stdout");
      const nlohmann::json j = nlohmann::json::parse(text.substr(at, text.find('\n', at) - at));
      if (j.at("cold_call").get<std::string>() != v.name) throw std::runtime_error("another row's answer");
      v.cold_process_ms = j.at("cold_ms").get<double>();
      say(fmt::format("{}: first call in a fresh process {:.2f} ms", v.name, v.cold_process_ms));
    } catch (const std::exception& e) {
      say(fmt::format("{}: no fresh-process cold call ({})", v.name, e.what()));
    }
  }
}

double max_abs_diff(const TensorView& a, const TensorView& b) {
  double m = 0;
  const float* pa = a.data_as<const float>();
  const float* pb = b.data_as<const float>();
  for (std::int64_t i = 0; i < a.numel(); ++i) m = std::max(m, double(std::fabs(pa[i] - pb[i])));
  return m;
}

}  // namespace

std::string VariantResult::contract_failure() const {
  if (!within_tolerance) return "per-element bound";
  if (rel_l2_limit > 0 && !(rel_l2_err <= rel_l2_limit)) return fmt::format("rel L2 over {:.2e}", rel_l2_limit);
  if (deterministic && bitwise_differing > 0) return "runs differ bitwise";
  if (!later_runs_ok) return "a later run broke the per-element bound";
  return "";
}

bool judge(VariantResult& v, const VerifyReport& rep, AggregateBenchResult& r) {
  v.max_abs_err = rep.max_abs_err;
  v.rel_l2_err = rep.rel_l2_err;
  v.within_tolerance = rep.within_tolerance;
  if (v.name == "three-op") r.reference_rel_l2 = rep.within_tolerance ? rep.rel_l2_err : -1;
  v.rel_l2_limit = std::max(1e-6, r.reference_rel_l2 > 0 ? 2 * r.reference_rel_l2 : 0.0);
  if (v.meets_contract()) return true;
  v.note = "failed verification (" + v.contract_failure() + "): not timed";
  return false;
}

void check_null_test(AggregateBenchResult& r, const TensorView& out, const TensorView& x, const EdgeList& g,
                     const TensorView& w) {
  const std::int64_t N = x.dim(0), step = std::max<std::int64_t>(1, N / 2000);
  std::vector<std::int64_t> rows;
  for (std::int64_t i = step / 2; i < N; i += step) rows.push_back(i);
  const VerifyReport rep = verify_aggregate_rows(out, x, g.src, g.dst, w, rows);
  r.null_ok = rep.within_tolerance;
  r.null_check = fmt::format("{} rows: {}", rows.size(), rep.summary());
}

const VariantResult* AggregateBenchResult::find(const std::string& name) const {
  for (const auto& v : variants)
    if (v.name == name) return &v;
  return nullptr;
}

AggregateBenchResult run_aggregate_bench(const AggregateBenchOptions& o) {
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  if (o.repeats < 1) throw std::invalid_argument("--repeats must be >= 1");
  // NaN passes CLI11's PositiveNumber check (every comparison with it is false).
  if (!(o.edge_scale > 0) || !std::isfinite(o.edge_scale))
    throw std::invalid_argument(fmt::format("--edge-scale must be a positive number, got {}", o.edge_scale));

  AggregateBenchResult r;
  r.options = o;
  r.git = git_revision();
  r.date = iso_time_utc();
  r.device_name = host_cpu_name();
  r.threads = omp_get_max_threads();
  const DeviceDesc& dev = describe(Device::cpu());
  r.isa = dev.features.contains("avx512f") ? "avx512f" : dev.features.contains("avx2") ? "avx2" : "scalar";
  if (o.device.kind == DeviceKind::cuda) {
    const DeviceDesc& gd = describe(o.device);  // BackendUnavailableError without CUDA or a GPU
    r.device_name = fmt::format("{} ({} SMs, {} MiB L2, {} GiB)", gd.name, gd.multiprocessors, gd.l2_bytes >> 20,
                                gd.memory_bytes >> 30);
    r.isa = fmt::format("sm_{}", gd.sm);
    r.facts = device_facts(o.device);
  }
#if defined(__clang__)
  r.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  r.compiler = "gcc " __VERSION__;
#else
  r.compiler = "unknown";
#endif

  WorkloadSpec spec = scale_edges(workload_spec(o.workload), o.edge_scale);
  spec.relabel = o.relabel;
  say(fmt::format("generating {} ({} order{}): N={} E={} F={}", spec.name, o.order, o.relabel ? ", relabelled" : "",
                  spec.num_nodes, spec.num_edges, spec.features));
  WorkloadData d = make_workload(spec, parse_edge_order(o.order), o.seed);
  r.workload_name = spec.name;
  r.nodes = spec.num_nodes;
  r.edges = d.graph.num_edges();
  r.features = spec.features;
  const std::int64_t N = r.nodes, E = r.edges, F = r.features;
  r.output_bytes = N * F * 4;
  r.must_move_bytes = E * (F * 4 + 2 * std::int64_t(dtype_size(d.graph.src.dtype())) + 4) + N * F * 4;

  if (!o.cold_call.empty()) {  // a child of --cold-processes: one path's first call, nothing else
    r.variants.push_back(o.device.kind == DeviceKind::cuda ? cuda_cold_call(r, d, o) : cpu_cold_call(r, d, o));
    return r;
  }

  say("computing the float64 oracle");
  AggregateOracle oracle = aggregate_oracle(d.x, d.graph.src, d.graph.dst, d.w.view());

  say("measuring the copy bandwidth");
  const CopyBandwidth copy = o.device.kind == DeviceKind::cuda ? device_copy_bandwidth(o.device) : host_copy_bandwidth();
  r.copy_gbs = copy.best_bps / 1e9;
  for (double b : copy.samples_bps) r.copy_samples_gbs.push_back(b / 1e9);
  if (o.device.kind == DeviceKind::cuda) {
    run_cuda_variants(r, d, oracle, o, say);
    run_cold_processes(r, o, say);
    return r;
  }

  CpuRows rows(d, N, E);
  using Path = CpuRows::Path;
  AggregatePlan& plan = rows.plan;
  Tensor& wp = rows.wp;
  PlanWeights& pw = rows.pw;
  const std::vector<Path>& paths = rows.paths;
  // Outputs start as NaN, so that an element a path never writes fails the check (and counts as
  // unwritten in its report).
  auto poison = [](const Tensor& t) {
    std::fill_n(t.data_as<float>(), t.numel(), std::numeric_limits<float>::quiet_NaN());
  };
  auto new_out = [&] {
    Tensor t = TensorBuilder().shape({N, F}).dtype(DType::f32).build();
    poison(t);
    return t;
  };

  // Protocol step 2: the in-service reference's run-to-run spread, before anything is timed.
  {
    const int runs = std::min(o.repeats, 5);
    say(fmt::format("reference spread: {} runs of three-op", runs));
    Tensor first = new_out();
    // The first run is three-op's cold call (the timed loop's was its sixth call before).
    r.three_op_first_call_ms = time_ms([&] { paths[0].run(first); });
    for (int i = 1; i < runs; ++i) {
      Tensor again = new_out();
      paths[0].run(again);
      r.reference_spread_max_abs = std::max(r.reference_spread_max_abs, max_abs_diff(first, again));
    }
    r.reference_spread_runs = runs;
  }

  // Warm-up, then the protocol's timed repeats of one path, each said as it ends (one loop for the
  // plan build's row and the others': the plan build had a copy of its own until session 47).
  auto timed_repeats = [&](const Path& p, const TensorView& out) {
    for (int i = 0; i < o.warmup; ++i) p.run(out);
    std::vector<double> samples;
    for (int i = 0; i < o.repeats; ++i) {
      samples.push_back(time_ms([&] { p.run(out); }));
      say(fmt::format("{}: repeat {}/{}: {:.2f} ms", p.name, i + 1, o.repeats, samples.back()));
    }
    return stats_of(samples);
  };

  for (const Path& p : paths) {
    VariantResult v;
    v.name = p.name;
    if (p.name.starts_with("planned") && !plan.defined()) plan = AggregatePlan::build(d.graph.src, d.graph.dst, N);
    if (p.name == "planned, w in plan order") pw = plan.permute_weights(d.w.view(), wp.view());
    if (p.name == "planned") v.note = "plan built before the cold call (its build: the plan-build row)";
    if (p.name == "planned, w in plan order") v.note = "plan built and w permuted before the cold call";
    // Cold call: memory growth including the output allocation, then verification.
    Tensor out;
    // The output's allocation counts in the memory (its pages are touched by the NaN fill), not in
    // the time: the cold call is timed into an output that exists, as a caller's would.
    MemoryGrowth g = peak_rss_growth([&] {
      out = new_out();
      v.cold_ms = time_ms([&] { p.run(out); });
    });
    v.extra_peak_bytes = g.bytes;
    v.memory_exact = g.exact;
    if (p.name == "three-op" && r.three_op_first_call_ms >= 0) {
      v.cold_ms = r.three_op_first_call_ms;
      v.note = "cold: the first of the reference-spread runs; extra memory from a later call";
    }
    if (p.name == "plan-build") {  // no output: what the plan keeps is its memory
      v.writes_output = false;
      v.within_tolerance = true;
      v.extra_peak_bytes = std::int64_t(plan.bytes());
      v.note = fmt::format("plan keeps {:.2f} B/edge (its figure; the build's peak RSS growth: {:.1f} MB, output "
                           "included)",
                           double(plan.bytes()) / double(E), double(g.bytes) / 1e6);
      v.time = v.wall = timed_repeats(p, out);
      v.timed = true;
      say(fmt::format("plan-build: median {:.2f} ms", v.time.median));
      r.variants.push_back(v);
      continue;
    }
    VerifyReport rep = verify_aggregate(out, oracle);
    // The CPU's fused and planned paths are deterministic (the three-op reference is not promised).
    v.deterministic = p.name != "three-op";
    const bool ok = judge(v, rep, r);
    say(fmt::format("{}: cold {:.1f} ms, +{:.1f} MB peak RSS, {}", p.name, v.cold_ms, double(v.extra_peak_bytes) / 1e6,
                    rep.summary()));
    if (!ok) {
      r.variants.push_back(v);
      continue;
    }
    const Tensor cold_out = v.deterministic ? clone(out) : Tensor();
    v.time = timed_repeats(p, out);
    v.wall = v.time;
    v.timed = true;
    v.effective_gbs = double(r.must_move_bytes) / (v.time.median * 1e-3) / 1e9;
    // The last timed run's output, then one more run into a NaN-poisoned output (one that wrote
    // nothing would pass on stale bits otherwise): the cold call's bits where promised, else
    // within the bound.
    const std::size_t bytes = std::size_t(out.numel()) * sizeof(float);
    if (v.deterministic) {
      v.bitwise_runs = 2;
      v.bitwise_differing = std::memcmp(out.data(), cold_out.data(), bytes) != 0;
      poison(out);
      p.run(out);
      v.bitwise_differing += std::memcmp(out.data(), cold_out.data(), bytes) != 0;
    } else {
      v.later_runs_ok = verify_aggregate(out, oracle).within_tolerance;
    }
    if (!v.meets_contract()) say(p.name + ": " + v.contract_failure());
    r.variants.push_back(v);
  }

  // Null test: 4x the edges on the same nodes should cost about 4x.
  if (o.null_test && r.find("fused") && r.find("fused")->timed) {
    say("null test: fused with 4x the edges");
    const WorkloadData nd = null_test_workload(d, o.seed);
    const EdgeList& g4 = nd.graph;
    const Tensor& w4 = nd.w;
    Tensor out = new_out();
    // --warmup untimed calls, at least one (one whatever --warmup said before session 49).
    for (int i = 0; i < std::max(1, o.warmup); ++i) aggregate(d.x, g4.src, g4.dst, w4.view(), out);
    std::vector<double> s;
    for (int i = 0; i < o.repeats; ++i)  // (max(3, repeats / 2) before: the protocol asks >= 10)
      s.push_back(time_ms([&] { aggregate(d.x, g4.src, g4.dst, w4.view(), out); }));
    r.null_samples_ms = s;
    r.null_ratio = stats_of(s).median / r.find("fused")->time.median;
    check_null_test(r, out, d.x, g4, w4.view());
    say("null test: " + r.null_check);
  }
  run_cold_processes(r, o, say);
  return r;
}

WorkloadData null_test_workload(const WorkloadData& d, std::uint64_t seed) {
  WorkloadSpec spec = d.spec;
  spec.num_edges *= 4;
  spec.features = 0;  // the run's own x is used
  return make_workload(spec, d.order, seed + 17, d.graph.src.dtype());
}

std::string AggregateBenchResult::to_json() const {
  using nlohmann::json;
  json j;
  // 2 from session 49: what session 46's harness (34ee2fb) changed under version 1. The copy
  // bandwidth counts bytes read + written (the CPU's doubled), the null test's 4x graph is the
  // same workload (generator, order, relabelling) timed over all repeats (it was a uniform graph
  // in random order, max(3, repeats / 2) samples), three-op's cold_ms is its first call (it was
  // its sixth), and meets_contract, rel_l2_limit, wall_*, repeats_meet_protocol,
  // extra_peak_includes_output and the structured device facts were added. A version-1 file from
  // after 34ee2fb (v46 on) has the new meanings; docs/BENCHMARKS.md says which tables.
  j["schema_version"] = kBenchSchemaVersion;
  j["workload"] = {
      {"name", workload_name},
      {"order", options.order},
      {"relabel", options.relabel},
      {"nodes", nodes},
      {"edges", edges},
      {"features", features},
      {"seed", options.seed},
      {"edge_scale", options.edge_scale},
      {"cost_variable", "E"},
      {"production_range", "40M-62M edges"},
      {"oracle", "reference computed in float64"},
      {"tolerance", "|y - oracle| <= 2 (d_i + 4) 2^-24 S_i per element; rel L2 <= max(1e-6, 2x three-op's)"}};
  j["device"] = {{"kind", std::string(device_kind_name(options.device.kind))},
                 {"name", device_name},
                 {"threads", threads},
                 {"isa", isa},
                 {"copy_bandwidth_gbs", copy_gbs},
                 {"copy_bandwidth_samples_gbs", copy_samples_gbs},
                 {"copy_bandwidth_counts", "bytes read + bytes written, best of the samples"}};
  put_device_facts(j["device"], facts);
  j["git"] = git;
  j["compiler"] = compiler;
  j["date"] = date;
  j["knobs"] = {{"repeats", options.repeats},
                {"repeats_meet_protocol", options.repeats >= 10},
                {"warmup", options.warmup},
                {"threads", threads}};
  if (options.device.kind == DeviceKind::cpu) j["knobs"]["summation_block"] = 32;  // the CPU kernel's
  json env = json::object();
  for (const auto& [k, v] : pipelink_environment()) env[k] = v;
  j["knobs"]["environment"] = env;
  // Every CUDA aggregate knob's value, defaults included (cuda::aggregate_knobs; PROTOCOL.md 3.1:
  // every tuning knob). The main rows' values: `--ab` arms set theirs only around their own rows.
  if (options.device.kind == DeviceKind::cuda) {
    json resolved = json::object();
    for (const auto& [k, v] : cuda::aggregate_knobs()) resolved[k] = v;
    j["knobs"]["cuda_aggregate"] = resolved;
    j["knobs"]["free_sample_us"] = options.free_sample_us;  // the cold call's sampler (0: none)
  }
  j["reference_spread"] = {{"variant", "three-op"}, {"runs", reference_spread_runs},
                           {"max_abs_diff", reference_spread_max_abs}};
  j["must_move_bytes"] = must_move_bytes;
  // The terms: each input read once at its own dtype (PROTOCOL.md 3.6; 17.70 GB on products-like's
  // int64 indices, against 4's 17.21 GB floor for an int32 CSR). compare_torch.py counts the same
  // way since session 50 (it counted int32 before: ~2.9% apart in "% of copy", a helper's audit).
  j["must_move_counts"] = "E x (a gathered x row of F float32 + src + dst at their dtype + w) + the output written once";
  j["output_bytes"] = output_bytes;
  // The CPU's extra peak RSS includes the output (allocated inside the measured cold call); the
  // GPU's allocator peak does not (out is allocated before): add output_bytes to compare them.
  j["extra_peak_includes_output"] = options.device.kind == DeviceKind::cpu;
  json vs = json::array();
  for (const auto& v : variants) {
    vs.push_back({{"name", v.name},
                  {"timed", v.timed},
                  {"median_ms", v.time.median},
                  {"min_ms", v.time.min},
                  {"max_ms", v.time.max},
                  {"cold_ms", v.cold_ms},
                  {"cold_process_ms", v.cold_process_ms >= 0 ? json(v.cold_process_ms) : json(nullptr)},
                  {"wall_median_ms", v.wall.median},
                  {"wall_min_ms", v.wall.min},
                  {"wall_max_ms", v.wall.max},
                  {"samples_ms", v.time.samples},
                  {"extra_peak_bytes", v.extra_peak_bytes},
                  {"extra_peak_bytes_exact", v.memory_exact},
                  {"process_extra_peak_bytes", v.process_peak_bytes},
                  {"max_abs_err", v.max_abs_err},
                  {"rel_l2_err", v.rel_l2_err},
                  {"within_tolerance", v.within_tolerance},
                  {"rel_l2_limit", v.rel_l2_limit},
                  {"deterministic", v.deterministic},
                  {"later_runs_ok", v.later_runs_ok},
                  {"meets_contract", v.meets_contract()},
                  {"contract_failure", v.contract_failure()},
                  {"effective_gbs", v.effective_gbs},
                  {"share_of_copy_bandwidth", copy_gbs > 0 ? v.effective_gbs / copy_gbs : 0.0},
                  {"writes_output", v.writes_output},
                  {"note", v.note}});
    if (v.bitwise_differing >= 0)
      vs.back()["bitwise_repeatability"] = {{"runs", v.bitwise_runs},
                                            {"runs_differing_from_the_cold_call", v.bitwise_differing}};
  }
  j["variants"] = vs;
  json comps = json::array();
  const VariantResult* a = find("three-op");
  for (const char* name : {"fused", "one-shot", "planned", "planned, w in plan order", "lean"})
    if (const VariantResult* b = find(name); a && b && a->timed && b->timed)
      comps.push_back({{"baseline", "three-op"}, {"variant", name}, {"speedup", a->time.median / b->time.median},
                       {"text", ratio_text(a->time.median / b->time.median)}});
  j["comparisons"] = comps;
  j["null_test"] = {{"variant", options.device.kind == DeviceKind::cuda ? "one-shot" : "fused"},
                    {"edge_factor", 4},
                    {"time_ratio", null_ratio},
                    {"samples_ms", null_samples_ms},
                    {"sampled_rows_check", null_check},
                    {"within_tolerance", null_ok}};
  j["reference_rel_l2"] = reference_rel_l2;
  j["cold_process"] = options.cold_process_exe.empty()
                          ? "not measured (--cold-processes)"
                          : "cold_process_ms: each row's path called once in a fresh process (bench aggregate "
                            "--cold-call), its inputs made and copied and its prerequisites built first; "
                            "synchronized wall time";
  return j.dump(2);
}

std::string AggregateBenchResult::to_markdown() const {
  std::string s = fmt::format(
      "`{}` ({} order{}): N={}, E={}, F={}, float32, tanh. Device: {} ({} threads, {}), copy bandwidth {:.1f} GB/s "
      "(read + written, best of {}{}). {} timed repeats{}. Git {}, {}.\n\n",
      workload_name, options.order, options.relabel ? ", nodes relabelled at random" : "", nodes, edges, features,
      device_name, threads, isa, copy_gbs, copy_samples_gbs.size(),
      copy_samples_gbs.empty()
          ? std::string()
          : fmt::format(", from {:.1f}", *std::min_element(copy_samples_gbs.begin(), copy_samples_gbs.end())),
      options.repeats, options.repeats >= 10 ? "" : " (**fewer than the protocol's 10**)", git, date);
  if (facts.cuda_driver > 0 || facts.cuda_runtime > 0) {
    auto v = [](int x) { return x > 0 ? fmt::format("{}.{}", x / 1000, x % 1000 / 10) : std::string("unknown"); };
    s += fmt::format("CUDA driver {}, runtime {} (built with {}); rated peak clocks SM {} MHz, memory {} MHz. ",
                     v(facts.cuda_driver), v(facts.cuda_runtime), v(facts.cuda_built_with),
                     facts.sm_clock_peak_khz / 1000, facts.memory_clock_peak_khz / 1000);
  }
  s += fmt::format("Built by {}.\n\n", compiler);
  if (const auto env = pipelink_environment(); !env.empty()) {
    s += "Set for this run:";
    for (std::size_t i = 0; i < env.size(); ++i) s += fmt::format("{} `{}={}`", i ? "," : "", env[i].first, env[i].second);
    s += ".\n\n";
  }
  const bool gpu = options.device.kind == DeviceKind::cuda;
  s += fmt::format(
      "| variant | median ms | min ms | max ms | cold ms | {} | eff. GB/s (% copy) | max abs err | rel L2 err | meets "
      "contract |\n",
      gpu ? "extra peak device memory (output excluded)" : "extra peak RSS (output included)");
  s += "|---|---:|---:|---:|---:|---:|---:|---:|---:|:-:|\n";
  // What the cold column is (a helper's audit, session 49): each path's first call in this
  // process, after the rows above it, so kernels an earlier row loaded are not loaded again.
  const std::string cold_note =
      "- cold ms: each variant's first call in this process, after the rows above it (kernels and "
      "pool memory an earlier row loaded are not paid again)" +
      (gpu ? options.free_sample_us > 0
                 ? fmt::format("; a second thread asked the driver for free memory every {} us during it (the "
                               "process figure; `--free-sample-us`), except three-op's (the first reference-spread run)",
                               options.free_sample_us)
                 : std::string("; no free-memory sampler ran during it (`--free-sample-us 0`: no process figure)")
           : std::string()) +
      ".\n";
  for (const auto& v : variants) {
    const std::string process = v.process_peak_bytes >= 0
                                    ? fmt::format(" (process {:.1f} MB)", double(v.process_peak_bytes) / 1e6)
                                    : std::string();
    // The plan build writes no output: no bandwidth, error or contract to show (0, 0 and "yes"
    // read as measured before: a review, session 46). Its memory is what the plan keeps.
    const bool build = !v.writes_output;
    s += fmt::format("| {} | {} | {} | {} | {:.1f} | {:.1f} MB{}{}{} | {} | {} | {} | {} |\n", v.name,
                     v.timed ? fmt::format("{:.2f}", v.time.median) : "not timed",
                     v.timed ? fmt::format("{:.2f}", v.time.min) : "-",
                     v.timed ? fmt::format("{:.2f}", v.time.max) : "-", v.cold_ms, double(v.extra_peak_bytes) / 1e6,
                     build ? " (the plan)" : "", v.memory_exact ? "" : " (approx.)", process,
                     build ? "-"
                           : fmt::format("{:.1f} ({:.0f}%)", v.effective_gbs,
                                         copy_gbs > 0 ? 100 * v.effective_gbs / copy_gbs : 0.0),
                     build ? "-" : fmt::format("{:.2e}", v.max_abs_err),
                     build ? "-" : fmt::format("{:.2e}", v.rel_l2_err),
                     build ? "- (no output)" : v.meets_contract() ? "yes" : "**no**: " + v.contract_failure());
  }
  const VariantResult* a = find("three-op");
  s += "\n";
  for (const char* name : {"fused", "one-shot", "planned", "planned, w in plan order", "lean"})
    if (const VariantResult* b = find(name); a && b && a->timed && b->timed)
      s += fmt::format("- {} vs three-op, same run: {}\n", name, ratio_text(a->time.median / b->time.median));
  s += fmt::format("- reference (three-op) run-to-run spread over {} runs: max abs diff {:.3g}\n", reference_spread_runs,
                   reference_spread_max_abs);
  if (gpu) {
    std::string walls;
    for (const auto& v : variants)
      if (v.timed && v.wall.median > 0 && v.name.find('[') == std::string::npos)
        walls += fmt::format("{}{} {:.3f}", walls.empty() ? "" : ", ", v.name, v.wall.median);
    if (!walls.empty())
      s += "- synchronized wall time per call, median ms (host to the end on the device): " + walls + "\n";
  }
  s += fmt::format(
      "- contract: each element within 2 (d_i + 4) 2^-24 S_i of the float64 oracle, rel L2 at most "
      "max(1e-6, 2x three-op's {:.2e}), deterministic paths bitwise repeatable; checked on each cold "
      "call and again after the timed runs\n",
      reference_rel_l2);
  s += cold_note;
  {
    std::string fresh;
    for (const auto& v : variants)
      if (v.cold_process_ms >= 0) fresh += fmt::format("{}{} {:.2f}", fresh.empty() ? "" : ", ", v.name, v.cold_process_ms);
    if (!fresh.empty())
      s += "- first call in a fresh process (`--cold-processes`: inputs made and copied, prerequisites built, "
           "then the one call), ms: " + fresh + "\n";
  }
  if (!null_check.empty())
    s += fmt::format("- null test: {} with 4x the edges took {}; its output on sampled rows: {}{}{}\n",
                     gpu ? "one-shot" : "fused",
                     null_ratio > 0 ? fmt::format("{:.2f}x the time", null_ratio)
                                    : std::string("(no ratio: the path was not timed)"),
                     null_ok ? "" : "**", null_check, null_ok ? "" : "**");
  if (!gpu)
    s += fmt::format("- output size {:.1f} MB; bound for fused extra peak: output + 16 B/edge = {:.1f} MB\n",
                     double(output_bytes) / 1e6, double(output_bytes + 16 * edges) / 1e6);
  for (const auto& v : variants) {
    if (v.bitwise_differing < 0) continue;
    if (v.bitwise_differing == 0) {
      s += fmt::format("- {}: bitwise identical to its cold call in {} further run{}\n", v.name, v.bitwise_runs,
                       v.bitwise_runs == 1 ? "" : "s");
    } else {
      const bool promised = v.deterministic;  // else (lean: float atomics) the check's control
      const char* mark = promised ? "**" : "";
      s += fmt::format("- {}: {}{} of {} further runs differ{} from its cold call bitwise{}\n", v.name, mark,
                       v.bitwise_differing, v.bitwise_runs, mark,
                       promised ? "" : " (float atomics: not promised deterministic)");
    }
  }
  for (const auto& v : variants)
    if (!v.note.empty()) s += fmt::format("- {}: {}\n", v.name, v.note);
  return s;
}

}  // namespace pipelink::bench
