#include "client/report/svg.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "trainer/settings/schemes.h"

namespace normsweep::client {

namespace {

// Other names (a placement the trainer learns later): Okabe-Ito's sky blue
// and black, then Paul Tol's muted wine, teal, olive and purple, picked by a
// hash of the name, so a name has the same colour in every figure and run.
constexpr const char* kOtherPlacementColours[] = {"#56b4e9", "#000000", "#882255", "#44aa99", "#999933", "#aa4499"};

// The scheme table's row for a canonical placement name (stored names are
// canonical), or nullptr.
const trainer::SchemeInfo* StyleOf(const std::string& placement) {
  for (const trainer::SchemeInfo& s : trainer::Schemes()) {
    if (placement == s.name) return &s;
  }
  return nullptr;
}

}  // namespace

std::string PlacementTitle(const std::string& placement, const std::string& variant) {
  const trainer::SchemeInfo* style = StyleOf(placement);
  std::string t = style != nullptr ? style->title : placement;
  if (!variant.empty()) absl::StrAppend(&t, " (", variant, ")");
  return t;
}

std::string PlacementColour(const std::string& placement) {
  if (const trainer::SchemeInfo* style = StyleOf(placement)) return style->colour;
  uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : placement) h = (h ^ c) * 16777619u;
  return kOtherPlacementColours[h % std::size(kOtherPlacementColours)];
}

std::vector<std::string> PlacementPalette() {
  std::vector<std::string> out;
  for (const trainer::SchemeInfo& s : trainer::Schemes()) out.push_back(s.colour);
  out.insert(out.end(), std::begin(kOtherPlacementColours), std::end(kOtherPlacementColours));
  return out;
}

std::vector<std::string> PlacementOrder(std::vector<std::string> placements) {
  auto rank = [](const std::string& p) {
    const trainer::SchemeInfo* style = StyleOf(p);
    const std::vector<trainer::SchemeInfo>& all = trainer::Schemes();
    return style != nullptr ? style - all.data() : std::ssize(all);
  };
  std::stable_sort(placements.begin(), placements.end(), [&](const std::string& a, const std::string& b) {
    return std::make_pair(rank(a), a) < std::make_pair(rank(b), b);
  });
  return placements;
}

}  // namespace normsweep::client

namespace normsweep::client::report {
namespace {

// Paul Tol's muted indigo, rose, green, sand and cyan and his dark brown:
// none a placement's colour (kOtherPlacementColours has his teal, olive,
// wine and purple); the pale sand and cyan come last.
constexpr const char* kVariantPalette[kVariantColours] = {"#332288", "#cc6677", "#117733",
                                                          "#661100", "#ddcc77", "#88ccee"};
// magma (matplotlib) at 0.2, 0.3, .., 0.7 and 0.75: dark purple to salmon,
// clear of the divergence red and of white.
constexpr double kLrRamp[][3] = {{59, 15, 112}, {100, 26, 128}, {140, 41, 129}, {183, 55, 121},
                                 {222, 73, 104}, {247, 112, 92}, {251, 136, 97}};
constexpr double kWarmupLight = 170, kWarmupDark = 34;  // grey levels
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

std::string VariantColour(size_t i) { return kVariantPalette[i % kVariantColours]; }

std::string LrColour(size_t i, size_t n) {
  const double t = n <= 1 ? 0.5 : std::min(1.0, static_cast<double>(i) / (n - 1));
  const double at = t * (std::size(kLrRamp) - 1);
  const size_t k = std::min(static_cast<size_t>(at), std::size(kLrRamp) - 2);
  const double f = at - k;
  std::array<double, 3> c;
  for (int j = 0; j < 3; ++j) c[j] = kLrRamp[k][j] + f * (kLrRamp[k + 1][j] - kLrRamp[k][j]);
  return Hex(c);
}

std::string WarmupColour(size_t i, size_t n) {
  const double t = n <= 1 ? 1.0 : std::min(1.0, static_cast<double>(i) / (n - 1));
  const double g = kWarmupLight + t * (kWarmupDark - kWarmupLight);
  return Hex({g, g, g});
}
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
                               const std::vector<double>& yticks, Frame& frame) {
  const double w = 470, h = 300;
  frame = scale;
  frame.left = PlotLeft(yticks);
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

Box TextBox(double x, double y, const std::string& text, double font_px, const std::string& anchor) {
  // DejaVu Sans's advances, in ems, by kind of character, rounded up: the
  // narrowest (0.28-0.34), the narrow (0.35-0.53), the wide (to 1), capitals
  // and symbols (to 0.84), the rest (digits, most lower case: 0.52-0.64);
  // beyond ASCII as the wide.
  double ems = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = text[i];
    if (c >= 0x80) {
      if ((c & 0xc0) == 0xc0) ems += 1.0;  // a code point's first byte
    } else if (c != 0 && std::strchr(" .,:;'il|j\\", c) != nullptr) {
      ems += 0.36;
    } else if (c != 0 && std::strchr("()[]frtI/-*!`\"_?", c) != nullptr) {
      ems += 0.54;
    } else if (c != 0 && std::strchr("mwMW%@", c) != nullptr) {
      ems += 1.0;
    } else if (std::isupper(c) || (c != 0 && std::strchr("+=<>~#&^", c) != nullptr)) {
      ems += 0.84;
    } else {
      ems += 0.64;
    }
  }
  const double w = ems * font_px;
  const double left = anchor == "middle" ? x - w / 2 : anchor == "end" ? x - w : x;
  // DejaVu's ascent 0.93 and descent 0.24 em, rounded up as Chromium's boxes are.
  return Box{left, y - 0.95 * font_px, left + w, y + 0.3 * font_px};
}

std::vector<std::string> WrapText(const std::string& text, double font_px, double width) {
  std::vector<std::string> lines;
  std::string line;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    const std::string longer = line.empty() ? std::string(word) : absl::StrCat(line, " ", word);
    const Box b = TextBox(0, 0, longer, font_px);
    if (!line.empty() && b.right - b.left > width) {
      lines.push_back(line);
      line = std::string(word);
    } else {
      line = longer;
    }
  }
  if (!line.empty() || lines.empty()) lines.push_back(line);
  return lines;
}

namespace {

// Whether the segment (x1, y1)-(x2, y2) passes through b (Liang-Barsky).
bool Crosses(const Box& b, double x1, double y1, double x2, double y2) {
  const double dx = x2 - x1, dy = y2 - y1;
  const double p[4] = {-dx, dx, -dy, dy};
  const double q[4] = {x1 - b.left, b.right - x1, y1 - b.top, b.bottom - y1};
  double t0 = 0, t1 = 1;
  for (int i = 0; i < 4; ++i) {
    if (p[i] == 0) {
      if (q[i] < 0) return false;
      continue;
    }
    const double t = q[i] / p[i];
    if (p[i] < 0) {
      t0 = std::max(t0, t);
    } else {
      t1 = std::min(t1, t);
    }
    if (t0 > t1) return false;
  }
  return true;
}

}  // namespace

std::string PlaceLabels(const std::vector<PointLabel>& labels, const std::vector<Polyline>& lines, const Box& area,
                        double point_radius, double max_shift) {
  constexpr double kFont = kSmallFontPx;
  constexpr double kGap = 1;     // between a label and another label, a point or a line
  constexpr double kStep = 0.5;  // the nudges tried, up and down in turn
  const double beside = point_radius + 3;
  const double centre = (0.95 - 0.3) / 2 * kFont;  // the baseline that centres a box on its point
  auto apart = [&](const Box& b, const std::vector<Box>& others) {
    const Box g{b.left - kGap, b.top - kGap, b.right + kGap, b.bottom + kGap};
    return std::none_of(others.begin(), others.end(), [&](const Box& o) { return o.Overlaps(g); });
  };
  auto off_lines = [&](const Box& b) {
    const Box g{b.left - kGap, b.top - kGap, b.right + kGap, b.bottom + kGap};
    for (const Polyline& line : lines) {
      for (size_t i = 1; i < line.size(); ++i) {
        if (Crosses(g, line[i - 1].first, line[i - 1].second, line[i].first, line[i].second)) return false;
      }
    }
    return true;
  };
  std::vector<Box> dots;
  for (const PointLabel& l : labels) {
    dots.push_back({l.x - point_radius, l.y - point_radius, l.x + point_radius, l.y + point_radius});
  }
  std::vector<Box> placed;
  std::string s;
  for (const PointLabel& l : labels) {
    // Right of the point, else left; each side that stays inside area.
    std::vector<std::pair<double, Box>> sides;
    for (const double side : {1.0, -1.0}) {
      const Box b = TextBox(l.x + side * beside, l.y + centre, l.text, kFont, side > 0 ? "start" : "end");
      if (b.left >= area.left && b.right <= area.right) sides.push_back({side, b});
    }
    // The nearest spot clear of the labels placed, the points and the lines;
    // else of the labels and the points; else of the labels; none within
    // max_shift: left out.
    std::optional<std::pair<double, double>> spot;  // side, shift
    for (int strict = 2; strict >= 0 && !spot; --strict) {
      for (const auto& [side, box] : sides) {
        for (int k = 0; !spot && k <= 2 * max_shift / kStep; ++k) {
          const double dy = (k % 2 == 1 ? -1 : 1) * ((k + 1) / 2) * kStep;  // 0, -s, +s, -2s, ...
          const Box b{box.left, box.top + dy, box.right, box.bottom + dy};
          if (b.top >= area.top && b.bottom <= area.bottom && apart(b, placed) && (strict < 1 || apart(b, dots)) &&
              (strict < 2 || off_lines(b))) {
            spot = {side, dy};
          }
        }
      }
    }
    if (!spot) continue;
    const auto [side, shift] = *spot;
    const Box box = TextBox(l.x + side * beside, l.y + centre + shift, l.text, kFont, side > 0 ? "start" : "end");
    placed.push_back(box);
    if (std::fabs(shift) > 2) {
      s += Line(l.x + side * (point_radius + 0.5), l.y, l.x + side * (beside - 0.5), (box.top + box.bottom) / 2,
                absl::StrCat("class=\"label-leader\" stroke=\"", l.colour, "\" stroke-width=\"0.8\""));
    }
    s += Text(l.x + side * beside, l.y + centre + shift, l.text,
              absl::StrCat("class=\"tick small point-label\" style=\"fill: ", l.colour,
                           "; stroke: #fff; stroke-width: 3px; stroke-linejoin: round; paint-order: stroke\"",
                           side < 0 ? " text-anchor=\"end\"" : ""));
  }
  return s;
}

namespace {

constexpr double kAxisTitlePx = 12;  // page.cc's .axis-title
constexpr double kYTitleX = 14;      // the rotated y axis title's baseline, when there is room
constexpr double kTickGap = 6;       // between the frame and a y tick label's end

double WidestLabel(const std::vector<double>& ticks, const std::function<std::string(double)>& label) {
  double w = 0;
  for (double t : ticks) {
    const Box b = TextBox(0, 0, label(t), kTickFontPx);
    w = std::max(w, b.right - b.left);
  }
  return w;
}

// The rotated title's baseline x: its descent (on the right) 3 px clear of
// the widest y tick label.
double YTitleX(double left, double widest) {
  return std::min(kYTitleX, left - kTickGap - widest - 3 - 0.3 * kAxisTitlePx);
}

}  // namespace

double PlotLeft(const std::vector<double>& yticks, const std::function<std::string(double)>& ylabel,
                double at_least) {
  return std::max(at_least, std::ceil(kYTitleX + 0.3 * kAxisTitlePx + 3 + WidestLabel(yticks, ylabel) + kTickGap));
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
                    Text(f.left - kTickGap, f.Y(y) + 4, ylabel(y), "class=\"tick\" text-anchor=\"end\""));
  }
  const double ytitle_x = YTitleX(f.left, WidestLabel(yticks, ylabel));
  for (double x : xticks) {
    absl::StrAppend(&s, "<line x1=\"", Px(f.X(x)), "\" x2=\"", Px(f.X(x)), "\" y1=\"", Px(f.top + f.height),
                    "\" y2=\"", Px(f.top + f.height + 4), "\" class=\"axis\"/>\n",
                    Text(f.X(x), f.top + f.height + 17, xlabel(x), "class=\"tick\" text-anchor=\"middle\""));
  }
  absl::StrAppend(&s,
                  Text(f.left + f.width / 2, f.top + f.height + 36, xtitle,
                       "class=\"axis-title\" text-anchor=\"middle\""),
                  Text(ytitle_x, f.top + f.height / 2, ytitle,
                       absl::StrCat("class=\"axis-title\" text-anchor=\"middle\" transform=\"rotate(-90 ",
                                    Px(ytitle_x), " ", Px(f.top + f.height / 2), ")\"")));
  return s;
}

}  // namespace normsweep::client::report
