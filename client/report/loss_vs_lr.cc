#include "client/report/figures.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/report/svg.h"
#include "client/results.h"

namespace normsweep::client::report {
namespace {

// The band at the top edge where l0 stands when it is above the data.
constexpr double kTopBand = 6;

std::string LogLrLabel(double x) { return FormatLr(std::pow(10, x)); }

// A diamond around a point whose cell has seeds that had not converged.
std::string NotConvergedMark(double x, double y, const std::string& colour) {
  constexpr double r = 6.5;
  return absl::StrCat("<path class=\"not-converged-mark\" fill=\"none\" stroke=\"", colour, "\" d=\"M", Px(x), ",",
                      Px(y - r), "L", Px(x + r), ",", Px(y), "L", Px(x), ",", Px(y + r), "L", Px(x - r), ",", Px(y),
                      "Z\"/>");
}

// Ticks at the grid's lrs (log10), every k-th one when there are many.
std::vector<double> LogLrTicks(const std::vector<double>& lrs) {
  std::vector<double> positive;
  for (double lr : lrs) {
    if (lr > 0 && std::isfinite(lr)) positive.push_back(lr);
  }
  const size_t every = std::max<size_t>(1, (positive.size() + 7) / 8);
  std::vector<double> out;
  for (size_t i = 0; i < positive.size(); i += every) out.push_back(std::log10(positive[i]));
  return out;
}

bool InRange(const Frame& f, double y) { return y >= f.y0 && y <= f.y1; }

std::string LossVsLrLegendSvg(const VariantView& v, const LossMarks& marks) {
  const double h = 30 + 20 * v.warmups.size() + 26 + 20 * LossMarksLegendRows(marks) + 10;
  std::string s = SvgOpen(270, h, "loss against lr legend");
  double y = 18;
  s += Text(8, y, "line: warm-up steps", "class=\"tick\"");
  for (size_t i = 0; i < v.warmups.size(); ++i) {
    y += 20;
    const std::string colour = WarmupColour(i, v.warmups.size());
    absl::StrAppend(&s, "<line x1=\"10\" x2=\"44\" y1=\"", Px(y - 4), "\" y2=\"", Px(y - 4), "\" stroke=\"", colour,
                    "\"", DashAttr(i), " class=\"curve\"/><circle r=\"3.5\" cx=\"27\" cy=\"", Px(y - 4), "\" fill=\"",
                    colour, "\"/>", Text(52, y, std::to_string(v.warmups[i]), "class=\"tick\""));
  }
  y += 26;
  s += LossMarksLegend(marks, y);
  return s + "</svg>\n";
}

}  // namespace

std::vector<LossPoint> LossLine(const VariantView& v, const std::string& placement, int warmup) {
  std::optional<double> l0;
  const v1::LrSensitivity* row = LrsRow(v, placement, warmup);
  if (row != nullptr && Finite(row->has_init_val_loss(), row->init_val_loss())) {
    l0 = row->init_val_loss();
  } else {
    l0 = PlacementL0(v, placement);
  }
  std::vector<LossPoint> out;
  for (const ResultCell& c : v.cells) {
    if (c.placement != placement || c.warmup_steps != warmup || !(c.peak_lr > 0) || !std::isfinite(c.peak_lr)) continue;
    LossPoint p;
    p.lr = c.peak_lr;
    p.cell = &c;
    p.bad = c.diverged + std::max(0, c.succeeded - c.seeds_with_loss);
    p.plateau = PlateauedWithLoss(c) > 0;
    p.not_converged = c.not_converged > 0;
    if (c.seeds_with_loss > 0 && std::isfinite(c.mean_final_val_loss)) {
      p.y = c.mean_final_val_loss;
    } else if (p.bad > 0) {
      p.all_bad = true;
      p.y = l0;
    } else {
      continue;
    }
    out.push_back(p);
  }
  std::sort(out.begin(), out.end(), [](const LossPoint& a, const LossPoint& b) { return a.lr < b.lr; });
  return out;
}

std::optional<Frame> LossFrame(const std::vector<const std::vector<LossPoint>*>& lines,
                               const std::vector<double>& lrs) {
  double lo = INFINITY, hi = -INFINITY, l0_lo = INFINITY, l0_hi = -INFINITY;
  bool any_point = false;
  for (const std::vector<LossPoint>* line : lines) {
    for (const LossPoint& p : *line) {
      any_point = true;
      if (!p.y) continue;
      if (p.all_bad) {
        l0_lo = std::min(l0_lo, *p.y);
        l0_hi = std::max(l0_hi, *p.y);
      } else {
        lo = std::min(lo, *p.y);
        hi = std::max(hi, *p.y);
      }
    }
  }
  if (!any_point) return std::nullopt;
  if (!std::isfinite(lo)) {  // no mean: l0 is the only height there is
    lo = std::isfinite(l0_lo) ? l0_lo : 0;
    hi = std::isfinite(l0_hi) ? l0_hi : 1;
  } else if (l0_lo < lo) {  // an l0 below every mean: in the range, nothing squashed above it
    lo = l0_lo;
  }
  const double pad = std::max((hi - lo) * 0.06, 0.02);
  Frame f{0, 0, 0, 0, 0, 0, std::max(0.0, lo - pad), hi + pad};
  // Room at the top edge for the cells drawn there (l0 above the data, or none).
  bool any_top = false;
  for (const std::vector<LossPoint>* line : lines) {
    for (const LossPoint& p : *line) any_top |= p.all_bad && !(p.y && InRange(f, *p.y));
  }
  if (any_top) f.y1 += 2 * pad;
  double lx0 = INFINITY, lx1 = -INFINITY;
  for (double lr : lrs) {
    if (!(lr > 0) || !std::isfinite(lr)) continue;
    lx0 = std::min(lx0, std::log10(lr));
    lx1 = std::max(lx1, std::log10(lr));
  }
  if (!std::isfinite(lx0)) lx0 = lx1 = -3;
  const double xpad = lx1 > lx0 ? (lx1 - lx0) * 0.06 : 0.5;
  f.x0 = lx0 - xpad;
  f.x1 = lx1 + xpad;
  return f;
}

std::string OpenLossPanel(const std::string& placement, const std::string& what, const std::vector<double>& lrs,
                          const Frame& scale, Frame& f) {
  const std::vector<double> yticks = Ticks(scale.y0, scale.y1, 5);
  std::string s = OpenPlacementPanel(placement, what, scale, yticks, f);
  return s + Axes(f, LogLrTicks(lrs), yticks, "peak learning rate (log scale)", "final validation loss", LogLrLabel);
}

std::string LossLineSvg(const Frame& f, const std::vector<LossPoint>& line, const std::string& colour,
                        const std::string& dash_attr, const std::string& name, LossMarks& marks) {
  std::string s, segment, marks_svg;
  auto flush = [&] {
    if (!segment.empty()) {
      absl::StrAppend(&s, "<polyline class=\"curve loss-lr\" fill=\"none\" stroke=\"", colour, "\"", dash_attr,
                      " points=\"", segment, "\"><title>", Escape(name), "</title></polyline>\n");
    }
    segment.clear();
  };
  for (const LossPoint& p : line) {
    const double x = f.X(std::log10(p.lr));
    const ResultCell& c = *p.cell;
    const std::string where = absl::StrCat(name, ", lr ", FormatLr(p.lr), ": ");
    if (p.all_bad) {
      const bool at_l0 = p.y && InRange(f, *p.y);
      const double y = at_l0 ? f.Y(*p.y) : f.top + kTopBand;
      if (at_l0) {
        absl::StrAppend(&segment, Px(x), ",", Px(y), " ");
        marks.cross_at_l0 = true;
      } else {
        flush();
        marks.cross_at_top = true;
      }
      std::string drawn = "drawn at the top: no l0";
      if (at_l0) {
        drawn = absl::StrCat("drawn at l0 ", Num(*p.y));
      } else if (p.y) {
        drawn = absl::StrCat("l0 ", Num(*p.y), ", above the data: drawn at the top");
      }
      absl::StrAppend(&marks_svg, CrossPath(x, y, 5, "diverged-mark diverged-point",
                                            absl::StrCat(where, "no usable seed (", p.bad, "/", c.trials,
                                                         " diverged or non-finite), ", drawn)));
      continue;
    }
    const double y = f.Y(*p.y);
    absl::StrAppend(&segment, Px(x), ",", Px(y), " ");
    std::string tip =
        absl::StrCat(where, Num(*p.y), " (", c.seeds_with_loss, c.seeds_with_loss == 1 ? " seed" : " seeds");
    if (p.bad > 0) absl::StrAppend(&tip, "; ", p.bad, "/", c.trials, " diverged or non-finite, left out");
    if (p.plateau) absl::StrAppend(&tip, "; ", PlateauedWithLoss(c), "/", c.trials, " plateaued: failed to train");
    if (p.not_converged) {
      absl::StrAppend(&tip, "; ", c.not_converged, "/", c.trials,
                      " not converged: near the unigram loss but still learning, no failure");
    }
    tip += ")";
    if (p.bad > 0) {
      marks.partial = true;
      absl::StrAppend(&marks_svg, "<circle class=\"partial-mark\" r=\"6.5\" cx=\"", Px(x), "\" cy=\"", Px(y), "\"/>\n");
    }
    if (p.not_converged) {
      marks.not_converged = true;
      absl::StrAppend(&marks_svg, NotConvergedMark(x, y, colour), "\n");
    }
    if (p.plateau) {
      marks.plateau = true;
      absl::StrAppend(&marks_svg, "<circle class=\"plateau-point\" r=\"3.5\" cx=\"", Px(x), "\" cy=\"", Px(y),
                      "\" fill=\"#fff\" stroke=\"", colour, "\"><title>", Escape(tip), "</title></circle>\n");
      continue;
    }
    absl::StrAppend(&marks_svg, "<circle class=\"loss-point\" r=\"3.5\" cx=\"", Px(x), "\" cy=\"", Px(y), "\" fill=\"",
                    colour, "\"><title>", Escape(tip), "</title></circle>\n");
  }
  flush();
  return s + marks_svg;
}

std::string L0Annotation(const Frame& f, const std::vector<double>& l0s, const std::string& title) {
  if (l0s.empty()) return "";
  const auto [lo, hi] = std::minmax_element(l0s.begin(), l0s.end());
  const std::string value = Num(*lo) == Num(*hi) ? Num(*lo) : absl::StrCat(Num(*lo), "\u2013", Num(*hi));
  double mean = 0;
  for (double l0 : l0s) mean += l0 / l0s.size();
  const bool inside = InRange(f, mean);
  const double y = inside ? f.Y(mean) : f.top + kTopBand;
  std::string s = absl::StrCat("<line class=\"l0-line\" x1=\"", Px(f.left), "\" x2=\"", Px(f.left + f.width),
                               "\" y1=\"", Px(y), "\" y2=\"", Px(y), "\"><title>", Escape(title),
                               ": l0 (loss at initialisation) ", value,
                               inside ? "" : ", above the data: the top edge stands for it", "</title></line>\n");
  if (inside) return s + Text(f.left + 4, y - 4, absl::StrCat("l0 ", value), "class=\"tick small\"");
  // Above the plot, left (the title is centred): clear of the data and of
  // the crosses at the top edge.
  return s + Text(f.left, f.top - 5, absl::StrCat("l0 ", value, " \u2191"), "class=\"tick small l0-label\"");
}

int LossMarksLegendRows(const LossMarks& m) {
  return 1 + m.partial + m.cross_at_l0 + m.cross_at_top + m.plateau + 2 * m.not_converged;
}

std::string LossMarksLegend(const LossMarks& m, double& y) {
  std::string s =
      absl::StrCat("<line x1=\"10\" x2=\"44\" y1=\"", Px(y - 4), "\" y2=\"", Px(y - 4), "\" class=\"l0-line\"/>",
                   Text(52, y, m.any_l0 ? "l0: loss at initialisation" : "l0: not reported", "class=\"tick\""));
  if (m.cross_at_l0) {
    y += 20;
    s += CrossPath(27, y - 4, 5, "diverged-mark legend-mark", "every seed diverged");
    s += Text(52, y, "every seed diverged: drawn at l0", "class=\"tick\"");
  }
  if (m.cross_at_top) {
    y += 20;
    s += CrossPath(27, y - 4, 5, "diverged-mark legend-mark", "every seed diverged");
    s += Text(52, y, m.any_l0 ? "every seed diverged: at the top" : "every seed diverged, no l0: at the top",
              "class=\"tick\"");
  }
  if (m.partial) {
    y += 20;
    absl::StrAppend(&s, "<circle class=\"partial-mark\" r=\"6.5\" cx=\"27\" cy=\"", Px(y - 4), "\"/>",
                    Text(52, y, "some seeds diverged: mean of the rest", "class=\"tick\""));
  }
  if (m.plateau) {
    y += 20;
    absl::StrAppend(&s, "<circle class=\"plateau-point\" r=\"3.5\" cx=\"27\" cy=\"", Px(y - 4),
                    "\" fill=\"#fff\" stroke=\"#555\"/>",
                    Text(52, y, "hollow: seeds plateaued (failed to train)", "class=\"tick\""));
  }
  if (m.not_converged) {
    y += 20;
    absl::StrAppend(&s, "<circle r=\"3.5\" cx=\"27\" cy=\"", Px(y - 4), "\" fill=\"#555\"/>",
                    NotConvergedMark(27, y - 4, "#555"), Text(52, y, "diamond: seeds not converged", "class=\"tick\""));
    y += 20;
    s += Text(52, y, "(near the unigram loss, still learning)", "class=\"tick\"");
  }
  return s;
}

// Wortsman et al. 2023, Figure 1: final loss against log peak lr, a line per
// warm-up, a panel per placement (one y scale for both).
std::string LossVsLrSection(const VariantView& v) {
  std::map<std::string, std::vector<std::vector<LossPoint>>> lines;
  std::vector<const std::vector<LossPoint>*> all;
  LossMarks marks;
  for (const std::string& p : v.placements) {
    marks.any_l0 |= PlacementL0(v, p).has_value();
    for (int warmup : v.warmups) lines[p].push_back(LossLine(v, p, warmup));
  }
  for (const auto& [p, by_warmup] : lines) {
    for (const std::vector<LossPoint>& line : by_warmup) all.push_back(&line);
  }
  const std::optional<Frame> scale = LossFrame(all, v.lrs);
  if (!scale) return "<p class=\"note\">No grid cell has a final loss or a diverged seed yet.</p>\n";
  std::string s = "<div class=\"row\">\n";
  for (const std::string& p : v.placements) {
    Frame f;
    const std::string title = PlacementTitle(p);
    std::string panel = OpenLossPanel(p, "final validation loss against peak lr", v.lrs, *scale, f);
    const std::optional<double> l0 = PlacementL0(v, p);
    panel += L0Annotation(f, l0 ? std::vector<double>{*l0} : std::vector<double>{}, title);
    int drawn = 0;
    for (size_t i = 0; i < lines[p].size(); ++i) {
      drawn += lines[p][i].size();
      panel += LossLineSvg(f, lines[p][i], WarmupColour(i, v.warmups.size()), DashAttr(i),
                           absl::StrCat(title, ", warm-up ", v.warmups[i]), marks);
    }
    if (drawn == 0) {
      panel += Text(f.left + f.width / 2, f.top + f.height / 2, "no final loss yet",
                    "class=\"tick\" text-anchor=\"middle\"");
    }
    s += panel + "</svg>\n";
  }
  s += LossVsLrLegendSvg(v, marks) + "</div>\n";
  if (!marks.any_l0) {
    s += "<p class=\"note\">No loss at initialisation (l0) was reported for these trials: no l0 line, and cells "
         "where every seed diverged are drawn at the top edge.</p>\n";
  }
  return s;
}

}  // namespace normsweep::client::report
