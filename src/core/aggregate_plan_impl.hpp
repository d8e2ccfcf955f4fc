#pragma once
// Backend side of pipelink::AggregatePlan: each backend implements Impl and installs a builder.
#include "pipelink/ops/aggregate.hpp"

namespace pipelink {

struct AggregatePlan::Impl {
  virtual ~Impl() = default;
  Device device;
  std::int64_t num_nodes = 0;
  std::int64_t num_edges = 0;
  std::size_t bytes = 0;
  /// x, w, out already checked against the plan (shapes, dtypes, device); w may be null.
  virtual void run(const TensorView& x, const TensorView* w, const TensorView& out, const AggregateOptions& opts) = 0;
};

namespace detail {
using PlanBuilder = std::shared_ptr<AggregatePlan::Impl> (*)(const TensorView& src, const TensorView& dst,
                                                             std::int64_t num_nodes, void* stream);
void set_plan_builder(DeviceKind kind, PlanBuilder builder);
}  // namespace detail

}  // namespace pipelink
