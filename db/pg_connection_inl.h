// Template definitions for pg_connection.h.
#ifndef NORMSWEEP_DB_PG_CONNECTION_INL_H_
#define NORMSWEEP_DB_PG_CONNECTION_INL_H_

namespace normsweep::db {

template <typename Fn>
absl::Status InTransaction(PgPool& pool, Fn&& fn) {
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<PgPool::Lease> conn = pool.Acquire();
    if (!conn.ok()) return conn.status();
    absl::StatusOr<PgResult> begin = (*conn)->Exec("BEGIN");
    if (!begin.ok()) {
      // A stale pooled connection (not one closed after a client-side timeout).
      if ((*conn)->broken() && attempt == 0 && begin.status().code() == absl::StatusCode::kUnavailable) {
        pool.DropIdle();
        continue;
      }
      return begin.status();
    }
    absl::Status status = fn(**conn);
    if (!status.ok()) {
      if (!(*conn)->broken()) (void)(*conn)->Exec("ROLLBACK");
      return status;
    }
    absl::StatusOr<PgResult> commit = (*conn)->Exec("COMMIT");
    return commit.status();
  }
}

}  // namespace normsweep::db

#endif  // NORMSWEEP_DB_PG_CONNECTION_INL_H_
