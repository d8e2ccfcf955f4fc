#include "aggregate_sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <map>
#include <set>
#include <new>
#include <nlohmann/json.hpp>
#include <vector>

#include "aggregate_bench.hpp"  // device_copy_bandwidth
#include "device_facts_json.hpp"
#include "measure.hpp"
#include "pipelink/cuda.hpp"
#include "pipelink/pipelink.hpp"

namespace pipelink::bench {

namespace {

bool out_of_memory(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) || dynamic_cast<const OutOfMemoryError*>(&e)) return true;
  const std::string what = e.what();
  return what.find("cudaErrorMemoryAllocation") != std::string::npos || what.find("out of memory") != std::string::npos;
}

}  // namespace

OneShotOnePlan::OneShotOnePlan() {
  // Set and empty is the library's default (0) too: treated as unset (a review, session 51).
  if (const char* v = std::getenv(kKnob); v != nullptr && *v != '\0') {
    value_ = v;
    return;
  }
  ::setenv(kKnob, "1", 1);
  set_ = true;
  value_ = "1";
}

OneShotOnePlan::~OneShotOnePlan() {
  if (set_) ::unsetenv(kKnob);
}

std::string OneShotOnePlan::means() const {
  // The library's own reading of the knob (aggregate_knobs, the list the bench pre-registers), not
  // a second parser here that could drift from it (session 53). It checks the knobs whole, so any
  // knob it refuses reads as that error: the one-shot calls would fail on it all the same.
  std::string read;
  for (const auto& [name, v] : cuda::aggregate_knobs())
    if (name == kKnob) read = v;
  if (read.rfind("error: ", 0) == 0)
    return "the library refuses the knobs (" + read.substr(7) + "): the one-shot calls fail";
  read = read.substr(0, read.find(' '));  // "<value> (set)" or "<value> (default)"
  if (read == "1") return "one plan (destination ranges where its sort does not fit; out of memory past that)";
  if (read == "0") return "the library's default: edge ranges from the free memory where one plan does not fit";
  return "forced edge ranges (" + read + " a call)";
}

std::string run_aggregate_sweep(const SweepOptions& o, int* disagreements) {
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  const WorkloadSpec& spec = workload_spec(o.workload);
  const std::int64_t N = spec.num_nodes, F = spec.features;
  const bool gpu = o.device.kind == DeviceKind::cuda;
  const std::int64_t cap = o.max_edges > 0 ? o.max_edges : (gpu ? std::int64_t(1) << 40 : std::int64_t(1) << 26);
  // The cap named as the user knows it: "need 1 <= start edges <= max edges" was printed where no
  // --max-edges was given and the CPU's own cap stopped it (a review, session 52).
  if (o.start_edges < 1 || o.start_edges > cap)
    throw std::invalid_argument(fmt::format(
        "sweep: --start-edges {} must be in [1, {}] ({})", o.start_edges, cap,
        o.max_edges > 0 ? "the --max-edges given" : gpu ? "the GPU's cap of 2^40 edges" : "the CPU's cap of 2^26 edges; give --max-edges to go further"));
  if (o.repeats < 1) throw std::invalid_argument("sweep: --repeats must be >= 1");
  if (o.index_dtype != DType::i32 && o.index_dtype != DType::i64)
    throw std::invalid_argument("sweep: the index dtype must be int32 or int64");
  const bool i64 = o.index_dtype == DType::i64;
  std::optional<OneShotOnePlan> one_shot_knob;  // the GPU's paths only (the CPU has no one-shot point)
  if (gpu) one_shot_knob.emplace();

  // The device's facts and its copy bandwidth, measured before the sweep takes any memory
  // (PROTOCOL.md 3.9; the first sweep's JSON had the device's name only: a helper's audit,
  // session 49).
  nlohmann::json device = {{"kind", std::string(device_kind_name(o.device.kind))}, {"name", describe(o.device).str()}};
  put_device_facts(device, device_facts(o.device));  // the bench's list (zeros on the CPU)
  CopyBandwidth copy;
  if (gpu) {
    // 8 GiB of buffers, freed (cudaFree) before the sweep allocates anything; a device without
    // them free still sweeps, with no copy bandwidth (a review, session 49).
    say("measuring the device's copy bandwidth");
    try {
      copy = device_copy_bandwidth(o.device);
    } catch (const std::exception& e) {
      if (!out_of_memory(e)) throw;
      say("the copy bandwidth's buffers do not fit; the sweep goes on without it");
    }
    if (copy.best_bps > 0) device["copy_bandwidth_gbs"] = copy.best_bps / 1e9;  // in the partial documents too
  }
  device["copy_bandwidth_counts"] = "bytes read + bytes written, best of 10 copies";

  // x and out live for the whole sweep; per size: the graph (8 or 16 B/edge of indices) and w.
  Tensor xh = TensorBuilder().shape({N, F}).build();
  fill_normal(xh, o.seed);
  Tensor x = gpu ? to_device(xh, o.device) : xh;
  Tensor out = TensorBuilder().shape({N, F}).device(o.device).build();

  AggregatePlan plan;
  std::uint64_t poisonings = 0;
  int disagree = 0;
  const std::vector<std::string> names =
      gpu ? std::vector<std::string>{"three-op", "one-shot", "planned", "lean"} : std::vector<std::string>{"three-op", "fused"};
  std::map<std::string, std::int64_t> failed_at;  // path -> first edge count it could not run
  // Paths whose output failed the float64 check: never the reference the others are compared
  // with at larger sizes (a wrong first path made every correct one a "mismatch": a review,
  // session 46).
  std::set<std::string> wrong_paths;
  nlohmann::json points = nlohmann::json::array();

  // The JSON as it stands. `cut_after`: the last edge count done, for a partial document (each
  // size's points handed to o.partial as they are done, so that a run cut by a time limit or a
  // crash at the device's edge keeps what it measured: a review, session 51).
  auto document = [&](std::optional<std::int64_t> cut_after) {
    nlohmann::json reach = nlohmann::json::object();
    for (const auto& n : names) {
      std::int64_t best = 0;
      for (const auto& p : points)
        if (p["path"] == n && p["status"] == "ok") best = std::max<std::int64_t>(best, p["edges"].get<std::int64_t>());
      reach[n] = {{"max_edges_run", best}, {"first_failure", failed_at.count(n) ? nlohmann::json(failed_at[n]) : nlohmann::json(nullptr)}};
    }
    // Schema 2 (session 49): device facts and copy bandwidth; index_dtype chosen (--index-dtype);
    // GPU times by events (wall_median_ms the old wall clock); planned's extra_peak_bytes is the
    // larger of its build's transient peak (build_extra_peak_bytes) and its call's peak plus the
    // plan (call_extra_peak_bytes, version 1's figure); samples_ms; repeats_meet_protocol.
    nlohmann::json j = {
        {"schema_version", 2},
        {"kind", "aggregate-sweep"},
        {"workload",
         {{"name", spec.name},
          {"nodes", N},
          {"features", F},
          {"edges", "uniform (whatever the workload's own generator), doubling"},
          {"index_dtype", i64 ? "int64" : "int32"},
          {"seed", o.seed}}},
        {"device", device},
        {"git", git_revision()},
        {"date", iso_time_utc()},
        {"timing", fmt::format("{}, {} repeats after the checked run; median, min, max",
                               gpu ? "CUDA events around the call (wall_median_ms: the synchronized wall clock)"
                                   : "wall clock of the call",
                               o.repeats)},
        {"repeats", o.repeats},
        {"repeats_meet_protocol", o.repeats >= 10},
        {"verification",
         "each path into a poisoned output: against the float64 oracle at the first "
         "size; at every size against the first path that ran there (rel. L2 within 1e-5)"},
        {"disagreements", disagree},
        {"memory", gpu ? "PipeLink allocator peak over what it held before the call; planned: the larger of its "
                         "build's peak and its call's peak plus the plan"
                       : "peak RSS growth of one call"},
        {"reach", reach},
        {"points", points}};
    if (one_shot_knob)
      j["one_shot"] = {{"knob", OneShotOnePlan::kKnob},
                       {"value", one_shot_knob->value()},
                       {"set_by_sweep", one_shot_knob->set_by_sweep()},
                       {"means", one_shot_knob->means()}};
    j["complete"] = !cut_after.has_value();
    if (cut_after) j["partial_after_edges"] = *cut_after;
    return j;
  };

  for (std::int64_t E = o.start_edges; E <= cap; E *= 2) {
    if (failed_at.size() == names.size()) break;
    say(fmt::format("E = {}: generating", E));
    Tensor src, dst, w;
    try {
      if (gpu) {  // drawn on the device: 2^33 edges would not fit in the host's memory
        src = TensorBuilder().shape({E}).dtype(o.index_dtype).device(o.device).build();
        dst = TensorBuilder().shape({E}).dtype(o.index_dtype).device(o.device).build();
        w = TensorBuilder().shape({E}).device(o.device).build();
        cuda::fill_random_indices(src, N, o.seed + std::uint64_t(E));
        cuda::fill_random_indices(dst, N, o.seed + std::uint64_t(E) + 1);
        cuda::fill_random_uniform(w, -1, 1, o.seed + 1);
      } else {
        EdgeList g = uniform_graph(N, E, o.seed + std::uint64_t(E), o.index_dtype);
        Tensor wh = TensorBuilder().shape({E}).build();
        fill_uniform(wh, -1, 1, o.seed + 1);
        src = g.src;
        dst = g.dst;
        w = wh;
      }
    } catch (const std::exception& e) {
      if (!out_of_memory(e)) throw;
      say(fmt::format("E = {}: the inputs themselves do not fit; sweep ends", E));
      for (const auto& n : names) failed_at.emplace(n, E);
      break;
    }
    // Verify each path once, at the first size, against the float64 oracle (protocol step 3).
    std::optional<AggregateOracle> oracle;
    // Past the first size: each path's output against the first path that ran at this size
    // (relative L2 difference), so that the large sizes (64-bit plans) are checked too.
    std::optional<Tensor> first_out;
    std::string first_name;
    if (E == o.start_edges) oracle = aggregate_oracle(xh, to_device(src, Device::cpu()), to_device(dst, Device::cpu()),
                                                      to_device(w, Device::cpu()).view());
    for (const auto& name : names) {
      nlohmann::json pt = {{"edges", E}, {"path", name}};
      if (failed_at.count(name)) {
        pt["status"] = "unreachable";
        points.push_back(pt);
        continue;
      }
      if (!gpu) {
        // The CPU's paths where they would not fit: recorded, not run (SweepOptions::host_memory_bytes).
        // Estimates from the demo's measured extra peaks (arxiv-like, E = 1,166,243, F = 64, this
        // 2-core machine, session 51): three-op 643.8 MB, ~552 bytes an edge against its two
        // [E, F] float intermediates' 512, so 2 F 4 + 48; fused 58.4 MB, ~50 an edge, so 64.
        const std::int64_t avail = o.host_memory_bytes > 0 ? o.host_memory_bytes : host_available_bytes();
        const std::int64_t need = name == "three-op" ? E * (2 * F * std::int64_t(sizeof(float)) + 48) : 64 * E;
        if (avail > 0 && double(need) > 0.9 * double(avail)) {
          failed_at[name] = E;
          pt["status"] = "out_of_memory";
          pt["estimated"] = true;
          pt["error"] = fmt::format("not run: ~{} bytes estimated against {} available: the kernel's out-of-memory "
                                    "killer would have ended the sweep",
                                    need, avail);
          say(fmt::format("E = {}: {} would not fit (~{:.1f} GB against {:.1f} GB available): not run", E, name,
                          double(need) / 1e9, double(avail) / 1e9));
          points.push_back(pt);
          continue;
        }
      }
      std::function<void()> run;
      if (name == "three-op") run = [&] { aggregate_three_op(x, src, dst, w.view(), out); };
      else if (name == "fused") run = [&] { aggregate(x, src, dst, w.view(), out); };
      else if (name == "one-shot") run = [&] { aggregate(x, src, dst, w.view(), out, {.path = AggregatePath::one_shot}); };
      else if (name == "lean") run = [&] { aggregate(x, src, dst, w.view(), out, {.path = AggregatePath::lean}); };
      else run = [&] { aggregate(plan, x, w.view(), out); };
      try {
        std::int64_t extra = 0, build_extra = -1;
        auto sync = [&] {
          if (gpu) cuda::synchronize(o.device.index);
        };
        if (name == "planned") {
          plan = AggregatePlan();
          // The build's own transient peak (its sort's buffers beside the plan): what decides
          // whether the planned path reaches a size at all, and what the first sweep left out
          // (it counted the call's peak plus the plan: a helper's audit, session 49).
          if (gpu) {
            sync();
            cuda::reset_peak_memory();
            const auto before = cuda::memory_stats();
            plan = AggregatePlan::build(src, dst, N);
            sync();
            build_extra = std::int64_t(cuda::memory_stats().peak - before.current);
          } else {
            build_extra = peak_rss_growth([&] { plan = AggregatePlan::build(src, dst, N); }).bytes;
          }
          pt["build_extra_peak_bytes"] = build_extra;
        }
        // The output poisoned before each path's checked run, so that a path that writes nothing
        // cannot pass on the last path's output (GPU: 1e30-2e30, CPU: NaN; either fails both checks).
        if (gpu) {
          cuda::fill_random_uniform(out, 1e30, 2e30, o.seed + std::uint64_t(E) + poisonings++);
        } else {
          std::fill_n(out.data_as<float>(), out.numel(), std::numeric_limits<float>::quiet_NaN());
        }
        // The plan's bytes before the call: a first call given w in edge order builds the
        // permutation's tables (counted in its peak) and compacts the plan (its pairs freed), so
        // plan.bytes() after it counted the tables twice (a review, session 49).
        const std::int64_t plan_before = name == "planned" ? std::int64_t(plan.bytes()) : 0;
        if (gpu) {
          sync();
          cuda::reset_peak_memory();
          const auto before = cuda::memory_stats();
          run();
          sync();
          extra = std::int64_t(cuda::memory_stats().peak - before.current) + plan_before;
        } else {
          const MemoryGrowth g = peak_rss_growth(run);
          extra = g.bytes + plan_before;
          pt["extra_peak_exact"] = g.exact;  // false: the peak-RSS mark could not be reset
        }
        // A planned call needs its plan built first: the larger of the two peaks.
        if (name == "planned") {
          pt["call_extra_peak_bytes"] = extra;
          extra = std::max(extra, build_extra);
        }
        // A point whose output is wrong is recorded as such, not timed, and not counted as
        // reached; the sweep goes on. (A failed check at the first size aborted the sweep with no
        // JSON, and a disagreeing point was timed and counted "ok": a review, session 46.)
        bool wrong = false;
        if (oracle) {
          VerifyReport r = verify_aggregate(out, *oracle);
          pt["within_tolerance"] = r.within_tolerance;
          if (!r.within_tolerance) {
            pt["status"] = "failed_verification";
            pt["error"] = r.summary();
            wrong_paths.insert(name);
            ++disagree;
            wrong = true;
            say(fmt::format("E = {}: {} FAILED verification: {}", E, name, r.summary()));
          }
        }
        if (!wrong && wrong_paths.count(name)) {  // failed at the first size: flagged at every size since
          pt["status"] = "failed_verification";
          pt["error"] = "failed the float64 check at the first size";
          wrong = true;
        }
        if (!wrong) {
          Tensor here = to_device(out, Device::cpu());
          if (!first_out && !wrong_paths.count(name)) {
            first_out = std::move(here);
            first_name = name;
          } else if (first_out) {
            double num = 0, den = 0;
            const float* a = first_out->data_as<const float>();
            const float* b = here.data_as<const float>();
            for (std::int64_t i = 0; i < N * F; ++i) {
              num += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
              den += double(a[i]) * double(a[i]);
            }
            const double rel = std::sqrt(num / (den > 0 ? den : 1));
            pt["cross_check"] = {{"against", first_name}, {"rel_l2_diff", rel}};
            // Both sides are within 1e-6 of the oracle where it was checked; 1e-5 leaves room
            // for float atomics on hub-free graphs and still catches a wrong row.
            if (!(rel <= 1e-5)) {  // recorded, reported, and the sweep goes on: its data is kept
              pt["cross_check"]["agrees"] = false;
              pt["status"] = "mismatch";
              wrong = true;
              ++disagree;
              say(fmt::format("E = {}: {} DISAGREES with {}: rel. L2 {:.3e}", E, name, first_name, rel));
            } else {
              pt["cross_check"]["agrees"] = true;
            }
          }
        }
        if (wrong) {
          pt["extra_peak_bytes"] = extra;
          if (name == "planned") plan = AggregatePlan();
          points.push_back(pt);
          continue;
        }
        // Timed after the checked run above, which is each point's warm-up: on the GPU with events
        // around the call (PROTOCOL.md 3.4; the first sweep timed the synchronized wall clock,
        // kept as wall_median_ms), on the CPU by the wall clock.
        std::vector<double> samples, wall;
        for (int i = 0; i < o.repeats; ++i) {
          if (gpu) {
            const cuda::DeviceGuard guard(o.device.index);
            cuda::Event start, stop;
            wall.push_back(time_ms([&] {
              start.record();
              run();
              stop.record();
              stop.synchronize();
            }));
            samples.push_back(stop.elapsed_ms(start));
          } else {
            samples.push_back(time_ms(run));
          }
        }
        const Stats st = stats_of(samples);
        pt["status"] = "ok";
        pt["median_ms"] = st.median;
        pt["min_ms"] = st.min;
        pt["max_ms"] = st.max;
        pt["samples_ms"] = samples;
        if (gpu) pt["wall_median_ms"] = stats_of(wall).median;
        pt["extra_peak_bytes"] = extra;
        say(fmt::format("E = {}: {} {:.3f} ms, +{:.1f} MB", E, name, st.median, double(extra) / 1e6));
      } catch (const std::exception& e) {
        if (!out_of_memory(e)) throw;
        failed_at[name] = E;
        pt["status"] = "out_of_memory";
        pt["error"] = e.what();
        say(fmt::format("E = {}: {} ran out of memory", E, name));
      }
      if (name == "planned") plan = AggregatePlan();
      points.push_back(pt);
    }
    if (o.partial) o.partial(document(E).dump(2));
  }

  // The host's copy after the sweep: its 512 MiB of buffers before it would raise the peak RSS that
  // every point's memory is read against where the mark cannot be reset (a review, session 49).
  if (!gpu) {
    say("measuring the host's copy bandwidth");
    copy = host_copy_bandwidth();
  }
  device["copy_bandwidth_gbs"] = copy.best_bps > 0 ? nlohmann::json(copy.best_bps / 1e9) : nlohmann::json(nullptr);

  if (disagreements) *disagreements = disagree;
  return document(std::nullopt).dump(2);
}

std::string sweep_markdown(const std::string& json_text) {
  const nlohmann::json j = nlohmann::json::parse(json_text);
  std::vector<std::string> paths;
  std::vector<std::int64_t> sizes;
  std::map<std::pair<std::int64_t, std::string>, std::string> cell;
  for (const auto& p : j.at("points")) {
    const std::string path = p.at("path");
    const std::int64_t e = p.at("edges");
    if (std::find(paths.begin(), paths.end(), path) == paths.end()) paths.push_back(path);
    if (std::find(sizes.begin(), sizes.end(), e) == sizes.end()) sizes.push_back(e);
    const std::string status = p.at("status");
    std::string c;
    if (status == "ok")
      c = fmt::format("{:.3f} ms, {:.1f} MB", p.at("median_ms").get<double>(),
                      double(p.value("extra_peak_bytes", std::int64_t(0))) / 1e6);
    else if (status == "out_of_memory") c = p.value("estimated", false) ? "would not fit (estimated; not run)" : "out of memory";
    else if (status == "unreachable") c = "-";
    else c = "**" + status + "**";
    cell[{e, path}] = c;
  }
  const auto& w = j.at("workload");
  const auto& d = j.at("device");
  std::string s = fmt::format(
      "# Edge-count sweep: {} (N = {}, F = {}, {} indices, uniform edges)\n\n"
      "Device: {}; copy bandwidth {}. Built from {} ({}). Timing: {}; memory: {}.{}\n\n",
      w.at("name").get<std::string>(), w.at("nodes").get<std::int64_t>(), w.at("features").get<std::int64_t>(),
      w.at("index_dtype").get<std::string>(), d.at("name").get<std::string>(),
      d.contains("copy_bandwidth_gbs") && d.at("copy_bandwidth_gbs").is_number()
          ? fmt::format("{:.1f} GB/s (read + written)", d.at("copy_bandwidth_gbs").get<double>())
          : std::string("not measured"),
      j.at("git").get<std::string>(), j.at("date").get<std::string>(), j.at("timing").get<std::string>(),
      j.at("memory").get<std::string>(),
      j.value("repeats_meet_protocol", false) ? "" : " Fewer repeats than PROTOCOL.md's 10.");
  s += "| edges |";
  for (const auto& p : paths) s += " " + p + " |";
  s += "\n|---:|";
  for (std::size_t i = 0; i < paths.size(); ++i) s += "---|";
  s += "\n";
  for (const std::int64_t e : sizes) {
    s += fmt::format("| {} |", e);
    for (const auto& p : paths) {
      const auto it = cell.find({e, p});
      s += " " + (it == cell.end() ? std::string("-") : it->second) + " |";
    }
    s += "\n";
  }
  s += "\nReach (the largest edge count each path ran at, correct; its first failure):\n\n";
  for (const auto& p : paths) {
    const auto& r = j.at("reach").at(p);
    s += fmt::format("- {}: {}{}\n", p, r.at("max_edges_run").get<std::int64_t>(),
                     r.at("first_failure").is_null() ? std::string(j.value("complete", true) ? " (no failure up to the sweep's cap)"
                                                                                              : " (no failure yet)")
                                                     : fmt::format(" (fails at {})", r.at("first_failure").get<std::int64_t>()));
  }
  if (!j.value("complete", true))
    s += fmt::format("\n**Partial**: the sweep stopped after {} edges (cut short, or still running); the reach above is "
                     "what it had reached by then.\n",
                     j.value("partial_after_edges", std::int64_t(0)));
  if (j.contains("one_shot") && std::find(paths.begin(), paths.end(), "one-shot") != paths.end()) {
    const auto& k = j.at("one_shot");
    s += fmt::format("\nThe one-shot points ran under {}={}: {}.\n", k.at("knob").get<std::string>(),
                     k.at("value").get<std::string>(), k.at("means").get<std::string>());
  }
  if (j.value("disagreements", 0) > 0)
    s += fmt::format("\n**{} point(s) disagreed with the first path at their size** (see the JSON).\n",
                     j.at("disagreements").get<int>());
  return s;
}

}  // namespace pipelink::bench
