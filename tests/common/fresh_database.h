// A database of its own for each test, on the process's shared throwaway
// PostgreSQL (postgres_instance.h), and the two ways tests reach it: through
// the real store (migrations applied) or a plain connection that looks at
// rows directly.
#ifndef NORMSWEEP_TESTS_COMMON_FRESH_DATABASE_H_
#define NORMSWEEP_TESTS_COMMON_FRESH_DATABASE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "db/pg_connection.h"
#include "db/store.h"

namespace normsweep::testing {

// A new empty database named after prefix (lower-cased, other characters
// than [a-z0-9_] made '_') and a number that counts this process's
// databases, so that a test run again in one process gets a new one.
// Returns its connection string.
absl::StatusOr<std::string> FreshDatabase(const std::string& prefix);
// The same, named after the running test (its suite and name).
absl::StatusOr<std::string> FreshDatabase();

// A PostgresStore on conninfo; opening it applies the migrations.
absl::StatusOr<std::unique_ptr<db::Store>> OpenStore(const std::string& conninfo, int pool_size = 8);

// The database as a scheduler before migration `version` left it: the
// embedded migrations numbered below it, and no views (today's db/views read
// columns of later migrations). Returns how many were applied.
absl::StatusOr<int> MigrateUpTo(db::PgConnection& conn, int version);

// How a migration is tested on a database with data in it: a fresh
// database (named after the running test) migrated up to, not including,
// `version`; each of `rows` (SQL statements) run on it; then every embedded
// migration and the views applied. Returns the connection.
absl::StatusOr<std::unique_ptr<db::PgConnection>> MigratedOverRows(int version,
                                                                   const std::vector<std::string>& rows);

// A plain connection to conninfo.
absl::StatusOr<std::unique_ptr<db::PgConnection>> Connect(const std::string& conninfo);

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_FRESH_DATABASE_H_
