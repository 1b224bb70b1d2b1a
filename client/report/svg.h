// The drawing kit of `normsweep report` and its one placement style: HTML
// escaping, number formats, SVG text and axes, ticks, the viridis colour map,
// the categorical palettes, and the colour and title of each LayerNorm
// placement. Every figure of the report, the boundary chart and the text
// tables (results, boundary) title and colour placements through
// PlacementTitle and PlacementColour, so a placement looks the same
// everywhere.
#ifndef NORMSWEEP_CLIENT_REPORT_SVG_H_
#define NORMSWEEP_CLIENT_REPORT_SVG_H_

#include <array>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace normsweep::client {

// "Post-LN", "Pre-LN", "Peri-LN", "DeepNorm", "Mix-LN" for "post", "pre",
// "peri", "deepnorm", "mix"; other names unchanged. With a variant (the
// sweep's extra-axis values): "Post-LN (qk_norm=true)".
std::string PlacementTitle(const std::string& placement, const std::string& variant = "");

// One colour per placement, the same in every figure: Okabe-Ito's
// colour-blind-safe palette for the five placements (Post-LN vermillion,
// Pre-LN blue, Peri-LN bluish green, DeepNorm reddish purple, Mix-LN
// orange), and for any other name one of six more colours picked by a hash
// of the name (deterministic; two unknown names may share one).
std::string PlacementColour(const std::string& placement);

// The placements in the order the figures and tables show them: post, pre,
// peri, deepnorm, mix, then other names alphabetically.
std::vector<std::string> PlacementOrder(std::vector<std::string> placements);

}  // namespace normsweep::client

// The report's internals: helpers the figure files share.
namespace normsweep::client::report {

// HTML text and attribute values: & < > " ' escaped.
std::string Escape(const std::string& s);

// Fixed-point numbers for the page: Num(1.23456) = "1.235".
std::string Num(double v, int digits = 3);
// Has-and-finite, as the optional fields of the analysis are read.
bool Finite(bool has, double v);
// Table cells: the number, or an en dash as an HTML entity when unset.
std::string OptNum(bool has, double v, int digits = 3);
// The same for text that is escaped afterwards (tooltips, SVG text).
std::string OptText(bool has, double v);
// An SVG coordinate: one decimal.
std::string Px(double v);

// The viridis colour map (matplotlib's), 0 dark purple .. 1 yellow, as RGB 0..255.
std::array<double, 3> Viridis(double t);
std::string Hex(const std::array<double, 3>& rgb);

// Low loss is good: bright yellow; high loss dark purple.
struct ColourScale {
  double lo = 0, hi = 1;
  double T(double v) const { return hi > lo ? 1 - (v - lo) / (hi - lo) : 1; }
  std::string Fill(double v) const { return Hex(Viridis(T(v))); }
  bool DarkText(double v) const { return T(v) > 0.55; }
};

// Categorical colours (Tableau 10), the i-th of them cycling.
std::string Colour(size_t i);
// Colours for warm-ups: Tableau 10 without its red, which marks divergence.
std::string WarmupColour(size_t i);
// The i-th dash pattern as a stroke-dasharray attribute ("" for solid).
std::string DashAttr(size_t i);

// Round tick positions covering [lo, hi], about n of them.
std::vector<double> Ticks(double lo, double hi, int n);
std::string TickLabel(double v);

// A plot area inside an SVG: data coordinates to pixels.
struct Frame {
  double left, top, width, height;
  double x0, x1, y0, y1;
  double X(double x) const { return left + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * width; }
  double Y(double y) const { return top + height - (y1 > y0 ? (y - y0) / (y1 - y0) : 0.5) * height; }
};

// <svg ...> of w x h pixels; label is its aria-label. extra_attrs (e.g.
// class="boundary") goes after the others.
std::string SvgOpen(double w, double h, const std::string& label, const std::string& extra_attrs = "");
// A placement's 470 x 300 panel (the loss-against-lr and the curves
// figures): scale's data ranges in the panel's plot area; opens the SVG,
// labelled "<title>: <what>", with the placement's title on top.
std::string OpenPlacementPanel(const std::string& placement, const std::string& what, const Frame& scale,
                               Frame& frame);
// <text> at (x, y), text escaped.
std::string Text(double x, double y, const std::string& text, const std::string& attrs = "");
std::string Line(double x1, double y1, double x2, double y2, const std::string& attrs);
// An x of half-width r at (x, y) with a tooltip.
std::string CrossPath(double x, double y, double r, const std::string& cls, const std::string& title);

// Axes with ticks, labels and titles around a frame.
std::string Axes(const Frame& f, const std::vector<double>& xticks, const std::vector<double>& yticks,
                 const std::string& xtitle, const std::string& ytitle,
                 const std::function<std::string(double)>& xlabel = TickLabel,
                 const std::function<std::string(double)>& ylabel = TickLabel);

}  // namespace normsweep::client::report

#endif  // NORMSWEEP_CLIENT_REPORT_SVG_H_
