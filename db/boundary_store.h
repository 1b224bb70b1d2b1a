// PostgresStore's part of boundary_search sweeps (issue 17): the lines of a
// new sweep, and the finish of a line's trial together with its follow-up,
// in one transaction. The search's rule is proto/schema/boundary_search.h; these run
// it inside the transaction, and so follow-ups are exactly once:
// - the line's row (boundary_lines, migration 0013) is locked FOR UPDATE
//   first, so that two finishes of one line (two scheduler replicas, two
//   workers) run one after the other, the second seeing the first's
//   follow-up, and find its bracket open no more;
// - a re-sent FinishTrial finds the trial final and writes nothing (the
//   caller answers it as a re-sent finish);
// - a transaction cut short (a scheduler killed mid-way) leaves the trial
//   RUNNING and creates nothing; the worker's re-sent finish does it all.
#ifndef NORMSWEEP_DB_BOUNDARY_STORE_H_
#define NORMSWEEP_DB_BOUNDARY_STORE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "db/pg_connection.h"
#include "db/store.h"
#include "normsweep/v1/worker_service.pb.h"

namespace normsweep::db {

// Inside CreateSweep's transaction, after the trials were inserted: their
// boundary_line and a row per line.
absl::Status InsertBoundaryLines(PgConnection& conn, int64_t sweep_id, const std::vector<NewTrial>& trials);

// Inside a transaction the caller opened: records the finish of a
// boundary_search trial for the lease's holder, decides its line and creates
// the follow-up trial it asks for (only while the sweep is RUNNING). Returns
// whether the finish was written (false: not a boundary trial, or the lease
// is not held, e.g. a re-sent finish).
absl::StatusOr<bool> FinishBoundaryTrialIn(PgConnection& conn, const v1::FinishTrialRequest& request, absl::Time now);

// FinishBoundaryTrialIn in a transaction of its own on a connection of
// pool, run again after a deadlock or serialization failure (ABORTED).
absl::StatusOr<bool> FinishBoundaryTrial(PgPool& pool, const v1::FinishTrialRequest& request, absl::Time now);

}  // namespace normsweep::db

#endif  // NORMSWEEP_DB_BOUNDARY_STORE_H_
