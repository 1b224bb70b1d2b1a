#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/results.h"
#include "tests/common/views_fixture.h"
#include "tests/common/text_checks.h"

namespace normsweep::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::HasSubstrs;

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

// A trial whose l0 (the loss at initialisation) is known.
v1::Trial WithL0(v1::Trial t, double l0) {
  t.mutable_result()->set_init_val_loss(l0);
  return t;
}

// The whitespace-separated words of each line of text.
std::vector<std::vector<std::string>> Words(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    out.push_back(absl::StrSplit(line, ' ', absl::SkipEmpty()));
  }
  return out;
}

bool HasRow(const std::string& text, const std::vector<std::string>& words) {
  for (const auto& w : Words(text)) {
    if (w == words) return true;
  }
  return false;
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
  const std::string table = RenderResultsTable(sweep, *analysis);
  EXPECT_THAT(table, HasSubstrs({"Post-LN", "Pre-LN", "2.100±0.141", "diverged", "1.900 (1 div)", "1e-02"}));

  const std::string csv = RenderResultsCsv(*analysis);
  // plateaued 0, divergence_rate 0, then failure_rate (0 from a view with
  // the rule, empty before it).
  EXPECT_THAT(csv, HasSubstr("post,\"\",0,0.001,2,2,0,0,0,0,0,0.000000,"));
  EXPECT_THAT(csv, HasSubstr(",2.100000,0.141421,2.000000"));
  EXPECT_THAT(RenderResultsJson(sweep, *analysis), HasSubstr("\"mean_final_val_loss\":null"));
}

// Post-LN, l0 6.0 everywhere (the views compute; the numbers by hand):
//   warm-up 0:   1e-3: 3.0, 3.5 (l 3.25)   1e-2: 2.5, DIVERGED = 6.0 (l 4.25)
//                l* 3.25 at 1e-3, LRS (0 + 1.0) / 2 = 0.5, one point at l0
//   warm-up 100: 1e-3: 3.0, 3.0 (l 3.0)    1e-2: 2.5, 2.5 (l 2.5)
//                l* 2.5 at 1e-2, LRS (0.5 + 0) / 2 = 0.25
//   summary: 2 warm-ups, mean 0.375, min 0.25 at 100, max 0.5, best l* 2.5
//   ANOVA: f = [[3.25, 4.25], [3.0, 2.5]], mu 3.25; a = +-0.5: var 0.25;
//   b = -+0.125: var 0.015625; residuals +-0.375: var 0.140625; seed
//   variances 0.0625, 3.0625, 0, 0: var 0.78125; total 1.1875; shares
//   21.1%, 1.3%, 11.8%, 65.8% (0.210526, 0.013158, 0.118421, 0.657895).
// Pre-LN, one cell (warm-up 0, lr 1e-3: 2.0, 2.2): LRS 0 from one lr,
// marked; only the seeds vary.
std::vector<v1::Trial> LrSensitivityTrials() {
  return {WithL0(MakeTrial("post", 0, 1e-3, 0, v1::TRIAL_SUCCEEDED, 3.0), 6.0),
          WithL0(MakeTrial("post", 0, 1e-3, 1, v1::TRIAL_SUCCEEDED, 3.5), 6.0),
          WithL0(MakeTrial("post", 0, 1e-2, 0, v1::TRIAL_SUCCEEDED, 2.5), 6.0),
          WithL0(MakeTrial("post", 0, 1e-2, 1, v1::TRIAL_DIVERGED), 6.0),
          WithL0(MakeTrial("post", 100, 1e-3, 0, v1::TRIAL_SUCCEEDED, 3.0), 6.0),
          WithL0(MakeTrial("post", 100, 1e-3, 1, v1::TRIAL_SUCCEEDED, 3.0), 6.0),
          WithL0(MakeTrial("post", 100, 1e-2, 0, v1::TRIAL_SUCCEEDED, 2.5), 6.0),
          WithL0(MakeTrial("post", 100, 1e-2, 1, v1::TRIAL_SUCCEEDED, 2.5), 6.0),
          WithL0(MakeTrial("pre", 0, 1e-3, 0, v1::TRIAL_SUCCEEDED, 2.0), 6.0),
          WithL0(MakeTrial("pre", 0, 1e-3, 1, v1::TRIAL_SUCCEEDED, 2.2), 6.0)};
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
  const std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 6u) << csv;  // header and 5 cells
  const std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  ASSERT_EQ(header.size(), 35u);
  EXPECT_EQ(header.back(), "not_converged");  // new columns go last
  for (const std::string& line : lines) EXPECT_EQ(std::vector<std::string>(absl::StrSplit(line, ',')).size(), 35u) << line;
  // failure_rate (column 12) is the view's: 0 with the rule, empty before it.
  std::vector<std::string> first = absl::StrSplit(lines[1], ',');
  EXPECT_THAT(first[12], ::testing::AnyOf("", "0.000000"));
  first.erase(first.begin() + 12);
  EXPECT_EQ(absl::StrJoin(first, ","), "post,\"\",0,0.001,2,2,0,0,0,0,0,0.000000,3.250000,0.353553,3.000000,"
                      "2,6.000000,3.250000,0.001,0.500000,1,0,"
                      "2,0.375000,0.250000,0.500000,100,2.500000,"
                      "0.210526,0.013158,0.118421,0.657895,\"\",0");
  EXPECT_THAT(lines[5], HasSubstr(",1,6.000000,2.100000,0.001,0.000000,0,0,0,,,,,,"));
  EXPECT_THAT(lines[5], HasSubstr(",\"one cell: only the seeds vary\""));

  const std::string json = RenderResultsJson(sweep, *analysis);
  EXPECT_THAT(json, HasSubstrs({"{\"placement\":\"post\",\"variant\":\"\",\"warmup_steps\":0,\"lrs\":2,"
                                "\"init_val_loss\":6,\"best_val_loss\":3.25,\"best_lr\":0.001,"
                                "\"lr_sensitivity\":0.5,\"one_lr\":false,\"points_at_l0\":1,\"lrs_pending\":0}",
                                "\"one_lr\":true",
                                "{\"placement\":\"post\",\"variant\":\"\",\"warmups\":2,"
                                "\"mean_lr_sensitivity\":0.375,\"min_lr_sensitivity\":0.25,"
                                "\"max_lr_sensitivity\":0.5,\"warmup_of_min\":100,\"best_val_loss\":2.5}",
                                "\"share_warmup\":0.210526,\"share_lr\":0.0131579,\"share_interaction\":0.118421,"
                                "\"share_seed\":0.657895,\"note\":\"\"}"}));
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
                                  "failure_rate,mean_final_val_loss,"));
  EXPECT_THAT(lines[1], HasSubstr("post,\"\",0,0.001,2,2,0,1,0,0,0,0.000000,0.500000,2.900000,"));
  EXPECT_THAT(lines[2], HasSubstr("post,\"\",0,0.01,2,0,2,0,0,0,0,1.000000,1.000000,,"));
  EXPECT_TRUE(absl::EndsWith(lines[3], ",0")) << lines[3];
  EXPECT_TRUE(absl::EndsWith(lines[4], ",1")) << lines[4];  // not_converged, the last column

  const std::string json = RenderResultsJson(sweep, a);
  EXPECT_THAT(json, HasSubstrs({
      "\"diverged\":0,\"plateaued\":1,\"not_converged\":0,\"failed\":0,\"cancelled\":0,"
                              "\"unfinished\":0,\"divergence_rate\":0,\"failure_rate\":0.5,",
      "\"diverged\":2,\"plateaued\":0,\"not_converged\":0,\"failed\":0,\"cancelled\":0,"
                              "\"unfinished\":0,\"divergence_rate\":1,\"failure_rate\":1,",
      "\"plateaued\":0,\"not_converged\":1,"
  }));

  // A scheduler before the rule sends no rates: no second grid, nulls.
  v1::GetSweepAnalysisResponse old = a;
  for (v1::GridCell& c : *old.mutable_cells()) {
    c.clear_failure_rate();
    c.set_plateaued(0);
  }
  EXPECT_THAT(RenderResultsTable(sweep, old), Not(HasSubstr("failed to train, (diverged")));
  EXPECT_THAT(RenderResultsJson(sweep, old), HasSubstr("\"failure_rate\":null"));
}

TEST(ResultsTest, LearningRateFormatting) {
  EXPECT_EQ(FormatLr(1e-3), "1e-03");
  EXPECT_EQ(FormatLr(3e-4), "3e-04");
  EXPECT_EQ(FormatLr(1.5e-3), "0.0015");
}

}  // namespace
}  // namespace normsweep::client
