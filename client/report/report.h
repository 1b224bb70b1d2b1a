// `normsweep report`: one self-contained HTML page about a sweep, for a
// paper or an issue: with several variants (extra axes, qk_norm on and
// off), the variants compared per placement; the (warm-up x peak lr)
// heatmap of final validation loss per placement; final loss against log
// peak lr, a line per warm-up with diverged cells at l0 (the top edge when
// l0 is above the data), and LR sensitivity against warm-up with l*
// (Wortsman et al. 2023, Figures 1 and 5); the fANOVA variance shares;
// validation-loss curves per placement; the instability diagnostics (worst
// layer's max attention logit, output log Z, largest update ratio) of the
// best lr's trial and the first failure to train (proto/schema/failure.h); the step-0 FFN gradient norms
// per layer (Xiong et al. 2020, Figure 3) and a summary per placement like
// the placement_sensitivity view. Inline CSS and SVG only: no script,
// nothing fetched from the network.
//
// The files of client/report/:
//   report.h      this header: what a report shows (ReportData)
//   fetch.{h,cc}  FetchReportData: the data over SweepService
//   export_reader.{h,cc}  ExportSweep's chunks back into GetTrial's messages
//   page.{h,cc}   RenderReportHtml, a pure function of the data (so the page
//                 is tested from hand-made data), and WriteReport
//   svg.{h,cc}    escaping, axes, ticks, colour maps, the palettes (one
//                 per kind of series) and the placements' titles, shared by
//                 every figure and the text tables
//   variant_view.{h,cc}  the data grouped per variant, as the figures read it
//   figures.h     the figures, one .cc each (variants_compared.cc: the
//                 variants side by side); boundary.{h,cc} the boundary
//                 search's chart
#ifndef NORMSWEEP_CLIENT_REPORT_REPORT_H_
#define NORMSWEEP_CLIENT_REPORT_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/sweep_service.pb.h"
#include "proto/schema/api_limits.h"

namespace normsweep::client {

// What a report shows, as the scheduler returns it.
struct ReportData {
  v1::Sweep sweep;
  // Each trial with its metrics (step and kReportMetricFields), layer
  // gradient norms (and diagnostics).
  std::vector<v1::GetTrialResponse> trials;
  v1::GetSweepAnalysisResponse analysis;     // the views' figures (GetSweepAnalysis, kNearBestTolerance)
};

// The MetricPoint fields the page draws (curves.cc: val_loss; diagnostics.cc:
// output_log_z): FetchReportData asks ExportSweep for these columns only,
// less work per row for the scheduler on a sweep's million metric rows. A
// figure that reads another field adds it here (export_reader_test renders
// the page with and without the others to hold this list to the figures).
inline constexpr const char* kReportMetricFields[] = {"val_loss", "output_log_z"};

// "Near the best" as the placement_sensitivity view counts it: a grid cell
// whose mean final validation loss is at most (1 + tolerance) times the best
// cell of the same variant, over both placements. The scheduler's default.
inline constexpr double kNearBestTolerance = schema::kDefaultNearBestTolerance;

// One row of the summary: the placement_sensitivity view's figures.
struct PlacementSummary {
  std::string variant, placement;
  int trials = 0, succeeded = 0, diverged = 0, failed = 0, cancelled = 0, unfinished = 0;
  int plateaued = 0;                   // SUCCEEDED but failed to train (proto/schema/failure.h)
  std::optional<double> failure_rate;  // (diverged + plateaued) / (succeeded + diverged)
  int not_converged = 0;               // SUCCEEDED near the unigram loss, still learning: no failure
  std::optional<double> best_val_loss;    // best final validation loss of a succeeded trial
  std::optional<double> median_val_loss;  // their median
  int grid_cells = 0, cells_near_best = 0;
  std::optional<double> best_cell_val_loss;  // the yardstick (both placements of the variant)
};

// The rows of GetSweepAnalysis (placement_sensitivity_at), by variant, then
// placement: the view's figures as they are, no arithmetic here.
std::vector<PlacementSummary> SummariesFromAnalysis(const v1::GetSweepAnalysisResponse& analysis);

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_REPORT_REPORT_H_
