#include "client/boundary_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "client/boundary_tables.h"

namespace normsweep::client {
namespace {

std::string Esc(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}
std::string P(double v) { return absl::StrFormat("%.1f", v); }
std::string Colour(const std::string& placement) {
  return placement == "post" ? "#d62728" : placement == "pre" ? "#1f77b4" : "#2ca02c";
}
std::string Title(const std::string& placement, const std::string& variant) {
  std::string t = placement == "post" ? "Post-LN" : placement == "pre" ? "Pre-LN" : placement;
  if (!variant.empty()) absl::StrAppend(&t, " (", variant, ")");
  return t;
}
std::string Text(double x, double y, const std::string& text, const std::string& attrs) {
  return absl::StrCat("<text x=\"", P(x), "\" y=\"", P(y), "\" ", attrs, ">", Esc(text), "</text>\n");
}
std::string Line(double x1, double y1, double x2, double y2, const std::string& attrs) {
  return absl::StrCat("<line x1=\"", P(x1), "\" y1=\"", P(y1), "\" x2=\"", P(x2), "\" y2=\"", P(y2), "\" ", attrs,
                      "/>\n");
}

}  // namespace

std::string BoundarySvg(const v1::GetSweepAnalysisResponse& analysis) {
  const std::vector<BoundarySummary> rows = SummariseBoundary(analysis);
  if (rows.empty()) return "";
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
  const std::vector<int> warmups(warmup_set.begin(), warmup_set.end());
  const double y0 = std::floor(std::log10(lo)), y1 = std::max(std::ceil(std::log10(hi)), y0 + 1);
  const double w = 560, h = 320, left = 70, top = 34, width = w - left - 20, height = h - top - 56;
  auto X = [&](size_t i) { return left + (i + 0.5) * width / warmups.size(); };
  auto Y = [&](double lr) { return top + height - (std::log10(lr) - y0) / (y1 - y0) * height; };
  std::string s = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" "
      "aria-label=\"max trainable lr against warm-up steps\" class=\"boundary\">\n",
      static_cast<int>(w), static_cast<int>(h), static_cast<int>(w), static_cast<int>(h));
  s += Text(left + width / 2, 18, "Max trainable lr by warm-up (median seed, bracket as error bar)",
            "class=\"chart-title\" text-anchor=\"middle\"");
  absl::StrAppend(&s, "<rect x=\"", P(left), "\" y=\"", P(top), "\" width=\"", P(width), "\" height=\"", P(height),
                  "\" class=\"plot\" fill=\"none\" stroke=\"#999\"/>\n");
  for (double e = y0; e <= y1 + 1e-9; e += 1) {
    const double lr = std::pow(10, e);
    s += Line(left, Y(lr), left + width, Y(lr), "class=\"grid\" stroke=\"#ddd\"");
    s += Text(left - 6, Y(lr) + 4, absl::StrFormat("1e%+03d", static_cast<int>(e)),
              "class=\"tick\" text-anchor=\"end\"");
  }
  for (size_t i = 0; i < warmups.size(); ++i) {
    s += Text(X(i), top + height + 17, absl::StrCat(warmups[i]), "class=\"tick\" text-anchor=\"middle\"");
  }
  s += Text(left + width / 2, top + height + 38, "warm-up steps", "class=\"axis-title\" text-anchor=\"middle\"");
  s += Text(16, top + height / 2, "peak lr (log)",
            absl::StrCat("class=\"axis-title\" text-anchor=\"middle\" transform=\"rotate(-90 16 ", P(top + height / 2),
                         ")\""));
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
  double legend_y = top + 4;
  for (size_t si = 0; si < order.size(); ++si) {
    const auto& [variant, placement] = order[si];
    const std::string colour = Colour(placement), title = Title(placement, variant);
    const std::string dash = variant_index[variant] % 2 == 1 ? " stroke-dasharray=\"5 3\"" : "";
    const double shift = (si - (order.size() - 1) / 2.0) * 6;  // series side by side at one warm-up
    std::string points, marks;
    for (const BoundarySummary* r : series[order[si]]) {
      if (!r->median) continue;
      const v1::BoundaryLine& m = *r->median;
      const size_t i = std::lower_bound(warmups.begin(), warmups.end(), r->warmup_steps) - warmups.begin();
      const double x = X(i) + shift;
      const std::string tip = absl::StrCat(title, ", warm-up ", r->warmup_steps, ": max trainable lr ",
                                           BoundaryLrText(m), ", bracket ", BracketText(m), " (median of ", r->decided,
                                           " seeds; ", r->states, ")");
      if (m.has_max_trainable_lr()) {
        const double y = Y(m.max_trainable_lr());
        absl::StrAppend(&points, P(x), ",", P(y), " ");
        // The bracket: up to U, or to the top edge when nothing above L failed.
        const double yu = m.has_min_untrainable_lr() ? Y(m.min_untrainable_lr()) : top;
        marks += Line(x, y, x, yu, absl::StrCat("class=\"bracket\" stroke=\"", colour, "\""));
        if (m.has_min_untrainable_lr()) marks += Line(x - 4, yu, x + 4, yu, absl::StrCat("stroke=\"", colour, "\""));
        absl::StrAppend(&marks, "<circle class=\"boundary-point\" r=\"4\" cx=\"", P(x), "\" cy=\"", P(y),
                        "\" fill=\"", colour, "\"><title>", Esc(tip), "</title></circle>\n");
      } else if (m.has_min_untrainable_lr()) {
        // Trainable nowhere: a hollow marker at lr_min, the bar downwards.
        const double y = Y(m.min_untrainable_lr());
        marks += Line(x, y, x, top + height, absl::StrCat("class=\"bracket\" stroke=\"", colour, "\""));
        absl::StrAppend(&marks, "<circle class=\"boundary-nowhere\" r=\"4\" cx=\"", P(x), "\" cy=\"", P(y),
                        "\" fill=\"white\" stroke=\"", colour, "\"><title>", Esc(tip), "</title></circle>\n");
      }
    }
    if (!points.empty()) {
      absl::StrAppend(&s, "<polyline class=\"boundary-line\" fill=\"none\" stroke-width=\"2\" stroke=\"", colour, "\"",
                      dash, " points=\"", points, "\"><title>", Esc(title), "</title></polyline>\n");
    }
    s += marks;
    legend_y += 16;
    s += Line(left + 10, legend_y - 4, left + 36, legend_y - 4,
              absl::StrCat("stroke=\"", colour, "\" stroke-width=\"2\"", dash));
    s += Text(left + 42, legend_y, title, "class=\"tick\"");
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
      BoundarySvg(analysis), "<pre>", Esc(RenderBoundaryTable(analysis)), "</pre>\n");
}

}  // namespace normsweep::client
