// The report's newer figures (issue 16 and after) from hand-made analysis
// rows (tests/report/report_fixture.h's LiteratureFigures) and from the real
// views: final loss against lr, LR sensitivity with l*, the variance shares,
// the instability diagnostics, and what each says when its rows are missing.
#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/report/page.h"
#include "client/report/report.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/report/page_checks.h"
#include "tests/report/report_fixture.h"
#include "tests/report/views_analysis.h"

namespace normsweep::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::Cell;
using testing::Count;
using testing::ExpectFiniteGeometry;
using testing::ExpectSelfContained;
using testing::Figures;
using testing::HasSubstrs;
using testing::LiteratureFigures;
using testing::Lrs;
using testing::MakeTrial;
using testing::Section;
using testing::WithAnalysis;

struct Mark {
  double x = 0, y = 0;
};

// The title -> position of each element of the page matching re, whose
// groups are 1: x, 2: y, 3: title.
std::map<std::string, Mark> Marks(const std::string& html, const std::regex& re) {
  std::map<std::string, Mark> out;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), re); it != std::sregex_iterator(); ++it) {
    Mark m;
    EXPECT_TRUE(absl::SimpleAtod((*it)[1].str(), &m.x) && absl::SimpleAtod((*it)[2].str(), &m.y)) << (*it)[0].str();
    EXPECT_TRUE(out.emplace((*it)[3].str(), m).second) << "two marks titled " << (*it)[3].str();
  }
  return out;
}
std::map<std::string, Mark> Circles(const std::string& html, const std::string& cls) {
  return Marks(html, std::regex(absl::StrCat("<circle class=\"", cls,
                                             R"re(" r="[0-9.]+" cx="([^"]+)" cy="([^"]+)" fill="[^"]+"><title>([^<]*)</title>)re")));
}
// Crosses are drawn from (x - r, y - r): the centre is 5 further.
std::map<std::string, Mark> Crosses(const std::string& html, const std::string& cls) {
  std::map<std::string, Mark> out =
      Marks(html, std::regex(absl::StrCat("<path class=\"", cls, R"re(" d="M([^ ]+) ([^ ]+) [^"]*"><title>([^<]*)</title>)re")));
  for (auto& [title, m] : out) {
    m.x += 5;
    m.y += 5;
  }
  return out;
}

// The SVG whose aria-label is `label`, from its <svg to its </svg>.
std::string Svg(const std::string& html, const std::string& label) {
  const size_t at = html.find(absl::StrCat("aria-label=\"", label, "\""));
  EXPECT_NE(at, std::string::npos) << label;
  if (at == std::string::npos) return "";
  const size_t start = html.rfind("<svg", at), end = html.find("</svg>", at);
  return html.substr(start, end - start);
}

// Loss-against-lr panels (one y scale) have the y range of their data, not
// l0's (issue 37: the data filled the bottom 15% of the plot): every y tick
// below l0, and the mean-loss points of the panels spanning more than half
// the plot's height.
void ExpectYRangeOfTheData(const std::string& html, const std::vector<std::string>& labels, double l0) {
  double lo = INFINITY, hi = -INFINITY, top = 0, height = 0;
  for (const std::string& label : labels) {
    const std::string svg = Svg(html, label);
    std::smatch plot;
    ASSERT_TRUE(std::regex_search(svg, plot, std::regex(R"re(<rect x="[^"]+" y="([^"]+)" width="[^"]+" height="([^"]+)" class="plot"/>)re")))
        << label;
    top = std::stod(plot[1].str());
    height = std::stod(plot[2].str());
    static const std::regex ytick(R"re(<text x="[^"]+" y="[^"]+" class="tick" text-anchor="end">([^<]+)</text>)re");
    int ticks = 0;
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), ytick); it != std::sregex_iterator(); ++it, ++ticks) {
      EXPECT_LT(std::stod((*it)[1].str()), l0) << label << ": a y tick at l0 or above";
    }
    EXPECT_GE(ticks, 3) << label;
    for (const auto& [title, m] : Circles(svg, "loss-point")) {
      EXPECT_GT(m.y, top) << title;
      lo = std::min(lo, m.y);
      hi = std::max(hi, m.y);
    }
  }
  ASSERT_TRUE(std::isfinite(lo)) << "no points";
  EXPECT_GT(hi - lo, 0.5 * height) << "the points fill " << (hi - lo) / height << " of the plot";
}

TEST(ReportFiguresTest, LossAgainstLogLrPanelsLinesAndDivergedMarks) {
  const Figures fig = LiteratureFigures();
  const std::string html = RenderReportHtml(fig.data);
  const std::string sec = Section(html, "Final validation loss against peak lr");
  // A panel per placement, a line per warm-up in each (the diverged cells
  // at l0 are on the line: one segment each).
  EXPECT_THAT(sec, HasSubstr("aria-label=\"Post-LN: final validation loss against peak lr\""));
  EXPECT_THAT(sec, HasSubstr("aria-label=\"Pre-LN: final validation loss against peak lr\""));
  EXPECT_EQ(Count(sec, "<polyline class=\"curve loss-lr\""), 4u);
  for (const char* line : {"Post-LN, warm-up 0", "Post-LN, warm-up 100", "Pre-LN, warm-up 0", "Pre-LN, warm-up 100"}) {
    EXPECT_EQ(Count(sec, absl::StrCat("\"><title>", line, "</title></polyline>")), 1u) << line;
  }
  EXPECT_THAT(sec, HasSubstr(">peak learning rate (log scale)</text>"));
  EXPECT_THAT(sec, HasSubstr(">final validation loss</text>"));
  const std::map<std::string, Mark> points = Circles(sec, "loss-point");
  EXPECT_EQ(points.size(), 10u);  // 12 cells, 2 with no usable seed
  const Mark a = points.at("Post-LN, warm-up 100, lr 1e-04: 2.960 (2 seeds)");
  const Mark b = points.at("Post-LN, warm-up 100, lr 1e-03: 2.860 (2 seeds)");
  // A seed diverged: the mean of the other, and a ring.
  const Mark partial = points.at("Post-LN, warm-up 0, lr 1e-03: 2.900 (1 seed; 1/2 diverged or non-finite, left out)");
  EXPECT_EQ(Count(sec, "<circle class=\"partial-mark\" r=\"6.5\""), 3u + 1u);  // 3 cells, one legend entry
  // Lower loss is lower down; the lrs are a decade apart: equal steps in x.
  EXPECT_GT(b.y, a.y);
  EXPECT_GT(b.y, partial.y);
  EXPECT_EQ(partial.x, b.x);
  // Every seed diverged: l0 (5.8) is far above the data (2.05 to 3.01), so
  // the top edge stands for it: the cross there, on the dashed l0 line,
  // labelled with l0 and an arrow; the line breaks at the cross.
  const std::map<std::string, Mark> crosses = Crosses(sec, "diverged-mark diverged-point");
  ASSERT_EQ(crosses.size(), 2u);
  const Mark cross = crosses.at("Post-LN, warm-up 100, lr 1e-02: no usable seed (2/2 diverged or non-finite), l0 "
                                "5.800, above the data: drawn at the top");
  EXPECT_NEAR(cross.x - b.x, b.x - a.x, 0.11);
  EXPECT_EQ(cross.y, 36.0);  // the panel's top (30) + 6
  std::smatch l0;
  ASSERT_TRUE(std::regex_search(sec, l0, std::regex(R"re(<line class="l0-line" x1="[^"]+" x2="[^"]+" y1="([^"]+)" y2="[^"]+"><title>Post-LN: l0 \(loss at initialisation\) 5.800, above the data: the top edge stands for it</title>)re")));
  EXPECT_EQ(std::stod(l0[1].str()), cross.y);
  EXPECT_THAT(sec, HasSubstrs({">l0 5.800 \u2191</text>", ">l0 5.700 \u2191</text>",
                               "<title>Pre-LN: l0 (loss at initialisation) 5.700, above the data: the top edge stands "
                               "for it</title>"}));
  // The y range is the data's: no tick reaches l0, and the points span
  // most of the plot's height.
  ExpectYRangeOfTheData(
      sec, {"Post-LN: final validation loss against peak lr", "Pre-LN: final validation loss against peak lr"}, 5.7);
  // The lrs label the log axis; the legend names warm-ups and markers.
  for (const char* tick : {">1e-04</text>", ">1e-03</text>", ">1e-02</text>"}) EXPECT_EQ(Count(sec, tick), 2u) << tick;
  EXPECT_THAT(sec, HasSubstrs({">line: warm-up steps</text>", ">every seed diverged: at the top</text>",
                               ">some seeds diverged: mean of the rest</text>", ">l0: loss at initialisation</text>"}));
  EXPECT_THAT(sec, Not(HasSubstr("drawn at l0 5.")));
  ExpectFiniteGeometry(html);
  ExpectSelfContained(html);
}

TEST(ReportFiguresTest, LrSensitivityLinePerPlacementWithLStar) {
  const Figures fig = LiteratureFigures();
  const std::string html = RenderReportHtml(fig.data);
  const std::string sec = Section(html, "LR sensitivity by warm-up");
  EXPECT_EQ(Count(sec, "<polyline class=\"curve lrs-line\""), 2u);
  EXPECT_THAT(sec, HasSubstr("stroke=\"#d55e00\" points=\""));  // Post-LN's colour, as elsewhere
  EXPECT_THAT(sec, HasSubstr("stroke=\"#0072b2\" points=\""));
  const std::map<std::string, Mark> pts = Circles(sec, "lrs-point");
  ASSERT_EQ(pts.size(), 4u);
  const Mark post0 = pts.at("Post-LN, warm-up 0: LR sensitivity 1.200; l* 2.950 at lr 1e-03; l0 5.800; 3 lrs, 3 seeds at l0");
  const Mark post100 = pts.at("Post-LN, warm-up 100: LR sensitivity 1.000; l* 2.860 at lr 1e-03; l0 5.800; 3 lrs, 2 seeds at l0");
  const Mark pre0 = pts.at("Pre-LN, warm-up 0: LR sensitivity 0.400; l* 2.110 at lr 1e-03; l0 5.700; 3 lrs, 1 seeds at l0");
  const Mark pre100 = pts.at("Pre-LN, warm-up 100: LR sensitivity 0.300; l* 2.160 at lr 1e-04; l0 5.700; 3 lrs, 1 seeds at l0");
  // y from 0 (the bottom): heights proportional to the figures.
  EXPECT_EQ(post0.x, pre0.x);
  EXPECT_EQ(post100.x, pre100.x);
  EXPECT_GT(post100.x, post0.x);
  std::smatch base;
  ASSERT_TRUE(std::regex_search(sec, base, std::regex(R"re(<rect x="[^"]+" y="([^"]+)" width="[^"]+" height="([^"]+)" class="plot"/>)re")));
  const double bottom = std::stod(base[1].str()) + std::stod(base[2].str());
  EXPECT_NEAR((bottom - post0.y) / (bottom - pre0.y), 1.2 / 0.4, 0.02);
  EXPECT_NEAR((bottom - post100.y) / (bottom - pre100.y), 1.0 / 0.3, 0.03);
  // l* is written beside each point, never the figure alone.
  for (const char* label : {">l* 2.950</text>", ">l* 2.860</text>", ">l* 2.110</text>", ">l* 2.160</text>"}) {
    EXPECT_EQ(Count(sec, label), 1u) << label;
  }
  EXPECT_THAT(sec,
              HasSubstrs({">warm-up steps (the sweep&#39;s values)</text>",
                          // The rows as tables: the lines and the summary.
                          "<tr><td>Post-LN</td><td>0</td><td>3</td><td>0</td><td>3</td><td>1e-03</td><td>2.950</td>"
                          "<td>5.800</td><td>1.200</td></tr>",
                          "<tr><td>Post-LN</td><td>2</td><td>1.100</td><td>1.000 (100)</td><td>1.200</td>"
                          "<td>2.860</td></tr>"}));
  ExpectFiniteGeometry(html);
}

TEST(ReportFiguresTest, VarianceSharesAsStackedBarsAndTheNoteWhenUnset) {
  const std::string html = RenderReportHtml(LiteratureFigures().data);
  const std::string sec = Section(html, "Variance of final validation loss explained");
  std::map<std::string, double> widths;
  static const std::regex bar(R"re(<rect x="[^"]+" y="[^"]+" width="([^"]+)" height="22" fill="[^"]+" class="bar share share-(\w+)"><title>Post-LN: [^<]*</title>)re");
  for (auto it = std::sregex_iterator(sec.begin(), sec.end(), bar); it != std::sregex_iterator(); ++it) {
    widths[(*it)[2].str()] = std::stod((*it)[1].str());
  }
  ASSERT_EQ(widths.size(), 4u);
  const double total = widths["warmup"] + widths["lr"] + widths["interaction"] + widths["seed"];
  EXPECT_NEAR(widths["lr"] / total, 0.6, 1e-3);
  EXPECT_NEAR(widths["warmup"] / total, 0.1, 1e-3);
  EXPECT_NEAR(widths["interaction"] / total, 0.25, 1e-3);
  EXPECT_THAT(sec, HasSubstrs({"<title>Post-LN: peak lr 60.0%</title>", ">60%</text>",
                               ">variance 1.5; 2 warm-ups \u00d7 3 lrs, 12 trials</text>",
                               // Pre-LN's shares are unset: the view's note, escaped, and no bar.
                               ">unset: a cell with &lt;one seed&gt; &amp; no spread</text>"}));
  EXPECT_EQ(Count(sec, "<title>Pre-LN: "), 0u);
  EXPECT_EQ(Count(sec, "class=\"bar shares-unset\""), 1u);
}

TEST(ReportFiguresTest, DiagnosticsOfTheBestLrAndTheFirstDivergedTrial) {
  const Figures fig = LiteratureFigures();
  const std::string html = RenderReportHtml(fig.data);
  const std::string sec = Section(html, "Instability diagnostics");
  // The first failure by the rule above the best lr (1e-3): Post-LN at 1e-2,
  // both warm-ups at step 60, the lowest id (not its seed that diverged at
  // 1e-3, the best's lr); Pre-LN at 1e-2, the earlier diverged step.
  EXPECT_THAT(
      sec,
      HasSubstrs(
          {absl::StrCat(">Post-LN, first failure (diverged after step 60): trial ", fig.post_first_failure, "</text>"),
           absl::StrCat(">Pre-LN, first failure (diverged after step 20): trial ", fig.pre_first_failure, "</text>"),
           // Best: a trial of the best cell (by the view's mean), its lowest seed.
           absl::StrCat(">Post-LN, best lr: trial ", fig.post_best, "</text>"),
           absl::StrCat(">Pre-LN, best lr: trial ", fig.pre_best, "</text>"),
           // The worst layer (and matrix) of each trial, by its largest value.
           ">warm-up 100, lr 1e-03, seed 0; logit layer 1, update layer 0 fc2</text>",
           ">warm-up 0, lr 1e-02, seed 0; logit layer 0, update layer 0 fc2</text>",
           // Three charts; two lines per placement in each; the diverged ones dashed
           // and crossed where they end.
           "aria-label=\"max attention logit, worst layer\"", "aria-label=\"output log Z\"",
           "aria-label=\"largest update / weight RMS ratio\""}));
  EXPECT_EQ(Count(sec, "<polyline class=\"curve diag\""), 12u);
  EXPECT_EQ(Count(sec, "<polyline class=\"curve diag\" fill=\"none\" stroke=\"#d55e00\" stroke-dasharray=\"7 4\""), 3u);
  EXPECT_EQ(Count(sec, "class=\"diverged-mark diag-end\""), 6u);
  EXPECT_THAT(sec, HasSubstrs({
                       absl::StrCat("<title>Post-LN, first failure (diverged after step 60): trial ",
                                    fig.post_first_failure, ", layer 0</title></polyline>"),
                       // The blow-up (5 to 500) is drawn on a log scale; log Z on a linear one.
                       ">max q\u00b7k/\u221ad_head (log scale)</text>", ">mean log-sum-exp of the logits</text>",
                       ">100</text>"  // a decade tick
                   }));
  // Three points a line (steps 0, 50, 100) for logits; the update ratios
  // have none at step 0.
  static const std::regex line(R"re(<polyline class="curve diag"[^>]*points="([^"]*)"><title>([^<]*)</title>)re");
  int logit_lines = 0;
  for (auto it = std::sregex_iterator(sec.begin(), sec.end(), line); it != std::sregex_iterator(); ++it) {
    const size_t n = std::vector<std::string>(absl::StrSplit((*it)[1].str(), ' ', absl::SkipEmpty())).size();
    const std::string title = (*it)[2].str();
    if (title.find(" fc2") != std::string::npos || title.find(" qkv") != std::string::npos) {
      EXPECT_EQ(n, 2u) << title;
    } else if (title.find("layer") != std::string::npos) {
      EXPECT_EQ(n, 3u) << title;
      ++logit_lines;
    }
  }
  EXPECT_EQ(logit_lines, 4);
  // The other trials' diagnostics are not drawn.
  EXPECT_THAT(html, Not(HasSubstr("777")));
  ExpectFiniteGeometry(html);
  ExpectSelfContained(html);
}

TEST(ReportFiguresTest, MissingRowsSayWhatIsMissing) {
  Figures fig = LiteratureFigures();
  ReportData d = fig.data;
  d.analysis.clear_lr_sensitivity();
  d.analysis.clear_lr_sensitivity_summary();
  d.analysis.clear_importance();
  for (v1::GetTrialResponse& t : d.trials) {
    t.clear_diagnostics();
    for (v1::MetricPoint& m : *t.mutable_metrics()) m.clear_output_log_z();
  }
  const std::string html = RenderReportHtml(d);
  // Without l0: no l0 line, the all-diverged cells at the top edge.
  const std::string loss = Section(html, "Final validation loss against peak lr");
  EXPECT_THAT(loss, Not(HasSubstr("<line class=\"l0-line\" x1=\"58")));
  EXPECT_THAT(loss, HasSubstr(">l0: not reported</text>"));
  EXPECT_THAT(loss, HasSubstr("No loss at initialisation (l0) was reported"));
  const std::map<std::string, Mark> crosses = Crosses(loss, "diverged-mark diverged-point");
  ASSERT_EQ(crosses.size(), 2u);
  for (const auto& [title, m] : crosses) {
    EXPECT_THAT(title, HasSubstr("drawn at the top: no l0"));
    EXPECT_EQ(m.y, 36.0);  // the panel's top (30) + 6
  }
  // A cross off the line breaks it: Post-LN's lines end before 1e-2.
  EXPECT_EQ(Count(loss, "<polyline class=\"curve loss-lr\""), 4u);
  EXPECT_THAT(Section(html, "LR sensitivity by warm-up"), HasSubstr("the lr_sensitivity view has no line for it"));
  EXPECT_THAT(Section(html, "Variance of final validation loss explained"),
              HasSubstr("the grid_importance view has no row for it"));
  EXPECT_THAT(Section(html, "Instability diagnostics"), HasSubstr("reported no instability diagnostics"));
  ExpectFiniteGeometry(html);

  // Lines whose figures are pending: the table says so, no chart.
  d = fig.data;
  for (v1::LrSensitivity& r : *d.analysis.mutable_lr_sensitivity()) {
    r.clear_lr_sensitivity();
    r.set_lrs_pending(2);
  }
  const std::string pending = Section(RenderReportHtml(d), "LR sensitivity by warm-up");
  EXPECT_THAT(pending, HasSubstr("No line has an LR sensitivity yet"));
  EXPECT_THAT(pending, Not(HasSubstr("<polyline")));
  EXPECT_THAT(pending, HasSubstr("<td>2</td><td>3</td><td>1e-03</td><td>2.950</td><td>5.800</td><td>&ndash;</td></tr>"));

  // No analysis at all (a scheduler before these views) and no trial that
  // failed to train.
  d = fig.data;
  d.analysis.Clear();
  for (v1::GetTrialResponse& t : d.trials) {
    if (t.trial().state() == v1::TRIAL_DIVERGED) t.mutable_trial()->set_state(v1::TRIAL_FAILED);
  }
  const std::string bare = RenderReportHtml(d);
  EXPECT_THAT(bare, HasSubstr("No grid cell has a final loss or a diverged seed yet"));
  const std::string diag = Section(bare, "Instability diagnostics");
  EXPECT_THAT(diag, HasSubstr(">Post-LN: no trial failed to train</text>"));
  // Without cells the best trial is the one with the lowest final loss.
  EXPECT_THAT(diag, HasSubstr(absl::StrCat(">Post-LN, best lr: trial ", fig.post_best, "</text>")));
  ExpectFiniteGeometry(bare);

  // One lr and one warm-up only: no zero-width axis.
  d = ReportData();
  d.sweep.set_id(8);
  d.trials = {MakeTrial("pre", 0, 1e-3, 0, v1::TRIAL_SUCCEEDED, 2.0)};
  *d.analysis.add_cells() = Cell("pre", 0, 1e-3, 1, 0, 2.0, 1);
  *d.analysis.add_lr_sensitivity() = Lrs("pre", 0, 1, 0, 1e-3, 2.0, 5.5, 0.0);
  const std::string one = RenderReportHtml(d);
  EXPECT_EQ(Count(Section(one, "Final validation loss against peak lr"), "<circle class=\"loss-point\""), 1u);
  EXPECT_EQ(Count(Section(one, "LR sensitivity by warm-up"), "<circle class=\"lrs-point\""), 1u);
  ExpectFiniteGeometry(one);
}

// The same figures from the real views (a throwaway PostgreSQL): the trials
// of LiteratureFigures with their l0 (Post-LN 5.8, Pre-LN 5.7), the rows
// from lr_sensitivity, lr_sensitivity_summary and grid_importance.
TEST(ReportFiguresTest, FromTheViews) {
  Figures fig = LiteratureFigures();
  for (v1::GetTrialResponse& t : fig.data.trials) {
    t.mutable_trial()->mutable_result()->set_init_val_loss(t.trial().config().placement() == "post" ? 5.8 : 5.7);
  }
  const std::string html = RenderReportHtml(WithAnalysis(fig.data));
  // By hand, Post-LN without warm-up: l(1e-4) = (3.00 + 3.02) / 2 = 3.01 = l*,
  // l(1e-3) = (2.90 + l0) / 2 = 4.35, l(1e-2) = l0: LRS = (0 + 1.34 + 2.79) / 3.
  EXPECT_THAT(html, HasSubstrs({"<title>Post-LN, warm-up 0: LR sensitivity 1.377; l* 3.010 at lr 1e-04; l0 5.800; "
                                "3 lrs, 3 seeds at l0</title>",
                                // With warm-up: 2.96, 2.86 = l*, l0: (0.1 + 0 + 2.94) / 3.
                                "<title>Post-LN, warm-up 100: LR sensitivity 1.013; l* 2.860 at lr 1e-03; l0 5.800; "
                                "3 lrs, 2 seeds at l0</title>",
                                "<td>Post-LN</td><td>2</td><td>1.195</td><td>1.013 (100)</td><td>1.377</td>"
                                "<td>2.860</td></tr>"}));
  // The loss figure: the cells where every seed diverged at the views' l0,
  // at the top edge (l0 is above the data).
  const std::string loss = Section(html, "Final validation loss against peak lr");
  EXPECT_THAT(loss, HasSubstr("<title>Post-LN: l0 (loss at initialisation) 5.800, above the data: the top edge "
                              "stands for it</title>"));
  EXPECT_EQ(Crosses(loss, "diverged-mark diverged-point").size(), 2u);
  EXPECT_THAT(loss, HasSubstr("<title>Post-LN, warm-up 0, lr 1e-03: 2.900 (1 seed; 1/2 diverged or non-finite, left "
                              "out)</title>"));
  // Shares for both placements (diverged seeds at l0: a full grid), a bar
  // each, its four parts filling it.
  const std::string shares = Section(html, "Variance of final validation loss explained");
  for (const char* p : {"Post-LN", "Pre-LN"}) {
    double width = 0;
    int parts = 0;
    const std::regex bar(absl::StrCat(R"re(width="([^"]+)" height="22" fill="[^"]+" class="bar share share-\w+"><title>)re", p));
    for (auto it = std::sregex_iterator(shares.begin(), shares.end(), bar); it != std::sregex_iterator(); ++it) {
      width += std::stod((*it)[1].str());
      ++parts;
    }
    EXPECT_EQ(parts, 4) << p;
    EXPECT_NEAR(width, 380, 0.3) << p;
  }
  // Diagnostics: the views' best cell picks the same Post-LN trial.
  EXPECT_THAT(html, HasSubstr(absl::StrCat(">Post-LN, best lr: trial ", fig.post_best, "</text>")));
  ExpectFiniteGeometry(html);
}

// The variants compared from the real views: qk_norm off and on (the
// trials of VariantsFigures, "on" 0.05 lower everywhere), the figures from
// the views' cells and LR sensitivity lines, the table from the
// variant_comparison rows.
TEST(ReportFiguresTest, VariantsComparedFromTheViews) {
  Figures fig = testing::VariantsFigures();
  for (v1::GetTrialResponse& t : fig.data.trials) {
    v1::TrialResult& r = *t.mutable_trial()->mutable_result();
    r.set_init_val_loss(t.trial().config().placement() == "post" ? 5.8 : 5.7);
    if (t.trial().variant() == "qk_norm=true" && r.has_final_val_loss()) {
      r.set_final_val_loss(r.final_val_loss() - 0.05);
    }
  }
  const ReportData d = WithAnalysis(fig.data);
  const std::string html = RenderReportHtml(d);
  const std::string sec = Section(html, "Variants compared");
  // By hand, Pre-LN without warm-up at lr 1e-3: seeds 2.1 and 2.12, 2.05 and 2.07 on.
  EXPECT_THAT(sec, HasSubstrs({"<title>Pre-LN (qk_norm=false), warm-up 0, lr 1e-03: 2.110 (2 seeds)</title>",
                               "<title>Pre-LN (qk_norm=true), warm-up 0, lr 1e-03: 2.060 (2 seeds)</title>",
                               // Post-LN without warm-up, as FromTheViews: LRS 1.377, l* 3.010; on: l* 2.960.
                               "<title>Post-LN (qk_norm=false), warm-up 0: LR sensitivity 1.377; l* 3.010 at lr 1e-04",
                               "<title>Post-LN (qk_norm=true), warm-up 0: LR sensitivity ",
                               "l* 2.960 at lr 1e-04</title>", ">l0 5.800 \u2191</text>"}));
  // The variant_comparison rows: the baseline and qk_norm=true per
  // placement; l* the best line's (Post-LN 2.86 at warm-up 100 off, 2.81 on).
  EXPECT_EQ(d.analysis.variants_size(), 4);
  EXPECT_THAT(sec, Not(HasSubstr("The scheduler gave no comparison rows")));
  EXPECT_EQ(Count(sec, "<td>qk_norm=false (baseline)</td>"), 2u);
  EXPECT_EQ(Count(sec, "<tr><td>qk_norm=true</td>"), 2u);
  EXPECT_THAT(sec, HasSubstrs({"<td>2.860</td><td class=\"delta\">&mdash;</td><td>1e-03 (100)</td>",
                               "<td>2.810</td><td class=\"delta\">\u22120.050</td><td>1e-03 (100)</td>"}));
  ExpectFiniteGeometry(html);
}

}  // namespace
}  // namespace normsweep::client
