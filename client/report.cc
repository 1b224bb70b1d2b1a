#include "client/report.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include <google/protobuf/util/time_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/results.h"
#include "proto/schema/state_names.h"

namespace normsweep::client {
namespace {

std::string Esc(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Num(double v, int digits = 3) { return absl::StrFormat("%.*f", digits, v); }
std::string Opt(const std::optional<double>& v) { return v ? Num(*v) : "&ndash;"; }
// Coordinates in SVG.
std::string P(double v) { return absl::StrFormat("%.1f", v); }

// The viridis colour map (matplotlib's), 0 dark purple .. 1 yellow.
std::array<double, 3> Viridis(double t) {
  static constexpr double kStops[5][3] = {
      {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * 4;
  const int i = std::min(static_cast<int>(t), 3);
  const double f = t - i;
  std::array<double, 3> c;
  for (int k = 0; k < 3; ++k) c[k] = kStops[i][k] + f * (kStops[i + 1][k] - kStops[i][k]);
  return c;
}
std::string Hex(const std::array<double, 3>& c) {
  return absl::StrFormat("#%02x%02x%02x", static_cast<int>(std::lround(c[0])), static_cast<int>(std::lround(c[1])),
                         static_cast<int>(std::lround(c[2])));
}

// Low loss is good: bright yellow; high loss dark purple.
struct ColourScale {
  double lo = 0, hi = 1;
  double T(double v) const { return hi > lo ? 1 - (v - lo) / (hi - lo) : 1; }
  std::string Fill(double v) const { return Hex(Viridis(T(v))); }
  bool DarkText(double v) const { return T(v) > 0.55; }
};

// Round tick positions covering [lo, hi], about n of them.
std::vector<double> Ticks(double lo, double hi, int n) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / n;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> out;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) out.push_back(v);
  return out;
}
std::string TickLabel(double v) { return absl::StrFormat("%g", std::fabs(v) < 1e-12 ? 0.0 : v); }

// Categorical colours (Tableau 10) for curves, and dash patterns.
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr const char* kDashes[] = {"", "7 4", "2 3", "10 3 2 3", "4 2 1 2 1 2"};
std::string Colour(size_t i) { return kPalette[i % std::size(kPalette)]; }
std::string DashAttr(size_t i) {
  const char* d = kDashes[i % std::size(kDashes)];
  return *d ? absl::StrCat(" stroke-dasharray=\"", d, "\"") : "";
}
std::string PlacementColour(const std::string& placement) {
  return placement == "post" ? "#d62728" : placement == "pre" ? "#1f77b4" : "#7f7f7f";
}

int Depth(const v1::GetTrialResponse& t) {
  if (t.trial().config().layers() > 0) return t.trial().config().layers();
  int layers = 0;
  for (const v1::LayerGradNorms& g : t.layer_grad_norms()) {
    for (const v1::LayerGradNorm& n : g.norms()) layers = std::max(layers, n.layer() + 1);
  }
  return layers;
}

struct Mean {
  double sum = 0;
  int n = 0;
  void Add(double v) {
    sum += v;
    ++n;
  }
  double value() const { return sum / n; }
};

// Step-0 W1/W2 norms per layer, mean over seeds: a seed's trials (one per
// grid cell, identical at step 0) are averaged first, as step0_grad_norms does.
struct LayerNorms {
  std::map<int, double> w1, w2;  // layer -> mean over seeds
  int seeds = 0;
};
LayerNorms Step0Norms(const std::vector<const v1::GetTrialResponse*>& trials) {
  std::map<int, std::map<int, std::array<Mean, 2>>> per_seed;  // seed -> layer -> {w1, w2}
  for (const v1::GetTrialResponse* t : trials) {
    for (const v1::LayerGradNorms& g : t->layer_grad_norms()) {
      if (g.step() != 0) continue;
      for (const v1::LayerGradNorm& n : g.norms()) {
        if (!std::isfinite(n.norm())) continue;
        const int m = n.matrix() == "ffn.fc1" ? 0 : n.matrix() == "ffn.fc2" ? 1 : -1;
        if (m >= 0) per_seed[t->trial().config().seed()][n.layer()][m].Add(n.norm());
      }
    }
  }
  std::map<int, std::array<Mean, 2>> over_seeds;
  for (const auto& [seed, layers] : per_seed) {
    for (const auto& [layer, m] : layers) {
      for (int k = 0; k < 2; ++k) {
        if (m[k].n > 0) over_seeds[layer][k].Add(m[k].value());
      }
    }
  }
  LayerNorms out;
  out.seeds = static_cast<int>(per_seed.size());
  for (const auto& [layer, m] : over_seeds) {
    if (m[0].n > 0) out.w1[layer] = m[0].value();
    if (m[1].n > 0) out.w2[layer] = m[1].value();
  }
  return out;
}

// A plot area inside an SVG: data coordinates to pixels.
struct Frame {
  double left, top, width, height;
  double x0, x1, y0, y1;
  double X(double x) const { return left + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * width; }
  double Y(double y) const { return top + height - (y1 > y0 ? (y - y0) / (y1 - y0) : 0.5) * height; }
};

std::string SvgOpen(double w, double h, const std::string& label) {
  return absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" "
      "aria-label=\"%s\">\n",
      static_cast<int>(w), static_cast<int>(h), static_cast<int>(w), static_cast<int>(h), Esc(label));
}

std::string Text(double x, double y, const std::string& text, const std::string& attrs = "") {
  return absl::StrCat("<text x=\"", P(x), "\" y=\"", P(y), "\"", attrs.empty() ? "" : " ", attrs, ">", Esc(text),
                      "</text>\n");
}

// Axes with ticks, labels and titles around a frame.
std::string Axes(const Frame& f, const std::vector<double>& xticks, const std::vector<double>& yticks,
                 const std::string& xtitle, const std::string& ytitle,
                 const std::function<std::string(double)>& xlabel = TickLabel) {
  std::string s = absl::StrCat("<rect x=\"", P(f.left), "\" y=\"", P(f.top), "\" width=\"", P(f.width),
                               "\" height=\"", P(f.height), "\" class=\"plot\"/>\n");
  for (double y : yticks) {
    absl::StrAppend(&s, "<line x1=\"", P(f.left), "\" x2=\"", P(f.left + f.width), "\" y1=\"", P(f.Y(y)), "\" y2=\"",
                    P(f.Y(y)), "\" class=\"grid\"/>\n",
                    Text(f.left - 6, f.Y(y) + 4, TickLabel(y), "class=\"tick\" text-anchor=\"end\""));
  }
  for (double x : xticks) {
    absl::StrAppend(&s, "<line x1=\"", P(f.X(x)), "\" x2=\"", P(f.X(x)), "\" y1=\"", P(f.top + f.height),
                    "\" y2=\"", P(f.top + f.height + 4), "\" class=\"axis\"/>\n",
                    Text(f.X(x), f.top + f.height + 17, xlabel(x), "class=\"tick\" text-anchor=\"middle\""));
  }
  absl::StrAppend(&s, Text(f.left + f.width / 2, f.top + f.height + 36, xtitle, "class=\"axis-title\" text-anchor=\"middle\""),
                  Text(14, f.top + f.height / 2, ytitle,
                       absl::StrCat("class=\"axis-title\" text-anchor=\"middle\" transform=\"rotate(-90 14 ",
                                    P(f.top + f.height / 2), ")\"")));
  return s;
}

// The trials of one variant, and the grid axes both placements share.
struct VariantView {
  int index = 0;  // position on the page, for unique element ids
  std::string variant;
  std::vector<std::string> placements;
  std::map<std::string, std::vector<const v1::GetTrialResponse*>> trials;  // by placement
  std::vector<ResultCell> cells;                                          // the view's cells of this variant
  std::vector<int> warmups;
  std::vector<double> lrs;
  std::optional<double> best_cell;
  ColourScale scale;
};

std::vector<VariantView> Variants(const ReportData& data) {
  std::map<std::string, VariantView> by_variant;
  for (const v1::GetTrialResponse& t : data.trials) {
    VariantView& v = by_variant[t.trial().variant()];
    v.variant = t.trial().variant();
    v.trials[t.trial().config().placement()].push_back(&t);
  }
  for (const ResultCell& c : CellsFromAnalysis(data.analysis)) {
    auto it = by_variant.find(c.variant);
    if (it != by_variant.end()) it->second.cells.push_back(c);
  }
  std::vector<VariantView> out;
  for (auto& [name, v] : by_variant) {
    v.index = static_cast<int>(out.size());
    for (const auto& [placement, unused] : v.trials) v.placements.push_back(placement);
    std::set<int> warmups;
    std::set<double> lrs;
    double lo = INFINITY, hi = -INFINITY;
    for (const ResultCell& c : v.cells) {
      warmups.insert(c.warmup_steps);
      lrs.insert(c.peak_lr);
      if (c.seeds_with_loss == 0) continue;
      lo = std::min(lo, c.mean_final_val_loss);
      hi = std::max(hi, c.mean_final_val_loss);
    }
    v.warmups.assign(warmups.begin(), warmups.end());
    v.lrs.assign(lrs.begin(), lrs.end());
    if (std::isfinite(lo)) {
      v.best_cell = lo;
      v.scale = {lo, hi};
    }
    out.push_back(std::move(v));
  }
  return out;
}

constexpr double kCellW = 84, kCellH = 46;

std::string HeatmapSvg(const VariantView& v, const std::string& placement) {
  std::map<std::pair<int, double>, const ResultCell*> grid;
  for (const ResultCell& c : v.cells) {
    if (c.placement == placement) grid[{c.warmup_steps, c.peak_lr}] = &c;
  }
  const double left = 78, top = 34;
  const double w = left + kCellW * v.lrs.size() + 12, h = top + kCellH * v.warmups.size() + 48;
  const std::string title = PlacementTitle(placement);
  std::string s = SvgOpen(w, h, title + ": final validation loss heatmap");
  s += Text(left + kCellW * v.lrs.size() / 2, 20, title, "class=\"chart-title\" text-anchor=\"middle\"");
  for (size_t r = 0; r < v.warmups.size(); ++r) {
    const double y = top + kCellH * r;
    s += Text(left - 8, y + kCellH / 2 + 4, std::to_string(v.warmups[r]), "class=\"tick\" text-anchor=\"end\"");
    for (size_t c = 0; c < v.lrs.size(); ++c) {
      const double x = left + kCellW * c;
      auto it = grid.find({v.warmups[r], v.lrs[c]});
      const ResultCell* cell = it == grid.end() ? nullptr : it->second;
      std::string fill = "#ffffff", cls = "cell", main = "\u2013", sub;
      bool dark_text = true;
      if (cell != nullptr && cell->seeds_with_loss > 0) {
        fill = v.scale.Fill(cell->mean_final_val_loss);
        dark_text = v.scale.DarkText(cell->mean_final_val_loss);
        main = Num(cell->mean_final_val_loss);
        if (cell->seeds_with_loss > 1) sub = absl::StrCat("\u00b1", Num(cell->std_final_val_loss));
        if (cell->diverged > 0) absl::StrAppend(&sub, sub.empty() ? "" : " ", cell->diverged, "/", cell->trials, " div");
        if (v.best_cell && cell->mean_final_val_loss <= *v.best_cell * (1 + kNearBestTolerance)) cls += " near";
      } else if (cell != nullptr && cell->diverged > 0) {
        fill = "url(#diverged)";
        cls += " diverged";
        main = "diverged";
        sub = absl::StrCat(cell->diverged, "/", cell->trials, " seeds");
      } else if (cell != nullptr && cell->failed > 0) {
        fill = "#bdbdbd";
        main = "failed";
      } else if (cell != nullptr && cell->unfinished > 0) {
        fill = "#f0f0f0";
        main = "pending";
      }
      absl::StrAppend(&s, "<rect x=\"", P(x), "\" y=\"", P(y), "\" width=\"", P(kCellW), "\" height=\"", P(kCellH),
                      "\" fill=\"", fill, "\" class=\"", cls, "\"><title>", Esc(title), ", warm-up ",
                      v.warmups[r], ", lr ", FormatLr(v.lrs[c]), ": ", Esc(main), " ", Esc(sub),
                      "</title></rect>\n");
      const std::string text_cls = dark_text ? "cell-text" : "cell-text light";
      s += Text(x + kCellW / 2, y + (sub.empty() ? kCellH / 2 + 5 : kCellH / 2 - 2), main,
                absl::StrCat("class=\"", text_cls, "\" text-anchor=\"middle\""));
      if (!sub.empty()) {
        s += Text(x + kCellW / 2, y + kCellH / 2 + 13, sub,
                  absl::StrCat("class=\"", text_cls, " small\" text-anchor=\"middle\""));
      }
    }
  }
  for (size_t c = 0; c < v.lrs.size(); ++c) {
    s += Text(left + kCellW * (c + 0.5), top + kCellH * v.warmups.size() + 17, FormatLr(v.lrs[c]),
              "class=\"tick\" text-anchor=\"middle\"");
  }
  s += Text(left + kCellW * v.lrs.size() / 2, h - 8, "peak learning rate", "class=\"axis-title\" text-anchor=\"middle\"");
  const double mid = top + kCellH * v.warmups.size() / 2;
  s += Text(16, mid, "warm-up steps",
            absl::StrCat("class=\"axis-title\" text-anchor=\"middle\" transform=\"rotate(-90 16 ", P(mid), ")\""));
  return s + "</svg>\n";
}

// The colour bar shared by a variant's heatmaps, with the cell legend.
std::string ScaleLegendSvg(const VariantView& v) {
  const double w = 250, h = 300, bar_top = 34, bar_h = 160, bar_x = 16, bar_w = 22;
  std::string s = SvgOpen(w, h, "colour scale");
  s += Text(bar_x, 20, "mean final val loss", "class=\"tick\"");
  const std::string id = absl::StrCat("scale-", v.index);
  s += "<defs><linearGradient id=\"" + id + "\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"1\">";
  for (int i = 0; i <= 8; ++i) {
    absl::StrAppend(&s, "<stop offset=\"", Num(i / 8.0), "\" stop-color=\"", Hex(Viridis(1 - i / 8.0)), "\"/>");
  }
  s += "</linearGradient></defs>\n";
  absl::StrAppend(&s, "<rect x=\"", P(bar_x), "\" y=\"", P(bar_top), "\" width=\"", P(bar_w), "\" height=\"",
                  P(bar_h), "\" fill=\"url(#", id, ")\" class=\"bar\"/>\n");
  const double lo = v.scale.lo, hi = v.scale.hi;
  std::vector<double> ticks = {lo};
  if (hi > lo) {
    for (double t : Ticks(lo, hi, 4)) {
      if (t > lo + (hi - lo) * 0.08 && t < hi - (hi - lo) * 0.08) ticks.push_back(t);
    }
    ticks.push_back(hi);
  }
  for (double t : ticks) {
    const double y = bar_top + (hi > lo ? (t - lo) / (hi - lo) : 0) * bar_h;
    absl::StrAppend(&s, "<line x1=\"", P(bar_x + bar_w), "\" x2=\"", P(bar_x + bar_w + 5), "\" y1=\"", P(y),
                    "\" y2=\"", P(y), "\" class=\"axis\"/>\n",
                    Text(bar_x + bar_w + 8, y + 4, (t == lo || t == hi) ? Num(t) : TickLabel(t), "class=\"tick\""));
  }
  s += Text(bar_x + bar_w + 52, bar_top + 10, "(best)", "class=\"tick small\"");
  double y = bar_top + bar_h + 22;
  absl::StrAppend(&s, "<rect x=\"", P(bar_x), "\" y=\"", P(y), "\" width=\"22\" height=\"14\" fill=\"url(#diverged)\"/>",
                  Text(bar_x + 30, y + 11, "no loss: k/n seeds diverged", "class=\"tick\""));
  y += 22;
  absl::StrAppend(&s, "<rect x=\"", P(bar_x), "\" y=\"", P(y), "\" width=\"22\" height=\"14\" fill=\"#ffffff\" class=\"cell near\"/>",
                  Text(bar_x + 30, y + 11, absl::StrFormat("within %g%% of the best cell", kNearBestTolerance * 100),
                       "class=\"tick\""));
  y += 22;
  absl::StrAppend(&s, "<rect x=\"", P(bar_x), "\" y=\"", P(y), "\" width=\"22\" height=\"14\" fill=\"#bdbdbd\" class=\"cell\"/>",
                  Text(bar_x + 30, y + 11, "failed (error), no loss", "class=\"tick\""));
  y += 22;
  absl::StrAppend(&s, "<rect x=\"", P(bar_x), "\" y=\"", P(y), "\" width=\"22\" height=\"14\" fill=\"#f0f0f0\" class=\"cell\"/>",
                  Text(bar_x + 30, y + 11, "pending / running", "class=\"tick\""));
  return s + "</svg>\n";
}

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

// Above the divergence threshold (1.5 ln 256, the trainer's default) a curve
// is off the chart: it would squash every other one.
constexpr double kCurveCap = 8.318;

std::string CurvesSvg(const VariantView& v, const std::string& placement, const CurveStyle& style,
                      const Frame& scale) {
  const double w = 470, h = 300;
  Frame f = scale;
  f.left = 58;
  f.top = 30;
  f.width = w - f.left - 14;
  f.height = h - f.top - 50;
  const std::string title = PlacementTitle(placement);
  std::string s = SvgOpen(w, h, title + ": validation loss curves");
  s += Text(f.left + f.width / 2, 18, title, "class=\"chart-title\" text-anchor=\"middle\"");
  s += Axes(f, Ticks(f.x0, f.x1, 5), Ticks(f.y0, f.y1, 5), "step", "validation loss");
  const size_t placement_index = std::find(v.placements.begin(), v.placements.end(), placement) - v.placements.begin();
  const std::string clip = absl::StrCat("clip-", v.index, "-", placement_index);
  absl::StrAppend(&s, "<defs><clipPath id=\"", clip, "\"><rect x=\"", P(f.left), "\" y=\"", P(f.top), "\" width=\"",
                  P(f.width), "\" height=\"", P(f.height), "\"/></clipPath></defs><g clip-path=\"url(#", clip, ")\">\n");
  int drawn = 0;
  for (const v1::GetTrialResponse* t : v.trials.at(placement)) {
    const auto pts = ValCurve(*t);
    if (pts.empty()) continue;
    ++drawn;
    const v1::TrainConfig& c = t->trial().config();
    const std::string colour = Colour(style.lr_colour.at(c.lr()));
    std::string points;
    for (const auto& [x, y] : pts) absl::StrAppend(&points, P(f.X(x)), ",", P(f.Y(std::min(y, kCurveCap))), " ");
    absl::StrAppend(&s, "<polyline class=\"curve\" fill=\"none\" stroke=\"", colour, "\"",
                    DashAttr(style.warmup_dash.at(c.warmup_steps())), " points=\"", points, "\"><title>trial ",
                    t->trial().id(), ": warm-up ", c.warmup_steps(), ", lr ", FormatLr(c.lr()), ", seed ", c.seed(),
                    "</title></polyline>\n");
    if (t->trial().state() == v1::TRIAL_DIVERGED) {
      const double x = f.X(pts.back().first), y = f.Y(std::min(pts.back().second, kCurveCap));
      absl::StrAppend(&s, "<path class=\"diverged-mark\" d=\"M", P(x - 5), " ", P(y - 5), " l10 10 m0 -10 l-10 10\"/>\n");
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
    absl::StrAppend(&s, "<line x1=\"10\" x2=\"44\" y1=\"", P(y - 4), "\" y2=\"", P(y - 4), "\" stroke=\"", Colour(i),
                    "\" class=\"curve\"/>", Text(52, y, FormatLr(lr), "class=\"tick\""));
  }
  y += 26;
  s += Text(8, y, "dash: warm-up steps", "class=\"tick\"");
  for (const auto& [warmup, i] : style.warmup_dash) {
    y += 20;
    absl::StrAppend(&s, "<line x1=\"10\" x2=\"44\" y1=\"", P(y - 4), "\" y2=\"", P(y - 4), "\" stroke=\"#333\"",
                    DashAttr(i), " class=\"curve\"/>", Text(52, y, std::to_string(warmup), "class=\"tick\""));
  }
  return s + "</svg>\n";
}

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

std::string GradNormsSection(const VariantView& v) {
  std::map<std::string, LayerNorms> norms;
  int layers = 0;
  double hi = 0;
  for (const auto& [placement, trials] : v.trials) {
    LayerNorms n = Step0Norms(trials);
    if (n.w1.empty() && n.w2.empty()) continue;
    for (const auto* m : {&n.w1, &n.w2}) {
      for (const auto& [layer, value] : *m) {
        layers = std::max(layers, layer + 1);
        hi = std::max(hi, value);
      }
    }
    norms[placement] = std::move(n);
  }
  if (norms.empty()) return "<p class=\"note\">No step-0 gradient norms were reported.</p>\n";
  const double w = 520, h = 300;
  Frame f{60, 30, w - 60 - 16, h - 30 - 50, -0.5, layers - 0.5, 0, hi * 1.08};
  std::string s = "<div class=\"row\">\n" + SvgOpen(w, h, "step-0 FFN gradient norms per layer");
  s += Text(f.left + f.width / 2, 18, "||dL/dW||_F at step 0, mean over seeds",
            "class=\"chart-title\" text-anchor=\"middle\"");
  std::vector<double> xticks;
  const int every = std::max(1, layers / 12);
  for (int l = 0; l < layers; l += every) xticks.push_back(l);
  s += Axes(f, xticks, Ticks(0, f.y1, 5), "layer (0 = nearest the input)", "gradient norm");
  std::string legend = SvgOpen(250, 30 + 22 * 2 * norms.size(), "gradient norm legend");
  double ly = 0;
  for (const auto& [placement, n] : norms) {
    for (int k = 0; k < 2; ++k) {
      const std::map<int, double>& m = k == 0 ? n.w1 : n.w2;
      const std::string colour = PlacementColour(placement);
      const std::string name = absl::StrCat(PlacementTitle(placement), k == 0 ? " W1 (fc1)" : " W2 (fc2)");
      std::string points, marks;
      for (const auto& [layer, value] : m) {
        absl::StrAppend(&points, P(f.X(layer)), ",", P(f.Y(value)), " ");
        absl::StrAppend(&marks, k == 0 ? "<circle r=\"3.5\" cx=\"" : "<rect width=\"7\" height=\"7\" x=\"",
                        P(f.X(layer) - (k == 0 ? 0 : 3.5)), k == 0 ? "\" cy=\"" : "\" y=\"",
                        P(f.Y(value) - (k == 0 ? 0 : 3.5)), "\" fill=\"", colour, "\"><title>", Esc(name),
                        ", layer ", layer, ": ", Num(value, 4), "</title>", k == 0 ? "</circle>" : "</rect>", "\n");
      }
      absl::StrAppend(&s, "<polyline class=\"curve\" fill=\"none\" stroke=\"", colour, "\"", DashAttr(k),
                      " points=\"", points, "\"/>\n", marks);
      ly += 22;
      absl::StrAppend(&legend, "<line x1=\"10\" x2=\"44\" y1=\"", P(ly - 4), "\" y2=\"", P(ly - 4), "\" stroke=\"",
                      colour, "\"", DashAttr(k), " class=\"curve\"/>",
                      Text(52, ly, absl::StrCat(name, " (", n.seeds, n.seeds == 1 ? " seed)" : " seeds)"),
                           "class=\"tick\""));
    }
  }
  return s + "</svg>\n" + legend + "</svg>\n</div>\n";
}

// Step-0 last-layer W2 norm by depth and placement, when the sweep varies
// the depth: the paper's "Post-LN stays, Pre-LN falls as 1/sqrt(L)".
std::string DepthTable(const ReportData& data) {
  std::map<std::pair<std::string, int>, std::vector<const v1::GetTrialResponse*>> by;
  std::set<int> depths;
  std::set<std::string> placements;
  for (const v1::GetTrialResponse& t : data.trials) {
    const int d = Depth(t);
    if (d <= 0) continue;
    by[{t.trial().config().placement(), d}].push_back(&t);
    depths.insert(d);
    placements.insert(t.trial().config().placement());
  }
  if (depths.size() < 2) return "";
  std::string s =
      "<h2>Last layer&rsquo;s W2 gradient norm at step 0, by depth</h2>\n<table class=\"num\">\n<tr><th>layers</th>";
  for (const std::string& p : placements) absl::StrAppend(&s, "<th>", Esc(PlacementTitle(p)), "</th>");
  s += "</tr>\n";
  for (int d : depths) {
    absl::StrAppend(&s, "<tr><td>", d, "</td>");
    for (const std::string& p : placements) {
      auto it = by.find({p, d});
      std::optional<double> v;
      if (it != by.end()) {
        LayerNorms n = Step0Norms(it->second);
        auto last = n.w2.find(d - 1);
        if (last != n.w2.end()) v = last->second;
      }
      absl::StrAppend(&s, "<td>", v ? Num(*v, 4) : "&ndash;", "</td>");
    }
    s += "</tr>\n";
  }
  return s + "</table>\n";
}

std::string SummaryTable(const std::vector<PlacementSummary>& rows, bool show_variant) {
  std::string s = absl::StrCat(
      "<table class=\"num\">\n<tr>", show_variant ? "<th>variant</th>" : "",
      "<th>placement</th><th>trials</th><th>succeeded</th><th>diverged</th><th>failed</th><th>unfinished</th>"
      "<th>best final val loss</th><th>median</th><th>grid cells near the best</th></tr>\n");
  for (const PlacementSummary& r : rows) {
    const std::string near =
        r.grid_cells > 0 ? absl::StrFormat("%d / %d (%.0f%%)", r.cells_near_best, r.grid_cells,
                                           100.0 * r.cells_near_best / r.grid_cells)
                         : "&ndash;";
    absl::StrAppend(&s, "<tr>", show_variant ? absl::StrCat("<td>", Esc(r.variant), "</td>") : "", "<td>",
                    Esc(PlacementTitle(r.placement)), "</td><td>", r.trials, "</td><td>", r.succeeded, "</td><td>",
                    r.diverged, "</td><td>", r.failed, "</td><td>", r.unfinished + r.cancelled, "</td><td>",
                    Opt(r.best_val_loss), "</td><td>", Opt(r.median_val_loss), "</td><td>", near, "</td></tr>\n");
  }
  return s + "</table>\n";
}

constexpr char kStyle[] = R"css(
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 24px 32px; color: #222; background: #fff; }
h1 { font-size: 22px; margin: 0 0 6px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
p { max-width: 70em; line-height: 1.4; }
.meta { color: #555; }
.note { color: #555; font-style: italic; }
.row { display: flex; flex-wrap: wrap; gap: 18px; align-items: flex-start; }
table.num { border-collapse: collapse; font-size: 13px; }
table.num th, table.num td { border: 1px solid #ccc; padding: 4px 10px; text-align: right; }
table.num th { background: #f3f3f3; }
svg text { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; }
.chart-title { font-size: 14px; font-weight: bold; fill: #222; }
.tick { font-size: 11px; fill: #333; }
.small { font-size: 10px; }
.axis-title { font-size: 12px; fill: #222; }
.plot { fill: none; stroke: #888; }
.bar { stroke: #888; }
.grid { stroke: #e6e6e6; }
.axis { stroke: #888; }
.cell { stroke: #fff; stroke-width: 1; }
.cell.near { stroke: #000; stroke-width: 3; }
.cell-text { font-size: 12px; fill: #111; }
.cell-text.light { fill: #fff; }
.curve { stroke-width: 1.6; }
.diverged-mark { stroke: #d62728; stroke-width: 2.2; fill: none; }
)css";

// Hatching for cells where every seed diverged.
constexpr char kDefs[] =
    "<svg width=\"0\" height=\"0\" style=\"position:absolute\" aria-hidden=\"true\"><defs>"
    "<pattern id=\"diverged\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" "
    "patternTransform=\"rotate(45)\"><rect width=\"8\" height=\"8\" fill=\"#f7d4d4\"/>"
    "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"8\" stroke=\"#d62728\" stroke-width=\"3\"/></pattern></defs></svg>\n";

std::string SweepStateName(v1::SweepState s) {
  if (s == v1::SWEEP_STATE_UNSPECIFIED || !v1::SweepState_IsValid(s)) return "unknown state";
  return absl::AsciiStrToLower(schema::SweepStateName(s));
}

// The first trial's resolved config; the sweep's extra axes say what varies.
std::string ModelLine(const v1::TrainConfig& c, const v1::SweepSpec& spec) {
  std::string varied;
  for (const v1::ExtraAxis& axis : spec.extra_axes()) {
    absl::StrAppend(&varied, varied.empty() ? "; varied: " : ", ", axis.field(), " = ", absl::StrJoin(axis.values(), " / "));
  }
  return absl::StrCat(c.layers(), " layers, d_model ", c.d_model(), ", ", c.heads(), " heads, d_ff ", c.d_ff(),
                      ", seq_len ", c.seq_len(), "; ", c.optimizer().empty() ? "adam" : c.optimizer(), ", schedule ",
                      c.schedule().empty() ? "constant" : c.schedule(), ", ", c.steps(), " steps, batch ",
                      c.batch_size(), "; data ", c.data_file().empty() ? c.task() : c.data_file(), varied);
}

}  // namespace

std::vector<PlacementSummary> SummariesFromAnalysis(const v1::GetSweepAnalysisResponse& analysis) {
  auto opt = [](bool has, double v) { return has ? std::optional<double>(v) : std::nullopt; };
  std::vector<PlacementSummary> out;
  for (const v1::PlacementSensitivity& p : analysis.placements()) {
    PlacementSummary& r = out.emplace_back();
    r.variant = p.variant();
    r.placement = p.placement();
    r.trials = p.trials();
    r.succeeded = p.succeeded();
    r.diverged = p.diverged();
    r.failed = p.failed();
    r.cancelled = p.cancelled();
    r.unfinished = p.unfinished();
    r.best_val_loss = opt(p.has_best_val_loss(), p.best_val_loss());
    r.median_val_loss = opt(p.has_median_val_loss(), p.median_val_loss());
    r.grid_cells = p.grid_cells();
    r.cells_near_best = p.cells_near_best();
    r.best_cell_val_loss = opt(p.has_best_cell_val_loss(), p.best_cell_val_loss());
  }
  return out;
}

absl::StatusOr<ReportData> FetchReportData(SweepClient& client, int64_t sweep_id) {
  ReportData data;
  absl::StatusOr<v1::Sweep> sweep = client.GetSweep(sweep_id);
  if (!sweep.ok()) return sweep.status();
  data.sweep = *std::move(sweep);
  absl::StatusOr<std::vector<v1::Trial>> trials = client.ListTrials(sweep_id);
  if (!trials.ok()) return trials.status();
  for (const v1::Trial& t : *trials) {
    absl::StatusOr<v1::GetTrialResponse> full = client.GetTrial(t.id());
    if (!full.ok()) {
      return absl::Status(full.status().code(), absl::StrCat("trial ", t.id(), ": ", full.status().message()));
    }
    data.trials.push_back(*std::move(full));
  }
  std::sort(data.trials.begin(), data.trials.end(),
            [](const auto& a, const auto& b) { return a.trial().index() < b.trial().index(); });
  absl::StatusOr<v1::GetSweepAnalysisResponse> analysis = client.GetSweepAnalysis(sweep_id, kNearBestTolerance);
  if (!analysis.ok()) return analysis.status();
  data.analysis = *std::move(analysis);
  return data;
}

std::string RenderReportHtml(const ReportData& data) {
  const v1::Sweep& sweep = data.sweep;
  const std::string title = absl::StrCat("Sweep ", sweep.id(), " \u201c", sweep.name(), "\u201d");
  std::string s = absl::StrCat("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>",
                               Esc(title), " \u2014 normsweep report</title>\n<style>", kStyle,
                               "</style>\n</head>\n<body>\n", kDefs, "<h1>", Esc(title), "</h1>\n");
  int finished = 0;
  for (const v1::GetTrialResponse& t : data.trials) finished += schema::IsFinal(t.trial().state());
  const v1::TrialCounts& c = sweep.counts();
  absl::StrAppend(&s, "<p class=\"meta\">", SweepStateName(sweep.state()), "; ", data.trials.size(), " trials: ",
                  c.succeeded(), " succeeded, ", c.diverged(), " diverged, ", c.failed(), " failed, ", c.cancelled(),
                  " cancelled, ", c.running(), " running, ", c.pending(), " pending. Created ",
                  google::protobuf::util::TimeUtil::ToString(sweep.created_at()), ".");
  if (!data.trials.empty()) {
    absl::StrAppend(&s, "<br>Model: ", Esc(ModelLine(data.trials.front().trial().config(), sweep.spec())), ".");
  }
  s += "</p>\n";
  if (data.trials.empty()) {
    return s + "<p class=\"note\">This sweep has no trials: there is nothing to show.</p>\n</body>\n</html>\n";
  }
  if (finished == 0) {
    s += "<p class=\"note\">No trial has finished yet: the heatmaps show pending cells and the curves what has "
         "been reported so far.</p>\n";
  }

  const std::vector<PlacementSummary> summary = SummariesFromAnalysis(data.analysis);
  const std::vector<VariantView> variants = Variants(data);
  const bool show_variant = variants.size() > 1 || !variants.front().variant.empty();
  absl::StrAppend(&s, "<h2>Summary per placement</h2>\n<p>Final validation loss of the trials that succeeded. "
                  "A grid cell is a (warm-up, peak lr) pair, its value the mean over seeds; it is <em>near the "
                  "best</em> when within ",
                  absl::StrFormat("%g%%", kNearBestTolerance * 100),
                  " of the best cell of either placement (the <code>placement_sensitivity</code> view).</p>\n",
                  SummaryTable(summary, show_variant));

  for (const VariantView& v : variants) {
    const std::string suffix = v.variant.empty() ? "" : absl::StrCat(" \u2014 ", v.variant);
    absl::StrAppend(&s, "<h2>Final validation loss over warm-up \u00d7 peak lr", Esc(suffix), "</h2>\n",
                    "<p>Mean over seeds of the final validation loss (\u00b1 sample std); \u201ck/n div\u201d: k of "
                    "n seeds diverged and are left out of the mean. One colour scale for both placements.</p>\n",
                    "<div class=\"row\">\n");
    for (const std::string& p : v.placements) s += HeatmapSvg(v, p);
    s += ScaleLegendSvg(v) + "</div>\n";
    absl::StrAppend(&s, "<h2>Validation loss during training", Esc(suffix), "</h2>\n",
                    "<p>One line per trial; \u00d7 marks where a diverged trial stopped. Losses above ",
                    Num(kCurveCap), " are drawn at the top edge.</p>\n", CurvesSection(v));
    absl::StrAppend(&s, "<h2>FFN gradient norms at initialization", Esc(suffix), "</h2>\n",
                    "<p>Frobenius norm of each layer's FFN weight gradients on the first batch, before any update "
                    "(Xiong et al. 2020, Figure 3); each seed counted once.</p>\n",
                    GradNormsSection(v));
  }
  s += DepthTable(data);
  absl::StrAppend(&s, "<p class=\"meta\">Written by <code>normsweep report ", sweep.id(),
                  "</code>. Trials ", data.trials.size(), ", finished ", finished, ".</p>\n</body>\n</html>\n");
  return s;
}

absl::Status WriteReport(const std::string& dir, const std::string& html) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create the directory ", dir, ": ", ec.message()));
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(absl::StrCat("--out ", dir, " exists and is not a directory"));
  }
  const std::string path = (std::filesystem::path(dir) / "index.html").string();
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  const bool written = std::fwrite(html.data(), 1, html.size(), f) == html.size();
  const int saved = errno;
  if (std::fclose(f) != 0 || !written) {
    std::remove(tmp.c_str());
    return absl::PermissionDeniedError(absl::StrCat("cannot write ", path, ": ", std::strerror(written ? errno : saved)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    return absl::PermissionDeniedError(absl::StrCat("cannot write ", path, ": ", std::strerror(e)));
  }
  return absl::OkStatus();
}

}  // namespace normsweep::client
