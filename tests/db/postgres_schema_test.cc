// What the PostgreSQL store's tables hold: migrations recorded and applied
// once (also by concurrent start-ups), the analysis views over stored
// trials, the binary copy of each trial's config beside its JSON, and
// sweeps.open_trials through every transition.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "db/migrations.h"
#include "db/pg_connection.h"
#include "db/postgres_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/requests.h"
#include "tests/common/test_time.h"
#include "tests/db/postgres_fixture.h"

namespace normsweep::db {
namespace {

using ::testing::HasSubstr;

using testing::kT0;

TEST(MigrationsTest, AppliedOnceInOrderAndRecorded) {
  const std::string conninfo = NewDatabase("migrations");
  PgConnectOptions options;
  options.conninfo = conninfo;
  options.statement_timeout = absl::Milliseconds(1500);
  auto connected = PgConnection::Connect(options);
  ASSERT_TRUE(connected.ok());
  std::unique_ptr<PgConnection> conn = *std::move(connected);
  // A slow migration is not cut off by the statement timeout...
  std::vector<Migration> slow = {{1, "0001_slow", "SELECT pg_sleep(2); CREATE TABLE slow_done (x int);"}};
  ASSERT_TRUE(ApplyMigrations(*conn, slow, {}).ok());
  // ...which applies again afterwards.
  EXPECT_EQ(conn->Exec("SELECT pg_sleep(2)").status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(conn->Exec("DROP TABLE slow_done").ok());
  ASSERT_TRUE(conn->Exec("DELETE FROM schema_migrations").ok());
  auto first = ApplyMigrations(*conn, EmbeddedMigrations(), EmbeddedViews());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, static_cast<int>(EmbeddedMigrations().size()));
  auto second = ApplyMigrations(*conn, EmbeddedMigrations(), EmbeddedViews());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, 0);
  auto rows = conn->Exec("SELECT version, name FROM schema_migrations ORDER BY version");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->rows(), static_cast<int>(EmbeddedMigrations().size()));
  EXPECT_EQ(rows->GetInt64(0, 0), 1);
  EXPECT_EQ(rows->GetString(0, 1), "0001_initial");
  EXPECT_EQ(rows->GetString(1, 1), "0002_analysis_views");

  // A new migration is applied on top; a failing one rolls back entirely.
  std::vector<Migration> more = EmbeddedMigrations();
  more.push_back({90, "0090_test", "CREATE TABLE extra (x int); INSERT INTO extra VALUES (1);"});
  ASSERT_EQ(*ApplyMigrations(*conn, more, EmbeddedViews()), 1);
  more.push_back({91, "0091_broken", "CREATE TABLE extra2 (x int); SELECT no_such_column FROM extra;"});
  auto broken = ApplyMigrations(*conn, more, EmbeddedViews());
  EXPECT_FALSE(broken.ok());
  EXPECT_THAT(std::string(broken.status().message()), HasSubstr("0091_broken"));
  auto extra2 = conn->Exec("SELECT to_regclass('extra2') IS NULL");
  ASSERT_TRUE(extra2.ok());
  EXPECT_TRUE(extra2->GetBool(0, 0));
}

TEST(MigrationsTest, ConcurrentStartupsApplyEachMigrationOnce) {
  const std::string conninfo = NewDatabase("concurrent_open");
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(6);
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      PostgresStoreOptions options;
      options.connect.conninfo = conninfo;
      results[i] = OpenPostgresStore(options).status();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << r;
  auto conn = Connect(conninfo);
  ASSERT_NE(conn, nullptr);
  auto rows = conn->Exec("SELECT count(*) FROM schema_migrations");
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->GetInt64(0, 0), static_cast<int64_t>(EmbeddedMigrations().size()));
}

TEST(AnalysisViewsTest, PlacementSummaryAndWarmupLrGrid) {
  const std::string conninfo = NewDatabase("views");
  std::unique_ptr<Store> store = OpenStore(conninfo);
  ASSERT_NE(store, nullptr);
  // post/pre x lr {1e-3, 1e-2} x seeds {0, 1, 2}, warm-up 0.
  v1::SweepSpec spec;
  spec.set_name("views");
  spec.set_max_attempts(1);
  std::vector<NewTrial> trials;
  for (int seed = 0; seed < 3; ++seed) {
    for (double lr : {1e-3, 1e-2}) {
      for (const char* placement : {"post", "pre"}) {
        NewTrial t;
        t.index = static_cast<int>(trials.size());
        t.config.set_placement(placement);
        t.config.set_lr(lr);
        t.config.set_seed(seed);
        trials.push_back(t);
      }
    }
  }
  auto sweep = store->CreateSweep("", spec, trials, kT0);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  int64_t w = RegisterWorker(*store);
  // Post-LN diverges at lr 1e-2; everything else converges to 2 + seed/10
  // (pre) or 2.5 + seed/10 (post).
  while (true) {
    auto t = store->LeaseTrial(w, kT0, absl::Minutes(1));
    ASSERT_TRUE(t.ok());
    if (!t->has_value()) break;
    const v1::Trial& trial = **t;
    const bool post = trial.config().placement() == "post";
    const bool diverges = post && trial.config().lr() > 5e-3;
    v1::FinishTrialRequest f = testing::FinishOf(w, trial, diverges ? v1::TRIAL_DIVERGED : v1::TRIAL_SUCCEEDED);
    if (diverges) {
      f.mutable_result()->set_diverged_step(10);
    } else {
      f.mutable_result()->set_final_val_loss((post ? 2.5 : 2.0) + trial.config().seed() / 10.0);
    }
    ASSERT_TRUE(store->FinishTrial(f, kT0, nullptr).ok());
  }
  auto conn = Connect(conninfo);
  ASSERT_NE(conn, nullptr);
  auto summary = conn->Exec(
      "SELECT placement, trials, succeeded, diverged, best_val_loss, median_val_loss"
      " FROM placement_sensitivity WHERE sweep_id = $1 ORDER BY placement",
      PgParams().Add(sweep->sweep.id()));
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(summary->rows(), 2);
  EXPECT_EQ(summary->GetString(0, 0), "post");
  EXPECT_EQ(summary->GetInt64(0, 1), 6);
  EXPECT_EQ(summary->GetInt64(0, 2), 3);
  EXPECT_EQ(summary->GetInt64(0, 3), 3);
  EXPECT_DOUBLE_EQ(summary->GetDouble(0, 4), 2.5);
  EXPECT_DOUBLE_EQ(summary->GetDouble(0, 5), 2.6);
  EXPECT_EQ(summary->GetString(1, 0), "pre");
  EXPECT_EQ(summary->GetInt64(1, 2), 6);
  EXPECT_EQ(summary->GetInt64(1, 3), 0);
  EXPECT_DOUBLE_EQ(summary->GetDouble(1, 4), 2.0);

  auto grid = conn->Exec(
      "SELECT placement, peak_lr, trials, succeeded, diverged, mean_val_loss, std_val_loss"
      " FROM warmup_lr_grid_stats WHERE sweep_id = $1 ORDER BY placement, peak_lr",
      PgParams().Add(sweep->sweep.id()));
  ASSERT_TRUE(grid.ok()) << grid.status();
  ASSERT_EQ(grid->rows(), 4);
  // post, 1e-3: losses 2.5, 2.6, 2.7 over three seeds.
  EXPECT_EQ(grid->GetInt64(0, 2), 3);
  EXPECT_EQ(grid->GetInt64(0, 3), 3);
  EXPECT_NEAR(grid->GetDouble(0, 5), 2.6, 1e-12);
  EXPECT_NEAR(grid->GetDouble(0, 6), 0.1, 1e-12);
  // post, 1e-2: all diverged, no mean.
  EXPECT_EQ(grid->GetInt64(1, 4), 3);
  EXPECT_TRUE(grid->IsNull(1, 5));
  EXPECT_NEAR(grid->GetDouble(3, 5), 2.1, 1e-12);
}

// The scheduler reads a trial's config from config_pb (0007_trial_config_pb.sql),
// the same TrainConfig as the queryable jsonb column; trials stored before
// that migration have no config_pb and are read from the JSON.
TEST(ConfigStorageTest, BinaryCopyMatchesTheJsonAndOlderRowsReadTheJson) {
  const std::string conninfo = NewDatabase("config_pb");
  // Whatever the database's bytea output format.
  std::unique_ptr<PgConnection> setup = Connect(conninfo);
  ASSERT_NE(setup, nullptr);
  ASSERT_TRUE(setup
                  ->Exec("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET bytea_output = escape',"
                         " current_database()); END $$")
                  .ok());
  std::unique_ptr<Store> store = OpenStore(conninfo);
  ASSERT_NE(store, nullptr);
  v1::SweepSpec spec;
  spec.set_name("configs");
  spec.set_max_attempts(1);
  std::vector<NewTrial> trials(2);
  for (int i = 0; i < 2; ++i) {
    trials[i].index = i;
    trials[i].config.set_placement(i == 0 ? "post" : "pre");
    trials[i].config.set_lr(3e-4 * (i + 1));
    trials[i].config.set_warmup_steps(400);
    trials[i].config.set_layers(6);
    trials[i].config.set_task("translate");
  }
  auto created = store->CreateSweep("", spec, trials, kT0);
  ASSERT_TRUE(created.ok()) << created.status();
  auto conn = Connect(conninfo);
  ASSERT_NE(conn, nullptr);
  auto stored = conn->Exec(
      "SELECT count(*), count(config_pb), bool_and(config ->> 'placement' IN ('post', 'pre')) FROM trials");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->GetInt64(0, 0), 2);
  EXPECT_EQ(stored->GetInt64(0, 1), 2);
  EXPECT_TRUE(stored->GetBool(0, 2));

  ASSERT_TRUE(conn->Exec("UPDATE trials SET config_pb = NULL WHERE trial_index = 1").ok());
  auto listed = store->ListTrials(created->sweep.id(), v1::TRIAL_STATE_UNSPECIFIED, -1, 10);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ((*listed)[i].config().SerializeAsString(), trials[i].config.SerializeAsString()) << i;
  }

  // Bytes that are not a TrainConfig are reported, not passed on.
  ASSERT_TRUE(conn->Exec("UPDATE trials SET config_pb = '\\xffff' WHERE trial_index = 0").ok());
  auto bad = store->GetTrial((*listed)[0].id());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad.status().message(), HasSubstr("config_pb"));
}

// sweeps.open_trials (0006_open_trials.sql) always equals the sweep's
// PENDING + RUNNING trials, through finishing, expiry (requeued or failed)
// and cancellation, and completes the sweep when it reaches 0.
TEST(OpenTrialsTest, CountFollowsEveryTransitionAndCompletesTheSweep) {
  const std::string conninfo = NewDatabase("open_trials");
  std::unique_ptr<Store> opened = OpenStore(conninfo);
  ASSERT_NE(opened, nullptr);
  Store& store = *opened;
  auto conn = Connect(conninfo);
  ASSERT_NE(conn, nullptr);
  auto expect_consistent = [&](int64_t sweep_id, int64_t open, const std::string& state) {
    auto r = conn->Exec(
        "SELECT s.open_trials, (SELECT count(*) FROM trials t WHERE t.sweep_id = s.id"
        " AND t.state IN ('PENDING', 'RUNNING')), s.state FROM sweeps s WHERE s.id = $1",
        PgParams().Add(sweep_id));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->GetInt64(0, 0), open);
    EXPECT_EQ(r->GetInt64(0, 1), open);
    EXPECT_EQ(r->GetString(0, 2), state);
  };
  // An expired lease is an interruption: these sweeps allow as many of
  // them as they allow attempts.
  auto create = [&](int n, int max_attempts) {
    auto created = CreateSweepOf(store, "open", n, max_attempts, max_attempts);
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? created->sweep.id() : 0;
  };
  const int64_t w = RegisterWorker(store);
  auto lease = [&] {
    const std::vector<v1::Trial> t = LeaseTrials(store, w, 1, absl::Minutes(1));
    return t.empty() ? v1::Trial() : t[0];
  };
  auto finish = [&](const v1::Trial& t, absl::Time at) {
    v1::FinishTrialRequest f = testing::FinishOf(w, t, v1::TRIAL_SUCCEEDED);
    auto done = store.FinishTrial(f, at, nullptr);
    EXPECT_TRUE(done.ok()) << done.status();
  };

  // A: finished, requeued by expiry, then cancelled.
  const int64_t a = create(4, 2);
  expect_consistent(a, 4, "RUNNING");
  v1::Trial a1 = lease(), a2 = lease();
  finish(a1, kT0);
  finish(a1, kT0);  // re-sent: counted once
  expect_consistent(a, 3, "RUNNING");
  ASSERT_TRUE(store.ExpireLeases(kT0 + absl::Minutes(2)).ok());  // a2 back to PENDING
  expect_consistent(a, 3, "RUNNING");
  ASSERT_TRUE(store.CancelSweep(a, kT0 + absl::Minutes(3)).ok());
  expect_consistent(a, 0, "CANCELLED");

  // B: one finished, the last one fails by expiry: complete at the expiry.
  const int64_t b = create(2, 1);
  v1::Trial b1 = lease(), b2 = lease();
  finish(b1, kT0 + absl::Minutes(4));
  expect_consistent(b, 1, "RUNNING");
  const absl::Time expiry = kT0 + absl::Minutes(10);
  auto expired = store.ExpireLeases(expiry);
  ASSERT_TRUE(expired.ok()) << expired.status();
  EXPECT_EQ(expired->failed, 1);
  expect_consistent(b, 0, "COMPLETED");
  auto sweep = store.GetSweep(b);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep->finished_at().seconds(), absl::ToUnixSeconds(expiry));

  // C: completed by its last FinishTrial, at that call's time.
  const int64_t c = create(1, 1);
  const absl::Time last = kT0 + absl::Minutes(20);
  finish(lease(), last);
  expect_consistent(c, 0, "COMPLETED");
  sweep = store.GetSweep(c);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep->finished_at().seconds(), absl::ToUnixSeconds(last));
  (void)a2;
  (void)b2;
}

}  // namespace
}  // namespace normsweep::db
