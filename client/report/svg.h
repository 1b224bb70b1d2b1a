// The drawing kit of `normsweep report` and its one placement style: HTML
// escaping, number formats, SVG text and axes, ticks, text boxes and the
// placement of free labels (so no two texts of a figure overlap), the
// viridis colour map, the palettes, and the colour and title of each
// LayerNorm placement. Every figure of the report, the boundary chart and
// the text tables (results, boundary) title and colour placements through
// PlacementTitle and PlacementColour, so a placement looks the same
// everywhere.
//
// The palettes, one per kind of series, no colour in two of them; a figure
// colours its series by one kind only (report_variants_test, ReportPaletteTest):
//   placements  PlacementColour: Okabe-Ito, categorical (LR sensitivity per
//               placement, gradient norms, diagnostics, boundary chart)
//   variants    VariantColour: Paul Tol's muted colours, categorical, by the
//               variant's place in the sweep (the variants' comparison)
//   peak lrs    LrColour: a sequential ramp, magma's dark purple (smallest
//               lr) to salmon (largest) (validation curves)
//   warm-ups    WarmupColour: a grey ramp, light (shortest) to near black
//               (loss against lr; the comparison draws warm-ups as dashes)
// and viridis for a loss value (the heatmaps), red for divergence marks.
#ifndef NORMSWEEP_CLIENT_REPORT_SVG_H_
#define NORMSWEEP_CLIENT_REPORT_SVG_H_

#include <array>
#include <cstddef>
#include <functional>
#include <string>
#include <utility>
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

// Every colour PlacementColour gives: the schemes' and the other names'.
std::vector<std::string> PlacementPalette();

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

// The i-th variant's colour (the sweep's variants in expansion order), six
// of them cycling.
std::string VariantColour(size_t i);
inline constexpr size_t kVariantColours = 6;
// The i-th of n peak lrs (ascending) on the lr ramp; n <= 1: its middle.
std::string LrColour(size_t i, size_t n);
// The i-th of n warm-ups (ascending) on the grey ramp; n <= 1: its dark end.
std::string WarmupColour(size_t i, size_t n);
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
// figures): scale's data ranges in the panel's plot area, left of it room
// for the y axis labelled with yticks (PlotLeft); opens the SVG, labelled
// "<title>: <what>", with the placement's title on top.
std::string OpenPlacementPanel(const std::string& placement, const std::string& what, const Frame& scale,
                               const std::vector<double>& yticks, Frame& frame);
// <text> at (x, y), text escaped.
std::string Text(double x, double y, const std::string& text, const std::string& attrs = "");
std::string Line(double x1, double y1, double x2, double y2, const std::string& attrs);
// An x of half-width r at (x, y) with a tooltip.
std::string CrossPath(double x, double y, double r, const std::string& cls, const std::string& title);

// A rectangle in pixels.
struct Box {
  double left = 0, top = 0, right = 0, bottom = 0;
  bool Overlaps(const Box& o) const {
    return left < o.right && o.left < right && top < o.bottom && o.top < bottom;
  }
};

// The text sizes of page.cc's style: .tick and .small.
inline constexpr double kTickFontPx = 11, kSmallFontPx = 10;

// The box a text takes with its baseline at y, anchored at x by anchor
// ("start", "middle", "end"), in the page's font (DejaVu Sans; the
// fallbacks are narrower): from its characters' widths, a little generous.
Box TextBox(double x, double y, const std::string& text, double font_px, const std::string& anchor = "start");

// text in lines of at most width pixels at font_px (by TextBox), broken at
// spaces; a word wider than that has a line of its own.
std::vector<std::string> WrapText(const std::string& text, double font_px, double width);

// A label for a point of a chart: text beside the point, in its colour.
struct PointLabel {
  double x = 0, y = 0;  // the point
  std::string text;
  std::string colour;
};

// A chart's line through points, in pixels.
using Polyline = std::vector<std::pair<double, double>>;

// Free labels of a chart's points (the l* beside the LR-sensitivity points),
// the one way every figure places them: each beside its point, centred on
// it, right of it (left when the right has no room in area), else nudged up
// or down (the right side's shifts tried before the left's) to a spot inside
// area clear of the labels placed before
// it, of every point and of the lines (of the labels and points only, then
// of the labels only, when no such spot is near), with a leader line back to
// its point. Labels earlier in the list choose first. A label with no clear
// spot within max_shift of its point is left out (the point's tooltip says
// it): no two labels ever overlap. Small text (.tick.small) with a white
// halo; the points are circles of point_radius.
std::string PlaceLabels(const std::vector<PointLabel>& labels, const std::vector<Polyline>& lines, const Box& area,
                        double point_radius, double max_shift = 40);

// Axes with ticks, labels and titles around a frame; the y axis title left
// of the widest y tick label (see PlotLeft).
std::string Axes(const Frame& f, const std::vector<double>& xticks, const std::vector<double>& yticks,
                 const std::string& xtitle, const std::string& ytitle,
                 const std::function<std::string(double)>& xlabel = TickLabel,
                 const std::function<std::string(double)>& ylabel = TickLabel);

// The left edge for a frame whose y axis Axes labels with these ticks: room
// for the widest tick label and the y axis title beside it; at least at_least.
double PlotLeft(const std::vector<double>& yticks,
                const std::function<std::string(double)>& ylabel = TickLabel, double at_least = 58);

}  // namespace normsweep::client::report

#endif  // NORMSWEEP_CLIENT_REPORT_SVG_H_
