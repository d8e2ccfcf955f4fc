// Fused row kernel shared by the per-ISA translation units. Each includes this file after
// defining a SIMD traits struct `S<T>` (T = float or double) with:
//   W, V, load(p), store(p, v), splat(s), add, mul, tanh, exp, relu, sigmoid (exp(-|v|) based: no overflow)
// and `scalar_tanh/scalar_exp` used for the tail (F % W) elements.
//
// Why this shape: for each destination row the accumulator (F values) stays in L1 while the
// row's edges stream by; x rows are gathered once per edge and no [E, F] buffer exists.
//
// tanh dominates the cost. float32 uses the inlined tanh_f32 (measured max 1.5 ulp, within the
// PROTOCOL's "faithful, <= 2 ulp" assumption); float64 uses SLEEF u10. History in
// docs/perf-notes.md: SLEEF u10 calls made the kernel miss the 60 ms arxiv-like target.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/aggregate_plan.hpp"

namespace pipelink::cpu {
namespace PIPELINK_ISA_NS {

// Accurate = true selects the u10 tanh: the three-op reference's `map` keeps the in-service
// reference's numerics (torch.tanh on CPU is SLEEF u10).
template <class T, int Tr, bool Accurate = false>
inline T phi_scalar(T v) {
  if constexpr (Tr == 0) return v;
  else if constexpr (Tr == 1) return Accurate ? S<T>::scalar_tanh_u10(v) : S<T>::scalar_tanh(v);
  else if constexpr (Tr == 2) return v < T(0) ? T(0) : v;  // NaN stays NaN, as the vector forms
  else {  // the tail's sigmoid in the vector forms' way: exp(-|v|), e/(1+e) for v < 0
    const T e = S<T>::scalar_exp(-std::fabs(v));
    return (v < T(0) ? e : T(1)) / (T(1) + e);
  }
}

template <class T, int Tr, bool Accurate = false>
inline typename S<T>::V phi_vec(typename S<T>::V v) {
  if constexpr (Tr == 0) return v;
  else if constexpr (Tr == 1) return Accurate ? S<T>::tanh_u10(v) : S<T>::tanh(v);
  else if constexpr (Tr == 2) return S<T>::relu(v);
  else return S<T>::sigmoid(v);
}

template <class T, class Idx, int Tr, bool HasW>
void rows(const RowsArgs& a, const EdgeSlot<Idx>* slots) {
  using Vt = typename S<T>::V;
  constexpr std::int64_t W = S<T>::W;
  const std::int64_t N = a.plan->num_nodes, F = a.features, Fv = F / W * W;
  const std::int64_t* row_ptr = a.plan->row_ptr();
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  const bool w_plan = a.w_plan_order;  // w[k]: the plan's k-th edge (PlanWeights), else w[edge id]
  T* out = static_cast<T*>(a.out);
  const std::int64_t E = a.plan->num_edges;
  const std::int64_t row_bytes = std::min<std::int64_t>(F * std::int64_t(sizeof(T)), 512);
  constexpr std::int64_t kPrefetch = 8;
  // Rows are independent and each is summed by one thread in edge order, so the result is
  // bitwise the same for any thread count. Dynamic chunks balance skewed in-degrees.
  // Per-thread buffers are allocated before the parallel region: a bad_alloc inside it would
  // terminate the process instead of reaching the caller.
  const int threads = omp_get_max_threads();
  std::vector<T> part_all(std::size_t(threads) * (std::size_t(F) + 64));
  std::vector<double> acc_all(std::size_t(threads) * (std::size_t(F) + 8));
#pragma omp parallel num_threads(threads)
  {
    // Rows of up to kBlock edges (most of them: arxiv-like averages 7) sum in T straight into
    // `part`. Longer rows sum blocks of kBlock edges in T and add the blocks in double, so a hub
    // row's rounding error stays near kBlock * u * S whatever its degree. Measured: a single
    // float accumulator gave rel. L2 5.7e-6 on two 10^5-edge hub rows; float blocks added in
    // float, 1.04e-6 on one seed; see docs/perf-notes.md.
    constexpr std::int64_t kBlock = 32;
    T* part = part_all.data() + std::size_t(omp_get_thread_num()) * (std::size_t(F) + 64);
    double* acc = acc_all.data() + std::size_t(omp_get_thread_num()) * (std::size_t(F) + 8);
#pragma omp for schedule(dynamic, 64)
    for (std::int64_t i = 0; i < N; ++i) {
      const std::int64_t begin = row_ptr[i], end = row_ptr[i + 1];
      const bool blocked = end - begin > kBlock;
      for (std::int64_t f = 0; f < F; ++f) part[f] = T(0);
      if (blocked)
        for (std::int64_t f = 0; f < F; ++f) acc[f] = 0.0;
      for (std::int64_t k0 = begin; k0 < end; k0 += kBlock) {
        if (blocked && k0 != begin)
          for (std::int64_t f = 0; f < F; ++f) part[f] = T(0);
        const std::int64_t k1 = std::min(k0 + kBlock, end);
        for (std::int64_t k = k0; k < k1; ++k) {
          // Random x rows miss every cache and TLB; without a prefetch each edge waited for DRAM
          // (arxiv-like, one thread: 405 ms -> 137 ms with a distance of 4-8 edges).
          const std::int64_t kp = std::min(k + kPrefetch, E - 1);
          const char* next = reinterpret_cast<const char*>(x + std::int64_t(slots[kp].src) * a.x_stride);
          for (std::int64_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(next + off, 0, 3);
          if constexpr (HasW)
            if (!w_plan) __builtin_prefetch(w + slots[kp].eid, 0, 3);
          const T* xr = x + std::int64_t(slots[k].src) * a.x_stride;
          const T wk = HasW ? w[w_plan ? k : std::int64_t(slots[k].eid)] : T(1);
          const Vt wv = S<T>::splat(wk);
          std::int64_t f = 0;
          for (; f < Fv; f += W)
            S<T>::store(part + f, S<T>::add(S<T>::load(part + f), phi_vec<T, Tr>(S<T>::mul(S<T>::load(xr + f), wv))));
          for (; f < F; ++f) part[f] += phi_scalar<T, Tr>(xr[f] * wk);
        }
        if (blocked)
          for (std::int64_t f = 0; f < F; ++f) acc[f] += double(part[f]);
      }
      T* o = out + i * a.out_stride;
      if (blocked) {
        if (a.accumulate)
          for (std::int64_t f = 0; f < F; ++f) o[f] = T(double(o[f]) + acc[f]);
        else
          for (std::int64_t f = 0; f < F; ++f) o[f] = T(acc[f]);
      } else {
        if (a.accumulate)
          for (std::int64_t f = 0; f < F; ++f) o[f] += part[f];
        else
          for (std::int64_t f = 0; f < F; ++f) o[f] = part[f];
      }
    }
  }
}

template <class T, class Idx>
void dispatch_transform(const RowsArgs& a, const EdgeSlot<Idx>* s) {
  const bool hw = a.w != nullptr;
  switch (a.transform) {
    case 0: return hw ? rows<T, Idx, 0, true>(a, s) : rows<T, Idx, 0, false>(a, s);
    case 1: return hw ? rows<T, Idx, 1, true>(a, s) : rows<T, Idx, 1, false>(a, s);
    case 2: return hw ? rows<T, Idx, 2, true>(a, s) : rows<T, Idx, 2, false>(a, s);
    default: return hw ? rows<T, Idx, 3, true>(a, s) : rows<T, Idx, 3, false>(a, s);
  }
}

template <class T>
void dispatch_index(const RowsArgs& a) {
  const AggregatePlan& p = *a.plan;
  if (p.wide) dispatch_transform<T>(a, p.slots<std::int64_t>());
  else dispatch_transform<T>(a, p.slots<std::int32_t>());
}

inline void run(const RowsArgs& a) {
  if (a.f64) dispatch_index<double>(a);
  else dispatch_index<float>(a);
}

template <class T, int Tr>
void map_rows(const MapArgs& a) {
  constexpr std::int64_t W = S<T>::W;
  const std::int64_t C = a.cols, Cv = C / W * W;
  const T* in = static_cast<const T*>(a.in);
  T* out = static_cast<T*>(a.out);
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const T* ir = in + r * a.in_stride;
    T* orow = out + r * a.out_stride;
    std::int64_t c = 0;
    for (; c < Cv; c += W) S<T>::store(orow + c, phi_vec<T, Tr, true>(S<T>::load(ir + c)));
    for (; c < C; ++c) orow[c] = phi_scalar<T, Tr, true>(ir[c]);
  }
}

template <class T>
void map_dispatch(const MapArgs& a) {
  switch (a.transform) {
    case 0: return map_rows<T, 0>(a);
    case 1: return map_rows<T, 1>(a);
    case 2: return map_rows<T, 2>(a);
    default: return map_rows<T, 3>(a);
  }
}

inline void run_map(const MapArgs& a) {
  if (a.f64) map_dispatch<double>(a);
  else map_dispatch<float>(a);
}

}  // namespace PIPELINK_ISA_NS
}  // namespace pipelink::cpu
