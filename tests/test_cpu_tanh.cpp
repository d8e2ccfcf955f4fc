// Accuracy of the fused CPU kernel's float tanh, per instruction set present, against tanh in
// float64: every 16th float in [-10, 10] (every 64th for the slower scalar build) plus special
// values. The bound is PROTOCOL.md's "faithful tanh, <= 2 ulp"; approximations of ~2^-11
// relative error would fail it by 10^4x.
#include <cmath>
#include <cstring>
#include <limits>

#include "cpu/aggregate_plan.hpp"
#include "test_util.hpp"

namespace pipelink::test {
namespace {

using TanhFn = void (*)(const float*, float*, std::int64_t);

void check_isa(const char* feature, TanhFn fn, std::uint32_t stride = 16) {
  if (std::string(feature) != "scalar" && !DeviceDesc::host().features.contains(feature))
    GTEST_SKIP() << "SKIPPED: this CPU has no " << feature;
  std::vector<float> in, out;
  std::uint32_t last;
  const float ten = 10.0f;
  std::memcpy(&last, &ten, 4);
  for (std::uint32_t bits = 0; bits <= last; bits += stride)
    for (std::uint32_t sign : {0u, 0x80000000u}) {
      float f;
      const std::uint32_t b = bits | sign;
      std::memcpy(&f, &b, 4);
      in.push_back(f);
    }
  for (float f : {0.0f, -0.0f, 1e-40f, -1e-40f, 0.5499999f, 0.55f, 0.5500001f, 8.999f, 9.0f, 9.5f, 1e30f, -1e30f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()})
    in.push_back(f);
  out.assign(in.size(), 0.0f);
  fn(in.data(), out.data(), std::int64_t(in.size()));
  double worst = 0;
  float worst_x = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const double e = ulp_error(out[i], std::tanh(double(in[i])));
    if (!(e <= worst)) {
      worst = e;
      worst_x = in[i];
    }
    if (std::signbit(in[i]) != std::signbit(out[i]) && !std::isnan(in[i]))
      ADD_FAILURE() << "sign of tanh(" << in[i] << ") = " << out[i];
  }
  std::printf("%s tanh: max error %.3f ulp at x = %.9g over %zu values\n", feature, worst, double(worst_x), in.size());
  EXPECT_LE(worst, 2.0) << "at x = " << worst_x;
  ::testing::Test::RecordProperty("max_ulp", std::to_string(worst));
}

TEST(CpuTanh, Avx512WithinBound) { check_isa("avx512f", cpu::tanh_batch_avx512); }
TEST(CpuTanh, Avx2WithinBound) { check_isa("avx2", cpu::tanh_batch_avx2); }
TEST(CpuTanh, ScalarWithinBound) { check_isa("scalar", cpu::tanh_batch_generic, 64); }

}  // namespace
}  // namespace pipelink::test
