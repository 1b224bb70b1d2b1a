// RenderReportHtml from hand-made trials, with the analysis views' figures
// for them (tests/report/views_analysis.h): the cells, divergence and NaN
// handling, escaping, the empty and unfinished cases, the summary's figures,
// any number of schemes and their palette, and WriteReport's errors. The
// newer figures are report_figures_test.cc's.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/report/page.h"
#include "client/report/report.h"
#include "client/report/svg.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/report/page_checks.h"
#include "tests/report/report_fixture.h"
#include "tests/report/views_analysis.h"

namespace normsweep::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::Count;
using testing::ExpectFiniteGeometry;
using testing::ExpectSelfContained;
using testing::HasSubstrs;
using testing::MakeTrial;
using testing::WithAnalysis;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The grid of tests/db/sensitivity_views_test.cc (same figures):
//   pre  (0, 1e-3) 2.25 [2.0, 2.5]     (0, 1e-2) 2.0 [1.75, 2.25]  <- best cell
//        (100,1e-3) 2.5 [2.5, 2.5]     (100,1e-2) 2.25 [2.25, DIVERGED]
//   post (0, 1e-3) -   [DIV, DIV]      (0, 1e-2) -  [DIV, FAILED]
//        (100,1e-3) 2.5 [2.5, NaN]     (100,1e-2) 3.25 [3.0, 3.5]
ReportData Grid() {
  ReportData d;
  d.sweep.set_id(42);
  d.sweep.set_name("grid");
  d.sweep.set_state(v1::SWEEP_COMPLETED);
  using S = v1::TrialState;
  const S ok = v1::TRIAL_SUCCEEDED, div = v1::TRIAL_DIVERGED;
  d.trials = {MakeTrial("pre", 0, 1e-3, 0, ok, 2.0),      MakeTrial("pre", 0, 1e-3, 1, ok, 2.5),
              MakeTrial("pre", 0, 1e-2, 0, ok, 1.75),     MakeTrial("pre", 0, 1e-2, 1, ok, 2.25),
              MakeTrial("pre", 100, 1e-3, 0, ok, 2.5),    MakeTrial("pre", 100, 1e-3, 1, ok, 2.5),
              MakeTrial("pre", 100, 1e-2, 0, ok, 2.25),   MakeTrial("pre", 100, 1e-2, 1, div),
              MakeTrial("post", 0, 1e-3, 0, div),         MakeTrial("post", 0, 1e-3, 1, div),
              MakeTrial("post", 0, 1e-2, 0, div),         MakeTrial("post", 0, 1e-2, 1, S::TRIAL_FAILED),
              MakeTrial("post", 100, 1e-3, 0, ok, 2.5),   MakeTrial("post", 100, 1e-3, 1, ok, kNaN),
              MakeTrial("post", 100, 1e-2, 0, ok, 3.0),   MakeTrial("post", 100, 1e-2, 1, ok, 3.5)};
  return d;
}

TEST(ReportSummaryTest, SameFiguresAsThePlacementSensitivityView) {
  std::vector<PlacementSummary> rows = SummariesFromAnalysis(WithAnalysis(Grid()).analysis);
  ASSERT_EQ(rows.size(), 2u);
  const PlacementSummary& post = rows[0];
  EXPECT_EQ(post.placement, "post");
  EXPECT_EQ(post.trials, 8);
  EXPECT_EQ(post.succeeded, 4);
  EXPECT_EQ(post.diverged, 3);
  EXPECT_EQ(post.failed, 1);
  EXPECT_EQ(post.best_val_loss, 2.5);
  EXPECT_EQ(post.median_val_loss, 3.0);
  EXPECT_EQ(post.grid_cells, 4);
  EXPECT_EQ(post.cells_near_best, 0);
  EXPECT_EQ(post.best_cell_val_loss, 2.0);
  const PlacementSummary& pre = rows[1];
  EXPECT_EQ(pre.succeeded, 7);
  EXPECT_EQ(pre.diverged, 1);
  EXPECT_EQ(pre.best_val_loss, 1.75);
  EXPECT_EQ(pre.median_val_loss, 2.25);
  EXPECT_EQ(pre.cells_near_best, 1);
  // The tolerance edge is inclusive, as in SQL: 25% of 2.0 is exactly 2.5.
  rows = SummariesFromAnalysis(WithAnalysis(Grid(), 0.25).analysis);
  EXPECT_EQ(rows[0].cells_near_best, 1);
  EXPECT_EQ(rows[1].cells_near_best, 4);
  rows = SummariesFromAnalysis(WithAnalysis(Grid(), 0.2499).analysis);
  EXPECT_EQ(rows[0].cells_near_best, 0);
  EXPECT_EQ(rows[1].cells_near_best, 3);
}

TEST(ReportHtmlTest, HeatmapCellsDivergenceAndSummary) {
  const std::string html = RenderReportHtml(WithAnalysis(Grid()));
  EXPECT_THAT(html, HasSubstrs({"<!DOCTYPE html>", "Sweep 42 \u201cgrid\u201d",
                                // Cell means with their spread over seeds.
                                ">2.250</text>",
                                ">\u00b10.354</text>",  // 2.0 and 2.5: std 0.354
                                ">3.250</text>",
                                // A cell with one seed diverged keeps the survivor's loss and says so.
                                "Pre-LN, warm-up 100, lr 1e-02: 2.250 1/2 div",
                                // Every seed diverged: hatched, labelled, no number.
                                "Post-LN, warm-up 0, lr 1e-03: diverged 2/2 seeds",
                                "fill=\"url(#diverged)\" class=\"cell diverged\"", "<pattern id=\"diverged\"",
                                // The NaN seed is left out of its cell (2.5 alone, no std).
                                "Post-LN, warm-up 100, lr 1e-03: 2.500 </title>"}));
  // Only the best cell is within 5%; it is outlined.
  EXPECT_EQ(Count(html, "class=\"cell near\"><title>"), 1u);
  EXPECT_THAT(html, HasSubstrs({"class=\"cell near\"><title>Pre-LN, warm-up 0, lr 1e-02: 2.000",
                                // Axis labels and the colour scale from the best to the worst cell.
                                ">peak learning rate</text>", ">warm-up steps</text>", ">2.000</text>", ">3.250</text>",
                                "<linearGradient id=\"scale-0\""}));
  // The summary table. plateaued and the failure rate are the view's
  // (Post-LN's NaN seed counts as plateaued once the view has the rule);
  // report_failure_test checks them from hand-made rows.
  EXPECT_TRUE(std::regex_search(html, std::regex("<td>Post-LN</td><td>8</td><td>4</td><td>3</td><td>[01]</td>"
                                                 "<td>[^<]+</td><td>0</td><td>1</td><td>0</td><td>2.500</td>"
                                                 "<td>3.000</td><td>0 / 4 \\(0%\\)</td>")));
  EXPECT_TRUE(std::regex_search(html, std::regex("<td>Pre-LN</td><td>8</td><td>7</td><td>1</td><td>0</td>"
                                                 "<td>[^<]+</td><td>0</td><td>0</td><td>0</td><td>1.750</td>"
                                                 "<td>2.250</td><td>1 / 4 \\(25%\\)</td>")));
  // Curves: one per trial with points (16), a cross for each diverged one
  // that reported a finite point (4).
  EXPECT_EQ(Count(html, "<polyline class=\"curve\" fill=\"none\" stroke=\"#"), 16u + 4u);  // and W1/W2 twice
  EXPECT_EQ(Count(html, "class=\"diverged-mark\""), 4u);
  EXPECT_THAT(html, HasSubstr(">colour: peak lr</text>"));
  EXPECT_THAT(html, HasSubstr(">dash: warm-up steps</text>"));
  ExpectFiniteGeometry(html);
  ExpectSelfContained(html);
}

TEST(ReportHtmlTest, GradNormsAreMeanOverSeedsEachSeedOnce) {
  ReportData d;
  d.sweep.set_id(3);
  d.sweep.set_name("depth");
  // Seed 0 ran in two cells (norms x1), seed 1 in one (x2): the mean over
  // seeds is x1.5, not the per-trial mean x4/3.
  d.trials = {MakeTrial("post", 0, 1e-3, 0, v1::TRIAL_SUCCEEDED, 2.0, "layers=2", 2, 1.0),
              MakeTrial("post", 100, 1e-3, 0, v1::TRIAL_SUCCEEDED, 2.0, "layers=2", 2, 1.0),
              MakeTrial("post", 0, 1e-3, 1, v1::TRIAL_SUCCEEDED, 2.0, "layers=2", 2, 2.0),
              MakeTrial("pre", 0, 1e-3, 0, v1::TRIAL_SUCCEEDED, 2.0, "layers=2", 2, 0.5),
              MakeTrial("post", 0, 1e-3, 0, v1::TRIAL_SUCCEEDED, 2.0, "layers=3", 3, 0.5),
              MakeTrial("pre", 0, 1e-3, 0, v1::TRIAL_SUCCEEDED, 2.0, "layers=3", 3, 0.25)};
  // A NaN norm and a later step are left out.
  v1::LayerGradNorm* nan = d.trials[0].mutable_layer_grad_norms(0)->add_norms();
  nan->set_layer(1);
  nan->set_matrix("ffn.fc1");
  nan->set_norm(kNaN);
  v1::LayerGradNorms& later = *d.trials[0].add_layer_grad_norms();
  later.set_step(5);
  later.add_norms()->set_norm(100);
  const std::string html = RenderReportHtml(WithAnalysis(d));
  EXPECT_THAT(html, HasSubstrs({"<title>Post-LN W1 (fc1), layer 0: 1.5000</title>",
                                "<title>Post-LN W2 (fc2), layer 1: 4.5000</title>",
                                ">Post-LN W2 (fc2) (2 seeds)</text>", ">Pre-LN W1 (fc1) (1 seed)</text>",
                                // One section per variant, and the last layer's W2 by depth.
                                "FFN gradient norms at initialization \u2014 layers=2",
                                "FFN gradient norms at initialization \u2014 layers=3",
                                "<tr><td>2</td><td>4.5000</td><td>1.5000</td></tr>",
                                "<tr><td>3</td><td>2.2500</td><td>1.1250</td></tr>"}));
  EXPECT_THAT(html, Not(HasSubstr("100.0000")));
  ExpectFiniteGeometry(html);
}

TEST(ReportHtmlTest, NamesAreEscaped) {
  ReportData d = Grid();
  d.sweep.set_name("<script>alert(\"x\")</script> & 'co'");
  for (auto& t : d.trials) t.mutable_trial()->set_variant("opt=<b>&amp;");
  const std::string html = RenderReportHtml(WithAnalysis(d));
  EXPECT_THAT(html, Not(HasSubstr("<script>")));
  EXPECT_THAT(html, Not(HasSubstr("<b>")));
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;co&#39;"));
  EXPECT_THAT(html, HasSubstr("opt=&lt;b&gt;&amp;amp;"));
  ExpectSelfContained(html);
}

TEST(ReportHtmlTest, EmptySweepSaysSo) {
  ReportData d;
  d.sweep.set_id(9);
  d.sweep.set_name("nothing");
  const std::string html = RenderReportHtml(WithAnalysis(d));
  EXPECT_THAT(html, HasSubstr("This sweep has no trials"));
  EXPECT_THAT(html, HasSubstr("</html>"));
  EXPECT_THAT(html, Not(HasSubstr("<svg xmlns")));
}

TEST(ReportHtmlTest, UnfinishedSweepShowsPendingCells) {
  ReportData d;
  d.sweep.set_id(10);
  d.sweep.set_name("just started");
  d.sweep.set_state(v1::SWEEP_RUNNING);
  d.trials = {MakeTrial("pre", 0, 1e-3, 0, v1::TRIAL_RUNNING), MakeTrial("post", 0, 1e-3, 0, v1::TRIAL_PENDING)};
  for (auto& t : d.trials) {
    t.clear_metrics();
    t.clear_layer_grad_norms();
  }
  const std::string html = RenderReportHtml(WithAnalysis(d));
  EXPECT_THAT(html, HasSubstrs({"No trial has finished yet", ">pending</text>", "no validation points yet",
                                "No step-0 gradient norms were reported",
                                "<td>Post-LN</td><td>1</td><td>0</td><td>0</td><td>0</td><td>&ndash;</td><td>0</td>"
                                "<td>0</td><td>1</td><td>&ndash;</td>"}));
  ExpectFiniteGeometry(html);
}

std::string TempDir() {
  std::string tmpl = ::testing::TempDir() + "report_test_XXXXXX";
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

// Issue 24: any number of placements. The five, one the report does not
// know, and two variants (qk_norm): 12 schemes on one page.
TEST(ReportSchemesTest, OneColourPerPlacementAndAPanelPerScheme) {
  const std::vector<std::string> placements = {"pre", "hybrid", "mix", "deepnorm", "post", "peri"};
  ReportData d;
  d.sweep.set_id(24);
  d.sweep.set_name("schemes");
  d.sweep.set_state(v1::SWEEP_COMPLETED);
  double loss = 2.0;
  for (const char* variant : {"qk_norm=false", "qk_norm=true"}) {
    for (const std::string& p : placements) {
      for (int warmup : {0, 100}) {
        for (double lr : {1e-3, 1e-2}) {
          d.trials.push_back(MakeTrial(p, warmup, lr, 0, v1::TRIAL_SUCCEEDED, loss, variant));
          d.trials.back().mutable_trial()->mutable_result()->set_init_val_loss(5.5);  // l0, for the LR sensitivity
          loss += 0.01;
        }
      }
    }
  }
  const std::string html = RenderReportHtml(WithAnalysis(std::move(d)));
  const std::vector<std::string> titles = {"Post-LN", "Pre-LN", "Peri-LN", "DeepNorm", "Mix-LN", "hybrid"};
  for (const std::string& t : titles) {
    // A heatmap, a loss-against-lr panel and a curves panel per scheme.
    EXPECT_EQ(Count(html, absl::StrCat("aria-label=\"", t, ": final validation loss heatmap\"")), 2u) << t;
    EXPECT_EQ(Count(html, absl::StrCat("aria-label=\"", t, ": final validation loss against peak lr\"")), 2u) << t;
    EXPECT_EQ(Count(html, absl::StrCat("aria-label=\"", t, ": validation loss curves\"")), 2u) << t;
  }
  // The LR-sensitivity chart of each variant: a line per placement in its own
  // colour, and every placement in the legend.
  std::set<std::string> colours;
  for (const std::string& p : placements) {
    const std::string colour = PlacementColour(p);
    colours.insert(colour);
    EXPECT_EQ(Count(html, absl::StrCat("<polyline class=\"curve lrs-line\" fill=\"none\" stroke=\"", colour, "\"")), 2u)
        << p;
    EXPECT_EQ(Count(html, absl::StrCat("stroke=\"", colour, "\" class=\"curve\"/><text")), 2u * 2)  // LRS, grad norms W1 W2
        << p;
  }
  EXPECT_EQ(colours.size(), placements.size());
  // The placements in the report's order in every figure: post, pre, peri, deepnorm, mix, then others.
  size_t last = 0;
  for (const std::string& t : titles) {
    const size_t at = html.find(absl::StrCat("aria-label=\"", t, ": final validation loss heatmap\""));
    EXPECT_GT(at, last) << t;
    last = at;
  }
  ExpectFiniteGeometry(html);
}

TEST(ReportSchemesTest, PaletteIsFixedForTheFivePlacementsAndDeterministicForOthers) {
  const std::vector<std::string> five = {"post", "pre", "peri", "deepnorm", "mix"};
  std::set<std::string> colours;
  for (const std::string& p : five) colours.insert(PlacementColour(p));
  EXPECT_EQ(colours, (std::set<std::string>{"#d55e00", "#0072b2", "#009e73", "#cc79a7", "#e69f00"}));  // Okabe-Ito
  EXPECT_FALSE(colours.contains("#d62728"));  // the divergence marks' red
  EXPECT_EQ(PlacementColour("hybrid"), PlacementColour("hybrid"));
  EXPECT_FALSE(colours.contains(PlacementColour("hybrid")));
  EXPECT_EQ(PlacementTitle("peri"), "Peri-LN");
  EXPECT_EQ(PlacementTitle("deepnorm", "qk_norm=true"), "DeepNorm (qk_norm=true)");
  EXPECT_EQ(PlacementTitle("mix"), "Mix-LN");
  EXPECT_EQ(PlacementTitle("hybrid"), "hybrid");
  EXPECT_EQ(PlacementOrder({"zeta", "mix", "pre", "alpha", "post", "peri", "deepnorm"}),
            (std::vector<std::string>{"post", "pre", "peri", "deepnorm", "mix", "alpha", "zeta"}));
}

TEST(WriteReportTest, CreatesTheDirectoryAndReplacesTheFile) {
  const std::string dir = TempDir() + "/a/b";
  ASSERT_TRUE(WriteReport(dir, "one").ok());
  ASSERT_TRUE(WriteReport(dir, "two").ok());
  std::ifstream in(dir + "/index.html");
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "two");
  EXPECT_FALSE(std::filesystem::exists(dir + "/index.html.tmp"));
}

TEST(WriteReportTest, UnwritableDirectoryIsAnErrorNamingIt) {
  const std::string base = TempDir();
  const std::string file = base + "/plain-file";
  std::ofstream(file) << "x";
  absl::Status s = WriteReport(file + "/sub", "x");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(file + "/sub"));
  s = WriteReport(file, "x");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(file));
  if (geteuid() != 0) {  // root writes anywhere
    const std::string ro = base + "/read-only";
    ASSERT_EQ(mkdir(ro.c_str(), 0555), 0);
    s = WriteReport(ro, "x");
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.message()), HasSubstr("cannot write " + ro + "/index.html"));
  }
}

}  // namespace
}  // namespace normsweep::client
