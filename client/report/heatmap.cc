#include "client/report/figures.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/report/svg.h"
#include "client/results.h"

namespace normsweep::client::report {
namespace {

constexpr double kMinCellW = 84, kCellH = 46;
// page.cc's .cell-text, the second line's too (.small comes before it).
constexpr double kCellTextPx = 12;

// What a cell shows: its fill and class, a main line and a second one.
struct CellLook {
  std::string fill = "#ffffff", cls = "cell", main = "\u2013", sub;
  bool dark_text = true;
};

CellLook LookOf(const VariantView& v, const ResultCell* cell) {
  CellLook k;
  if (cell != nullptr && cell->seeds_with_loss > 0) {
    k.fill = v.scale.Fill(cell->mean_final_val_loss);
    k.dark_text = v.scale.DarkText(cell->mean_final_val_loss);
    k.main = Num(cell->mean_final_val_loss);
    if (cell->seeds_with_loss > 1) k.sub = absl::StrCat("\u00b1", Num(cell->std_final_val_loss));
    if (cell->diverged > 0) absl::StrAppend(&k.sub, k.sub.empty() ? "" : " ", cell->diverged, "/", cell->trials, " div");
    if (const int plat = PlateauedWithLoss(*cell); plat > 0) {
      absl::StrAppend(&k.sub, k.sub.empty() ? "" : " ", plat, "/", cell->trials, " plat");
    }
    if (cell->not_converged > 0) {
      absl::StrAppend(&k.sub, k.sub.empty() ? "" : " ", cell->not_converged, "/", cell->trials, " n.c.");
    }
    if (v.best_cell && cell->mean_final_val_loss <= *v.best_cell * (1 + kNearBestTolerance)) k.cls += " near";
  } else if (cell != nullptr && cell->diverged > 0) {
    k.fill = "url(#diverged)";
    k.cls += " diverged";
    k.main = "diverged";
    k.sub = absl::StrCat(cell->diverged, "/", cell->trials, " seeds");
  } else if (cell != nullptr && cell->failed > 0) {
    k.fill = "#bdbdbd";
    k.main = "failed";
  } else if (cell != nullptr && cell->unfinished > 0) {
    k.fill = "#f0f0f0";
    k.main = "pending";
  }
  return k;
}

std::string HeatmapSvg(const VariantView& v, const std::string& placement) {
  std::map<std::pair<int, double>, const ResultCell*> grid;
  for (const ResultCell& c : v.cells) {
    if (c.placement == placement) grid[{c.warmup_steps, c.peak_lr}] = &c;
  }
  // Cells wide enough for the widest text (many seeds: "±0.123 3/12 div 2/12 plat").
  std::vector<std::vector<CellLook>> looks(v.warmups.size());
  double cell_w = kMinCellW;
  for (size_t r = 0; r < v.warmups.size(); ++r) {
    for (size_t c = 0; c < v.lrs.size(); ++c) {
      auto it = grid.find({v.warmups[r], v.lrs[c]});
      const CellLook& k = looks[r].emplace_back(LookOf(v, it == grid.end() ? nullptr : it->second));
      for (const std::string* text : {&k.main, &k.sub}) {
        const Box b = TextBox(0, 0, *text, kCellTextPx);
        cell_w = std::max(cell_w, std::ceil(b.right - b.left + 8));
      }
    }
  }
  const double left = 78, top = 34;
  const double w = left + cell_w * v.lrs.size() + 12, h = top + kCellH * v.warmups.size() + 48;
  const std::string title = PlacementTitle(placement);
  std::string s = SvgOpen(w, h, title + ": final validation loss heatmap");
  s += Text(left + cell_w * v.lrs.size() / 2, 20, title, "class=\"chart-title\" text-anchor=\"middle\"");
  for (size_t r = 0; r < v.warmups.size(); ++r) {
    const double y = top + kCellH * r;
    s += Text(left - 8, y + kCellH / 2 + 4, std::to_string(v.warmups[r]), "class=\"tick\" text-anchor=\"end\"");
    for (size_t c = 0; c < v.lrs.size(); ++c) {
      const double x = left + cell_w * c;
      const CellLook& k = looks[r][c];
      absl::StrAppend(&s, "<rect x=\"", Px(x), "\" y=\"", Px(y), "\" width=\"", Px(cell_w), "\" height=\"", Px(kCellH),
                      "\" fill=\"", k.fill, "\" class=\"", k.cls, "\"><title>", Escape(title), ", warm-up ",
                      v.warmups[r], ", lr ", FormatLr(v.lrs[c]), ": ", Escape(k.main), " ", Escape(k.sub),
                      "</title></rect>\n");
      const std::string text_cls = k.dark_text ? "cell-text" : "cell-text light";
      s += Text(x + cell_w / 2, y + (k.sub.empty() ? kCellH / 2 + 5 : kCellH / 2 - 2), k.main,
                absl::StrCat("class=\"", text_cls, "\" text-anchor=\"middle\""));
      if (!k.sub.empty()) {
        s += Text(x + cell_w / 2, y + kCellH / 2 + 13, k.sub,
                  absl::StrCat("class=\"", text_cls, " small\" text-anchor=\"middle\""));
      }
    }
  }
  for (size_t c = 0; c < v.lrs.size(); ++c) {
    s += Text(left + cell_w * (c + 0.5), top + kCellH * v.warmups.size() + 17, FormatLr(v.lrs[c]),
              "class=\"tick\" text-anchor=\"middle\"");
  }
  s += Text(left + cell_w * v.lrs.size() / 2, h - 8, "peak learning rate", "class=\"axis-title\" text-anchor=\"middle\"");
  const double mid = top + kCellH * v.warmups.size() / 2;
  s += Text(16, mid, "warm-up steps",
            absl::StrCat("class=\"axis-title\" text-anchor=\"middle\" transform=\"rotate(-90 16 ", Px(mid), ")\""));
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
  absl::StrAppend(&s, "<rect x=\"", Px(bar_x), "\" y=\"", Px(bar_top), "\" width=\"", Px(bar_w), "\" height=\"",
                  Px(bar_h), "\" fill=\"url(#", id, ")\" class=\"bar\"/>\n");
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
    absl::StrAppend(&s, "<line x1=\"", Px(bar_x + bar_w), "\" x2=\"", Px(bar_x + bar_w + 5), "\" y1=\"", Px(y),
                    "\" y2=\"", Px(y), "\" class=\"axis\"/>\n",
                    Text(bar_x + bar_w + 8, y + 4, (t == lo || t == hi) ? Num(t) : TickLabel(t), "class=\"tick\""));
  }
  s += Text(bar_x + bar_w + 52, bar_top + 10, "(best)", "class=\"tick small\"");
  double y = bar_top + bar_h + 22;
  absl::StrAppend(&s, "<rect x=\"", Px(bar_x), "\" y=\"", Px(y), "\" width=\"22\" height=\"14\" fill=\"url(#diverged)\"/>",
                  Text(bar_x + 30, y + 11, "no loss: k/n seeds diverged", "class=\"tick\""));
  y += 22;
  absl::StrAppend(&s, "<rect x=\"", Px(bar_x), "\" y=\"", Px(y), "\" width=\"22\" height=\"14\" fill=\"#ffffff\" class=\"cell near\"/>",
                  Text(bar_x + 30, y + 11, absl::StrFormat("within %g%% of the best cell", kNearBestTolerance * 100),
                       "class=\"tick\""));
  y += 22;
  absl::StrAppend(&s, "<rect x=\"", Px(bar_x), "\" y=\"", Px(y), "\" width=\"22\" height=\"14\" fill=\"#bdbdbd\" class=\"cell\"/>",
                  Text(bar_x + 30, y + 11, "failed (error), no loss", "class=\"tick\""));
  y += 22;
  absl::StrAppend(&s, "<rect x=\"", Px(bar_x), "\" y=\"", Px(y), "\" width=\"22\" height=\"14\" fill=\"#f0f0f0\" class=\"cell\"/>",
                  Text(bar_x + 30, y + 11, "pending / running", "class=\"tick\""));
  return s + "</svg>\n";
}

}  // namespace

std::string HeatmapSection(const VariantView& v) {
  std::string s = "<div class=\"row\">\n";
  for (const std::string& p : v.placements) s += HeatmapSvg(v, p);
  return s + ScaleLegendSvg(v) + "</div>\n";
}

}  // namespace normsweep::client::report
