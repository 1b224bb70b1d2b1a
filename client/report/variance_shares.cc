#include "client/report/figures.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
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

// Whether the view gave every share (else its note says why not).
bool AllShares(const v1::VarianceShares& r) {
  return Finite(r.has_share_warmup(), r.share_warmup()) && Finite(r.has_share_lr(), r.share_lr()) &&
         Finite(r.has_share_interaction(), r.share_interaction()) && Finite(r.has_share_seed(), r.share_seed());
}

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
  const double label_w = 90, bar_w = 380, row_h = 34, line_h = 14, top = 44;
  // Each row's text right of the bar, and the unset rows' notes in lines
  // inside the bar (the view's notes run to a hundred characters).
  std::vector<std::string> right(rows.size());
  std::vector<std::vector<std::string>> notes(rows.size());
  double right_w = 252, h = top + 8;
  for (size_t i = 0; i < rows.size(); ++i) {
    const v1::VarianceShares& r = *rows[i];
    right[i] = absl::StrCat(r.warmups(), r.warmups() == 1 ? " warm-up" : " warm-ups", " \u00d7 ", r.lrs(),
                            r.lrs() == 1 ? " lr" : " lrs", ", ", r.trials(), " trials");
    if (!AllShares(r)) {
      notes[i] = WrapText(absl::StrCat("unset: ", r.note().empty() ? "no figure from the view" : r.note()),
                          kTickFontPx, bar_w - 16);
    } else if (Finite(r.has_total_variance(), r.total_variance())) {
      right[i] = absl::StrCat("variance ", absl::StrFormat("%.3g", r.total_variance()), "; ", right[i]);
    }
    const Box b = TextBox(0, 0, right[i], kTickFontPx);
    right_w = std::max(right_w, std::ceil(b.right - b.left + 8));
    h += row_h + line_h * std::max<double>(0, notes[i].size() - 1.0);
  }
  const double w = label_w + bar_w + 8 + right_w;
  std::string s = SvgOpen(w, h, "variance of final validation loss explained");
  double lx = label_w;
  for (const ShareKind& k : kShareKinds) {
    absl::StrAppend(&s, "<rect x=\"", Px(lx), "\" y=\"8\" width=\"14\" height=\"14\" fill=\"", k.colour,
                    "\" class=\"bar\"/>", Text(lx + 20, 20, k.name, "class=\"tick\""));
    lx += 36 + 7.0 * std::strlen(k.name);
  }
  double y = top;
  for (size_t i = 0; i < rows.size(); ++i) {
    const v1::VarianceShares& r = *rows[i];
    s += Text(label_w - 8, y + 17, PlacementTitle(r.placement()), "class=\"tick\" text-anchor=\"end\"");
    s += Text(label_w + bar_w + 8, y + 17, right[i], "class=\"tick\"");
    if (!notes[i].empty()) {
      const double extra = line_h * (notes[i].size() - 1.0);
      absl::StrAppend(&s, "<rect x=\"", Px(label_w), "\" y=\"", Px(y + 2), "\" width=\"", Px(bar_w),
                      "\" height=\"", Px(22 + extra), "\" fill=\"#f7f7f7\" class=\"bar shares-unset\"/>");
      for (size_t k = 0; k < notes[i].size(); ++k) {
        s += Text(label_w + 8, y + 17 + line_h * k, notes[i][k], "class=\"tick\"");
      }
      y += row_h + extra;
      continue;
    }
    const std::array<double, 4> shares = {r.share_warmup(), r.share_lr(), r.share_interaction(), r.share_seed()};
    double x = label_w;
    for (size_t k = 0; k < shares.size(); ++k) {
      const double share = std::clamp(shares[k], 0.0, 1.0);
      const double width = share * bar_w;
      absl::StrAppend(&s, "<rect x=\"", Px(x), "\" y=\"", Px(y + 2), "\" width=\"", Px(width),
                      "\" height=\"22\" fill=\"", kShareKinds[k].colour, "\" class=\"bar share ", kShareKinds[k].cls,
                      "\"><title>", Escape(PlacementTitle(r.placement())), ": ", kShareKinds[k].name, " ",
                      absl::StrFormat("%.1f%%", 100 * shares[k]), "</title></rect>\n");
      if (width >= 34) {
        s += Text(x + width / 2, y + 17, absl::StrFormat("%.0f%%", 100 * shares[k]),
                  "class=\"tick\" text-anchor=\"middle\"");
      }
      x += width;
    }
    y += row_h;
  }
  s += "</svg>\n";
  return s;
}

}  // namespace normsweep::client::report
