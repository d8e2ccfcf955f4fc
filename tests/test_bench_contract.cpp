// The benchmark's verdicts (bench/aggregate_bench.*): which variant meets PROTOCOL.md §2's
// contract, and that a failure shows in the JSON, the Markdown and the CLI's exit status. The
// GPU half takes the same verdicts (judge, contract_failure, check_null_test); only the CPU's
// bench can run here, so the failures are made by hand.
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aggregate_bench.hpp"
#include "aggregate_sweep.hpp"
#include "test_util.hpp"

namespace pipelink::test {
namespace {

using bench::AggregateBenchResult;
using bench::VariantResult;

VerifyReport report(bool ok, double rel_l2) {
  VerifyReport r;
  r.within_tolerance = ok;
  r.violations = ok ? 0 : 3;
  r.rel_l2_err = rel_l2;
  return r;
}

TEST(BenchContract, TheL2RuleTakesThreeOpsOwnError) {
  AggregateBenchResult r;
  VariantResult ref;
  ref.name = "three-op";
  EXPECT_TRUE(bench::judge(ref, report(true, 4e-7), r));
  EXPECT_EQ(r.reference_rel_l2, 4e-7);
  EXPECT_EQ(ref.rel_l2_limit, 1e-6) << "max(1e-6, 2 x 4e-7)";
  VariantResult v;
  v.name = "planned";
  EXPECT_TRUE(bench::judge(v, report(true, 9.9e-7), r));
  EXPECT_TRUE(v.meets_contract());
  EXPECT_FALSE(bench::judge(v, report(true, 1.1e-6), r)) << "within every element's bound, over the L2 limit";
  EXPECT_NE(v.contract_failure().find("rel L2"), std::string::npos) << v.contract_failure();
  EXPECT_NE(v.note.find("not timed"), std::string::npos) << v.note;
  // A reference with a larger error of its own (power-law's hub rows: 1.2e-6) sets 2x that.
  r.reference_rel_l2 = -1;
  ref.name = "three-op";
  EXPECT_TRUE(bench::judge(ref, report(true, 1.2e-6), r));
  v = VariantResult{};
  v.name = "one-shot";
  EXPECT_TRUE(bench::judge(v, report(true, 2.3e-6), r));
  EXPECT_FALSE(bench::judge(v, report(true, 2.5e-6), r));
  // An A/B row is never the reference, whatever its name holds.
  VariantResult arm;
  arm.name = "three-op [tag]";
  (void)bench::judge(arm, report(true, 9e-7), r);
  EXPECT_EQ(r.reference_rel_l2, 1.2e-6);
  // A NaN error is over any limit.
  EXPECT_FALSE(bench::judge(v, report(true, std::numeric_limits<double>::quiet_NaN()), r));
  // A reference that fails its own check sets no allowance: the floor, 1e-6.
  EXPECT_FALSE(bench::judge(ref, report(false, 5e-6), r));
  EXPECT_EQ(r.reference_rel_l2, -1);
  v = VariantResult{};
  v.name = "lean";
  EXPECT_FALSE(bench::judge(v, report(true, 1.5e-6), r));
  EXPECT_FALSE(bench::judge(v, report(false, 1e-8), r)) << "the per-element bound";
  EXPECT_EQ(v.contract_failure(), "per-element bound");
}

TEST(BenchContract, BitsWherePromisedAndTheRunsAfterTiming) {
  VariantResult v;
  v.name = "planned";
  v.within_tolerance = true;
  v.deterministic = true;
  v.bitwise_runs = 11;
  v.bitwise_differing = 0;
  EXPECT_TRUE(v.meets_contract());
  v.bitwise_differing = 1;
  EXPECT_EQ(v.contract_failure(), "runs differ bitwise");
  v.deterministic = false;  // lean: its differing runs are the check's control
  EXPECT_TRUE(v.meets_contract());
  v.later_runs_ok = false;
  EXPECT_EQ(v.contract_failure(), "a later run broke the per-element bound");
}

TEST(BenchContract, FailuresShowInTheJsonAndMarkdown) {
  AggregateBenchResult r;
  r.options.device = Device::cpu();
  VariantResult good, bad;
  good.name = "fused";
  good.within_tolerance = true;
  good.timed = true;
  bad.name = "planned";
  bad.within_tolerance = true;
  bad.rel_l2_err = 3e-6;
  bad.rel_l2_limit = 1e-6;
  r.variants = {good, bad};
  r.null_ratio = 4.1;
  r.null_ok = false;
  r.null_check = "2000 rows: violations=7";
  const std::string md = r.to_markdown(), js = r.to_json();
  EXPECT_NE(md.find("| yes |"), std::string::npos) << md;
  EXPECT_NE(md.find("**no**: rel L2 over 1.00e-06"), std::string::npos) << md;
  EXPECT_NE(md.find("**2000 rows: violations=7**"), std::string::npos) << md;
  EXPECT_NE(js.find("\"meets_contract\": false"), std::string::npos);
  EXPECT_NE(js.find("\"contract_failure\": \"rel L2 over 1.00e-06\""), std::string::npos);
  EXPECT_NE(js.find("\"sampled_rows_check\": \"2000 rows: violations=7\""), std::string::npos);
}

// A GPU result with one timed one-shot row: a description only, no GPU needed.
AggregateBenchResult gpu_one_shot_result(double median_ms = 0, double wall_ms = 0) {
  AggregateBenchResult r;
  r.options.device = Device::parse("cuda:0");
  VariantResult v;
  v.name = "one-shot";
  v.within_tolerance = v.timed = true;
  v.time.median = median_ms;
  v.wall.median = wall_ms;
  r.variants = {v};
  return r;
}

TEST(BenchContract, GpuTablesGiveTheWallTimeOfACall) {
  AggregateBenchResult r = gpu_one_shot_result(6.05, 6.1);
  VariantResult arm = r.variants[0];
  arm.name = "one-shot [ew]";  // A/B rows: event times only
  r.variants.push_back(arm);
  const std::string md = r.to_markdown();
  EXPECT_NE(md.find("synchronized wall time per call, median ms (host to the end on the device): one-shot 6.100\n"),
            std::string::npos)
      << md;
  EXPECT_NE(r.to_json().find("\"wall_median_ms\": 6.1"), std::string::npos);
}

TEST(BenchContract, GpuTablesSayHowTheColdCallWasSampled) {
  // The cold call's free-memory sampler may cost the call its time (products-like on an H100: the
  // in-process one-shot cold call 30.8-39.3 ms in v54-v55 against 25.7 in a fresh process without
  // one in v54): the tables say which ran.
  AggregateBenchResult r = gpu_one_shot_result();
  EXPECT_EQ(r.options.free_sample_us, 50);
  EXPECT_NE(r.to_markdown().find("for free memory every 50 us during it"), std::string::npos) << r.to_markdown();
  EXPECT_NE(r.to_json().find("\"free_sample_us\": 50"), std::string::npos);
  r.options.free_sample_us = 0;
  EXPECT_NE(r.to_markdown().find("no free-memory sampler ran during it"), std::string::npos) << r.to_markdown();
  EXPECT_NE(r.to_json().find("\"free_sample_us\": 0"), std::string::npos);
  r.options.device = Device::cpu();  // the CPU has no such sampler: no word of it
  EXPECT_EQ(r.to_markdown().find("sampler"), std::string::npos) << r.to_markdown();
  EXPECT_EQ(r.to_json().find("free_sample_us"), std::string::npos);
}

TEST(BenchContract, NullTestChecksSampledRows) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const std::int64_t N = 5000, F = 4;
  const auto [g, x, w] = graph_inputs(N, 80000, F, seed);
  Tensor out = TensorBuilder().shape({N, F}).build();
  poison(out);
  aggregate(x, g.src, g.dst, w.view(), out);
  AggregateBenchResult r;
  bench::check_null_test(r, out, x, g, w.view());
  EXPECT_TRUE(r.null_ok) << r.null_check;
  // Every (N / 2000)-th row from the middle of the first step: rows 1, 3, 5, ..., 4999 at N = 5000.
  EXPECT_EQ(r.null_check.rfind("2500 rows: ", 0), 0u) << r.null_check;
  out.data_as<float>()[3 * F + 2] = std::numeric_limits<float>::quiet_NaN();
  bench::check_null_test(r, out, x, g, w.view());
  EXPECT_FALSE(r.null_ok);
  EXPECT_NE(r.null_check.find("unwritten=1"), std::string::npos) << r.null_check;
}

TEST(BenchContract, CpuBenchPassesAndSaysSo) {
  bench::AggregateBenchOptions o;
  o.edge_scale = 0.01;
  o.repeats = 2;
  o.warmup = 0;
  const AggregateBenchResult r = bench::run_aggregate_bench(o);
  ASSERT_FALSE(r.variants.empty());
  for (const VariantResult& v : r.variants) {
    EXPECT_TRUE(v.meets_contract()) << v.name << ": " << v.contract_failure();
    EXPECT_TRUE(v.timed) << v.name;
    EXPECT_EQ(v.wall.median, v.time.median) << v.name << ": on the CPU the time is the wall time";
    if (v.name == "plan-build") {  // writes no output: its row is time and the plan's bytes
      EXPECT_GT(v.extra_peak_bytes, 0);
      continue;
    }
    EXPECT_GT(v.rel_l2_limit, 0) << v.name;
    EXPECT_EQ(v.deterministic, v.name != "three-op") << v.name;
    if (v.deterministic) {
      EXPECT_EQ(v.bitwise_differing, 0) << v.name;
    }
  }
  ASSERT_NE(r.find("plan-build"), nullptr);  // the CPU's build has its row (none before session 46)
  EXPECT_GT(r.reference_rel_l2, 0);
  EXPECT_TRUE(r.null_ok) << r.null_check;
  EXPECT_FALSE(r.null_check.empty());
}

TEST(BenchContract, RunProcessGivesStdoutAndStatus) {
  // --cold-processes' children run through run_process (fork and exec, no shell): their stdout
  // comes back whole, their exit status as given, and a program that cannot start as 127.
  std::string out;
  EXPECT_EQ(bench::run_process({"/bin/sh", "-c", "printf 'a\\nb'; exit 3"}, out), 3);
  EXPECT_EQ(out, "a\nb");
  const std::string big(200000, 'x');  // past a pipe's buffer: read while the child writes
  EXPECT_EQ(bench::run_process({"/bin/sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x"}, out), 0);
  EXPECT_EQ(out, big);
  EXPECT_EQ(bench::run_process({"/nonexistent/program"}, out), 127);
  EXPECT_EQ(out, "");
  EXPECT_EQ(bench::run_process({}, out), -1);
  EXPECT_EQ(bench::run_process({"/bin/sh", "-c", "kill -9 $$"}, out), -1);  // ended by a signal
}

TEST(BenchContract, SweepOneShotRunsOnePlanAndSaysSo) {
  // The sweep's one-shot points: one plan unless the environment sets the knob (a one-shot short
  // of memory would otherwise run edge ranges and read "ok" past one plan's reach; session 51).
  {
    const ScopedEnv unset({{"PIPELINK_AGG_ONESHOT_CHUNKS", nullptr}});
    {
      const bench::OneShotOnePlan k;
      ASSERT_NE(std::getenv("PIPELINK_AGG_ONESHOT_CHUNKS"), nullptr);
      EXPECT_STREQ(std::getenv("PIPELINK_AGG_ONESHOT_CHUNKS"), "1");
      EXPECT_EQ(k.value(), "1");
      EXPECT_TRUE(k.set_by_sweep());
      EXPECT_NE(k.means().find("one plan"), std::string::npos);
    }
    EXPECT_EQ(std::getenv("PIPELINK_AGG_ONESHOT_CHUNKS"), nullptr) << "the sweep's knob outlived it";
  }
  {
    // Set but empty is the library's default (0): the sweep sets 1 as if unset.
    const ScopedEnv empty({{"PIPELINK_AGG_ONESHOT_CHUNKS", ""}});
    const bench::OneShotOnePlan k;
    EXPECT_EQ(k.value(), "1");
    EXPECT_TRUE(k.set_by_sweep());
  }
  {
    const ScopedEnv def({{"PIPELINK_AGG_ONESHOT_CHUNKS", "0"}});
    EXPECT_NE(bench::OneShotOnePlan().means().find("the library's default"), std::string::npos);
    const ScopedEnv bad({{"PIPELINK_AGG_ONESHOT_CHUNKS", "x"}});
    const std::string m = bench::OneShotOnePlan().means();
    EXPECT_NE(m.find("the library refuses the knobs"), std::string::npos) << m;
    EXPECT_NE(m.find("PIPELINK_AGG_ONESHOT_CHUNKS"), std::string::npos) << m;  // the library's own message
  }
  {
    // Another knob's error reads as the knobs', not as this one's (a review, session 53).
    const ScopedEnv other({{"PIPELINK_AGG_ONESHOT_CHUNKS", nullptr}, {"PIPELINK_AGG_SEGMENT", "bad"}});
    const std::string m = bench::OneShotOnePlan().means();
    EXPECT_NE(m.find("the library refuses the knobs (aggregate: PIPELINK_AGG_SEGMENT='bad'"), std::string::npos) << m;
  }
  {
    // Read as the library reads it: "007" is 7 ranges there, so it is here.
    const ScopedEnv padded({{"PIPELINK_AGG_ONESHOT_CHUNKS", "007"}});
    EXPECT_NE(bench::OneShotOnePlan().means().find("forced edge ranges (7 a call)"), std::string::npos)
        << bench::OneShotOnePlan().means();
  }
  {
    const ScopedEnv forced({{"PIPELINK_AGG_ONESHOT_CHUNKS", "3"}});
    {
      const bench::OneShotOnePlan k;
      EXPECT_EQ(k.value(), "3");
      EXPECT_FALSE(k.set_by_sweep());
      EXPECT_NE(k.means().find("forced edge ranges"), std::string::npos);
    }
    EXPECT_STREQ(std::getenv("PIPELINK_AGG_ONESHOT_CHUNKS"), "3") << "the caller's knob was changed";
  }
  // The Markdown names the knob the one-shot points ran under.
  const std::string json = R"J({"workload": {"name": "products-like", "nodes": 4, "features": 2, "index_dtype": "int32"},
    "device": {"name": "a GPU", "copy_bandwidth_gbs": 1000.0}, "git": "abc", "date": "2026-12-05", "timing": "events",
    "memory": "peak", "repeats_meet_protocol": true,
    "reach": {"one-shot": {"max_edges_run": 8, "first_failure": 16}},
    "one_shot": {"knob": "PIPELINK_AGG_ONESHOT_CHUNKS", "value": "1", "set_by_sweep": true, "means": "one plan (...)"},
    "points": [{"edges": 8, "path": "one-shot", "status": "ok", "median_ms": 1.0, "extra_peak_bytes": 100},
               {"edges": 16, "path": "one-shot", "status": "out_of_memory"}]})J";
  const std::string md = bench::sweep_markdown(json);
  EXPECT_NE(md.find("The one-shot points ran under PIPELINK_AGG_ONESHOT_CHUNKS=1: one plan"), std::string::npos) << md;
  EXPECT_NE(md.find("| 16 | out of memory |"), std::string::npos) << md;
}

TEST(BenchContract, SweepHandsOverEachSizeAsItIsDone) {
  // A sweep cut short keeps what it measured: each edge count's points go to o.partial, marked
  // partial; the returned document is the whole, marked complete (session 51).
  bench::SweepOptions o;
  o.workload = "arxiv-like";
  o.start_edges = 4096;
  o.max_edges = 8192;
  o.repeats = 1;
  std::vector<nlohmann::json> seen;
  o.partial = [&](const std::string& text) { seen.push_back(nlohmann::json::parse(text)); };
  const nlohmann::json whole = nlohmann::json::parse(bench::run_aggregate_sweep(o));
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].at("complete"), false);
  EXPECT_EQ(seen[0].at("partial_after_edges"), 4096);
  for (const auto& p : seen[0].at("points")) EXPECT_EQ(p.at("edges"), 4096) << p.dump();
  EXPECT_EQ(seen[0].at("points").size(), 2u);  // three-op and fused at the first size
  EXPECT_EQ(seen[0].at("reach").at("fused").at("max_edges_run"), 4096);
  EXPECT_EQ(seen[1].at("partial_after_edges"), 8192);
  EXPECT_EQ(seen[1].at("points").size(), 4u);
  EXPECT_EQ(whole.at("complete"), true);
  EXPECT_FALSE(whole.contains("partial_after_edges"));
  EXPECT_EQ(whole.at("points"), seen[1].at("points"));
  const std::string md = bench::sweep_markdown(seen[0].dump());
  EXPECT_NE(md.find("**Partial**: the sweep stopped after 4096 edges"), std::string::npos) << md;
  EXPECT_NE(md.find("- fused: 4096 (no failure yet)"), std::string::npos) << md;
  EXPECT_EQ(md.find("up to the sweep's cap"), std::string::npos) << md;
  EXPECT_EQ(bench::sweep_markdown(whole.dump()).find("Partial"), std::string::npos);
}

TEST(BenchContract, CpuSweepRecordsWhatWouldNotFitInsteadOfRunningIt) {
  // The three-op's two [E, F] intermediates past 90% of the host memory given: recorded out of
  // memory, not run (at 2^26 edges a 23 GB machine's kernel killed the sweep; session 51).
  bench::SweepOptions o;
  o.workload = "arxiv-like";  // F = 64: the three-op needs 512 bytes an edge
  o.start_edges = 8192;
  o.max_edges = 16384;
  o.repeats = 1;
  o.host_memory_bytes = 6'000'000;  // 90%: 5.4 MB; 8192 edges need 4.6 MB, 16384 need 9.2 MB
  const nlohmann::json j = nlohmann::json::parse(bench::run_aggregate_sweep(o));
  bool skipped = false;
  for (const auto& p : j.at("points")) {
    if (p.at("path") != "three-op") continue;
    if (p.at("edges") == 8192) {
      EXPECT_EQ(p.at("status"), "ok") << p.dump();
    }
    if (p.at("edges") == 16384) {
      EXPECT_EQ(p.at("status"), "out_of_memory") << p.dump();
      EXPECT_EQ(p.value("estimated", false), true) << p.dump();
      skipped = true;
    }
  }
  EXPECT_TRUE(skipped);
  EXPECT_EQ(j.at("reach").at("three-op").at("max_edges_run"), 8192);
  EXPECT_EQ(j.at("reach").at("three-op").at("first_failure"), 16384);
  EXPECT_EQ(j.at("reach").at("fused").at("max_edges_run"), 16384);  // 64 bytes an edge: it fits
}

}  // namespace
}  // namespace pipelink::test
