// Issue 24's "failed to train" (proto/schema/failure.h; its SQL twin
// normsweep_trial_failure, migration 0016) as the stores keep and the views
// count it, and the step's z-loss term (MetricPoint.z_term):
// - both stores: FinishTrial's unigram_loss comes back with the trial, so
//   schema::ClassifyTraining judges it; z_term round-trips through
//   ReportProgress (a batch, a re-sent batch, a late point);
// - PostgreSQL: the SQL rule agrees with the C++ one case by case;
//   trial_loss_values.failure, warmup_lr_grid_stats' and
//   placement_sensitivity's plateaued and failure_rate (through
//   GetSweepAnalysis), with a boundary search's max_val_loss;
// - migration 0016 on a database at 0015 with rows in it.
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "db/migrations.h"
#include "db/pg_connection.h"
#include "db/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/schema/failure.h"
#include "tests/common/fresh_database.h"
#include "tests/common/requests.h"
#include "tests/common/store_kinds.h"
#include "tests/common/test_time.h"
#include "tests/db/failure_views_test.h"
#include "tests/db/migration_test.h"

namespace normsweep::db {
namespace {

using schema::ClassifyTraining;
using schema::TrainingFailure;
using testing::kT0;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---------------------------------------------------------------- both stores

class TrainingFailureStoreTest : public testing::BothStoresTest {
 protected:
  // A sweep of n trials (post, warm-up 0, lr 1e-3, seeds 0..n-1), a worker,
  // and every trial leased to it, in index order.
  std::vector<v1::Trial> LeaseAll(int n) {
    v1::SweepSpec spec;
    spec.set_name("s");
    spec.set_max_attempts(3);
    std::vector<NewTrial> trials;
    for (int i = 0; i < n; ++i) {
      spec.add_seeds(i);
      NewTrial& t = trials.emplace_back();
      t.index = i;
      t.config.set_placement("post");
      t.config.set_lr(1e-3);
      t.config.set_seed(i);
    }
    auto created = store_->CreateSweep("", spec, trials, kT0);
    EXPECT_TRUE(created.ok()) << created.status();
    v1::RegisterWorkerRequest req;
    req.set_name("w");
    req.set_hostname("host");
    req.add_devices("cpu");
    auto worker = store_->RegisterWorker(req, kT0);
    EXPECT_TRUE(worker.ok()) << worker.status();
    worker_ = worker.value_or(0);
    std::vector<v1::Trial> out;
    for (int i = 0; i < n; ++i) {
      auto t = store_->LeaseTrial(worker_, kT0, absl::Seconds(30));
      EXPECT_TRUE(t.ok() && t->has_value()) << t.status();
      out.push_back(t.ok() ? t->value_or(v1::Trial()) : v1::Trial());
    }
    return out;
  }

  v1::ReportProgressRequest Progress(const v1::Trial& t) const {
    v1::ReportProgressRequest r;
    r.set_worker_id(worker_);
    r.set_trial_id(t.id());
    r.set_attempt(t.attempts());
    return r;
  }

  int64_t worker_ = 0;
};

TEST_P(TrainingFailureStoreTest, UnigramLossComesBackWithTheTrialAndJudgesIt) {
  const std::vector<v1::Trial> trials = LeaseAll(4);
  ASSERT_EQ(trials.size(), 4u);
  struct Outcome {
    v1::TrialState state;
    std::optional<double> final_val_loss, unigram_loss;
    std::optional<TrainingFailure> want;
  };
  const Outcome outcomes[] = {
      {v1::TRIAL_SUCCEEDED, 3.40, kUnigram, TrainingFailure::kPlateau},
      {v1::TRIAL_SUCCEEDED, 2.50, kUnigram, TrainingFailure::kNone},
      {v1::TRIAL_DIVERGED, std::nullopt, kUnigram, TrainingFailure::kDiverged},
      {v1::TRIAL_SUCCEEDED, 3.40, std::nullopt, TrainingFailure::kNone},  // an older trainer's: no plateau rule
  };
  for (size_t i = 0; i < trials.size(); ++i) {
    v1::FinishTrialRequest req = testing::FinishOf(worker_, trials[i], outcomes[i].state);
    if (outcomes[i].final_val_loss) req.mutable_result()->set_final_val_loss(*outcomes[i].final_val_loss);
    if (outcomes[i].unigram_loss) req.mutable_result()->set_unigram_loss(*outcomes[i].unigram_loss);
    ASSERT_TRUE(store_->FinishTrial(req, kT0).ok()) << i;
  }
  for (size_t i = 0; i < trials.size(); ++i) {
    auto t = store_->GetTrial(trials[i].id());
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->result().has_unigram_loss(), outcomes[i].unigram_loss.has_value()) << i;
    if (outcomes[i].unigram_loss) {
      EXPECT_DOUBLE_EQ(t->result().unigram_loss(), *outcomes[i].unigram_loss) << i;
    }
    EXPECT_EQ(ClassifyTraining(*t, std::nullopt), outcomes[i].want) << i << ": " << t->result().ShortDebugString();
  }
}

TEST_P(TrainingFailureStoreTest, ZTermIsStoredAndReturnedFirstValueKept) {
  const std::vector<v1::Trial> trials = LeaseAll(1);
  ASSERT_EQ(trials.size(), 1u);
  v1::ReportProgressRequest batch = Progress(trials[0]);  // steps 1..3; step 2 without its z term
  for (int step = 1; step <= 3; ++step) {
    v1::MetricPoint* p = batch.add_points();
    p->set_step(step);
    p->set_train_loss(5.0 - 0.1 * step);
    if (step != 2) p->set_z_term(0.01 * step);
  }
  ASSERT_TRUE(store_->ReportProgress(batch, kT0).ok());
  v1::ReportProgressRequest resent = batch;  // a changed value of a stored step is not taken
  resent.mutable_points(0)->set_z_term(9.0);
  ASSERT_TRUE(store_->ReportProgress(resent, kT0).ok());
  v1::ReportProgressRequest late = Progress(trials[0]);  // step 2's z term alone, after its step
  late.add_points()->set_step(2);
  late.mutable_points(0)->set_z_term(0.025);
  ASSERT_TRUE(store_->ReportProgress(late, kT0).ok());
  v1::ReportProgressRequest next = Progress(trials[0]);  // a new batch without any z term
  next.add_points()->set_step(4);
  next.mutable_points(0)->set_train_loss(4.5);
  ASSERT_TRUE(store_->ReportProgress(next, kT0).ok());

  auto h = store_->GetTrialHistory(trials[0].id());
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->metrics.size(), 4u);
  EXPECT_DOUBLE_EQ(h->metrics[0].z_term(), 0.01);
  EXPECT_DOUBLE_EQ(h->metrics[1].z_term(), 0.025);
  EXPECT_DOUBLE_EQ(h->metrics[1].train_loss(), 4.8);
  EXPECT_DOUBLE_EQ(h->metrics[2].z_term(), 0.03);
  EXPECT_FALSE(h->metrics[3].has_z_term());
  EXPECT_DOUBLE_EQ(h->metrics[3].train_loss(), 4.5);
}

INSTANTIATE_TEST_SUITE_P(Stores, TrainingFailureStoreTest, testing::BothStores(), testing::StoreKindName);

// ---------------------------------------------------------------- the views

class TrainingFailureViewsTest : public FailureViewsTest {};

TEST_F(TrainingFailureViewsTest, TheSqlRuleIsTheCppRule) {
  const std::optional<double> finals[] = {std::nullopt, kNaN, 2.0, 3.0, 3.2, 3.31, kUnigram - 0.1, 3.32, 3.40, 3.5};
  const std::optional<double> unigrams[] = {std::nullopt, kUnigram, kNaN};
  const std::optional<double> maxima[] = {std::nullopt, 3.0};
  const std::pair<v1::TrialState, const char*> states[] = {{v1::TRIAL_SUCCEEDED, "SUCCEEDED"},
                                                           {v1::TRIAL_DIVERGED, "DIVERGED"},
                                                           {v1::TRIAL_FAILED, "FAILED"},
                                                           {v1::TRIAL_RUNNING, "RUNNING"}};
  int cases = 0;
  for (const auto& [state, name] : states) {
    for (auto final_val_loss : finals) {
      for (auto unigram : unigrams) {
        for (auto max_val_loss : maxima) {
          auto r = conn_->Exec("SELECT normsweep_trial_failure($1, $2, $3, $4)",
                               PgParams().Add(name).AddOptional(final_val_loss).AddOptional(unigram)
                                   .AddOptional(max_val_loss));
          ASSERT_TRUE(r.ok()) << r.status();
          // 0016's function: the rule without val_loss_progress (0020's
          // normsweep_training_failure takes it: not_converged_test).
          const std::optional<TrainingFailure> want =
              ClassifyTraining(state, final_val_loss, unigram, std::nullopt, max_val_loss);
          const std::string where = absl::StrCat(name, " final ", final_val_loss.value_or(-1), " unigram ",
                                                 unigram.value_or(-1), " max ", max_val_loss.value_or(-1));
          ASSERT_EQ(r->IsNull(0, 0), !want.has_value()) << where;
          if (want) {
            EXPECT_EQ(r->GetString(0, 0), schema::FailureName(*want)) << where;
          }
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 4 * 10 * 3 * 2);
}

// One sweep without a boundary search:
//   post lr 1e-3: plateau (3.40 against 3.41), trained (2.5), DIVERGED, FAILED
//   post lr 1e-2: SUCCEEDED with a NaN loss, 3.40 without a unigram loss
//   pre  lr 1e-3: trained (2.0), PENDING
// post has 4 succeeded, 1 diverged, 2 of the succeeded failed to train
// (plateau, no finite loss): failure_rate 3/5 beside a divergence_rate of 1/5.
TEST_F(TrainingFailureViewsTest, GridCellsAndPlacementsCountThePlateau) {
  const int64_t s = AddSweep("grid");
  const int64_t plateau = Add(s, "post", 1e-3, 0, "SUCCEEDED", 3.40, kUnigram);
  const int64_t trained = Add(s, "post", 1e-3, 1, "SUCCEEDED", 2.5, kUnigram);
  const int64_t diverged = Add(s, "post", 1e-3, 2, "DIVERGED", std::nullopt, kUnigram);
  const int64_t failed = Add(s, "post", 1e-3, 3, "FAILED", std::nullopt, std::nullopt);
  const int64_t nan = Add(s, "post", 1e-2, 0, "SUCCEEDED", kNaN, kUnigram);
  const int64_t old_worker = Add(s, "post", 1e-2, 1, "SUCCEEDED", 3.40, std::nullopt);
  const int64_t pre = Add(s, "pre", 1e-3, 0, "SUCCEEDED", 2.0, kUnigram);
  const int64_t pending = Add(s, "pre", 1e-3, 1, "PENDING", std::nullopt, std::nullopt);

  const std::map<int64_t, std::string> want = {{plateau, "plateau"},   {trained, ""},   {diverged, "diverged"},
                                               {failed, "NULL"},       {nan, "no_finite_loss"},
                                               {old_worker, ""},       {pre, ""},       {pending, "NULL"}};
  EXPECT_EQ(Failures(s), want);

  const v1::GetSweepAnalysisResponse a = Analysis(s);
  const v1::GridCell* c = Cell(a, "post", 1e-3);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->succeeded(), 2);
  EXPECT_EQ(c->diverged(), 1);
  EXPECT_EQ(c->failed(), 1);
  EXPECT_EQ(c->plateaued(), 1);
  EXPECT_DOUBLE_EQ(c->divergence_rate(), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(c->failure_rate(), 2.0 / 3.0);
  EXPECT_EQ(c->n_seeds(), 2);  // the plateaued seed still has its loss in the mean
  EXPECT_DOUBLE_EQ(c->mean_val_loss(), (3.40 + 2.5) / 2);
  c = Cell(a, "post", 1e-2);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->plateaued(), 1);
  EXPECT_DOUBLE_EQ(c->divergence_rate(), 0.0);
  EXPECT_DOUBLE_EQ(c->failure_rate(), 0.5);
  c = Cell(a, "pre", 1e-3);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->plateaued(), 0);
  EXPECT_DOUBLE_EQ(c->failure_rate(), 0.0);
  EXPECT_EQ(c->unfinished(), 1);

  const v1::PlacementSensitivity* post = Placement(a, "post");
  ASSERT_NE(post, nullptr);
  EXPECT_EQ(post->succeeded(), 4);
  EXPECT_EQ(post->diverged(), 1);
  EXPECT_EQ(post->plateaued(), 2);
  EXPECT_DOUBLE_EQ(post->divergence_rate(), 1.0 / 5.0);
  EXPECT_DOUBLE_EQ(post->failure_rate(), 3.0 / 5.0);
  const v1::PlacementSensitivity* pre_p = Placement(a, "pre");
  ASSERT_NE(pre_p, nullptr);
  EXPECT_EQ(pre_p->plateaued(), 0);
  EXPECT_DOUBLE_EQ(pre_p->failure_rate(), 0.0);

  // docs/sql.md's "which scheme fails to train where, by cause".
  auto by_cause = conn_->Exec(
      "SELECT variant, placement, warmup_steps, peak_lr,"
      "       count(*) FILTER (WHERE failure = 'diverged') AS diverged,"
      "       count(*) FILTER (WHERE failure = 'plateau') AS plateau,"
      "       count(*) FILTER (WHERE failure = 'no_finite_loss') AS no_finite_loss,"
      "       count(*) FILTER (WHERE failure = 'above_max_val_loss') AS above_max_val_loss,"
      "       count(*) FILTER (WHERE failure = 'not_converged') AS not_converged,"
      "       count(*) FILTER (WHERE failure = '') AS trained"
      " FROM trial_loss_values WHERE sweep_id = $1"
      " GROUP BY variant, placement, warmup_steps, peak_lr"
      " HAVING count(*) FILTER (WHERE normsweep_failed_to_train(failure)) > 0"
      " ORDER BY variant, placement, warmup_steps, peak_lr", PgParams().Add(s));
  ASSERT_TRUE(by_cause.ok()) << by_cause.status();
  ASSERT_EQ(by_cause->rows(), 2);  // pre trained everywhere
  const auto row = [&](int i) {
    return absl::StrCat(by_cause->GetString(i, 1), " ", by_cause->GetDouble(i, 3), ": ", by_cause->GetInt64(i, 4),
                        " ", by_cause->GetInt64(i, 5), " ", by_cause->GetInt64(i, 6), " ",
                        by_cause->GetInt64(i, 7), " ", by_cause->GetInt64(i, 8), " ", by_cause->GetInt64(i, 9));
  };
  EXPECT_EQ(row(0), "post 0.001: 1 1 0 0 0 1");
  EXPECT_EQ(row(1), "post 0.01: 0 0 1 0 0 1");

  // The view at its default tolerance has the same columns.
  auto v = conn_->Exec("SELECT plateaued, failure_rate FROM placement_sensitivity"
                       " WHERE sweep_id = $1 AND placement = 'post'", PgParams().Add(s));
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->rows(), 1);
  EXPECT_EQ(v->GetInt64(0, 0), 2);
  EXPECT_DOUBLE_EQ(v->GetDouble(0, 1), 3.0 / 5.0);
}

// A boundary search's max_val_loss (3.0) is a failure too; the plateau is
// judged first (3.35 is above both). Another sweep's trials are not judged
// by it.
TEST_F(TrainingFailureViewsTest, ABoundarySearchsMaxValLossCounts) {
  const int64_t s = AddSweep(
      "boundary", R"({"boundary_search": {"lr_min": 0.0001, "lr_max": 0.1, "max_val_loss": 3.0}})");
  const int64_t above = Add(s, "post", 1e-3, 0, "SUCCEEDED", 3.2, kUnigram);
  const int64_t plateau = Add(s, "post", 1e-3, 1, "SUCCEEDED", 3.35, kUnigram);
  const int64_t trained = Add(s, "post", 1e-3, 2, "SUCCEEDED", 2.9, kUnigram);
  const int64_t other = AddSweep("grid");
  const int64_t same_loss = Add(other, "post", 1e-3, 0, "SUCCEEDED", 3.2, kUnigram);

  EXPECT_EQ(Failures(s), (std::map<int64_t, std::string>{{above, "above_max_val_loss"}, {plateau, "plateau"},
                                                         {trained, ""}}));
  EXPECT_EQ(Failures(other), (std::map<int64_t, std::string>{{same_loss, ""}}));
  const v1::GetSweepAnalysisResponse a = Analysis(s);
  const v1::GridCell* c = Cell(a, "post", 1e-3);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->plateaued(), 2);
  EXPECT_DOUBLE_EQ(c->failure_rate(), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(c->divergence_rate(), 0.0);
  const v1::PlacementSensitivity* p = Placement(a, "post");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->plateaued(), 2);
  EXPECT_DOUBLE_EQ(p->failure_rate(), 2.0 / 3.0);
}

// trial_loss_values joins the sweeps for failure alone: the views that do
// not read failure (cell_loss_values, and through it lr_sensitivity) plan
// without that join, as the view's comment says.
TEST_F(TrainingFailureViewsTest, OnlyReadersOfFailureJoinTheSweeps) {
  const auto plan = [&](const std::string& sql) {
    auto r = conn_->Exec(absl::StrCat("EXPLAIN ", sql));
    EXPECT_TRUE(r.ok()) << r.status();
    std::string out;
    for (int i = 0; r.ok() && i < r->rows(); ++i) absl::StrAppend(&out, r->GetString(i, 0), "\n");
    return out;
  };
  EXPECT_THAT(plan("SELECT failure FROM trial_loss_values WHERE sweep_id = 1"), ::testing::HasSubstr(" on sweeps"));
  EXPECT_THAT(plan("SELECT * FROM cell_loss_values WHERE sweep_id = 1"), ::testing::Not(::testing::HasSubstr("sweeps")));
  EXPECT_THAT(plan("SELECT * FROM lr_sensitivity WHERE sweep_id = 1"), ::testing::Not(::testing::HasSubstr("sweeps")));
}

// ---------------------------------------------------------------- migration

// 0016 on a database at 0015 with a finished trial and its metrics (a batch
// and a late row): the trial has no unigram loss (judged without the plateau
// rule), its steps no z term, and new progress stores one.
using TrainingFailureMigrationTest = MigrationTest;

TEST_F(TrainingFailureMigrationTest, AppliesOnADatabaseAt0015WithRows) {
  ASSERT_NO_FATAL_FAILURE(MigrateUpTo(16));
  ASSERT_EQ(before_, 15);
  ASSERT_NO_FATAL_FAILURE(Run({
      "INSERT INTO sweeps (id, name, spec, state, max_attempts, trial_count, created_at)"
      " VALUES (1, 's', '{\"name\": \"s\", \"max_attempts\": 3}', 'RUNNING', 3, 2, now())",
      "INSERT INTO workers (id, name, registered_at, last_heartbeat_at) VALUES (1, 'w', now(), now())",
      "INSERT INTO trials (id, sweep_id, trial_index, placement, warmup_steps, peak_lr, seed, config,"
      " priority, state, attempts, worker_id, final_val_loss, created_at) VALUES"
      " (1, 1, 0, 'post', 0, 0.001, 0, '{}', 0, 'SUCCEEDED', 1, 1, 3.40, now()),"
      " (2, 1, 1, 'pre', 0, 0.001, 0, '{}', 0, 'RUNNING', 1, 1, NULL, now())",
      "INSERT INTO trial_metric_batches (trial_id, first_step, last_step, steps, lr, train_loss, val_loss,"
      " val_accuracy, grad_norm, tokens_per_s, output_log_z) VALUES"
      " (1, 1, 2, '{1,2}', '{0.001,0.001}', '{4.0,3.9}', '{NULL,NULL}', '{NULL,NULL}', '{1.5,1.4}',"
      " '{100,100}', '{NULL,NULL}')",
      "INSERT INTO trial_metric_late (trial_id, step, val_loss) VALUES (1, 2, 3.95)",
  }));
  ASSERT_NO_FATAL_FAILURE(MigrateTheRest());  // 0016 and later

  auto rows = conn_->Exec("SELECT step, train_loss, val_loss, z_term IS NULL FROM trial_metrics"
                            " WHERE trial_id = 1 ORDER BY step");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->rows(), 2);
  EXPECT_DOUBLE_EQ(rows->GetDouble(1, 1), 3.9);
  EXPECT_DOUBLE_EQ(rows->GetDouble(1, 2), 3.95);
  EXPECT_TRUE(rows->GetBool(0, 3) && rows->GetBool(1, 3));
  auto failure = conn_->Exec("SELECT failure FROM trial_loss_values WHERE trial_id = 1");
  ASSERT_TRUE(failure.ok()) << failure.status();
  EXPECT_EQ(failure->GetString(0, 0), "");  // 3.40 trained for all the rule can tell without a unigram loss

  auto store = testing::OpenStore(conninfo_, 1);
  ASSERT_TRUE(store.ok()) << store.status();
  auto trial = (*store)->GetTrial(1);
  ASSERT_TRUE(trial.ok()) << trial.status();
  EXPECT_FALSE(trial->result().has_unigram_loss());
  v1::ReportProgressRequest progress;
  progress.set_worker_id(1);
  progress.set_trial_id(2);
  progress.set_attempt(1);
  v1::MetricPoint* p = progress.add_points();
  p->set_step(1);
  p->set_train_loss(4.0);
  p->set_z_term(0.002);
  ASSERT_TRUE((*store)->ReportProgress(progress, kT0).ok());
  auto h = (*store)->GetTrialHistory(2);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->metrics.size(), 1u);
  EXPECT_DOUBLE_EQ(h->metrics[0].z_term(), 0.002);
}

// 0019 on a database at 0018: each sweep's max_val_loss, read from its spec
// once into the generated column, judges its trials as before.
TEST_F(TrainingFailureMigrationTest, SweepsGetTheirMaxValLossColumn) {
  auto conn = testing::MigratedOverRows(
      19, {"INSERT INTO sweeps (id, name, spec, state, max_attempts, trial_count, created_at) VALUES"
           " (1, 'b', '{\"boundary_search\": {\"max_val_loss\": 4.5}}', 'RUNNING', 3, 1, now()),"
           " (2, 'g', '{\"name\": \"g\"}', 'RUNNING', 3, 1, now())",
           "INSERT INTO trials (id, sweep_id, trial_index, placement, warmup_steps, peak_lr, seed, config,"
           " priority, state, attempts, final_val_loss, created_at) VALUES"
           " (1, 1, 0, 'post', 0, 0.001, 0, '{}', 0, 'SUCCEEDED', 1, 4.75, now()),"
           " (2, 2, 0, 'post', 0, 0.001, 0, '{}', 0, 'SUCCEEDED', 1, 4.75, now())"});
  ASSERT_TRUE(conn.ok()) << conn.status();
  auto rows = (*conn)->Exec("SELECT s.id, s.max_val_loss, v.failure FROM sweeps s"
                            " JOIN trial_loss_values v ON v.sweep_id = s.id ORDER BY s.id");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->rows(), 2);
  EXPECT_DOUBLE_EQ(rows->GetDouble(0, 1), 4.5);
  EXPECT_EQ(rows->GetString(0, 2), "above_max_val_loss");
  EXPECT_TRUE(rows->IsNull(1, 1));
  EXPECT_EQ(rows->GetString(1, 2), "");
  // A sweep stored after it gets the column too.
  auto later = (*conn)->Exec(
      "INSERT INTO sweeps (id, name, spec, state, max_attempts, trial_count, created_at) VALUES"
      " (3, 'c', '{\"boundary_search\": {\"max_val_loss\": 6}}', 'RUNNING', 3, 0, now()) RETURNING max_val_loss");
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_DOUBLE_EQ(later->GetDouble(0, 0), 6.0);
}

}  // namespace
}  // namespace normsweep::db
