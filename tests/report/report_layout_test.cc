// The report's layout as a browser draws it: no two texts of one figure
// overlap, measured by headless Chromium (tests/report/text_boxes.h) on
// pages of hand-made figures (tests/report/report_fixture.h), among them the
// close l* labels of issue 34 and the variants compared of issue 37, whose
// section client/report_screenshot.sh --section shoots alone. Without
// Chromium these tests fail, as the screenshot tests do: CI installs it
// (deploy/install-deps.sh).
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/report/page.h"
#include "client/report/svg.h"
#include "gtest/gtest.h"
#include "tests/common/read_file.h"
#include "tests/common/subprocess.h"
#include "tests/report/png_image.h"
#include "tests/report/report_fixture.h"
#include "tests/report/text_boxes.h"

namespace normsweep {
namespace {

using testing::Figures;
using testing::LiteratureFigures;
using testing::TextBox;

// Texts may touch; sub-pixel rounding of the boxes is not an overlap.
constexpr double kEpsilon = 0.5;
constexpr char kLrsFigure[] = "LR sensitivity against warm-up steps";

std::string TempDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + name + "_XXXXXX";
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return dir;
}

// The page of data, measured; every figure's texts apart from each other.
std::vector<TextBox> ExpectNoOverlap(const client::ReportData& data, const std::string& name) {
  auto boxes = testing::BrowserTextBoxes(client::RenderReportHtml(data), TempDir(name));
  EXPECT_TRUE(boxes.ok()) << boxes.status();
  if (!boxes.ok()) return {};
  // Not vacuous: the figures' texts were laid out.
  EXPECT_GT(boxes->size(), 100u);
  for (const TextBox& b : *boxes) {
    if (!b.text.empty()) {
      EXPECT_GT(b.right - b.left, 1) << b.figure << ": '" << b.text << "' has no width";
    }
  }
  const std::vector<std::string> overlaps = testing::OverlappingTexts(*boxes, kEpsilon);
  EXPECT_TRUE(overlaps.empty()) << overlaps.size() << " pairs of texts overlap:\n" << absl::StrJoin(overlaps, "\n");
  return *boxes;
}

// The boxes of the LR-sensitivity figure's texts "l* <value>", by value.
std::map<std::string, TextBox> LStarLabels(const std::vector<TextBox>& boxes) {
  std::map<std::string, TextBox> out;
  for (const TextBox& b : boxes) {
    if (b.figure == kLrsFigure && b.text.starts_with("l* ")) {
      EXPECT_TRUE(out.emplace(b.text.substr(3), b).second) << "two labels " << b.text;
    }
  }
  return out;
}

struct Point {
  double x = 0, y = 0;
};

// The LR-sensitivity point whose tooltip starts with `title`.
Point LrsPoint(const std::string& html, const std::string& title) {
  std::smatch m;
  const std::regex re(absl::StrCat(R"re(<circle class="lrs-point" r="[0-9.]+" cx="([^"]+)" cy="([^"]+)" fill="[^"]+"><title>)re",
                                   title));
  Point p;
  EXPECT_TRUE(std::regex_search(html, m, re)) << title;
  if (!m.empty()) {
    EXPECT_TRUE(absl::SimpleAtod(m[1].str(), &p.x) && absl::SimpleAtod(m[2].str(), &p.y));
  }
  return p;
}

TEST(ReportLayoutTest, NoTwoTextsOfAFigureOverlapOnTheLiteraturePage) {
  ExpectNoOverlap(LiteratureFigures().data, "literature");
}

TEST(ReportLayoutTest, NoTwoTextsOfAFigureOverlapWithAPlateau) {
  Figures fig = LiteratureFigures();
  testing::AddPlateau(fig);
  ExpectNoOverlap(fig.data, "plateau");
}

// A not-converged cell: its "n.c." in the heatmap and the legend's two lines.
TEST(ReportLayoutTest, NoTwoTextsOfAFigureOverlapWithANotConvergedCell) {
  Figures fig = LiteratureFigures();
  testing::AddNotConverged(fig);
  ExpectNoOverlap(fig.data, "not converged");
}

// Issue 34: Post-LN's l* 2.312 and Pre-LN's l* 2.238 at one warm-up, the
// points 15 px apart, read as one "l* 2.338". Now both stand beside their
// points, apart, Pre-LN's above as its point is.
TEST(ReportLayoutTest, CloseLStarLabelsStandApartBesideTheirPoints) {
  Figures fig = LiteratureFigures();
  testing::SetCloseLStar(fig);
  const std::vector<TextBox> boxes = ExpectNoOverlap(fig.data, "close_lstar");
  const std::map<std::string, TextBox> labels = LStarLabels(boxes);
  ASSERT_TRUE(labels.contains("2.312") && labels.contains("2.238")) << "a close label was left out";
  const TextBox& post = labels.at("2.312");
  const TextBox& pre = labels.at("2.238");
  EXPECT_LE(pre.bottom, post.top + kEpsilon) << "Pre-LN's point is the higher: its label goes above";
  const std::string html = client::RenderReportHtml(fig.data);
  for (const auto& [box, point] : {std::pair{post, LrsPoint(html, "Post-LN, warm-up 100:")},
                                   std::pair{pre, LrsPoint(html, "Pre-LN, warm-up 100:")}}) {
    EXPECT_NEAR((box.top + box.bottom) / 2, point.y, 12) << box.text << " strays from its point";
    EXPECT_GT(box.left, point.x) << box.text << " covers its point";
    EXPECT_LT(box.left, point.x + 12) << box.text << " strays from its point";
  }
}

// Twelve warm-ups 37 px apart, two lines crossing: every l* label still
// drawn, none on another text (the tick labels under the axis included).
TEST(ReportLayoutTest, CrowdedLStarLabelsStayApart) {
  Figures fig = LiteratureFigures();
  testing::SetCrowdedLrSensitivity(fig);
  const std::vector<TextBox> boxes = ExpectNoOverlap(fig.data, "crowded");
  EXPECT_EQ(LStarLabels(boxes).size(), 24u);
}

// Small values have long y tick labels (0.0002): the y axis titles stand
// left of them.
TEST(ReportLayoutTest, AxisTitlesClearLongTickLabels) {
  Figures fig = LiteratureFigures();
  testing::ShrinkAxisValues(fig);
  const std::vector<TextBox> boxes = ExpectNoOverlap(fig.data, "small_values");
  std::set<std::string> six;  // figures with a y tick label like 0.0015
  for (const TextBox& b : boxes) {
    if (b.text.size() == 6 && b.text.starts_with("0.00")) six.insert(b.figure);
  }
  EXPECT_TRUE(six.contains("step-0 FFN gradient norms per layer"));
  EXPECT_TRUE(six.contains("largest update / weight RMS ratio"));
  EXPECT_TRUE(six.contains(kLrsFigure));
}

// The view's long notes and busy heatmap cells: the note of unset variance
// shares and the cells' seed counts stay clear of their neighbours.
TEST(ReportLayoutTest, LongNotesAndCellTextsStayApart) {
  Figures fig = LiteratureFigures();
  testing::LengthenTexts(fig);
  ExpectNoOverlap(fig.data, "long_texts");
}

// A boundary search of 15 series: the legend inside the plot stays above
// the warm-up labels.
TEST(ReportLayoutTest, ABoundaryLegendOfManySeriesStaysInsideThePlot) {
  Figures fig = LiteratureFigures();
  testing::AddBoundaryLines(fig);
  const std::vector<TextBox> boxes = ExpectNoOverlap(fig.data, "boundary");
  EXPECT_TRUE(std::any_of(boxes.begin(), boxes.end(), [](const TextBox& b) {
    return b.figure == "max trainable lr against warm-up steps" && b.text == "Mix-LN (qk_norm=c)";
  })) << "no boundary chart with its last legend entry";
}

// Issue 37: qk_norm off and on, the variants compared per placement (the
// tables, a panel per figure and placement, the legend) beside the
// variants' own sections.
TEST(ReportLayoutTest, NoTwoTextsOfAFigureOverlapWithTwoVariants) {
  const std::vector<TextBox> boxes = ExpectNoOverlap(testing::VariantsFigures().data, "variants");
  std::set<std::string> figures;
  for (const TextBox& b : boxes) figures.insert(b.figure);
  for (const char* figure : {"Post-LN: final validation loss against peak lr by variant",
                             "Pre-LN: LR sensitivity against warm-up steps by variant", "variants legend"}) {
    EXPECT_TRUE(figures.contains(figure)) << figure << " was not laid out";
  }
}

// Runs client/report_screenshot.sh with args; its exit code, its output in *output.
int Shoot(const std::vector<std::string>& args, const std::string& dir, std::string* output) {
  const char* src = std::getenv("NORMSWEEP_SOURCE_DIR");
  EXPECT_NE(src, nullptr) << "run under ctest (NORMSWEEP_SOURCE_DIR)";
  if (src == nullptr) return -1;
  std::vector<std::string> argv = {std::string(src) + "/client/report_screenshot.sh"};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string log = dir + "/shot.out";
  auto p = testing::Subprocess::Start(argv, {}, log);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return -1;
  const int rc = p->Wait(180);
  *output = testing::ReadFile(log);
  return rc;
}

// Pixels within 10 per channel of a colour ("#rrggbb").
int64_t CountColour(const testing::PngImage& img, const std::string& hex) {
  const int r = std::stoi(hex.substr(1, 2), nullptr, 16), g = std::stoi(hex.substr(3, 2), nullptr, 16),
            b = std::stoi(hex.substr(5, 2), nullptr, 16);
  int64_t n = 0;
  for (size_t i = 0; i + 2 < img.rgb.size(); i += 3) {
    n += std::abs(img.rgb[i] - r) <= 10 && std::abs(img.rgb[i + 1] - g) <= 10 && std::abs(img.rgb[i + 2] - b) <= 10;
  }
  return n;
}

// The variants' comparison alone, as a browser draws it: the two variants'
// colours, and none of the heatmaps below it on the page.
TEST(ReportScreenshotTest, TheVariantsSectionAlone) {
  const std::string dir = TempDir("variants_shot");
  ASSERT_TRUE(client::WriteReport(dir, client::RenderReportHtml(testing::VariantsFigures().data)).ok());
  const std::string png = dir + "/section.png";
  std::string output;
  ASSERT_EQ(Shoot({"--section", "variants-compared", dir, png, "1400x1300"}, dir, &output), 0) << output;
  auto img = testing::DecodePng(testing::ReadFile(png));
  ASSERT_TRUE(img.ok()) << img.status();
  ASSERT_EQ(img->width, 1400);
  ASSERT_EQ(img->height, 1300);
  // Two placements x (eight loss lines + two LR-sensitivity lines) a
  // variant, with their points: hundreds of pixels of each colour.
  for (size_t v = 0; v < 2; ++v) {
    const std::string colour = client::report::VariantColour(v);
    EXPECT_GT(CountColour(*img, colour), 400) << "variant " << v << " (" << colour << ") is not drawn";
  }
  // The page's own sections are hidden: no heatmap's best cell (viridis
  // yellow), no Pre-LN line of the per-variant figures.
  EXPECT_EQ(CountColour(*img, client::report::Hex(client::report::Viridis(1))), 0) << "a heatmap is in the shot";
  EXPECT_LT(CountColour(*img, client::PlacementColour("pre")), 20) << "a per-placement figure is in the shot";
  EXPECT_EQ(CountColour(*img, "#ff7f0e"), 0) << "the variance shares' bars (an SVG in the body) are in the shot";
  // The section starts at the top: ink within the first 120 rows.
  int first_row = -1;
  for (int y = 0; y < img->height && first_row < 0; ++y) {
    for (int x = 0; x < img->width; ++x) {
      const size_t i = (static_cast<size_t>(y) * img->width + x) * 3;
      if (img->rgb[i] < 128 && img->rgb[i + 1] < 128 && img->rgb[i + 2] < 128) {
        first_row = y;
        break;
      }
    }
  }
  EXPECT_GE(first_row, 0);
  EXPECT_LT(first_row, 120) << "the section does not start at the top";
}

TEST(ReportScreenshotTest, ASectionThePageLacksIsAnError) {
  const std::string dir = TempDir("no_section");
  ASSERT_TRUE(client::WriteReport(dir, client::RenderReportHtml(LiteratureFigures().data)).ok());
  std::string output;
  EXPECT_EQ(Shoot({"--section", "variants-compared", dir, dir + "/x.png"}, dir, &output), 2);
  EXPECT_NE(output.find("has no section 'variants-compared'"), std::string::npos) << output;
  EXPECT_EQ(Shoot({"--section", "a\"b", dir, dir + "/x.png"}, dir, &output), 2);
  EXPECT_NE(output.find("--section takes an element id"), std::string::npos) << output;
  EXPECT_EQ(Shoot({"--section"}, dir, &output), 2);
  EXPECT_NE(output.find("usage:"), std::string::npos) << output;
}

}  // namespace
}  // namespace normsweep
