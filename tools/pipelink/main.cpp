// The `pipelink` command-line tool: ops, demo, aggregate, bench aggregate, inspect.
// Library errors are exceptions; here they become one line on stderr and exit status 2
// (status 1 for a failed verification).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <optional>
#include <string_view>

#include "aggregate_bench.hpp"
#include "aggregate_sweep.hpp"
#include "commands.hpp"
#include "pipelink/pipelink.hpp"

namespace {
// Progress lines for long runs, each with the seconds since the run began ("[bench 12.3s] ..."),
// so that a log shows where a run's time went (the GPU machine's time is counted).
std::function<void(const std::string&)> progress_printer(const char* what) {
  const auto t0 = std::chrono::steady_clock::now();
  return [what, t0](const std::string& s) {
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cerr << "[" << what << " " << fmt::format("{:.1f}", t) << "s] " << s << std::endl;
  };
}

// A regular file, or none yet: what may take partial writes and a probe (a FIFO or a terminal
// takes one document, written in place; a FIFO's reader got the first partial one and the sweep
// hung on the next open: a review, session 51).
bool regular_or_new(const std::string& p) {
  std::error_code ec;
  const auto st = std::filesystem::status(p, ec);
  return st.type() == std::filesystem::file_type::not_found || st.type() == std::filesystem::file_type::regular;
}

// An output path the run could not write is said before the run, not after it: a bench into a
// missing folder ran its whole benchmark first (a newcomer's review, session 51). The probe
// makes AtomicFile's temporary file next to the target and removes it; the target is untouched.
// A directory is refused here too: it was found only after the run (a review, session 52).
void check_writable(const std::string& p, const char* option) {
  std::error_code ec;
  if (!p.empty() && std::filesystem::is_directory(p, ec))
    throw pipelink::Error(fmt::format("{}: cannot write '{}': it is a directory", option, p));
  if (p.empty() || !regular_or_new(p)) return;
  const pipelink::AtomicFile probe(p, option);
}

// --json and --markdown naming one file: the second write replaced the first, and a sweep's JSON
// came out as Markdown (a review, session 52). Compared as absolute, normalized paths, or as the
// same file where both exist (a link).
// Regular or new files only: /dev/null twice is fine. A path that cannot be resolved counts as
// distinct (two unresolvable paths once compared equal as two empty ones: a second review).
void check_distinct(const std::string& json, const std::string& md) {
  if (json.empty() || md.empty() || !regular_or_new(json) || !regular_or_new(md)) return;
  namespace fs = std::filesystem;
  auto resolved = [](const std::string& p) -> std::optional<fs::path> {
    std::error_code ec;
    const fs::path a = fs::absolute(p, ec);  // "same" and "./same" alike (weakly_canonical kept the first relative)
    if (ec) return std::nullopt;
    fs::path c = fs::weakly_canonical(a, ec);
    if (ec) return std::nullopt;
    return c;
  };
  const auto a = resolved(json), b = resolved(md);
  std::error_code ec;
  const bool same = (a && b && *a == *b) || fs::equivalent(json, md, ec);
  if (same) throw pipelink::Error(fmt::format("--json and --markdown name the same file '{}'", json));
}

// A bench command's two outputs, before its run: neither given as '' (that wrote nothing, without
// a word: a bad-input probe, session 52), not one file for both, each writable.
void check_outputs(const CLI::App& cmd, const std::string& json, const std::string& md) {
  for (auto [name, value] : {std::pair{"--json", &json}, std::pair{"--markdown", &md}})
    if (cmd.get_option(name)->count() > 0 && value->empty())
      throw pipelink::Error(fmt::format("{}: an empty path (leave the option out to write no file)", name));
  check_distinct(json, md);
  check_writable(json, "--json");
  check_writable(md, "--markdown");
}

// Numeric options' checks with messages a reader can act on: CLI11's own said "Value -1 not in
// range 0.000000 to 1797693134862315708...368.000000" (a review, session 52).
CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        try {
          std::size_t used = 0;
          const double v = std::stod(s, &used);
          if (used == s.size() && v > 0 && std::isfinite(v)) return {};
        } catch (const std::exception&) {
        }
        return fmt::format("must be a positive number, got '{}'", s);
      },
      "positive number");
}
// Integers as decimal digits, in [lo, hi], written back in canonical form: CLI11 converts with
// base 0, so "010" ran 8 repeats and seed 8, and "0x10" passed as 16 (a second review). Given with
// ->transform(), not ->check(): a check's changes to the string are dropped.
template <class T>
CLI::Validator decimal_integer(T lo, T hi, std::string what) {
  return CLI::Validator(
      [lo, hi, what](std::string& s) -> std::string {
        T v{};
        const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec == std::errc() && p == s.data() + s.size() && v >= lo && v <= hi) {
          s = std::to_string(v);
          return {};
        }
        return fmt::format("must be {}, got '{}'", what, s);
      },
      what);
}
CLI::Validator positive_int() {
  return decimal_integer<std::int64_t>(1, std::numeric_limits<int>::max(), "a positive integer");
}
CLI::Validator positive_int64() {
  return decimal_integer<std::int64_t>(1, std::numeric_limits<std::int64_t>::max(), "a positive integer");
}
// A 64-bit seed as written: "-1" wrapped to 2^64 - 1 and 10^20 saturated to it before.
const CLI::Validator kSeed = decimal_integer<std::uint64_t>(0, std::numeric_limits<std::uint64_t>::max(),
                                                            "an integer in [0, 2^64 - 1]");
}  // namespace

int main(int argc, char** argv) {
  using namespace pipelink;
  CLI::App app{"PipeLink: contract-checked, composable GPU operators"};
  app.require_subcommand(1);
  std::string log_level;
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off (default: $PIPELINK_LOG_LEVEL or warn)");

  // ops
  tools::OpsOptions ops_opts;
  auto* ops = app.add_subcommand("ops", "List every op with its contract, as a table");
  ops->add_option("--arch", ops_opts.arch, "Also show which variant each op would use on this device (cpu, sm_80, sm_90)");
  ops->add_flag("--json", ops_opts.json, "Machine-readable output");

  // demo
  tools::DemoOptions demo_opts;
  auto* demo = app.add_subcommand("demo", "The main job: the fused aggregate on an embedded workload, checked and "
                                          "compared with the materialized three-op path");
  demo->add_option("--workload", demo_opts.workload, "Named workload")->capture_default_str();
  demo->add_option("--repeats", demo_opts.repeats, "Timed repeats")->capture_default_str()->transform(positive_int());
  demo->add_option("--device", demo_opts.device, "auto (the GPU where one answers, else the CPU), cpu or cuda[:N]")
      ->capture_default_str();

  // aggregate
  tools::AggregateFileOptions agg;
  auto* aggc = app.add_subcommand("aggregate", "Run the aggregate on files: out[dst] += phi(x[src] * w)");
  aggc->add_option("--graph", agg.graph, "SNAP edge list ('a b': a message from a to b) or Matrix Market file")->required();
  aggc->add_option("--x", agg.x, "Node features, .npy [N, F] float32|float64")->required();
  aggc->add_option("--w", agg.w, "Edge weights, .npy [E] (default: a Matrix Market file's values, else 1; a SNAP file's extra columns are ignored)");
  aggc->add_option("--transform", agg.transform, "identity|tanh|relu|sigmoid")->capture_default_str();
  aggc->add_option("--out", agg.out, "Output .npy [N, F] (written atomically)")->required();
  aggc->add_option("--device", agg.device, "cpu|cuda[:N]")->capture_default_str();
  aggc->add_flag("--check", agg.check, "Verify against the float64 oracle and report the error");

  // bench aggregate
  auto* bench = app.add_subcommand("bench", "Benchmarks following PROTOCOL.md §3");
  bench->require_subcommand(1);
  bench::AggregateBenchOptions bopt;
  std::string device = "cpu", json_path, md_path;
  bool quiet = false;
  auto* bagg = bench->add_subcommand("aggregate", "Fused aggregate vs the three-op reference");
  bagg->add_option("--workload", bopt.workload, "arxiv-like|products-like|seed-40M|power-law")->capture_default_str();
  bagg->add_option("--order", bopt.order, "random|dst-sorted")->capture_default_str();
  bagg->add_option("--device", device, "cpu (cuda with the CUDA backend)")->capture_default_str();
  bagg->add_option("--repeats", bopt.repeats, "Timed repeats (>= 10 for the protocol)")
      ->capture_default_str()
      ->transform(positive_int());
  bagg->add_option("--seed", bopt.seed, "Workload seed")->capture_default_str()->transform(kSeed);
  bagg->add_option("--edge-scale", bopt.edge_scale, "Scale the workload's edge count (1 = as registered)")
      ->check(positive_number());
  bagg->add_flag("--relabel", bopt.relabel,
                 "Rename the nodes by a random permutation after generation (power-law's hubs at random ids "
                 "instead of R-MAT's low ones)");
  bagg->add_flag("!--no-null-test", bopt.null_test, "Skip the 4x-edges null test");
  bagg->add_option(
      "--ab", bopt.ab,
      "CUDA: A/B of knobs, 'tag:VAR=1[,VAR2=1]' each (repeatable; every knob in docs/KNOBS.md): a plan built "
      "under each (every plan-build knob is read at build), "
      "its planned run, the plan build itself (checked by a planned run on the plan), a one-shot "
      "call and a lean call (the last three with their allocator peak) verified, then timed "
      "interleaved with the default. Knobs read at each call do change "
      "between the arms (PIPELINK_AGG_LEAN_ORDER, _TANH, _STAGED_ISSUE); settings read once per "
      "process (PIPELINK_AGG_STAGED, _LONG_ROW) do not");
  bool cold_processes = false;
  bagg->add_flag("--cold-processes", cold_processes,
                 "Also call each row's path once in a fresh process of this program (its inputs made and "
                 "copied, its prerequisites built, then the one call: PROTOCOL.md 3.4's cold first call, with "
                 "nothing loaded by an earlier row); cold_process_ms in the JSON");
  bagg->add_option("--cold-call", bopt.cold_call,
                   "Internal (--cold-processes' child): time only this row's first call and print "
                   "{\"cold_call\": ..., \"cold_ms\": ...} on stdout");
  bagg->add_option("--free-sample-us", bopt.free_sample_us,
                   "CUDA: how often the cold call's process-level memory sampler asks the driver for free memory, in "
                   "microseconds (0: no sampler and no process figure; to see what the sampler costs the cold call)")
      ->capture_default_str()
      ->transform(decimal_integer<std::int64_t>(0, 1000000, "an integer in [0, 1000000]"));
  bagg->add_option("--json", json_path, "Write the versioned JSON result here");
  bagg->add_option("--markdown", md_path, "Write the Markdown table here");
  bagg->add_flag("--quiet", quiet, "No progress lines on stderr");

  bench::SweepOptions sweep;
  std::string sweep_device = "cpu", sweep_json, sweep_markdown, sweep_index = "int32";
  bool sweep_quiet = false;
  auto* bsweep = bench->add_subcommand("sweep", "Edge-count sweep: E doubles until each path runs out of memory");
  bsweep->add_option("--workload", sweep.workload, "Named workload giving N and F (edges drawn uniformly)")->capture_default_str();
  bsweep->add_option("--device", sweep_device, "cpu|cuda[:N]")->capture_default_str();
  bsweep->add_option("--start-edges", sweep.start_edges, "First edge count")->capture_default_str()->transform(positive_int64());
  bsweep->add_option("--max-edges", sweep.max_edges, "Stop after this edge count (0: until every path fails; CPU caps at 2^26)")
      ->transform(decimal_integer<std::int64_t>(0, std::numeric_limits<std::int64_t>::max(), "a non-negative integer"));
  bsweep->add_option("--repeats", sweep.repeats, "Timed repeats per point")->capture_default_str()->transform(positive_int());
  bsweep->add_option("--json", sweep_json, "Write the JSON here (plot with bench/plot_sweep.py)")->required();
  bsweep->add_option("--markdown", sweep_markdown, "Also write a Markdown table here");
  bsweep->add_option("--index-dtype", sweep_index, "int32|int64: src and dst (the named workloads' own are int64)")
      ->capture_default_str()
      ->check(CLI::IsMember({"int32", "int64"}));
  bsweep->add_flag("--quiet", sweep_quiet, "No progress lines on stderr");

  // inspect
  std::string inspect_path;
  auto* insp = app.add_subcommand("inspect", "Describe a .npy file or a debug_dump prefix");
  insp->add_option("path", inspect_path, "file.npy or dump prefix")->required();

  // An unknown command is named as one: CLI11 said "A subcommand is required" for `pipelink bogus`
  // and `pipelink bench bogus` (a bad-input probe, session 52).
  for (auto [parent, at] : {std::pair{&app, 1}, std::pair{bench, 2}}) {
    if (argc <= at || argv[at][0] == '-' || (at == 2 && std::string_view(argv[1]) != "bench")) continue;
    std::string names;
    bool known = false;
    for (const auto* sub : parent->get_subcommands({})) {
      known = known || sub->get_name() == argv[at];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (known) continue;
    std::cerr << fmt::format("pipelink: unknown command '{}{}' (commands{}: {}; --help lists them)\n",
                             at == 2 ? "bench " : "", argv[at], at == 2 ? " of bench" : "", names);
    return 2;
  }
  // A command line the parser refuses exits 2, as the tool's own errors do (CLI11's codes were
  // 105-114, a review, session 52); --help exits 0.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    if (!log_level.empty()) set_log_level(parse_log_level(log_level));
    if (*ops) return tools::cmd_ops(ops_opts);
    if (*demo) return tools::cmd_demo(demo_opts);
    if (*aggc) return tools::cmd_aggregate(agg);
    if (*insp) {
      if (inspect_path.empty()) throw Error("inspect: an empty path; give a .npy file or a debug_dump prefix");
      // Neither a .npy nor a dump prefix: said so, rather than "graph.txt.json: cannot open dump
      // metadata" (a newcomer's review, session 46).
      if (!inspect_path.ends_with(".npy") && !std::filesystem::exists(inspect_path + ".json") &&
          std::filesystem::exists(inspect_path))
        throw Error(fmt::format("inspect: '{}' is not a .npy file (by its name) and no debug dump '{}.json' exists; "
                                "give a .npy file or a debug_dump prefix (PREFIX.json + PREFIX.bin)",
                                inspect_path, inspect_path));
      Tensor t = inspect_path.ends_with(".npy") ? read_npy(inspect_path) : debug_load(inspect_path);
      std::cout << inspect_tensor(t) << "\n";
      return 0;
    }
    if (*bsweep) {
      sweep.device = Device::parse(sweep_device);
      if (!sweep_quiet) sweep.progress = progress_printer("sweep");
      int disagreements = 0;
      sweep.index_dtype = sweep_index == "int64" ? DType::i64 : DType::i32;
      check_outputs(*bsweep, sweep_json, sweep_markdown);
      // Each size's points on disk as they are done (marked partial), replaced by the whole at the
      // end; into regular (or new) files only (regular_or_new).
      if (regular_or_new(sweep_json)) {
        const bool md_too = !sweep_markdown.empty() && regular_or_new(sweep_markdown);
        sweep.partial = [&, md_too](const std::string& text) {
          write_file_atomically(sweep_json, text + "\n", "--json");
          if (md_too) write_file_atomically(sweep_markdown, bench::sweep_markdown(text), "--markdown");
        };
      }
      const std::string text = bench::run_aggregate_sweep(sweep, &disagreements);
      write_file_atomically(sweep_json, text + "\n", "--json");
      std::cout << "wrote " << sweep_json << "\n";
      if (!sweep_markdown.empty()) {
        write_file_atomically(sweep_markdown, bench::sweep_markdown(text), "--markdown");
        std::cout << "wrote " << sweep_markdown << "\n";
      }
      if (disagreements > 0) {
        std::fprintf(stderr, "pipelink: %d sweep point(s) disagree with the first path at their size (see the JSON)\n",
                     disagreements);
        return 1;
      }
      return 0;
    }
    if (*bagg) {
      bopt.device = Device::parse(device);
      if (!quiet) bopt.progress = progress_printer("bench");
      if (cold_processes) bopt.cold_process_exe = std::filesystem::read_symlink("/proc/self/exe").string();
      check_outputs(*bagg, json_path, md_path);
      bench::AggregateBenchResult r = bench::run_aggregate_bench(bopt);
      if (!bopt.cold_call.empty()) {  // the child's one answer, for its parent to read
        std::cout << fmt::format("{{\"cold_call\": \"{}\", \"cold_ms\": {:.17g}}}\n", r.variants.at(0).name,
                                 r.variants.at(0).cold_ms);
        return 0;
      }
      const std::string md = r.to_markdown();
      std::cout << md;
      if (!json_path.empty()) write_file_atomically(json_path, r.to_json() + "\n", "--json");
      if (!md_path.empty()) write_file_atomically(md_path, md, "--markdown");
      // Exit 1 where any variant breaks the contract (per element, L2, bits where promised, the
      // runs after the timed ones) or the null test's sampled rows do: gpu-check.sh marks the step.
      for (const auto& v : r.variants)
        if (!v.meets_contract()) return 1;
      return r.null_ok ? 0 : 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pipelink: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
