// The production Store on PostgreSQL, opened by OpenPostgresStore. Several
// schedulers may share one database: leasing is one transaction with FOR
// UPDATE SKIP LOCKED, and every write is idempotent or guarded by the lease
// it belongs to. The store is thread-safe: each call borrows a connection
// from a pool; leases, progress and results are queued for group runners'
// threads (db/group_runner.h), which write a group in one statement and
// answer it (the synchronous calls wait for that answer). The class is
// db/postgres_store_internal.h (plain reads and writes in postgres_store.cc,
// the group runners' statements in postgres_hot_path.cc); this header needs
// no libpq.
#ifndef NORMSWEEP_DB_POSTGRES_STORE_H_
#define NORMSWEEP_DB_POSTGRES_STORE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "db/pg_connect_options.h"
#include "db/store.h"

namespace normsweep::db {

struct PostgresStoreOptions {
  PgConnectOptions connect;
  int pool_size = 8;
  // ExportSweep calls at once, each on a connection of its own.
  int max_exports = 4;
  // ReportProgress calls arriving together are written in one statement
  // (up to this many), by progress_writers threads (statements at once).
  int progress_group_size = 128;
  int progress_writers = 1;
  // LeaseTrial calls arriving together take their trials in one statement.
  int lease_group_size = 64;
  int lease_takers = 1;
  // FinishTrial calls arriving together are written in one statement.
  int finish_group_size = 64;
  int finish_writers = 1;
};

struct OpenedPostgresStore {
  std::unique_ptr<Store> store;
  std::string description;  // host:port/dbname as user, never the password
};

// Connects once and applies the migrations (UNAVAILABLE when the database
// cannot be reached; the caller decides whether to retry).
absl::StatusOr<OpenedPostgresStore> OpenPostgresStore(const PostgresStoreOptions& options);

}  // namespace normsweep::db

#endif  // NORMSWEEP_DB_POSTGRES_STORE_H_
