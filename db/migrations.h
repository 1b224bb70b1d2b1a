// Schema migrations: db/migrations/NNNN_name.sql, compiled into the binary,
// applied in version order at start-up and recorded in schema_migrations.
// A session advisory lock makes concurrent start-ups (several schedulers)
// apply each migration exactly once.
#ifndef NORMSWEEP_DB_MIGRATIONS_H_
#define NORMSWEEP_DB_MIGRATIONS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace normsweep::db {

class PgConnection;

struct Migration {
  int version;
  std::string name;
  std::string sql;
};

// Every file in db/migrations, by version.
const std::vector<Migration>& EmbeddedMigrations();

// Splits a migration into statements at each ; outside quotes, dollar
// quotes and comments, since PQexecParams runs one statement at a time.
std::vector<std::string> SplitSqlStatements(std::string_view sql);

// Applies the migrations not yet recorded, each in its own transaction.
// Returns how many it applied. Versions must be unique.
absl::StatusOr<int> ApplyMigrations(PgConnection& conn, const std::vector<Migration>& migrations);

}  // namespace normsweep::db

#endif  // NORMSWEEP_DB_MIGRATIONS_H_
