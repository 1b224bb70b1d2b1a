#include "db/sweep_analysis.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace normsweep::db {
namespace {

// The named columns of one result, looked up once.
class Columns {
 public:
  explicit Columns(const PgResult& r) : r_(r) {}
  int32_t Int(int row, const char* name) const { return static_cast<int32_t>(r_.GetInt64(row, r_.column(name))); }
  double Double(int row, const char* name) const { return r_.GetDouble(row, r_.column(name)); }
  std::optional<double> Optional(int row, const char* name) const { return r_.GetOptionalDouble(row, r_.column(name)); }
  std::string String(int row, const char* name) const { return r_.GetString(row, r_.column(name)); }

 private:
  const PgResult& r_;
};

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
  const Columns gc(g);
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
  const Columns pc(p);
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
  return out;
}

}  // namespace normsweep::db
