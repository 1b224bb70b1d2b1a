#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/results.h"
#include "tests/common/views_fixture.h"

namespace normsweep::client {
namespace {

using ::testing::HasSubstr;

v1::Trial MakeTrial(const std::string& placement, int warmup, double lr, int seed, v1::TrialState state,
                    double loss = 0) {
  v1::Trial t;
  t.mutable_config()->set_placement(placement);
  t.mutable_config()->set_warmup_steps(warmup);
  t.mutable_config()->set_lr(lr);
  t.mutable_config()->set_seed(seed);
  t.set_state(state);
  if (state == v1::TRIAL_SUCCEEDED) t.mutable_result()->set_final_val_loss(loss);
  return t;
}

TEST(ResultsTest, MeanOverSeedsAndDivergenceCounts) {
  std::vector<v1::Trial> trials = {
      MakeTrial("post", 0, 1e-3, 0, v1::TRIAL_SUCCEEDED, 2.0), MakeTrial("post", 0, 1e-3, 1, v1::TRIAL_SUCCEEDED, 2.2),
      MakeTrial("post", 0, 1e-2, 0, v1::TRIAL_DIVERGED),       MakeTrial("post", 0, 1e-2, 1, v1::TRIAL_DIVERGED),
      MakeTrial("pre", 0, 1e-2, 0, v1::TRIAL_SUCCEEDED, 1.9),  MakeTrial("pre", 0, 1e-2, 1, v1::TRIAL_DIVERGED),
      MakeTrial("pre", 100, 1e-2, 0, v1::TRIAL_RUNNING)};
  // The figures come from the views (warmup_lr_grid_stats), as the CLI gets them.
  auto analysis = testing::AnalysisFromViews(trials);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  std::vector<ResultCell> cells = CellsFromAnalysis(*analysis);
  ASSERT_EQ(cells.size(), 4u);
  EXPECT_EQ(cells[0].placement, "post");
  EXPECT_DOUBLE_EQ(cells[0].peak_lr, 1e-3);
  EXPECT_NEAR(cells[0].mean_final_val_loss, 2.1, 1e-12);
  EXPECT_NEAR(cells[0].std_final_val_loss, 0.141421356, 1e-6);
  EXPECT_EQ(cells[1].diverged, 2);
  EXPECT_EQ(cells[1].seeds_with_loss, 0);
  EXPECT_EQ(cells[2].diverged, 1);
  EXPECT_EQ(cells[3].unfinished, 1);

  v1::Sweep sweep;
  sweep.set_id(7);
  sweep.set_name("s");
  const std::string table = RenderResultsTable(sweep, cells);
  EXPECT_THAT(table, HasSubstr("Post-LN"));
  EXPECT_THAT(table, HasSubstr("Pre-LN"));
  EXPECT_THAT(table, HasSubstr("2.100±0.141"));
  EXPECT_THAT(table, HasSubstr("diverged"));
  EXPECT_THAT(table, HasSubstr("1.900 (1 div)"));
  EXPECT_THAT(table, HasSubstr("1e-02"));

  const std::string csv = RenderResultsCsv(cells);
  EXPECT_THAT(csv, HasSubstr("post,\"\",0,0.001,2,2,0,0,0,0,2.100000,0.141421,2.000000"));
  EXPECT_THAT(RenderResultsJson(sweep, cells), HasSubstr("\"mean_final_val_loss\":null"));
}

TEST(ResultsTest, LearningRateFormatting) {
  EXPECT_EQ(FormatLr(1e-3), "1e-03");
  EXPECT_EQ(FormatLr(3e-4), "3e-04");
  EXPECT_EQ(FormatLr(1.5e-3), "0.0015");
}

}  // namespace
}  // namespace normsweep::client
