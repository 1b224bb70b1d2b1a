#include "tests/report/page_checks.h"

#include <cmath>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace normsweep::testing {

using ::testing::HasSubstr;
using ::testing::Not;

void ExpectFiniteGeometry(const std::string& html) {
  static const std::regex attr(R"re(\s(x|y|x1|x2|y1|y2|cx|cy|r|width|height)="([^"]*)")re");
  int checked = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), attr); it != std::sregex_iterator(); ++it) {
    double v;
    EXPECT_TRUE(absl::SimpleAtod((*it)[2].str(), &v) && std::isfinite(v)) << (*it)[0].str();
    ++checked;
  }
  static const std::regex points(R"re(points="([^"]*)")re");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), points); it != std::sregex_iterator(); ++it) {
    for (absl::string_view n : absl::StrSplit((*it)[1].str(), absl::ByAnyChar(", "), absl::SkipEmpty())) {
      double v;
      EXPECT_TRUE(absl::SimpleAtod(n, &v) && std::isfinite(v)) << n;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

void ExpectSelfContained(const std::string& html) {
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("<link")));
  EXPECT_THAT(html, Not(HasSubstr("src=")));
  EXPECT_THAT(html, Not(HasSubstr("@import")));
  std::string without_ns = std::regex_replace(html, std::regex("xmlns=\"http://www.w3.org/2000/svg\""), "");
  EXPECT_THAT(without_ns, Not(HasSubstr("http:")));
  EXPECT_THAT(without_ns, Not(HasSubstr("https:")));
}

}  // namespace normsweep::testing
