// The report's data grouped as its figures read it: per variant (the sweep's
// extra-axis values), the trials by placement, the views' rows of that
// variant, the grid's axes and the heatmaps' colour scale; and the small
// reductions that several figures share (step-0 gradient norms over seeds,
// a placement's l0).
#ifndef NORMSWEEP_CLIENT_REPORT_VARIANT_VIEW_H_
#define NORMSWEEP_CLIENT_REPORT_VARIANT_VIEW_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "client/report/report.h"
#include "client/report/svg.h"
#include "client/results.h"
#include "normsweep/v1/sweep_service.pb.h"

namespace normsweep::client::report {

struct Mean {
  double sum = 0;
  int n = 0;
  void Add(double v) {
    sum += v;
    ++n;
  }
  double value() const { return sum / n; }
};

// The trials of one variant, and the grid axes both placements share.
struct VariantView {
  int index = 0;  // the variant's place in the sweep (Variants' order): element ids, VariantColour
  std::string variant;
  std::vector<std::string> placements;
  std::map<std::string, std::vector<const v1::GetTrialResponse*>> trials;  // by placement
  std::vector<ResultCell> cells;                                          // the view's cells of this variant
  std::vector<const v1::LrSensitivity*> lr_sensitivity;                   // lr_sensitivity rows
  std::vector<const v1::PlacementLrSensitivity*> lr_summary;              // lr_sensitivity_summary rows
  std::vector<const v1::VarianceShares*> importance;                      // grid_importance rows
  std::vector<int> warmups;
  std::vector<double> lrs;
  std::optional<double> best_cell;  // this variant's best cell (near the best is within a variant, as the view has it)
  ColourScale scale;                // one for every variant: the heatmaps of all variants compare
  std::optional<double> max_val_loss;  // the failure rule's (FailureMaxValLoss of the sweep's spec)
};

// In the sweep's expansion order (by each variant's lowest trial index, the
// first the baseline of the variants' comparison); the views point into
// data, which must outlive them.
std::vector<VariantView> Variants(const ReportData& data);

// Step-0 W1/W2 norms per layer, mean over seeds: a seed's trials (one per
// grid cell, identical at step 0) are averaged first, as step0_grad_norms does.
struct LayerNorms {
  std::map<int, double> w1, w2;  // layer -> mean over seeds
  int seeds = 0;
};
LayerNorms Step0Norms(const std::vector<const v1::GetTrialResponse*>& trials);

// The lr_sensitivity row of a placement's warm-up line, or null.
const v1::LrSensitivity* LrsRow(const VariantView& v, const std::string& placement, int warmup);

// The seeds of a cell that failed to train with a finite final loss (the
// unigram plateau, above a boundary search's max_val_loss): the view's
// plateaued counts the succeeded seeds without a finite loss as well.
int PlateauedWithLoss(const ResultCell& c);

// l0 of a placement: the mean of its lines' l0 (they differ by the seeds
// only: the loss at initialisation depends on neither warm-up nor lr).
std::optional<double> PlacementL0(const VariantView& v, const std::string& placement);

}  // namespace normsweep::client::report

#endif  // NORMSWEEP_CLIENT_REPORT_VARIANT_VIEW_H_
