// The results of a sweep as users read them: one cell per (placement,
// variant, warm-up, peak lr), final validation loss over seeds, and how many
// seeds diverged, plateaued (failed to train without diverging, the rule of
// proto/schema/failure.h) or failed; per placement, the LR sensitivity of
// each warm-up (Wortsman et al. 2023) with its summary, and the variance
// shares of a functional ANOVA over the grid; per placement of a sweep with
// several variants, each variant beside the first (its baseline). Rendered
// as a table (per placement and variant: the warm-up x lr grid, then the
// LR-sensitivity table and the shares; then the variants compared), CSV (one
// row per cell, with its line's LR sensitivity, its placement's summary and
// shares and its variant's comparison repeated on each row) or JSON. Every
// figure is GetSweepAnalysis's (the views of db/views); nothing is computed
// here. CSV and JSON are written by the export's writer (export_writer.h):
// every number as the shortest text that reads back exactly, a missing
// value as an empty field or null (a std from one seed, a seeds' share of
// variance from one seed per cell).
#ifndef NORMSWEEP_CLIENT_RESULTS_H_
#define NORMSWEEP_CLIENT_RESULTS_H_

#include <optional>
#include <string>
#include <vector>

#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/sweep_service.pb.h"

namespace normsweep::client {

struct ResultCell {
  std::string placement;  // "post" / "pre"
  std::string variant;    // extra-axis values, "" when none
  int warmup_steps = 0;
  double peak_lr = 0;
  int trials = 0, succeeded = 0, diverged = 0, failed = 0, cancelled = 0, unfinished = 0;
  int seeds_with_loss = 0;           // succeeded trials with a finite final validation loss
  double mean_final_val_loss = 0;    // over those
  double std_final_val_loss = 0;     // sample std; 0 with one seed, which has none (rendered empty)
  double best_final_val_loss = 0;    // their minimum
  // Failing to train by the one rule (proto/schema/failure.h): plateaued
  // counts the SUCCEEDED seeds that failed (the unigram plateau, no finite
  // loss, above a boundary search's max_val_loss); the rates are over the
  // finished seeds (succeeded + diverged), unset without one.
  int plateaued = 0;
  // SUCCEEDED seeds that ended near the unigram loss while still learning
  // (not_converged): no failure, and not in plateaued.
  int not_converged = 0;
  std::optional<double> divergence_rate;  // diverged / finished
  std::optional<double> failure_rate;     // (diverged + plateaued) / finished
};

// The cells of GetSweepAnalysis (rows of the warmup_lr_grid_stats view, by
// placement, variant, warm-up, lr): its figures as they are, no arithmetic here.
std::vector<ResultCell> CellsFromAnalysis(const v1::GetSweepAnalysisResponse& analysis);

// Whether the seeds' share of variance says anything: not when every counted
// cell of the grid has one seed (the share is 0 by construction: "n/a").
bool HasSeedShare(const v1::VarianceShares& shares);

std::string RenderResultsTable(const v1::Sweep& sweep, const v1::GetSweepAnalysisResponse& analysis);
// A cell's loss columns are named as the views name them (mean_val_loss,
// std_val_loss, min_val_loss); their names before, mean_final_val_loss,
// std_final_val_loss and best_final_val_loss, are kept for one release,
// deprecated: in CSV as duplicate columns at the end of the row (the
// columns in their places hold the same values as before), in JSON as
// duplicate keys at the end of each cell.
std::string RenderResultsCsv(const v1::GetSweepAnalysisResponse& analysis);
std::string RenderResultsJson(const v1::Sweep& sweep, const v1::GetSweepAnalysisResponse& analysis);

// "1e-03" style for learning rates.
std::string FormatLr(double lr);

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_RESULTS_H_
