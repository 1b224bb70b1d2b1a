// The base of a migration's test on a database with rows in it: a fresh
// database (named after the running test) as a scheduler before the
// migration left it, the test's rows inserted with plain SQL, then every
// migration and the views applied. Header-only.
#ifndef NORMSWEEP_TESTS_DB_MIGRATION_TEST_H_
#define NORMSWEEP_TESTS_DB_MIGRATION_TEST_H_

#include <initializer_list>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "db/migrations.h"
#include "db/pg_connection.h"
#include "gtest/gtest.h"
#include "tests/common/fresh_database.h"

namespace normsweep::db {

class MigrationTest : public ::testing::Test {
 protected:
  // The database with the embedded migrations numbered below `version`
  // applied (before_ of them) and no views. Fatal.
  void MigrateUpTo(int version) {
    const absl::Status opened = OpenAt(version);
    ASSERT_TRUE(opened.ok()) << opened;
  }

  // Each statement run on conn_. Fatal.
  void Run(std::initializer_list<const char*> statements) {
    for (const char* sql : statements) {
      auto r = conn_->Exec(sql);
      ASSERT_TRUE(r.ok()) << r.status() << "\n" << sql;
    }
  }

  // Every embedded migration and view applied: the migration under test and
  // those after it, no other. Fatal.
  void MigrateTheRest() {
    auto applied = ApplyMigrations(*conn_, EmbeddedMigrations(), EmbeddedViews());
    ASSERT_TRUE(applied.ok()) << applied.status();
    EXPECT_EQ(*applied, static_cast<int>(EmbeddedMigrations().size() - before_));
  }

  std::string conninfo_;
  std::unique_ptr<PgConnection> conn_;
  int before_ = 0;  // migrations applied by MigrateUpTo

 private:
  absl::Status OpenAt(int version) {
    ASSIGN_OR_RETURN(conninfo_, testing::FreshDatabase());
    ASSIGN_OR_RETURN(conn_, testing::Connect(conninfo_));
    ASSIGN_OR_RETURN(before_, testing::MigrateUpTo(*conn_, version));
    return absl::OkStatus();
  }
};

}  // namespace normsweep::db

#endif  // NORMSWEEP_TESTS_DB_MIGRATION_TEST_H_
