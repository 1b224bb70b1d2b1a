// GetSweepAnalysisResponse.boundary: the sweep's rows of the lr_boundary view
// (migration 0013), one per boundary_search line, by line. Called by
// QuerySweepAnalysis (db/sweep_analysis.cc). A db-internal header.
#ifndef NORMSWEEP_DB_BOUNDARY_ANALYSIS_H_
#define NORMSWEEP_DB_BOUNDARY_ANALYSIS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "db/pg_connection.h"
#include "normsweep/v1/sweep_service.pb.h"

namespace normsweep::db {

absl::Status ReadBoundaryLines(PgConnection& conn, int64_t sweep_id, v1::GetSweepAnalysisResponse& out);

}  // namespace normsweep::db

#endif  // NORMSWEEP_DB_BOUNDARY_ANALYSIS_H_
