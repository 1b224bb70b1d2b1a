#include "client/report/figures.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/report/svg.h"

namespace normsweep::client::report {
namespace {

int Depth(const v1::GetTrialResponse& t) {
  if (t.trial().config().layers() > 0) return t.trial().config().layers();
  int layers = 0;
  for (const v1::LayerGradNorms& g : t.layer_grad_norms()) {
    for (const v1::LayerGradNorm& n : g.norms()) layers = std::max(layers, n.layer() + 1);
  }
  return layers;
}

}  // namespace

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
  for (const std::string& p : placements) absl::StrAppend(&s, "<th>", Escape(PlacementTitle(p)), "</th>");
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

}  // namespace normsweep::client::report
