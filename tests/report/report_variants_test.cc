// The variants compared (issue 37) from hand-made analysis rows
// (tests/report/report_fixture.h's VariantsFigures: qk_norm off and on):
// the table of the variant_comparison rows with each variant's difference
// from the baseline, the figures with a line per variant on one scale, one
// heatmap colour scale across variants, what the page says without the
// rows; and the report's palettes: one per kind of series, none sharing a
// colour, each figure colouring by one of them.
#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/report/page.h"
#include "client/report/report.h"
#include "client/report/svg.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/report/page_checks.h"
#include "tests/report/report_fixture.h"

namespace normsweep::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::Count;
using testing::ExpectFiniteGeometry;
using testing::ExpectSelfContained;
using testing::Figures;
using testing::HasSubstrs;
using testing::LiteratureFigures;
using testing::Section;
using testing::VariantsFigures;

// Every <svg> of html: its aria-label and its text.
std::vector<std::pair<std::string, std::string>> Svgs(const std::string& html) {
  std::vector<std::pair<std::string, std::string>> out;
  static const std::regex label(R"re(<svg xmlns="[^"]+" [^>]*aria-label="([^"]*)")re");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), label); it != std::sregex_iterator(); ++it) {
    const size_t start = it->position(), end = html.find("</svg>", start);
    out.emplace_back((*it)[1].str(), html.substr(start, end - start));
  }
  return out;
}

// The SVG labelled `label` (exactly), "" and a failure when there is none.
std::string SvgOf(const std::string& html, const std::string& label) {
  for (const auto& [l, svg] : Svgs(html)) {
    if (l == label) return svg;
  }
  ADD_FAILURE() << "no figure " << label;
  return "";
}

// The six-digit colours of an SVG's stroke and fill attributes.
std::set<std::string> Colours(const std::string& svg) {
  std::set<std::string> out;
  static const std::regex colour(R"re((?:stroke|fill)="(#[0-9a-f]{6})")re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), colour); it != std::sregex_iterator(); ++it) {
    out.insert((*it)[1].str());
  }
  return out;
}

// title -> stroke of every titled <polyline> of an SVG.
std::map<std::string, std::string> LineColours(const std::string& svg) {
  std::map<std::string, std::string> out;
  static const std::regex line(R"re(<polyline class="[^"]*" fill="none"[^>]* stroke="(#[0-9a-f]{6})"[^>]*><title>([^<]*)</title>)re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), line); it != std::sregex_iterator(); ++it) {
    out[(*it)[2].str()] = (*it)[1].str();
  }
  return out;
}

// The points of class cls (circles) in an SVG span more than half its
// plot's height, and every y tick is below `above` (l0 for the loss).
void ExpectDataFillTheRange(const std::string& svg, const std::string& cls, double above, const std::string& what) {
  std::smatch plot;
  ASSERT_TRUE(std::regex_search(
      svg, plot, std::regex(R"re(<rect x="[^"]+" y="([^"]+)" width="[^"]+" height="([^"]+)" class="plot"/>)re")))
      << what;
  const double top = std::stod(plot[1].str()), height = std::stod(plot[2].str());
  double lo = INFINITY, hi = -INFINITY;
  const std::regex point(absl::StrCat("<circle class=\"", cls, R"re(" r="[0-9.]+" cx="[^"]+" cy="([^"]+)")re"));
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), point); it != std::sregex_iterator(); ++it) {
    const double y = std::stod((*it)[1].str());
    EXPECT_GT(y, top) << what;
    lo = std::min(lo, y);
    hi = std::max(hi, y);
  }
  EXPECT_GT(hi - lo, 0.5 * height) << what << " " << cls << ": the points fill " << (hi - lo) / height;
  static const std::regex tick(R"re(class="tick" text-anchor="end">([^<]+)</text>)re");
  int ticks = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), tick); it != std::sregex_iterator(); ++it, ++ticks) {
    EXPECT_LT(std::stod((*it)[1].str()), above) << what;
  }
  EXPECT_GE(ticks, 3) << what;
}

TEST(VariantsComparedTest, ATablePerPlacementEachVariantBesideItsDifferenceFromTheBaseline) {
  const std::string html = RenderReportHtml(VariantsFigures().data);
  const std::string sec = Section(html, "Variants compared");
  EXPECT_THAT(html, HasSubstr("<section id=\"variants-compared\">\n<h2>Variants compared</h2>"));
  // Before the variants' own sections, after the summary.
  EXPECT_LT(html.find("<h2>Variants compared"), html.find("<h2>Final validation loss over warm-up"));
  EXPECT_GT(html.find("<h2>Variants compared"), html.find("<h2>Summary per placement"));
  // A block per placement, in the report's order.
  ASSERT_NE(sec.find("<h3>Post-LN</h3>"), std::string::npos);
  ASSERT_NE(sec.find("<h3>Pre-LN</h3>"), std::string::npos);
  EXPECT_LT(sec.find("<h3>Post-LN</h3>"), sec.find("<h3>Pre-LN</h3>"));
  EXPECT_EQ(Count(sec, "<table class=\"num variants\">"), 2u);
  EXPECT_THAT(
      sec,
      HasSubstrs({// The baseline: its figures, dashes for the differences.
                  "<tr class=\"baseline\"><td>qk_norm=false (baseline)</td><td>12</td><td>1.100</td><td "
                  "class=\"delta\">&mdash;</td><td>2.860</td><td class=\"delta\">&mdash;</td><td>1e-03 (100)</td><td "
                  "class=\"delta\">&mdash;</td><td>50%</td><td class=\"delta\">&mdash;</td></tr>",
                  // The other variant beside its differences: lower LR sensitivity and l*, a
                  // third fewer failures; the lrs as ratios.
                  "<tr><td>qk_norm=true</td><td>12</td><td>0.800</td><td class=\"delta\">\u22120.300</td>"
                  "<td>2.810</td><td class=\"delta\">\u22120.050</td><td>1e-03 (100)</td>"
                  "<td class=\"delta\">\u00d71.00</td><td>33%</td><td class=\"delta\">\u221217 pp</td></tr>",
                  "<tr><td>qk_norm=true</td><td>12</td><td>0.250</td><td class=\"delta\">\u22120.100</td>"
                  "<td>2.010</td><td class=\"delta\">\u22120.100</td><td>1e-02 (0)</td>"
                  "<td class=\"delta\">\u00d710.00</td><td>0%</td><td class=\"delta\">\u221217 pp</td></tr>",
                  "<th colspan=\"2\">mean LR sensitivity</th>", "<th colspan=\"2\">l* (best line)</th>"}));
  // Not a boundary search: no column for the max trainable lr.
  EXPECT_THAT(sec, Not(HasSubstr("<th colspan=\"2\">max trainable lr")));
  ExpectFiniteGeometry(html);
  ExpectSelfContained(html);
}

TEST(VariantsComparedTest, ABoundarySearchAddsTheMaxTrainableLrAsARatio) {
  Figures fig = VariantsFigures();
  for (v1::VariantComparison& r : *fig.data.analysis.mutable_variants()) {
    const bool base = r.variant() == r.baseline_variant();
    r.set_max_trainable_lr(base ? 2e-3 : 5e-3);
    r.set_boundary_lines(2);
    r.set_max_trainable_lr_ratio(base ? 1 : 2.5);
  }
  const std::string sec = Section(RenderReportHtml(fig.data), "Variants compared");
  EXPECT_EQ(Count(sec, "<th colspan=\"2\">max trainable lr (median line)</th>"), 2u);
  EXPECT_THAT(sec, HasSubstrs({"<td>2e-03 (2 lines)</td><td class=\"delta\">&mdash;</td></tr>",
                               "<td>5e-03 (2 lines)</td><td class=\"delta\">\u00d72.50</td></tr>"}));
}

TEST(VariantsComparedTest, FiguresWithALinePerVariantOnOneScale) {
  const std::string html = RenderReportHtml(VariantsFigures().data);
  const std::string sec = Section(html, "Variants compared");
  const std::string off = report::VariantColour(0), on = report::VariantColour(1);
  ASSERT_NE(off, on);
  for (const char* p : {"Post-LN", "Pre-LN"}) {
    // Loss against lr: a line per variant and warm-up, the variant's colour
    // and the warm-up's dash.
    const std::string loss = SvgOf(sec, absl::StrCat(p, ": final validation loss against peak lr by variant"));
    const std::map<std::string, std::string> lines = LineColours(loss);
    for (int warmup : {0, 100}) {
      EXPECT_EQ(lines.at(absl::StrCat(p, " (qk_norm=false), warm-up ", warmup)), off) << p;
      EXPECT_EQ(lines.at(absl::StrCat(p, " (qk_norm=true), warm-up ", warmup)), on) << p;
    }
    EXPECT_EQ(lines.size(), 4u) << p;
    EXPECT_THAT(loss, HasSubstr(" stroke-dasharray=\"7 4\" points=\""));  // warm-up 100's dash
    // LR sensitivity: a line per variant, l* beside its points.
    const std::string lrs = SvgOf(sec, absl::StrCat(p, ": LR sensitivity against warm-up steps by variant"));
    EXPECT_EQ(LineColours(lrs), (std::map<std::string, std::string>{
                                    {absl::StrCat(p, " (qk_norm=false): LR sensitivity"), off},
                                    {absl::StrCat(p, " (qk_norm=true): LR sensitivity"), on}}));
    EXPECT_EQ(Count(lrs, "<circle class=\"lrs-variant-point\""), 4u) << p;
  }
  // A placement's variants on one scale, the data's: the points of both
  // fill most of the plot, every y tick below l0 (annotated above the plot).
  for (const auto& [p, l0] : {std::pair{"Post-LN", 5.8}, std::pair{"Pre-LN", 5.7}}) {
    const std::string loss = SvgOf(sec, absl::StrCat(p, ": final validation loss against peak lr by variant"));
    ExpectDataFillTheRange(loss, "loss-point", l0, p);
    EXPECT_THAT(loss, HasSubstr(absl::StrFormat(">l0 %.3f \u2191</text>", l0)));
    // LR sensitivity from 0 (the bottom) to a quarter above the placement's
    // largest: its highest point at 80% of the height.
    const std::string lrs = SvgOf(sec, absl::StrCat(p, ": LR sensitivity against warm-up steps by variant"));
    std::smatch plot;
    ASSERT_TRUE(std::regex_search(
        lrs, plot, std::regex(R"re(<rect x="[^"]+" y="([^"]+)" width="[^"]+" height="([^"]+)" class="plot"/>)re")));
    const double bottom = std::stod(plot[1].str()) + std::stod(plot[2].str());
    double highest = bottom;
    static const std::regex point(R"re(<circle class="lrs-variant-point" r="4" cx="[^"]+" cy="([^"]+)")re");
    for (auto it = std::sregex_iterator(lrs.begin(), lrs.end(), point); it != std::sregex_iterator(); ++it) {
      highest = std::min(highest, std::stod((*it)[1].str()));
    }
    EXPECT_NEAR((bottom - highest) / std::stod(plot[2].str()), 0.8, 0.01) << p;
  }
  EXPECT_THAT(SvgOf(sec, "Post-LN: LR sensitivity against warm-up steps by variant"),
              HasSubstrs({">l* 2.950</text>", ">l* 2.850</text>", ">l* 2.810</text>"}));
  const std::string post_loss = SvgOf(sec, "Post-LN: final validation loss against peak lr by variant");
  const std::string pre_loss = SvgOf(sec, "Pre-LN: final validation loss against peak lr by variant");
  // Post-LN's cells at lr 1e-2 diverged in both variants: crosses at the top.
  EXPECT_EQ(Count(post_loss, "class=\"diverged-mark diverged-point\""), 4u);
  EXPECT_EQ(Count(pre_loss, "class=\"diverged-mark diverged-point\""), 0u);
  // The legend names the variants, the baseline first, in their colours.
  const std::string legend = SvgOf(sec, "variants legend");
  EXPECT_THAT(legend, HasSubstrs({absl::StrCat("stroke=\"", off, "\" class=\"curve variant-key\""),
                                  absl::StrCat("stroke=\"", on, "\" class=\"curve variant-key\""),
                                  ">qk_norm=false (baseline)</text>", ">qk_norm=true</text>",
                                  ">every seed diverged: at the top</text>"}));
  EXPECT_LT(legend.find(">qk_norm=false (baseline)</text>"), legend.find(">qk_norm=true</text>"));
  ExpectFiniteGeometry(html);
}

// Issue 37: each variant's heatmaps had a colour scale of their own.
TEST(VariantsComparedTest, TheHeatmapsOfAllVariantsShareOneColourScale) {
  const std::string html = RenderReportHtml(VariantsFigures().data);
  // Pre-LN's best cell: 2.11 off, 2.01 on; the scale runs from 2.01 for both.
  const std::string best = report::Hex(report::Viridis(1));
  const std::regex cell(
      R"re(<rect [^>]* fill="(#[0-9a-f]{6})" class="cell[^"]*"><title>Pre-LN, warm-up 0, lr 1e-03: ([0-9.]+) )re");
  std::vector<std::pair<std::string, std::string>> fills;  // colour, value; off's page section first
  for (auto it = std::sregex_iterator(html.begin(), html.end(), cell); it != std::sregex_iterator(); ++it) {
    fills.emplace_back((*it)[1].str(), (*it)[2].str());
  }
  ASSERT_EQ(fills.size(), 2u);
  EXPECT_EQ(fills[0].second, "2.110");
  EXPECT_EQ(fills[1].second, "2.060");
  EXPECT_NE(fills[0].first, best) << "qk_norm=false's best is not the sweep's best";
  // Both scales' legends run over the same range.
  const std::string off_scale = Section(html, "Final validation loss over warm-up \u00d7 peak lr \u2014 qk_norm=false");
  const std::string on_scale = Section(html, "Final validation loss over warm-up \u00d7 peak lr \u2014 qk_norm=true");
  EXPECT_THAT(off_scale,
              HasSubstrs({">2.010</text>", ">3.010</text>", "One colour scale for every placement and every variant"}));
  EXPECT_THAT(on_scale, HasSubstrs({">2.010</text>", ">3.010</text>"}));
  EXPECT_THAT(on_scale,
              HasSubstr(absl::StrCat("fill=\"", best, "\" class=\"cell near\"><title>Pre-LN, warm-up 0, lr 1e-02: 2.010")));
}

TEST(VariantsComparedTest, WithoutTheViewsRowsTheFiguresAndANote) {
  Figures fig = VariantsFigures();
  fig.data.analysis.clear_variants();
  const std::string html = RenderReportHtml(fig.data);
  const std::string sec = Section(html, "Variants compared");
  EXPECT_THAT(sec, HasSubstr("The scheduler gave no comparison rows"));
  EXPECT_THAT(sec, Not(HasSubstr("<table")));
  EXPECT_THAT(sec, HasSubstrs({"aria-label=\"Post-LN: final validation loss against peak lr by variant\"",
                               "aria-label=\"Pre-LN: LR sensitivity against warm-up steps by variant\""}));
  // Rows for one placement only: the other says so.
  fig = VariantsFigures();
  auto& rows = *fig.data.analysis.mutable_variants();
  auto pre = [](const v1::VariantComparison& r) { return r.placement() == "pre"; };
  rows.erase(std::remove_if(rows.begin(), rows.end(), pre), rows.end());
  const std::string one = Section(RenderReportHtml(fig.data), "Variants compared");
  EXPECT_EQ(Count(one, "<table class=\"num variants\">"), 1u);
  EXPECT_THAT(one, HasSubstr("<h3>Pre-LN</h3>\n<p class=\"note\">No comparison row for this placement.</p>"));
  ExpectFiniteGeometry(html);
}

TEST(VariantsComparedTest, OneVariantHasNoComparison) {
  EXPECT_THAT(RenderReportHtml(LiteratureFigures().data), Not(HasSubstr("Variants compared")));
  // Nor a variant with nothing analysed yet: the figures say so, no NaN.
  Figures fig = VariantsFigures();
  fig.data.analysis.Clear();
  const std::string html = RenderReportHtml(fig.data);
  const std::string sec = Section(html, "Variants compared");
  EXPECT_THAT(sec, HasSubstrs({"No grid cell has a final loss or a diverged seed yet", "no LR sensitivity yet"}));
  ExpectFiniteGeometry(html);
}

// The figure kinds by the series they colour (their aria-labels).
enum class Kind { kPlacement, kVariant, kLr, kWarmup, kOther };
Kind KindOf(const std::string& label) {
  for (const char* placement_figure :
       {"LR sensitivity against warm-up steps", "step-0 FFN gradient norms per layer", "gradient norm legend",
        "max attention logit, worst layer", "output log Z", "largest update / weight RMS ratio", "diagnostics legend",
        "max trainable lr against warm-up steps"}) {
    if (label == placement_figure) return Kind::kPlacement;
  }
  if (label.ends_with(" by variant") || label == "variants legend") return Kind::kVariant;
  if (label.ends_with(": validation loss curves") || label == "curve legend") return Kind::kLr;
  if (label.ends_with(": final validation loss against peak lr") || label == "loss against lr legend") {
    return Kind::kWarmup;
  }
  return Kind::kOther;
}

TEST(ReportPaletteTest, ThePalettesShareNoColour) {
  const std::vector<std::string> placements = PlacementPalette();
  std::set<std::string> placement(placements.begin(), placements.end()), variant, lr, warmup;
  EXPECT_EQ(placement.size(), placements.size()) << "two placements of one colour";
  for (const char* p : {"post", "pre", "peri", "deepnorm", "mix", "hybrid", "zeta"}) {
    EXPECT_TRUE(placement.contains(PlacementColour(p))) << p;
  }
  for (size_t i = 0; i < report::kVariantColours; ++i) variant.insert(report::VariantColour(i));
  EXPECT_EQ(variant.size(), report::kVariantColours);
  for (size_t n = 1; n <= 12; ++n) {
    for (size_t i = 0; i < n; ++i) {
      lr.insert(report::LrColour(i, n));
      warmup.insert(report::WarmupColour(i, n));
    }
  }
  EXPECT_EQ(report::LrColour(0, 3), "#3b0f70");  // dark: the smallest lr
  EXPECT_NE(report::LrColour(0, 3), report::LrColour(2, 3));
  for (const auto& [a, b, what] : {std::tuple{&placement, &variant, "placement and variant"},
                                   std::tuple{&placement, &lr, "placement and lr"},
                                   std::tuple{&placement, &warmup, "placement and warm-up"},
                                   std::tuple{&variant, &lr, "variant and lr"},
                                   std::tuple{&variant, &warmup, "variant and warm-up"},
                                   std::tuple{&lr, &warmup, "lr and warm-up"}}) {
    for (const std::string& c : *a) EXPECT_FALSE(b->contains(c)) << what << " share " << c;
  }
  for (const auto* palette : {&placement, &variant, &lr, &warmup}) {
    EXPECT_FALSE(palette->contains("#d62728")) << "the divergence marks' red";
    EXPECT_FALSE(palette->contains("#ffffff"));
  }
}

// Every figure of a page with two variants, a boundary search and every
// kind of series colours its series from its kind's palette only, and a
// placement has one colour in every figure that colours by placement.
TEST(ReportPaletteTest, EachFigureColoursByOneKindAndAPlacementLooksTheSameEverywhere) {
  Figures fig = VariantsFigures();
  testing::AddBoundaryLines(fig);
  const std::string html = RenderReportHtml(fig.data);
  const std::vector<std::string> placements = PlacementPalette();
  const std::set<std::string> placement(placements.begin(), placements.end());
  std::set<std::string> variant, lr, warmup;
  for (size_t i = 0; i < report::kVariantColours; ++i) variant.insert(report::VariantColour(i));
  for (size_t i = 0; i < 3; ++i) lr.insert(report::LrColour(i, 3));  // the sweep's three lrs
  for (size_t i = 0; i < 2; ++i) warmup.insert(report::WarmupColour(i, 2));
  std::map<Kind, int> figures;
  std::map<std::string, std::set<std::string>> by_placement;  // title -> colours of its lines
  for (const auto& [label, svg] : Svgs(html)) {
    const Kind kind = KindOf(label);
    const std::set<std::string>& allowed = kind == Kind::kPlacement ? placement
                                           : kind == Kind::kVariant ? variant
                                           : kind == Kind::kLr      ? lr
                                                                    : warmup;
    if (kind == Kind::kOther) continue;  // heatmaps (viridis), shares, the colour scale
    ++figures[kind];
    const std::set<std::string> colours = Colours(svg);
    EXPECT_FALSE(colours.empty()) << label;
    for (const std::string& c : colours) EXPECT_TRUE(allowed.contains(c)) << label << " draws " << c;
    if (kind != Kind::kPlacement) continue;
    for (const auto& [title, colour] : LineColours(svg)) {
      for (const char* p : {"Post-LN", "Pre-LN", "Peri-LN", "DeepNorm", "Mix-LN"}) {
        if (title.starts_with(p)) by_placement[p].insert(colour);
      }
    }
  }
  // Not vacuous: every kind was seen (the two variants' sections, the comparison).
  EXPECT_EQ(figures[Kind::kPlacement], 2 * 7 + 1);  // per variant: LRS, grad norms + legend, 3 diagnostics + legend
  EXPECT_EQ(figures[Kind::kVariant], 2 * 2 + 1);
  EXPECT_EQ(figures[Kind::kLr], 2 * 3);
  EXPECT_EQ(figures[Kind::kWarmup], 2 * 3);
  EXPECT_EQ(by_placement.size(), 5u);  // the boundary chart has the five
  for (const auto& [title, colours] : by_placement) {
    EXPECT_EQ(colours.size(), 1u) << title << " in several colours";
  }
  EXPECT_EQ(by_placement["Post-LN"], std::set<std::string>{PlacementColour("post")});
  EXPECT_EQ(by_placement["Pre-LN"], std::set<std::string>{PlacementColour("pre")});
  // The curves: an lr's colour on the lr ramp, ascending.
  const std::map<std::string, std::string> curves = LineColours(SvgOf(html, "Pre-LN: validation loss curves"));
  ASSERT_FALSE(curves.empty());
  for (const auto& [title, colour] : curves) {
    const size_t rank = title.find("lr 1e-04") != std::string::npos   ? 0
                        : title.find("lr 1e-03") != std::string::npos ? 1
                                                                      : 2;
    EXPECT_EQ(colour, report::LrColour(rank, 3)) << title;
  }
}

}  // namespace
}  // namespace normsweep::client
