#include "client/report/figures.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/report/svg.h"

namespace normsweep::client {

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
    r.plateaued = p.plateaued();
    r.failure_rate = opt(p.has_failure_rate(), p.failure_rate());
    r.not_converged = p.not_converged();
    r.best_val_loss = opt(p.has_best_val_loss(), p.best_val_loss());
    r.median_val_loss = opt(p.has_median_val_loss(), p.median_val_loss());
    r.grid_cells = p.grid_cells();
    r.cells_near_best = p.cells_near_best();
    r.best_cell_val_loss = opt(p.has_best_cell_val_loss(), p.best_cell_val_loss());
  }
  return out;
}

}  // namespace normsweep::client

namespace normsweep::client::report {
namespace {

std::string Opt(const std::optional<double>& v) { return v ? Num(*v) : "&ndash;"; }
std::string Percent(const std::optional<double>& v) { return v ? absl::StrFormat("%.0f%%", 100 * *v) : "&ndash;"; }

}  // namespace

std::string SummaryTable(const std::vector<PlacementSummary>& rows, bool show_variant) {
  std::string s = absl::StrCat(
      "<table class=\"num\">\n<tr>", show_variant ? "<th>variant</th>" : "",
      "<th>placement</th><th>trials</th><th>succeeded</th><th>diverged</th><th>plateaued</th><th>failure rate</th>"
      "<th>not converged</th><th>failed</th><th>unfinished</th>"
      "<th>best final val loss</th><th>median</th><th>grid cells near the best</th></tr>\n");
  for (const PlacementSummary& r : rows) {
    const std::string near =
        r.grid_cells > 0 ? absl::StrFormat("%d / %d (%.0f%%)", r.cells_near_best, r.grid_cells,
                                           100.0 * r.cells_near_best / r.grid_cells)
                         : "&ndash;";
    absl::StrAppend(&s, "<tr>", show_variant ? absl::StrCat("<td>", Escape(r.variant), "</td>") : "", "<td>",
                    Escape(PlacementTitle(r.placement)), "</td><td>", r.trials, "</td><td>", r.succeeded, "</td><td>",
                    r.diverged, "</td><td>", r.plateaued, "</td><td>", Percent(r.failure_rate), "</td><td>",
                    r.not_converged, "</td><td>", r.failed, "</td><td>", r.unfinished + r.cancelled, "</td><td>",
                    Opt(r.best_val_loss), "</td><td>", Opt(r.median_val_loss), "</td><td>", near, "</td></tr>\n");
  }
  return s + "</table>\n";
}

}  // namespace normsweep::client::report
