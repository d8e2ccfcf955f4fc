// sobel_3x3 and gamma_correct: results against float64 references, and one test per contract
// field that the ops' contracts can violate.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace pipelink {
namespace {

using test::fresh_seed;
using test::poison;

constexpr const char* kSobel = "sobel_3x3";
constexpr const char* kGamma = "gamma_correct";

void fill_random(const TensorView& v, std::uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  auto* p = v.data_as<float>();
  for (std::int64_t i = 0; i < v.numel(); ++i) p[i] = dist(rng);
}

Tensor image(std::int64_t b, std::int64_t h, std::int64_t w, std::int64_t c, DType t = DType::f32,
             Layout layout = Layout::nhwc) {
  return TensorBuilder().shape({b, h, w, c}).dtype(t).layout(layout).zeros();
}

// Sobel in double, written from the definition rather than from the kernel.
std::vector<double> sobel_reference(const TensorView& in) {
  const auto B = in.dim(0), H = in.dim(1), W = in.dim(2);
  const float* p = in.data_as<float>();
  auto luma = [&](std::int64_t b, std::int64_t y, std::int64_t x) {
    y = std::clamp<std::int64_t>(y, 0, H - 1);
    x = std::clamp<std::int64_t>(x, 0, W - 1);
    const float* px = p + ((b * H + y) * W + x) * 3;
    return 0.299 * double(px[0]) + 0.587 * double(px[1]) + 0.114 * double(px[2]);
  };
  static constexpr int kx[3][3] = {{-1, 0, 1}, {-2, 0, 2}, {-1, 0, 1}};
  std::vector<double> out(std::size_t(B * H * W));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t y = 0; y < H; ++y)
      for (std::int64_t x = 0; x < W; ++x) {
        double gx = 0, gy = 0;
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 3; ++j) {
            const double l = luma(b, y + i - 1, x + j - 1);
            gx += kx[i][j] * l;
            gy += kx[j][i] * l;  // transpose
          }
        out[std::size_t((b * H + y) * W + x)] = std::sqrt(gx * gx + gy * gy);
      }
  return out;
}

// Runs fn, which must throw ContractViolationError, and checks every reported part of it.
template <class Fn>
void expect_violation(Fn&& fn, const std::string& op, const std::string& port, const std::string& fld,
                      const std::string& expected_has, const std::string& actual_has) {
  try {
    fn();
  } catch (const ContractViolationError& e) {
    EXPECT_EQ(e.op(), op) << e.what();
    EXPECT_EQ(e.port(), port) << e.what();
    EXPECT_EQ(e.field(), fld) << e.what();
    EXPECT_NE(e.expected().find(expected_has), std::string::npos)
        << "expected() = '" << e.expected() << "', wanted it to contain '" << expected_has << "'";
    EXPECT_NE(e.actual().find(actual_has), std::string::npos)
        << "actual() = '" << e.actual() << "', wanted it to contain '" << actual_has << "'";
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ContractViolationError, got: " << e.what();
    return;
  }
  ADD_FAILURE() << "expected ContractViolationError(" << op << ", " << port << ", " << fld << "), nothing thrown";
}

std::uint32_t float_bits(float x) { return std::bit_cast<std::uint32_t>(x); }

// ---- registration ----------------------------------------------------------------------------

TEST(ImageOpsRegistry, ContractsAndVariantsAreRegistered) {
  const OpDef& sobel = Registry::global().op(kSobel);
  EXPECT_EQ(sobel.version, 1);
  ASSERT_EQ(sobel.ports.size(), 2u);
  EXPECT_EQ(shape_pattern_str(sobel.ports[0].shape), "[B, H, W, 3]");
  EXPECT_EQ(shape_pattern_str(sobel.ports[1].shape), "[B, H, W, 1]");
  EXPECT_EQ(sobel.ports[0].layout, Layout::nhwc);
  EXPECT_EQ(sobel.ports[1].direction, PortDirection::out);
  EXPECT_TRUE(sobel.exec.may_alias.empty());
  EXPECT_FALSE(sobel.exec.async);
  EXPECT_EQ(sobel.exec.max_streams, 1);
  EXPECT_TRUE(sobel.exec.deterministic);
  ASSERT_TRUE(sobel.exec.workspace_bytes);
  EXPECT_EQ(sobel.exec.workspace_bytes({}, {}), 0u);

  const OpDef& gamma = Registry::global().op(kGamma);
  ASSERT_EQ(gamma.attrs.size(), 1u);
  EXPECT_EQ(gamma.attrs[0].name, "gamma");
  EXPECT_EQ(std::get<double>(gamma.attrs[0].default_value), 2.2);
  ASSERT_EQ(gamma.exec.may_alias.size(), 1u);
  EXPECT_EQ(gamma.exec.may_alias[0], std::make_pair(std::string("in"), std::string("out")));

  auto choice = Registry::global().select(kSobel, DeviceDesc::host());
  ASSERT_NE(choice.chosen, nullptr);
  EXPECT_EQ(choice.chosen->name, "direct_3x3");
  choice = Registry::global().select(kGamma, DeviceDesc::host());
  ASSERT_NE(choice.chosen, nullptr);
  EXPECT_EQ(choice.chosen->name, "elementwise");
}

// ---- sobel_3x3 -------------------------------------------------------------------------------

TEST(Sobel, MatchesFloat64Reference) {
  struct Size { std::int64_t b, h, w; };
  for (Size s : {Size{2, 1, 1}, Size{2, 1, 2}, Size{2, 2, 1}, Size{2, 3, 5}, Size{2, 17, 31}, Size{1, 17, 31}}) {
    const auto seed = fresh_seed();
    SCOPED_TRACE(testing::Message() << "B=" << s.b << " H=" << s.h << " W=" << s.w << " seed=" << seed);
    Tensor in = image(s.b, s.h, s.w, 3);
    Tensor out = image(s.b, s.h, s.w, 1);
    fill_random(in, seed, 0.0f, 1.0f);
    poison(out);
    sobel_3x3(in, out);
    const auto ref = sobel_reference(in);
    const float* got = out.data_as<float>();
    for (std::size_t i = 0; i < ref.size(); ++i) {
      ASSERT_FALSE(std::isnan(got[i])) << "element " << i << " never written";
      ASSERT_LE(std::abs(double(got[i]) - ref[i]), 1e-5 * std::max(1.0, std::abs(ref[i]))) << "element " << i;
    }
  }
}

TEST(Sobel, HorizontalRampHasKnownGradient) {
  // Grey ramp L(x) = x: interior |g| = 8 (weights 1+2+1 over a difference of 2), replicated
  // borders see a difference of 1, so |g| = 4 there.
  const std::int64_t H = 4, W = 6;
  Tensor in = image(1, H, W, 3);
  Tensor out = image(1, H, W, 1);
  float* p = in.data_as<float>();
  for (std::int64_t y = 0; y < H; ++y)
    for (std::int64_t x = 0; x < W; ++x)
      for (int c = 0; c < 3; ++c) p[(y * W + x) * 3 + c] = float(x);
  poison(out);
  sobel_3x3(in, out);
  for (std::int64_t y = 0; y < H; ++y)
    for (std::int64_t x = 0; x < W; ++x) {
      const double want = (x == 0 || x == W - 1) ? 4.0 : 8.0;
      EXPECT_NEAR(out.data_as<float>()[y * W + x], want, 1e-5) << "y=" << y << " x=" << x;
    }
}

TEST(Sobel, ConstantImageAndEmptyBatch) {
  Tensor in = image(1, 5, 7, 3);
  Tensor out = image(1, 5, 7, 1);
  std::fill_n(in.data_as<float>(), in.numel(), 0.25f);
  poison(out);
  sobel_3x3(in, out);
  for (std::int64_t i = 0; i < out.numel(); ++i) EXPECT_EQ(out.data_as<float>()[i], 0.0f) << i;

  Tensor ein = image(0, 5, 7, 3);
  Tensor eout = image(0, 5, 7, 1);
  EXPECT_NO_THROW(sobel_3x3(ein, eout));
}

TEST(Sobel, UntaggedViewsAndForcedVariantAreAccepted) {
  Tensor in = image(1, 3, 4, 3, DType::f32, Layout::unspecified);
  Tensor out = image(1, 3, 4, 1, DType::f32, Layout::unspecified);
  fill_random(in, fresh_seed(), 0.0f, 1.0f);
  poison(out);
  invoke(kSobel, PortMap{{"in", in}, {"out", out}}, {}, nullptr, "direct_3x3");
  for (std::int64_t i = 0; i < out.numel(); ++i) EXPECT_FALSE(std::isnan(out.data_as<float>()[i]));
}

TEST(Sobel, DeterministicAcrossRuns) {
  Tensor in = image(2, 33, 47, 3);
  fill_random(in, fresh_seed(), 0.0f, 1.0f);
  Tensor a = image(2, 33, 47, 1), b = image(2, 33, 47, 1);
  sobel_3x3(in, a);
  sobel_3x3(in, b);
  EXPECT_TRUE(test::bitwise_equal(a, b));
}

// ---- gamma_correct ---------------------------------------------------------------------------

TEST(Gamma, MatchesStdPowWithinFewUlp) {
  for (double gamma : {0.25, 1.0, 2.2, 3.7}) {
    for (const std::vector<std::int64_t>& shape :
         {std::vector<std::int64_t>{}, {0}, {7}, {3, 4, 5}, {1000}, {2, 0, 3}}) {
      const auto seed = fresh_seed();
      SCOPED_TRACE(testing::Message() << "gamma=" << gamma << " rank=" << shape.size() << " seed=" << seed);
      Tensor in = TensorBuilder().shape(shape).build();
      Tensor out = TensorBuilder().shape(shape).build();
      fill_random(in, seed, -0.5f, 1.5f);
      if (in.numel() >= 4) {
        in.data_as<float>()[0] = 0.0f;
        in.data_as<float>()[1] = 1.0f;
        in.data_as<float>()[2] = std::numeric_limits<float>::denorm_min();
        in.data_as<float>()[3] = -0.0f;
      }
      poison(out);
      gamma_correct(in, out, gamma);
      for (std::int64_t i = 0; i < in.numel(); ++i) {
        const double x = std::clamp(double(in.data_as<float>()[i]), 0.0, 1.0);
        const float want = float(std::pow(x, 1.0 / gamma));
        const float got = out.data_as<float>()[i];
        ASSERT_FALSE(std::isnan(got)) << "element " << i << " never written";
        const auto ulps = std::max(float_bits(got), float_bits(want)) - std::min(float_bits(got), float_bits(want));
        ASSERT_LE(ulps, 4u) << "element " << i << ": in " << in.data_as<float>()[i] << " got " << got
                            << " want " << want;
      }
    }
  }
}

TEST(Gamma, InPlace) {
  Tensor x = TensorBuilder().shape({16, 9}).build();
  fill_random(x, fresh_seed(), -0.2f, 1.2f);
  Tensor want = clone(x);
  Tensor scratch = TensorBuilder().shape({16, 9}).build();
  gamma_correct(want, scratch, 2.2);
  gamma_correct(x, x, 2.2);
  EXPECT_TRUE(test::bitwise_equal(x, scratch));
}

TEST(Gamma, DefaultAttributeAndNaNPropagation) {
  Tensor in = TensorBuilder().shape({3}).build();
  Tensor out = TensorBuilder().shape({3}).build();
  in.data_as<float>()[0] = 0.5f;
  in.data_as<float>()[1] = std::numeric_limits<float>::quiet_NaN();
  in.data_as<float>()[2] = 2.0f;
  invoke(kGamma, PortMap{{"in", in}, {"out", out}});  // gamma defaults to 2.2
  EXPECT_EQ(out.data_as<float>()[0], float(std::pow(0.5, 1.0 / 2.2)));
  EXPECT_TRUE(std::isnan(out.data_as<float>()[1]));
  EXPECT_EQ(out.data_as<float>()[2], 1.0f);
}

TEST(Gamma, AnyLayoutTagIsAccepted) {
  Tensor in = TensorBuilder().shape({2, 3}).layout(Layout::nchw).zeros();
  Tensor out = TensorBuilder().shape({2, 3}).layout(Layout::rows).zeros();
  EXPECT_NO_THROW(gamma_correct(in, out, 1.5));
}

// ---- SobelNegative ---------------------------------------------------------------------------

class SobelNegative : public ::testing::Test {
 protected:
  Tensor in = image(1, 4, 5, 3);
  Tensor out = image(1, 4, 5, 1);
};

TEST_F(SobelNegative, MissingPort) {
  expect_violation([&] { invoke(kSobel, PortMap{{"in", in}}); }, kSobel, "out", field::presence, "a tensor",
                   "missing");
  expect_violation([&] { invoke(kSobel, PortMap{{"out", out}}); }, kSobel, "in", field::presence, "a tensor",
                   "missing");
}

TEST_F(SobelNegative, UnknownPort) {
  expect_violation([&] { invoke(kSobel, PortMap{{"in", in}, {"out", out}, {"mask", out}}); }, kSobel, "mask",
                   field::presence, "in|out", "unknown port 'mask'");
}

TEST_F(SobelNegative, WrongRank) {
  Tensor in3 = TensorBuilder().shape({4, 5, 3}).zeros();
  expect_violation([&] { sobel_3x3(in3, out); }, kSobel, "in", field::rank, "4", "3");
}

TEST_F(SobelNegative, WrongChannelCount) {
  Tensor rgba = image(1, 4, 5, 4);
  expect_violation([&] { sobel_3x3(rgba, out); }, kSobel, "in", field::shape, "dim 3 = 3", "[1, 4, 5, 4]");
  Tensor out3 = image(1, 4, 5, 3);
  expect_violation([&] { sobel_3x3(in, out3); }, kSobel, "out", field::shape, "dim 3 = 1", "[1, 4, 5, 3]");
}

TEST_F(SobelNegative, BatchHeightWidthMismatch) {
  Tensor wrong_b = image(2, 4, 5, 1);
  expect_violation([&] { sobel_3x3(in, wrong_b); }, kSobel, "out", field::shape, "B = 1", "B = 2");
  Tensor wrong_h = image(1, 3, 5, 1);
  expect_violation([&] { sobel_3x3(in, wrong_h); }, kSobel, "out", field::shape, "H = 4", "H = 3");
  Tensor wrong_w = image(1, 4, 6, 1);
  expect_violation([&] { sobel_3x3(in, wrong_w); }, kSobel, "out", field::shape, "W = 5", "W = 6");
}

TEST_F(SobelNegative, WrongDtype) {
  Tensor in64 = image(1, 4, 5, 3, DType::f64);
  expect_violation([&] { sobel_3x3(in64, out); }, kSobel, "in", field::dtype, "float32", "float64");
  Tensor out64 = image(1, 4, 5, 1, DType::f64);
  expect_violation([&] { sobel_3x3(in, out64); }, kSobel, "out", field::dtype, "float32", "float64");
}

TEST_F(SobelNegative, WrongLayout) {
  expect_violation([&] { sobel_3x3(in.view().with_layout(Layout::nchw), out); }, kSobel, "in", field::layout,
                   "NHWC", "NCHW");
  expect_violation([&] { sobel_3x3(in, out.view().with_layout(Layout::rows)); }, kSobel, "out", field::layout,
                   "NHWC", "rows");
}

TEST_F(SobelNegative, Misaligned) {
  Tensor bytes = TensorBuilder().shape({4 * 5 * 3 * 4 + 8}).dtype(DType::u8).alignment(64).zeros();
  const std::int64_t shape[4] = {1, 4, 5, 3};
  TensorView shifted(bytes.view().base(), DType::f32, Device::cpu(), shape, {}, 2, Layout::nhwc);
  ASSERT_EQ(shifted.alignment(), 2u);
  expect_violation([&] { sobel_3x3(shifted, out); }, kSobel, "in", field::alignment, "4-byte aligned",
                   "2-byte aligned");
}

TEST_F(SobelNegative, NonContiguous) {
  Tensor pitched = TensorBuilder().shape({1, 4, 5, 3}).pitched_rows(64).layout(Layout::nhwc).zeros();
  ASSERT_FALSE(pitched.view().is_contiguous());
  expect_violation([&] { sobel_3x3(pitched, out); }, kSobel, "in", field::contiguity, "contiguous", "strided");
}

TEST_F(SobelNegative, InOutAlias) {
  // out over the first quarter of in's memory: sobel reads neighbours, so in-place is unsafe.
  const std::int64_t shape[4] = {1, 4, 5, 1};
  TensorView over_in(in.view().base(), DType::f32, Device::cpu(), shape, {}, 0, Layout::nhwc);
  expect_violation([&] { sobel_3x3(in, over_in); }, kSobel, "out", field::alias, "no overlap with port 'in'",
                   "overlaps port 'in'");
}

TEST_F(SobelNegative, UnknownAttribute) {
  expect_violation([&] { invoke(kSobel, PortMap{{"in", in}, {"out", out}}, Attrs{{"radius", std::int64_t(2)}}); },
                   kSobel, "radius", field::attribute, "no attributes", "unknown attribute 'radius'");
}

TEST_F(SobelNegative, CrossDevice) {
  // No GPU here: a cuda-tagged view over host memory is enough, the check never dereferences it.
  std::vector<float> dummy(std::size_t(in.numel()));
  const std::int64_t shape[4] = {1, 4, 5, 3};
  TensorView on_cuda(dummy.data(), DType::f32, Device::cuda(0), shape, {}, 0, Layout::nhwc);
  expect_violation([&] { sobel_3x3(on_cuda, out); }, kSobel, "out", field::cross_device, "cuda:0", "cpu");
  expect_violation([&] { sobel_3x3(in, TensorView(dummy.data(), DType::f32, Device::cuda(0), {1, 4, 5, 1})); },
                   kSobel, "out", field::cross_device, "cpu", "cuda:0");
}

TEST_F(SobelNegative, AllOnCudaWithoutBackend) {
  if (device_allocator_hooks(DeviceKind::cuda) != nullptr) GTEST_SKIP() << "CUDA backend present";
  std::vector<float> a(60), b(20);
  const std::int64_t si[4] = {1, 4, 5, 3}, so[4] = {1, 4, 5, 1};
  TensorView c_in(a.data(), DType::f32, Device::cuda(0), si);
  TensorView c_out(b.data(), DType::f32, Device::cuda(0), so);
  // Both ports agree, so the contract passes and the missing backend is what stops it.
  EXPECT_THROW(sobel_3x3(c_in, c_out), BackendUnavailableError);
}

// ---- GammaNegative ---------------------------------------------------------------------------

class GammaNegative : public ::testing::Test {
 protected:
  Tensor in = TensorBuilder().shape({4, 5}).zeros();
  Tensor out = TensorBuilder().shape({4, 5}).zeros();
  static TensorView flat(const TensorView& v) {
    const std::int64_t n[1] = {v.numel()};
    return TensorView(v.data(), v.dtype(), v.device(), n);
  }
};

TEST_F(GammaNegative, MissingPort) {
  expect_violation([&] { invoke(kGamma, PortMap{{"in", flat(in)}}); }, kGamma, "out", field::presence, "a tensor",
                   "missing");
}

TEST_F(GammaNegative, WrongRankThroughInvoke) {
  // gamma_correct() flattens; invoke() sees the op's real [N] ports.
  expect_violation([&] { invoke(kGamma, PortMap{{"in", in}, {"out", flat(out)}}); }, kGamma, "in", field::rank,
                   "1", "2");
}

TEST_F(GammaNegative, ShapeMismatch) {
  Tensor transposed = TensorBuilder().shape({5, 4}).zeros();
  expect_violation([&] { gamma_correct(in, transposed, 2.2); }, kGamma, "out", field::shape, "[4, 5]", "[5, 4]");
  Tensor longer = TensorBuilder().shape({21}).zeros();
  expect_violation([&] { invoke(kGamma, PortMap{{"in", flat(in)}, {"out", longer}}); }, kGamma, "out",
                   field::shape, "N = 20", "N = 21");
}

TEST_F(GammaNegative, WrongDtype) {
  Tensor in64 = TensorBuilder().shape({4, 5}).dtype(DType::f64).zeros();
  expect_violation([&] { gamma_correct(in64, out, 2.2); }, kGamma, "in", field::dtype, "float32", "float64");
}

TEST_F(GammaNegative, Misaligned) {
  Tensor bytes = TensorBuilder().shape({20 * 4 + 8}).dtype(DType::u8).alignment(64).zeros();
  const std::int64_t shape[2] = {4, 5};
  TensorView shifted(bytes.view().base(), DType::f32, Device::cpu(), shape, {}, 2);
  expect_violation([&] { gamma_correct(shifted, out, 2.2); }, kGamma, "in", field::alignment, "4-byte aligned",
                   "2-byte aligned");
}

TEST_F(GammaNegative, NonContiguous) {
  Tensor pitched = TensorBuilder().shape({4, 5}).pitched_rows(64).zeros();
  expect_violation([&] { gamma_correct(pitched, out, 2.2); }, kGamma, "in", field::contiguity, "contiguous",
                   "strided");
  expect_violation([&] { gamma_correct(in, pitched, 2.2); }, kGamma, "out", field::contiguity, "contiguous",
                   "strided");
  // Through invoke the op's own contract catches a strided [N] view.
  const std::int64_t n[1] = {10}, stride[1] = {2};
  TensorView every_other(in.data(), DType::f32, Device::cpu(), n, stride);
  Tensor out10 = TensorBuilder().shape({10}).zeros();
  expect_violation([&] { invoke(kGamma, PortMap{{"in", every_other}, {"out", out10}}); }, kGamma, "in",
                   field::contiguity, "contiguous", "strided [2]");
}

TEST_F(GammaNegative, PartialOverlap) {
  // Exact in-place is allowed; out shifted by one element over in is not.
  Tensor buf = TensorBuilder().shape({21}).zeros();
  const std::int64_t n[1] = {20};
  TensorView a(buf.data(), DType::f32, Device::cpu(), n);
  TensorView b(buf.data(), DType::f32, Device::cpu(), n, {}, 4);
  expect_violation([&] { gamma_correct(a, b, 2.2); }, kGamma, "out", field::alias, "in-place", "partial overlap");
}

TEST_F(GammaNegative, BadGamma) {
  for (double g : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    SCOPED_TRACE(testing::Message() << "gamma=" << g);
    std::fill_n(out.data_as<float>(), out.numel(), 7.0f);
    std::string shown = attr_str(g);
    expect_violation([&] { gamma_correct(in, out, g); }, kGamma, "gamma", field::attribute, "finite value > 0",
                     shown);
    for (std::int64_t i = 0; i < out.numel(); ++i) ASSERT_EQ(out.data_as<float>()[i], 7.0f) << "written before check";
  }
  EXPECT_EQ(attr_str(0.0), "0");
  EXPECT_EQ(attr_str(-1.0), "-1");
  EXPECT_EQ(attr_str(std::numeric_limits<double>::quiet_NaN()), "nan");
}

TEST_F(GammaNegative, AttributeKindAndName) {
  expect_violation([&] { invoke(kGamma, PortMap{{"in", flat(in)}, {"out", flat(out)}}, Attrs{{"gamma", std::int64_t(2)}}); },
                   kGamma, "gamma", field::attribute, "float", "int 2");
  expect_violation([&] { invoke(kGamma, PortMap{{"in", flat(in)}, {"out", flat(out)}}, Attrs{{"gama", 2.0}}); },
                   kGamma, "gama", field::attribute, "one of gamma", "unknown attribute 'gama'");
}

TEST_F(GammaNegative, CrossDevice) {
  std::vector<float> dummy(20);
  const std::int64_t shape[2] = {4, 5};
  TensorView on_cuda(dummy.data(), DType::f32, Device::cuda(0), shape);
  expect_violation([&] { gamma_correct(on_cuda, out, 2.2); }, kGamma, "out", field::cross_device, "cuda:0", "cpu");
}

}  // namespace
}  // namespace pipelink
