// Backend-neutral entry points of the aggregate: option handling, path -> variant policy, and
// AggregatePlan (checked here, built and run by the backend that owns the tensors).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>

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
  // N below 2^60, as AggregatePlan::build asks of num_nodes: a plan's 8 bytes a node must not
  // overflow a size. An x of [2^61 - 1, 0] (no work at all) crashed the CPU build with a division
  // by zero (a review, session 46).
  if (x.rank() == 2 && x.dim(0) >= (std::int64_t(1) << 60))
    throw ContractViolationError("aggregate", "x", field::shape, "[N, F] with N < 2^60", x.shape_str(), x.origin());
  // An AggregatePath outside its three values ran as automatic (a probe, session 53).
  if (opts.path != AggregatePath::automatic && opts.path != AggregatePath::one_shot && opts.path != AggregatePath::lean)
    throw ContractViolationError("aggregate", "path", field::attribute, "one of automatic|one_shot|lean",
                                 std::to_string(int(opts.path)));
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
  // Below 2^60, so that a plan's 8 bytes a node never overflow a size: INT64_MAX once crashed
  // the CPU build with a division by zero (a review, session 43). Past memory, the allocation
  // says how many bytes it asked for (OutOfMemoryError).
  if (num_nodes < 0 || num_nodes >= (std::int64_t(1) << 60))
    throw ContractViolationError("aggregate_plan", "num_nodes", field::attribute, "a count in [0, 2^60)",
                                 std::to_string(num_nodes));
  const auto builder = g_builders[std::size_t(src.device().kind)];
  if (!builder)
    throw BackendUnavailableError(fmt::format("no aggregate plan builder for {} in this build", src.device().str()));
  auto impl = builder(src, dst, num_nodes, stream);
  static std::atomic<std::uint64_t> next_id{1};
  impl->id = next_id.fetch_add(1, std::memory_order_relaxed);
  return AggregatePlan(std::move(impl));
}

namespace {
void require_plan(const AggregatePlan& plan, const char* what) {
  if (!plan.defined())
    throw std::invalid_argument(std::string(what) + ": the plan is empty (default-constructed or moved from)");
}
}  // namespace

// An empty plan's accessors read through a null impl_ (a probe, session 53): they say so, as
// aggregate() and permute_weights() do. id() stays 0 there: the weights' check compares it.
Device AggregatePlan::device() const {
  require_plan(*this, "AggregatePlan::device");
  return impl_->device;
}
std::int64_t AggregatePlan::num_nodes() const {
  require_plan(*this, "AggregatePlan::num_nodes");
  return impl_->num_nodes;
}
std::int64_t AggregatePlan::num_edges() const {
  require_plan(*this, "AggregatePlan::num_edges");
  return impl_->num_edges;
}
std::size_t AggregatePlan::bytes() const {
  require_plan(*this, "AggregatePlan::bytes");
  return impl_->bytes;
}
std::uint64_t AggregatePlan::id() const { return impl_ ? impl_->id : 0; }

namespace {

// An edge-value vector of the plan: aggregate's own `w` port contract (rank 1, float, contiguous,
// storage), then the plan's E and device.
void check_edge_values(const char* op, const char* port, const TensorView& v, const AggregatePlan& plan) {
  const OpDef& def = Registry::global().op("aggregate");
  PortContract c = *std::find_if(def.ports.begin(), def.ports.end(), [](const PortContract& p) { return p.name == "w"; });
  c.name = port;
  c.optional = false;
  (void)check_contract(op, {c}, {}, {}, {{port, v}}, {});
  if (v.dim(0) != plan.num_edges())
    throw ContractViolationError(op, port, field::shape, fmt::format("[{}] (the plan's E)", plan.num_edges()),
                                 v.shape_str(), v.origin());
  if (!(v.device() == plan.device()))
    throw ContractViolationError(op, port, field::cross_device, "the plan's device " + plan.device().str(), v.device().str(),
                                 v.origin());
}
}  // namespace

PlanWeights AggregatePlan::permute_weights(const TensorView& w, const TensorView& out, void* stream) const {
  require_plan(*this, "permute_weights");
  check_edge_values("permute_weights", "w", w, *this);
  check_edge_values("permute_weights", "out", out, *this);
  if (out.dtype() != w.dtype())
    throw ContractViolationError("permute_weights", "out", field::dtype, std::string(dtype_name(w.dtype())) + " (w's)",
                                 std::string(dtype_name(out.dtype())), out.origin());
  if (out.overlaps(w))
    throw ContractViolationError("permute_weights", "out", field::alias, "no overlap with w", "overlaps w", out.origin());
  impl_->permute(w, out, stream);
  return PlanWeights(out, impl_->id);
}

void AggregatePlan::prepare_weights(DType weights, void* stream) const {
  require_plan(*this, "prepare_weights");
  if (weights != DType::f32 && weights != DType::f64)
    throw ContractViolationError("prepare_weights", "w", field::dtype, "float32 or float64",
                                 std::string(dtype_name(weights)));
  impl_->prepare_weights(weights, stream);
}

namespace {
void run_plan(const AggregatePlan& plan, const TensorView& x, const std::optional<TensorView>& w, const TensorView& out,
              const AggregateOptions& opts, bool w_in_plan_order) {
  require_plan(plan, "aggregate");
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
  plan.impl()->run(x, w ? &*w : nullptr, out, opts, w_in_plan_order);
}
}  // namespace

void aggregate(const AggregatePlan& plan, const TensorView& x, const std::optional<TensorView>& w,
               const TensorView& out, const AggregateOptions& opts) {
  run_plan(plan, x, w, out, opts, false);
}

void aggregate(const AggregatePlan& plan, const TensorView& x, const PlanWeights& w, const TensorView& out,
               const AggregateOptions& opts) {
  require_plan(plan, "aggregate");
  if (w.plan_id() == 0 || w.plan_id() != plan.id())
    throw ContractViolationError("aggregate", "w", field::plan,
                                 fmt::format("weights permuted for this plan (id {})", plan.id()),
                                 w.plan_id() == 0 ? std::string("weights not made by permute_weights (plan id 0)")
                                                  : fmt::format("weights permuted for plan id {}", w.plan_id()),
                                 w.values().origin());
  run_plan(plan, x, w.values(), out, opts, true);
}

}  // namespace pipelink
