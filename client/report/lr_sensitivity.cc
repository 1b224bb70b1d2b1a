#include "client/report/figures.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/report/svg.h"
#include "client/results.h"

namespace normsweep::client::report {
namespace {

// LR sensitivity against warm-up steps, a line per placement, the legend to
// the right of the plot (a row per placement, however many), l* beside each
// point when there are at most two placements (PlaceLabels keeps them apart;
// with more, a column of labels at each warm-up would bury the lines: each
// point's tooltip and the table below say it).
std::string LrSensitivitySvg(const VariantView& v, const std::vector<int>& warmups) {
  const double legend_w = 150, w = 520 + legend_w;
  const double h = std::max(300.0, 30 + 18.0 * v.placements.size() + 20);
  const bool label_points = v.placements.size() <= 2;
  double hi = 0;
  for (const v1::LrSensitivity* r : v.lr_sensitivity) {
    if (Finite(r->has_lr_sensitivity(), r->lr_sensitivity())) hi = std::max(hi, r->lr_sensitivity());
  }
  const double y1 = hi > 0 ? hi * 1.25 : 0.1;
  const std::vector<double> yticks = Ticks(0, y1, 5);
  const double left = PlotLeft(yticks, TickLabel, 60);
  Frame f{left, 30, w - legend_w - left - 16, 300 - 30 - 50, -0.5, warmups.size() - 0.5, 0, y1};
  std::string s = SvgOpen(w, h, "LR sensitivity against warm-up steps");
  s += Text(f.left + f.width / 2, 18, "LR sensitivity by warm-up", "class=\"chart-title\" text-anchor=\"middle\"");
  std::vector<double> xticks;
  for (size_t i = 0; i < warmups.size(); ++i) xticks.push_back(i);
  s += Axes(f, xticks, yticks, "warm-up steps (the sweep's values)", "LR sensitivity",
            [&](double x) {
              const size_t i = static_cast<size_t>(std::lround(x));
              return i < warmups.size() ? std::to_string(warmups[i]) : "";
            });
  double ly = f.top + 4;
  std::vector<PointLabel> labels;
  std::vector<Polyline> lines;  // the labels keep off them
  for (size_t pi = 0; pi < v.placements.size(); ++pi) {
    const std::string& placement = v.placements[pi];
    const std::string colour = PlacementColour(placement);
    const std::string title = PlacementTitle(placement);
    std::string segment, marks;
    Polyline line;
    bool any = false;
    auto flush = [&] {
      if (!segment.empty()) {
        absl::StrAppend(&s, "<polyline class=\"curve lrs-line\" fill=\"none\" stroke=\"", colour, "\" points=\"",
                        segment, "\"><title>", Escape(title), ": LR sensitivity</title></polyline>\n");
        lines.push_back(std::move(line));
      }
      segment.clear();
      line.clear();
    };
    for (size_t i = 0; i < warmups.size(); ++i) {
      const v1::LrSensitivity* r = LrsRow(v, placement, warmups[i]);
      if (r == nullptr || !Finite(r->has_lr_sensitivity(), r->lr_sensitivity())) {
        flush();
        continue;
      }
      any = true;
      const double x = f.X(i), y = f.Y(r->lr_sensitivity());
      absl::StrAppend(&segment, Px(x), ",", Px(y), " ");
      line.push_back({x, y});
      std::string tip = absl::StrCat(title, ", warm-up ", warmups[i], ": LR sensitivity ", Num(r->lr_sensitivity()),
                                     "; l* ", OptText(r->has_best_val_loss(), r->best_val_loss()));
      if (r->has_best_lr()) absl::StrAppend(&tip, " at lr ", FormatLr(r->best_lr()));
      absl::StrAppend(&tip, "; l0 ", OptText(r->has_init_val_loss(), r->init_val_loss()), "; ", r->lrs(),
                      r->lrs() == 1 ? " lr" : " lrs", ", ", r->points_at_l0(), " seeds at l0");
      absl::StrAppend(&marks, "<circle class=\"lrs-point\" r=\"4\" cx=\"", Px(x), "\" cy=\"", Px(y), "\" fill=\"",
                      colour, "\"><title>", Escape(tip), "</title></circle>\n");
      if (label_points && Finite(r->has_best_val_loss(), r->best_val_loss())) {
        labels.push_back({x, y, absl::StrCat("l* ", Num(r->best_val_loss())), colour});
      }
    }
    flush();
    s += marks;
    ly += 18;
    const double lx = f.left + f.width + 12;
    absl::StrAppend(&s, "<line x1=\"", Px(lx), "\" x2=\"", Px(lx + 26), "\" y1=\"", Px(ly - 4), "\" y2=\"", Px(ly - 4),
                    "\" stroke=\"", colour, "\" class=\"curve\"/>",
                    Text(lx + 32, ly, any ? title : title + " (none yet)", "class=\"tick\""));
  }
  // Over every line and point, inside the plot (clear of the axes' labels),
  // from the left, a warm-up's labels in the placements' order.
  std::stable_sort(labels.begin(), labels.end(), [](const PointLabel& a, const PointLabel& b) { return a.x < b.x; });
  s += PlaceLabels(labels, lines, Box{f.left + 1, f.top + 1, f.left + f.width - 1, f.top + f.height - 1}, 4);
  return s + "</svg>\n";
}

}  // namespace

std::string LrSensitivitySection(const VariantView& v) {
  if (v.lr_sensitivity.empty()) {
    return "<p class=\"note\">No LR sensitivity for this variant: the lr_sensitivity view has no line for it "
           "(no grid cell yet).</p>\n";
  }
  std::set<int> warmup_set;
  int with_figure = 0;
  for (const v1::LrSensitivity* r : v.lr_sensitivity) {
    warmup_set.insert(r->warmup_steps());
    with_figure += Finite(r->has_lr_sensitivity(), r->lr_sensitivity());
  }
  const std::vector<int> warmups(warmup_set.begin(), warmup_set.end());
  std::string s;
  if (with_figure > 0) {
    s += "<div class=\"row\">\n" + LrSensitivitySvg(v, warmups);
  } else {
    s += "<p class=\"note\">No line has an LR sensitivity yet: a line needs every seed of each of its lrs final "
         "and the loss at initialisation (l0); the table says what is pending.</p>\n<div class=\"row\">\n";
  }
  s += "<table class=\"num\">\n<tr><th>placement</th><th>warm-up</th><th>lrs counted</th><th>lrs pending</th>"
       "<th>seeds at l0</th><th>best lr</th><th>l*</th><th>l0</th><th>LR sensitivity</th></tr>\n";
  for (const v1::LrSensitivity* r : v.lr_sensitivity) {
    absl::StrAppend(&s, "<tr><td>", Escape(PlacementTitle(r->placement())), "</td><td>", r->warmup_steps(), "</td><td>",
                    r->lrs(), "</td><td>", r->lrs_pending(), "</td><td>", r->points_at_l0(), "</td><td>",
                    r->has_best_lr() ? Escape(FormatLr(r->best_lr())) : "&ndash;", "</td><td>",
                    OptNum(r->has_best_val_loss(), r->best_val_loss()), "</td><td>",
                    OptNum(r->has_init_val_loss(), r->init_val_loss()), "</td><td>",
                    OptNum(r->has_lr_sensitivity(), r->lr_sensitivity()), "</td></tr>\n");
  }
  s += "</table>\n</div>\n";
  if (!v.lr_summary.empty()) {
    s += "<h3>Over the warm-ups</h3>\n<table class=\"num\">\n<tr><th>placement</th><th>warm-ups with a figure</th>"
         "<th>mean LR sensitivity</th><th>min (at warm-up)</th><th>max</th><th>best l*</th></tr>\n";
    for (const v1::PlacementLrSensitivity* r : v.lr_summary) {
      std::string min = OptNum(r->has_min_lr_sensitivity(), r->min_lr_sensitivity());
      if (r->has_warmup_of_min()) absl::StrAppend(&min, " (", r->warmup_of_min(), ")");
      absl::StrAppend(&s, "<tr><td>", Escape(PlacementTitle(r->placement())), "</td><td>", r->warmups(), "</td><td>",
                      OptNum(r->has_mean_lr_sensitivity(), r->mean_lr_sensitivity()), "</td><td>", min, "</td><td>",
                      OptNum(r->has_max_lr_sensitivity(), r->max_lr_sensitivity()), "</td><td>",
                      OptNum(r->has_best_val_loss(), r->best_val_loss()), "</td></tr>\n");
    }
    s += "</table>\n";
  }
  return s;
}

}  // namespace normsweep::client::report
