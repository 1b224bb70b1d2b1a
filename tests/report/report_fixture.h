// Hand-made report data for the report's tests: trials with metrics and
// step-0 gradient norms, and the analysis rows of the newer measures (grid
// cells, LR sensitivity, variance shares, per-layer diagnostics) written by
// hand, as GetSweepAnalysis and GetTrial would return them.
#ifndef NORMSWEEP_TESTS_REPORT_REPORT_FIXTURE_H_
#define NORMSWEEP_TESTS_REPORT_REPORT_FIXTURE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "client/report/report.h"
#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/sweep_service.pb.h"
#include "tests/common/text_checks.h"  // Count, for the pages

namespace normsweep::testing {

// A trial with validation points at steps 50, 100, 150 ending at `loss`, and
// step-0 norms W1 = scale * (l + 1), W2 = 1.5 * scale * (l + 1) per layer.
v1::GetTrialResponse MakeTrial(const std::string& placement, int warmup, double lr, int seed, v1::TrialState state,
                               std::optional<double> loss = std::nullopt, const std::string& variant = "",
                               int layers = 2, double norm_scale = 1.0);

// A warmup_lr_grid_stats row: `trials` seeds, `diverged` of them diverged,
// the rest succeeded; n_seeds with a usable loss, their mean.
v1::GridCell Cell(const std::string& placement, int warmup, double lr, int trials, int diverged,
                  std::optional<double> mean, int n_seeds);

// An lr_sensitivity row.
v1::LrSensitivity Lrs(const std::string& placement, int warmup, int lrs, int at_l0, double best_lr, double best,
                      double l0, std::optional<double> lrs_value, int pending = 0);

// Per-layer diagnostics at steps 0, 50, 100: layer l's max attention logit
// logit(l, step), its update ratios ratio(l, matrix, step) (none at step 0).
void AddDiagnostics(v1::GetTrialResponse& t, int layers, const std::function<double(int, int)>& logit,
                    const std::function<double(int, int, int)>& ratio);

// post/pre x warm-up {0, 100} x lr {1e-4, 1e-3, 1e-2} x seeds {0, 1}, the
// data's unigram loss 3.41 (every final loss is more than 0.1 below it).
// Post-LN: every seed diverges at 1e-2 (step 60), one seed at (0, 1e-3); its
// best cell is (100, 1e-3), its first failure above it (0, 1e-2) seed 0.
// Pre-LN: one seed diverges at (0, 1e-2) at step 50 and one at (100, 1e-2)
// at step 20, its first failure; its best cell is (0, 1e-3).
struct Figures {
  client::ReportData data;
  int64_t post_best = 0, post_first_failure = 0, pre_best = 0, pre_first_failure = 0;
};

Figures LiteratureFigures();

// Adds to LiteratureFigures a Post-LN trial at (0, 3e-3), seed 0, that
// SUCCEEDED at the unigram plateau (final loss 3.43 against the unigram loss
// 3.41), with flat diagnostics, and its grid cell (plateaued 1, failure
// rate 1): Post-LN's first failure above its best lr. Returns its id.
int64_t AddPlateau(Figures& fig);

// AddPlateau's trial still learning at its end (val_loss_progress 0.2):
// not converged, no failure; its grid cell counts it in not_converged
// (plateaued 0, failure rate 0). Returns its id.
int64_t AddNotConverged(Figures& fig);

// LiteratureFigures' LR sensitivity at warm-up 100 made close: Post-LN 1.0
// with l* 2.312, Pre-LN 1.1 with l* 2.238, its point 15 px above
// Post-LN's; their l* labels were drawn on top of each other (issue 34).
void SetCloseLStar(Figures& fig);

// LiteratureFigures' LR sensitivity replaced by 12 warm-ups (0, 50, .., 550)
// 37 px apart, Post-LN's and Pre-LN's lines crossing back and forth within
// 0.1 of each other, Pre-LN's last point at 0 (on the x axis) and Post-LN's
// first the highest (near the top): a crowded figure for the l* labels.
void SetCrowdedLrSensitivity(Figures& fig);

// LiteratureFigures' step-0 gradient norms scaled by 1e-4, update ratios
// 1e-4 at step 50 and 1e-2 at step 100 (fc2 1.2 times that; a log axis) and
// LR sensitivities scaled by 1e-3: y axes with tick labels of six
// characters (0.0002).
void ShrinkAxisValues(Figures& fig);

// LiteratureFigures' longest texts made as long as a sweep makes them:
// Pre-LN's variance shares unset with the view's incomplete-grid note, and
// its cells at warm-up 100, lr 1e-3 and 1e-2 (side by side on the heatmap)
// with 12 seeds, 3 diverged and 2 plateaued, std 0.123.
void LengthenTexts(Figures& fig);

// Boundary-search lines (the lr_boundary view's rows) for the five
// placements in three variants (qk_norm=a, b, c) at warm-ups 0, 100 and 400,
// one seed each, FOUND: 15 series on the boundary chart.
void AddBoundaryLines(Figures& fig);

// LiteratureFigures swept with qk_norm off and on: the variants
// "qk_norm=false" (the baseline: its trials come first) and "qk_norm=true"
// (the same trials; only its analysis rows differ), whose rows are
// LiteratureFigures' with better figures: every cell mean 0.05 lower,
// Post-LN's cells at lr 1e-2 still all diverged, Pre-LN's without a
// diverged seed (2.01 and 2.05 at warm-ups 0 and 100); LR sensitivity
// Post-LN 0.9 and 0.7 (l* 2.85 and 2.81 at 1e-3), Pre-LN 0.3 and 0.2 (l*
// 2.01 and 2.05 at 1e-2); and the variant_comparison rows by hand:
//   post  false  LRS 1.10  l* 2.860 at 1e-03 (100)  failure 50%
//         true   LRS 0.80  l* 2.810 at 1e-03 (100)  failure 33%
//   pre   false  LRS 0.35  l* 2.110 at 1e-03 (0)    failure 17%
//         true   LRS 0.25  l* 2.010 at 1e-02 (0)    failure 0%
Figures VariantsFigures();

inline constexpr double kUnigramLoss = 3.41;

// The part of the page under a heading (an <h2> starting with it), up to the
// next one; "" and a failure when there is none.
std::string Section(const std::string& html, const std::string& heading);

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_REPORT_REPORT_FIXTURE_H_
