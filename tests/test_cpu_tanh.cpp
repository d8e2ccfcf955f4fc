// Accuracy of the fused CPU kernel's float tanh, per instruction set present, against tanh in
// float64: every 16th float in [-10, 10] (every 64th for the slower scalar build) plus special
// values. The bound is PROTOCOL.md's "faithful tanh, <= 2 ulp"; approximations of ~2^-11
// relative error would fail it by 10^4x.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

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

// Sigmoid per instruction set, float32 and float64, vector lanes and scalar tails (map_rows: the
// three-op's map, whose phi is the fused kernel's): far below zero the answer is a subnormal,
// which 1/(1+exp(-v)) gave as 0 once exp(-v) overflowed (a review, session 46). The bound: 4 ulp
// of the result, or 2 of the smallest subnormal below the normal range.
using MapFn = void (*)(const cpu::MapArgs&);

template <class T>
void check_sigmoid(const char* feature, MapFn fn) {
  if (std::string(feature) != "scalar" && !DeviceDesc::host().features.contains(feature))
    GTEST_SKIP() << "SKIPPED: this CPU has no " << feature;
  const double lo = sizeof(T) == 4 ? -110 : -760, hi = 40;
  std::vector<T> in;
  for (int i = 0; i <= 20000; ++i) in.push_back(T(lo + (hi - lo) * i / 20000));
  for (T v : {T(0), T(-0.0), std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(),
              std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::lowest(), std::numeric_limits<T>::max()})
    in.push_back(v);
  const std::int64_t cols = 19;  // lanes and a tail each row
  while (in.size() % cols) in.push_back(T(-1));
  std::vector<T> out(in.size(), T(0.5));
  cpu::MapArgs a;
  a.in = in.data();
  a.out = out.data();
  a.in_stride = a.out_stride = cols;
  a.rows = std::int64_t(in.size()) / cols;
  a.cols = cols;
  a.f64 = sizeof(T) == 8;
  a.transform = 3;
  fn(a);
  const long double tiny = sizeof(T) == 4 ? std::ldexp(1.0L, -149) : std::ldexp(1.0L, -1074);
  const long double eps = std::numeric_limits<T>::epsilon();
  for (std::size_t i = 0; i < in.size(); ++i) {
    const long double v = in[i];
    if (std::isnan(in[i])) {
      EXPECT_TRUE(std::isnan(out[i]));
      continue;
    }
    const long double e = std::exp(-std::fabs(v)), want = (v < 0 ? e : 1.0L) / (1.0L + e);
    const long double bound = std::max(4 * eps * want, 2 * tiny);
    EXPECT_LE(std::fabs((long double)out[i] - want), bound) << feature << " sigmoid(" << in[i] << ") = " << out[i];
  }
}

TEST(CpuSigmoid, Avx512Float) { check_sigmoid<float>("avx512f", cpu::map_rows_avx512); }
TEST(CpuSigmoid, Avx512Double) { check_sigmoid<double>("avx512f", cpu::map_rows_avx512); }
TEST(CpuSigmoid, Avx2Float) { check_sigmoid<float>("avx2", cpu::map_rows_avx2); }
TEST(CpuSigmoid, Avx2Double) { check_sigmoid<double>("avx2", cpu::map_rows_avx2); }
TEST(CpuSigmoid, ScalarFloat) { check_sigmoid<float>("scalar", cpu::map_rows_generic); }
TEST(CpuSigmoid, ScalarDouble) { check_sigmoid<double>("scalar", cpu::map_rows_generic); }

}  // namespace
}  // namespace pipelink::test
