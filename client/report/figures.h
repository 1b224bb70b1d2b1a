// The figures of `normsweep report`, one file each. Every function returns
// an HTML fragment (inline SVG and tables) for one variant of the sweep; the
// page (page.cc) puts headings and explanations around them. An empty figure
// is a short note that says why.
#ifndef NORMSWEEP_CLIENT_REPORT_FIGURES_H_
#define NORMSWEEP_CLIENT_REPORT_FIGURES_H_

#include <optional>
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

// The pieces of the loss-against-lr figures (loss_vs_lr.cc), which the
// variants' comparison draws with too.
// One grid cell on a line.
struct LossPoint {
  double lr = 0;
  std::optional<double> y;  // the mean loss over seeds; l0 for a cell with no usable seed
  int bad = 0;              // seeds diverged or with a non-finite loss
  bool all_bad = false;     // no usable seed: a cross at l0, or at the top edge (l0 above the data, or none)
  bool plateau = false;     // a seed with a finite loss failed to train (the plateau): a hollow point
  bool not_converged = false;  // a seed ended near the unigram loss still learning: a diamond around the point
  const ResultCell* cell = nullptr;
};
// A warm-up's line of a placement, by lr. Failed, cancelled and pending
// cells have no point.
std::vector<LossPoint> LossLine(const VariantView& v, const std::string& placement, int warmup);
// The marks drawn, for the legend.
struct LossMarks {
  bool partial = false, cross_at_l0 = false, cross_at_top = false, plateau = false, not_converged = false;
  bool any_l0 = false;  // some l0 reported
};
// One frame for the panels of these lines: x the lrs (log10), y the range
// of the lines' mean losses, which the data fill; l0 is not in it (unless
// it lies below every mean, or there is no mean), the top edge stands for
// it (L0Annotation). nullopt when no line has a point.
std::optional<Frame> LossFrame(const std::vector<const std::vector<LossPoint>*>& lines, const std::vector<double>& lrs);
// Opens a placement's panel in frame scale with its axes.
std::string OpenLossPanel(const std::string& placement, const std::string& what, const std::vector<double>& lrs,
                          const Frame& scale, Frame& f);
// One line in panel f, its points titled "<name>, lr <lr>: ...". A cell
// with no usable seed is a cross at its l0 when l0 is in f's range, else at
// the top edge (the line broken there).
std::string LossLineSvg(const Frame& f, const std::vector<LossPoint>& line, const std::string& colour,
                        const std::string& dash_attr, const std::string& name, LossMarks& marks);
// l0 of a panel (its lines' values, "" when none): a dashed line at l0 when
// in f's range, else at the top edge labelled "l0 5.800 ↑".
std::string L0Annotation(const Frame& f, const std::vector<double>& l0s, const std::string& title);
// The legend's rows for marks, from its y (a row's baseline) on; y is left
// on the last row.
std::string LossMarksLegend(const LossMarks& marks, double& y);
// Rows LossMarksLegend draws.
int LossMarksLegendRows(const LossMarks& marks);

// lr_sensitivity.cc: LR sensitivity against warm-up, a line per placement,
// with the table of the lines and their summary over warm-ups.
std::string LrSensitivitySection(const VariantView& v);

// variants_compared.cc: the variants side by side per placement (""
// with fewer than two): the variant_comparison view's rows (each variant's
// LR sensitivity, l*, best lr, failure rate and, for boundary searches, max
// trainable lr, with its difference from the baseline, the first variant; a
// note when the scheduler gave none), final loss against lr and LR
// sensitivity by warm-up with a line per variant (VariantColour), a
// placement's variants on one scale.
std::string VariantsComparedSection(const std::vector<VariantView>& variants,
                                    const v1::GetSweepAnalysisResponse& analysis);

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
