#pragma once
// Destination-ordered (CSR) plan for the CPU aggregate, built with a stable parallel counting
// sort. Reused across calls with new x and w; it is what makes the fused op deterministic: every
// output row is summed by one thread, in edge order.
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "core/host_memory.hpp"
#include "pipelink/tensor.hpp"

namespace pipelink::cpu {

struct BadIndex {
  std::int64_t position;  // edge id
  std::int64_t value;
};

/// First element of an int32/int64 index view outside [0, bound), scanning in parallel.
std::optional<BadIndex> find_first_bad_index(const TensorView& idx, std::int64_t bound);

/// Throws IndexOutOfRangeError(op, port, ...) for the first bad element of `idx`.
void validate_indices(const char* op, const char* port, const TensorView& idx, std::int64_t bound);

/// One destination-ordered edge: its source row and its original id (to find w[e]). Interleaved,
/// so the counting sort's scatter touches one cache line per edge instead of two.
template <class I>
struct EdgeSlot {
  I src;
  I eid;
};

/// How many per-block histograms (8 N bytes each) a build of N nodes and E edges uses with
/// `threads` threads: as many as fit in 64 MiB or 4 bytes an edge, whichever is more, but always
/// one, and no more than E / 65536 (no threads for tiny graphs). The build and the op's workspace formula both ask here.
int build_chunks(std::int64_t N, std::int64_t E, int threads);

struct AggregatePlan {
  std::int64_t num_nodes = 0;
  std::int64_t num_edges = 0;
  /// 32-bit slots while N and E fit (8 bytes/edge), 64-bit otherwise (16 bytes/edge).
  bool wide = false;
  detail::HostBuffer row_ptr_buf;  // int64 [N + 1]
  detail::HostBuffer slots_buf;    // EdgeSlot<int32|int64> [E]
  std::size_t bytes_reserved = 0;

  const std::int64_t* row_ptr() const noexcept { return static_cast<const std::int64_t*>(row_ptr_buf.get()); }
  template <class I>
  const EdgeSlot<I>* slots() const noexcept { return static_cast<const EdgeSlot<I>*>(slots_buf.get()); }
  std::size_t bytes() const noexcept { return bytes_reserved; }

  /// Validates src and dst (IndexOutOfRangeError for the first bad edge, src before dst), then
  /// sorts. Nothing is written anywhere else.
  static AggregatePlan build(const TensorView& src, const TensorView& dst, std::int64_t num_nodes,
                             const char* op = "aggregate");
};

/// Arguments of one fused run over a plan, type-erased for the per-ISA kernels.
struct RowsArgs {
  const AggregatePlan* plan = nullptr;
  const void* x = nullptr;       // [N, F], row stride x_stride (elements)
  std::int64_t x_stride = 0;
  const void* w = nullptr;       // [E] or null
  bool w_plan_order = false;     // w[k] belongs to the plan's k-th edge (PlanWeights), not to edge id k
  void* out = nullptr;           // [N, F], row stride out_stride
  std::int64_t out_stride = 0;
  std::int64_t features = 0;
  bool f64 = false;
  int transform = 0;             // pipelink::Transform
  bool accumulate = false;
};

/// Elementwise phi over [rows, cols] (the three-op reference's `map`), same SIMD code as the
/// fused kernel so the baseline is not handicapped by a slower tanh.
struct MapArgs {
  const void* in = nullptr;
  std::int64_t in_stride = 0;
  void* out = nullptr;
  std::int64_t out_stride = 0;
  std::int64_t rows = 0, cols = 0;
  bool f64 = false;
  int transform = 0;
};

// One kernel per instruction set; aggregate.cpp picks by CPUID. Each runs all rows with OpenMP.
void aggregate_rows_generic(const RowsArgs& a);
void aggregate_rows_avx2(const RowsArgs& a);
void aggregate_rows_avx512(const RowsArgs& a);
/// The fused kernel's float tanh over a contiguous array (tests measure its ulp error with this).
void tanh_batch_generic(const float* in, float* out, std::int64_t n);
void tanh_batch_avx2(const float* in, float* out, std::int64_t n);
void tanh_batch_avx512(const float* in, float* out, std::int64_t n);
void map_rows_generic(const MapArgs& a);
void map_rows_avx2(const MapArgs& a);
void map_rows_avx512(const MapArgs& a);

}  // namespace pipelink::cpu
