#include "pipelink/verify.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace pipelink {

namespace {

double phi64(double v, Transform t) {
  switch (t) {
    case Transform::identity: return v;
    case Transform::tanh: return std::tanh(v);
    case Transform::relu:
      return v < 0 ? 0 : v;  // NaN stays NaN (torch.relu, np.maximum)
    case Transform::sigmoid: {  // exp(-|v|) cannot overflow (the kernels' form, session 46)
      const double e = std::exp(-std::fabs(v));
      return (v < 0 ? e : 1.0) / (1.0 + e);
    }
  }
  return v;
}

double element(const TensorView& v, std::int64_t flat) {
  switch (v.dtype()) {
    case DType::f32: return v.data_as<const float>()[flat];
    case DType::f64: return v.data_as<const double>()[flat];
    case DType::i32: return v.data_as<const std::int32_t>()[flat];
    case DType::i64: return double(v.data_as<const std::int64_t>()[flat]);
    case DType::u8: return v.data_as<const std::uint8_t>()[flat];
  }
  return 0;
}

Tensor host_contiguous(const TensorView& v) { return to_device(v, Device::cpu()); }

// v itself where it is on the host and contiguous, else a host copy held in `hold`.
TensorView on_host(const TensorView& v, Tensor& hold) {
  if (v.device().kind == DeviceKind::cpu && v.is_contiguous()) return v;
  hold = host_contiguous(v);
  return hold.view();
}

// The oracle's per-edge steps, shared by aggregate_oracle and verify_aggregate_rows.
bool in_range(std::int64_t i, std::int64_t N) { return i >= 0 && i < N; }
void check_edge(const char* op, std::int64_t e, std::int64_t sv, std::int64_t dv, std::int64_t N) {
  if (!in_range(sv, N) || !in_range(dv, N)) throw IndexOutOfRangeError(op, "src/dst", e, in_range(sv, N) ? dv : sv, N);
}
double weight(const TensorView& w, std::int64_t e) { return w.defined() && w.numel() > 0 ? element(w, e) : 1.0; }
// Adds one edge's message phi(x[src] * w) to a row's sums (y_row) and sums of magnitudes (s_row).
void add_message(double* y_row, double* s_row, const TensorView& x, std::int64_t src, std::int64_t F, double we,
                 Transform t) {
  for (std::int64_t f = 0; f < F; ++f) {
    const double v = phi64(element(x, src * F + f) * we, t);
    y_row[f] += v;
    s_row[f] += std::fabs(v);
  }
}

}  // namespace

AggregateOracle aggregate_oracle(const TensorView& x_in, const TensorView& src_in, const TensorView& dst_in,
                                 const std::optional<TensorView>& w_in, const AggregateOptions& opts,
                                 const std::optional<TensorView>& initial) {
  // Host inputs as they are (the bench's are 1-2 GB on products-like), others copied.
  Tensor hx, hs, hd, hw;
  const TensorView x = on_host(x_in, hx), src = on_host(src_in, hs), dst = on_host(dst_in, hd);
  const TensorView w = w_in ? on_host(*w_in, hw) : TensorView();
  // x's rank before its dims: dim(1) of a rank-1 x throws its own terser error (session 53).
  const std::int64_t N = x.rank() == 2 ? x.dim(0) : 0, F = x.rank() == 2 ? x.dim(1) : 0, E = src.numel();
  // Lengths first: a w of 1 element for 4 edges was read past its end (a review, session 46).
  if (x.rank() != 2 || dst.numel() != E || (w.defined() && w.numel() != E) ||
      (initial && initial->numel() != N * F))
    throw std::invalid_argument(fmt::format(
        "aggregate_oracle: x must be [N, F] and src, dst and w of E elements, initial of N*F: x {}, src {}, dst {}, "
        "w {}, initial {}",
        x.shape_str(), src.numel(), dst.numel(), w.defined() ? std::to_string(w.numel()) : "none",
        initial ? std::to_string(initial->numel()) : "none"));
  AggregateOracle o;
  o.y = TensorBuilder().shape({N, F}).dtype(DType::f64).zeros();
  o.abs_sum = TensorBuilder().shape({N, F}).dtype(DType::f64).zeros();
  o.degree = TensorBuilder().shape({N}).dtype(DType::i64).zeros();
  double* y = o.y.data_as<double>();
  double* s = o.abs_sum.data_as<double>();
  std::int64_t* d = o.degree.data_as<std::int64_t>();
  if (initial) {
    Tensor init = host_contiguous(*initial);
    for (std::int64_t i = 0; i < N * F; ++i) {
      y[i] = element(init, i);
      s[i] = std::fabs(y[i]);
    }
  }
  std::vector<std::int64_t> sv(static_cast<std::size_t>(E)), dv(static_cast<std::size_t>(E));
  for (std::int64_t e = 0; e < E; ++e) {
    sv[std::size_t(e)] = std::int64_t(element(src, e));
    dv[std::size_t(e)] = std::int64_t(element(dst, e));
    check_edge("aggregate_oracle", e, sv[std::size_t(e)], dv[std::size_t(e)], N);
    ++d[dv[std::size_t(e)]];
  }
  // The initial value is one more term of each row's sum, in rows that have edges. A row with
  // none must keep it exactly (degree 0, bound 0): with every degree set to 1, such a row could
  // drift by 10 u |init| unseen (a review, session 46).
  if (initial)
    for (std::int64_t i = 0; i < N; ++i) d[i] += d[i] > 0;
  // Threads own output rows (row i: thread i % T), and each walks every edge in order, summing
  // those of its rows: every element is still summed in edge order, whatever the thread count.
  // Each edge's x row is read whole. (Until session 42 threads owned feature columns, one random
  // 8-byte read of x an edge and a column: products-like's oracle took ~30 s for a tenth of its
  // edges on this 2-core machine, most of a GPU bench call's host time on the GPU machine.)
  // The team's own size, read inside the region: a caller already in a parallel region gets a
  // team of one, and every row must still be summed. (x read through element(): typed pointers
  // gained nothing beyond the noise, 0.83-1.20 against 0.88-1.24 s on arxiv-like here, two runs each.)
#pragma omp parallel
  {
    const std::int64_t T = omp_get_num_threads(), t = omp_get_thread_num();
    for (std::int64_t e = 0; e < E; ++e) {
      const std::int64_t di = dv[std::size_t(e)];
      if (di % T == t) add_message(y + di * F, s + di * F, x, sv[std::size_t(e)], F, weight(w, e), opts.transform);
    }
  }
  return o;
}

namespace {

// The per-element rule over rows: row j of the oracle (ref, s: F values each, degree d[j]) against
// row y_row(j) of the output, flat index k_of(j, f) in the report. In a fixed number of row chunks,
// in parallel, combined in chunk order: the same report at any thread count (products-like's 157M
// elements took ~0.56 s serially, and the bench checks each path's output several times).
template <class YRow, class KOf>
VerifyReport compare_rows(std::int64_t rows, std::int64_t F, const TensorView& y, double u, double eta, const double* ref,
                          const double* s, const std::int64_t* d, YRow y_row, KOf k_of) {
  struct Part {
    VerifyReport r;
    double err2 = 0, ref2 = 0;
  };
  constexpr std::int64_t kChunks = 256;
  std::vector<Part> parts(static_cast<std::size_t>(kChunks));
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t c = 0; c < kChunks; ++c) {
    Part& p = parts[std::size_t(c)];
    VerifyReport& r = p.r;
    for (std::int64_t j = rows * c / kChunks; j < rows * (c + 1) / kChunks; ++j) {
      const std::int64_t yi = y_row(j);
      for (std::int64_t f = 0; f < F; ++f) {
        const std::int64_t o = j * F + f;
        const double v = element(y, yi * F + f);
        // Non-finite inputs give non-finite sums: the same infinity, or NaN for NaN, is a match
        // (inf - inf read as a violation and a propagated NaN as unwritten before: a review,
        // session 46). NaN where the oracle is finite is the poison left unwritten, or a bug.
        const bool both = v == ref[o] || (std::isnan(v) && std::isnan(ref[o]));
        const double err = both ? 0.0 : std::fabs(v - ref[o]);
        // PROTOCOL.md's bound is the rounding model's relative half; eta = (d + 4) times the
        // smallest subnormal is its absolute half, for results below the normal range (a correct
        // product of 1e-41 and 0.3 broke the relative half alone by 157x: session 46). A row
        // with no edges is copied, not computed: exact.
        const double bound = d[j] == 0 ? 0.0 : 2.0 * double(d[j] + 4) * u * s[o] + double(d[j] + 4) * eta;
        if (std::isnan(v) && !std::isnan(ref[o])) ++r.unwritten;
        if (!both && !(err <= bound)) ++r.violations;  // (S is NaN where the oracle is)
        const double inf = std::numeric_limits<double>::infinity();
        // (inf / inf, where S overflowed and y is inf, counts as the worst too, not as NaN.)
        const double q = both ? 0.0 : std::isnan(err) ? inf : bound > 0 ? err / bound : (err == 0 ? 0 : inf);
        const double ratio = std::isnan(q) ? inf : q;
        if (r.worst_index < 0 || ratio > r.worst_ratio) {
          r.worst_ratio = ratio;
          r.worst_index = k_of(j, f);
        }
        if (!std::isnan(err))
          r.max_abs_err = std::max(r.max_abs_err, err);
        else
          r.max_abs_err = std::numeric_limits<double>::infinity();
        p.err2 += err * err;
        if (std::isfinite(ref[o])) p.ref2 += ref[o] * ref[o];
      }
    }
  }
  VerifyReport r;
  double err2 = 0, ref2 = 0;
  for (const Part& p : parts) {  // in row order: the first of equal worst ratios, as one pass would
    r.unwritten += p.r.unwritten;
    r.violations += p.r.violations;
    if (p.r.worst_index >= 0 && (r.worst_index < 0 || p.r.worst_ratio > r.worst_ratio)) {
      r.worst_ratio = p.r.worst_ratio;
      r.worst_index = p.r.worst_index;
    }
    r.max_abs_err = std::max(r.max_abs_err, p.r.max_abs_err);
    err2 += p.err2;
    ref2 += p.ref2;
  }
  r.rel_l2_err = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  r.within_tolerance = r.violations == 0;
  return r;
}

double unit_roundoff(const TensorView& y) {
  return y.dtype() == DType::f64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
}
double smallest_subnormal(const TensorView& y) {
  return y.dtype() == DType::f64 ? std::ldexp(1.0, -1074) : std::ldexp(1.0, -149);
}

}  // namespace

VerifyReport verify_aggregate(const TensorView& y_in, const AggregateOracle& o) {
  Tensor y = host_contiguous(y_in);
  const std::int64_t N = o.y.dim(0), F = o.y.dim(1);
  if (y.numel() != N * F)
    throw std::invalid_argument(fmt::format("verify_aggregate: output has {} elements, oracle {}", y.numel(), N * F));
  return compare_rows(
      N, F, y, unit_roundoff(y), smallest_subnormal(y), o.y.data_as<const double>(), o.abs_sum.data_as<const double>(),
      o.degree.data_as<const std::int64_t>(), [](std::int64_t j) { return j; },
      [F](std::int64_t j, std::int64_t f) { return j * F + f; });
}

VerifyReport verify_aggregate_rows(const TensorView& y_in, const TensorView& x_in, const TensorView& src_in,
                                   const TensorView& dst_in, const std::optional<TensorView>& w_in,
                                   const std::vector<std::int64_t>& rows, const AggregateOptions& opts) {
  // The bench's null test passes host tensors of 4x a workload's edges: no copies of those.
  Tensor hy, hx, hs, hd, hw;
  const TensorView y = on_host(y_in, hy), x = on_host(x_in, hx), src = on_host(src_in, hs), dst = on_host(dst_in, hd);
  const TensorView w = w_in ? on_host(*w_in, hw) : TensorView();
  if (x.rank() != 2) throw std::invalid_argument(fmt::format("verify_aggregate_rows: x must be [N, F], got {}", x.shape_str()));
  const std::int64_t N = x.dim(0), F = x.dim(1), E = src.numel(), R = std::int64_t(rows.size());
  if (y.numel() != N * F)
    throw std::invalid_argument(fmt::format("verify_aggregate_rows: output has {} elements, x {}", y.numel(), N * F));
  std::vector<std::int64_t> slot(static_cast<std::size_t>(N),
                                 -1);  // row -> its place in `rows` (the first, if repeated)
  for (std::int64_t j = R - 1; j >= 0; --j) {
    const std::int64_t i = rows[std::size_t(j)];
    if (i < 0 || i >= N)
      throw std::invalid_argument(fmt::format("verify_aggregate_rows: row {} is not in [0, {})", i, N));
    slot[std::size_t(i)] = j;
  }
  // The sampled rows' edges, found in parallel (each thread a contiguous range of edges, kept in
  // edge order), then summed in edge order: the whole oracle's sums, bit for bit. The first bad
  // edge is the lowest one any thread found.
  // (The team's size read inside the region, as in aggregate_oracle; at most omp_get_max_threads.)
  const int most = omp_get_max_threads();
  std::vector<std::vector<std::int64_t>> found(static_cast<std::size_t>(most));
  std::vector<std::int64_t> first_bad(static_cast<std::size_t>(most), E);
#pragma omp parallel num_threads(most)
  {
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const std::int64_t e0 = E * t / threads, e1 = E * (t + 1) / threads;
    for (std::int64_t e = e0; e < e1; ++e) {
      const auto sv = std::int64_t(element(src, e)), dv = std::int64_t(element(dst, e));
      if (!in_range(sv, N) || !in_range(dv, N)) {
        first_bad[std::size_t(t)] = e;
        break;
      }
      if (slot[std::size_t(dv)] >= 0) found[std::size_t(t)].push_back(e);
    }
  }
  if (const std::int64_t e = *std::min_element(first_bad.begin(), first_bad.end()); e < E)
    check_edge("verify_aggregate_rows", e, std::int64_t(element(src, e)), std::int64_t(element(dst, e)), N);
  std::vector<double> ref(static_cast<std::size_t>(R * F)), s(static_cast<std::size_t>(R * F));
  std::vector<std::int64_t> d(static_cast<std::size_t>(R));
  for (const auto& part : found)
    for (const std::int64_t e : part) {
      const std::int64_t j = slot[std::size_t(element(dst, e))];
      ++d[std::size_t(j)];
      add_message(ref.data() + j * F, s.data() + j * F, x, std::int64_t(element(src, e)), F, weight(w, e),
                  opts.transform);
    }
  // A repeated row takes its first place's sums.
  for (std::int64_t j = 0; j < R; ++j) {
    const std::int64_t k = slot[std::size_t(rows[std::size_t(j)])];
    if (k == j) continue;
    d[std::size_t(j)] = d[std::size_t(k)];
    std::copy_n(ref.begin() + k * F, F, ref.begin() + j * F);
    std::copy_n(s.begin() + k * F, F, s.begin() + j * F);
  }
  return compare_rows(
      R, F, y, unit_roundoff(y), smallest_subnormal(y), ref.data(), s.data(), d.data(), [&](std::int64_t j) { return rows[std::size_t(j)]; },
      [&](std::int64_t j, std::int64_t f) { return rows[std::size_t(j)] * F + f; });
}

std::string VerifyReport::summary() const {
  return fmt::format("max_abs_err={:.3e} rel_l2_err={:.3e} within_tolerance={} violations={} unwritten={} "
                     "worst_index={} worst_err/bound={:.3f}",
                     max_abs_err, rel_l2_err, within_tolerance, violations, unwritten, worst_index, worst_ratio);
}

}  // namespace pipelink
