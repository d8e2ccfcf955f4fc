#pragma once
// The flagship op:  out[dst[e]] (+)= phi(x[src[e]] * w[e])  for every edge e, fused: no [E, F]
// tensor ever exists.
//
// Ports: x [N, F] float32|float64 rows; src, dst [E] int32|int64 (same type); w [E] optional,
// same float type as x; out [N, F] same float type as x.
// Attributes: transform = identity|tanh|relu|sigmoid (default tanh); accumulate = false.
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "pipelink/tensor.hpp"

namespace pipelink {

enum class Transform : std::uint8_t { identity, tanh, relu, sigmoid };
std::string_view transform_name(Transform t) noexcept;
/// Throws ContractViolationError (field "attribute") naming the allowed values.
Transform parse_transform(std::string_view name, std::string_view op = "aggregate");

/// Which algorithm runs. `automatic` lets the downgrade policy choose (the deterministic
/// one-shot path where it exists); the others force a variant.
enum class AggregatePath : std::uint8_t {
  automatic,
  one_shot,  // build a destination-ordered plan, run it, free it: deterministic, except on a
             // nearly full device, where it may run edge ranges counted from free memory and
             // logs a warning (README: "Behaviour worth knowing")
  lean,      // no scratch memory: atomic accumulation (CUDA), not deterministic
};

struct AggregateOptions {
  Transform transform = Transform::tanh;
  bool accumulate = false;  // false: rows without edges become 0; true: out += contributions
  AggregatePath path = AggregatePath::automatic;
  void* stream = nullptr;   // cudaStream_t for CUDA tensors; the call is asynchronous there
};

/// Fused aggregate on the device the tensors live on.
void aggregate(const TensorView& x, const TensorView& src, const TensorView& dst,
               const std::optional<TensorView>& w, const TensorView& out,
               const AggregateOptions& opts = {});

struct PlanWeights;

/// A destination-ordered plan built once from (src, dst, N) and reused with new x and w.
/// Building validates the indices (IndexOutOfRangeError for the first bad edge). Runs with a
/// plan are deterministic: every output row is summed in edge order by one owner, the same bits
/// for the same values and memory layout (on CUDA, rows of more than 64 edges are grouped by a
/// kernel chosen by x's and out's alignment: README, "Behaviour worth knowing").
class AggregatePlan {
 public:
  struct Impl;
  AggregatePlan() = default;
  /// On CUDA the plan is built on `stream` (a cudaStream_t; null: the default stream) and its
  /// device memory is freed there when the last copy of the plan goes: `stream` must outlive
  /// the plan. Runs on other streams are ordered against it by events.
  static AggregatePlan build(const TensorView& src, const TensorView& dst, std::int64_t num_nodes,
                             void* stream = nullptr);
  bool defined() const noexcept { return impl_ != nullptr; }
  Device device() const;
  std::int64_t num_nodes() const;
  std::int64_t num_edges() const;
  /// Device (or host) bytes the plan holds now. On CUDA this can change at the plan's first run
  /// given w in edge order, when it builds the tables that bring w into its order (see
  /// PIPELINK_AGG_W_PERMUTE in the README): +4 bytes an edge and run tables, and by default its
  /// edge ids (4 bytes an edge) dropped in exchange (PIPELINK_AGG_W_PERMUTE_COMPACT=0 keeps them);
  /// with at most 2^24 nodes, 1 byte an edge of the tables also rides in the kept src column
  /// (PIPELINK_AGG_W_PERMUTE_COMPACT=1 keeps them apart).
  std::size_t bytes() const;
  /// Unique among the plans of this process (0 only for an empty plan): what PlanWeights are
  /// checked against.
  std::uint64_t id() const;
  /// Writes w [E] (edge order) into `out` [E] in this plan's edge order, once, for weights that
  /// stay fixed across calls (GCN's normalisation, say): runs given the result read the weights
  /// in order beside the plan instead of gathering w[edge id], one random 32-byte sector per
  /// edge. Same bits as a run given w itself. `out` (same dtype and device as w, caller-owned)
  /// must outlive its use; on CUDA this is asynchronous on `stream`, like a run.
  PlanWeights permute_weights(const TensorView& w, const TensorView& out, void* stream = nullptr) const;
  /// Builds now what the plan's first run given w of dtype `weights` (float32 or float64) in edge
  /// order would build, so that run costs and holds what every later one does (on CUDA, float32:
  /// the tables that bring w into the plan's order, +4 bytes an edge, the plan's edge ids
  /// dropped; see bytes()). Where such runs gather w instead (float64, small plans, plans with
  /// split hub rows, PIPELINK_AGG_W_PERMUTE=off), on the CPU, and while `stream` is being
  /// captured into a CUDA graph, nothing. On CUDA the tables are built on the plan's build
  /// stream and `stream` waits for them: asynchronous, like a run.
  void prepare_weights(DType weights = DType::f32, void* stream = nullptr) const;
  const std::shared_ptr<Impl>& impl() const noexcept { return impl_; }
  explicit AggregatePlan(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<Impl> impl_;
};

/// Runs a plan: x [N, F], w [E] (optional), out [N, F], on the plan's device.
void aggregate(const AggregatePlan& plan, const TensorView& x, const std::optional<TensorView>& w,
               const TensorView& out, const AggregateOptions& opts = {});

/// Edge weights in one plan's edge order, made only by AggregatePlan::permute_weights. A run
/// checks that they were made for its plan (ContractViolationError otherwise): weights in edge
/// order, or in another plan's order, would give a wrong sum with no error. The storage is the
/// caller's `out` of permute_weights: permuting another plan's weights into the same buffer
/// leaves the older PlanWeights pointing at them (do not reuse the buffer while it is in use).
class PlanWeights {
 public:
  PlanWeights() = default;  // made for no plan: every run refuses it
  const TensorView& values() const noexcept { return values_; }  // [E], in the plan's order
  std::uint64_t plan_id() const noexcept { return plan_id_; }     // AggregatePlan::id() it was made for

 private:
  friend class AggregatePlan;
  PlanWeights(const TensorView& values, std::uint64_t plan_id) : values_(values), plan_id_(plan_id) {}
  TensorView values_;
  std::uint64_t plan_id_ = 0;
};

/// Runs a plan with weights already in its order (see AggregatePlan::permute_weights).
void aggregate(const AggregatePlan& plan, const TensorView& x, const PlanWeights& w, const TensorView& out,
               const AggregateOptions& opts = {});

}  // namespace pipelink
