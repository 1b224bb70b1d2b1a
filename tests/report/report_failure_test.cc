// The report under the one rule for failing to train (proto/schema/failure.h):
// a run stalled at the unigram plateau is a failure like a divergence. From
// hand-made rows (the fixture's analysis, as GetSweepAnalysis returns it with
// plateaued and failure_rate set), so no database is needed.
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/report/figures.h"
#include "client/report/page.h"
#include "client/report/report.h"
#include "client/report/variant_view.h"
#include "tests/report/report_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace normsweep::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::AddPlateau;
using testing::Count;
using testing::Figures;
using testing::HasSubstrs;
using testing::LiteratureFigures;
using testing::Section;

// Post-LN's trials of one cell, by seed order of the fixture.
int64_t TrialAt(const ReportData& d, const std::string& placement, int warmup, double lr, int seed) {
  for (const v1::GetTrialResponse& t : d.trials) {
    const v1::TrainConfig& c = t.trial().config();
    if (c.placement() == placement && c.warmup_steps() == warmup && c.lr() == lr && c.seed() == seed) {
      return t.trial().id();
    }
  }
  ADD_FAILURE() << "no trial " << placement << " " << warmup << " " << lr << " " << seed;
  return 0;
}

TEST(ReportFailureTest, APlateauAboveTheBestLrIsTheFirstFailure) {
  Figures fig = LiteratureFigures();
  const int64_t plateau = AddPlateau(fig);
  const std::string html = RenderReportHtml(fig.data);
  const std::string diag = Section(html, "Instability diagnostics");
  // Above Post-LN's best lr (1e-3) the plateau at 3e-3 comes before the
  // divergences at 1e-2; Pre-LN's is still a divergence.
  EXPECT_THAT(
      diag,
      HasSubstrs(
          {absl::StrCat(">Post-LN, first failure (plateau): trial ", plateau, "</text>"),
           ">warm-up 0, lr 3e-03, seed 0; logit layer 1, update layer 0 fc2</text>",
           absl::StrCat(">Pre-LN, first failure (diverged after step 20): trial ", fig.pre_first_failure, "</text>"),
           absl::StrCat("<title>Post-LN, first failure (plateau): trial ", plateau, ", layer 1</title></polyline>")}));
  // Dashed like every failure, but no cross: a plateau has no divergence
  // point. Pre-LN's diverged trial keeps its three.
  EXPECT_EQ(Count(diag, "<polyline class=\"curve diag\" fill=\"none\" stroke=\"#d55e00\" stroke-dasharray=\"7 4\""), 3u);
  EXPECT_EQ(Count(diag, "class=\"diverged-mark diag-end\""), 3u);
  EXPECT_THAT(diag, Not(HasSubstr(absl::StrCat("trial ", plateau, " diverged"))));
  EXPECT_THAT(diag, Not(HasSubstr(absl::StrCat("trial ", fig.post_first_failure, "</text>"))));

  // The loss against lr: the plateaued cell hollow, with its count, and the
  // legend says what hollow means; crosses stay for the diverged cells.
  const std::string loss = Section(html, "Final validation loss against peak lr");
  static const std::regex hollow(
      R"re(<circle class="plateau-point" r="3.5" cx="[^"]+" cy="[^"]+" fill="#fff" stroke="[^"]+"><title>([^<]*)</title>)re");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(loss, m, hollow));
  EXPECT_EQ(m[1].str(), "Post-LN, warm-up 0, lr 3e-03: 3.430 (1 seed; 1/1 plateaued: failed to train)");
  EXPECT_EQ(Count(loss, "<circle class=\"plateau-point\""), 1u + 1u);  // the cell and the legend's
  EXPECT_THAT(loss, HasSubstr(">hollow: seeds plateaued (failed to train)</text>"));
  EXPECT_EQ(Count(loss, "<path class=\"diverged-mark diverged-point\""), 2u);
  // The heatmap says it too.
  EXPECT_THAT(html, HasSubstr("Post-LN, warm-up 0, lr 3e-03: 3.430 1/1 plat</title>"));
}

// The same run still learning at its end (issue 34): not converged, which
// is no failure. It gets its own mark (a diamond around a filled point) and
// legend, "n.c." in the heatmap and a summary column, and Post-LN's first
// failure is the divergence again.
TEST(ReportFailureTest, ARunStillLearningIsNotConvergedNotAFailure) {
  Figures fig = LiteratureFigures();
  const int64_t learning = testing::AddNotConverged(fig);
  v1::PlacementSensitivity& p = *fig.data.analysis.add_placements();
  p.set_placement("post");
  p.set_trials(13);
  p.set_succeeded(8);
  p.set_diverged(5);
  p.set_not_converged(1);
  p.set_failure_rate(5.0 / 13);
  const std::string html = RenderReportHtml(fig.data);

  const std::string diag = Section(html, "Instability diagnostics");
  EXPECT_THAT(diag, Not(HasSubstr(absl::StrCat("trial ", learning, "</text>"))));
  EXPECT_THAT(diag, HasSubstr(absl::StrCat(">Post-LN, first failure (diverged after step 60): trial ",
                                           fig.post_first_failure, "</text>")));

  const std::string loss = Section(html, "Final validation loss against peak lr");
  EXPECT_THAT(loss, Not(HasSubstr("plateau-point")));
  EXPECT_EQ(Count(loss, "<path class=\"not-converged-mark\""), 1u + 1u);  // the cell and the legend's
  EXPECT_THAT(loss, HasSubstr(">diamond: seeds not converged</text>"));
  EXPECT_THAT(loss, HasSubstr("Post-LN, warm-up 0, lr 3e-03: 3.430 (1 seed; 1/1 not converged: near the unigram "
                              "loss but still learning, no failure)</title>"));
  EXPECT_THAT(html, HasSubstrs({"Post-LN, warm-up 0, lr 3e-03: 3.430 1/1 n.c.</title>",
                                "<td>Post-LN</td><td>13</td><td>8</td><td>5</td><td>0</td><td>38%</td><td>1</td>",
                                "is <em>not converged</em>"}));
}

TEST(ReportFailureTest, WithoutAPlateauNothingIsHollow) {
  const Figures fig = LiteratureFigures();
  const std::string loss = Section(RenderReportHtml(fig.data), "Final validation loss against peak lr");
  EXPECT_THAT(loss, Not(HasSubstr("plateau-point")));
  EXPECT_THAT(loss, Not(HasSubstr("hollow: seeds plateaued")));
}

TEST(ReportFailureTest, SummaryHasPlateauedAndTheFailureRate) {
  Figures fig = LiteratureFigures();
  AddPlateau(fig);
  v1::PlacementSensitivity& p = *fig.data.analysis.add_placements();
  p.set_placement("post");
  p.set_trials(13);
  p.set_succeeded(8);
  p.set_diverged(5);
  p.set_plateaued(1);
  p.set_divergence_rate(5.0 / 13);
  p.set_failure_rate(6.0 / 13);
  p.set_best_val_loss(2.85);
  v1::PlacementSensitivity& q = *fig.data.analysis.add_placements();
  q.set_placement("pre");
  q.set_trials(12);
  q.set_succeeded(10);
  q.set_diverged(2);
  q.set_failure_rate(2.0 / 12);
  const std::vector<PlacementSummary> rows = SummariesFromAnalysis(fig.data.analysis);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].plateaued, 1);
  EXPECT_DOUBLE_EQ(*rows[0].failure_rate, 6.0 / 13);
  const std::string html = RenderReportHtml(fig.data);
  EXPECT_THAT(html,
              HasSubstrs({"<th>diverged</th><th>plateaued</th><th>failure rate</th><th>not converged</th>"
                          "<th>failed</th>",
                          "<td>Post-LN</td><td>13</td><td>8</td><td>5</td><td>1</td><td>46%</td><td>0</td><td>0</td>",
                          "<td>Pre-LN</td><td>12</td><td>10</td><td>2</td><td>0</td><td>17%</td><td>0</td><td>0</td>",
                          // The rule is stated once, on the page.
                          "within 0.1 nats of the data's unigram loss"}));
}

TEST(ReportFailureTest, NoFailureSaysSo) {
  Figures fig = LiteratureFigures();
  for (v1::GetTrialResponse& t : fig.data.trials) {
    if (t.trial().state() == v1::TRIAL_DIVERGED) t.mutable_trial()->set_state(v1::TRIAL_FAILED);
  }
  const std::string diag = Section(RenderReportHtml(fig.data), "Instability diagnostics");
  EXPECT_THAT(diag, HasSubstr(">Post-LN: no trial failed to train</text>"));
  EXPECT_THAT(diag, HasSubstr(">Pre-LN: no trial failed to train</text>"));
  EXPECT_THAT(diag, Not(HasSubstr("first failure (")));
}

// A boundary search's max_val_loss is part of the rule. With no failure
// above the best lr the first failure is the smallest failing lr: Post-LN's
// seeds at 1e-4 without warm-up (3.00, 3.02) are above 2.99.
TEST(ReportFailureTest, TheBoundarySearchsMaxValLossAndTheSmallestLrFallback) {
  Figures fig = LiteratureFigures();
  for (v1::GetTrialResponse& t : fig.data.trials) {
    if (t.trial().state() == v1::TRIAL_DIVERGED) t.mutable_trial()->set_state(v1::TRIAL_FAILED);
  }
  fig.data.sweep.mutable_spec()->mutable_boundary_search()->set_max_val_loss(2.99);
  const std::string diag = Section(RenderReportHtml(fig.data), "Instability diagnostics");
  EXPECT_THAT(diag, HasSubstr(absl::StrCat(">Post-LN, first failure (above max_val_loss): trial ",
                                           TrialAt(fig.data, "post", 0, 1e-4, 0), "</text>")));
  EXPECT_THAT(diag, HasSubstr(">Pre-LN: no trial failed to train</text>"));
  // The pick itself: the best is still the best cell's lowest seed.
  for (const report::VariantView& v : report::Variants(fig.data)) {
    const report::DiagnosticPicks picks = report::PickDiagnosticTrials(v, "post");
    ASSERT_NE(picks.best, nullptr);
    EXPECT_EQ(picks.best->trial().id(), fig.post_best);
    ASSERT_NE(picks.first_failure, nullptr);
    EXPECT_EQ(picks.failure, schema::TrainingFailure::kAboveMaxValLoss);
  }
  // Without the boundary search nothing failed.
  fig.data.sweep.mutable_spec()->clear_boundary_search();
  EXPECT_THAT(Section(RenderReportHtml(fig.data), "Instability diagnostics"),
              HasSubstr(">Post-LN: no trial failed to train</text>"));
}

}  // namespace
}  // namespace normsweep::client
