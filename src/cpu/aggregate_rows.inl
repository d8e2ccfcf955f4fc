// Fused row kernel shared by the per-ISA translation units. Each includes this file after
// defining a SIMD traits struct `S<T>` (T = float or double) with:
//   W, V, load(p), store(p, v), splat(s), add, mul, tanh, exp, relu, sigmoid (1/(1+exp(-v)))
// and `scalar_tanh/scalar_exp` used for the tail (F % W) elements.
//
// Why this shape: for each destination row the accumulator (F values) stays in L1 while the
// row's edges stream by; x rows are gathered once per edge and no [E, F] buffer exists. tanh
// dominates the cost (SLEEF u10, 1-ulp: the PROTOCOL forbids approximate tanh).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/aggregate_plan.hpp"

namespace pipelink::cpu {
namespace PIPELINK_ISA_NS {

template <class T, int Tr>
inline T phi_scalar(T v) {
  if constexpr (Tr == 0) return v;
  else if constexpr (Tr == 1) return S<T>::scalar_tanh(v);
  else if constexpr (Tr == 2) return v > T(0) ? v : T(0);
  else return T(1) / (T(1) + S<T>::scalar_exp(-v));
}

template <class T, int Tr>
inline typename S<T>::V phi_vec(typename S<T>::V v) {
  if constexpr (Tr == 0) return v;
  else if constexpr (Tr == 1) return S<T>::tanh(v);
  else if constexpr (Tr == 2) return S<T>::relu(v);
  else return S<T>::sigmoid(v);
}

template <class T, class Idx, int Tr, bool HasW>
void rows(const RowsArgs& a, const Idx* src, const Idx* eid) {
  using Vt = typename S<T>::V;
  constexpr std::int64_t W = S<T>::W;
  const std::int64_t N = a.plan->num_nodes, F = a.features, Fv = F / W * W;
  const std::int64_t* row_ptr = a.plan->row_ptr.data();
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  T* out = static_cast<T*>(a.out);
  // Rows are independent and each is summed by one thread in edge order, so the result is
  // bitwise the same for any thread count. Dynamic chunks balance skewed in-degrees.
#pragma omp parallel
  {
    // Two-level summation: `part` sums a block of kBlock edges, `acc` sums the blocks. A hub row's
    // rounding error then grows with kBlock + d/kBlock instead of d (measured on a 120k-edge row:
    // rel. L2 error 5.7e-6 with one level, see docs/perf-notes.md), for one extra add per block.
    constexpr std::int64_t kBlock = 32;
    std::vector<T> buf(2 * std::size_t(F) + 64);
    T* acc = buf.data();
    T* part = acc + F;
#pragma omp for schedule(dynamic, 64)
    for (std::int64_t i = 0; i < N; ++i) {
      for (std::int64_t f = 0; f < F; ++f) acc[f] = T(0);
      for (std::int64_t k0 = row_ptr[i]; k0 < row_ptr[i + 1]; k0 += kBlock) {
        const std::int64_t k1 = std::min(k0 + kBlock, row_ptr[i + 1]);
        T* sum = k0 == row_ptr[i] ? acc : part;  // the first block sums straight into acc
        if (sum == part)
          for (std::int64_t f = 0; f < F; ++f) part[f] = T(0);
        for (std::int64_t k = k0; k < k1; ++k) {
          const T* xr = x + std::int64_t(src[k]) * a.x_stride;
          const T wk = HasW ? w[eid[k]] : T(1);
          const Vt wv = S<T>::splat(wk);
          std::int64_t f = 0;
          for (; f < Fv; f += W)
            S<T>::store(sum + f, S<T>::add(S<T>::load(sum + f), phi_vec<T, Tr>(S<T>::mul(S<T>::load(xr + f), wv))));
          for (; f < F; ++f) sum[f] += phi_scalar<T, Tr>(xr[f] * wk);
        }
        if (sum == part)
          for (std::int64_t f = 0; f < F; ++f) acc[f] += part[f];
      }
      T* o = out + i * a.out_stride;
      if (a.accumulate)
        for (std::int64_t f = 0; f < F; ++f) o[f] += acc[f];
      else
        for (std::int64_t f = 0; f < F; ++f) o[f] = acc[f];
    }
  }
}

template <class T, class Idx>
void dispatch_transform(const RowsArgs& a, const Idx* src, const Idx* eid) {
  const bool hw = a.w != nullptr;
  switch (a.transform) {
    case 0: return hw ? rows<T, Idx, 0, true>(a, src, eid) : rows<T, Idx, 0, false>(a, src, eid);
    case 1: return hw ? rows<T, Idx, 1, true>(a, src, eid) : rows<T, Idx, 1, false>(a, src, eid);
    case 2: return hw ? rows<T, Idx, 2, true>(a, src, eid) : rows<T, Idx, 2, false>(a, src, eid);
    default: return hw ? rows<T, Idx, 3, true>(a, src, eid) : rows<T, Idx, 3, false>(a, src, eid);
  }
}

template <class T>
void dispatch_index(const RowsArgs& a) {
  const AggregatePlan& p = *a.plan;
  if (p.wide) dispatch_transform<T>(a, p.src64.data(), p.eid64.data());
  else dispatch_transform<T>(a, p.src32.data(), p.eid32.data());
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
    for (; c < Cv; c += W) S<T>::store(orow + c, phi_vec<T, Tr>(S<T>::load(ir + c)));
    for (; c < C; ++c) orow[c] = phi_scalar<T, Tr>(ir[c]);
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
