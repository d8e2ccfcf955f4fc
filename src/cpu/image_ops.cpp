// The image ops: contracts, CPU kernels and the public entry points.
#include "pipelink/ops/image.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "pipelink/contract.hpp"
#include "pipelink/registry.hpp"

namespace pipelink {

namespace {

constexpr const char* kSobel = "sobel_3x3";
constexpr const char* kGamma = "gamma_correct";

ExecContract sync_exec() {
  ExecContract e;
  e.async = false;
  e.max_streams = 1;
  e.deterministic = true;
  e.workspace_bytes = [](const ShapeBindings&, const Attrs&) -> std::size_t { return 0; };
  return e;
}

PortContract image_port(std::string name, std::string_view pattern, std::string doc) {
  PortContract p = port(std::move(name), pattern, {DType::f32});
  p.layout = Layout::nhwc;
  p.contiguity = Contiguity::contiguous;
  p.device_kinds = kAllDevices;
  p.doc = std::move(doc);
  return p;
}

// ---- sobel_3x3 -------------------------------------------------------------------------------

void sobel_cpu(OpContext& ctx) {
  const TensorView& in = ctx.port("in");
  const TensorView& out = ctx.port("out");
  const std::int64_t B = ctx.dim("B"), H = ctx.dim("H"), W = ctx.dim("W");
  const float* src = in.data_as<const float>();
  float* dst = out.data_as<float>();

  // Each output pixel depends only on the input, so any row schedule gives identical bits.
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < B * H; ++row) {
    const std::int64_t b = row / H, y = row % H;
    const std::int64_t ys[3] = {std::max<std::int64_t>(y - 1, 0), y, std::min(y + 1, H - 1)};
    const float* plane = src + b * H * W * 3;
    auto luma = [&](std::int64_t yy, std::int64_t xx) {
      const float* px = plane + (yy * W + xx) * 3;
      return 0.299f * px[0] + 0.587f * px[1] + 0.114f * px[2];
    };
    for (std::int64_t x = 0; x < W; ++x) {
      const std::int64_t xs[3] = {std::max<std::int64_t>(x - 1, 0), x, std::min(x + 1, W - 1)};
      float l[3][3];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) l[i][j] = luma(ys[i], xs[j]);
      const float gx = (l[0][2] - l[0][0]) + 2.0f * (l[1][2] - l[1][0]) + (l[2][2] - l[2][0]);
      const float gy = (l[2][0] - l[0][0]) + 2.0f * (l[2][1] - l[0][1]) + (l[2][2] - l[0][2]);
      // The magnitude in double: gx*gx overflows float for inputs above ~1e19.
      dst[row * W + x] = float(std::sqrt(double(gx) * gx + double(gy) * gy));
    }
  }
}

PIPELINK_REGISTER_OP(sobel_3x3) {
  ExecContract e = sync_exec();
  return OpBuilder(kSobel, 1)
      .doc("Sobel gradient magnitude of the luma (0.299 R + 0.587 G + 0.114 B), 3x3, borders replicated")
      .input(image_port("in", "[B, H, W, 3]", "RGB image, NHWC"))
      .output(image_port("out", "[B, H, W, 1]", "gradient magnitude sqrt(gx^2 + gy^2)"))
      .exec(std::move(e))
      .build();
}

PIPELINK_REGISTER_VARIANT(sobel_3x3_cpu_direct) {
  return make_variant(kSobel, "direct_3x3", DeviceKind::cpu, 0, true, sobel_cpu,
                      "direct 3x3 stencil, luma recomputed per tap, OpenMP over rows");
}

// ---- gamma_correct ---------------------------------------------------------------------------

void gamma_cpu(OpContext& ctx) {
  const TensorView& in = ctx.port("in");
  const TensorView& out = ctx.port("out");
  const double gamma = ctx.attr<double>("gamma");
  // `!(gamma > 0)` also rejects NaN.
  if (!(gamma > 0) || !std::isfinite(gamma))
    throw ContractViolationError(kGamma, "gamma", field::attribute, "finite value > 0", attr_str(gamma));

  const float* src = in.data_as<const float>();
  float* dst = out.data_as<float>();
  const std::int64_t n = ctx.dim("N");
  const double inv = 1.0 / gamma;
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    // std::clamp keeps NaN as NaN (both comparisons are false), so NaN inputs stay visible.
    const double x = std::clamp(double(src[i]), 0.0, 1.0);
    dst[i] = float(std::pow(x, inv));
  }
}

PIPELINK_REGISTER_OP(gamma_correct) {
  PortContract in = port("in", "[N]", {DType::f32});
  in.doc = "any shape, flattened by gamma_correct()";
  PortContract out = port("out", "[N]", {DType::f32});
  out.doc = "same shape as in; may be the same memory (in-place)";
  ExecContract e = sync_exec();
  e.may_alias = {{"in", "out"}};
  return OpBuilder(kGamma, 1)
      .doc("out = clamp(in, 0, 1) ^ (1 / gamma), elementwise")
      .input(std::move(in))
      .output(std::move(out))
      .attr(AttrSpec{"gamma", AttrValue(2.2), {}, "finite, > 0"})
      .exec(std::move(e))
      .build();
}

PIPELINK_REGISTER_VARIANT(gamma_correct_cpu_elementwise) {
  return make_variant(kGamma, "elementwise", DeviceKind::cpu, 0, true, gamma_cpu, "elementwise pow in double, OpenMP");
}

std::string strides_str(const TensorView& v) {
  std::string s = "[";
  for (int d = 0; d < v.rank(); ++d) s += (d ? ", " : "") + std::to_string(v.stride(d));
  return s + "]";
}

// Ports need a fixed rank, so the op sees every tensor as [N]. That is only valid for
// contiguous memory, and it hides a shape mismatch that keeps numel, so both are checked here.
TensorView flatten_for_gamma(const TensorView& v, const char* port_name) {
  if (!v.is_contiguous())
    throw ContractViolationError(kGamma, port_name, field::contiguity, "contiguous", "strided " + strides_str(v),
                                 v.origin());
  const std::int64_t shape[1] = {v.numel()};
  return TensorView(v.base(), v.dtype(), v.device(), shape, {}, v.byte_offset(), v.layout(), v.origin());
}

}  // namespace

void sobel_3x3(const TensorView& in, const TensorView& out) {
  invoke(kSobel, PortMap{{"in", in}, {"out", out}});
}

void gamma_correct(const TensorView& in, const TensorView& out, double gamma) {
  if (in.rank() != out.rank() || !std::equal(in.shape().begin(), in.shape().end(), out.shape().begin()))
    throw ContractViolationError(kGamma, "out", field::shape, "same shape as port 'in' " + in.shape_str(),
                                 out.shape_str(), out.origin());
  const TensorView flat_in = flatten_for_gamma(in, "in");
  const TensorView flat_out = flatten_for_gamma(out, "out");
  invoke(kGamma, PortMap{{"in", flat_in}, {"out", flat_out}}, Attrs{{"gamma", gamma}});
}

}  // namespace pipelink
