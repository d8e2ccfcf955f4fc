// Backend-neutral entry points of the aggregate: option handling, path -> variant policy, and
// AggregatePlan (checked here, built and run by the backend that owns the tensors).
#include <fmt/format.h>

#include <array>

#include "core/aggregate_plan_impl.hpp"
#include "pipelink/registry.hpp"

namespace pipelink {

std::string_view transform_name(Transform t) noexcept {
  switch (t) {
    case Transform::identity: return "identity";
    case Transform::tanh: return "tanh";
    case Transform::relu: return "relu";
    case Transform::sigmoid: return "sigmoid";
  }
  return "?";
}

Transform parse_transform(std::string_view name, std::string_view op) {
  for (auto t : {Transform::identity, Transform::tanh, Transform::relu, Transform::sigmoid})
    if (transform_name(t) == name) return t;
  throw ContractViolationError(std::string(op), "transform", field::attribute, "one of identity|tanh|relu|sigmoid",
                               "'" + std::string(name) + "'");
}

namespace {
Attrs aggregate_attrs(const AggregateOptions& opts) {
  return {{"transform", std::string(transform_name(opts.transform))}, {"accumulate", opts.accumulate}};
}
}  // namespace

void aggregate(const TensorView& x, const TensorView& src, const TensorView& dst, const std::optional<TensorView>& w,
               const TensorView& out, const AggregateOptions& opts) {
  PortMap ports{{"x", x}, {"src", src}, {"dst", dst}, {"out", out}};
  if (w) ports.emplace("w", *w);
  InvokeOptions io;
  io.stream = opts.stream;
  if (opts.path == AggregatePath::one_shot) io.deterministic = true;
  if (opts.path == AggregatePath::lean) io.deterministic = false;
  invoke("aggregate", ports, aggregate_attrs(opts), io);
}

// ---- plans -----------------------------------------------------------------------------------

namespace {
std::array<detail::PlanBuilder, 2> g_builders{};
}

void detail::set_plan_builder(DeviceKind kind, PlanBuilder builder) { g_builders[std::size_t(kind)] = builder; }

AggregatePlan AggregatePlan::build(const TensorView& src, const TensorView& dst, std::int64_t num_nodes, void* stream) {
  // The plan's ports are aggregate's src and dst: check them with the op's own contract pieces.
  const OpDef& def = Registry::global().op("aggregate");
  std::vector<PortContract> ports;
  for (const auto& p : def.ports)
    if (p.name == "src" || p.name == "dst") ports.push_back(p);
  (void)check_contract("aggregate_plan", ports, {}, {}, {{"src", src}, {"dst", dst}}, {});
  if (num_nodes < 0)
    throw ContractViolationError("aggregate_plan", "num_nodes", field::attribute, "a count >= 0", std::to_string(num_nodes));
  const auto builder = g_builders[std::size_t(src.device().kind)];
  if (!builder)
    throw BackendUnavailableError(fmt::format("no aggregate plan builder for {} in this build", src.device().str()));
  return AggregatePlan(builder(src, dst, num_nodes, stream));
}

Device AggregatePlan::device() const { return impl_->device; }
std::int64_t AggregatePlan::num_nodes() const { return impl_->num_nodes; }
std::int64_t AggregatePlan::num_edges() const { return impl_->num_edges; }
std::size_t AggregatePlan::bytes() const { return impl_->bytes; }

void aggregate(const AggregatePlan& plan, const TensorView& x, const std::optional<TensorView>& w,
               const TensorView& out, const AggregateOptions& opts) {
  if (!plan.defined()) throw std::invalid_argument("aggregate: the plan is empty (default-constructed)");
  const OpDef& def = Registry::global().op("aggregate");
  std::vector<PortContract> ports;
  for (const auto& p : def.ports)
    if (p.name != "src" && p.name != "dst") ports.push_back(p);
  PortMap views{{"x", x}, {"out", out}};
  if (w) views.emplace("w", *w);
  CheckResult c = check_contract("aggregate", ports, def.attrs, def.exec, views, aggregate_attrs(opts));
  // The plan fixes N, E and the device.
  if (c.dims.at("N") != plan.num_nodes())
    throw ContractViolationError("aggregate", "x", field::shape, fmt::format("[N, F] with N = {} (the plan's)", plan.num_nodes()),
                                 x.shape_str(), x.origin());
  if (w && c.dims.at("E") != plan.num_edges())
    throw ContractViolationError("aggregate", "w", field::shape, fmt::format("[{}] (the plan's E)", plan.num_edges()),
                                 w->shape_str(), w->origin());
  if (!(c.device == plan.device()))
    throw ContractViolationError("aggregate", "x", field::cross_device, "the plan's device " + plan.device().str(),
                                 c.device.str(), x.origin());
  plan.impl()->run(x, w ? &*w : nullptr, out, opts);
}

}  // namespace pipelink
