// The boundary-search tables of `normsweep results` and `normsweep watch`,
// from hand-made lr_boundary rows.
#include "client/boundary_tables.h"

#include "client/report/boundary.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/text_checks.h"

namespace normsweep::client {
namespace {

using ::testing::HasSubstr;
using testing::Count;
using testing::HasSubstrs;

v1::BoundaryLine Line(int line, const std::string& placement, int warmup, int seed, const std::string& state,
                      std::optional<double> lo, std::optional<double> hi, int trials, const std::string& variant = "") {
  v1::BoundaryLine l;
  l.set_line(line);
  l.set_placement(placement);
  l.set_variant(variant);
  l.set_warmup_steps(warmup);
  l.set_seed(seed);
  l.set_state(state);
  if (lo) l.set_max_trainable_lr(*lo);
  if (hi) l.set_min_untrainable_lr(*hi);
  l.set_trials(trials);
  l.set_finished(state == "SEARCHING" ? trials - 1 : trials);
  return l;
}

v1::GetSweepAnalysisResponse Analysis() {
  v1::GetSweepAnalysisResponse a;
  // Post-LN at warm-up 0: three seeds, one trainable nowhere.
  *a.add_boundary() = Line(0, "post", 0, 0, "FOUND", 1.78e-3, 2.11e-3, 8);
  *a.add_boundary() = Line(1, "post", 0, 1, "NOWHERE_TRAINABLE", std::nullopt, 1e-4, 4);
  *a.add_boundary() = Line(2, "post", 0, 2, "FOUND", 3.16e-3, 3.76e-3, 8);
  // Post-LN at warm-up 400: one decided, one still searching.
  *a.add_boundary() = Line(3, "post", 400, 0, "FOUND", 1e-2, 1.19e-2, 8);
  *a.add_boundary() = Line(4, "post", 400, 1, "SEARCHING", 1e-2, 3.16e-2, 6);
  // Pre-LN: trains everywhere.
  *a.add_boundary() = Line(5, "pre", 0, 0, "TRAINABLE_EVERYWHERE", 1e-1, std::nullopt, 4);
  return a;
}

TEST(BoundaryTablesTest, SummaryOverSeeds) {
  const std::vector<BoundarySummary> s = SummariseBoundary(Analysis());
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].placement, "post");
  EXPECT_EQ(s[0].warmup_steps, 0);
  EXPECT_EQ(s[0].lines, 3);
  EXPECT_EQ(s[0].decided, 3);
  EXPECT_EQ(s[0].trials, 20);
  EXPECT_EQ(s[0].min->line(), 1);     // trainable nowhere: lowest
  EXPECT_EQ(s[0].median->line(), 0);
  EXPECT_EQ(s[0].max->line(), 2);
  EXPECT_EQ(s[0].states, "FOUND x2, NOWHERE_TRAINABLE x1");
  EXPECT_EQ(s[1].warmup_steps, 400);
  EXPECT_EQ(s[1].decided, 1);         // the searching line is left out
  EXPECT_EQ(s[1].median->line(), 3);
  EXPECT_EQ(s[1].states, "FOUND x1, SEARCHING x1");
  EXPECT_EQ(s[2].placement, "pre");
  // An even count: the lower median, a line's own figure.
  v1::GetSweepAnalysisResponse two;
  *two.add_boundary() = Line(0, "pre", 0, 0, "FOUND", 2e-2, 2.4e-2, 8);
  *two.add_boundary() = Line(1, "pre", 0, 1, "FOUND", 1e-2, 1.2e-2, 8);
  EXPECT_EQ(SummariseBoundary(two)[0].median->line(), 1);
}

TEST(BoundaryTablesTest, LrTexts) {
  const v1::GetSweepAnalysisResponse a = Analysis();
  EXPECT_EQ(BoundaryLrText(a.boundary(0)), "1.78e-03");
  EXPECT_EQ(BoundaryLrText(a.boundary(1)), "<1.00e-04");
  EXPECT_EQ(BoundaryLrText(a.boundary(5)), ">=1.00e-01");
  EXPECT_EQ(BracketText(a.boundary(0)), "[1.78e-03, 2.11e-03)");
  EXPECT_EQ(BracketText(a.boundary(1)), "[-, 1.00e-04)");
  EXPECT_EQ(BracketText(a.boundary(5)), "[1.00e-01, -)");
  v1::BoundaryLine fresh = Line(9, "pre", 0, 0, "SEARCHING", std::nullopt, std::nullopt, 4);
  EXPECT_EQ(BoundaryLrText(fresh), "-");
}

TEST(BoundaryTablesTest, ResultsTable) {
  const std::string t = RenderBoundaryTable(Analysis());
  EXPECT_THAT(
      t, HasSubstrs(
             {"max trainable lr by warm-up", "\nPost-LN\nwarmup  seeds  min",
              "0       3/3    <1.00e-04  1.78e-03  3.16e-03  [1.78e-03, 2.11e-03)  20      FOUND x2, NOWHERE_TRAINABLE "
              "x1\n",
              "400     1/2    1.00e-02   1.00e-02  1.00e-02  [1.00e-02, 1.19e-02)  14      FOUND x1, SEARCHING x1\n",
              "\nPre-LN\n", ">=1.00e-01"}));
  EXPECT_EQ(RenderBoundaryTable(v1::GetSweepAnalysisResponse()), "");
  v1::GetSweepAnalysisResponse variants;
  *variants.add_boundary() = Line(0, "pre", 0, 0, "FOUND", 2e-2, 2.4e-2, 8, "layers=12");
  EXPECT_THAT(RenderBoundaryTable(variants), HasSubstr("\nPre-LN (layers=12)\n"));
}

TEST(BoundaryTablesTest, WatchProgress) {
  const std::string p = RenderBoundaryProgress(Analysis());
  EXPECT_THAT(p, HasSubstr("line  placement  variant  warmup  seed  state"));
  EXPECT_THAT(p, HasSubstr("4     post       -        400     1     SEARCHING             [1.00e-02, 3.16e-02)  5/6\n"));
  EXPECT_THAT(p, ::testing::Not(HasSubstr("line 6")));
}

TEST(BoundaryTablesTest, WatchReadsTheLinesWhenABoundaryTrialEnds) {
  v1::WatchSweepEvent e;
  EXPECT_FALSE(BoundaryLinesChanged(e));
  v1::Trial* t = e.add_trials();
  t->set_state(v1::TRIAL_SUCCEEDED);
  EXPECT_FALSE(BoundaryLinesChanged(e));  // a grid's trial
  t->set_boundary_line(3);
  EXPECT_TRUE(BoundaryLinesChanged(e));
  t->set_state(v1::TRIAL_RUNNING);
  EXPECT_FALSE(BoundaryLinesChanged(e));
  t->set_state(v1::TRIAL_DIVERGED);
  EXPECT_TRUE(BoundaryLinesChanged(e));
}

TEST(BoundaryReportTest, ChartOfMaxTrainableLrAgainstWarmup) {
  const std::string svg = BoundarySvg(Analysis());
  EXPECT_EQ(BoundarySvg(v1::GetSweepAnalysisResponse()), "");
  EXPECT_THAT(svg, HasSubstr("aria-label=\"max trainable lr against warm-up steps\""));
  // One line per placement, red for Post-LN and blue for Pre-LN; the median
  // seed's point at each warm-up (Post-LN 0 and 400, Pre-LN 0).
  EXPECT_EQ(Count(svg, "<polyline class=\"boundary-line\""), 2u);
  EXPECT_THAT(svg, HasSubstr("stroke=\"#d55e00\" points=\""));
  EXPECT_THAT(svg, HasSubstr("stroke=\"#0072b2\" points=\""));
  EXPECT_EQ(Count(svg, "<circle class=\"boundary-point\""), 3u);
  // Brackets as error bars: Post-LN's two with a cap at U, Pre-LN's open upwards.
  EXPECT_EQ(Count(svg, "class=\"bracket\""), 3u);
  EXPECT_THAT(
      svg, HasSubstrs({"Post-LN, warm-up 0: max trainable lr 1.78e-03, bracket [1.78e-03, 2.11e-03) (median of 3 seeds",
                       "Pre-LN, warm-up 0: max trainable lr &gt;=1.00e-01",
                       // Log y over the decades the brackets span, warm-ups on x.
                       ">1e-04</text>", ">1e-01</text>", ">400</text>"}));
  // A placement trainable nowhere is a hollow marker at lr_min.
  v1::GetSweepAnalysisResponse nowhere;
  *nowhere.add_boundary() = Line(0, "post", 0, 0, "NOWHERE_TRAINABLE", std::nullopt, 1e-4, 4);
  *nowhere.add_boundary() = Line(1, "pre", 0, 0, "FOUND", 1e-2, 1.2e-2, 8);
  const std::string n = BoundarySvg(nowhere);
  EXPECT_EQ(Count(n, "class=\"boundary-nowhere\""), 1u);
  EXPECT_EQ(Count(n, "<polyline class=\"boundary-line\""), 1u);
  // Variants: the second variant's lines dashed.
  v1::GetSweepAnalysisResponse variants;
  *variants.add_boundary() = Line(0, "post", 0, 0, "FOUND", 1e-3, 1.2e-3, 8, "layers=2");
  *variants.add_boundary() = Line(1, "post", 0, 0, "FOUND", 2e-3, 2.4e-3, 8, "layers=4");
  const std::string v = BoundarySvg(variants);
  EXPECT_EQ(Count(v, "<polyline class=\"boundary-line\""), 2u);
  EXPECT_EQ(Count(v, "stroke-dasharray"), 2u);  // the line and its legend
  EXPECT_THAT(v, HasSubstr(">Post-LN (layers=4)</text>"));
  const std::string section = BoundaryReportSection(Analysis());
  EXPECT_THAT(section, HasSubstr("<h2>Stability boundary: max trainable lr by warm-up</h2>"));
  EXPECT_THAT(section, HasSubstr("max trainable lr by warm-up (boundary search"));
  EXPECT_EQ(BoundaryReportSection(v1::GetSweepAnalysisResponse()), "");
}

}  // namespace
}  // namespace normsweep::client
