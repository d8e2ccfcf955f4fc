#pragma once
// The correctness contract of PROTOCOL.md §2: a float64 oracle of the aggregate and the
// per-element tolerance  |y - oracle| <= 2 (d_i + 4) u S  (u = 2^-24 for float32 outputs),
// with three readings PROTOCOL.md does not spell out (session 46):
// - the rounding model's absolute half is added, (d_i + 4) eta with eta the smallest subnormal
//   (2^-149 for float32): it matters only for results below the normal range, where a correctly
//   rounded product can be off by eta while S is tiny; for ordinary outputs it is ~1e-45 against
//   bounds of ~1e-7;
// - a row with no edges must equal the oracle exactly (0, or its initial value when accumulating);
// - the same infinity, or NaN where the oracle is NaN (non-finite inputs), is a match; NaN where
//   the oracle is finite is a violation and counts as unwritten (the tests' poison).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipelink/ops/aggregate.hpp"
#include "pipelink/tensor.hpp"

namespace pipelink {

struct AggregateOracle {
  Tensor y;           // [N, F] float64: the reference in float64
  Tensor abs_sum;     // [N, F] float64: S, sum of |phi(x[src] w)| over the row's edges (+ |out0|)
  Tensor degree;      // [N] int64: in-degree d_i (+1 when accumulating into an initial value)
};

/// Computes the oracle on the CPU (inputs on any device are copied to the host). `initial` is the
/// output's value before an accumulating call.
AggregateOracle aggregate_oracle(const TensorView& x, const TensorView& src, const TensorView& dst,
                                 const std::optional<TensorView>& w, const AggregateOptions& opts = {},
                                 const std::optional<TensorView>& initial = std::nullopt);

struct VerifyReport {
  double max_abs_err = 0;
  double rel_l2_err = 0;
  bool within_tolerance = false;
  std::int64_t violations = 0;      // elements outside the bound (NaN counts)
  std::int64_t unwritten = 0;       // NaN elements (a poisoned output not fully written)
  std::int64_t worst_index = -1;    // flat index of the largest err/bound ratio
  double worst_ratio = 0;           // err / bound there
  std::string summary() const;
};

/// Checks `y` (float32 or float64, [N, F], any device) against the oracle.
VerifyReport verify_aggregate(const TensorView& y, const AggregateOracle& oracle);

/// Checks the rows `rows` of `y` ([N, F], any device) against a float64 oracle of those rows
/// alone, computed here in one pass over the edges (memory: the rows' sums, not [N, F]), with the
/// same per-element bound: for graphs whose whole oracle costs too much to compute (the bench's
/// null test, 4x a workload's edges). The report's numbers cover those rows only. A row index
/// outside [0, N) is std::invalid_argument; a bad edge index, IndexOutOfRangeError.
VerifyReport verify_aggregate_rows(const TensorView& y, const TensorView& x, const TensorView& src,
                                   const TensorView& dst, const std::optional<TensorView>& w,
                                   const std::vector<std::int64_t>& rows, const AggregateOptions& opts = {});

}  // namespace pipelink
