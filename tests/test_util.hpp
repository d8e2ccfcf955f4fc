#pragma once
// Shared test helpers: seeded random inputs (CCCL style: PIPELINK_TEST_SEED overrides the base
// seed), poison values, and GPU-skip helpers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "pipelink/pipelink.hpp"

namespace pipelink::test {

inline std::uint64_t base_seed() {
  static const std::uint64_t s = [] {
    const char* env = std::getenv("PIPELINK_TEST_SEED");
    return env ? std::strtoull(env, nullptr, 10) : std::uint64_t(std::random_device{}());
  }();
  return s;
}

/// A fresh seed per call, reported on failure through SCOPED_TRACE by the caller.
inline std::uint64_t fresh_seed() {
  static std::uint64_t counter = 0;
  return base_seed() * 6364136223846793005ull + (++counter) * 1442695040888963407ull;
}

inline Tensor random_tensor(std::vector<std::int64_t> shape, DType t, std::uint64_t seed,
                            double lo = -1.0, double hi = 1.0) {
  Tensor x = TensorBuilder().shape(std::move(shape)).dtype(t).build();
  fill_uniform(x, lo, hi, seed);
  return x;
}

/// Fills a CPU float tensor with NaN so that an element never written is caught.
inline void poison(const TensorView& v) {
  const auto n = v.numel();
  if (v.dtype() == DType::f32) {
    auto* p = v.data_as<float>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = std::numeric_limits<float>::quiet_NaN();
  } else if (v.dtype() == DType::f64) {
    auto* p = v.data_as<double>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = std::numeric_limits<double>::quiet_NaN();
  } else {
    std::memset(v.data(), 0xAB, std::size_t(n) * v.itemsize());
  }
}

inline bool bitwise_equal(const TensorView& a, const TensorView& b) {
  return a.numel() == b.numel() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), std::size_t(a.numel()) * a.itemsize()) == 0;
}

/// The error of a float32 result in ulps of float32 at the exact value `want` (results that round
/// up to 1.0f are measured in the ulp just below 1, 2^-24, not 2^-23). NaN is 0 against NaN and
/// infinite against anything else, either way round (a NaN error would slip past `e <= worst`).
inline double ulp_error(float got, double want) {
  if (std::isnan(want) || std::isnan(got))
    return std::isnan(want) && std::isnan(got) ? 0.0 : std::numeric_limits<double>::infinity();
  const double ulp = want == 0 ? std::ldexp(1.0, -149) : std::ldexp(1.0, std::max(std::ilogb(want), -126) - 23);
  return std::fabs(double(got) - want) / ulp;
}

/// Base fixture of the CUDA suites: a visible skip (never a pass) without the backend or a GPU.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_backend_built()) GTEST_SKIP() << "SKIPPED: this build has no CUDA backend";
    if (cuda_device_count() == 0) GTEST_SKIP() << "SKIPPED: no CUDA device present";
  }
};

}  // namespace pipelink::test
