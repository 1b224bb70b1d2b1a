// normsweep results: the grid, the LR sensitivity, the variance shares and
// the failure rule, from trials through the real views (PostgreSQL).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/results.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "tests/client/results_reading.h"
#include "tests/common/views_fixture.h"
#include "tests/common/text_checks.h"

namespace normsweep::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::HasSubstrs;
using results_testing::MakeTrial;
using results_testing::WithL0;
using results_testing::HasRow;
using results_testing::Csv;
using results_testing::ParseCsv;
using results_testing::Number;
using results_testing::ParseJson;
using results_testing::Item;
using results_testing::LrSensitivityTrials;

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
  const std::string table = RenderResultsTable(sweep, *analysis);
  EXPECT_THAT(table, HasSubstrs({"Post-LN", "Pre-LN", "2.100±0.141", "diverged", "1.900 (1 div)", "1e-02"}));

  const std::string csv = RenderResultsCsv(*analysis);
  // plateaued 0, divergence_rate 0, then failure_rate 0 and the mean.
  EXPECT_THAT(csv, HasSubstr("post,\"\",0,0.001,2,2,0,0,0,0,0,0,0,2.1,"));
  const Csv parsed = ParseCsv(csv);
  ASSERT_EQ(parsed.rows.size(), 4u) << csv;
  EXPECT_EQ(parsed.rows[0].at("mean_val_loss"), "2.1");
  EXPECT_NEAR(Number(parsed.rows[0].at("std_val_loss")), 0.141421356, 1e-6);
  EXPECT_EQ(parsed.rows[0].at("min_val_loss"), "2");
  EXPECT_EQ(parsed.rows[1].at("mean_val_loss"), "");  // every seed diverged
  const std::string json = RenderResultsJson(sweep, *analysis);
  EXPECT_THAT(json, HasSubstrs({"\"mean_val_loss\":null", "\"mean_final_val_loss\":null"}));
}

TEST(ResultsTest, LrSensitivityAndVarianceSharesUnderEachGrid) {
  auto analysis = testing::AnalysisFromViews(LrSensitivityTrials());
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  v1::Sweep sweep;
  sweep.set_id(3);
  sweep.set_name("lrs");
  const std::string table = RenderResultsTable(sweep, *analysis);
  const size_t post = table.find("Post-LN"), pre = table.find("Pre-LN");
  ASSERT_NE(post, std::string::npos) << table;
  ASSERT_NE(pre, std::string::npos) << table;
  const std::string post_part = table.substr(post, pre - post), pre_part = table.substr(pre);
  // Under the grid: the LR-sensitivity table, its summary, the shares.
  EXPECT_LT(post_part.find("warmup \\ lr"), post_part.find("LR sensitivity by warm-up")) << table;
  EXPECT_TRUE(HasRow(post_part, {"warm-up", "lrs", "l0", "l*", "best", "lr", "LRS", "at", "l0", "pending"})) << table;
  EXPECT_TRUE(HasRow(post_part, {"0", "2", "6.000", "3.250", "1e-03", "0.500", "1", "0"})) << table;
  EXPECT_TRUE(HasRow(post_part, {"100", "2", "6.000", "2.500", "1e-02", "0.250", "0", "0"})) << table;
  EXPECT_THAT(post_part, HasSubstr("over 2 warm-ups (LRS from two lrs or more): mean 0.375, min 0.250 at warm-up 100,"
                                   " max 0.500; best l* 2.500"));
  EXPECT_THAT(post_part, HasSubstr("Variance explained (fANOVA): warm-up 21.1%, peak lr 1.3%, interaction 11.8%,"
                                   " seeds 65.8% (total variance 1.18"));
  // One lr: the 0 is marked, and no warm-up makes the summary.
  EXPECT_TRUE(HasRow(pre_part, {"0", "1", "6.000", "2.100", "1e-03", "0.000", "(one", "lr)", "0", "0"})) << table;
  EXPECT_THAT(pre_part, HasSubstrs({"over warm-ups: no warm-up with LRS from two lrs or more",
                                    "warm-up 0.0%, peak lr 0.0%, interaction 0.0%, seeds 100.0%",
                                    "; one cell: only the seeds vary"}));
  EXPECT_THAT(post_part, Not(HasSubstr("(one lr)")));

  // CSV: the line's figures, the summary and the shares on each cell's row.
  const std::string csv = RenderResultsCsv(*analysis);
  const Csv parsed = ParseCsv(csv);
  ASSERT_EQ(parsed.rows.size(), 5u) << csv;
  const std::map<std::string, std::string>& first = parsed.rows[0];
  // failure_rate is the view's: 0 with the rule.
  const std::vector<std::pair<std::string, std::string>> want = {
      {"placement", "post"}, {"variant", ""}, {"warmup_steps", "0"}, {"peak_lr", "0.001"}, {"trials", "2"},
      {"succeeded", "2"}, {"divergence_rate", "0"}, {"failure_rate", "0"}, {"mean_val_loss", "3.25"},
      {"min_val_loss", "3"}, {"line_lrs", "2"}, {"line_init_val_loss", "6"}, {"line_best_val_loss", "3.25"},
      {"line_best_lr", "0.001"}, {"line_lr_sensitivity", "0.5"}, {"line_points_at_l0", "1"},
      {"line_lrs_pending", "0"}, {"summary_warmups", "2"}, {"summary_mean_lr_sensitivity", "0.375"},
      {"summary_min_lr_sensitivity", "0.25"}, {"summary_max_lr_sensitivity", "0.5"},
      {"summary_warmup_of_min", "100"}, {"summary_best_val_loss", "2.5"}, {"importance_note", ""},
      {"not_converged", "0"}, {"n_seeds", "2"}};
  for (const auto& [column, value] : want) EXPECT_EQ(first.at(column), value) << column;
  EXPECT_NEAR(Number(first.at("std_val_loss")), 0.353553, 1e-6);
  EXPECT_NEAR(Number(first.at("share_warmup")), 0.210526, 1e-6);
  EXPECT_NEAR(Number(first.at("share_lr")), 0.013158, 1e-6);
  EXPECT_NEAR(Number(first.at("share_interaction")), 0.118421, 1e-6);
  EXPECT_NEAR(Number(first.at("share_seed")), 0.657895, 1e-6);
  const std::map<std::string, std::string>& pre_cell = parsed.rows[4];
  for (const auto& [column, value] : std::vector<std::pair<std::string, std::string>>{
           {"line_lrs", "1"}, {"line_init_val_loss", "6"}, {"line_best_val_loss", "2.1"}, {"line_best_lr", "0.001"},
           {"line_lr_sensitivity", "0"}, {"summary_warmups", "0"}, {"summary_mean_lr_sensitivity", ""},
           {"summary_warmup_of_min", ""}, {"share_seed", "1"}, {"importance_note", "one cell: only the seeds vary"}}) {
    EXPECT_EQ(pre_cell.at(column), value) << column;
  }

  const std::string json = RenderResultsJson(sweep, *analysis);
  EXPECT_THAT(json, HasSubstrs({"{\"placement\":\"post\",\"variant\":\"\",\"warmup_steps\":0,\"lrs\":2,"
                                "\"init_val_loss\":6,\"best_val_loss\":3.25,\"best_lr\":0.001,"
                                "\"lr_sensitivity\":0.5,\"points_at_l0\":1,\"lrs_pending\":0,\"one_lr\":false}",
                                "\"one_lr\":true",
                                "{\"placement\":\"post\",\"variant\":\"\",\"warmups\":2,"
                                "\"mean_lr_sensitivity\":0.375,\"min_lr_sensitivity\":0.25,"
                                "\"max_lr_sensitivity\":0.5,\"warmup_of_min\":100,\"best_val_loss\":2.5}"}));
  const google::protobuf::Struct parsed_json = ParseJson(json);
  const google::protobuf::Struct& shares = Item(parsed_json, "importance", 0);
  EXPECT_EQ(shares.fields().at("placement").string_value(), "post");
  EXPECT_NEAR(shares.fields().at("share_warmup").number_value(), 0.210526, 1e-6);
  EXPECT_NEAR(shares.fields().at("share_seed").number_value(), 0.657895, 1e-6);
  EXPECT_EQ(shares.fields().at("note").string_value(), "");
}

// Without l0 (trials of a trainer that sent none) nothing counts yet; a
// random search has no grid for the shares, and says so.
TEST(ResultsTest, PendingLinesAndRandomSearchNote) {
  testing::ViewsFixtureOptions options;
  options.spec.mutable_random_search()->set_samples(2);
  options.spec.mutable_random_search()->set_lr_min(1e-4);
  options.spec.mutable_random_search()->set_lr_max(1e-2);
  auto analysis = testing::AnalysisFromViews(
      {MakeTrial("pre", 10, 2e-4, 0, v1::TRIAL_SUCCEEDED, 3.0), MakeTrial("pre", 10, 5e-3, 0, v1::TRIAL_DIVERGED)},
      options);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  v1::Sweep sweep;
  const std::string table = RenderResultsTable(sweep, *analysis);
  EXPECT_TRUE(HasRow(table, {"10", "0", "-", "-", "-", "-", "0", "2"})) << table;
  EXPECT_THAT(table, HasSubstr("Variance explained (fANOVA): not computed: random search: no grid; fANOVA needs a "
                               "surrogate model (Optuna's fANOVA fits a random forest) - not computed"));
  EXPECT_THAT(RenderResultsJson(sweep, *analysis), HasSubstr("\"lr_sensitivity\":null"));
}

// The failure rule's columns (proto/schema/failure.h) from hand-made rows,
// as a scheduler with the rule returns them: Post-LN without warm-up, one
// seed at the plateau at 1e-3, both diverged at 1e-2; with warm-up both
// trained at 1e-3, one still running at 1e-2.
v1::GetSweepAnalysisResponse FailureAnalysis() {
  v1::GetSweepAnalysisResponse a;
  auto cell = [&](int warmup, double lr, int trials, int succeeded, int diverged, int plateaued, int unfinished,
                  std::optional<double> mean) {
    v1::GridCell& c = *a.add_cells();
    c.set_placement("post");
    c.set_warmup_steps(warmup);
    c.set_peak_lr(lr);
    c.set_trials(trials);
    c.set_succeeded(succeeded);
    c.set_diverged(diverged);
    c.set_plateaued(plateaued);
    c.set_unfinished(unfinished);
    c.set_n_seeds(succeeded);
    if (mean) c.set_mean_val_loss(*mean);
    if (succeeded + diverged > 0) {
      c.set_divergence_rate(static_cast<double>(diverged) / (succeeded + diverged));
      c.set_failure_rate(static_cast<double>(diverged + plateaued) / (succeeded + diverged));
    }
  };
  cell(0, 1e-3, 2, 2, 0, 1, 0, 2.9);
  cell(0, 1e-2, 2, 0, 2, 0, 0, std::nullopt);
  cell(100, 1e-3, 2, 2, 0, 0, 0, 2.5);
  cell(100, 1e-2, 2, 1, 0, 0, 1, 2.4);
  return a;
}

TEST(ResultsTest, PlateauedAndFailureRateColumns) {
  v1::GetSweepAnalysisResponse a = FailureAnalysis();
  // (100, 1e-2): its one succeeded seed ended near the unigram loss still learning.
  a.mutable_cells(3)->set_not_converged(1);
  const std::vector<ResultCell> cells = CellsFromAnalysis(a);
  ASSERT_EQ(cells.size(), 4u);
  EXPECT_EQ(cells[3].not_converged, 1);
  EXPECT_EQ(cells[0].plateaued, 1);
  EXPECT_EQ(cells[0].failure_rate, 0.5);
  EXPECT_EQ(cells[0].divergence_rate, 0.0);
  EXPECT_EQ(cells[3].failure_rate, 0.0);

  v1::Sweep sweep;
  sweep.set_id(9);
  sweep.set_name("f");
  const std::string table = RenderResultsTable(sweep, a);
  EXPECT_THAT(table, HasSubstr("(k plat): k seeds failed to train without diverging"));
  EXPECT_TRUE(HasRow(table, {"0", "2.900±0.000", "(1", "plat)", "diverged"})) << table;
  EXPECT_THAT(table, HasSubstr("(k n.c.): k seeds ended near the unigram loss still learning"));
  EXPECT_TRUE(HasRow(table, {"100", "2.500±0.000", "2.400", "(1", "n.c.)", "..."})) << table;
  // Under the loss grid, the failure rates.
  const size_t rates = table.find("failed to train, (diverged + plateaued) / finished seeds:\n");
  ASSERT_NE(rates, std::string::npos) << table;
  const std::string below = table.substr(rates);
  EXPECT_TRUE(HasRow(below, {"0", "50%", "(1/2)", "100%", "(2/2)"})) << table;
  EXPECT_TRUE(HasRow(below, {"100", "0%", "(0/2)", "0%", "(0/1)"})) << table;

  const std::string csv = RenderResultsCsv(a);
  const std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u) << csv;
  EXPECT_THAT(lines[0], HasSubstr("trials,succeeded,diverged,plateaued,failed,cancelled,unfinished,divergence_rate,"
                                  "failure_rate,mean_val_loss,"));
  EXPECT_THAT(lines[1], HasSubstr("post,\"\",0,0.001,2,2,0,1,0,0,0,0,0.5,2.9,"));
  EXPECT_THAT(lines[2], HasSubstr("post,\"\",0,0.01,2,0,2,0,0,0,0,1,1,,"));
  const Csv parsed = ParseCsv(csv);
  ASSERT_EQ(parsed.rows.size(), 4u);
  EXPECT_EQ(parsed.rows[2].at("not_converged"), "0");
  EXPECT_EQ(parsed.rows[3].at("not_converged"), "1");

  const std::string json = RenderResultsJson(sweep, a);
  EXPECT_THAT(json, HasSubstrs({
      "\"diverged\":0,\"plateaued\":1,\"failed\":0,\"cancelled\":0,"
                              "\"unfinished\":0,\"divergence_rate\":0,\"failure_rate\":0.5,",
      "\"diverged\":2,\"plateaued\":0,\"failed\":0,\"cancelled\":0,"
                              "\"unfinished\":0,\"divergence_rate\":1,\"failure_rate\":1,",
  }));
  const google::protobuf::Struct parsed_json = ParseJson(json);
  EXPECT_EQ(Item(parsed_json, "cells", 0).fields().at("not_converged").number_value(), 0);
  EXPECT_EQ(Item(parsed_json, "cells", 3).fields().at("not_converged").number_value(), 1);

  // A scheduler before the rule sends no rates: no second grid, nulls.
  v1::GetSweepAnalysisResponse old = a;
  for (v1::GridCell& c : *old.mutable_cells()) {
    c.clear_failure_rate();
    c.set_plateaued(0);
  }
  EXPECT_THAT(RenderResultsTable(sweep, old), Not(HasSubstr("failed to train, (diverged")));
  EXPECT_THAT(RenderResultsJson(sweep, old), HasSubstr("\"failure_rate\":null"));
}

}  // namespace
}  // namespace normsweep::client
