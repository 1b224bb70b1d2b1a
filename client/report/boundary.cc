#include "client/report/boundary.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/boundary_tables.h"
#include "client/report/svg.h"

namespace normsweep::client {

using report::Escape;
using report::Line;
using report::Px;
using report::SvgOpen;
using report::Text;

namespace {

// The chart's plot area: warm-ups evenly spaced on x, lr on a log y axis
// from 10^y0 to 10^y1.
struct BoundaryFrame {
  std::vector<int> warmups;
  double y0 = 0, y1 = 1;
  double left = 70, top = 34, width = 0, height = 0;
  static constexpr double kBelow = 56;  // the warm-ups and the axis title under the plot
  double X(size_t i) const { return left + (i + 0.5) * width / warmups.size(); }
  double Y(double lr) const { return top + height - (std::log10(lr) - y0) / (y1 - y0) * height; }
};

// The warm-ups of the lines, and decades covering every L and U.
BoundaryFrame FrameOf(const v1::GetSweepAnalysisResponse& analysis, double w, double h) {
  std::set<int> warmup_set;
  double lo = INFINITY, hi = -INFINITY;
  for (const v1::BoundaryLine& l : analysis.boundary()) {
    warmup_set.insert(l.warmup_steps());
    for (const auto& [has, lr] : {std::pair{l.has_max_trainable_lr(), l.max_trainable_lr()},
                                  std::pair{l.has_min_untrainable_lr(), l.min_untrainable_lr()}}) {
      if (!has) continue;
      lo = std::min(lo, lr);
      hi = std::max(hi, lr);
    }
  }
  if (!(lo <= hi)) lo = 1e-4, hi = 1e-1;
  BoundaryFrame f;
  f.warmups.assign(warmup_set.begin(), warmup_set.end());
  f.y0 = std::floor(std::log10(lo));
  f.y1 = std::max(std::ceil(std::log10(hi)), f.y0 + 1);
  f.width = w - f.left - 20;
  f.height = h - f.top - BoundaryFrame::kBelow;
  return f;
}

// Title, plot box, a grid line per decade, the warm-ups, the axis titles.
std::string BoundaryAxes(const BoundaryFrame& f) {
  std::string s = Text(f.left + f.width / 2, 18, "Max trainable lr by warm-up (median seed, bracket as error bar)",
                       "class=\"chart-title\" text-anchor=\"middle\"");
  absl::StrAppend(&s, "<rect x=\"", Px(f.left), "\" y=\"", Px(f.top), "\" width=\"", Px(f.width), "\" height=\"",
                  Px(f.height), "\" class=\"plot\" fill=\"none\" stroke=\"#999\"/>\n");
  for (double e = f.y0; e <= f.y1 + 1e-9; e += 1) {
    const double lr = std::pow(10, e);
    s += Line(f.left, f.Y(lr), f.left + f.width, f.Y(lr), "class=\"grid\" stroke=\"#ddd\"");
    s += Text(f.left - 6, f.Y(lr) + 4, absl::StrFormat("1e%+03d", static_cast<int>(e)),
              "class=\"tick\" text-anchor=\"end\"");
  }
  for (size_t i = 0; i < f.warmups.size(); ++i) {
    s += Text(f.X(i), f.top + f.height + 17, absl::StrCat(f.warmups[i]), "class=\"tick\" text-anchor=\"middle\"");
  }
  s += Text(f.left + f.width / 2, f.top + f.height + 38, "warm-up steps",
            "class=\"axis-title\" text-anchor=\"middle\"");
  s += Text(16, f.top + f.height / 2, "peak lr (log)",
            absl::StrCat("class=\"axis-title\" text-anchor=\"middle\" transform=\"rotate(-90 16 ",
                         Px(f.top + f.height / 2), ")\""));
  return s;
}

}  // namespace

std::string BoundarySvg(const v1::GetSweepAnalysisResponse& analysis) {
  const std::vector<BoundarySummary> rows = SummariseBoundary(analysis);
  if (rows.empty()) return "";
  // The plot tall enough for the legend in its top left, a row per series.
  std::set<std::pair<std::string, std::string>> keys;
  for (const BoundarySummary& r : rows) keys.insert({r.variant, r.placement});
  const double w = 560;
  BoundaryFrame f = FrameOf(analysis, w, 320);
  f.height = std::max(f.height, 4 + 16.0 * keys.size() + 8);
  const double h = f.top + f.height + BoundaryFrame::kBelow;
  std::string s = SvgOpen(w, h, "max trainable lr against warm-up steps", "class=\"boundary\"") + BoundaryAxes(f);
  // One series per (variant, placement), in the summaries' order.
  std::map<std::pair<std::string, std::string>, std::vector<const BoundarySummary*>> series;
  std::vector<std::pair<std::string, std::string>> order;
  std::map<std::string, size_t> variant_index;  // a variant's lines are dashed alike, placements by colour
  for (const BoundarySummary& r : rows) {
    variant_index.try_emplace(r.variant, variant_index.size());
    auto key = std::make_pair(r.variant, r.placement);
    if (!series.contains(key)) order.push_back(key);
    series[key].push_back(&r);
  }
  double legend_y = f.top + 4;
  for (size_t si = 0; si < order.size(); ++si) {
    const auto& [variant, placement] = order[si];
    const std::string colour = PlacementColour(placement), title = PlacementTitle(placement, variant);
    const std::string dash = variant_index[variant] % 2 == 1 ? " stroke-dasharray=\"5 3\"" : "";
    const double shift = (si - (order.size() - 1) / 2.0) * 6;  // series side by side at one warm-up
    std::string points, marks;
    for (const BoundarySummary* r : series[order[si]]) {
      if (!r->median) continue;
      const v1::BoundaryLine& m = *r->median;
      const size_t i = std::lower_bound(f.warmups.begin(), f.warmups.end(), r->warmup_steps) - f.warmups.begin();
      const double x = f.X(i) + shift;
      const std::string tip = absl::StrCat(title, ", warm-up ", r->warmup_steps, ": max trainable lr ",
                                           BoundaryLrText(m), ", bracket ", BracketText(m), " (median of ", r->decided,
                                           " seeds; ", r->states, ")");
      if (m.has_max_trainable_lr()) {
        const double y = f.Y(m.max_trainable_lr());
        absl::StrAppend(&points, Px(x), ",", Px(y), " ");
        // The bracket: up to U, or to the top edge when nothing above L failed.
        const double yu = m.has_min_untrainable_lr() ? f.Y(m.min_untrainable_lr()) : f.top;
        marks += Line(x, y, x, yu, absl::StrCat("class=\"bracket\" stroke=\"", colour, "\""));
        if (m.has_min_untrainable_lr()) marks += Line(x - 4, yu, x + 4, yu, absl::StrCat("stroke=\"", colour, "\""));
        absl::StrAppend(&marks, "<circle class=\"boundary-point\" r=\"4\" cx=\"", Px(x), "\" cy=\"", Px(y),
                        "\" fill=\"", colour, "\"><title>", Escape(tip), "</title></circle>\n");
      } else if (m.has_min_untrainable_lr()) {
        // Trainable nowhere: a hollow marker at lr_min, the bar downwards.
        const double y = f.Y(m.min_untrainable_lr());
        marks += Line(x, y, x, f.top + f.height, absl::StrCat("class=\"bracket\" stroke=\"", colour, "\""));
        absl::StrAppend(&marks, "<circle class=\"boundary-nowhere\" r=\"4\" cx=\"", Px(x), "\" cy=\"", Px(y),
                        "\" fill=\"white\" stroke=\"", colour, "\"><title>", Escape(tip), "</title></circle>\n");
      }
    }
    if (!points.empty()) {
      absl::StrAppend(&s, "<polyline class=\"boundary-line\" fill=\"none\" stroke-width=\"2\" stroke=\"", colour, "\"",
                      dash, " points=\"", points, "\"><title>", Escape(title), "</title></polyline>\n");
    }
    s += marks;
    legend_y += 16;
    s += Line(f.left + 10, legend_y - 4, f.left + 36, legend_y - 4,
              absl::StrCat("stroke=\"", colour, "\" stroke-width=\"2\"", dash));
    s += Text(f.left + 42, legend_y, title, "class=\"tick\"");
  }
  return s + "</svg>\n";
}

std::string BoundaryReportSection(const v1::GetSweepAnalysisResponse& analysis) {
  if (analysis.boundary_size() == 0) return "";
  return absl::StrCat(
      "<h2>Stability boundary: max trainable lr by warm-up</h2>\n<p>A boundary search (the <code>lr_boundary</code> "
      "view): each line (placement, warm-up, seed) ran a few log-spaced lrs, then bisected the bracket between the "
      "largest lr that trained and the smallest above it that did not, until the two were within the search's "
      "resolution. Each point is the median seed's largest trainable lr, its bar the bracket; a hollow marker: "
      "trainable at no lr tried (below the range), a bar to the top: trainable at every lr.</p>\n",
      BoundarySvg(analysis), "<pre>", Escape(RenderBoundaryTable(analysis)), "</pre>\n");
}

}  // namespace normsweep::client
