// The analysis views' rows for one sweep (db/views/: warmup_lr_grid_stats,
// placement_sensitivity_at, lr_sensitivity, lr_sensitivity_summary,
// grid_importance, lr_boundary, variant_comparison), read by
// PostgresStore::GetSweepAnalysis. A db-internal header: it speaks
// PgConnection. Each view is one statement in sweep_analysis.cc whose
// columns are named after the response message's fields, read by
// pg_rows.h's AppendRows (so a view added later is one more statement and
// one call).
#ifndef NORMSWEEP_DB_SWEEP_ANALYSIS_H_
#define NORMSWEEP_DB_SWEEP_ANALYSIS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "db/pg_connection.h"
#include "normsweep/v1/sweep_service.pb.h"

namespace normsweep::db {

// NOT_FOUND for an unknown sweep. Cells by placement, variant, warm-up, lr;
// placements, LR-sensitivity summaries and importance by variant, placement;
// LR-sensitivity lines by variant, placement, warm-up (byte order, as the CLI
// sorted them); boundary lines by line; variant comparisons by placement,
// then variant in the spec's expansion order (the baseline first).
absl::StatusOr<v1::GetSweepAnalysisResponse> QuerySweepAnalysis(PgConnection& conn, int64_t sweep_id,
                                                                 double tolerance);

}  // namespace normsweep::db

#endif  // NORMSWEEP_DB_SWEEP_ANALYSIS_H_
