#include "client/report/figures.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/report/svg.h"

namespace normsweep::client::report {
namespace {

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

}  // namespace

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
    absl::StrAppend(&s, "<rect x=\"", Px(lx), "\" y=\"8\" width=\"14\" height=\"14\" fill=\"", k.colour,
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
      absl::StrAppend(&s, "<rect x=\"", Px(label_w), "\" y=\"", Px(y + 2), "\" width=\"", Px(bar_w),
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
      absl::StrAppend(&s, "<rect x=\"", Px(x), "\" y=\"", Px(y + 2), "\" width=\"", Px(width),
                      "\" height=\"22\" fill=\"", kShareKinds[k].colour, "\" class=\"bar share ", kShareKinds[k].cls,
                      "\"><title>", Escape(PlacementTitle(r.placement())), ": ", kShareKinds[k].name, " ",
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

}  // namespace normsweep::client::report
