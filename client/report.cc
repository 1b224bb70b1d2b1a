#include "client/report.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <google/protobuf/util/time_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/boundary_report.h"
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
                 const std::function<std::string(double)>& xlabel = TickLabel,
                 const std::function<std::string(double)>& ylabel = TickLabel) {
  std::string s = absl::StrCat("<rect x=\"", P(f.left), "\" y=\"", P(f.top), "\" width=\"", P(f.width),
                               "\" height=\"", P(f.height), "\" class=\"plot\"/>\n");
  for (double y : yticks) {
    absl::StrAppend(&s, "<line x1=\"", P(f.left), "\" x2=\"", P(f.left + f.width), "\" y1=\"", P(f.Y(y)), "\" y2=\"",
                    P(f.Y(y)), "\" class=\"grid\"/>\n",
                    Text(f.left - 6, f.Y(y) + 4, ylabel(y), "class=\"tick\" text-anchor=\"end\""));
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
  std::vector<const v1::LrSensitivity*> lr_sensitivity;                   // lr_sensitivity rows
  std::vector<const v1::PlacementLrSensitivity*> lr_summary;              // lr_sensitivity_summary rows
  std::vector<const v1::VarianceShares*> importance;                      // grid_importance rows
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
  for (const v1::LrSensitivity& r : data.analysis.lr_sensitivity()) {
    auto it = by_variant.find(r.variant());
    if (it != by_variant.end()) it->second.lr_sensitivity.push_back(&r);
  }
  for (const v1::PlacementLrSensitivity& r : data.analysis.lr_sensitivity_summary()) {
    auto it = by_variant.find(r.variant());
    if (it != by_variant.end()) it->second.lr_summary.push_back(&r);
  }
  for (const v1::VarianceShares& r : data.analysis.importance()) {
    auto it = by_variant.find(r.variant());
    if (it != by_variant.end()) it->second.importance.push_back(&r);
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

bool Finite(bool has, double v) { return has && std::isfinite(v); }
std::string OptNum(bool has, double v, int digits = 3) { return Finite(has, v) ? Num(v, digits) : "&ndash;"; }
// The same for text that is escaped afterwards (tooltips, SVG text).
std::string OptText(bool has, double v) { return Finite(has, v) ? Num(v) : "\u2013"; }

// Colours for warm-ups: Tableau 10 without its red, which marks divergence.
constexpr const char* kWarmupPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                          "#17becf", "#e377c2", "#bcbd22", "#7f7f7f"};
std::string WarmupColour(size_t i) { return kWarmupPalette[i % std::size(kWarmupPalette)]; }

const v1::LrSensitivity* LrsRow(const VariantView& v, const std::string& placement, int warmup) {
  for (const v1::LrSensitivity* r : v.lr_sensitivity) {
    if (r->placement() == placement && r->warmup_steps() == warmup) return r;
  }
  return nullptr;
}

// l0 of a placement: the mean of its lines' l0 (they differ by the seeds
// only: the loss at initialisation depends on neither warm-up nor lr).
std::optional<double> PlacementL0(const VariantView& v, const std::string& placement) {
  Mean m;
  for (const v1::LrSensitivity* r : v.lr_sensitivity) {
    if (r->placement() == placement && Finite(r->has_init_val_loss(), r->init_val_loss())) m.Add(r->init_val_loss());
  }
  return m.n > 0 ? std::optional<double>(m.value()) : std::nullopt;
}

// One grid cell on the loss-vs-lr figure.
struct LossPoint {
  double lr = 0;
  std::optional<double> y;  // the mean loss over seeds; l0 for a cell with no usable seed
  int bad = 0;              // seeds diverged or with a non-finite loss
  bool all_bad = false;     // no usable seed: a cross at l0, or at the top edge without an l0
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

std::string CrossPath(double x, double y, double r, const std::string& cls, const std::string& title) {
  return absl::StrCat("<path class=\"", cls, "\" d=\"M", P(x - r), " ", P(y - r), " l", P(2 * r), " ", P(2 * r), " m0 ",
                      P(-2 * r), " l", P(-2 * r), " ", P(2 * r), "\"><title>", Esc(title), "</title></path>\n");
}

std::string LossVsLrSvg(const VariantView& v, const std::string& placement,
                        const std::vector<std::vector<LossPoint>>& lines, const Frame& scale) {
  const double w = 470, h = 300;
  Frame f = scale;
  f.left = 58;
  f.top = 30;
  f.width = w - f.left - 14;
  f.height = h - f.top - 50;
  const std::string title = PlacementTitle(placement);
  std::string s = SvgOpen(w, h, title + ": final validation loss against peak lr");
  s += Text(f.left + f.width / 2, 18, title, "class=\"chart-title\" text-anchor=\"middle\"");
  s += Axes(f, LogLrTicks(v.lrs), Ticks(f.y0, f.y1, 5), "peak learning rate (log scale)", "final validation loss",
            LogLrLabel);
  const std::optional<double> l0 = PlacementL0(v, placement);
  if (l0 && *l0 >= f.y0 && *l0 <= f.y1) {
    const double y = f.Y(*l0);
    absl::StrAppend(&s, "<line class=\"l0-line\" x1=\"", P(f.left), "\" x2=\"", P(f.left + f.width), "\" y1=\"", P(y),
                    "\" y2=\"", P(y), "\"><title>", Esc(title), ": l0 (loss at initialisation) ", Num(*l0),
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
                        " points=\"", segment, "\"><title>", Esc(name), "</title></polyline>\n");
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
          absl::StrAppend(&segment, P(x), ",", P(y), " ");
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
      absl::StrAppend(&segment, P(x), ",", P(y), " ");
      std::string tip = absl::StrCat(where, Num(*p.y), " (", c.seeds_with_loss, c.seeds_with_loss == 1 ? " seed" : " seeds");
      if (p.bad > 0) absl::StrAppend(&tip, "; ", p.bad, "/", c.trials, " diverged or non-finite, left out");
      tip += ")";
      if (p.bad > 0) {
        absl::StrAppend(&marks, "<circle class=\"partial-mark\" r=\"6.5\" cx=\"", P(x), "\" cy=\"", P(y), "\"/>\n");
      }
      absl::StrAppend(&marks, "<circle class=\"loss-point\" r=\"3.5\" cx=\"", P(x), "\" cy=\"", P(y), "\" fill=\"",
                      colour, "\"><title>", Esc(tip), "</title></circle>\n");
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
                              bool any_cross_at_top) {
  const int extra = 1 + any_partial + any_cross_at_l0 + any_cross_at_top;
  const double h = 30 + 20 * v.warmups.size() + 26 + 20 * extra + 10;
  std::string s = SvgOpen(270, h, "loss against lr legend");
  double y = 18;
  s += Text(8, y, "line: warm-up steps", "class=\"tick\"");
  for (size_t i = 0; i < v.warmups.size(); ++i) {
    y += 20;
    absl::StrAppend(&s, "<line x1=\"10\" x2=\"44\" y1=\"", P(y - 4), "\" y2=\"", P(y - 4), "\" stroke=\"",
                    WarmupColour(i), "\"", DashAttr(i), " class=\"curve\"/><circle r=\"3.5\" cx=\"27\" cy=\"",
                    P(y - 4), "\" fill=\"", WarmupColour(i), "\"/>", Text(52, y, std::to_string(v.warmups[i]), "class=\"tick\""));
  }
  y += 26;
  absl::StrAppend(&s, "<line x1=\"10\" x2=\"44\" y1=\"", P(y - 4), "\" y2=\"", P(y - 4), "\" class=\"l0-line\"/>",
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
    absl::StrAppend(&s, "<circle class=\"partial-mark\" r=\"6.5\" cx=\"27\" cy=\"", P(y - 4), "\"/>",
                    Text(52, y, "some seeds diverged: mean of the rest", "class=\"tick\""));
  }
  return s + "</svg>\n";
}

// Wortsman et al. 2023, Figure 1: final loss against log peak lr, a line per
// warm-up, a panel per placement (one y scale for both).
std::string LossVsLrSection(const VariantView& v) {
  std::map<std::string, std::vector<std::vector<LossPoint>>> lines;
  double lo = INFINITY, hi = -INFINITY;
  bool any_partial = false, any_cross_at_l0 = false, any_cross_at_top = false, any_l0 = false;
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
  s += LossVsLrLegendSvg(v, any_l0, any_partial, any_cross_at_l0, any_cross_at_top) + "</div>\n";
  if (!any_l0) {
    s += "<p class=\"note\">No loss at initialisation (l0) was reported for these trials: no l0 line, and cells "
         "where every seed diverged are drawn at the top edge.</p>\n";
  }
  return s;
}

// LR sensitivity against warm-up steps, a line per placement, l* beside each point.
std::string LrSensitivitySvg(const VariantView& v, const std::vector<int>& warmups) {
  const double w = 520, h = 300;
  double hi = 0;
  for (const v1::LrSensitivity* r : v.lr_sensitivity) {
    if (Finite(r->has_lr_sensitivity(), r->lr_sensitivity())) hi = std::max(hi, r->lr_sensitivity());
  }
  Frame f{60, 30, w - 60 - 16, h - 30 - 50, -0.5, warmups.size() - 0.5, 0, hi > 0 ? hi * 1.25 : 0.1};
  std::string s = SvgOpen(w, h, "LR sensitivity against warm-up steps");
  s += Text(f.left + f.width / 2, 18, "LR sensitivity by warm-up", "class=\"chart-title\" text-anchor=\"middle\"");
  std::vector<double> xticks;
  for (size_t i = 0; i < warmups.size(); ++i) xticks.push_back(i);
  s += Axes(f, xticks, Ticks(0, f.y1, 5), "warm-up steps (the sweep's values)", "LR sensitivity",
            [&](double x) {
              const size_t i = static_cast<size_t>(std::lround(x));
              return i < warmups.size() ? std::to_string(warmups[i]) : "";
            });
  double ly = f.top + 4;
  for (size_t pi = 0; pi < v.placements.size(); ++pi) {
    const std::string& placement = v.placements[pi];
    const std::string colour = PlacementColour(placement);
    const std::string title = PlacementTitle(placement);
    std::string segment, marks;
    bool any = false;
    auto flush = [&] {
      if (!segment.empty()) {
        absl::StrAppend(&s, "<polyline class=\"curve lrs-line\" fill=\"none\" stroke=\"", colour, "\" points=\"",
                        segment, "\"><title>", Esc(title), ": LR sensitivity</title></polyline>\n");
      }
      segment.clear();
    };
    for (size_t i = 0; i < warmups.size(); ++i) {
      const v1::LrSensitivity* r = LrsRow(v, placement, warmups[i]);
      if (r == nullptr || !Finite(r->has_lr_sensitivity(), r->lr_sensitivity())) {
        flush();
        continue;
      }
      any = true;
      const double x = f.X(i), y = f.Y(r->lr_sensitivity());
      absl::StrAppend(&segment, P(x), ",", P(y), " ");
      std::string tip = absl::StrCat(title, ", warm-up ", warmups[i], ": LR sensitivity ", Num(r->lr_sensitivity()),
                                     "; l* ", OptText(r->has_best_val_loss(), r->best_val_loss()));
      if (r->has_best_lr()) absl::StrAppend(&tip, " at lr ", FormatLr(r->best_lr()));
      absl::StrAppend(&tip, "; l0 ", OptText(r->has_init_val_loss(), r->init_val_loss()), "; ", r->lrs(),
                      r->lrs() == 1 ? " lr" : " lrs", ", ", r->points_at_l0(), " seeds at l0");
      absl::StrAppend(&marks, "<circle class=\"lrs-point\" r=\"4\" cx=\"", P(x), "\" cy=\"", P(y), "\" fill=\"",
                      colour, "\"><title>", Esc(tip), "</title></circle>\n");
      if (Finite(r->has_best_val_loss(), r->best_val_loss())) {
        // Labels of the first placement above their points, of the others below.
        marks += Text(x + 7, pi == 0 ? y - 8 : y + 15, absl::StrCat("l* ", Num(r->best_val_loss())),
                      absl::StrCat("class=\"tick small\" fill=\"", colour, "\""));
      }
    }
    flush();
    s += marks;
    ly += 18;
    absl::StrAppend(&s, "<line x1=\"", P(f.left + f.width - 130), "\" x2=\"", P(f.left + f.width - 100), "\" y1=\"",
                    P(ly - 4), "\" y2=\"", P(ly - 4), "\" stroke=\"", colour, "\" class=\"curve\"/>",
                    Text(f.left + f.width - 94, ly, any ? title : title + " (none yet)", "class=\"tick\""));
  }
  return s + "</svg>\n";
}

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
    absl::StrAppend(&s, "<tr><td>", Esc(PlacementTitle(r->placement())), "</td><td>", r->warmup_steps(), "</td><td>",
                    r->lrs(), "</td><td>", r->lrs_pending(), "</td><td>", r->points_at_l0(), "</td><td>",
                    r->has_best_lr() ? Esc(FormatLr(r->best_lr())) : "&ndash;", "</td><td>",
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
      absl::StrAppend(&s, "<tr><td>", Esc(PlacementTitle(r->placement())), "</td><td>", r->warmups(), "</td><td>",
                      OptNum(r->has_mean_lr_sensitivity(), r->mean_lr_sensitivity()), "</td><td>", min, "</td><td>",
                      OptNum(r->has_max_lr_sensitivity(), r->max_lr_sensitivity()), "</td><td>",
                      OptNum(r->has_best_val_loss(), r->best_val_loss()), "</td></tr>\n");
    }
    s += "</table>\n";
  }
  return s;
}

// The fANOVA shares (grid_importance view) as one stacked bar per placement.
struct ShareKind {
  const char* name;
  const char* cls;
  const char* colour;
};
constexpr ShareKind kShareKinds[] = {{"warm-up", "share-warmup", "#9467bd"},
                                     {"peak lr", "share-lr", "#ff7f0e"},
                                     {"interaction", "share-interaction", "#2ca02c"},
                                     {"seeds (residual)", "share-seed", "#c7c7c7"}};

std::string VarianceSharesSection(const VariantView& v) {
  std::vector<const v1::VarianceShares*> rows;
  for (const std::string& p : v.placements) {
    for (const v1::VarianceShares* r : v.importance) {
      if (r->placement() == p) rows.push_back(r);
    }
  }
  if (rows.empty()) {
    return "<p class=\"note\">No variance shares for this variant: the grid_importance view has no row for "
           "it.</p>\n";
  }
  const double label_w = 90, bar_w = 380, row_h = 34, top = 44;
  const double w = label_w + bar_w + 260, h = top + row_h * rows.size() + 8;
  std::string s = SvgOpen(w, h, "variance of final validation loss explained");
  double lx = label_w;
  for (const ShareKind& k : kShareKinds) {
    absl::StrAppend(&s, "<rect x=\"", P(lx), "\" y=\"8\" width=\"14\" height=\"14\" fill=\"", k.colour,
                    "\" class=\"bar\"/>", Text(lx + 20, 20, k.name, "class=\"tick\""));
    lx += 36 + 7.0 * std::strlen(k.name);
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const v1::VarianceShares& r = *rows[i];
    const double y = top + row_h * i;
    s += Text(label_w - 8, y + 17, PlacementTitle(r.placement()), "class=\"tick\" text-anchor=\"end\"");
    const std::array<std::pair<bool, double>, 4> shares = {
        std::pair{r.has_share_warmup(), r.share_warmup()}, std::pair{r.has_share_lr(), r.share_lr()},
        std::pair{r.has_share_interaction(), r.share_interaction()}, std::pair{r.has_share_seed(), r.share_seed()}};
    bool all = true;
    for (const auto& [has, value] : shares) all &= Finite(has, value);
    const std::string grid = absl::StrCat(r.warmups(), r.warmups() == 1 ? " warm-up" : " warm-ups", " \u00d7 ",
                                          r.lrs(), r.lrs() == 1 ? " lr" : " lrs", ", ", r.trials(), " trials");
    if (!all) {
      absl::StrAppend(&s, "<rect x=\"", P(label_w), "\" y=\"", P(y + 2), "\" width=\"", P(bar_w),
                      "\" height=\"22\" fill=\"#f7f7f7\" class=\"bar shares-unset\"/>",
                      Text(label_w + 8, y + 17,
                           absl::StrCat("unset: ", r.note().empty() ? "no figure from the view" : r.note()),
                           "class=\"tick\""),
                      Text(label_w + bar_w + 8, y + 17, grid, "class=\"tick\""));
      continue;
    }
    double x = label_w;
    for (size_t k = 0; k < shares.size(); ++k) {
      const double share = std::clamp(shares[k].second, 0.0, 1.0);
      const double width = share * bar_w;
      absl::StrAppend(&s, "<rect x=\"", P(x), "\" y=\"", P(y + 2), "\" width=\"", P(width),
                      "\" height=\"22\" fill=\"", kShareKinds[k].colour, "\" class=\"bar share ", kShareKinds[k].cls,
                      "\"><title>", Esc(PlacementTitle(r.placement())), ": ", kShareKinds[k].name, " ",
                      absl::StrFormat("%.1f%%", 100 * shares[k].second), "</title></rect>\n");
      if (width >= 34) {
        s += Text(x + width / 2, y + 17, absl::StrFormat("%.0f%%", 100 * shares[k].second),
                  "class=\"tick\" text-anchor=\"middle\"");
      }
      x += width;
    }
    std::string total = grid;
    if (Finite(r.has_total_variance(), r.total_variance())) {
      total = absl::StrCat("variance ", absl::StrFormat("%.3g", r.total_variance()), "; ", grid);
    }
    s += Text(label_w + bar_w + 8, y + 17, total, "class=\"tick\"");
  }
  s += "</svg>\n";
  return s;
}

// ---- Instability diagnostics of two trials per placement ----

struct DiagnosticPicks {
  const v1::GetTrialResponse* best = nullptr;            // the best lr's trial
  const v1::GetTrialResponse* first_diverged = nullptr;  // the lr that diverged first
};

bool UsableLoss(const v1::GetTrialResponse& t) {
  return t.trial().state() == v1::TRIAL_SUCCEEDED &&
         Finite(t.trial().result().has_final_val_loss(), t.trial().result().final_val_loss());
}

// First diverged: the smallest diverged lr, then the earliest diverged step.
// Best: a trial of the placement's best grid cell (the view's mean over
// seeds), its lowest seed; without cells, the trial with the lowest loss.
DiagnosticPicks PickDiagnosticTrials(const VariantView& v, const std::string& placement) {
  DiagnosticPicks p;
  auto it = v.trials.find(placement);
  if (it == v.trials.end()) return p;
  auto diverged_key = [](const v1::GetTrialResponse* t) {
    const v1::TrialResult& r = t->trial().result();
    return std::make_tuple(t->trial().config().lr(),
                           r.has_diverged_step() ? r.diverged_step() : std::numeric_limits<int32_t>::max(),
                           t->trial().id());
  };
  const ResultCell* best_cell = nullptr;
  for (const ResultCell& c : v.cells) {
    if (c.placement == placement && c.seeds_with_loss > 0 && std::isfinite(c.mean_final_val_loss) &&
        (best_cell == nullptr || c.mean_final_val_loss < best_cell->mean_final_val_loss)) {
      best_cell = &c;
    }
  }
  auto best_key = [&](const v1::GetTrialResponse* t) {
    return std::make_tuple(best_cell != nullptr ? static_cast<double>(t->trial().config().seed())
                                                : t->trial().result().final_val_loss(),
                           t->trial().id());
  };
  for (const v1::GetTrialResponse* t : it->second) {
    const v1::TrainConfig& c = t->trial().config();
    if (t->trial().state() == v1::TRIAL_DIVERGED &&
        (p.first_diverged == nullptr || diverged_key(t) < diverged_key(p.first_diverged))) {
      p.first_diverged = t;
    }
    if (!UsableLoss(*t)) continue;
    if (best_cell != nullptr && (c.warmup_steps() != best_cell->warmup_steps || c.lr() != best_cell->peak_lr)) continue;
    if (p.best == nullptr || best_key(t) < best_key(p.best)) p.best = t;
  }
  return p;
}

// One quantity of a trial over steps, finite values only.
struct DiagSeries {
  std::vector<std::pair<double, double>> pts;  // (step, value)
  std::string what;                            // which layer (and matrix), "" when not per layer
};

// Of per-layer (or per-matrix) curves, the one with the largest value over
// the run; ties go to the first key.
template <typename Key>
DiagSeries Worst(const std::map<Key, std::vector<std::pair<double, double>>>& curves,
                 const std::function<std::string(const Key&)>& name) {
  DiagSeries out;
  double peak = -INFINITY;
  for (const auto& [key, pts] : curves) {
    for (const auto& [step, value] : pts) {
      if (value > peak) {
        peak = value;
        out.pts = pts;
        out.what = name(key);
      }
    }
  }
  std::sort(out.pts.begin(), out.pts.end());
  return out;
}

DiagSeries WorstAttnLogit(const v1::GetTrialResponse& t) {
  std::map<int, std::vector<std::pair<double, double>>> curves;
  for (const v1::StepDiagnostics& d : t.diagnostics()) {
    for (const v1::LayerDiagnostics& l : d.layers()) {
      if (Finite(l.has_max_attn_logit(), l.max_attn_logit())) curves[l.layer()].push_back({d.step(), l.max_attn_logit()});
    }
  }
  return Worst<int>(curves, [](const int& layer) { return absl::StrCat("layer ", layer); });
}

DiagSeries LargestUpdateRatio(const v1::GetTrialResponse& t) {
  static constexpr const char* kMatrices[] = {"qkv", "proj", "fc1", "fc2"};
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> curves;
  for (const v1::StepDiagnostics& d : t.diagnostics()) {
    for (const v1::LayerDiagnostics& l : d.layers()) {
      const std::array<std::pair<bool, double>, 4> ratios = {
          std::pair{l.has_update_ratio_qkv(), l.update_ratio_qkv()},
          std::pair{l.has_update_ratio_proj(), l.update_ratio_proj()},
          std::pair{l.has_update_ratio_fc1(), l.update_ratio_fc1()},
          std::pair{l.has_update_ratio_fc2(), l.update_ratio_fc2()}};
      for (int m = 0; m < 4; ++m) {
        if (Finite(ratios[m].first, ratios[m].second)) curves[{l.layer(), m}].push_back({d.step(), ratios[m].second});
      }
    }
  }
  return Worst<std::pair<int, int>>(
      curves, [](const std::pair<int, int>& k) { return absl::StrCat("layer ", k.first, " ", kMatrices[k.second]); });
}

DiagSeries OutputLogZ(const v1::GetTrialResponse& t) {
  DiagSeries out;
  for (const v1::MetricPoint& m : t.metrics()) {
    if (Finite(m.has_output_log_z(), m.output_log_z())) out.pts.push_back({m.step(), m.output_log_z()});
  }
  std::sort(out.pts.begin(), out.pts.end());
  return out;
}

struct DiagLine {
  std::string placement;
  bool diverged = false;  // the first-diverged trial (dashed), else the best lr's (solid)
  const v1::GetTrialResponse* trial = nullptr;
  DiagSeries series;
};

std::string RoleName(bool diverged) { return diverged ? "first diverged lr" : "best lr"; }

std::string DiagChartSvg(const std::string& title, const std::string& ytitle, const std::vector<DiagLine>& lines,
                         const std::string& clip) {
  const double w = 400, h = 270;
  double xmax = 1, lo = INFINITY, hi = -INFINITY;
  for (const DiagLine& l : lines) {
    for (const auto& [x, y] : l.series.pts) {
      xmax = std::max(xmax, x);
      lo = std::min(lo, y);
      hi = std::max(hi, y);
    }
  }
  // A blow-up spans decades: log scale then, so the other curves stay readable.
  const bool log = std::isfinite(lo) && lo > 0 && hi / lo > 30;
  auto T = [&](double y) { return log ? std::log10(y) : y; };
  Frame f{58, 30, w - 58 - 14, h - 30 - 50, 0, xmax, 0, 1};
  if (std::isfinite(lo)) {
    const double pad = std::max((T(hi) - T(lo)) * 0.06, log ? 0.05 : 0.01);
    f.y0 = T(lo) - pad;
    f.y1 = T(hi) + pad;
  }
  std::vector<double> yticks;
  if (log) {
    for (double d = std::ceil(f.y0); d <= std::floor(f.y1); d += 1) yticks.push_back(d);
  } else {
    yticks = Ticks(f.y0, f.y1, 5);
  }
  std::string s = SvgOpen(w, h, title);
  s += Text(f.left + f.width / 2, 18, title, "class=\"chart-title\" text-anchor=\"middle\"");
  s += Axes(f, Ticks(0, xmax, 5), yticks, "step", log ? ytitle + " (log scale)" : ytitle, TickLabel,
            log ? std::function<std::string(double)>([](double d) { return absl::StrFormat("%g", std::pow(10, d)); })
                : std::function<std::string(double)>(TickLabel));
  absl::StrAppend(&s, "<defs><clipPath id=\"", clip, "\"><rect x=\"", P(f.left), "\" y=\"", P(f.top), "\" width=\"",
                  P(f.width), "\" height=\"", P(f.height), "\"/></clipPath></defs><g clip-path=\"url(#", clip, ")\">\n");
  int drawn = 0;
  std::string ends;  // outside the clip: a cross at the edge stays whole
  for (const DiagLine& l : lines) {
    if (l.series.pts.empty()) continue;
    ++drawn;
    const std::string colour = PlacementColour(l.placement);
    std::string points;
    for (const auto& [x, y] : l.series.pts) absl::StrAppend(&points, P(f.X(x)), ",", P(f.Y(T(y))), " ");
    absl::StrAppend(&s, "<polyline class=\"curve diag\" fill=\"none\" stroke=\"", colour, "\"",
                    l.diverged ? " stroke-dasharray=\"7 4\"" : "", " points=\"", points, "\"><title>",
                    Esc(PlacementTitle(l.placement)), ", ", RoleName(l.diverged), ": trial ", l.trial->trial().id(),
                    l.series.what.empty() ? "" : ", ", Esc(l.series.what), "</title></polyline>\n");
    if (l.diverged) {
      const auto& [x, y] = l.series.pts.back();
      ends += CrossPath(f.X(x), f.Y(T(y)), 5, "diverged-mark diag-end",
                        absl::StrCat("trial ", l.trial->trial().id(), " diverged after step ", x));
    }
  }
  s += "</g>\n" + ends;
  if (drawn == 0) {
    s += Text(f.left + f.width / 2, f.top + f.height / 2, "not reported", "class=\"tick\" text-anchor=\"middle\"");
  }
  return s + "</svg>\n";
}

std::string DiagnosticsSection(const VariantView& v) {
  std::vector<DiagLine> logit, log_z, update;
  std::vector<std::string> legend_rows;  // SVG fragments, each two text lines high
  bool any = false;
  for (const std::string& p : v.placements) {
    const DiagnosticPicks picks = PickDiagnosticTrials(v, p);
    for (const bool diverged : {false, true}) {
      const v1::GetTrialResponse* t = diverged ? picks.first_diverged : picks.best;
      std::string row;
      if (t == nullptr) {
        legend_rows.push_back(Text(10, 0, absl::StrCat(PlacementTitle(p), ": ", diverged ? "no trial diverged" : "no trial succeeded"),
                                   "class=\"tick\""));
        continue;
      }
      const DiagLine a{p, diverged, t, WorstAttnLogit(*t)}, z{p, diverged, t, OutputLogZ(*t)},
          u{p, diverged, t, LargestUpdateRatio(*t)};
      any |= !a.series.pts.empty() || !z.series.pts.empty() || !u.series.pts.empty();
      logit.push_back(a);
      log_z.push_back(z);
      update.push_back(u);
      const v1::TrainConfig& c = t->trial().config();
      std::string worst;
      if (!a.series.what.empty()) absl::StrAppend(&worst, "logit ", a.series.what);
      if (!u.series.what.empty()) absl::StrAppend(&worst, worst.empty() ? "" : ", ", "update ", u.series.what);
      if (worst.empty()) worst = z.series.pts.empty() ? "no diagnostics reported" : "no per-layer diagnostics";
      legend_rows.push_back(absl::StrCat(
          "<line x1=\"10\" x2=\"44\" y1=\"-4\" y2=\"-4\" stroke=\"", PlacementColour(p), "\"",
          diverged ? " stroke-dasharray=\"7 4\"" : "", " class=\"curve\"/>",
          Text(52, 0, absl::StrCat(PlacementTitle(p), ", ", RoleName(diverged), ": trial ", t->trial().id()),
               "class=\"tick\""),
          Text(52, 15, absl::StrCat("warm-up ", c.warmup_steps(), ", lr ", FormatLr(c.lr()), ", seed ", c.seed(), "; ",
                                    worst),
               "class=\"tick small\"")));
    }
  }
  if (logit.empty()) return "<p class=\"note\">No trial to show diagnostics for: none has succeeded or diverged.</p>\n";
  if (!any) {
    return "<p class=\"note\">The chosen trials reported no instability diagnostics (attention logits, output "
           "log Z, update ratios).</p>\n";
  }
  std::string s = "<div class=\"row\">\n";
  const std::string id = absl::StrCat("diag-", v.index, "-");
  s += DiagChartSvg("max attention logit, worst layer", "max q\u00b7k/\u221ad_head", logit, id + "logit");
  s += DiagChartSvg("output log Z", "mean log-sum-exp of the logits", log_z, id + "logz");
  s += DiagChartSvg("largest update / weight RMS ratio", "RMS(update) / RMS(weight)", update, id + "update");
  std::string legend = SvgOpen(440, 16 + 36 * legend_rows.size(), "diagnostics legend");
  double y = 20;
  for (const std::string& row : legend_rows) {
    absl::StrAppend(&legend, "<g transform=\"translate(0 ", P(y), ")\">", row, "</g>\n");
    y += 36;
  }
  return s + legend + "</svg>\n</div>\n";
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
.partial-mark { stroke: #d62728; stroke-width: 1.6; fill: none; }
.loss-point, .lrs-point { stroke: #fff; stroke-width: 0.8; }
.l0-line { stroke: #555; stroke-width: 1.2; stroke-dasharray: 6 4; }
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
  // GetTrial returns every trial's diagnostics, but the page draws those of a
  // few (two per placement and variant): the others are not kept.
  std::set<int64_t> plotted;
  for (const VariantView& v : Variants(data)) {
    for (const std::string& p : v.placements) {
      const DiagnosticPicks picks = PickDiagnosticTrials(v, p);
      for (const v1::GetTrialResponse* t : {picks.best, picks.first_diverged}) {
        if (t != nullptr) plotted.insert(t->trial().id());
      }
    }
  }
  for (v1::GetTrialResponse& t : data.trials) {
    if (!plotted.contains(t.trial().id())) t.clear_diagnostics();
  }
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
    absl::StrAppend(&s, "<h2>Final validation loss against peak lr", Esc(suffix), "</h2>\n",
                    "<p>Each grid cell's mean final validation loss over seeds against its peak lr (log scale), one "
                    "line per warm-up, as in Wortsman et al. 2023 (Figure 1). \u00d7: every seed diverged, drawn at "
                    "l0, the loss at initialisation (dashed), which LR sensitivity counts in their place; a ring: "
                    "some seeds diverged and the point is the mean of the others.</p>\n",
                    LossVsLrSection(v));
    absl::StrAppend(&s, "<h2>LR sensitivity by warm-up", Esc(suffix), "</h2>\n",
                    "<p>LR sensitivity (Wortsman et al. 2023, section 2.2) of each line of the grid: the mean over "
                    "its peak lrs of min(l(lr), l0) &minus; l*, l(lr) the mean final validation loss over seeds "
                    "(a diverged or non-finite seed counts as l0), l* the line's best. It is 0 for a model that "
                    "stays at l0 everywhere and ignores a shift of the best lr: read it with l* (beside each "
                    "point) and the curves above.</p>\n",
                    LrSensitivitySection(v));
    absl::StrAppend(&s, "<h2>Variance of final validation loss explained", Esc(suffix), "</h2>\n",
                    "<p>Functional ANOVA over each placement's grid (the <code>grid_importance</code> view): the "
                    "shares of warm-up, peak lr, their interaction, and what is left to seeds.</p>\n",
                    VarianceSharesSection(v));
    absl::StrAppend(&s, "<h2>Validation loss during training", Esc(suffix), "</h2>\n",
                    "<p>One line per trial; \u00d7 marks where a diverged trial stopped. Losses above ",
                    Num(kCurveCap), " are drawn at the top edge.</p>\n", CurvesSection(v));
    absl::StrAppend(&s, "<h2>Instability diagnostics", Esc(suffix), "</h2>\n",
                    "<p>Per placement two trials: the best lr's (a trial of the best grid cell, its lowest seed; "
                    "solid) and the lr that diverged first (the smallest diverged lr, then the earliest diverged "
                    "step; dashed, \u00d7 where its points end). Attention logit: the largest q\u00b7k/\u221ad_head "
                    "over heads and positions on the validation batches; log Z: the output logits' mean "
                    "log-sum-exp; update ratio: RMS(update) / RMS(weight) of the step before the evaluation. Each "
                    "curve is the layer (and matrix) with the largest value over the run, named in the "
                    "legend.</p>\n",
                    DiagnosticsSection(v));
    absl::StrAppend(&s, "<h2>FFN gradient norms at initialization", Esc(suffix), "</h2>\n",
                    "<p>Frobenius norm of each layer's FFN weight gradients on the first batch, before any update "
                    "(Xiong et al. 2020, Figure 3); each seed counted once.</p>\n",
                    GradNormsSection(v));
  }
  s += BoundaryReportSection(data.analysis);  // boundary_search sweeps only
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
