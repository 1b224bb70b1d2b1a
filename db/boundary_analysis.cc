#include "db/boundary_analysis.h"

#include "common/status_macros.h"

namespace normsweep::db {

absl::Status ReadBoundaryLines(PgConnection& conn, int64_t sweep_id, v1::GetSweepAnalysisResponse& out) {
  ASSIGN_OR_RETURN(PgResult r, conn.Exec(
      "SELECT line, variant, placement, warmup_steps, seed, state, max_trainable_lr, min_untrainable_lr, trials,"
      " finished FROM lr_boundary WHERE sweep_id = $1 ORDER BY line",
      PgParams().Add(sweep_id)));
  const int line = r.column("line"), variant = r.column("variant"), placement = r.column("placement"),
            warmup = r.column("warmup_steps"), seed = r.column("seed"), state = r.column("state"),
            lo = r.column("max_trainable_lr"), hi = r.column("min_untrainable_lr"), trials = r.column("trials"),
            finished = r.column("finished");
  for (int i = 0; i < r.rows(); ++i) {
    v1::BoundaryLine& b = *out.add_boundary();
    b.set_line(static_cast<int32_t>(r.GetInt64(i, line)));
    b.set_variant(r.GetString(i, variant));
    b.set_placement(r.GetString(i, placement));
    b.set_warmup_steps(static_cast<int32_t>(r.GetInt64(i, warmup)));
    b.set_seed(static_cast<int32_t>(r.GetInt64(i, seed)));
    b.set_state(r.GetString(i, state));
    if (auto v = r.GetOptionalDouble(i, lo)) b.set_max_trainable_lr(*v);
    if (auto v = r.GetOptionalDouble(i, hi)) b.set_min_untrainable_lr(*v);
    b.set_trials(static_cast<int32_t>(r.GetInt64(i, trials)));
    b.set_finished(static_cast<int32_t>(r.GetInt64(i, finished)));
  }
  return absl::OkStatus();
}

}  // namespace normsweep::db
