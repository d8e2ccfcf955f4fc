#pragma once
// The materialized three-op reference, with exactly the seed's semantics:
//   m = gather_scale(x, src, w)   # m[e] = x[src[e]] * w[e]          ([E, F] materialized)
//   t = map(m, transform)         # elementwise phi                   ([E, F] materialized)
//   index_add(out, dst, t)        # out[dst[e]] += t[e]
// It is the baseline the benchmarks compare against and the input of the (later) fusion pass.
#include <optional>

#include "pipelink/ops/aggregate.hpp"
#include "pipelink/tensor.hpp"

namespace pipelink {

void gather_scale(const TensorView& x, const TensorView& src, const std::optional<TensorView>& w,
                  const TensorView& m);
void map(const TensorView& in, const TensorView& out, Transform transform);
void index_add(const TensorView& out, const TensorView& dst, const TensorView& values);

/// Convenience: the whole three-op path, allocating the two [E, F] intermediates.
/// `out` is zeroed first unless `accumulate`.
void aggregate_three_op(const TensorView& x, const TensorView& src, const TensorView& dst,
                        const std::optional<TensorView>& w, const TensorView& out,
                        const AggregateOptions& opts = {});

}  // namespace pipelink
