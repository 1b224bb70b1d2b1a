#include "client/report/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace normsweep::client {

namespace {

// Okabe & Ito's colour-blind-safe palette (2008), one colour per
// placement: distinct under the three common colour-vision deficiencies,
// legible on white, and none of them the divergence marks' red (#d62728).
struct PlacementStyle {
  const char* name;
  const char* title;
  const char* colour;
};
constexpr PlacementStyle kPlacementStyles[] = {
    {"post", "Post-LN", "#d55e00"},      // vermillion
    {"pre", "Pre-LN", "#0072b2"},        // blue
    {"peri", "Peri-LN", "#009e73"},      // bluish green
    {"deepnorm", "DeepNorm", "#cc79a7"}, // reddish purple
    {"mix", "Mix-LN", "#e69f00"},        // orange
};
// Other names (a placement the trainer learns later): Okabe-Ito's sky blue
// and black, then Paul Tol's muted wine, teal, olive and purple, picked by a
// hash of the name, so a name has the same colour in every figure and run.
constexpr const char* kOtherPlacementColours[] = {"#56b4e9", "#000000", "#882255", "#44aa99", "#999933", "#aa4499"};

const PlacementStyle* StyleOf(const std::string& placement) {
  for (const PlacementStyle& s : kPlacementStyles) {
    if (placement == s.name) return &s;
  }
  return nullptr;
}

}  // namespace

std::string PlacementTitle(const std::string& placement, const std::string& variant) {
  const PlacementStyle* style = StyleOf(placement);
  std::string t = style != nullptr ? style->title : placement;
  if (!variant.empty()) absl::StrAppend(&t, " (", variant, ")");
  return t;
}

std::string PlacementColour(const std::string& placement) {
  if (const PlacementStyle* style = StyleOf(placement)) return style->colour;
  uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : placement) h = (h ^ c) * 16777619u;
  return kOtherPlacementColours[h % std::size(kOtherPlacementColours)];
}

std::vector<std::string> PlacementOrder(std::vector<std::string> placements) {
  auto rank = [](const std::string& p) {
    const PlacementStyle* style = StyleOf(p);
    return style != nullptr ? style - kPlacementStyles : std::ssize(kPlacementStyles);
  };
  std::stable_sort(placements.begin(), placements.end(), [&](const std::string& a, const std::string& b) {
    return std::make_pair(rank(a), a) < std::make_pair(rank(b), b);
  });
  return placements;
}

}  // namespace normsweep::client

namespace normsweep::client::report {
namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr const char* kWarmupPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                          "#17becf", "#e377c2", "#bcbd22", "#7f7f7f"};
constexpr const char* kDashes[] = {"", "7 4", "2 3", "10 3 2 3", "4 2 1 2 1 2"};

}  // namespace

std::string Escape(const std::string& s) {
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

std::string Num(double v, int digits) { return absl::StrFormat("%.*f", digits, v); }
bool Finite(bool has, double v) { return has && std::isfinite(v); }
std::string OptNum(bool has, double v, int digits) { return Finite(has, v) ? Num(v, digits) : "&ndash;"; }
std::string OptText(bool has, double v) { return Finite(has, v) ? Num(v) : "\u2013"; }
std::string Px(double v) { return absl::StrFormat("%.1f", v); }

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

std::string Colour(size_t i) { return kPalette[i % std::size(kPalette)]; }
std::string WarmupColour(size_t i) { return kWarmupPalette[i % std::size(kWarmupPalette)]; }
std::string DashAttr(size_t i) {
  const char* d = kDashes[i % std::size(kDashes)];
  return *d ? absl::StrCat(" stroke-dasharray=\"", d, "\"") : "";
}

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

std::string SvgOpen(double w, double h, const std::string& label, const std::string& extra_attrs) {
  return absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" "
      "aria-label=\"%s\"%s%s>\n",
      static_cast<int>(w), static_cast<int>(h), static_cast<int>(w), static_cast<int>(h), Escape(label),
      extra_attrs.empty() ? "" : " ", extra_attrs);
}

std::string OpenPlacementPanel(const std::string& placement, const std::string& what, const Frame& scale,
                               Frame& frame) {
  const double w = 470, h = 300;
  frame = scale;
  frame.left = 58;
  frame.top = 30;
  frame.width = w - frame.left - 14;
  frame.height = h - frame.top - 50;
  const std::string title = PlacementTitle(placement);
  std::string s = SvgOpen(w, h, title + ": " + what);
  s += Text(frame.left + frame.width / 2, 18, title, "class=\"chart-title\" text-anchor=\"middle\"");
  return s;
}

std::string Text(double x, double y, const std::string& text, const std::string& attrs) {
  return absl::StrCat("<text x=\"", Px(x), "\" y=\"", Px(y), "\"", attrs.empty() ? "" : " ", attrs, ">",
                      Escape(text), "</text>\n");
}

std::string Line(double x1, double y1, double x2, double y2, const std::string& attrs) {
  return absl::StrCat("<line x1=\"", Px(x1), "\" y1=\"", Px(y1), "\" x2=\"", Px(x2), "\" y2=\"", Px(y2), "\" ", attrs,
                      "/>\n");
}

std::string CrossPath(double x, double y, double r, const std::string& cls, const std::string& title) {
  return absl::StrCat("<path class=\"", cls, "\" d=\"M", Px(x - r), " ", Px(y - r), " l", Px(2 * r), " ", Px(2 * r),
                      " m0 ", Px(-2 * r), " l", Px(-2 * r), " ", Px(2 * r), "\"><title>", Escape(title),
                      "</title></path>\n");
}

std::string Axes(const Frame& f, const std::vector<double>& xticks, const std::vector<double>& yticks,
                 const std::string& xtitle, const std::string& ytitle,
                 const std::function<std::string(double)>& xlabel,
                 const std::function<std::string(double)>& ylabel) {
  std::string s = absl::StrCat("<rect x=\"", Px(f.left), "\" y=\"", Px(f.top), "\" width=\"", Px(f.width),
                               "\" height=\"", Px(f.height), "\" class=\"plot\"/>\n");
  for (double y : yticks) {
    absl::StrAppend(&s, "<line x1=\"", Px(f.left), "\" x2=\"", Px(f.left + f.width), "\" y1=\"", Px(f.Y(y)),
                    "\" y2=\"", Px(f.Y(y)), "\" class=\"grid\"/>\n",
                    Text(f.left - 6, f.Y(y) + 4, ylabel(y), "class=\"tick\" text-anchor=\"end\""));
  }
  for (double x : xticks) {
    absl::StrAppend(&s, "<line x1=\"", Px(f.X(x)), "\" x2=\"", Px(f.X(x)), "\" y1=\"", Px(f.top + f.height),
                    "\" y2=\"", Px(f.top + f.height + 4), "\" class=\"axis\"/>\n",
                    Text(f.X(x), f.top + f.height + 17, xlabel(x), "class=\"tick\" text-anchor=\"middle\""));
  }
  absl::StrAppend(&s,
                  Text(f.left + f.width / 2, f.top + f.height + 36, xtitle,
                       "class=\"axis-title\" text-anchor=\"middle\""),
                  Text(14, f.top + f.height / 2, ytitle,
                       absl::StrCat("class=\"axis-title\" text-anchor=\"middle\" transform=\"rotate(-90 14 ",
                                    Px(f.top + f.height / 2), ")\"")));
  return s;
}

}  // namespace normsweep::client::report
