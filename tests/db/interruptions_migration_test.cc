// Migration 0015 (interruptions apart from attempts) on a database that ran
// before it: the attempts already recorded get their causes (an expired
// lease was its worker's loss, a retry was only ever sent for a trainer
// killed from outside), each trial's interruptions are counted, so that a
// trial still running gets back the attempts those took, and a sweep stored
// without max_interruptions reads as the default.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/schema/api_limits.h"
#include "tests/common/fresh_database.h"
#include "tests/db/migration_test.h"

namespace normsweep::db {
namespace {

using InterruptionsMigrationTest = MigrationTest;

TEST_F(InterruptionsMigrationTest, RecordedAttemptsGetTheirCausesAndTrialsTheirCounts) {
  ASSERT_NO_FATAL_FAILURE(MigrateUpTo(15));
  // As a scheduler before 0015 left them: a trial running its third lease
  // after an expired one and a killed trainer, and an untouched one.
  ASSERT_NO_FATAL_FAILURE(Run({
      "INSERT INTO sweeps (id, name, spec, state, max_attempts, trial_count, created_at)"
      " VALUES (1, 's', '{\"name\": \"s\", \"max_attempts\": 3}', 'RUNNING', 3, 2, now())",
      "INSERT INTO workers (id, name, registered_at, last_heartbeat_at) VALUES (1, 'w', now(), now())",
      "INSERT INTO trials (id, sweep_id, trial_index, placement, warmup_steps, peak_lr, seed, config,"
      " priority, state, attempts, worker_id, created_at) VALUES"
      " (1, 1, 0, 'pre', 0, 0.001, 0, '{}', 0, 'RUNNING', 3, 1, now()),"
      " (2, 1, 1, 'post', 0, 0.001, 0, '{}', 0, 'PENDING', 0, NULL, now())",
      "INSERT INTO trial_attempts (trial_id, attempt, worker_id, ended_at, outcome, reason) VALUES"
      " (1, 1, 1, now(), 'PENDING', 'lease expired'),"
      " (1, 2, 1, now(), 'PENDING', 'normsweep-train killed by signal 9 (Killed) without a final event')",
  }));
  ASSERT_NO_FATAL_FAILURE(MigrateTheRest());  // 0015 and later

  auto causes = conn_->Exec("SELECT cause FROM trial_attempts WHERE trial_id = 1 ORDER BY attempt");
  ASSERT_TRUE(causes.ok()) << causes.status();
  ASSERT_EQ(causes->rows(), 2);
  EXPECT_EQ(causes->GetString(0, 0), "worker_lost");
  EXPECT_EQ(causes->GetString(1, 0), "external_signal");
  auto counts = conn_->Exec("SELECT interruptions FROM trials ORDER BY id");
  ASSERT_TRUE(counts.ok()) << counts.status();
  ASSERT_EQ(counts->rows(), 2);
  EXPECT_EQ(counts->GetInt64(0, 0), 2);  // its third lease is its first own attempt
  EXPECT_EQ(counts->GetInt64(1, 0), 0);

  // Through the store: the sweep's spec says the default it runs under.
  auto store = testing::OpenStore(conninfo_, 1);
  ASSERT_TRUE(store.ok()) << store.status();
  auto sweep = (*store)->GetSweep(1);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_EQ(sweep->spec().max_interruptions(), schema::kDefaultMaxInterruptions);
  auto trial = (*store)->GetTrial(1);
  ASSERT_TRUE(trial.ok()) << trial.status();
  EXPECT_EQ(trial->attempts(), 3);
  EXPECT_EQ(trial->interruptions(), 2);
  // An older replica's insert, which names none of the new columns, still works.
  auto old_insert = conn_->Exec(
      "INSERT INTO trial_attempts (trial_id, attempt, worker_id, ended_at, outcome, reason)"
      " VALUES (2, 1, 1, now(), 'PENDING', 'lease expired') RETURNING cause");
  ASSERT_TRUE(old_insert.ok()) << old_insert.status();
  EXPECT_EQ(old_insert->GetString(0, 0), "");
}

}  // namespace
}  // namespace normsweep::db
