// CPU kernels of the materialized three-op reference: gather_scale, map, index_add. They keep the
// seed's semantics (two [E, F] intermediates) but are not handicapped: OpenMP everywhere, the
// same row prefetch as the fused op, and SLEEF's u10 tanh, the one torch.tanh uses on CPU (the
// fused op has its own inlined tanh; see aggregate_rows.inl).
#include <omp.h>

#include <algorithm>

#include "cpu/aggregate_plan.hpp"
#include "pipelink/ops/reference.hpp"
#include "pipelink/registry.hpp"

namespace pipelink {

void gather_scale(const TensorView& x, const TensorView& src, const std::optional<TensorView>& w, const TensorView& m) {
  PortMap ports{{"x", x}, {"src", src}, {"m", m}};
  if (w) ports.emplace("w", *w);
  invoke("gather_scale", ports);
}

void map(const TensorView& in, const TensorView& out, Transform transform) {
  invoke("map", {{"in", in}, {"out", out}}, {{"transform", std::string(transform_name(transform))}});
}

void index_add(const TensorView& out, const TensorView& dst, const TensorView& values) {
  invoke("index_add", {{"out", out}, {"dst", dst}, {"values", values}});
}

void aggregate_three_op(const TensorView& x, const TensorView& src, const TensorView& dst,
                        const std::optional<TensorView>& w, const TensorView& out, const AggregateOptions& opts) {
  // The aggregate's contract covers every tensor of the chain: check it before anything runs.
  PortMap ports{{"x", x}, {"src", src}, {"dst", dst}, {"out", out}};
  if (w) ports.emplace("w", *w);
  (void)check("aggregate", ports);
  const std::int64_t N = x.dim(0), E = src.numel(), F = x.dim(1);
  auto rows = [&](std::int64_t n) {
    return TensorBuilder().shape({n, F}).dtype(x.dtype()).device(x.device()).layout(Layout::rows);
  };
  Tensor m = rows(E).build();
  gather_scale(x, src, w, m);  // raises on the first bad src, before any write
  Tensor t = rows(E).build();
  map(m, t, opts.transform);
  m = Tensor();  // the first intermediate dies here, as in the eager reference
  if (opts.accumulate) {
    index_add(out, dst, t);  // raises on the first bad dst, before any write
    return;
  }
  // As the seed: output = zeros_like(x); output.index_add_(0, dst, t). The caller's `out` is
  // written only once everything succeeded.
  Tensor acc = rows(N).zeros();
  index_add(acc, dst, t);
  copy_into(out, acc);
}

namespace cpu {
namespace {

void map_dispatch(const MapArgs& a, const DeviceDesc& dev) {
  if (dev.features.contains("avx512f")) map_rows_avx512(a);
  else if (dev.features.contains("avx2")) map_rows_avx2(a);
  else map_rows_generic(a);
}

template <class T, class I>
void gather_rows(const TensorView& x, const I* src, const T* w, const TensorView& m, std::int64_t F) {
  const T* xp = x.data_as<const T>();
  T* mp = m.data_as<T>();
  const std::int64_t E = m.dim(0), xs = x.stride(0), ms = m.stride(0);
#pragma omp parallel for schedule(static)
  for (std::int64_t e = 0; e < E; ++e) {
    // Same prefetch as the fused kernel, so the baseline is not slowed by DRAM latency alone.
    const char* next = reinterpret_cast<const char*>(xp + std::int64_t(src[std::min(e + 8, E - 1)]) * xs);
    for (std::int64_t off = 0; off < std::min<std::int64_t>(F * std::int64_t(sizeof(T)), 512); off += 64)
      __builtin_prefetch(next + off, 0, 3);
    const T* xr = xp + std::int64_t(src[e]) * xs;
    T* mr = mp + e * ms;
    const T we = w ? w[e] : T(1);
    for (std::int64_t f = 0; f < F; ++f) mr[f] = xr[f] * we;
  }
}

void gather_scale_kernel(OpContext& ctx) {
  const TensorView &x = ctx.port("x"), &src = ctx.port("src"), &m = ctx.port("m");
  validate_indices("gather_scale", "src", src, ctx.dim("N"));
  const std::int64_t F = ctx.dim("F");
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* w = ctx.has("w") ? ctx.port("w").data_as<const T>() : nullptr;
    if (src.dtype() == DType::i32) gather_rows<T>(x, src.data_as<const std::int32_t>(), w, m, F);
    else gather_rows<T>(x, src.data_as<const std::int64_t>(), w, m, F);
  };
  if (x.dtype() == DType::f64) run(double{});
  else run(float{});
}

void map_kernel(OpContext& ctx) {
  const TensorView &in = ctx.port("in"), &out = ctx.port("out");
  MapArgs a;
  a.in = in.data();
  a.in_stride = in.stride(0);
  a.out = out.data();
  a.out_stride = out.stride(0);
  a.rows = ctx.dim("R");
  a.cols = ctx.dim("C");
  a.f64 = in.dtype() == DType::f64;
  a.transform = int(parse_transform(ctx.attr<std::string>("transform"), "map"));
  map_dispatch(a, ctx.device_desc);
}

// Scatter-add in edge order. Threads split the feature columns, never the edges, so each output
// element is summed in the same order whatever the thread count (deterministic, no atomics).
template <class T, class I>
void index_add_cols(const TensorView& out, const I* dst, const TensorView& values) {
  T* op = out.data_as<T>();
  const T* vp = values.data_as<const T>();
  const std::int64_t E = values.dim(0), F = values.dim(1), os = out.stride(0), vs = values.stride(0);
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const std::int64_t f0 = F * t / nt, f1 = F * (t + 1) / nt;
    for (std::int64_t e = 0; e < E; ++e) {
      T* orow = op + std::int64_t(dst[e]) * os;
      const T* vrow = vp + e * vs;
      for (std::int64_t f = f0; f < f1; ++f) orow[f] += vrow[f];
    }
  }
}

void index_add_kernel(OpContext& ctx) {
  const TensorView &out = ctx.port("out"), &dst = ctx.port("dst"), &values = ctx.port("values");
  validate_indices("index_add", "dst", dst, ctx.dim("N"));
  auto run = [&](auto tag) {
    using T = decltype(tag);
    if (dst.dtype() == DType::i32) index_add_cols<T>(out, dst.data_as<const std::int32_t>(), values);
    else index_add_cols<T>(out, dst.data_as<const std::int64_t>(), values);
  };
  if (out.dtype() == DType::f64) run(double{});
  else run(float{});
}

Variant cpu_variant(const char* op, const char* name, KernelFn fn, const char* doc) {
  return make_variant(op, name, DeviceKind::cpu, 10, true, std::move(fn), doc);
}

}  // namespace
}  // namespace cpu

PIPELINK_REGISTER_VARIANT(gather_scale_cpu) {
  return cpu::cpu_variant("gather_scale", "row_copy", cpu::gather_scale_kernel, "one thread block of edges per thread");
}
PIPELINK_REGISTER_VARIANT(map_cpu) {
  return cpu::cpu_variant("map", "elementwise_simd", cpu::map_kernel, "SLEEF u10 tanh / exp, AVX-512/AVX2/scalar by CPUID");
}
PIPELINK_REGISTER_VARIANT(index_add_cpu) {
  return cpu::cpu_variant("index_add", "edge_order_column_split", cpu::index_add_kernel,
                          "edge-ordered scatter, threads split feature columns (deterministic)");
}

}  // namespace pipelink
