#pragma once
// Backend side of pipelink::AggregatePlan: each backend implements Impl and installs a builder.
#include <atomic>

#include "pipelink/ops/aggregate.hpp"

namespace pipelink {

struct AggregatePlan::Impl {
  virtual ~Impl() = default;
  Device device;
  std::int64_t num_nodes = 0;
  std::int64_t num_edges = 0;
  std::atomic<std::size_t> bytes{0};  // grows where a backend adds tables at a later run (CUDA: the w permutation)
  std::uint64_t id = 0;  // set by AggregatePlan::build
  /// x, w, out already checked against the plan (shapes, dtypes, device); w may be null. With
  /// w_in_plan_order, w[k] is the weight of the plan's k-th edge (permute's output), else w[edge id].
  virtual void run(const TensorView& x, const TensorView* w, const TensorView& out, const AggregateOptions& opts,
                   bool w_in_plan_order) = 0;
  /// out[k] = w[id of the plan's k-th edge]; both [E], same dtype, on the plan's device (checked).
  virtual void permute(const TensorView& w, const TensorView& out, void* stream) = 0;
  /// AggregatePlan::prepare_weights: what a first run given w (`weights`: f32 or f64, checked)
  /// in edge order builds (none here).
  virtual void prepare_weights(DType /*weights*/, void* /*stream*/) {}
};

namespace detail {
using PlanBuilder = std::shared_ptr<AggregatePlan::Impl> (*)(const TensorView& src, const TensorView& dst,
                                                             std::int64_t num_nodes, void* stream);
void set_plan_builder(DeviceKind kind, PlanBuilder builder);
}  // namespace detail

}  // namespace pipelink
