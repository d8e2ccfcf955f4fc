#pragma once
// Shared test helpers: seeded random inputs (CCCL style: PIPELINK_TEST_SEED overrides the base
// seed), poison values, and GPU-skip helpers.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
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

/// A CPU test's inputs: a uniform graph and fresh float32 x ([N, F]) and w, in [-1, 1).
struct GraphInputs {
  EdgeList g;
  Tensor x, w;
};
inline GraphInputs graph_inputs(std::int64_t N, std::int64_t E, std::int64_t F, std::uint64_t seed,
                                DType index = DType::i64) {
  return {uniform_graph(N, E, seed, index), random_tensor({N, F}, DType::f32, seed + 1),
          random_tensor({E}, DType::f32, seed + 2)};
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

/// PIPELINK_TEST_CASES="i,j,...": a test that loops over a table of cases runs only those (by
/// index from 0), so that a tool far slower than CTest can take it in pieces that each fit a
/// device call (racecheck ran most tests at 26-68x CTest's time in v42;
/// OneShotMsdSortGivesTheOneSortsBits takes 31 s in CTest). The variable reaches every test of a
/// process: give it to one case-table test at a time. Unset or empty: every case. A test run on
/// part of its table says which part on stdout, so a piece never reads as the whole test; an
/// index past the table, or text that is not a comma-separated list of indices, fails the test.
/// Environment variables set (or, for nullptr, unset) for a scope, e.g. the library's knobs; the
/// previous values come back afterwards, in reverse order (a name given twice comes back right).
struct ScopedEnv {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  explicit ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto [n, v] : vars) {
      const char* old = std::getenv(n);
      saved.emplace_back(n, old ? std::optional<std::string>(old) : std::nullopt);
      if (v)
        ::setenv(n, v, 1);
      else
        ::unsetenv(n);
    }
  }
  ~ScopedEnv() {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) {  // reverse: a name given twice comes back right
      if (it->second)
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        ::unsetenv(it->first.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

/// Which of a test's `count` cases run: all, or those PIPELINK_TEST_CASES lists (comma-separated
/// indices). `knob` names another list for a second level inside a case (OneShotInEdgeRanges'
/// PIPELINK_TEST_VARIANTS: one of its cases ran past 300 s under racecheck alone, v54).
class CaseFilter {
 public:
  explicit CaseFilter(std::size_t count, const char* knob = "PIPELINK_TEST_CASES")
      : run_(count, true), said_(count, false), knob_(knob) {
    const char* env = std::getenv(knob);
    if (env == nullptr || *env == '\0') return;
    filtered_ = true;
    std::fill(run_.begin(), run_.end(), false);
    const std::string list = env;
    std::size_t picked = 0;
    for (std::size_t at = 0; at <= list.size();) {
      const std::size_t end = std::min(list.find(',', at), list.size());
      const std::string item = list.substr(at, end - at);
      at = end + 1;
      if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || item.size() > 9) {
        ADD_FAILURE() << knob << "=" << list << ": '" << item << "' is not a case index";
        continue;
      }
      const std::size_t i = std::stoul(item);
      if (i >= count) {
        ADD_FAILURE() << knob << "=" << list << ": case " << i << " past this test's " << count << " cases";
        continue;
      }
      picked += run_[i] ? 0 : 1;
      run_[i] = true;
    }
    std::printf("[  CASES   ] %s=%s: %zu of this test's %zu cases\n", knob, env, picked, count);
  }
  /// Whether case `i` runs. Under PIPELINK_TEST_CASES, the first ask for a case that runs prints
  /// a line with the seconds since the filter was made, so that a piece cut by a slow tool's time
  /// limit (racecheck) shows which cases it finished and what each took.
  bool operator()(std::size_t i) const {
    const bool run = run_.at(i);
    if (run && filtered_ && !said_[i]) {
      said_[i] = true;
      const std::chrono::duration<double> t = std::chrono::steady_clock::now() - start_;
      std::printf("[  CASE    ] %s %zu starts at %.1f s\n", std::strcmp(knob_, "PIPELINK_TEST_CASES") == 0 ? "case" : knob_, i, t.count());
      std::fflush(stdout);
    }
    return run;
  }

 private:
  std::vector<bool> run_;
  mutable std::vector<bool> said_;
  const char* knob_;
  bool filtered_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// x rows of NaN, +inf and -inf sent along one edge each (rows 0, 2, 4 to rows 1, 3, 5; row 6,
/// finite, to row 7), int32 indices: NonFiniteValuesPassThroughEveryTransform on each backend.
struct NonFiniteCase {
  EdgeList graph;
  Tensor x;
  static constexpr std::int64_t kNodes = 8;
  static constexpr double special[3] = {std::numeric_limits<double>::quiet_NaN(),
                                        std::numeric_limits<double>::infinity(),
                                        -std::numeric_limits<double>::infinity()};
};
inline NonFiniteCase non_finite_case(DType t, std::int64_t F, std::uint64_t seed) {
  NonFiniteCase c{uniform_graph(NonFiniteCase::kNodes, 4, seed, DType::i32),
                  random_tensor({NonFiniteCase::kNodes, F}, t, seed + 1, -2, 2)};
  for (int e = 0; e < 4; ++e) {
    c.graph.src.data_as<std::int32_t>()[e] = 2 * e;
    c.graph.dst.data_as<std::int32_t>()[e] = 2 * e + 1;
  }
  for (int k = 0; k < 3; ++k)
    for (std::int64_t f = 0; f < F; ++f) {
      if (t == DType::f32)
        c.x.data_as<float>()[2 * k * F + f] = float(NonFiniteCase::special[k]);
      else
        c.x.data_as<double>()[2 * k * F + f] = NonFiniteCase::special[k];
    }
  return c;
}
/// Rows 1, 3 and 5 of `got` (on the host) against phi of the special values, worked out here
/// rather than taken from the float64 oracle (which once turned relu(NaN) into 0 too): NaN stays
/// NaN in every transform, tanh(+-inf) = +-1, relu(-inf) = 0, sigmoid(-inf) = 0.
inline void expect_non_finite_rows(const TensorView& got, std::int64_t F, Transform tr) {
  auto want = [&](double v) {
    switch (tr) {
      case Transform::identity:
        return v;
      case Transform::tanh:
        return std::tanh(v);
      case Transform::relu:
        return std::isnan(v) ? v : v < 0 ? 0.0 : v;
      case Transform::sigmoid:
        return 1.0 / (1.0 + std::exp(-v));
    }
    return v;
  };
  for (int k = 0; k < 3; ++k)
    for (std::int64_t f = 0; f < F; ++f) {
      const std::int64_t i = (2 * k + 1) * F + f;
      const double g = got.dtype() == DType::f32 ? got.data_as<const float>()[i] : got.data_as<const double>()[i];
      const double expect = want(NonFiniteCase::special[k]);
      if (std::isnan(expect)) {
        EXPECT_TRUE(std::isnan(g)) << "x = " << NonFiniteCase::special[k] << ", feature " << f << ": " << g;
      } else {
        EXPECT_EQ(g, expect) << "x = " << NonFiniteCase::special[k] << ", feature " << f;
      }
    }
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
