// The database schema, compiled into the binary and brought up to date at
// start-up by ApplyMigrations:
// - tables and data: db/migrations/NNNN_name.sql, applied in version order,
//   each once, recorded in schema_migrations;
// - views: db/views/NN_name.sql, one file per view holding its current
//   definition, NN being the creation (dependency) order. The views are
//   dropped before the pending migrations and created after them, in the
//   same transaction, so a migration may change any column a view reads
//   (and must not read a view itself). That happens only when a migration
//   is pending or a definition changed: a hash of the definitions is kept
//   in schema_views, and when nothing is pending and the hash matches,
//   nothing is touched (a restarting replica takes no lock on the views
//   that the others are reading). A view's file may hold a function that
//   only that view and readers use (25_placement_sensitivity.sql:
//   placement_sensitivity_at, dropped and created there, after the view is
//   gone), so that its current definition has one home too.
// A view that goes away: delete its file. The names created last are kept
// with the hash, and the next start drops those that are gone. (0002's
// placement_summary and warmup_lr_grid predate that list: migration 0014
// drops them.) Dropping is CASCADE-free, in reverse creation order: a view
// of someone else's that reads ours stops the start-up with an error that
// names it, rather than being dropped silently.
// A session advisory lock makes concurrent start-ups (several schedulers)
// do all this exactly once.
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

struct View {
  std::string name;  // db/views/NN_name.sql creates the view `name`
  std::string sql;   // its CREATE VIEW (whole-line comments left out)
};

// Every file in db/migrations, by version.
const std::vector<Migration>& EmbeddedMigrations();
// Every file in db/views, in creation order.
const std::vector<View>& EmbeddedViews();

// The hash kept in schema_views: FNV-1a (64 bits, 16 hex digits) of the
// views' names and definitions, in order.
std::string ViewSetHash(const std::vector<View>& views);

// Splits a migration into statements at each ; outside quotes, dollar
// quotes and comments, since PQexecParams runs one statement at a time.
std::vector<std::string> SplitSqlStatements(std::string_view sql);

// Applies the migrations not yet recorded and, when any was pending or the
// views' hash changed, drops and re-creates the views, all in one
// transaction (nothing is applied when any step fails). The scheduler
// passes EmbeddedMigrations() and EmbeddedViews(); a test may pass others
// (a prefix of the migrations, no views). Returns how many migrations it
// applied. Versions must be unique. A database migrated by a newer binary
// (it holds a version above this binary's newest: a rolling upgrade, this
// replica the older one) is left as it is, views included; FAILED_PRECONDITION
// when it lacks one of this binary's versions.
absl::StatusOr<int> ApplyMigrations(PgConnection& conn, const std::vector<Migration>& migrations,
                                    const std::vector<View>& views);

}  // namespace normsweep::db

#endif  // NORMSWEEP_DB_MIGRATIONS_H_
