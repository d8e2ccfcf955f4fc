// The GPU half of PROTOCOL.md §3 for the aggregate: the three-op reference on CUDA, and the
// planned, one-shot and lean paths; device-event timing, allocator-peak memory, copy bandwidth
// measured in the same run. Host-only code: CUDA through pipelink/cuda.hpp.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include "aggregate_bench.hpp"
#include "pipelink/cuda.hpp"
#include "pipelink/pipelink.hpp"

namespace pipelink::bench {

CopyBandwidth device_copy_bandwidth(Device dev) {
  // Events and their legacy stream are the current device's: it must be dev's (calls give the
  // caller's device back since session 46, so allocating no longer leaves it set).
  const cuda::DeviceGuard device_guard(dev.index);
  const std::int64_t n = std::int64_t(1) << 30;  // 4 GiB of float32 each way
  Tensor a = TensorBuilder().shape({n}).device(dev).zeros();
  Tensor b = TensorBuilder().shape({n}).device(dev).build();
  cuda::Event start, stop;
  CopyBandwidth c;
  for (int rep = 0; rep < 10; ++rep) {
    start.record();
    copy_into(b, a);
    stop.record();
    stop.synchronize();
    // bytes read + bytes written, as PROTOCOL.md counts it
    c.samples_bps.push_back(2.0 * double(n) * 4.0 / (double(stop.elapsed_ms(start)) * 1e-3));
    c.best_bps = std::max(c.best_bps, c.samples_bps.back());
  }
  return c;
}

namespace {

// Samples the device's free memory from a second thread while a call runs: the lowest reading is
// the process-level peak (cudaMemGetInfo sees every allocation: PipeLink's pool, cudaMalloc'd
// tensors freed before the call returns, the CUDA runtime's own).
// interval_us == 0: no thread, and measured() is false.
class FreeMemorySampler {
 public:
  FreeMemorySampler(int device, int interval_us) : device_(device), min_free_(cuda::device_memory_info(device).first) {
    if (interval_us <= 0) {
      measured_ = false;
      return;
    }
    thread_ = std::thread([this, interval_us] {
      try {
        while (!stop_.load()) {
          note(cuda::device_memory_info(device_).first);
          std::this_thread::sleep_for(std::chrono::microseconds(interval_us));
        }
      } catch (...) {  // a failed query ends sampling; the readings so far stand
      }
    });
  }
  ~FreeMemorySampler() { finish(); }
  FreeMemorySampler(const FreeMemorySampler&) = delete;
  FreeMemorySampler& operator=(const FreeMemorySampler&) = delete;
  std::size_t finish() {
    if (thread_.joinable()) {
      stop_ = true;
      thread_.join();
      note(cuda::device_memory_info(device_).first);
    }
    return min_free_;
  }
  bool measured() const noexcept { return measured_; }

 private:
  void note(std::size_t f) {
    std::lock_guard lock(mu_);
    min_free_ = std::min(min_free_, f);
  }
  int device_;
  std::size_t min_free_;
  bool measured_ = true;
  std::mutex mu_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// One A/B variant: its tag and the environment it runs under ("tag:VAR=1,VAR2=1").
struct AbVariant {
  std::string tag;
  std::vector<std::pair<std::string, std::string>> vars;
};

AbVariant parse_ab(const std::string& spec) {
  const auto colon = spec.find(':');
  if (colon == std::string::npos || colon == 0)
    throw Error("bench --ab: expected 'tag:VAR=value[,VAR2=value]', got '" + spec + "'");
  AbVariant v{spec.substr(0, colon), {}};
  std::string rest = spec.substr(colon + 1);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string kv = rest.substr(0, comma);
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw Error("bench --ab: expected VAR=value in '" + spec + "', got '" + kv + "'");
    v.vars.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    rest = comma == std::string::npos ? std::string() : rest.substr(comma + 1);
  }
  return v;
}

// Sets variables for its lifetime and restores what was there before.
class EnvScope {
 public:
  explicit EnvScope(const std::vector<std::pair<std::string, std::string>>& vars) {
    for (const auto& [k, val] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_.push_back({k, old != nullptr, old ? std::string(old) : std::string()});
      ::setenv(k.c_str(), val.c_str(), 1);
    }
  }
  ~EnvScope() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it)
      it->had ? ::setenv(it->key.c_str(), it->value.c_str(), 1) : ::unsetenv(it->key.c_str());
  }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;

 private:
  struct Saved {
    std::string key;
    bool had;
    std::string value;
  };
  std::vector<Saved> saved_;
};

// The GPU rows: the workload on the device and each path's call, one list for the bench and its
// fresh-process cold calls (cuda_cold_call).
struct CudaRows {
  struct Path {
    std::string name;
    std::function<void()> run;
  };
  Tensor xg, sg, dg, wg, out;
  AggregatePlan plan;
  // Weights permuted once into the plan's order (AggregatePlan::permute_weights), for graphs
  // whose weights stay fixed: its own variant, since the protocol's planned run takes w per call
  // in edge order. The buffer is allocated here, beside the inputs.
  Tensor wpg;
  PlanWeights pw;
  std::vector<Path> paths;

  CudaRows(const WorkloadData& d, Device dev, std::int64_t N, std::int64_t F, std::int64_t E)
      : xg(to_device(d.x, dev)),
        sg(to_device(d.graph.src, dev)),
        dg(to_device(d.graph.dst, dev)),
        wg(to_device(d.w, dev)),
        out(TensorBuilder().shape({N, F}).device(dev).build()),
        wpg(TensorBuilder().shape({E}).device(dev).build()) {
    paths = {
        {"three-op", [this] { aggregate_three_op(xg, sg, dg, wg.view(), out); }},
        {"one-shot", [this] { aggregate(xg, sg, dg, wg.view(), out, {.path = AggregatePath::one_shot}); }},
        {"plan-build", [this, N] { plan = AggregatePlan::build(sg, dg, N); }},
        {"planned", [this] { aggregate(plan, xg, wg.view(), out); }},
        {"planned, w in plan order", [this] { aggregate(plan, xg, pw, out); }},
        {"lean", [this] { aggregate(xg, sg, dg, wg.view(), out, {.path = AggregatePath::lean}); }},
    };
    cuda::synchronize(dev.index);
  }
  CudaRows(const CudaRows&) = delete;  // the paths hold `this`
  CudaRows& operator=(const CudaRows&) = delete;
  const Path* find(const std::string& name) const {
    for (const Path& p : paths)
      if (p.name == name) return &p;
    return nullptr;
  }
};

}  // namespace

VariantResult cuda_cold_call(const AggregateBenchResult& r, const WorkloadData& d, const AggregateBenchOptions& o) {
  const Device dev = o.device;
  const cuda::DeviceGuard device_guard(dev.index);
  CudaRows rows(d, dev, r.nodes, r.features, r.edges);
  const CudaRows::Path* p = rows.find(o.cold_call);
  if (!p) throw std::invalid_argument("--cold-call: no GPU row named '" + o.cold_call + "'");
  if (o.cold_call.starts_with("planned")) rows.plan = AggregatePlan::build(rows.sg, rows.dg, r.nodes);
  if (o.cold_call == "planned, w in plan order") rows.pw = rows.plan.permute_weights(rows.wg.view(), rows.wpg.view());
  // As before each cold call in the bench's process: the pools give back what the prerequisites'
  // builds freed into them, so the call takes its memory from the driver (a reviewing helper's
  // catch: the planned rows' children would have reused the build's scratch). Synchronizes.
  cuda::release_cached_memory(dev.index);
  VariantResult v;
  v.name = p->name;
  v.cold_ms = time_ms([&] {
    p->run();
    cuda::synchronize(dev.index);
  });
  return v;
}

void run_cuda_variants(AggregateBenchResult& r, const WorkloadData& d, const AggregateOracle& oracle,
                       const AggregateBenchOptions& o, const std::function<void(const std::string&)>& say) {
  const Device dev = o.device;
  const cuda::DeviceGuard device_guard(dev.index);  // the events below are the current device's
  const std::int64_t N = r.nodes, F = r.features;
  say("copying the workload to " + dev.str());
  CudaRows rows(d, dev, N, F, r.edges);
  Tensor &xg = rows.xg, &sg = rows.sg, &dg = rows.dg, &wg = rows.wg, &out = rows.out, &wpg = rows.wpg;
  AggregatePlan& plan = rows.plan;
  PlanWeights& pw = rows.pw;
  using Path = CudaRows::Path;
  const std::vector<Path>& paths = rows.paths;

  // Protocol step 2: the in-service reference's run-to-run spread (float atomics).
  {
    const int runs = std::min(o.repeats, 5);
    say(fmt::format("reference spread: {} runs of three-op on {}", runs, dev.str()));
    // The first run is three-op's cold call (the loop's cold call was its sixth before: session 46).
    r.three_op_first_call_ms = time_ms([&] {
      paths[0].run();
      cuda::synchronize(dev.index);
    });
    Tensor first = to_device(out, Device::cpu());
    for (int i = 1; i < runs; ++i) {
      paths[0].run();
      Tensor again = to_device(out, Device::cpu());
      double m = 0;
      for (std::int64_t k = 0; k < N * F; ++k)
        m = std::max(m, double(std::fabs(first.data_as<float>()[k] - again.data_as<float>()[k])));
      r.reference_spread_max_abs = std::max(r.reference_spread_max_abs, m);
    }
    r.reference_spread_runs = runs;
  }

  cuda::Event start, stop;
  std::uint64_t poison_seed = 1000;
  // Every output a check reads starts poisoned (1e30-2e30, a fresh draw each time): an element a
  // run does not write keeps a value ~1e30 off the oracle (a violation of the per-element bound;
  // the report's `unwritten` counts NaN only), or differs from the cold call's bits.
  auto poison = [&] { cuda::fill_random_uniform(out, 1e30, 2e30, poison_seed++); };
  for (const Path& p : paths) {
    VariantResult v;
    v.name = p.name;
    // Promised deterministic: the planned and one-shot paths (lean: float atomics; three-op: the
    // reference, float atomics too). The one-shot runs as one plan on every named workload here;
    // on a device too full for its pairs beside a few destination ranges' sorts, its edge ranges
    // follow the free memory and its bits may differ from call to call (README; a warning says
    // so), which this check would report as a failure.
    v.deterministic = p.name == "one-shot" || p.name.starts_with("planned");
    if (p.name.starts_with("planned") && !plan.defined()) continue;
    if (p.name == "planned, w in plan order") {
      pw = plan.permute_weights(wg.view(), wpg.view());
      v.note = "w permuted once into plan order, before the cold call (not the protocol's planned run: that takes w in edge order)";
    }
    // Cold call: wall time of the synchronized call, allocator peak over what was held before.
    // Into a poisoned output: each path's check sees its own writes, not the previous path's.
    if (p.name != "plan-build") poison();
    cuda::synchronize(dev.index);
    cuda::release_cached_memory(dev.index);
    cuda::reset_peak_memory();
    const auto before = cuda::memory_stats();
    const std::size_t free_before = cuda::device_memory_info(dev.index).first;
    FreeMemorySampler sampler(dev.index, o.free_sample_us);
    v.cold_ms = time_ms([&] {
      p.run();
      cuda::synchronize(dev.index);
    });
    const std::size_t free_min = sampler.finish();
    if (sampler.measured()) v.process_peak_bytes = free_before > free_min ? std::int64_t(free_before - free_min) : 0;
    v.extra_peak_bytes = std::int64_t(cuda::memory_stats().peak - before.current);
    v.memory_exact = true;
    if (p.name == "three-op" && r.three_op_first_call_ms >= 0) {
      v.cold_ms = r.three_op_first_call_ms;
      v.note = "cold: the first of the reference-spread runs; extra memory from a later call";
    }
    Tensor cold_out;  // host copy of the verified cold call's output
    if (p.name != "plan-build") {
      cold_out = to_device(out, Device::cpu());
      VerifyReport rep = verify_aggregate(cold_out, oracle);
      const bool ok = judge(v, rep, r);
      say(fmt::format("{}: cold {:.2f} ms, +{:.3f} GiB allocator peak, {}", p.name, v.cold_ms,
                      double(v.extra_peak_bytes) / double(1 << 30), rep.summary()));
      if (!ok) {
        r.variants.push_back(v);
        continue;
      }
    } else {
      v.writes_output = false;
      v.within_tolerance = true;
      v.extra_peak_bytes = std::int64_t(plan.bytes());  // what the plan keeps; the build's transient peak is in the note
      v.note = fmt::format("plan keeps {:.2f} B/edge; transient build peak {:.2f} B/edge",
                           double(plan.bytes()) / double(r.edges),
                           double(cuda::memory_stats().peak - before.current) / double(r.edges));
    }
    for (int i = 0; i < o.warmup; ++i) p.run();
    std::vector<double> samples;
    // Device time between events, and the host's wall time of the same call up to its end on the
    // device (PROTOCOL.md §3.4: the synchronized wall time of the whole call; it shows host
    // waits inside a call, such as the one-shot's wait for its build's verdict).
    std::vector<double> walls;
    for (int i = 0; i < o.repeats; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      start.record();
      p.run();
      stop.record();
      stop.synchronize();
      walls.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      samples.push_back(stop.elapsed_ms(start));
    }
    v.time = stats_of(samples);
    v.wall = stats_of(walls);
    v.timed = true;
    if (p.name != "plan-build") v.effective_gbs = double(r.must_move_bytes) / (v.time.median * 1e-3) / 1e9;
    say(fmt::format("{}: median {:.3f} ms (min {:.3f}, max {:.3f})", p.name, v.time.median, v.time.min, v.time.max));
    // The last timed run's output (back to back with the others, the pools as the timed calls
    // left them): the cold call's bits where promised (one of the bitwise runs below), else the
    // per-element bound. Not poisoned before it (that would sit between the timed samples): the
    // poisoned runs below check that every run writes every element.
    const Tensor last_timed = p.name != "plan-build" ? to_device(out, Device::cpu()) : Tensor();
    if (p.name != "plan-build" && !v.deterministic) {
      v.later_runs_ok = verify_aggregate(last_timed, oracle).within_tolerance;
      if (!v.later_runs_ok) say(p.name + ": the last timed run's output broke the per-element bound");
    }
    if (p.name == "planned") {
      // The cold call's peak above includes what the plan builds at its first run given w in edge
      // order (the w permutation's tables and their transient arena); a warm call needs only its
      // scratch (E x 4 bytes where the permutation runs).
      cuda::synchronize(dev.index);
      cuda::reset_peak_memory();
      const auto warm_before = cuda::memory_stats();
      p.run();
      cuda::synchronize(dev.index);
      v.note = fmt::format("plan keeps {:.2f} B/edge after its first run; a warm call's allocator peak {:.2f} B/edge",
                           double(plan.bytes()) / double(r.edges),
                           double(cuda::memory_stats().peak - warm_before.current) / double(r.edges));
      say("planned: " + v.note);
    }
    if (v.deterministic || p.name == "lean") {
      // The paths promised deterministic: `repeats` more runs, each into a poisoned output (a run
      // that skipped a row could not match), compared bit for bit with the cold call's output.
      // After the timed samples, so that the copies back do not sit between them. Lean (float
      // atomics, not promised) is the control: the check must be able to say "differ".
      const std::size_t bytes = std::size_t(cold_out.numel()) * cold_out.view().itemsize();
      v.bitwise_runs = o.repeats + 1;  // the last timed run, then `repeats` poisoned ones
      v.bitwise_differing = std::memcmp(last_timed.data(), cold_out.data(), bytes) != 0;
      for (int i = 0; i < o.repeats; ++i) {
        poison();
        p.run();
        const Tensor again = to_device(out, Device::cpu());
        v.bitwise_differing += std::memcmp(again.data(), cold_out.data(), bytes) != 0;
        // Lean's runs are expected to differ, so the bits cannot tell one that skips a row: its
        // first poisoned run is verified against the oracle instead.
        if (!v.deterministic && i == 0 && !verify_aggregate(again, oracle).within_tolerance) {
          v.later_runs_ok = false;
          say(p.name + ": a poisoned rerun broke the per-element bound");
        }
      }
      say(fmt::format("{}: {} of {} further runs differ bitwise from the cold call (the last timed run among them)",
                      p.name, v.bitwise_differing, v.bitwise_runs));
    }
    r.variants.push_back(v);
  }

  if (!o.ab.empty() && plan.defined()) {
    // Verify each variant first (protocol step 3), then interleave: one sample of the default and
    // of each variant per round, in a fresh order each round.
    std::vector<AbVariant> abs;
    for (const std::string& spec : o.ab) abs.push_back(parse_ab(spec));
    // Each variant gets its own plan, built under its environment, so that settings read at plan
    // build (PIPELINK_AGG_SEGMENT, _CHUNK, _ROWS_PER_EDGE, _EDGES_PER_ROW) are A/B'd in one process too; the
    // environment is also set around each of its runs, for settings read at launch.
    std::vector<AggregatePlan> plans(abs.size() + 1, plan);
    for (std::size_t i = 0; i < abs.size(); ++i) {
      EnvScope env(abs[i].vars);
      plans[i + 1] = AggregatePlan::build(sg, dg, N);
    }
    // Five rows per variant, each verified first, then timed interleaved with the default: the
    // planned run (on the variant's plan), the same with w in plan order, the plan build, the
    // one-shot call (whose build reads
    // the knobs too, e.g. PIPELINK_AGG_BUILD_CHUNKS) and the lean call, the last three with their
    // allocator peak from the cold call (the plan build's: the new plan and its transient
    // scratch, where the main plan-build row reports what the plan keeps).
    // fill (may be empty): run untimed after the cold call, before the check, where run(i) does
    // not write the output itself (the plan-build rows: the planned run on the plan just built).
    // warmup: untimed rounds first.
    // After the rounds each variant runs once more into a poisoned output (and fill): the bits of
    // its cold call where the row is promised deterministic (all but lean), else the bound.
    auto ab_rows = [&](const std::string& what, const std::function<void(std::size_t)>& run, bool peak,
                       const std::function<void(std::size_t)>& fill = {}, int warmup = -1) {
      const bool deterministic = what != "lean";
      if (warmup < 0) warmup = o.warmup;
      const auto env_of = [&](std::size_t i) {
        return i == 0 ? std::vector<std::pair<std::string, std::string>>{} : abs[i - 1].vars;
      };
      std::vector<VariantResult> res(abs.size() + 1);
      std::vector<Tensor> cold(abs.size() + 1);  // host copies of the cold outputs, for the bits after
      res[0].name = what + " [default, A/B]";
      for (std::size_t i = 0; i < abs.size(); ++i) res[i + 1].name = what + " [" + abs[i].tag + "]";
      for (std::size_t i = 0; i <= abs.size(); ++i) {
        EnvScope env(env_of(i));
        res[i].deterministic = deterministic;
        poison();  // a variant that skips a row cannot pass
        cuda::synchronize(dev.index);
        cuda::reset_peak_memory();
        const auto before = cuda::memory_stats();
        res[i].cold_ms = time_ms([&] {
          run(i);
          cuda::synchronize(dev.index);
        });
        res[i].memory_exact = peak;  // measured for the plan-build, one-shot and lean rows only
        if (peak) res[i].extra_peak_bytes = std::int64_t(cuda::memory_stats().peak - before.current);
        if (fill) {
          fill(i);
          cuda::synchronize(dev.index);
        }
        cold[i] = to_device(out, Device::cpu());
        VerifyReport rep = verify_aggregate(cold[i], oracle);
        (void)judge(res[i], rep, r);
        say(fmt::format("{}: {}", res[i].name, rep.summary()));
        if (!deterministic) cold[i] = Tensor();
      }
      // A fresh order each round (seeded by --seed): a run right after a destination- or
      // edge-range one-shot call was slower in a fixed order (its build allocates from a pool the
      // ranges just reshaped): one-shot 7.15-7.24 ms for whichever variant came next, against
      // 6.47-6.92 for the others (H200, v12, products-like), so a fixed order would bias the ratios.
      std::vector<std::vector<double>> samples(abs.size() + 1);
      std::vector<std::size_t> order(abs.size() + 1);
      std::iota(order.begin(), order.end(), std::size_t(0));
      std::mt19937_64 rng(o.seed + 31);
      for (int round = 0; round < warmup + o.repeats; ++round) {
        std::shuffle(order.begin(), order.end(), rng);
        for (std::size_t i : order) {
          if (!res[i].meets_contract()) continue;
          EnvScope env(env_of(i));
          start.record();
          run(i);
          stop.record();
          stop.synchronize();
          if (round >= warmup) samples[i].push_back(stop.elapsed_ms(start));
        }
      }
      for (std::size_t i = 0; i <= abs.size(); ++i) {
        if (res[i].meets_contract()) {
          {  // one more run, poisoned first, against the cold call (see above)
            EnvScope env(env_of(i));
            poison();
            run(i);
            if (fill) fill(i);
            const Tensor again = to_device(out, Device::cpu());
            if (deterministic) {
              res[i].bitwise_runs = 1;
              res[i].bitwise_differing =
                  std::memcmp(again.data(), cold[i].data(), std::size_t(again.numel()) * again.view().itemsize()) != 0;
            } else {
              res[i].later_runs_ok = verify_aggregate(again, oracle).within_tolerance;
            }
            if (!res[i].meets_contract()) say(res[i].name + ": after the rounds, " + res[i].contract_failure());
          }
          res[i].time = stats_of(samples[i]);
          res[i].timed = true;
          // No bandwidth where run(i) writes no output (fill given: the plan-build rows).
          if (!fill) res[i].effective_gbs = double(r.must_move_bytes) / (res[i].time.median * 1e-3) / 1e9;
          if (i > 0 && res[0].timed)
            res[i].note = fmt::format("{} vs default in the same rounds: {:.3f}x the time (speed-up {})", abs[i - 1].tag,
                                      res[i].time.median / res[0].time.median,
                                      ratio_text(res[0].time.median / res[i].time.median));
          say(fmt::format("{}: median {:.3f} ms (min {:.3f}, max {:.3f})", res[i].name, res[i].time.median,
                          res[i].time.min, res[i].time.max));
        }
        r.variants.push_back(res[i]);
      }
    };
    ab_rows("planned", [&](std::size_t i) { aggregate(plans[i], xg, wg.view(), out); }, false);
    // w in plan order too (AggregatePlan::permute_weights on each variant's plan, into a buffer of
    // its own, under its knobs): its kernel form differs from the planned row's on some plans
    // (v41: power-law's kWPlanOrder form, 3.71 against 4.13 ms only across two machine starts).
    // Before the plan-build rows, which replace plans[i].
    std::vector<Tensor> wbufs;
    std::vector<PlanWeights> wplans;
    wbufs.reserve(abs.size() + 1);  // no reallocation under the views the PlanWeights keep
    for (std::size_t i = 0; i <= abs.size(); ++i) {
      EnvScope env(i == 0 ? std::vector<std::pair<std::string, std::string>>{} : abs[i - 1].vars);
      wbufs.push_back(TensorBuilder().shape({r.edges}).device(dev).build());
      wplans.push_back(plans[i].permute_weights(wg.view(), wbufs.back().view()));
    }
    ab_rows(
        "planned, w in plan order", [&](std::size_t i) { aggregate(plans[i], xg, wplans[i], out); }, false);
    wplans.clear();
    wbufs.clear();  // their device memory back before the rows that measure peaks
    // The plan build under each variant (its knobs read at build: PIPELINK_AGG_BUILD_SORT,
    // _BUILD_FIRST, ...), checked by a planned run on the plan it built; the plan it replaces is
    // freed after, as when a user rebuilds with the old plan alive. Five more untimed rounds:
    // in v35's first such A/B (H200, products-like, three variants) the first five timed rounds
    // ran 2.1-4.9 ms under every variant while the default pool took the three footprints'
    // plans, the last five 2.02-2.07.
    ab_rows(
        "plan-build", [&](std::size_t i) { plans[i] = AggregatePlan::build(sg, dg, N); }, true,
        [&](std::size_t i) { aggregate(plans[i], xg, wg.view(), out); }, o.warmup + 5);
    ab_rows("one-shot", [&](std::size_t) { aggregate(xg, sg, dg, wg.view(), out, {.path = AggregatePath::one_shot}); }, true);
    // And lean, which reads no knob (a control: it must not move under a variant); its peak must stay 0.
    ab_rows("lean", [&](std::size_t) { aggregate(xg, sg, dg, wg.view(), out, {.path = AggregatePath::lean}); }, true);
  }

  if (o.null_test) {
    say("null test: one-shot with 4x the edges");
    const WorkloadData nd = null_test_workload(d, o.seed);
    const EdgeList& g4 = nd.graph;
    const Tensor& w4 = nd.w;
    Tensor s4 = to_device(g4.src, dev), d4 = to_device(g4.dst, dev), w4g = to_device(w4, dev);
    auto run4 = [&] { aggregate(xg, s4, d4, w4g.view(), out, {.path = AggregatePath::one_shot}); };
    poison();
    for (int i = 0; i < std::max(1, o.warmup); ++i) run4();  // --warmup, at least one (one before session 49)
    std::vector<double> s;
    for (int i = 0; i < o.repeats; ++i) {  // (max(3, repeats / 2) before: the protocol asks >= 10)
      start.record();
      run4();
      stop.record();
      stop.synchronize();
      s.push_back(stop.elapsed_ms(start));
    }
    r.null_samples_ms = s;
    if (const VariantResult* one = r.find("one-shot"); one && one->timed) r.null_ratio = stats_of(s).median / one->time.median;
    // After the timed samples (the host's check, seconds at 4x products-like, would idle the GPU
    // between the warm run and them): one more run into a poisoned output, on sampled rows.
    poison();
    run4();
    check_null_test(r, to_device(out, Device::cpu()), d.x, g4, w4.view());
    say("null test: " + r.null_check);
  }
}

}  // namespace pipelink::bench
