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

TEST(CaseFilter, SaysWhenEachPickedCaseStarts) {
  const CasesEnv env("1,3");
  const CaseFilter f(5);
  testing::internal::CaptureStdout();
  (void)f(0);
  (void)f(1);
  (void)f(1);  // asked again: said once
  (void)f(3);
  const std::string said = testing::internal::GetCapturedStdout();
  EXPECT_EQ(said.find("case 0 "), std::string::npos) << said;  // not picked: nothing said
  const std::size_t first = said.find("case 1 starts at ");
  ASSERT_NE(first, std::string::npos) << said;
  EXPECT_EQ(said.find("case 1 starts", first + 1), std::string::npos) << said;
  EXPECT_NE(said.find("case 3 starts at "), std::string::npos) << said;
}

TEST(CaseFilter, SaysNothingUnfiltered) {
  const CasesEnv env(nullptr);
  const CaseFilter f(2);
  testing::internal::CaptureStdout();
  (void)f(0);
  (void)f(1);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
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

TEST(CaseFilter, AnotherKnobPicksASecondLevelOnItsOwn) {
  // OneShotInEdgeRanges' variants inside a case: PIPELINK_TEST_VARIANTS, read apart from the cases.
  const CasesEnv cases("0");
  const ScopedEnv variants({{"PIPELINK_TEST_VARIANTS", "2"}});
  testing::internal::CaptureStdout();
  const CaseFilter c(3), v(4, "PIPELINK_TEST_VARIANTS");
  EXPECT_EQ(picked(c, 3), "100");
  EXPECT_EQ(picked(v, 4), "0010");
  const std::string said = testing::internal::GetCapturedStdout();
  EXPECT_NE(said.find("PIPELINK_TEST_VARIANTS=2: 1 of this test's 4 cases"), std::string::npos) << said;
  EXPECT_NE(said.find("PIPELINK_TEST_VARIANTS 2 starts at "), std::string::npos) << said;
  const ScopedEnv bad({{"PIPELINK_TEST_VARIANTS", "4"}});
  EXPECT_NONFATAL_FAILURE(
      {
        testing::internal::CaptureStdout();
        const CaseFilter f(4, "PIPELINK_TEST_VARIANTS");
        (void)testing::internal::GetCapturedStdout();
      },
      "PIPELINK_TEST_VARIANTS=4: case 4 past");
}

}  // namespace
}  // namespace pipelink::test
