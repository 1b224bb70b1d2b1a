#include "tests/report/views_analysis.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/common/views_fixture.h"

namespace normsweep::testing {

client::ReportData WithAnalysis(client::ReportData d, double tolerance) {
  std::vector<v1::Trial> trials;
  for (const auto& t : d.trials) trials.push_back(t.trial());
  auto analysis = AnalysisFromViews(trials, tolerance);
  EXPECT_TRUE(analysis.ok()) << analysis.status();
  if (analysis.ok()) d.analysis = *std::move(analysis);
  return d;
}

}  // namespace normsweep::testing
