#include "cpu/aggregate_plan.hpp"

#include <omp.h>

#include <algorithm>
#include <limits>

#include "core/log_internal.hpp"

namespace pipelink::cpu {

namespace {

template <class I>
std::optional<BadIndex> first_bad(const I* p, std::int64_t n, std::int64_t bound) {
  // Each thread scans a contiguous block; the smallest bad position wins, so the answer does
  // not depend on the thread count.
  std::int64_t best = std::numeric_limits<std::int64_t>::max();
#pragma omp parallel for schedule(static) reduction(min : best)
  for (std::int64_t e = 0; e < n; ++e) {
    const auto v = std::int64_t(p[e]);
    if ((v < 0) | (v >= bound)) best = std::min(best, e);
  }
  if (best == std::numeric_limits<std::int64_t>::max()) return std::nullopt;
  return BadIndex{best, std::int64_t(p[best])};
}

}  // namespace

std::optional<BadIndex> find_first_bad_index(const TensorView& idx, std::int64_t bound) {
  if (idx.dtype() == DType::i32) return first_bad(idx.data_as<const std::int32_t>(), idx.numel(), bound);
  return first_bad(idx.data_as<const std::int64_t>(), idx.numel(), bound);
}

void validate_indices(const char* op, const char* port, const TensorView& idx, std::int64_t bound) {
  if (auto bad = find_first_bad_index(idx, bound)) throw IndexOutOfRangeError(op, port, bad->position, bad->value, bound);
}

std::size_t AggregatePlan::bytes() const noexcept {
  return row_ptr.size() * 8 + (src32.size() + eid32.size()) * 4 + (src64.size() + eid64.size()) * 8;
}

namespace {

// Stable counting sort by destination over `chunks` contiguous edge blocks: per-block histograms,
// then each block scatters its edges in order behind the blocks before it.
template <class I, class O>
void counting_sort(const I* src, const I* dst, std::int64_t E, std::int64_t N, int chunks,
                   std::vector<std::int64_t>& row_ptr, O* src_out, O* eid_out) {
  std::vector<std::vector<std::int64_t>> hist(static_cast<std::size_t>(chunks));
  auto block = [&](int c) {
    return std::make_pair(E * c / chunks, E * (c + 1) / chunks);
  };
#pragma omp parallel for num_threads(chunks) schedule(static, 1)
  for (int c = 0; c < chunks; ++c) {
    auto& h = hist[std::size_t(c)];
    h.assign(std::size_t(N), 0);
    auto [b, e] = block(c);
    for (std::int64_t k = b; k < e; ++k) ++h[std::size_t(dst[k])];
  }
  // Exclusive scan: row_ptr from the totals; each block's histogram becomes its write cursor.
  row_ptr.assign(std::size_t(N + 1), 0);
  std::int64_t running = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    row_ptr[std::size_t(i)] = running;
    for (int c = 0; c < chunks; ++c) {
      auto& h = hist[std::size_t(c)][std::size_t(i)];
      const auto n = h;
      h = running;
      running += n;
    }
  }
  row_ptr[std::size_t(N)] = running;
#pragma omp parallel for num_threads(chunks) schedule(static, 1)
  for (int c = 0; c < chunks; ++c) {
    auto& cursor = hist[std::size_t(c)];
    auto [b, e] = block(c);
    for (std::int64_t k = b; k < e; ++k) {
      const auto pos = cursor[std::size_t(dst[k])]++;
      src_out[pos] = O(src[k]);
      eid_out[pos] = O(k);
    }
  }
}

}  // namespace

AggregatePlan AggregatePlan::build(const TensorView& src, const TensorView& dst, std::int64_t num_nodes,
                                   const char* op) {
  validate_indices(op, "src", src, num_nodes);
  validate_indices(op, "dst", dst, num_nodes);
  AggregatePlan p;
  p.num_nodes = num_nodes;
  p.num_edges = src.numel();
  const std::int64_t E = p.num_edges, N = num_nodes;
  constexpr auto i32max = std::int64_t(std::numeric_limits<std::int32_t>::max());
  p.wide = N > i32max || E > i32max;
  // Per-block histograms cost 8·N bytes each; cap them at ~64 MiB in total, and skip threads for
  // tiny graphs where spawning costs more than sorting.
  const int threads = omp_get_max_threads();
  const std::int64_t by_memory = std::max<std::int64_t>(1, (std::int64_t(64) << 20) / (8 * (N + 1)));
  const std::int64_t by_work = std::max<std::int64_t>(1, E / 65536);
  const int chunks = int(std::min<std::int64_t>({threads, by_memory, by_work}));
  auto run = [&](auto* s, auto* d) {
    if (p.wide) {
      p.src64.resize(std::size_t(E));
      p.eid64.resize(std::size_t(E));
      counting_sort(s, d, E, N, chunks, p.row_ptr, p.src64.data(), p.eid64.data());
    } else {
      p.src32.resize(std::size_t(E));
      p.eid32.resize(std::size_t(E));
      counting_sort(s, d, E, N, chunks, p.row_ptr, p.src32.data(), p.eid32.data());
    }
  };
  if (src.dtype() == DType::i32)
    run(src.data_as<const std::int32_t>(), dst.data_as<const std::int32_t>());
  else
    run(src.data_as<const std::int64_t>(), dst.data_as<const std::int64_t>());
  PIPELINK_LOG_DEBUG("aggregate plan: N={} E={} wide={} chunks={} bytes={}", N, E, p.wide, chunks, p.bytes());
  return p;
}

}  // namespace pipelink::cpu
