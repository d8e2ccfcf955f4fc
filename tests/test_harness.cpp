// The test harness's own helpers (tests/test_util.hpp): CaseFilter, which lets a slow tool take a
// test's case table in pieces (PIPELINK_TEST_CASES).
#include <gtest/gtest-spi.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "test_util.hpp"

namespace pipelink::test {
namespace {

// PIPELINK_TEST_CASES set to `value` (nullptr: unset) for one scope; the previous value after.
class CasesEnv {
 public:
  explicit CasesEnv(const char* value) {
    if (const char* old = std::getenv(kName)) old_ = old;
    if (value)
      ::setenv(kName, value, 1);
    else
      ::unsetenv(kName);
  }
  ~CasesEnv() {
    if (old_)
      ::setenv(kName, old_->c_str(), 1);
    else
      ::unsetenv(kName);
  }
  CasesEnv(const CasesEnv&) = delete;
  CasesEnv& operator=(const CasesEnv&) = delete;

 private:
  static constexpr const char* kName = "PIPELINK_TEST_CASES";
  std::optional<std::string> old_;
};

std::string picked(const CaseFilter& f, std::size_t count) {
  std::string s;
  for (std::size_t i = 0; i < count; ++i) s += f(i) ? '1' : '0';
  return s;
}

TEST(CaseFilter, UnsetOrEmptyRunsEveryCase) {
  {
    const CasesEnv env(nullptr);
    EXPECT_EQ(picked(CaseFilter(5), 5), "11111");
  }
  const CasesEnv env("");
  EXPECT_EQ(picked(CaseFilter(3), 3), "111");
}

TEST(CaseFilter, RunsTheListedCasesOnly) {
  const CasesEnv env("3,0,3");  // any order; a repeat counts once
  testing::internal::CaptureStdout();
  const CaseFilter f(5);
  const std::string said = testing::internal::GetCapturedStdout();
  EXPECT_EQ(picked(f, 5), "10010");
  EXPECT_NE(said.find("2 of this test's 5 cases"), std::string::npos) << said;  // a piece says it is one
  EXPECT_THROW((void)f(5), std::out_of_range);
}

TEST(CaseFilter, BadListsFailTheTest) {
  for (const char* bad : {"5", "1,x", "1,,2", "-1", "2 ", "1234567890"}) {
    SCOPED_TRACE(bad);
    const CasesEnv env(bad);
    EXPECT_NONFATAL_FAILURE(
        {
          testing::internal::CaptureStdout();
          const CaseFilter f(5);
          (void)testing::internal::GetCapturedStdout();
        },
        "PIPELINK_TEST_CASES=");
  }
}

}  // namespace
}  // namespace pipelink::test
