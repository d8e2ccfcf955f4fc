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

namespace {

// Stable counting sort by destination over `chunks` contiguous edge blocks: per-block histograms,
// then each block scatters its edges in order behind the blocks before it.
// Returns the first edge with an index outside [0, N), or -1. Indices are validated in the same
// pass that counts them (a separate pass cost 3 ms of 18 on arxiv-like, one thread).
template <class I, class O>
std::int64_t counting_sort(const I* src, const I* dst, std::int64_t E, std::int64_t N, int chunks,
                           std::int64_t* row_ptr, EdgeSlot<O>* slots) {
  // Allocated here, not inside the parallel region: a bad_alloc there would terminate.
  std::vector<std::vector<std::int64_t>> hist(static_cast<std::size_t>(chunks), std::vector<std::int64_t>(std::size_t(N)));
  std::vector<std::int64_t> first_bad(static_cast<std::size_t>(chunks), -1);
  auto block = [&](int c) { return std::make_pair(E * c / chunks, E * (c + 1) / chunks); };
  const auto bound = std::uint64_t(N);
#pragma omp parallel for num_threads(chunks) schedule(static, 1)
  for (int c = 0; c < chunks; ++c) {
    auto& h = hist[std::size_t(c)];
    auto [b, e] = block(c);
    for (std::int64_t k = b; k < e; ++k) {
      // Unsigned compare: negative indices wrap to huge values and fail too.
      if (std::uint64_t(std::int64_t(src[k])) >= bound || std::uint64_t(std::int64_t(dst[k])) >= bound) {
        first_bad[std::size_t(c)] = k;
        break;
      }
      ++h[std::size_t(dst[k])];
    }
  }
  for (auto k : first_bad)  // blocks are in edge order: the first block with a bad edge has the first one
    if (k >= 0) return k;
  // Exclusive scan in three parallel steps (a serial N x chunks loop took ~10 ms with 16 chunks on
  // arxiv-like): per row, each block's count becomes its offset within the row and row_ptr holds
  // the row total; a scan of the totals gives row_ptr; each block's offset gets its row's start.
#pragma omp parallel for num_threads(chunks) schedule(static)
  for (std::int64_t i = 0; i < N; ++i) {
    std::int64_t within = 0;
    for (int c = 0; c < chunks; ++c) {
      auto& h = hist[std::size_t(c)][std::size_t(i)];
      const auto n = h;
      h = within;
      within += n;
    }
    row_ptr[i] = within;
  }
  std::int64_t running = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    const auto n = row_ptr[i];
    row_ptr[i] = running;
    running += n;
  }
  row_ptr[N] = running;
#pragma omp parallel for num_threads(chunks) schedule(static)
  for (std::int64_t i = 0; i < N; ++i)
    for (int c = 0; c < chunks; ++c) hist[std::size_t(c)][std::size_t(i)] += row_ptr[i];
#pragma omp parallel for num_threads(chunks) schedule(static, 1)
  for (int c = 0; c < chunks; ++c) {
    auto& cursor = hist[std::size_t(c)];
    auto [b, e] = block(c);
    // The scatter is latency-bound on random writes; prefetching the slot of the edge 16 ahead
    // (its cursor may still move by a few slots: same or next cache line) overlaps the misses.
    constexpr std::int64_t kAhead = 16;
    for (std::int64_t k = b; k < e; ++k) {
      if (k + kAhead < e) __builtin_prefetch(slots + cursor[std::size_t(dst[k + kAhead])], 1, 3);
      slots[cursor[std::size_t(dst[k])]++] = {O(src[k]), O(k)};
    }
  }
  return -1;
}

}  // namespace

int build_chunks(std::int64_t N, std::int64_t E, int threads) {
  // The histograms' budget: 64 MiB, or 4 bytes an edge where that is more (half the plan's 8-byte
  // slots). With 64 MiB alone a graph of 4.2M nodes or more built on one thread, however many
  // edges it had, and products-like's 2.45M nodes got 3 of the GPU host's 16 blocks (12 now;
  // every thread wherever E >= 4 (N + 1) threads) (session 53). Measured here (2
  // cores, Python, 4 builds each): 16M nodes and 66M random int32 edges 1.98-3.37 s on one
  // block, 1.18-2.01 on two.
  // budget / 8 / (N + 1), in entries: 8 (N + 1) is 2^63 at N = 2^60 - 1 (a review, session 46).
  const std::int64_t entries = std::max<std::int64_t>(std::int64_t(8) << 20, E / 2);
  const std::int64_t by_memory = std::max<std::int64_t>(1, entries / (N + 1));
  const std::int64_t by_work = std::max<std::int64_t>(1, E / 65536);
  return int(std::min<std::int64_t>({threads, by_memory, by_work}));
}

AggregatePlan AggregatePlan::build(const TensorView& src, const TensorView& dst, std::int64_t num_nodes,
                                   const char* op) {
  AggregatePlan p;
  p.num_nodes = num_nodes;
  p.num_edges = src.numel();
  const std::int64_t E = p.num_edges, N = num_nodes;
  constexpr auto i32max = std::int64_t(std::numeric_limits<std::int32_t>::max());
  p.wide = N > i32max || E > i32max;
  const int chunks = build_chunks(N, E, omp_get_max_threads());
  std::size_t a = 0, b = 0;
  p.row_ptr_buf = detail::allocate_host(std::size_t(N + 1) * 8, 64, &a);
  p.slots_buf = detail::allocate_host(std::size_t(E) * (p.wide ? 16 : 8), 64, &b);
  p.bytes_reserved = a + b;
  auto* row_ptr = static_cast<std::int64_t*>(p.row_ptr_buf.get());
  auto run = [&](auto* s, auto* d) -> std::int64_t {
    if (p.wide) return counting_sort(s, d, E, N, chunks, row_ptr, static_cast<EdgeSlot<std::int64_t>*>(p.slots_buf.get()));
    return counting_sort(s, d, E, N, chunks, row_ptr, static_cast<EdgeSlot<std::int32_t>*>(p.slots_buf.get()));
  };
  const std::int64_t bad = src.dtype() == DType::i32
                               ? run(src.data_as<const std::int32_t>(), dst.data_as<const std::int32_t>())
                               : run(src.data_as<const std::int64_t>(), dst.data_as<const std::int64_t>());
  if (bad >= 0) {
    auto value = [&](const TensorView& v) {
      return v.dtype() == DType::i32 ? std::int64_t(v.data_as<const std::int32_t>()[bad]) : v.data_as<const std::int64_t>()[bad];
    };
    const bool src_bad = value(src) < 0 || value(src) >= N;  // src is named first when both are bad
    throw IndexOutOfRangeError(op, src_bad ? "src" : "dst", bad, src_bad ? value(src) : value(dst), N);
  }
  PIPELINK_LOG_DEBUG("aggregate plan: N={} E={} wide={} chunks={} bytes={}", N, E, p.wide, chunks, p.bytes());
  return p;
}

}  // namespace pipelink::cpu
