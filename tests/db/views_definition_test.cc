// The views' one home (db/views, db/migrations.h): a database upgraded from
// the schema before db/views existed (migrations 0001..0013, whose views
// were written inside them) ends with the same views as a fresh one, by
// pg_get_viewdef; starting again with the same definitions touches no view
// (a reader holding a lock on one does not stop it); a changed definition,
// or a view file gone, re-creates them.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "db/migrations.h"
#include "db/pg_connection.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/fresh_database.h"

namespace normsweep::db {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::unique_ptr<PgConnection> Connect(const std::string& conninfo) {
  auto conn = testing::Connect(conninfo);
  EXPECT_TRUE(conn.ok()) << conn.status();
  return conn.ok() ? *std::move(conn) : nullptr;
}

std::string NewDatabase(const std::string& name) {
  auto conninfo = testing::FreshDatabase(name);
  EXPECT_TRUE(conninfo.ok()) << conninfo.status();
  return conninfo.ok() ? *conninfo : "";
}

// Every view of the public schema: name -> pg_get_viewdef.
std::map<std::string, std::string> ViewDefinitions(PgConnection& conn) {
  std::map<std::string, std::string> out;
  auto rows = conn.Exec("SELECT c.relname, pg_get_viewdef(c.oid, true) FROM pg_class c"
                        " JOIN pg_namespace n ON n.oid = c.relnamespace"
                        " WHERE n.nspname = 'public' AND c.relkind = 'v'");
  EXPECT_TRUE(rows.ok()) << rows.status();
  if (!rows.ok()) return out;
  for (int i = 0; i < rows->rows(); ++i) out[rows->GetString(i, 0)] = rows->GetString(i, 1);
  return out;
}

// Every view of the public schema: name -> oid (a re-created view has a new one).
std::map<std::string, int64_t> ViewOids(PgConnection& conn) {
  std::map<std::string, int64_t> out;
  auto rows = conn.Exec("SELECT c.relname, c.oid::bigint FROM pg_class c"
                        " JOIN pg_namespace n ON n.oid = c.relnamespace"
                        " WHERE n.nspname = 'public' AND c.relkind = 'v'");
  EXPECT_TRUE(rows.ok()) << rows.status();
  if (!rows.ok()) return out;
  for (int i = 0; i < rows->rows(); ++i) out[rows->GetString(i, 0)] = rows->GetInt64(i, 1);
  return out;
}

// schema_views' rows, oldest first: "hash names".
std::vector<std::string> SchemaViewsRows(PgConnection& conn) {
  std::vector<std::string> out;
  auto rows = conn.Exec("SELECT hash || ' ' || array_to_string(views, ',') FROM schema_views ORDER BY id");
  EXPECT_TRUE(rows.ok()) << rows.status();
  if (!rows.ok()) return out;
  for (int i = 0; i < rows->rows(); ++i) out.push_back(rows->GetString(i, 0));
  return out;
}

std::vector<std::string> Names(const std::vector<View>& views) {
  std::vector<std::string> out;
  for (const View& v : views) out.push_back(v.name);
  return out;
}

std::vector<std::string> Keys(const std::map<std::string, std::string>& m) {
  std::vector<std::string> out;
  for (const auto& [k, v] : m) out.push_back(k);
  return out;
}

// Upgrades from the schema at migration GetParam(): 13 is the last before
// db/views; at 4 trial_metrics was still a table.
class ViewsUpgradeTest : public ::testing::TestWithParam<int> {};

TEST_P(ViewsUpgradeTest, UpgradedAndFreshDatabasesHaveTheSameViews) {
  std::unique_ptr<PgConnection> fresh = Connect(NewDatabase("views_fresh"));
  ASSERT_NE(fresh, nullptr);
  auto applied = ApplyMigrations(*fresh, EmbeddedMigrations(), EmbeddedViews());
  ASSERT_TRUE(applied.ok()) << applied.status();

  // The schema before db/views: migrations 0001..0013 wrote the views, and
  // there was no schema_views.
  const int from = GetParam();
  std::unique_ptr<PgConnection> old = Connect(NewDatabase(absl::StrCat("views_upgraded_from_", from)));
  ASSERT_NE(old, nullptr);
  std::vector<Migration> before;
  for (const Migration& m : EmbeddedMigrations()) {
    if (m.version <= from) before.push_back(m);
  }
  ASSERT_EQ(static_cast<int>(before.size()), from);
  ASSERT_TRUE(ApplyMigrations(*old, before, {}).ok());
  ASSERT_TRUE(old->Exec("DROP TABLE schema_views").ok());
  const std::map<std::string, std::string> old_views = ViewDefinitions(*old);
  EXPECT_TRUE(old_views.contains("placement_summary"));
  EXPECT_FALSE(old_views.contains("cell_loss_values"));
  auto upgraded = ApplyMigrations(*old, EmbeddedMigrations(), EmbeddedViews());
  ASSERT_TRUE(upgraded.ok()) << upgraded.status();
  EXPECT_EQ(*upgraded, static_cast<int>(EmbeddedMigrations().size() - before.size()));

  const std::map<std::string, std::string> fresh_views = ViewDefinitions(*fresh);
  const std::map<std::string, std::string> upgraded_views = ViewDefinitions(*old);
  std::vector<std::string> want = Names(EmbeddedViews());
  std::sort(want.begin(), want.end());
  EXPECT_THAT(Keys(fresh_views), ElementsAreArray(want));  // 0002's placement_summary and warmup_lr_grid are gone
  EXPECT_THAT(Keys(upgraded_views), ElementsAreArray(want));
  for (const auto& [name, definition] : fresh_views) {
    EXPECT_EQ(upgraded_views.count(name) ? upgraded_views.at(name) : "(none)", definition) << name;
  }
  // Both record the same set.
  EXPECT_EQ(SchemaViewsRows(*fresh), SchemaViewsRows(*old));
}

INSTANTIATE_TEST_SUITE_P(FromMigration, ViewsUpgradeTest, ::testing::Values(13, 4));

TEST(ViewsDefinitionTest, UnchangedViewsAreNotTouchedAndChangedOnesAreRecreated) {
  const std::string conninfo = NewDatabase("views_recreate");
  std::unique_ptr<PgConnection> conn = Connect(conninfo);
  ASSERT_NE(conn, nullptr);
  ASSERT_TRUE(ApplyMigrations(*conn, EmbeddedMigrations(), EmbeddedViews()).ok());
  const std::map<std::string, int64_t> oids = ViewOids(*conn);
  const std::vector<std::string> recorded = SchemaViewsRows(*conn);
  ASSERT_EQ(recorded.size(), 1u);
  EXPECT_EQ(recorded[0], absl::StrCat(ViewSetHash(EmbeddedViews()), " ",
                                      absl::StrJoin(Names(EmbeddedViews()), ",")));

  // Another replica reads a view, and holds its lock until it commits; a
  // DROP VIEW here would wait for that lock, 1 s at most.
  std::unique_ptr<PgConnection> reader = Connect(conninfo);
  ASSERT_NE(reader, nullptr);
  ASSERT_TRUE(reader->Exec("BEGIN").ok());
  ASSERT_TRUE(reader->Exec("SELECT * FROM lr_sensitivity LIMIT 0").ok());
  ASSERT_TRUE(conn->Exec("SET lock_timeout = '1s'").ok());

  // The same definitions: nothing is touched, even with a reader in the way.
  auto second = ApplyMigrations(*conn, EmbeddedMigrations(), EmbeddedViews());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, 0);
  EXPECT_EQ(ViewOids(*conn), oids);
  EXPECT_EQ(SchemaViewsRows(*conn), recorded);

  // A changed definition (its hash) re-creates every view: it waits for the
  // reader (here it gives up, and changes nothing), then goes ahead.
  ASSERT_TRUE(conn->Exec("UPDATE schema_views SET hash = 'changed'").ok());
  auto blocked = ApplyMigrations(*conn, EmbeddedMigrations(), EmbeddedViews());
  EXPECT_FALSE(blocked.ok());
  EXPECT_THAT(std::string(blocked.status().message()), HasSubstr("lock timeout"));
  EXPECT_EQ(ViewOids(*conn), oids);
  ASSERT_TRUE(reader->Exec("COMMIT").ok());
  auto changed = ApplyMigrations(*conn, EmbeddedMigrations(), EmbeddedViews());
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(*changed, 0);
  const std::map<std::string, int64_t> recreated = ViewOids(*conn);
  ASSERT_EQ(recreated.size(), oids.size());
  for (const auto& [name, oid] : oids) EXPECT_NE(recreated.at(name), oid) << name;
  const std::vector<std::string> rows = SchemaViewsRows(*conn);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1], recorded[0]);

  // A view file gone: its view is dropped (it was in the set created last).
  std::vector<View> fewer = EmbeddedViews();
  ASSERT_EQ(fewer.back().name, "variant_comparison");  // read by no other view
  fewer.pop_back();
  ASSERT_TRUE(ApplyMigrations(*conn, EmbeddedMigrations(), fewer).ok());
  EXPECT_FALSE(ViewOids(*conn).contains("variant_comparison"));
  EXPECT_EQ(ViewOids(*conn).size(), fewer.size());
  ASSERT_TRUE(ApplyMigrations(*conn, EmbeddedMigrations(), EmbeddedViews()).ok());
  const std::map<std::string, int64_t> all = ViewOids(*conn);
  EXPECT_EQ(all.size(), EmbeddedViews().size());

  // Views, migrations and views again are one transaction: a migration that
  // fails leaves the views as they were.
  std::vector<Migration> broken = EmbeddedMigrations();
  broken.push_back({99, "0099_broken", "ALTER TABLE trials ADD COLUMN x int; SELECT no_such_column FROM trials;"});
  auto failed = ApplyMigrations(*conn, broken, EmbeddedViews());
  EXPECT_FALSE(failed.ok());
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("0099_broken"));
  EXPECT_EQ(ViewOids(*conn), all);
}

// A rolling upgrade: the newer replica has migrated and re-created the views;
// an older replica that restarts now must leave them (and the migrations) as
// they are, whatever its own view files say.
TEST(ViewsDefinitionTest, AnOlderBinaryLeavesANewerSchemaAlone) {
  const std::string conninfo = NewDatabase("views_older_binary");
  std::unique_ptr<PgConnection> conn = Connect(conninfo);
  ASSERT_NE(conn, nullptr);
  std::vector<Migration> newer = EmbeddedMigrations();
  newer.push_back({99, "0099_newer", "ALTER TABLE trials ADD COLUMN newer_column int"});
  std::vector<View> newer_views = EmbeddedViews();
  newer_views.back().sql += "\n-- the newer binary's definition";
  ASSERT_TRUE(ApplyMigrations(*conn, newer, newer_views).ok());
  const std::map<std::string, int64_t> oids = ViewOids(*conn);
  const std::vector<std::string> recorded = SchemaViewsRows(*conn);

  auto older = ApplyMigrations(*conn, EmbeddedMigrations(), EmbeddedViews());
  ASSERT_TRUE(older.ok()) << older.status();
  EXPECT_EQ(*older, 0);
  EXPECT_EQ(ViewOids(*conn), oids);
  EXPECT_EQ(SchemaViewsRows(*conn), recorded);

  // An older binary with a version the database lacks cannot tell what is
  // safe: it refuses, and changes nothing.
  std::vector<Migration> skipped = EmbeddedMigrations();
  skipped.push_back({50, "0050_skipped", "ALTER TABLE trials ADD COLUMN skipped_column int"});
  auto refused = ApplyMigrations(*conn, skipped, EmbeddedViews());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("0050_skipped"));
  EXPECT_EQ(ViewOids(*conn), oids);
}

}  // namespace
}  // namespace normsweep::db
