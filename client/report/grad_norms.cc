#include "client/report/figures.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/report/svg.h"

namespace normsweep::client::report {

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
  const std::vector<double> yticks = Ticks(0, hi * 1.08, 5);
  const double left = PlotLeft(yticks, TickLabel, 60);  // small norms have long tick labels (0.0002)
  Frame f{left, 30, w - left - 16, h - 30 - 50, -0.5, layers - 0.5, 0, hi * 1.08};
  std::string s = "<div class=\"row\">\n" + SvgOpen(w, h, "step-0 FFN gradient norms per layer");
  s += Text(f.left + f.width / 2, 18, "||dL/dW||_F at step 0, mean over seeds",
            "class=\"chart-title\" text-anchor=\"middle\"");
  std::vector<double> xticks;
  const int every = std::max(1, layers / 12);
  for (int l = 0; l < layers; l += every) xticks.push_back(l);
  s += Axes(f, xticks, yticks, "layer (0 = nearest the input)", "gradient norm");
  std::string legend = SvgOpen(250, 30 + 22 * 2 * norms.size(), "gradient norm legend");
  double ly = 0;
  for (const std::string& placement : v.placements) {
    auto found = norms.find(placement);
    if (found == norms.end()) continue;
    const LayerNorms& n = found->second;
    for (int k = 0; k < 2; ++k) {
      const std::map<int, double>& m = k == 0 ? n.w1 : n.w2;
      const std::string colour = PlacementColour(placement);
      const std::string name = absl::StrCat(PlacementTitle(placement), k == 0 ? " W1 (fc1)" : " W2 (fc2)");
      std::string points, marks;
      for (const auto& [layer, value] : m) {
        absl::StrAppend(&points, Px(f.X(layer)), ",", Px(f.Y(value)), " ");
        absl::StrAppend(&marks, k == 0 ? "<circle r=\"3.5\" cx=\"" : "<rect width=\"7\" height=\"7\" x=\"",
                        Px(f.X(layer) - (k == 0 ? 0 : 3.5)), k == 0 ? "\" cy=\"" : "\" y=\"",
                        Px(f.Y(value) - (k == 0 ? 0 : 3.5)), "\" fill=\"", colour, "\"><title>", Escape(name),
                        ", layer ", layer, ": ", Num(value, 4), "</title>", k == 0 ? "</circle>" : "</rect>", "\n");
      }
      absl::StrAppend(&s, "<polyline class=\"curve\" fill=\"none\" stroke=\"", colour, "\"", DashAttr(k),
                      " points=\"", points, "\"/>\n", marks);
      ly += 22;
      absl::StrAppend(&legend, "<line x1=\"10\" x2=\"44\" y1=\"", Px(ly - 4), "\" y2=\"", Px(ly - 4), "\" stroke=\"",
                      colour, "\"", DashAttr(k), " class=\"curve\"/>",
                      Text(52, ly, absl::StrCat(name, " (", n.seeds, n.seeds == 1 ? " seed)" : " seeds)"),
                           "class=\"tick\""));
    }
  }
  return s + "</svg>\n" + legend + "</svg>\n</div>\n";
}

}  // namespace normsweep::client::report
