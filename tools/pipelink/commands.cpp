#include "commands.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "aggregate_bench.hpp"
#include "pipelink/pipelink.hpp"

namespace pipelink::tools {

// ---- ops -------------------------------------------------------------------------------------

int cmd_ops(const OpsOptions& o) {
  std::optional<DeviceDesc> target;
  if (!o.arch.empty()) target = o.arch == "cpu" ? DeviceDesc::host() : DeviceDesc::cuda_arch(o.arch);
  auto& reg = Registry::global();
  if (o.json) {
    std::cout << ops_json(target ? &*target : nullptr) << "\n";
    return 0;
  }
  for (const OpDef* d : reg.ops()) {
    std::cout << fmt::format("{} v{}: {}\n", d->name, d->version, d->doc);
    std::cout << fmt::format("  {:<8} {:<6} {:<10} {:<16} {:<7} {:>5} {:<11} {:<9}\n", "port", "dir", "shape", "dtypes",
                             "layout", "align", "contiguity", "devices");
    for (const auto& p : d->ports)
      std::cout << fmt::format("  {:<8} {:<6} {:<10} {:<16} {:<7} {:>5} {:<11} {:<9}{}{}\n",
                               p.name + (p.optional ? "?" : ""), direction_name(p.direction), shape_pattern_str(p.shape),
                               dtypes_str(p.dtypes), layout_name(p.layout),
                               p.alignment ? std::to_string(p.alignment) : "elem", contiguity_name(p.contiguity),
                               device_kinds_str(p.device_kinds), p.cross_device ? " cross-device" : "",
                               p.dtype_group.empty() ? "" : " (dtype group " + p.dtype_group + ")");
    for (const auto& a : d->attrs)
      std::cout << fmt::format("  attr {} = {}{}\n", a.name, attr_str(a.default_value),
                               a.choices.empty() ? "" : fmt::format("  ({})", fmt::join(a.choices, "|")));
    std::cout << fmt::format("  exec: async={} max_streams={} event_sync={} deterministic={}{}\n", d->exec.async,
                             d->exec.max_streams, d->exec.needs_event_sync, d->exec.deterministic,
                             d->exec.may_alias.empty() ? "" : " in-place allowed");
    for (const Variant* v : reg.variants(d->name))
      std::cout << fmt::format("  variant {}/{} priority={} requires={}{}\n", device_kind_name(v->backend), v->name,
                               v->priority, v->requires_.str(), v->deterministic ? "" : " (not deterministic)");
    if (target) {
      auto c = reg.select(d->name, *target);
      std::cout << fmt::format("  on {}: {}\n", target->str(), c.chosen ? c.chosen->name : "no runnable variant");
      for (auto& [v, why] : c.rejected) std::cout << fmt::format("    not {}: {}\n", v->name, why);
    }
    std::cout << "\n";
  }
  return 0;
}

// ---- demo ------------------------------------------------------------------------------------

int cmd_demo(const DemoOptions& o) {
  bench::AggregateBenchOptions b;
  b.workload = o.workload;
  b.repeats = o.repeats;
  b.null_test = false;
  // The best device present: the GPU when this build has CUDA and a device answers; or the one
  // asked for (--device; a GPU that is not there is said before any work, by the describe below).
  b.device = o.device == "auto" ? (cuda_device_count() > 0 ? Device::cuda(0) : Device::cpu()) : Device::parse(o.device);
  b.progress = [](const std::string& s) { std::cerr << "[demo] " << s << std::endl; };
  std::cout << fmt::format("PipeLink demo: out[dst[e]] += tanh(x[src[e]] * w[e]) on the embedded '{}' workload\n",
                           o.workload);
  std::cout << "device: " << describe(b.device).str()
            << (b.device.kind == DeviceKind::cpu
                    ? (cuda_backend_built() ? " (no CUDA device present)" : " (this build has no CUDA backend)")
                    : "")
            << "\n\n";
  bench::AggregateBenchResult r = bench::run_aggregate_bench(b);
  std::size_t w = 4;  // the name column fits the longest path name ("planned, w in plan order")
  for (const auto& v : r.variants) w = std::max(w, v.name.size());
  std::cout << fmt::format("{:<{}} {:>12} {:>18} {:>14} {:>12}  {}\n", "path", w, "median ms", "extra peak memory",
                           "max abs err", "rel L2 err", "meets contract");
  for (const auto& v : r.variants) {
    const bool build = !v.writes_output;  // the plan build: no error or contract to show
    std::cout << fmt::format("{:<{}} {:>12.3f} {:>15.1f} MB {:>14} {:>12}  {}\n", v.name, w, v.time.median,
                             double(v.extra_peak_bytes) / 1e6, build ? "-" : fmt::format("{:.2e}", v.max_abs_err),
                             build ? "-" : fmt::format("{:.2e}", v.rel_l2_err),
                             build                ? "- (the plan's memory)"
                             : v.meets_contract() ? "yes"
                                                  : "NO: " + v.contract_failure());
  }
  const auto* a = r.find("three-op");
  const auto* f = r.find(b.device.kind == DeviceKind::cpu ? "fused" : "one-shot");
  bool ok = true;
  for (const auto& v : r.variants) ok = ok && v.meets_contract();
  ok = ok && r.null_ok;
  if (a && f && a->timed && f->timed)
    std::cout << fmt::format("\n{} is {} the three-op path and uses {:.1f}x less extra memory; "
                             "all paths checked against the float64 oracle (PROTOCOL.md tolerance).\n",
                             f->name, bench::ratio_text(a->time.median / f->time.median) + " faster than",
                             double(a->extra_peak_bytes) / double(std::max<std::int64_t>(f->extra_peak_bytes, 1)));
  std::cout << (ok ? "demo: OK\n" : "demo: FAILED verification\n");
  return ok ? 0 : 1;
}

// ---- aggregate on files ----------------------------------------------------------------------

namespace {

// `--out x.npy` once replaced the input with the output and exited 0 (session 46's review): the
// output may not be any of the inputs, whatever path (or link) names them.
void refuse_output_over_input(const AggregateFileOptions& o) {
  const std::pair<const char*, const std::string*> inputs[] = {{"--graph", &o.graph}, {"--x", &o.x}, {"--w", &o.w}};
  for (const auto& [flag, path] : inputs) {
    std::error_code ec;
    if (!path->empty() && std::filesystem::equivalent(o.out, *path, ec))
      throw Error(fmt::format("--out '{}' is the same file as {} '{}': refusing to overwrite an input", o.out, flag,
                              *path));
  }
}

// The op's errors name ports and edges; on the command line the reader also needs the files.
template <typename F>
void with_file_context(const AggregateFileOptions& o, std::int64_t N, F&& run) {
  try {
    run();
  } catch (const IndexOutOfRangeError& e) {
    // The op knows the edge's index; the reader of a 10^8-line file needs its line (a newcomer's
    // review, session 51), found by reading the file again up to it: the error path only.
    const GraphEndpoint end = e.port() == "src" ? GraphEndpoint::src : GraphEndpoint::dst;
    const std::int64_t line =
        e.port() == "src" || e.port() == "dst" ? graph_edge_line(o.graph, e.position(), end, e.value()) : 0;
    throw Error(fmt::format("{}\n  the edges come from '{}'{}; N = {} is the number of rows of '{}'", e.what(), o.graph,
                            line > 0 ? fmt::format(" (edge {}, counting from 0, is its line {})", e.position(), line) : "",
                            N, o.x));
  } catch (const ContractViolationError& e) {
    const std::string& file = e.port() == "x" ? o.x : e.port() == "w" ? o.w : e.port() == "out" ? o.out : o.graph;
    throw Error(fmt::format("{}\n  port '{}' comes from '{}'", e.what(), e.port(),
                            e.port() == "w" && o.w.empty() ? o.graph : file));
  }
}

// Non-finite values in a float input pass through the op (NaN stays NaN: the contract), so the rows
// they reach may come out NaN or inf, and --check agrees with an oracle that does the same. Said on
// stderr, once per file: a NaN weight gave a NaN row and "within_tolerance=true" without a word,
// while a float64 weight past float32's range is refused (a review, session 52).
void note_non_finite(const Tensor& t, const std::string& file, const char* what) {
  if (t.dtype() != DType::f32 && t.dtype() != DType::f64) return;  // the op refuses it next (read as float, it overran)
  std::int64_t count = 0, first = -1;
  double first_value = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.dtype() == DType::f64 ? t.data_as<double>()[i] : double(t.data_as<float>()[i]);
    if (std::isfinite(v)) continue;
    if (count++ == 0) {
      first = i;
      first_value = v;
    }
  }
  if (count > 0)
    std::cerr << fmt::format("note: '{}' holds {} non-finite {} (the first, element {}, is {}); they pass through the op, "
                             "so the output rows they reach may be NaN or inf (NaN stays NaN; tanh or sigmoid of an inf x is finite)\n",
                             file, count, what, first, first_value);
}

}  // namespace

int cmd_aggregate(const AggregateFileOptions& o) {
  const Device dev = Device::parse(o.device);
  // The device first, before any file is read: a GPU-less machine's --device cuda said "CUDA
  // driver version is insufficient" from a later cudaGetDevice, after loading the inputs (a
  // newcomer's review, session 51). describe() names what is missing, as the bench does.
  if (dev.kind != DeviceKind::cpu) (void)describe(dev);
  const AggregateOptions opts{parse_transform(o.transform), false};
  refuse_output_over_input(o);
  EdgeList g = load_graph(o.graph);
  Tensor x = read_npy(o.x);
  if (x.rank() != 2)
    throw ContractViolationError("aggregate", "x", field::rank, "2 ([N, F] from " + o.x + ")",
                                 std::to_string(x.rank()));
  const std::int64_t N = x.dim(0);
  // N is the number of rows of x: a graph id beyond it is an index error, named by edge.
  Tensor w;
  if (!o.w.empty()) w = read_npy(o.w);
  else if (g.weight.defined() && g.weight.numel() == g.num_edges()) w = g.weight;
  // Weights: one float per edge. Integer weights were once "converted" to NaN and the run went
  // on (a review found it, session 43): refused instead, as are other shapes (the op would take
  // a [E, 1] array's E elements without a word otherwise).
  if (!o.w.empty() && w.dtype() != DType::f32 && w.dtype() != DType::f64)
    throw ContractViolationError("aggregate", "w", field::dtype, "float32 or float64 (from " + o.w + ")",
                                 std::string(dtype_name(w.dtype())));
  if (!o.w.empty() && w.rank() != 1)
    throw ContractViolationError("aggregate", "w", field::rank, "1 ([E] from " + o.w + ")", std::to_string(w.rank()));
  if (w.defined() && w.dtype() != x.dtype()) w = [&] {
    // Float weights of the other float type than x are converted rather than refused.
    Tensor c = TensorBuilder().shape({w.numel()}).dtype(x.dtype()).build();
    for (std::int64_t i = 0; i < w.numel(); ++i) {
      const double v = w.dtype() == DType::f64 ? w.data_as<double>()[i] : w.data_as<float>()[i];
      // 1e300 once became inf and the output row NaN/inf, exit 0 (session 46's review); the
      // Matrix Market loader refuses such values for the same reason.
      if (x.dtype() == DType::f32 && std::isfinite(v) && std::fabs(v) > double(std::numeric_limits<float>::max()))
        throw Error(fmt::format("weight {} of '{}' is {:g}, outside float32's range (x is float32)", i,
                                o.w.empty() ? o.graph : o.w, v));
      if (x.dtype() == DType::f64) c.data_as<double>()[i] = v;
      else c.data_as<float>()[i] = float(v);
    }
    return c;
  }();
  note_non_finite(x, o.x, "value(s)");
  if (w.defined()) note_non_finite(w, o.w.empty() ? o.graph : o.w, "weight(s)");
  // The op's contract errors name a tensor's origin, "made at commands.cpp:154 (int
  // pipelink::tools::cmd_aggregate(...))" here, which tells a command-line user nothing: left out
  // (nameless views), and with_file_context names the port's file instead (a review, session 52).
  auto nameless = [](const Tensor& t) { return t.view().with_origin({}); };
  std::optional<TensorView> wv;
  if (w.defined()) wv = nameless(w);
  Tensor out = TensorBuilder().shape({N, x.dim(1)}).dtype(x.dtype()).build();
  with_file_context(o, N, [&] {
    if (dev.kind == DeviceKind::cpu) {
      aggregate(nameless(x).with_layout(Layout::rows), nameless(g.src), nameless(g.dst), wv, out, opts);
    } else {
      Tensor xd = to_device(x, dev), sd = to_device(g.src, dev), dd = to_device(g.dst, dev);
      Tensor od = TensorBuilder().shape({N, x.dim(1)}).dtype(x.dtype()).device(dev).build();
      std::optional<Tensor> wd;
      std::optional<TensorView> wdv;
      if (wv) {
        wd = to_device(*wv, dev);
        wdv = nameless(*wd);
      }
      aggregate(nameless(xd), nameless(sd), nameless(dd), wdv, od, opts);
      out = to_device(od, Device::cpu());
    }
  });
  if (o.check) {
    VerifyReport r = verify_aggregate(out, aggregate_oracle(x, g.src, g.dst, wv, opts));
    std::cerr << "check vs float64 oracle: " << r.summary() << "\n";
    // A verification that fails exits 1, as the demo's, the bench's and the sweep's do (it exited
    // 2 as an error until session 53). Nothing is written: an output known to be wrong must not
    // replace a file under the name asked for.
    if (!r.within_tolerance) {
      std::cerr << "pipelink: check failed: the output is outside the PROTOCOL.md tolerance; nothing written to "
                << o.out << "\n";
      return 1;
    }
  }
  write_npy(o.out, out);
  std::cerr << fmt::format("wrote {} [{}, {}] {} (N={}, E={}, transform={})\n", o.out, N, x.dim(1),
                           dtype_name(x.dtype()), N, g.num_edges(), o.transform);
  return 0;
}

}  // namespace pipelink::tools
