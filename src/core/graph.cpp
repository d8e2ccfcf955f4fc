// Seeded graph generators, the named workloads of PROTOCOL.md §1 and random tensor fills.
//
// Determinism: every generator splits its output into fixed-size blocks and gives each block its
// own random stream, seeded from (seed, block index). The output therefore depends only on the
// seed, never on the number of OpenMP threads that happened to run.
#include "pipelink/graph.hpp"

#include "host_memory.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace pipelink {
namespace {

__extension__ typedef unsigned __int128 u128;  // NOLINT: GCC/Clang builtin for the 64x64 multiply

// splitmix64's output function: a bijective 64-bit mixer, used to derive stream seeds.
constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Seed of sub-stream `stream` of `seed`. Mixing twice keeps neighbouring (seed, stream) pairs
// unrelated, so block b of seed s and block b+1 of seed s-1 do not share a stream.
constexpr std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream) noexcept {
  return mix64(seed ^ mix64(stream + 0x9e3779b97f4a7c15ull));
}

// xoshiro256** (Blackman & Vigna): ~1 ns per 64-bit draw, passes BigCrush; seeded through
// splitmix64 as its authors recommend so that no state is all-zero.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) noexcept {
    for (auto& w : s_) {
      seed += 0x9e3779b97f4a7c15ull;
      w = mix64(seed);
    }
  }
  std::uint64_t next() noexcept {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  /// Uniform in [0, n) by Lemire's multiply-shift; the bias (≤ n / 2^64) is far below anything
  /// measurable, so no rejection step.
  std::uint64_t below(std::uint64_t n) noexcept { return std::uint64_t((u128(next()) * n) >> 64); }
  /// Uniform in [0, 1) with 53 random bits.
  double unit() noexcept { return double(next() >> 11) * 0x1.0p-53; }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  std::array<std::uint64_t, 4> s_{};
};

constexpr std::int64_t kEdgeBlock = 1 << 16;  // edges per random stream
constexpr std::int64_t kFillBlock = 1 << 14;  // tensor elements per random stream

// Runs body(rng, begin, end) over [0, n) in blocks of `block`, each with its own stream.
template <class Body>
void for_each_block(std::int64_t n, std::int64_t block, std::uint64_t seed, const Body& body) {
  const std::int64_t nblocks = (n + block - 1) / block;
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < nblocks; ++b) {
    Rng rng(derive_seed(seed, std::uint64_t(b)));
    body(rng, b * block, std::min(n, (b + 1) * block));
  }
}

// Calls f(T{}) with T the C++ type of an index dtype.
template <class F>
decltype(auto) with_index_type(DType t, const char* who, F&& f) {
  if (t == DType::i32) return f(std::int32_t{});
  if (t == DType::i64) return f(std::int64_t{});
  throw std::invalid_argument(
      fmt::format("{}: index dtype must be int32 or int64, got {}", who, dtype_name(t)));
}

void check_graph_args(const char* who, std::int64_t num_nodes, std::int64_t num_edges, DType index_dtype) {
  if (num_nodes < 0 || num_edges < 0)
    throw std::invalid_argument(fmt::format("{}: negative size (N = {}, E = {})", who, num_nodes, num_edges));
  if (num_nodes == 0 && num_edges > 0)
    throw std::invalid_argument(fmt::format("{}: {} edges need at least one node", who, num_edges));
  if (index_dtype == DType::i32 && num_nodes - 1 > std::numeric_limits<std::int32_t>::max())
    throw std::invalid_argument(fmt::format("{}: N = {} does not fit int32 indices", who, num_nodes));
}

EdgeList allocate_edges(std::int64_t num_nodes, std::int64_t num_edges, DType index_dtype) {
  EdgeList g;
  g.num_nodes = num_nodes;
  g.src = TensorBuilder().shape({num_edges}).dtype(index_dtype).build();
  g.dst = TensorBuilder().shape({num_edges}).dtype(index_dtype).build();
  return g;
}

// Probability p as a threshold on a uniform 32-bit draw held in 64 bits, so that p = 1 maps to
// 2^32 and is never reached (a 32-bit threshold would misplace one draw in 2^32).
std::uint64_t threshold32(double p) {
  return std::uint64_t(std::llround(std::clamp(p, 0.0, 1.0) * 0x1.0p32));
}

// ---------------------------------------------------------------------------------------------
// Stable counting sort by destination, parallel over contiguous chunks of the edge list: each
// thread counts its chunk, a prefix sum over (node, thread) gives every thread its own slice of
// each node's bucket, and a scatter in chunk order keeps equal keys in input order.
template <class T, class W>
struct SortArrays {
  const T* src;
  const T* dst;
  const W* w;  // null when the edges carry no weight
  T* out_src;
  T* out_dst;
  W* out_w;
};

// Host scratch for `count` elements of T, its failure named for `who` and num_nodes: a std::vector
// of 2^62 nodes threw length_error ("cannot create std::vector larger than max_size()") and one of
// 2^40 a bare bad_alloc, neither saying whose or how large (a probe, session 53).
template <class T>
T* node_scratch(detail::HostBuffer& buf, std::size_t count, const char* who, std::int64_t num_nodes) {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(count, sizeof(T), &bytes))
    throw OutOfMemoryError(std::numeric_limits<std::uint64_t>::max(), 0,
                           fmt::format("{}: num_nodes = {} needs more than 2^64 bytes of host memory", who, num_nodes));
  try {
    buf = detail::allocate_host(bytes);
  } catch (const OutOfMemoryError& e) {
    throw OutOfMemoryError(e.requested(), e.free_bytes(), fmt::format("{}: num_nodes = {}: {}", who, num_nodes, e.what()));
  }
  return static_cast<T*>(buf.get());
}

// Threads beyond E/N each add a whole N-sized histogram for little work; cap them.
int sort_threads(std::int64_t num_edges, std::int64_t num_nodes) {
  const std::int64_t by_work = num_edges / std::max<std::int64_t>(num_nodes, kEdgeBlock);
  return int(std::clamp<std::int64_t>(by_work, 1, std::min(omp_get_max_threads(), 8)));
}

template <class T, class W>
void counting_sort(const SortArrays<T, W>& a, std::int64_t num_edges, std::int64_t num_nodes) {
  // [thread][node]: the count, then that thread's next output slot. Allocated before the parallel
  // region because an exception must not escape it; the team may be smaller than asked for.
  const int max_threads = sort_threads(num_edges, num_nodes);
  detail::HostBuffer pos_buf;
  std::size_t pos_count = 0;  // saturated: node_scratch then says the bytes pass 2^64
  if (__builtin_mul_overflow(std::size_t(max_threads), std::size_t(num_nodes), &pos_count))
    pos_count = std::numeric_limits<std::size_t>::max();
  std::int64_t* const pos = node_scratch<std::int64_t>(pos_buf, pos_count, "sort_by_destination", num_nodes);
  std::fill_n(pos, pos_count, std::int64_t(0));
  std::int64_t first_bad = num_edges;
  int nt = 1;
#pragma omp parallel num_threads(max_threads)
  {
#pragma omp single
    nt = omp_get_num_threads();
    const int t = omp_get_thread_num();
    const std::int64_t lo = num_edges * t / nt, hi = num_edges * (t + 1) / nt;
    std::int64_t* mine = pos + std::int64_t(t) * num_nodes;
    std::int64_t bad = num_edges;
    for (std::int64_t e = lo; e < hi; ++e) {
      const auto d = std::int64_t(a.dst[e]);
      if (d < 0 || d >= num_nodes) {
        bad = std::min(bad, e);
        continue;
      }
      ++mine[d];
    }
#pragma omp critical
    first_bad = std::min(first_bad, bad);
#pragma omp barrier
#pragma omp single
    {
      std::int64_t running = 0;
      for (std::int64_t k = 0; k < num_nodes; ++k)
        for (int u = 0; u < nt; ++u) {
          auto& c = pos[std::size_t(u) * std::size_t(num_nodes) + std::size_t(k)];
          const std::int64_t n = c;
          c = running;
          running += n;
        }
    }
    if (first_bad == num_edges) {  // every thread sees the same value after the barrier
      for (std::int64_t e = lo; e < hi; ++e) {
        const std::int64_t slot = mine[a.dst[e]]++;
        a.out_src[slot] = a.src[e];
        a.out_dst[slot] = a.dst[e];
        if (a.w) a.out_w[slot] = a.w[e];
      }
    }
  }
  if (first_bad < num_edges)
    throw IndexOutOfRangeError("sort_by_destination", "dst", first_bad, std::int64_t(a.dst[first_bad]), num_nodes);
}

// `who` names the caller in its errors (relabel_nodes' said "sort_by_destination"), and the
// weight is checked only where it moves with its edge: relabelling never touches it (a review,
// session 46).
void check_sortable(const EdgeList& g, const char* who, bool check_weight) {
  auto bad = [who](const char* why) { throw std::invalid_argument(std::string(who) + ": " + why); };
  const TensorView& s = g.src;
  const TensorView& d = g.dst;
  if (g.num_nodes < 0) bad("negative num_nodes");
  if (s.dtype() != d.dtype()) bad("src and dst have different dtypes");
  if (s.rank() != 1 || d.rank() != 1 || s.numel() != d.numel()) bad("src and dst must both be [E]");
  if (s.device() != Device::cpu() || d.device() != Device::cpu()) bad("edges must be on the CPU");
  if (!s.is_contiguous() || !d.is_contiguous()) bad("src and dst must be contiguous");
  if (check_weight && g.weight.defined()) {
    const TensorView& w = g.weight;
    if (w.rank() != 1 || w.numel() != s.numel() || w.device() != Device::cpu() || !w.is_contiguous())
      bad("weight must be a contiguous [E] CPU tensor like src");
  }
}

// Same-size unsigned type for moving a weight of any dtype bit for bit.
template <std::size_t Bytes> struct Bits;
template <> struct Bits<1> { using type = std::uint8_t; };
template <> struct Bits<4> { using type = std::uint32_t; };
template <> struct Bits<8> { using type = std::uint64_t; };

template <class T, std::size_t WBytes>
void sort_typed(EdgeList& g, Tensor& out_src, Tensor& out_dst, Tensor& out_w) {
  using W = typename Bits<WBytes>::type;
  const bool has_w = g.weight.defined() && WBytes == g.weight.view().itemsize();
  SortArrays<T, W> a{g.src.data_as<T>(), g.dst.data_as<T>(), has_w ? g.weight.data_as<W>() : nullptr,
                     out_src.data_as<T>(), out_dst.data_as<T>(), has_w ? out_w.data_as<W>() : nullptr};
  counting_sort(a, g.num_edges(), g.num_nodes);
}

// ---------------------------------------------------------------------------------------------
// Fills: the value of logical element i depends only on (seed, i), whatever the layout.

// Marsaglia's polar method: two normals per accepted pair, no trigonometry.
template <class T>
void normal_block(Rng& rng, T* p, std::int64_t begin, std::int64_t end) {
  std::int64_t i = begin;
  while (i < end) {
    double u = 0, v = 0, s = 0;
    do {
      u = 2 * rng.unit() - 1;
      v = 2 * rng.unit() - 1;
      s = u * u + v * v;
    } while (s >= 1 || s == 0);
    const double f = std::sqrt(-2 * std::log(s) / s);
    p[i++] = T(u * f);
    if (i < end) p[i++] = T(v * f);
  }
}

template <class T>
void uniform_block(Rng& rng, T* p, std::int64_t begin, std::int64_t end, double lo, double hi) {
  // Rounding lo + (hi-lo)*u to T can land on hi; pull it back so the range stays [lo, hi).
  const T top = (lo < hi) ? std::nextafter(T(hi), T(lo)) : T(lo);
  for (std::int64_t i = begin; i < end; ++i) p[i] = std::min(T(lo + (hi - lo) * rng.unit()), top);
}

// Writes contiguous `src` into the strided view `dst` (same shape and dtype), element by element.
// Validates `v`, then runs fill(contiguous view) directly or through a contiguous temporary.
template <class Fill>
void fill_view(const char* who, const TensorView& v, const Fill& fill) {
  if (v.device() != Device::cpu())
    throw std::invalid_argument(fmt::format("{}: tensor is on {}, expected cpu", who, v.device().str()));
  if (!is_floating(v.dtype()))
    throw std::invalid_argument(fmt::format("{}: dtype {} is not float32 or float64", who, dtype_name(v.dtype())));
  if (v.numel() == 0) return;
  if (v.is_contiguous()) return fill(v);
  std::vector<std::int64_t> shape(v.shape().begin(), v.shape().end());
  Tensor tmp = TensorBuilder().shape(std::move(shape)).dtype(v.dtype()).build();
  fill(tmp.view());
  copy_into(v, tmp);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
std::string_view edge_order_name(EdgeOrder o) noexcept {
  switch (o) {
    case EdgeOrder::random: return "random";
    case EdgeOrder::dst_sorted: return "dst-sorted";
  }
  return "?";
}

EdgeOrder parse_edge_order(std::string_view s) {
  for (auto o : {EdgeOrder::random, EdgeOrder::dst_sorted})
    if (edge_order_name(o) == s) return o;
  throw std::invalid_argument(fmt::format("unknown edge order '{}'; expected one of: random, dst-sorted", s));
}

EdgeList uniform_graph(std::int64_t num_nodes, std::int64_t num_edges, std::uint64_t seed, DType index_dtype) {
  check_graph_args("uniform_graph", num_nodes, num_edges, index_dtype);
  EdgeList g = allocate_edges(num_nodes, num_edges, index_dtype);
  with_index_type(index_dtype, "uniform_graph", [&](auto tag) {
    using T = decltype(tag);
    T* src = g.src.data_as<T>();
    T* dst = g.dst.data_as<T>();
    const auto n = std::uint64_t(num_nodes);
    for_each_block(num_edges, kEdgeBlock, seed, [&](Rng& rng, std::int64_t lo, std::int64_t hi) {
      for (std::int64_t e = lo; e < hi; ++e) {
        src[e] = T(rng.below(n));
        dst[e] = T(rng.below(n));
      }
    });
  });
  return g;
}

EdgeList rmat_graph(int scale, std::int64_t num_edges, double a, double b, double c, std::uint64_t seed,
                    DType index_dtype) {
  if (scale < 0 || scale > 62) throw std::invalid_argument(fmt::format("rmat_graph: scale {} outside [0, 62]", scale));
  if (!(a >= 0 && b >= 0 && c >= 0 && a + b + c <= 1 + 1e-12))
    throw std::invalid_argument(fmt::format("rmat_graph: need a, b, c >= 0 and a + b + c <= 1, got {}, {}, {}", a, b, c));
  const std::int64_t num_nodes = std::int64_t(1) << scale;
  check_graph_args("rmat_graph", num_nodes, num_edges, index_dtype);
  EdgeList g = allocate_edges(num_nodes, num_edges, index_dtype);
  // Quadrants of the adjacency matrix (row = src, column = dst): a top-left, b top-right,
  // c bottom-left, d bottom-right. One 32-bit uniform picks the quadrant at each level, two levels
  // per 64-bit draw; the bit arithmetic is branch-free because the choice is unpredictable.
  const std::uint64_t ta = threshold32(a), tab = threshold32(a + b), tabc = threshold32(a + b + c);
  with_index_type(index_dtype, "rmat_graph", [&](auto tag) {
    using T = decltype(tag);
    T* src = g.src.data_as<T>();
    T* dst = g.dst.data_as<T>();
    for_each_block(num_edges, kEdgeBlock, seed, [&](Rng& rng, std::int64_t lo, std::int64_t hi) {
      for (std::int64_t e = lo; e < hi; ++e) {
        std::uint64_t row = 0, col = 0;
        auto descend = [&](std::uint64_t r) {
          const bool past_a = r >= ta, past_b = r >= tab, past_c = r >= tabc;
          row = (row << 1) | std::uint64_t(past_b);                    // c or d
          col = (col << 1) | std::uint64_t(past_a ^ past_b ^ past_c);  // b or d
        };
        int level = 0;
        for (; level + 1 < scale; level += 2) {
          const std::uint64_t r = rng.next();
          descend(r & 0xffffffffu);
          descend(r >> 32);
        }
        if (level < scale) descend(rng.next() >> 32);
        src[e] = T(row);
        dst[e] = T(col);
      }
    });
  });
  return g;
}

void relabel_nodes(EdgeList& g, std::uint64_t seed) {
  check_sortable(g, "relabel_nodes", false);  // the same requirements: [E] contiguous CPU indices of one dtype
  const std::int64_t n = g.num_nodes, e = g.num_edges();
  with_index_type(g.src.dtype(), "relabel_nodes", [&](auto tag) {
    using T = decltype(tag);
    T* ends[2] = {g.src.data_as<T>(), g.dst.data_as<T>()};
    const char* ports[2] = {"src", "dst"};
    for (int k = 0; k < 2; ++k)  // checked before any write, so a bad index leaves the edges as they were
      for (std::int64_t i = 0; i < e; ++i)
        if (ends[k][i] < 0 || std::int64_t(ends[k][i]) >= n)
          throw IndexOutOfRangeError("relabel_nodes", ports[k], i, std::int64_t(ends[k][i]), n);
    detail::HostBuffer perm_buf;
    T* const perm = node_scratch<T>(perm_buf, std::size_t(n), "relabel_nodes", n);
    std::iota(perm, perm + n, T(0));
    Rng rng(derive_seed(seed, 0x72656c6162656cull));  // Fisher-Yates
    for (std::int64_t i = n - 1; i > 0; --i) std::swap(perm[std::size_t(i)], perm[rng.below(std::uint64_t(i) + 1)]);
    for (T* v : ends) {
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < e; ++i) v[i] = perm[std::size_t(v[i])];
    }
  });
}

void sort_by_destination(EdgeList& g) {
  check_sortable(g, "sort_by_destination", true);
  const DType it = g.src.dtype();
  const std::int64_t e = g.num_edges();
  Tensor out_src = TensorBuilder().shape({e}).dtype(it).build();
  Tensor out_dst = TensorBuilder().shape({e}).dtype(it).build();
  Tensor out_w;
  if (g.weight.defined()) out_w = TensorBuilder().shape({e}).dtype(g.weight.dtype()).build();
  const std::size_t wbytes = g.weight.defined() ? g.weight.view().itemsize() : 4;
  with_index_type(it, "sort_by_destination", [&](auto tag) {
    using T = decltype(tag);
    switch (wbytes) {
      case 1: sort_typed<T, 1>(g, out_src, out_dst, out_w); break;
      case 8: sort_typed<T, 8>(g, out_src, out_dst, out_w); break;
      default: sort_typed<T, 4>(g, out_src, out_dst, out_w); break;
    }
  });
  g.src = std::move(out_src);
  g.dst = std::move(out_dst);
  if (g.weight.defined()) g.weight = std::move(out_w);
}

// ---------------------------------------------------------------------------------------------
const std::vector<WorkloadSpec>& named_workloads() {
  auto uniform = [](const char* name, std::int64_t n, std::int64_t e, const char* why) {
    WorkloadSpec s;
    s.name = name;
    s.num_nodes = n;
    s.num_edges = e;
    s.why = why;
    return s;
  };
  static const std::vector<WorkloadSpec> specs = [&] {
    std::vector<WorkloadSpec> v;
    v.push_back(uniform("arxiv-like", 169343, 1166243, "small; CPU and CI scale (ogbn-arxiv's size)"));
    v.push_back(uniform("products-like", 2449029, 61859140, "the production range (ogbn-products' size)"));
    v.push_back(uniform("seed-40M", 2449029, 40000000, "low end of the production range"));
    WorkloadSpec p = uniform("power-law", std::int64_t(1) << 21, 63000000,
                             "hub rows with in-degree in the 10^5-10^6 range (R-MAT)");
    p.rmat = true;
    p.rmat_scale = 21;
    p.a = 0.57;
    p.b = 0.19;
    p.c = 0.19;
    v.push_back(std::move(p));
    return v;
  }();
  return specs;
}

const WorkloadSpec& workload_spec(std::string_view name) {
  std::string known;
  for (const auto& s : named_workloads()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw LookupError(fmt::format("unknown workload '{}'; known workloads: {}", name, known));
}

WorkloadSpec scale_edges(WorkloadSpec spec, double edge_scale) {
  const double e = double(spec.num_edges) * edge_scale;
  if (!(edge_scale > 0) || !(e <= std::ldexp(1.0, 40)))
    throw std::invalid_argument(fmt::format("workload '{}': edge_scale {} gives {:.3g} edges; it must be a positive "
                                            "number giving at most 2^40",
                                            spec.name, edge_scale, e));
  spec.num_edges = std::max<std::int64_t>(1, std::llround(e));
  return spec;
}

WorkloadData make_workload(const WorkloadSpec& spec, EdgeOrder order, std::uint64_t seed, DType index_dtype) {
  if (spec.rmat && spec.num_nodes != (std::int64_t(1) << std::clamp(spec.rmat_scale, 0, 62)))
    throw std::invalid_argument(fmt::format("workload '{}': R-MAT scale {} gives 2^{} nodes, but num_nodes is {}",
                                            spec.name, spec.rmat_scale, spec.rmat_scale, spec.num_nodes));
  if (spec.features < 0) throw std::invalid_argument(fmt::format("workload '{}': negative features", spec.name));
  WorkloadData d;
  d.spec = spec;
  d.order = order;
  d.graph = spec.rmat ? rmat_graph(spec.rmat_scale, spec.num_edges, spec.a, spec.b, spec.c,
                                   derive_seed(seed, 1), index_dtype)
                      : uniform_graph(spec.num_nodes, spec.num_edges, derive_seed(seed, 1), index_dtype);
  if (spec.relabel) relabel_nodes(d.graph, derive_seed(seed, 4));
  d.x = TensorBuilder().shape({spec.num_nodes, spec.features}).dtype(DType::f32).build();
  fill_normal(d.x, derive_seed(seed, 2));
  d.w = TensorBuilder().shape({spec.num_edges}).dtype(DType::f32).build();
  fill_uniform(d.w, -1.0, 1.0, derive_seed(seed, 3));
  if (order == EdgeOrder::dst_sorted) {
    // w travels with its edge, so both orders describe the same weighted graph and their
    // outputs differ only by summation order.
    d.graph.weight = d.w;
    sort_by_destination(d.graph);
    d.w = std::move(d.graph.weight);
    d.graph.weight = Tensor();
  }
  return d;
}

void fill_normal(const TensorView& v, std::uint64_t seed) {
  fill_view("fill_normal", v, [&](const TensorView& c) {
    for_each_block(c.numel(), kFillBlock, seed, [&](Rng& rng, std::int64_t lo, std::int64_t hi) {
      if (c.dtype() == DType::f32) normal_block(rng, c.data_as<float>(), lo, hi);
      else normal_block(rng, c.data_as<double>(), lo, hi);
    });
  });
}

void fill_uniform(const TensorView& v, double lo, double hi, std::uint64_t seed) {
  if (!(std::isfinite(lo) && std::isfinite(hi) && lo <= hi))
    throw std::invalid_argument(fmt::format("fill_uniform: need finite lo <= hi, got [{}, {})", lo, hi));
  fill_view("fill_uniform", v, [&](const TensorView& c) {
    for_each_block(c.numel(), kFillBlock, seed, [&](Rng& rng, std::int64_t b, std::int64_t e) {
      if (c.dtype() == DType::f32) uniform_block(rng, c.data_as<float>(), b, e, lo, hi);
      else uniform_block(rng, c.data_as<double>(), b, e, lo, hi);
    });
  });
}

}  // namespace pipelink
