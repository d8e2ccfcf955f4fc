#pragma once
// The flagship op:  out[dst[e]] (+)= phi(x[src[e]] * w[e])  for every edge e, fused: no [E, F]
// tensor ever exists.
//
// Ports: x [N, F] float32|float64 rows; src, dst [E] int32|int64 (same type); w [E] optional,
// same float type as x; out [N, F] same float type as x.
// Attributes: transform = identity|tanh|relu|sigmoid (default tanh); accumulate = false.
#include <optional>
#include <string_view>

#include "pipelink/tensor.hpp"

namespace pipelink {

enum class Transform : std::uint8_t { identity, tanh, relu, sigmoid };
std::string_view transform_name(Transform t) noexcept;
/// Throws ContractViolationError (field "attribute") naming the allowed values.
Transform parse_transform(std::string_view name, std::string_view op = "aggregate");

struct AggregateOptions {
  Transform transform = Transform::tanh;
  bool accumulate = false;  // false: rows without edges become 0; true: out += contributions
};

/// Fused aggregate on the device the tensors live on.
void aggregate(const TensorView& x, const TensorView& src, const TensorView& dst,
               const std::optional<TensorView>& w, const TensorView& out,
               const AggregateOptions& opts = {});

}  // namespace pipelink
