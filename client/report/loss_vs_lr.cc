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

// One grid cell on the loss-vs-lr figure.
struct LossPoint {
  double lr = 0;
  std::optional<double> y;  // the mean loss over seeds; l0 for a cell with no usable seed
  int bad = 0;              // seeds diverged or with a non-finite loss
  bool all_bad = false;     // no usable seed: a cross at l0, or at the top edge without an l0
  bool plateau = false;     // a seed with a finite loss failed to train (the plateau): a hollow point
  bool not_converged = false;  // a seed ended near the unigram loss still learning: a diamond around the point
  const ResultCell* cell = nullptr;
};

// A warm-up's line of a placement, by lr. Failed, cancelled and pending
// cells have no point.
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

std::string LossVsLrSvg(const VariantView& v, const std::string& placement,
                        const std::vector<std::vector<LossPoint>>& lines, const Frame& scale) {
  Frame f;
  const std::vector<double> yticks = Ticks(scale.y0, scale.y1, 5);
  std::string s = OpenPlacementPanel(placement, "final validation loss against peak lr", scale, yticks, f);
  const std::string title = PlacementTitle(placement);
  s += Axes(f, LogLrTicks(v.lrs), yticks, "peak learning rate (log scale)", "final validation loss", LogLrLabel);
  const std::optional<double> l0 = PlacementL0(v, placement);
  if (l0 && *l0 >= f.y0 && *l0 <= f.y1) {
    const double y = f.Y(*l0);
    absl::StrAppend(&s, "<line class=\"l0-line\" x1=\"", Px(f.left), "\" x2=\"", Px(f.left + f.width), "\" y1=\"", Px(y),
                    "\" y2=\"", Px(y), "\"><title>", Escape(title), ": l0 (loss at initialisation) ", Num(*l0),
                    "</title></line>\n",
                    Text(f.left + 4, y - 4, absl::StrCat("l0 ", Num(*l0)), "class=\"tick small\""));
  }
  int drawn = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string colour = WarmupColour(i);
    const std::string name = absl::StrCat(title, ", warm-up ", v.warmups[i]);
    std::string segment, marks;
    auto flush = [&] {
      if (!segment.empty()) {
        absl::StrAppend(&s, "<polyline class=\"curve loss-lr\" fill=\"none\" stroke=\"", colour, "\"", DashAttr(i),
                        " points=\"", segment, "\"><title>", Escape(name), "</title></polyline>\n");
      }
      segment.clear();
    };
    for (const LossPoint& p : lines[i]) {
      ++drawn;
      const double x = f.X(std::log10(p.lr));
      const ResultCell& c = *p.cell;
      const std::string where = absl::StrCat(name, ", lr ", FormatLr(p.lr), ": ");
      if (p.all_bad) {
        const bool at_l0 = p.y.has_value();
        const double y = at_l0 ? f.Y(*p.y) : f.top + 6;
        if (at_l0) {
          absl::StrAppend(&segment, Px(x), ",", Px(y), " ");
        } else {
          flush();
        }
        absl::StrAppend(&marks, CrossPath(x, y, 5, "diverged-mark diverged-point",
                                          absl::StrCat(where, "no usable seed (", p.bad, "/", c.trials,
                                                       " diverged or non-finite), drawn ",
                                                       at_l0 ? absl::StrCat("at l0 ", Num(*p.y)) : "at the top: no l0")));
        continue;
      }
      const double y = f.Y(*p.y);
      absl::StrAppend(&segment, Px(x), ",", Px(y), " ");
      std::string tip = absl::StrCat(where, Num(*p.y), " (", c.seeds_with_loss, c.seeds_with_loss == 1 ? " seed" : " seeds");
      if (p.bad > 0) absl::StrAppend(&tip, "; ", p.bad, "/", c.trials, " diverged or non-finite, left out");
      if (p.plateau) absl::StrAppend(&tip, "; ", PlateauedWithLoss(c), "/", c.trials, " plateaued: failed to train");
      if (p.not_converged) {
        absl::StrAppend(&tip, "; ", c.not_converged, "/", c.trials,
                        " not converged: near the unigram loss but still learning, no failure");
      }
      tip += ")";
      if (p.bad > 0) {
        absl::StrAppend(&marks, "<circle class=\"partial-mark\" r=\"6.5\" cx=\"", Px(x), "\" cy=\"", Px(y), "\"/>\n");
      }
      if (p.not_converged) absl::StrAppend(&marks, NotConvergedMark(x, y, colour), "\n");
      if (p.plateau) {
        absl::StrAppend(&marks, "<circle class=\"plateau-point\" r=\"3.5\" cx=\"", Px(x), "\" cy=\"", Px(y),
                        "\" fill=\"#fff\" stroke=\"", colour, "\"><title>", Escape(tip), "</title></circle>\n");
        continue;
      }
      absl::StrAppend(&marks, "<circle class=\"loss-point\" r=\"3.5\" cx=\"", Px(x), "\" cy=\"", Px(y), "\" fill=\"",
                      colour, "\"><title>", Escape(tip), "</title></circle>\n");
    }
    flush();
    s += marks;
  }
  if (drawn == 0) {
    s += Text(f.left + f.width / 2, f.top + f.height / 2, "no final loss yet", "class=\"tick\" text-anchor=\"middle\"");
  }
  return s + "</svg>\n";
}

std::string LossVsLrLegendSvg(const VariantView& v, bool any_l0, bool any_partial, bool any_cross_at_l0,
                              bool any_cross_at_top, bool any_plateau, bool any_not_converged) {
  const int extra = 1 + any_partial + any_cross_at_l0 + any_cross_at_top + any_plateau + 2 * any_not_converged;
  const double h = 30 + 20 * v.warmups.size() + 26 + 20 * extra + 10;
  std::string s = SvgOpen(270, h, "loss against lr legend");
  double y = 18;
  s += Text(8, y, "line: warm-up steps", "class=\"tick\"");
  for (size_t i = 0; i < v.warmups.size(); ++i) {
    y += 20;
    absl::StrAppend(&s, "<line x1=\"10\" x2=\"44\" y1=\"", Px(y - 4), "\" y2=\"", Px(y - 4), "\" stroke=\"",
                    WarmupColour(i), "\"", DashAttr(i), " class=\"curve\"/><circle r=\"3.5\" cx=\"27\" cy=\"",
                    Px(y - 4), "\" fill=\"", WarmupColour(i), "\"/>", Text(52, y, std::to_string(v.warmups[i]), "class=\"tick\""));
  }
  y += 26;
  absl::StrAppend(&s, "<line x1=\"10\" x2=\"44\" y1=\"", Px(y - 4), "\" y2=\"", Px(y - 4), "\" class=\"l0-line\"/>",
                  Text(52, y, any_l0 ? "l0: loss at initialisation" : "l0: not reported", "class=\"tick\""));
  if (any_cross_at_l0) {
    y += 20;
    s += CrossPath(27, y - 4, 5, "diverged-mark legend-mark", "every seed diverged");
    s += Text(52, y, "every seed diverged: drawn at l0", "class=\"tick\"");
  }
  if (any_cross_at_top) {
    y += 20;
    s += CrossPath(27, y - 4, 5, "diverged-mark legend-mark", "every seed diverged");
    s += Text(52, y, "every seed diverged, no l0: at the top", "class=\"tick\"");
  }
  if (any_partial) {
    y += 20;
    absl::StrAppend(&s, "<circle class=\"partial-mark\" r=\"6.5\" cx=\"27\" cy=\"", Px(y - 4), "\"/>",
                    Text(52, y, "some seeds diverged: mean of the rest", "class=\"tick\""));
  }
  if (any_plateau) {
    y += 20;
    absl::StrAppend(&s, "<circle class=\"plateau-point\" r=\"3.5\" cx=\"27\" cy=\"", Px(y - 4),
                    "\" fill=\"#fff\" stroke=\"#555\"/>",
                    Text(52, y, "hollow: seeds plateaued (failed to train)", "class=\"tick\""));
  }
  if (any_not_converged) {
    y += 20;
    absl::StrAppend(&s, "<circle r=\"3.5\" cx=\"27\" cy=\"", Px(y - 4), "\" fill=\"#555\"/>",
                    NotConvergedMark(27, y - 4, "#555"), Text(52, y, "diamond: seeds not converged", "class=\"tick\""));
    y += 20;
    s += Text(52, y, "(near the unigram loss, still learning)", "class=\"tick\"");
  }
  return s + "</svg>\n";
}

}  // namespace

// Wortsman et al. 2023, Figure 1: final loss against log peak lr, a line per
// warm-up, a panel per placement (one y scale for both).
std::string LossVsLrSection(const VariantView& v) {
  std::map<std::string, std::vector<std::vector<LossPoint>>> lines;
  double lo = INFINITY, hi = -INFINITY;
  bool any_partial = false, any_cross_at_l0 = false, any_cross_at_top = false, any_l0 = false, any_plateau = false;
  bool any_not_converged = false;
  for (const std::string& p : v.placements) {
    if (const std::optional<double> l0 = PlacementL0(v, p)) {
      any_l0 = true;
      lo = std::min(lo, *l0);
      hi = std::max(hi, *l0);
    }
    for (int warmup : v.warmups) {
      std::vector<LossPoint> line = LossLine(v, p, warmup);
      for (const LossPoint& pt : line) {
        if (pt.y) {
          lo = std::min(lo, *pt.y);
          hi = std::max(hi, *pt.y);
        }
        any_partial |= !pt.all_bad && pt.bad > 0;
        any_cross_at_l0 |= pt.all_bad && pt.y.has_value();
        any_cross_at_top |= pt.all_bad && !pt.y.has_value();
        any_plateau |= !pt.all_bad && pt.plateau;
        any_not_converged |= !pt.all_bad && pt.not_converged;
      }
      lines[p].push_back(std::move(line));
    }
  }
  if (!std::isfinite(lo) && !any_cross_at_top) {
    return "<p class=\"note\">No grid cell has a final loss or a diverged seed yet.</p>\n";
  }
  if (!std::isfinite(lo)) {
    lo = 0;
    hi = 1;
  }
  const double pad = std::max((hi - lo) * 0.06, 0.02);
  Frame f{0, 0, 0, 0, 0, 0, std::max(0.0, lo - pad), hi + pad * (any_cross_at_top ? 3 : 1)};
  double lx0 = INFINITY, lx1 = -INFINITY;
  for (double lr : v.lrs) {
    if (!(lr > 0) || !std::isfinite(lr)) continue;
    lx0 = std::min(lx0, std::log10(lr));
    lx1 = std::max(lx1, std::log10(lr));
  }
  const double xpad = lx1 > lx0 ? (lx1 - lx0) * 0.06 : 0.5;
  f.x0 = lx0 - xpad;
  f.x1 = lx1 + xpad;
  std::string s = "<div class=\"row\">\n";
  for (const std::string& p : v.placements) s += LossVsLrSvg(v, p, lines[p], f);
  s += LossVsLrLegendSvg(v, any_l0, any_partial, any_cross_at_l0, any_cross_at_top, any_plateau, any_not_converged) +
       "</div>\n";
  if (!any_l0) {
    s += "<p class=\"note\">No loss at initialisation (l0) was reported for these trials: no l0 line, and cells "
         "where every seed diverged are drawn at the top edge.</p>\n";
  }
  return s;
}

}  // namespace normsweep::client::report
