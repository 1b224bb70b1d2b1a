// RenderReportHtml from hand-made trials, with the analysis views' figures
// for them (stored in a throwaway PostgreSQL, tests/common/views_fixture.h):
// the cells, divergence and NaN handling, escaping, the empty and unfinished
// cases, the summary's figures, and WriteReport's errors.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/report.h"
#include "tests/common/views_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace normsweep::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A trial with validation points at steps 50, 100, 150 ending at `loss`, and
// step-0 norms W1 = scale * (l + 1), W2 = 1.5 * scale * (l + 1) per layer.
v1::GetTrialResponse MakeTrial(const std::string& placement, int warmup, double lr, int seed, v1::TrialState state,
                               std::optional<double> loss = std::nullopt, const std::string& variant = "",
                               int layers = 2, double norm_scale = 1.0) {
  static int next_id = 1;
  v1::GetTrialResponse r;
  v1::Trial& t = *r.mutable_trial();
  t.set_id(next_id);
  t.set_index(next_id++);
  t.set_variant(variant);
  t.set_state(state);
  v1::TrainConfig& c = *t.mutable_config();
  c.set_placement(placement);
  c.set_warmup_steps(warmup);
  c.set_lr(lr);
  c.set_seed(seed);
  c.set_layers(layers);
  if (loss) t.mutable_result()->set_final_val_loss(*loss);
  for (int step : {50, 100, 150}) {
    v1::MetricPoint& m = *r.add_metrics();
    m.set_step(step);
    m.set_train_loss(3.0);
    if (state == v1::TRIAL_DIVERGED && step == 150) {
      m.set_val_loss(kNaN);
    } else {
      m.set_val_loss(loss && std::isfinite(*loss) ? *loss + (150 - step) / 100.0 : 4.0);
    }
  }
  v1::LayerGradNorms& g = *r.add_layer_grad_norms();
  g.set_step(0);
  for (int l = 0; l < layers; ++l) {
    v1::LayerGradNorm* n = g.add_norms();
    n->set_layer(l);
    n->set_matrix("ffn.fc1");
    n->set_norm(norm_scale * (l + 1));
    n = g.add_norms();
    n->set_layer(l);
    n->set_matrix("ffn.fc2");
    n->set_norm(norm_scale * (l + 1) * 1.5);
  }
  return r;
}

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

std::vector<v1::Trial> Plain(const ReportData& d) {
  std::vector<v1::Trial> out;
  for (const auto& t : d.trials) out.push_back(t.trial());
  return out;
}

// The views' figures for d's trials (a throwaway PostgreSQL), as
// FetchReportData gets them from the scheduler.
ReportData WithAnalysis(ReportData d, double tolerance = kNearBestTolerance) {
  auto analysis = testing::AnalysisFromViews(Plain(d), tolerance);
  EXPECT_TRUE(analysis.ok()) << analysis.status();
  if (analysis.ok()) d.analysis = *std::move(analysis);
  return d;
}

// Every numeric SVG attribute of the page, and every polyline point, is a
// finite number: NaN never reaches the drawing.
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

// Nothing on the page is fetched: no script, no stylesheet or image link.
void ExpectSelfContained(const std::string& html) {
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("<link")));
  EXPECT_THAT(html, Not(HasSubstr("src=")));
  EXPECT_THAT(html, Not(HasSubstr("@import")));
  std::string without_ns = std::regex_replace(html, std::regex("xmlns=\"http://www.w3.org/2000/svg\""), "");
  EXPECT_THAT(without_ns, Not(HasSubstr("http:")));
  EXPECT_THAT(without_ns, Not(HasSubstr("https:")));
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
  EXPECT_THAT(html, HasSubstr("<!DOCTYPE html>"));
  EXPECT_THAT(html, HasSubstr("Sweep 42 \u201cgrid\u201d"));
  // Cell means with their spread over seeds.
  EXPECT_THAT(html, HasSubstr(">2.250</text>"));
  EXPECT_THAT(html, HasSubstr(">\u00b10.354</text>"));  // 2.0 and 2.5: std 0.354
  EXPECT_THAT(html, HasSubstr(">3.250</text>"));
  // A cell with one seed diverged keeps the survivor's loss and says so.
  EXPECT_THAT(html, HasSubstr("Pre-LN, warm-up 100, lr 1e-02: 2.250 1/2 div"));
  // Every seed diverged: hatched, labelled, no number.
  EXPECT_THAT(html, HasSubstr("Post-LN, warm-up 0, lr 1e-03: diverged 2/2 seeds"));
  EXPECT_THAT(html, HasSubstr("fill=\"url(#diverged)\" class=\"cell diverged\""));
  EXPECT_THAT(html, HasSubstr("<pattern id=\"diverged\""));
  // The NaN seed is left out of its cell (2.5 alone, no std).
  EXPECT_THAT(html, HasSubstr("Post-LN, warm-up 100, lr 1e-03: 2.500 </title>"));
  // Only the best cell is within 5%; it is outlined.
  size_t near = 0;
  for (size_t p = html.find("class=\"cell near\"><title>"); p != std::string::npos;
       p = html.find("class=\"cell near\"><title>", p + 1)) {
    ++near;
  }
  EXPECT_EQ(near, 1u);
  EXPECT_THAT(html, HasSubstr("class=\"cell near\"><title>Pre-LN, warm-up 0, lr 1e-02: 2.000"));
  // Axis labels and the colour scale from the best to the worst cell.
  EXPECT_THAT(html, HasSubstr(">peak learning rate</text>"));
  EXPECT_THAT(html, HasSubstr(">warm-up steps</text>"));
  EXPECT_THAT(html, HasSubstr(">2.000</text>"));
  EXPECT_THAT(html, HasSubstr(">3.250</text>"));
  EXPECT_THAT(html, HasSubstr("<linearGradient id=\"scale-0\""));
  // The summary table.
  EXPECT_THAT(html, HasSubstr("<td>Post-LN</td><td>8</td><td>4</td><td>3</td><td>1</td><td>0</td><td>2.500</td>"
                              "<td>3.000</td><td>0 / 4 (0%)</td>"));
  EXPECT_THAT(html, HasSubstr("<td>Pre-LN</td><td>8</td><td>7</td><td>1</td><td>0</td><td>0</td><td>1.750</td>"
                              "<td>2.250</td><td>1 / 4 (25%)</td>"));
  // Curves: one per trial with points (16), a cross for each diverged one
  // that reported a finite point (4).
  size_t curves = 0;
  for (size_t p = html.find("<polyline class=\"curve\" fill=\"none\" stroke=\"#"); p != std::string::npos;
       p = html.find("<polyline class=\"curve\" fill=\"none\" stroke=\"#", p + 1)) {
    ++curves;
  }
  EXPECT_EQ(curves, 16u + 4u);  // 16 trials, and W1/W2 for two placements
  size_t crosses = 0;
  for (size_t p = html.find("class=\"diverged-mark\""); p != std::string::npos;
       p = html.find("class=\"diverged-mark\"", p + 1)) {
    ++crosses;
  }
  EXPECT_EQ(crosses, 4u);
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
  EXPECT_THAT(html, HasSubstr("<title>Post-LN W1 (fc1), layer 0: 1.5000</title>"));
  EXPECT_THAT(html, HasSubstr("<title>Post-LN W2 (fc2), layer 1: 4.5000</title>"));
  EXPECT_THAT(html, HasSubstr(">Post-LN W2 (fc2) (2 seeds)</text>"));
  EXPECT_THAT(html, HasSubstr(">Pre-LN W1 (fc1) (1 seed)</text>"));
  // One section per variant, and the last layer's W2 by depth.
  EXPECT_THAT(html, HasSubstr("FFN gradient norms at initialization \u2014 layers=2"));
  EXPECT_THAT(html, HasSubstr("FFN gradient norms at initialization \u2014 layers=3"));
  EXPECT_THAT(html, HasSubstr("<tr><td>2</td><td>4.5000</td><td>1.5000</td></tr>"));
  EXPECT_THAT(html, HasSubstr("<tr><td>3</td><td>2.2500</td><td>1.1250</td></tr>"));
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
  EXPECT_THAT(html, HasSubstr("No trial has finished yet"));
  EXPECT_THAT(html, HasSubstr(">pending</text>"));
  EXPECT_THAT(html, HasSubstr("no validation points yet"));
  EXPECT_THAT(html, HasSubstr("No step-0 gradient norms were reported"));
  EXPECT_THAT(html, HasSubstr("<td>Post-LN</td><td>1</td><td>0</td><td>0</td><td>0</td><td>1</td><td>&ndash;</td>"));
  ExpectFiniteGeometry(html);
}

std::string TempDir() {
  std::string tmpl = ::testing::TempDir() + "report_test_XXXXXX";
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  return tmpl;
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
