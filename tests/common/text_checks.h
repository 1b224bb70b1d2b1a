// Checks on long texts (pages, tables, logs): how often a piece stands in
// one, and a matcher for a text that must hold several pieces. Header-only.
#ifndef NORMSWEEP_TESTS_COMMON_TEXT_CHECKS_H_
#define NORMSWEEP_TESTS_COMMON_TEXT_CHECKS_H_

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gmock/gmock.h"

namespace normsweep::testing {

// How often `what` stands in text (overlapping occurrences count).
inline size_t Count(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string_view::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// EXPECT_THAT(html, HasSubstrs({"a", "b"})): the text holds each piece. One
// check for a list of them: a failure names the missing pieces and prints
// the text once, where a HasSubstr per piece prints it for each.
class HasSubstrsMatcher {
 public:
  using is_gtest_matcher = void;

  explicit HasSubstrsMatcher(std::vector<std::string> parts) : parts_(std::move(parts)) {}

  bool MatchAndExplain(std::string_view text, std::ostream* os) const {
    std::vector<std::string> missing;
    for (const std::string& p : parts_) {
      if (text.find(p) == std::string_view::npos) missing.push_back(p);
    }
    if (!missing.empty() && os != nullptr) *os << "lacks " << ::testing::PrintToString(missing);
    return missing.empty();
  }
  void DescribeTo(std::ostream* os) const { *os << "has each of " << ::testing::PrintToString(parts_); }
  void DescribeNegationTo(std::ostream* os) const { *os << "lacks one of " << ::testing::PrintToString(parts_); }

 private:
  std::vector<std::string> parts_;
};

inline HasSubstrsMatcher HasSubstrs(std::vector<std::string> parts) { return HasSubstrsMatcher(std::move(parts)); }

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_TEXT_CHECKS_H_
