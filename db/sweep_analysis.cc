#include "db/sweep_analysis.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "db/pg_rows.h"
#include "db/store.h"

namespace normsweep::db {
namespace {

// Each statement reads one view (db/views/), whose columns are named after
// the fields of the response's message (AppendRows).

// warmup_lr_grid_stats: response field 1, by placement, variant, warm-up, lr.
constexpr char kCells[] =
    "SELECT variant, placement, warmup_steps, peak_lr, trials, succeeded, diverged, failed, cancelled, unfinished,"
    " n_seeds, mean_val_loss, std_val_loss, min_val_loss, max_val_loss, divergence_rate, plateaued, failure_rate,"
    " not_converged"
    " FROM warmup_lr_grid_stats WHERE sweep_id = $1"
    " ORDER BY placement COLLATE \"C\", variant COLLATE \"C\", warmup_steps, peak_lr";

// placement_sensitivity_at($2): field 2, by variant, placement.
constexpr char kPlacements[] =
    "SELECT variant, placement, trials, succeeded, diverged, failed, cancelled, unfinished, best_val_loss,"
    " median_val_loss, grid_cells, cells_near_best, share_near_best, divergence_rate, best_cell_val_loss,"
    " tolerance, plateaued, failure_rate, not_converged FROM placement_sensitivity_at($2) WHERE sweep_id = $1"
    " ORDER BY variant COLLATE \"C\", placement COLLATE \"C\"";

// lr_sensitivity: field 3, by variant, placement, warm-up.
constexpr char kLrSensitivity[] =
    "SELECT variant, placement, warmup_steps, lrs, points_at_l0, best_lr, best_val_loss, init_val_loss,"
    " lr_sensitivity, lrs_pending FROM lr_sensitivity WHERE sweep_id = $1"
    " ORDER BY variant COLLATE \"C\", placement COLLATE \"C\", warmup_steps";

// lr_sensitivity_summary: field 4, by variant, placement.
constexpr char kLrSensitivitySummary[] =
    "SELECT variant, placement, warmups, mean_lr_sensitivity, min_lr_sensitivity, max_lr_sensitivity,"
    " warmup_of_min, best_val_loss FROM lr_sensitivity_summary WHERE sweep_id = $1"
    " ORDER BY variant COLLATE \"C\", placement COLLATE \"C\"";

// grid_importance: field 5, by variant, placement.
constexpr char kImportance[] =
    "SELECT variant, placement, warmups, lrs, trials, total_variance, share_warmup, share_lr,"
    " share_interaction, share_seed, note FROM grid_importance WHERE sweep_id = $1"
    " ORDER BY variant COLLATE \"C\", placement COLLATE \"C\"";

// lr_boundary: field 6, by line (boundary_search sweeps).
constexpr char kBoundary[] =
    "SELECT line, variant, placement, warmup_steps, seed, state, max_trainable_lr, min_untrainable_lr, trials,"
    " finished FROM lr_boundary WHERE sweep_id = $1 ORDER BY line";

// variant_comparison: field 7, by placement, then variant in the spec's
// expansion order (the baseline first): the order of each variant's first
// trial of the placement, which the view's baseline is defined by.
constexpr char kVariants[] =
    "SELECT v.placement, v.variant, baseline_variant, v.trials, mean_lr_sensitivity, best_val_loss, best_lr,"
    " best_warmup_steps, failure_rate, max_trainable_lr, boundary_lines, delta_mean_lr_sensitivity,"
    " delta_best_val_loss, best_lr_ratio, delta_failure_rate, max_trainable_lr_ratio"
    " FROM variant_comparison v"
    " JOIN (SELECT placement, variant, min(trial_index) AS first_index FROM trials WHERE sweep_id = $1"
    "       GROUP BY placement, variant) o ON o.placement = v.placement AND o.variant = v.variant"
    " WHERE v.sweep_id = $1 ORDER BY v.placement COLLATE \"C\", o.first_index";

template <typename M>
absl::Status ReadView(PgConnection& conn, const char* sql, const PgParams& params,
                      google::protobuf::RepeatedPtrField<M>& out) {
  ASSIGN_OR_RETURN(PgResult r, conn.Exec(sql, params));
  return AppendRows(r, out);
}

}  // namespace

absl::StatusOr<v1::GetSweepAnalysisResponse> QuerySweepAnalysis(PgConnection& conn, int64_t sweep_id,
                                                                 double tolerance) {
  ASSIGN_OR_RETURN(PgResult exists, conn.Exec("SELECT 1 FROM sweeps WHERE id = $1", PgParams().Add(sweep_id)));
  if (exists.rows() == 0) return NoSweep(sweep_id);
  v1::GetSweepAnalysisResponse out;
  RETURN_IF_ERROR(ReadView(conn, kCells, PgParams().Add(sweep_id), *out.mutable_cells()));
  RETURN_IF_ERROR(ReadView(conn, kPlacements, PgParams().Add(sweep_id).Add(tolerance), *out.mutable_placements()));
  RETURN_IF_ERROR(ReadView(conn, kLrSensitivity, PgParams().Add(sweep_id), *out.mutable_lr_sensitivity()));
  RETURN_IF_ERROR(
      ReadView(conn, kLrSensitivitySummary, PgParams().Add(sweep_id), *out.mutable_lr_sensitivity_summary()));
  RETURN_IF_ERROR(ReadView(conn, kImportance, PgParams().Add(sweep_id), *out.mutable_importance()));
  RETURN_IF_ERROR(ReadView(conn, kBoundary, PgParams().Add(sweep_id), *out.mutable_boundary()));
  RETURN_IF_ERROR(ReadView(conn, kVariants, PgParams().Add(sweep_id), *out.mutable_variants()));
  return out;
}

}  // namespace normsweep::db
