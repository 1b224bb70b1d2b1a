// The figures of `normsweep report`, one file each. Every function returns
// an HTML fragment (inline SVG and tables) for one variant of the sweep; the
// page (page.cc) puts headings and explanations around them. An empty figure
// is a short note that says why.
#ifndef NORMSWEEP_CLIENT_REPORT_FIGURES_H_
#define NORMSWEEP_CLIENT_REPORT_FIGURES_H_

#include <string>
#include <vector>

#include "client/report/report.h"
#include "client/report/variant_view.h"
#include "proto/schema/failure.h"
#include "trainer/settings/config.h"

namespace normsweep::client::report {

// Above the divergence threshold (1.5 ln 256, the trainer's default) a
// validation curve is off the chart: it would squash every other one.
inline constexpr double kCurveCap = trainer::kDefaultDivergenceLoss;

// summary_table.cc: one row per placement (and variant), the
// placement_sensitivity view's figures.
std::string SummaryTable(const std::vector<PlacementSummary>& rows, bool show_variant);

// heatmap.cc: mean final validation loss over warm-up x peak lr, a heatmap
// per placement on one colour scale, with the scale and the cell legend.
std::string HeatmapSection(const VariantView& v);

// loss_vs_lr.cc: final loss against log peak lr, a line per warm-up, a panel
// per placement (Wortsman et al. 2023, Figure 1).
std::string LossVsLrSection(const VariantView& v);

// lr_sensitivity.cc: LR sensitivity against warm-up, a line per placement,
// with the table of the lines and their summary over warm-ups.
std::string LrSensitivitySection(const VariantView& v);

// variance_shares.cc: the fANOVA shares (grid_importance), a stacked bar per
// placement.
std::string VarianceSharesSection(const VariantView& v);

// curves.cc: validation loss during training, a line per trial.
std::string CurvesSection(const VariantView& v);

// diagnostics.cc: worst layer's max attention logit, output log Z and
// largest update ratio of two trials per placement.
std::string DiagnosticsSection(const VariantView& v);
// The two trials: the best lr's and the first failure to train by the one
// rule (proto/schema/failure.h), either null when there is none. The fetch
// keeps the diagnostics of these trials only.
struct DiagnosticPicks {
  const v1::GetTrialResponse* best = nullptr;           // the best lr's trial
  const v1::GetTrialResponse* first_failure = nullptr;  // the first above the best lr, else the smallest lr
  schema::TrainingFailure failure = schema::TrainingFailure::kNone;  // first_failure's cause
};
DiagnosticPicks PickDiagnosticTrials(const VariantView& v, const std::string& placement);

// grad_norms.cc: the step-0 FFN gradient norms per layer (Xiong et al. 2020,
// Figure 3).
std::string GradNormsSection(const VariantView& v);

// depth_table.cc: the last layer's step-0 W2 norm by depth and placement,
// over the whole sweep; "" unless the sweep varies the depth.
std::string DepthTable(const ReportData& data);

}  // namespace normsweep::client::report

#endif  // NORMSWEEP_CLIENT_REPORT_FIGURES_H_
