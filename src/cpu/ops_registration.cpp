// Contracts of the message-passing ops (aggregate and its three-op reference). Kernels register
// separately, per backend, as variants (src/cpu/*.cpp, src/cuda/*.cu).
#include <omp.h>

#include "cpu/aggregate_plan.hpp"
#include "pipelink/ops/aggregate.hpp"
#include "pipelink/registry.hpp"

namespace pipelink {
namespace {

const std::vector<DType> kFloat = {DType::f32, DType::f64};
const std::vector<DType> kIndex = {DType::i32, DType::i64};
const std::vector<std::string> kTransforms = {"identity", "tanh", "relu", "sigmoid"};

PortContract rows_port(std::string name, std::string_view pattern) {
  PortContract p = port(std::move(name), pattern, kFloat);
  p.dtype_group = "float";
  p.layout = Layout::rows;
  p.contiguity = Contiguity::rows;  // pitched rows are fine: kernels use the row stride
  return p;
}
PortContract index_port(std::string name) {
  PortContract p = port(std::move(name), "[E]", kIndex);
  p.dtype_group = "index";
  return p;
}
PortContract weight_port() {
  PortContract p = port("w", "[E]", kFloat);
  p.dtype_group = "float";
  p.optional = true;
  p.doc = "per-edge weight; absent means 1";
  return p;
}

}  // namespace

PIPELINK_REGISTER_OP(aggregate) {
  ExecContract e;
  e.deterministic = true;
  // The CPU plan: row_ptr (8 B/node), (src, edge id) slots (8 B/edge, 16 when N or E needs 64
  // bits), and its build's 8 B/node histograms, one per block (one counted before session 46:
  // a build may hold up to its thread count's, within 64 MiB or 4 bytes an edge).
  e.workspace_bytes = [](const ShapeBindings& d, const Attrs&) {
    const std::int64_t N = d.at("N"), E = d.at("E");
    const std::int64_t slot = (N >= (std::int64_t(1) << 31) || E >= (std::int64_t(1) << 31)) ? 16 : 8;
    const auto chunks = std::size_t(cpu::build_chunks(N, E, omp_get_max_threads()));
    // Unsigned: N < 2^60 and E within memory, but 8 (N + 1) + 8 N passes 2^63 from N ~ 2^59.
    return 8 * std::size_t(N + 1) + std::size_t(slot) * std::size_t(E) + chunks * 8 * std::size_t(N);
  };
  PortContract out = rows_port("out", "[N, F]");
  out.direction = PortDirection::inout;
  out.doc = "overwritten, or added to when accumulate=true";
  return OpBuilder("aggregate", 1)
      .doc("out[dst[e]] (+)= phi(x[src[e]] * w[e]), fused: no [E, F] intermediate")
      .input(rows_port("x", "[N, F]"))
      .input(index_port("src"))
      .input(index_port("dst"))
      .input(weight_port())
      .output(out)
      .attr({"transform", std::string("tanh"), kTransforms, "elementwise phi"})
      .attr({"accumulate", false, {}, "add into out instead of overwriting it"})
      .exec(e)
      .build();
}

PIPELINK_REGISTER_OP(gather_scale) {
  return OpBuilder("gather_scale", 1)
      .doc("m[e] = x[src[e]] * w[e] (materializes [E, F])")
      .input(rows_port("x", "[N, F]"))
      .input(index_port("src"))
      .input(weight_port())
      .output(rows_port("m", "[E, F]"))
      .build();
}

PIPELINK_REGISTER_OP(map) {
  ExecContract e;
  e.may_alias = {{"in", "out"}};
  return OpBuilder("map", 1)
      .doc("out = phi(in), elementwise; in-place allowed")
      .input(rows_port("in", "[R, C]"))
      .output(rows_port("out", "[R, C]"))
      .attr({"transform", std::string("tanh"), kTransforms, "elementwise phi"})
      .exec(e)
      .build();
}

PIPELINK_REGISTER_OP(index_add) {
  PortContract out = rows_port("out", "[N, F]");
  out.direction = PortDirection::inout;
  return OpBuilder("index_add", 1)
      .doc("out[dst[e]] += values[e], in edge order")
      .input(index_port("dst"))
      .input(rows_port("values", "[E, F]"))
      .output(out)
      .build();
}

}  // namespace pipelink
