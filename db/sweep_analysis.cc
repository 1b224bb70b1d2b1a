#include "db/sweep_analysis.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "db/boundary_analysis.h"
#include "db/pg_rows.h"

namespace normsweep::db {
namespace {

// lr_sensitivity (migration 0012): response field 3, by variant, placement, warm-up.
absl::Status ReadLrSensitivity(PgConnection& conn, int64_t sweep_id, v1::GetSweepAnalysisResponse& out) {
  ASSIGN_OR_RETURN(PgResult r, conn.Exec(
      "SELECT variant, placement, warmup_steps, lrs, points_at_l0, best_lr, best_val_loss, init_val_loss,"
      " lr_sensitivity, lrs_pending FROM lr_sensitivity WHERE sweep_id = $1"
      " ORDER BY variant COLLATE \"C\", placement COLLATE \"C\", warmup_steps",
      PgParams().Add(sweep_id)));
  const NamedColumns c(r);
  for (int i = 0; i < r.rows(); ++i) {
    v1::LrSensitivity& s = *out.add_lr_sensitivity();
    s.set_variant(c.String(i, "variant"));
    s.set_placement(c.String(i, "placement"));
    s.set_warmup_steps(c.Int(i, "warmup_steps"));
    s.set_lrs(c.Int(i, "lrs"));
    s.set_points_at_l0(c.Int(i, "points_at_l0"));
    if (auto v = c.Optional(i, "best_lr")) s.set_best_lr(*v);
    if (auto v = c.Optional(i, "best_val_loss")) s.set_best_val_loss(*v);
    if (auto v = c.Optional(i, "init_val_loss")) s.set_init_val_loss(*v);
    if (auto v = c.Optional(i, "lr_sensitivity")) s.set_lr_sensitivity(*v);
    s.set_lrs_pending(c.Int(i, "lrs_pending"));
  }
  return absl::OkStatus();
}

// lr_sensitivity_summary (migration 0012): field 4, by variant, placement.
absl::Status ReadLrSensitivitySummary(PgConnection& conn, int64_t sweep_id, v1::GetSweepAnalysisResponse& out) {
  ASSIGN_OR_RETURN(PgResult r, conn.Exec(
      "SELECT variant, placement, warmups, mean_lr_sensitivity, min_lr_sensitivity, max_lr_sensitivity,"
      " warmup_of_min, best_val_loss FROM lr_sensitivity_summary WHERE sweep_id = $1"
      " ORDER BY variant COLLATE \"C\", placement COLLATE \"C\"",
      PgParams().Add(sweep_id)));
  const NamedColumns c(r);
  for (int i = 0; i < r.rows(); ++i) {
    v1::PlacementLrSensitivity& s = *out.add_lr_sensitivity_summary();
    s.set_variant(c.String(i, "variant"));
    s.set_placement(c.String(i, "placement"));
    s.set_warmups(c.Int(i, "warmups"));
    if (auto v = c.Optional(i, "mean_lr_sensitivity")) s.set_mean_lr_sensitivity(*v);
    if (auto v = c.Optional(i, "min_lr_sensitivity")) s.set_min_lr_sensitivity(*v);
    if (auto v = c.Optional(i, "max_lr_sensitivity")) s.set_max_lr_sensitivity(*v);
    if (auto v = c.OptionalInt(i, "warmup_of_min")) s.set_warmup_of_min(*v);
    if (auto v = c.Optional(i, "best_val_loss")) s.set_best_val_loss(*v);
  }
  return absl::OkStatus();
}

// grid_importance (migration 0012): field 5, by variant, placement.
absl::Status ReadImportance(PgConnection& conn, int64_t sweep_id, v1::GetSweepAnalysisResponse& out) {
  ASSIGN_OR_RETURN(PgResult r, conn.Exec(
      "SELECT variant, placement, warmups, lrs, trials, total_variance, share_warmup, share_lr,"
      " share_interaction, share_seed, note FROM grid_importance WHERE sweep_id = $1"
      " ORDER BY variant COLLATE \"C\", placement COLLATE \"C\"",
      PgParams().Add(sweep_id)));
  const NamedColumns c(r);
  for (int i = 0; i < r.rows(); ++i) {
    v1::VarianceShares& s = *out.add_importance();
    s.set_variant(c.String(i, "variant"));
    s.set_placement(c.String(i, "placement"));
    s.set_warmups(c.Int(i, "warmups"));
    s.set_lrs(c.Int(i, "lrs"));
    s.set_trials(c.Int(i, "trials"));
    if (auto v = c.Optional(i, "total_variance")) s.set_total_variance(*v);
    if (auto v = c.Optional(i, "share_warmup")) s.set_share_warmup(*v);
    if (auto v = c.Optional(i, "share_lr")) s.set_share_lr(*v);
    if (auto v = c.Optional(i, "share_interaction")) s.set_share_interaction(*v);
    if (auto v = c.Optional(i, "share_seed")) s.set_share_seed(*v);
    s.set_note(c.String(i, "note"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::GetSweepAnalysisResponse> QuerySweepAnalysis(PgConnection& conn, int64_t sweep_id,
                                                                 double tolerance) {
  ASSIGN_OR_RETURN(PgResult exists, conn.Exec("SELECT 1 FROM sweeps WHERE id = $1", PgParams().Add(sweep_id)));
  if (exists.rows() == 0) return absl::NotFoundError(absl::StrCat("sweep_id ", sweep_id, ": no such sweep"));
  v1::GetSweepAnalysisResponse out;
  ASSIGN_OR_RETURN(PgResult g, conn.Exec(
      "SELECT variant, placement, warmup_steps, peak_lr, trials, succeeded, diverged, failed, cancelled, unfinished,"
      " n_seeds, mean_val_loss, std_val_loss, min_val_loss, max_val_loss, divergence_rate"
      " FROM warmup_lr_grid_stats WHERE sweep_id = $1"
      " ORDER BY placement COLLATE \"C\", variant COLLATE \"C\", warmup_steps, peak_lr",
      PgParams().Add(sweep_id)));
  const NamedColumns gc(g);
  for (int i = 0; i < g.rows(); ++i) {
    v1::GridCell& c = *out.add_cells();
    c.set_variant(gc.String(i, "variant"));
    c.set_placement(gc.String(i, "placement"));
    c.set_warmup_steps(gc.Int(i, "warmup_steps"));
    c.set_peak_lr(gc.Double(i, "peak_lr"));
    c.set_trials(gc.Int(i, "trials"));
    c.set_succeeded(gc.Int(i, "succeeded"));
    c.set_diverged(gc.Int(i, "diverged"));
    c.set_failed(gc.Int(i, "failed"));
    c.set_cancelled(gc.Int(i, "cancelled"));
    c.set_unfinished(gc.Int(i, "unfinished"));
    c.set_n_seeds(gc.Int(i, "n_seeds"));
    if (auto v = gc.Optional(i, "mean_val_loss")) c.set_mean_val_loss(*v);
    if (auto v = gc.Optional(i, "std_val_loss")) c.set_std_val_loss(*v);
    if (auto v = gc.Optional(i, "min_val_loss")) c.set_min_val_loss(*v);
    if (auto v = gc.Optional(i, "max_val_loss")) c.set_max_val_loss(*v);
    if (auto v = gc.Optional(i, "divergence_rate")) c.set_divergence_rate(*v);
  }
  ASSIGN_OR_RETURN(PgResult p, conn.Exec(
      "SELECT variant, placement, trials, succeeded, diverged, failed, cancelled, unfinished, best_val_loss,"
      " median_val_loss, grid_cells, cells_near_best, share_near_best, divergence_rate, best_cell_val_loss,"
      " tolerance_used FROM placement_sensitivity_at($2) WHERE sweep_id = $1"
      " ORDER BY variant COLLATE \"C\", placement COLLATE \"C\"",
      PgParams().Add(sweep_id).Add(tolerance)));
  const NamedColumns pc(p);
  for (int i = 0; i < p.rows(); ++i) {
    v1::PlacementSensitivity& s = *out.add_placements();
    s.set_variant(pc.String(i, "variant"));
    s.set_placement(pc.String(i, "placement"));
    s.set_trials(pc.Int(i, "trials"));
    s.set_succeeded(pc.Int(i, "succeeded"));
    s.set_diverged(pc.Int(i, "diverged"));
    s.set_failed(pc.Int(i, "failed"));
    s.set_cancelled(pc.Int(i, "cancelled"));
    s.set_unfinished(pc.Int(i, "unfinished"));
    if (auto v = pc.Optional(i, "best_val_loss")) s.set_best_val_loss(*v);
    if (auto v = pc.Optional(i, "median_val_loss")) s.set_median_val_loss(*v);
    s.set_grid_cells(pc.Int(i, "grid_cells"));
    s.set_cells_near_best(pc.Int(i, "cells_near_best"));
    if (auto v = pc.Optional(i, "share_near_best")) s.set_share_near_best(*v);
    if (auto v = pc.Optional(i, "divergence_rate")) s.set_divergence_rate(*v);
    if (auto v = pc.Optional(i, "best_cell_val_loss")) s.set_best_cell_val_loss(*v);
    s.set_tolerance(pc.Double(i, "tolerance_used"));
  }
  RETURN_IF_ERROR(ReadLrSensitivity(conn, sweep_id, out));
  RETURN_IF_ERROR(ReadLrSensitivitySummary(conn, sweep_id, out));
  RETURN_IF_ERROR(ReadImportance(conn, sweep_id, out));
  RETURN_IF_ERROR(ReadBoundaryLines(conn, sweep_id, out));  // field 6: lr_boundary (0013)
  return out;
}

}  // namespace normsweep::db
