// The variants compared, per placement (issue 37): the variant_comparison
// view's rows side by side, each variant with its difference from the
// baseline (the sweep's first variant), and two figures where the variant
// is the series: final loss against lr and LR sensitivity by warm-up, the
// variants of a placement on one scale.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/report/figures.h"
#include "client/report/svg.h"
#include "client/results.h"

namespace normsweep::client::report {
namespace {

// A signed difference, with a real minus sign: "+0.120", "−0.050".
std::string Signed(double d, int digits = 3) {
  const std::string s = absl::StrFormat("%+.*f", digits, d);
  return s[0] == '-' ? absl::StrCat("\u2212", s.substr(1)) : s;
}

// A value cell and its difference's cell; the baseline's difference is a dash.
std::string Pair(const std::string& value, bool baseline, bool has_delta, const std::string& delta) {
  return absl::StrCat("<td>", value, "</td><td class=\"delta\">", baseline ? "&mdash;" : has_delta ? delta : "&ndash;",
                      "</td>");
}

std::string Percent(bool has, double v) { return Finite(has, v) ? absl::StrFormat("%.0f%%", 100 * v) : "&ndash;"; }
std::string LrText(bool has, double v) { return Finite(has, v) ? Escape(FormatLr(v)) : "&ndash;"; }
std::string Ratio(double r) { return absl::StrFormat("\u00d7%.2f", r); }

// The view's rows of one placement as a table: a row per variant, each
// figure with its difference from the baseline beside it.
std::string ComparisonTable(const std::vector<const v1::VariantComparison*>& rows) {
  const bool boundary = std::any_of(rows.begin(), rows.end(), [](const v1::VariantComparison* r) {
    return r->boundary_lines() > 0 || r->has_max_trainable_lr();
  });
  std::string s = absl::StrCat(
      "<table class=\"num variants\">\n<tr><th rowspan=\"2\">variant</th><th rowspan=\"2\">trials</th>"
      "<th colspan=\"2\">mean LR sensitivity</th><th colspan=\"2\">l* (best line)</th><th colspan=\"2\">best lr "
      "(its warm-up)</th><th colspan=\"2\">failure rate</th>",
      boundary ? "<th colspan=\"2\">max trainable lr (median line)</th>" : "", "</tr>\n<tr>");
  for (const char* delta : {"\u0394", "\u0394", "\u00d7", "\u0394"}) {
    absl::StrAppend(&s, "<th>value</th><th>", delta, "</th>");
  }
  if (boundary) s += "<th>value</th><th>\u00d7</th>";
  s += "</tr>\n";
  for (const v1::VariantComparison* r : rows) {
    const bool base = r->variant() == r->baseline_variant();
    std::string best_lr = LrText(r->has_best_lr(), r->best_lr());
    if (r->has_best_warmup_steps()) absl::StrAppend(&best_lr, " (", r->best_warmup_steps(), ")");
    const std::string name = r->variant().empty() ? "\u201c\u201d" : r->variant();
    absl::StrAppend(
        &s, "<tr", base ? " class=\"baseline\"" : "", "><td>", Escape(name), base ? " (baseline)" : "", "</td><td>",
        r->trials(), "</td>",
        Pair(OptNum(r->has_mean_lr_sensitivity(), r->mean_lr_sensitivity()), base,
             Finite(r->has_delta_mean_lr_sensitivity(), r->delta_mean_lr_sensitivity()),
             Signed(r->delta_mean_lr_sensitivity())),
        Pair(OptNum(r->has_best_val_loss(), r->best_val_loss()), base,
             Finite(r->has_delta_best_val_loss(), r->delta_best_val_loss()), Signed(r->delta_best_val_loss())),
        Pair(best_lr, base, Finite(r->has_best_lr_ratio(), r->best_lr_ratio()), Ratio(r->best_lr_ratio())),
        Pair(Percent(r->has_failure_rate(), r->failure_rate()), base,
             Finite(r->has_delta_failure_rate(), r->delta_failure_rate()),
             absl::StrCat(Signed(100 * r->delta_failure_rate(), 0), " pp")));
    if (boundary) {
      std::string lr = LrText(r->has_max_trainable_lr(), r->max_trainable_lr());
      absl::StrAppend(&lr, " (", r->boundary_lines(), r->boundary_lines() == 1 ? " line)" : " lines)");
      s += Pair(lr, base, Finite(r->has_max_trainable_lr_ratio(), r->max_trainable_lr_ratio()),
                Ratio(r->max_trainable_lr_ratio()));
    }
    s += "</tr>\n";
  }
  return s + "</table>\n";
}

// What the panels of the section share: the variants in the sweep's order
// and the union of their grids; a frame per placement and figure.
struct Comparison {
  std::vector<const VariantView*> variants;
  std::vector<int> warmups;  // every variant's, ascending
  std::vector<double> lrs;
  // A placement's lines: per variant (of those that have the placement),
  // per warm-up of `warmups` (empty where the variant lacks it).
  std::map<std::string, std::vector<std::pair<const VariantView*, std::vector<std::vector<LossPoint>>>>> lines;
  std::map<std::string, std::optional<Frame>> loss_frame;  // by placement: over its variants' lines
  std::map<std::string, double> lrs_top;                  // by placement: LR sensitivity from 0 to this
};

Comparison Compare(const std::vector<VariantView>& variants, const std::vector<std::string>& placements) {
  Comparison c;
  std::set<int> warmups;
  std::set<double> lrs;
  std::map<std::string, double> lrs_max;
  for (const VariantView& v : variants) {
    c.variants.push_back(&v);
    warmups.insert(v.warmups.begin(), v.warmups.end());
    lrs.insert(v.lrs.begin(), v.lrs.end());
    for (const v1::LrSensitivity* r : v.lr_sensitivity) {
      double& top = lrs_max[r->placement()];
      if (Finite(r->has_lr_sensitivity(), r->lr_sensitivity())) top = std::max(top, r->lr_sensitivity());
    }
  }
  c.warmups.assign(warmups.begin(), warmups.end());
  c.lrs.assign(lrs.begin(), lrs.end());
  for (const std::string& p : placements) c.lrs_top[p] = lrs_max[p] > 0 ? lrs_max[p] * 1.25 : 0.1;
  for (const std::string& p : placements) {
    auto& by_variant = c.lines[p];
    for (const VariantView* v : c.variants) {
      if (!v->trials.contains(p)) continue;
      std::vector<std::vector<LossPoint>> per_warmup;
      for (int w : c.warmups) per_warmup.push_back(LossLine(*v, p, w));
      by_variant.emplace_back(v, std::move(per_warmup));
    }
  }
  for (const auto& [p, by_variant] : c.lines) {
    std::vector<const std::vector<LossPoint>*> all;
    for (const auto& [v, per_warmup] : by_variant) {
      for (const std::vector<LossPoint>& line : per_warmup) all.push_back(&line);
    }
    c.loss_frame[p] = LossFrame(all, c.lrs);
  }
  return c;
}

std::string VariantName(const VariantView& v) { return v.variant.empty() ? "\u201c\u201d" : v.variant; }

// Final loss against lr in one placement: a colour per variant, a dash per
// warm-up.
std::string LossPanel(const Comparison& c, const std::string& placement, LossMarks& marks) {
  Frame f;
  std::string s = OpenLossPanel(placement, "final validation loss against peak lr by variant", c.lrs,
                                *c.loss_frame.at(placement), f);
  std::vector<double> l0s;
  for (const auto& [v, unused] : c.lines.at(placement)) {
    if (const std::optional<double> l0 = PlacementL0(*v, placement)) l0s.push_back(*l0);
  }
  marks.any_l0 |= !l0s.empty();
  s += L0Annotation(f, l0s, PlacementTitle(placement));
  int drawn = 0;
  for (const auto& [v, per_warmup] : c.lines.at(placement)) {
    for (size_t w = 0; w < per_warmup.size(); ++w) {
      drawn += per_warmup[w].size();
      s += LossLineSvg(f, per_warmup[w], VariantColour(v->index), DashAttr(w),
                       absl::StrCat(PlacementTitle(placement, VariantName(*v)), ", warm-up ", c.warmups[w]), marks);
    }
  }
  if (drawn == 0) {
    s += Text(f.left + f.width / 2, f.top + f.height / 2, "no final loss yet", "class=\"tick\" text-anchor=\"middle\"");
  }
  return s + "</svg>\n";
}

// LR sensitivity against warm-up in one placement, a line per variant, l*
// beside each point when there are at most two variants (as the per-variant
// figure labels them).
std::string LrsPanel(const Comparison& c, const std::string& placement) {
  const double w = 470, h = 300;
  const double top = c.lrs_top.at(placement);
  const std::vector<double> yticks = Ticks(0, top, 5);
  const double left = PlotLeft(yticks, TickLabel, 60);
  const Frame f{left, 30, w - left - 14, h - 30 - 50, -0.5, c.warmups.size() - 0.5, 0, top};
  const std::string title = PlacementTitle(placement);
  std::string s = SvgOpen(w, h, title + ": LR sensitivity against warm-up steps by variant");
  s += Text(f.left + f.width / 2, 18, title, "class=\"chart-title\" text-anchor=\"middle\"");
  std::vector<double> xticks;
  for (size_t i = 0; i < c.warmups.size(); ++i) xticks.push_back(i);
  s += Axes(f, xticks, yticks, "warm-up steps", "LR sensitivity", [&](double x) {
    const size_t i = static_cast<size_t>(std::lround(x));
    return i < c.warmups.size() ? std::to_string(c.warmups[i]) : "";
  });
  const auto& by_variant = c.lines.at(placement);
  const bool label_points = by_variant.size() <= 2;
  std::vector<PointLabel> labels;
  std::vector<Polyline> lines;
  int drawn = 0;
  for (const auto& [v, unused] : by_variant) {
    const std::string colour = VariantColour(v->index);
    const std::string name = PlacementTitle(placement, VariantName(*v));
    std::string segment, marks;
    Polyline line;
    auto flush = [&] {
      if (!segment.empty()) {
        absl::StrAppend(&s, "<polyline class=\"curve lrs-variant-line\" fill=\"none\" stroke=\"", colour,
                        "\" points=\"", segment, "\"><title>", Escape(name), ": LR sensitivity</title></polyline>\n");
        lines.push_back(std::move(line));
      }
      segment.clear();
      line.clear();
    };
    for (size_t i = 0; i < c.warmups.size(); ++i) {
      const v1::LrSensitivity* r = LrsRow(*v, placement, c.warmups[i]);
      if (r == nullptr || !Finite(r->has_lr_sensitivity(), r->lr_sensitivity())) {
        flush();
        continue;
      }
      ++drawn;
      const double x = f.X(i), y = f.Y(r->lr_sensitivity());
      absl::StrAppend(&segment, Px(x), ",", Px(y), " ");
      line.push_back({x, y});
      std::string tip = absl::StrCat(name, ", warm-up ", c.warmups[i], ": LR sensitivity ", Num(r->lr_sensitivity()),
                                     "; l* ", OptText(r->has_best_val_loss(), r->best_val_loss()));
      if (r->has_best_lr()) absl::StrAppend(&tip, " at lr ", FormatLr(r->best_lr()));
      absl::StrAppend(&marks, "<circle class=\"lrs-variant-point\" r=\"4\" cx=\"", Px(x), "\" cy=\"", Px(y),
                      "\" fill=\"", colour, "\"><title>", Escape(tip), "</title></circle>\n");
      if (label_points && Finite(r->has_best_val_loss(), r->best_val_loss())) {
        labels.push_back({x, y, absl::StrCat("l* ", Num(r->best_val_loss())), colour});
      }
    }
    flush();
    s += marks;
  }
  std::stable_sort(labels.begin(), labels.end(), [](const PointLabel& a, const PointLabel& b) { return a.x < b.x; });
  s += PlaceLabels(labels, lines, Box{f.left + 1, f.top + 1, f.left + f.width - 1, f.top + f.height - 1}, 4);
  if (drawn == 0) {
    s += Text(f.left + f.width / 2, f.top + f.height / 2, "no LR sensitivity yet",
              "class=\"tick\" text-anchor=\"middle\"");
  }
  return s + "</svg>\n";
}

// The variants by colour (the baseline first), the warm-ups by dash, the
// loss figure's marks.
std::string LegendSvg(const Comparison& c, const LossMarks& marks) {
  double w = 270;
  for (const VariantView* v : c.variants) {
    const Box b = TextBox(52, 0, VariantName(*v) + (v == c.variants.front() ? " (baseline)" : ""), kTickFontPx);
    w = std::max(w, std::ceil(b.right + 10));
  }
  const double h = 30 + 20 * c.variants.size() + 26 + 20 * c.warmups.size() + 26 + 20 * LossMarksLegendRows(marks) + 10;
  std::string s = SvgOpen(w, h, "variants legend");
  double y = 18;
  s += Text(8, y, "colour: variant", "class=\"tick\"");
  for (const VariantView* v : c.variants) {
    y += 20;
    const std::string colour = VariantColour(v->index);
    absl::StrAppend(&s, "<line x1=\"10\" x2=\"44\" y1=\"", Px(y - 4), "\" y2=\"", Px(y - 4), "\" stroke=\"", colour,
                    "\" class=\"curve variant-key\"/><circle r=\"3.5\" cx=\"27\" cy=\"", Px(y - 4), "\" fill=\"",
                    colour, "\"/>",
                    Text(52, y, VariantName(*v) + (v == c.variants.front() ? " (baseline)" : ""), "class=\"tick\""));
  }
  y += 26;
  s += Text(8, y, "dash: warm-up steps (loss against lr)", "class=\"tick\"");
  for (size_t i = 0; i < c.warmups.size(); ++i) {
    y += 20;
    absl::StrAppend(&s, "<line x1=\"10\" x2=\"44\" y1=\"", Px(y - 4), "\" y2=\"", Px(y - 4), "\" stroke=\"#333\"",
                    DashAttr(i), " class=\"curve\"/>", Text(52, y, std::to_string(c.warmups[i]), "class=\"tick\""));
  }
  y += 26;
  s += LossMarksLegend(marks, y);
  return s + "</svg>\n";
}

}  // namespace

std::string VariantsComparedSection(const std::vector<VariantView>& variants,
                                    const v1::GetSweepAnalysisResponse& analysis) {
  if (variants.size() < 2) return "";
  std::set<std::string> placement_set;
  for (const VariantView& v : variants) placement_set.insert(v.placements.begin(), v.placements.end());
  const std::vector<std::string> placements =
      PlacementOrder(std::vector<std::string>(placement_set.begin(), placement_set.end()));
  const Comparison c = Compare(variants, placements);
  std::string s;
  if (analysis.variants().empty()) {
    s += "<p class=\"note\">The scheduler gave no comparison rows (the <code>variant_comparison</code> view; a "
         "scheduler before it has none): no table, the figures only.</p>\n";
  }
  LossMarks marks;
  std::vector<std::string> blocks;
  for (const std::string& p : placements) {
    std::vector<const v1::VariantComparison*> rows;
    for (const v1::VariantComparison& r : analysis.variants()) {
      if (r.placement() == p) rows.push_back(&r);
    }
    std::string b = absl::StrCat("<h3>", Escape(PlacementTitle(p)), "</h3>\n");
    if (!rows.empty()) {
      b += ComparisonTable(rows);
    } else if (!analysis.variants().empty()) {
      b += "<p class=\"note\">No comparison row for this placement.</p>\n";
    }
    b += "<div class=\"row\">\n";
    b += c.loss_frame.at(p) ? LossPanel(c, p, marks)
                            : "<p class=\"note\">No grid cell has a final loss or a diverged seed yet.</p>\n";
    b += LrsPanel(c, p);
    blocks.push_back(std::move(b));
  }
  // The legend once, beside the first placement's figures, when the marks are known.
  for (size_t i = 0; i < blocks.size(); ++i) {
    s += blocks[i];
    if (i == 0) s += LegendSvg(c, marks);
    s += "</div>\n";
  }
  return s;
}

}  // namespace normsweep::client::report
