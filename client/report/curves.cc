#include "client/report/figures.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/report/svg.h"
#include "client/results.h"

namespace normsweep::client::report {
namespace {

struct CurveStyle {
  std::map<double, size_t> lr_colour;
  std::map<int, size_t> warmup_dash;
};

// Finite validation points of a trial, by step.
std::vector<std::pair<double, double>> ValCurve(const v1::GetTrialResponse& t) {
  std::vector<std::pair<double, double>> pts;
  for (const v1::MetricPoint& m : t.metrics()) {
    if (m.has_val_loss() && std::isfinite(m.val_loss())) pts.push_back({m.step(), m.val_loss()});
  }
  std::sort(pts.begin(), pts.end());
  return pts;
}

std::string CurvesSvg(const VariantView& v, const std::string& placement, const CurveStyle& style,
                      const Frame& scale) {
  Frame f;
  const std::vector<double> yticks = Ticks(scale.y0, scale.y1, 5);
  std::string s = OpenPlacementPanel(placement, "validation loss curves", scale, yticks, f);
  s += Axes(f, Ticks(f.x0, f.x1, 5), yticks, "step", "validation loss");
  const size_t placement_index = std::find(v.placements.begin(), v.placements.end(), placement) - v.placements.begin();
  const std::string clip = absl::StrCat("clip-", v.index, "-", placement_index);
  absl::StrAppend(&s, "<defs><clipPath id=\"", clip, "\"><rect x=\"", Px(f.left), "\" y=\"", Px(f.top), "\" width=\"",
                  Px(f.width), "\" height=\"", Px(f.height), "\"/></clipPath></defs><g clip-path=\"url(#", clip, ")\">\n");
  int drawn = 0;
  for (const v1::GetTrialResponse* t : v.trials.at(placement)) {
    const auto pts = ValCurve(*t);
    if (pts.empty()) continue;
    ++drawn;
    const v1::TrainConfig& c = t->trial().config();
    const std::string colour = LrColour(style.lr_colour.at(c.lr()), style.lr_colour.size());
    std::string points;
    for (const auto& [x, y] : pts) absl::StrAppend(&points, Px(f.X(x)), ",", Px(f.Y(std::min(y, kCurveCap))), " ");
    absl::StrAppend(&s, "<polyline class=\"curve\" fill=\"none\" stroke=\"", colour, "\"",
                    DashAttr(style.warmup_dash.at(c.warmup_steps())), " points=\"", points, "\"><title>trial ",
                    t->trial().id(), ": warm-up ", c.warmup_steps(), ", lr ", FormatLr(c.lr()), ", seed ", c.seed(),
                    "</title></polyline>\n");
    if (t->trial().state() == v1::TRIAL_DIVERGED) {
      const double x = f.X(pts.back().first), y = f.Y(std::min(pts.back().second, kCurveCap));
      absl::StrAppend(&s, "<path class=\"diverged-mark\" d=\"M", Px(x - 5), " ", Px(y - 5), " l10 10 m0 -10 l-10 10\"/>\n");
    }
  }
  s += "</g>\n";
  if (drawn == 0) {
    s += Text(f.left + f.width / 2, f.top + f.height / 2, "no validation points yet",
              "class=\"tick\" text-anchor=\"middle\"");
  }
  return s + "</svg>\n";
}

std::string CurveLegendSvg(const CurveStyle& style) {
  const double w = 250, h = 30 + 20 * (style.lr_colour.size() + style.warmup_dash.size()) + 30;
  std::string s = SvgOpen(w, h, "curve legend");
  double y = 18;
  s += Text(8, y, "colour: peak lr", "class=\"tick\"");
  for (const auto& [lr, i] : style.lr_colour) {
    y += 20;
    absl::StrAppend(&s, "<line x1=\"10\" x2=\"44\" y1=\"", Px(y - 4), "\" y2=\"", Px(y - 4), "\" stroke=\"",
                    LrColour(i, style.lr_colour.size()), "\" class=\"curve\"/>",
                    Text(52, y, FormatLr(lr), "class=\"tick\""));
  }
  y += 26;
  s += Text(8, y, "dash: warm-up steps", "class=\"tick\"");
  for (const auto& [warmup, i] : style.warmup_dash) {
    y += 20;
    absl::StrAppend(&s, "<line x1=\"10\" x2=\"44\" y1=\"", Px(y - 4), "\" y2=\"", Px(y - 4), "\" stroke=\"#333\"",
                    DashAttr(i), " class=\"curve\"/>", Text(52, y, std::to_string(warmup), "class=\"tick\""));
  }
  return s + "</svg>\n";
}

}  // namespace

std::string CurvesSection(const VariantView& v) {
  CurveStyle style;
  Frame f{0, 0, 0, 0, 0, 1, INFINITY, -INFINITY};
  for (const auto& [placement, trials] : v.trials) {
    for (const v1::GetTrialResponse* t : trials) {
      const v1::TrainConfig& c = t->trial().config();
      style.lr_colour.emplace(c.lr(), 0);
      style.warmup_dash.emplace(c.warmup_steps(), 0);
      for (const auto& [x, y] : ValCurve(*t)) {
        f.x1 = std::max(f.x1, x);
        f.y0 = std::min(f.y0, y);
        f.y1 = std::max(f.y1, std::min(y, kCurveCap));
      }
    }
  }
  size_t i = 0;
  for (auto& [lr, k] : style.lr_colour) k = i++;
  i = 0;
  for (auto& [w, k] : style.warmup_dash) k = i++;
  if (!std::isfinite(f.y0)) {
    f.y0 = 0;
    f.y1 = 1;
  }
  const double pad = std::max((f.y1 - f.y0) * 0.05, 0.01);
  f.y0 = std::max(0.0, f.y0 - pad);
  f.y1 += pad;
  f.x0 = 0;
  std::string s = "<div class=\"row\">\n";
  for (const std::string& p : v.placements) s += CurvesSvg(v, p, style, f);
  return s + CurveLegendSvg(style) + "</div>\n";
}

}  // namespace normsweep::client::report
