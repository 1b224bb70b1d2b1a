#include "tests/common/fresh_database.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "db/migrations.h"
#include "db/postgres_store.h"
#include "gtest/gtest.h"
#include "tests/common/postgres_instance.h"

namespace normsweep::testing {

absl::StatusOr<std::string> FreshDatabase(const std::string& prefix) {
  ASSIGN_OR_RETURN(PostgresInstance * pg, SharedPostgres());
  static int counter = 0;
  std::string name;
  // PostgreSQL cuts identifiers at 63 bytes: keep the number whole.
  for (char c : prefix.substr(0, 48)) {
    const unsigned char u = static_cast<unsigned char>(c);
    name.push_back(std::isalnum(u) ? static_cast<char>(std::tolower(u)) : '_');
  }
  return pg->CreateDatabase(absl::StrCat(name, "_", ++counter));
}

absl::StatusOr<std::string> FreshDatabase() {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  if (test == nullptr) return FreshDatabase("test");
  return FreshDatabase(absl::StrCat(test->test_suite_name(), "_", test->name()));
}

absl::StatusOr<std::unique_ptr<db::Store>> OpenStore(const std::string& conninfo, int pool_size) {
  db::PostgresStoreOptions options;
  options.connect.conninfo = conninfo;
  options.pool_size = pool_size;
  ASSIGN_OR_RETURN(db::OpenedPostgresStore opened, db::OpenPostgresStore(options));
  return std::move(opened.store);
}

absl::StatusOr<std::unique_ptr<db::PgConnection>> Connect(const std::string& conninfo) {
  db::PgConnectOptions options;
  options.conninfo = conninfo;
  return db::PgConnection::Connect(options);
}

absl::StatusOr<int> MigrateUpTo(db::PgConnection& conn, int version) {
  std::vector<db::Migration> before;
  for (const db::Migration& m : db::EmbeddedMigrations()) {
    if (m.version < version) before.push_back(m);
  }
  RETURN_IF_ERROR(db::ApplyMigrations(conn, before, {}).status());
  return static_cast<int>(before.size());
}

absl::StatusOr<std::unique_ptr<db::PgConnection>> MigratedOverRows(int version,
                                                                   const std::vector<std::string>& rows) {
  ASSIGN_OR_RETURN(const std::string conninfo, FreshDatabase());
  ASSIGN_OR_RETURN(std::unique_ptr<db::PgConnection> conn, Connect(conninfo));
  RETURN_IF_ERROR(MigrateUpTo(*conn, version).status());
  for (const std::string& sql : rows) {
    if (absl::StatusOr<db::PgResult> r = conn->Exec(sql); !r.ok()) {
      return absl::Status(r.status().code(), absl::StrCat(r.status().message(), "\nin: ", sql.substr(0, 200)));
    }
  }
  RETURN_IF_ERROR(db::ApplyMigrations(*conn, db::EmbeddedMigrations(), db::EmbeddedViews()).status());
  return conn;
}

}  // namespace normsweep::testing
