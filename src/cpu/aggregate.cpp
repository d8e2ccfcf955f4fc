// CPU backend of `aggregate`: build the destination-ordered plan, then run the fused row kernel
// for the best instruction set the CPU has.
#include "pipelink/ops/aggregate.hpp"

#include "core/log_internal.hpp"
#include "cpu/aggregate_plan.hpp"
#include "pipelink/registry.hpp"

namespace pipelink {

std::string_view transform_name(Transform t) noexcept {
  switch (t) {
    case Transform::identity: return "identity";
    case Transform::tanh: return "tanh";
    case Transform::relu: return "relu";
    case Transform::sigmoid: return "sigmoid";
  }
  return "?";
}

Transform parse_transform(std::string_view name, std::string_view op) {
  for (auto t : {Transform::identity, Transform::tanh, Transform::relu, Transform::sigmoid})
    if (transform_name(t) == name) return t;
  throw ContractViolationError(std::string(op), "transform", field::attribute, "one of identity|tanh|relu|sigmoid",
                               "'" + std::string(name) + "'");
}

void aggregate(const TensorView& x, const TensorView& src, const TensorView& dst, const std::optional<TensorView>& w,
               const TensorView& out, const AggregateOptions& opts) {
  PortMap ports{{"x", x}, {"src", src}, {"dst", dst}, {"out", out}};
  if (w) ports.emplace("w", *w);
  invoke("aggregate", ports,
         {{"transform", std::string(transform_name(opts.transform))}, {"accumulate", opts.accumulate}});
}

namespace cpu {

void run_rows(const RowsArgs& a, const DeviceDesc& dev) {
  if (dev.features.contains("avx512f")) aggregate_rows_avx512(a);
  else if (dev.features.contains("avx2")) aggregate_rows_avx2(a);
  else aggregate_rows_generic(a);
}

RowsArgs rows_args(const OpContext& ctx, const AggregatePlan& plan) {
  const TensorView& x = ctx.port("x");
  const TensorView& out = ctx.port("out");
  RowsArgs a;
  a.plan = &plan;
  a.x = x.data();
  a.x_stride = x.rank() == 2 ? x.stride(0) : 0;
  a.w = ctx.has("w") ? ctx.port("w").data() : nullptr;
  a.out = out.data();
  a.out_stride = out.stride(0);
  a.features = ctx.dim("F");
  a.f64 = x.dtype() == DType::f64;
  a.transform = int(parse_transform(ctx.attr<std::string>("transform")));
  a.accumulate = ctx.attr<bool>("accumulate");
  return a;
}

namespace {
void aggregate_csr_kernel(OpContext& ctx) {
  // Validation happens inside build(), before `out` is touched.
  const AggregatePlan plan = AggregatePlan::build(ctx.port("src"), ctx.port("dst"), ctx.dim("N"));
  run_rows(rows_args(ctx, plan), ctx.device_desc);
}
}  // namespace

}  // namespace cpu

PIPELINK_REGISTER_VARIANT(aggregate_cpu_csr) {
  Variant v;
  v.op = "aggregate";
  v.name = "csr_row_serial";
  v.backend = DeviceKind::cpu;
  v.priority = 10;
  v.deterministic = true;
  v.doc = "counting-sort plan by destination, one thread per row, SLEEF tanh (AVX-512/AVX2/scalar by CPUID)";
  v.fn = cpu::aggregate_csr_kernel;
  return v;
}

}  // namespace pipelink
