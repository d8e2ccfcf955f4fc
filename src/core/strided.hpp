#pragma once
// The one strided-element walk of the host code: fn(n, offset) for every element of `v` in C
// order, n the flat index and offset the element offset from v.data().
#include <array>
#include <cstdint>

#include "pipelink/tensor.hpp"

namespace pipelink::detail {

template <class Fn>
void for_each_offset(const TensorView& v, Fn&& fn) {
  const std::int64_t n = v.numel();
  if (n == 0) return;
  if (v.is_contiguous()) {
    for (std::int64_t i = 0; i < n; ++i) fn(i, i);
    return;
  }
  std::array<std::int64_t, kMaxRank> idx{};
  const int r = v.rank();
  // The spans, not dim()/stride(): their axis check per element cost ~6% of a transposed clone
  // (a review, session 53).
  const auto shape = v.shape(), strides = v.strides();
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t off = 0;
    for (int d = 0; d < r; ++d) off += idx[std::size_t(d)] * strides[std::size_t(d)];
    fn(i, off);
    for (int d = r - 1; d >= 0; --d) {
      if (++idx[std::size_t(d)] < shape[std::size_t(d)]) break;
      idx[std::size_t(d)] = 0;
    }
  }
}

}  // namespace pipelink::detail
