// CPU backend of `aggregate`: build the destination-ordered plan, then run the fused row kernel
// for the best instruction set the CPU has.
#include "pipelink/ops/aggregate.hpp"

#include "core/log_internal.hpp"
#include "core/aggregate_plan_impl.hpp"
#include "cpu/aggregate_plan.hpp"
#include "pipelink/registry.hpp"

namespace pipelink {

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

// pipelink::AggregatePlan on the CPU: the same plan, kept between calls.
struct CpuPlan final : pipelink::AggregatePlan::Impl {
  AggregatePlan plan;
  void run(const TensorView& x, const TensorView* w, const TensorView& out, const AggregateOptions& opts,
           bool w_in_plan_order) override {
    RowsArgs a;
    a.plan = &plan;
    a.x = x.data();
    a.x_stride = x.stride(0);
    a.w = w ? w->data() : nullptr;
    a.w_plan_order = w_in_plan_order;
    a.out = out.data();
    a.out_stride = out.stride(0);
    a.features = x.dim(1);
    a.f64 = x.dtype() == DType::f64;
    a.transform = int(opts.transform);
    a.accumulate = opts.accumulate;
    run_rows(a, describe(Device::cpu()));
  }
  void permute(const TensorView& w, const TensorView& out, void*) override {
    if (w.dtype() == DType::f64) permute_as<double>(w, out);
    else permute_as<float>(w, out);
  }
  template <class T>
  void permute_as(const TensorView& w, const TensorView& out) const {
    const T* in = w.data_as<const T>();
    T* o = out.data_as<T>();
    const std::int64_t E = plan.num_edges;  // both contiguous (checked)
    auto gather = [&](const auto* slots) {
#pragma omp parallel for schedule(static)
      for (std::int64_t k = 0; k < E; ++k) o[k] = in[std::int64_t(slots[k].eid)];
    };
    if (plan.wide) gather(plan.slots<std::int64_t>());
    else gather(plan.slots<std::int32_t>());
  }
};

std::shared_ptr<pipelink::AggregatePlan::Impl> build_cpu_plan(const TensorView& src, const TensorView& dst,
                                                              std::int64_t num_nodes, void*) {
  auto p = std::make_shared<CpuPlan>();
  p->plan = AggregatePlan::build(src, dst, num_nodes);
  p->device = Device::cpu();
  p->num_nodes = num_nodes;
  p->num_edges = src.numel();
  p->bytes = p->plan.bytes();
  return p;
}

const bool g_cpu_plan_builder = [] {
  detail::set_plan_builder(DeviceKind::cpu, &build_cpu_plan);
  return true;
}();
}  // namespace

}  // namespace cpu

PIPELINK_REGISTER_VARIANT(aggregate_cpu_csr) {
  return make_variant("aggregate", "csr_row_serial", DeviceKind::cpu, 10, true, cpu::aggregate_csr_kernel,
                      "counting-sort plan by destination, one thread per row, inlined tanh (AVX-512/AVX2/scalar by CPUID)");
}

}  // namespace pipelink
