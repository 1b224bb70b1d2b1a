// Runs still learning near the unigram loss are not plateaus (issue 34;
// proto/schema/failure.h, its SQL twin normsweep_training_failure of
// migration 0020):
// - the SQL rule agrees with the C++ one case by case: plateau,
//   not_converged, fewer than 3 evaluations (NULL progress), NaN and
//   infinite progress, max_val_loss's precedence;
// - both stores: FinishTrial's val_loss_progress comes back with the trial;
// - the views: not_converged labelled in trial_loss_values and counted apart
//   from plateaued (and out of failure_rate) in warmup_lr_grid_stats and
//   placement_sensitivity, through GetSweepAnalysis;
// - db/tools/recompute_val_loss_progress.sql fills stored trials' progress by
//   the trainer's rule;
// - migration 0020 on a database at 0019: a stored plateau keeps its label.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "db/migrations.h"
#include "db/pg_connection.h"
#include "db/store.h"
#include "gtest/gtest.h"
#include "proto/schema/failure.h"
#include "tests/common/fresh_database.h"
#include "tests/common/requests.h"
#include "tests/common/store_kinds.h"
#include "tests/common/test_time.h"
#include "tests/common/views_test.h"
#include "tests/db/failure_views_test.h"
#include "trainer/settings/val_loss_progress.h"

namespace normsweep::db {
namespace {

using schema::ClassifyTraining;
using schema::kProgressMargin;
using schema::TrainingFailure;
using testing::kT0;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A sweep of n Pre-LN trials (lr 1e-3, seeds 0 .. n-1, `steps` steps unless
// 0) in `store`, and a worker to lease them.
void AddLeasableSweep(Store& store, int n, int steps, int64_t* sweep, int64_t* worker) {
  v1::SweepSpec spec;
  spec.set_name("s");
  spec.set_max_attempts(3);
  std::vector<NewTrial> trials(n);
  for (int i = 0; i < n; ++i) {
    spec.add_seeds(i);
    trials[i].index = i;
    trials[i].config.set_placement("pre");
    trials[i].config.set_lr(1e-3);
    trials[i].config.set_seed(i);
    if (steps > 0) trials[i].config.set_steps(steps);
  }
  auto created = store.CreateSweep("", spec, trials, kT0);
  ASSERT_TRUE(created.ok()) << created.status();
  *sweep = created->sweep.id();
  v1::RegisterWorkerRequest reg;
  reg.set_name("w");
  reg.add_devices("cpu");
  auto registered = store.RegisterWorker(reg, kT0);
  ASSERT_TRUE(registered.ok()) << registered.status();
  *worker = *registered;
}

// ---------------------------------------------------------------- the twins

class NotConvergedSqlTest : public testing::ViewsTest {};

TEST_F(NotConvergedSqlTest, TheSqlRuleIsTheCppRule) {
  const std::optional<double> finals[] = {std::nullopt, kNaN, 2.0, 3.2, 3.31, 3.32, 3.40, 3.5};
  const std::optional<double> unigrams[] = {std::nullopt, kUnigram, kNaN};
  const std::optional<double> progresses[] = {std::nullopt, kNaN, kInf, -kInf, -0.3, 0.0,
                                              kProgressMargin * 0.99, kProgressMargin, 0.23};
  const std::optional<double> maxima[] = {std::nullopt, 3.0, 3.45};
  const std::pair<v1::TrialState, const char*> states[] = {{v1::TRIAL_SUCCEEDED, "SUCCEEDED"},
                                                           {v1::TRIAL_DIVERGED, "DIVERGED"},
                                                           {v1::TRIAL_CANCELLED, "CANCELLED"}};
  int cases = 0, not_converged = 0, plateau = 0;
  for (const auto& [state, name] : states) {
    for (auto final_val_loss : finals) {
      for (auto unigram : unigrams) {
        for (auto progress : progresses) {
          for (auto max_val_loss : maxima) {
            auto r = conn_->Exec("SELECT normsweep_training_failure($1, $2, $3, $4, $5)",
                                 PgParams().Add(name).AddOptional(final_val_loss).AddOptional(unigram)
                                     .AddOptional(progress).AddOptional(max_val_loss));
            ASSERT_TRUE(r.ok()) << r.status();
            const std::optional<TrainingFailure> want =
                ClassifyTraining(state, final_val_loss, unigram, progress, max_val_loss);
            const std::string where =
                absl::StrCat(name, " final ", final_val_loss.value_or(-1), " unigram ", unigram.value_or(-1),
                             " progress ", progress.value_or(-1), " max ", max_val_loss.value_or(-1));
            ASSERT_EQ(r->IsNull(0, 0), !want.has_value()) << where;
            if (!want) continue;
            EXPECT_EQ(r->GetString(0, 0), schema::FailureName(*want)) << where;
            not_converged += *want == TrainingFailure::kNotConverged;
            plateau += *want == TrainingFailure::kPlateau;
            auto failed = conn_->Exec("SELECT normsweep_failed_to_train($1)", PgParams().Add(r->GetString(0, 0)));
            ASSERT_TRUE(failed.ok()) << failed.status();
            EXPECT_EQ(failed->GetBool(0, 0), schema::FailedToTrain(*want)) << where;
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 2 * 8 * 3 * 9 * 3);  // CANCELLED is not judged
  EXPECT_GT(not_converged, 0);
  EXPECT_GT(plateau, 0);
}

// ---------------------------------------------------------------- both stores

class NotConvergedStoreTest : public testing::BothStoresTest {};

TEST_P(NotConvergedStoreTest, ProgressComesBackWithTheTrialAndJudgesIt) {
  int64_t sweep = 0, worker = 0;
  ASSERT_NO_FATAL_FAILURE(AddLeasableSweep(*store_, 3, 0, &sweep, &worker));
  // 2.91 against a unigram loss of 2.95: still falling 0.23, falling 0.01,
  // and not measured (an older worker, or fewer than 3 evaluations).
  const std::optional<double> progress[] = {0.23, 0.01, std::nullopt};
  const TrainingFailure want[] = {TrainingFailure::kNotConverged, TrainingFailure::kPlateau, TrainingFailure::kPlateau};
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) {
    auto leased = store_->LeaseTrial(worker, kT0, absl::Seconds(30));
    ASSERT_TRUE(leased.ok() && leased->has_value()) << leased.status();
    v1::FinishTrialRequest req = testing::FinishOf(worker, **leased, v1::TRIAL_SUCCEEDED);
    req.mutable_result()->set_final_val_loss(2.91);
    req.mutable_result()->set_unigram_loss(2.95);
    if (progress[(*leased)->index()]) {
      req.mutable_result()->set_val_loss_progress(*progress[(*leased)->index()]);
    }
    ASSERT_TRUE(store_->FinishTrial(req, kT0).ok());
    ids.push_back((*leased)->id());
  }
  for (int64_t id : ids) {
    auto t = store_->GetTrial(id);
    ASSERT_TRUE(t.ok()) << t.status();
    const int i = t->index();
    EXPECT_EQ(t->result().has_val_loss_progress(), progress[i].has_value()) << i;
    if (progress[i]) EXPECT_DOUBLE_EQ(t->result().val_loss_progress(), *progress[i]) << i;
    EXPECT_EQ(ClassifyTraining(*t, std::nullopt), want[i]) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, NotConvergedStoreTest, testing::BothStores(), testing::StoreKindName);

// ---------------------------------------------------------------- the views

class NotConvergedViewsTest : public FailureViewsTest {};

// post lr 1e-3, four seeds: not converged (3.35, still falling 0.2), the
// plateau (3.40, falling 0.01), the plateau without a measured progress,
// trained (2.5); post lr 1e-2: diverged and not converged. pre: trained.
TEST_F(NotConvergedViewsTest, NotConvergedIsCountedApartAndIsNoFailure) {
  const int64_t s = AddSweep("grid");
  const int64_t learning = Add(s, "post", 1e-3, 0, "SUCCEEDED", 3.35, kUnigram, 0.2);
  const int64_t flat = Add(s, "post", 1e-3, 1, "SUCCEEDED", 3.40, kUnigram, 0.01);
  const int64_t unjudged = Add(s, "post", 1e-3, 2, "SUCCEEDED", 3.40, kUnigram, std::nullopt);
  const int64_t trained = Add(s, "post", 1e-3, 3, "SUCCEEDED", 2.5, kUnigram, 0.3);
  const int64_t diverged = Add(s, "post", 1e-2, 0, "DIVERGED", std::nullopt, kUnigram, std::nullopt);
  const int64_t learning2 = Add(s, "post", 1e-2, 1, "SUCCEEDED", 3.45, kUnigram, kProgressMargin);
  const int64_t pre = Add(s, "pre", 1e-3, 0, "SUCCEEDED", 2.0, kUnigram, 0.1);
  EXPECT_EQ(Failures(s), (std::map<int64_t, std::string>{{learning, "not_converged"},
                                                         {flat, "plateau"},
                                                         {unjudged, "plateau"},
                                                         {trained, ""},
                                                         {diverged, "diverged"},
                                                         {learning2, "not_converged"},
                                                         {pre, ""}}));
  const v1::GetSweepAnalysisResponse a = Analysis(s);
  const v1::GridCell* c = Cell(a, "post", 1e-3);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->plateaued(), 2);
  EXPECT_EQ(c->not_converged(), 1);
  EXPECT_DOUBLE_EQ(c->failure_rate(), 2.0 / 4.0);
  c = Cell(a, "post", 1e-2);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->plateaued(), 0);
  EXPECT_EQ(c->not_converged(), 1);
  EXPECT_DOUBLE_EQ(c->failure_rate(), 1.0 / 2.0);  // the divergence only
  c = Cell(a, "pre", 1e-3);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->not_converged(), 0);
  EXPECT_DOUBLE_EQ(c->failure_rate(), 0.0);
  for (const v1::PlacementSensitivity& p : a.placements()) {
    if (p.placement() != "post") continue;
    EXPECT_EQ(p.plateaued(), 2);
    EXPECT_EQ(p.not_converged(), 2);
    EXPECT_DOUBLE_EQ(p.failure_rate(), 3.0 / 6.0);
  }
  auto v = conn_->Exec("SELECT plateaued, not_converged FROM placement_sensitivity WHERE sweep_id = $1"
                       " AND placement = 'post'", PgParams().Add(s));
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->rows(), 1);
  EXPECT_EQ(v->GetInt64(0, 0), 2);
  EXPECT_EQ(v->GetInt64(0, 1), 2);
}

// A boundary search's max_val_loss keeps precedence over not_converged.
TEST_F(NotConvergedViewsTest, MaxValLossKeepsPrecedence) {
  const int64_t s = AddSweep(
      "boundary", R"({"boundary_search": {"lr_min": 0.0001, "lr_max": 0.1, "max_val_loss": 3.0}})");
  const int64_t above = Add(s, "post", 1e-3, 0, "SUCCEEDED", 3.35, kUnigram, 0.2);
  const int64_t ok = AddSweep("loose", R"({"boundary_search": {"lr_min": 0.0001, "lr_max": 0.1, "max_val_loss": 3.4}})");
  const int64_t learning = Add(ok, "post", 1e-3, 0, "SUCCEEDED", 3.35, kUnigram, 0.2);
  EXPECT_EQ(Failures(s), (std::map<int64_t, std::string>{{above, "above_max_val_loss"}}));
  EXPECT_EQ(Failures(ok), (std::map<int64_t, std::string>{{learning, "not_converged"}}));
}

// ---------------------------------------------------------------- the script

// db/tools/recompute_val_loss_progress.sql on trials finished without a
// progress (stored before the trainer reported it), as psql would run it.
class RecomputeScriptTest : public testing::ViewsTest {
 protected:
  absl::StatusOr<PgResult> RunScript(int64_t sweep_id) {
    const char* src = std::getenv("NORMSWEEP_SOURCE_DIR");
    std::ifstream in(std::string(src ? src : ".") + "/db/tools/recompute_val_loss_progress.sql");
    std::string sql, line;
    while (std::getline(in, line)) {
      if (!line.empty() && line[0] == '\\') continue;  // psql's meta-commands
      sql += line + "\n";
    }
    EXPECT_FALSE(sql.empty());
    return conn_->Exec(absl::StrReplaceAll(sql, {{":sweep_id", absl::StrCat(sweep_id)}}));
  }
};

TEST_F(RecomputeScriptTest, FillsTheTrainersProgressFromStoredMetrics) {
  int64_t sweep = 0, worker = 0;
  ASSERT_NO_FATAL_FAILURE(AddLeasableSweep(*store_, 5, 80, &sweep, &worker));
  // By index: evaluations (step, val_loss), and the progress already stored.
  const std::vector<std::vector<std::pair<int, double>>> evals = {
      {{0, 5.5}, {20, 4.2}, {40, 3.9}, {60, 3.60}, {80, 3.35}},  // 3.60 - 3.35 = 0.25, near 3.41
      {{0, 5.5}, {80, 3.40}},                                    // two evaluations: not judged
      {{0, 5.5}, {40, 3.45}, {70, 3.44}},                        // no evaluation at its last step
      {{0, 5.5}, {40, 3.45}, {80, 3.44}},                        // has one: kept
      {{0, 5.5}, {70, 3.45}, {80, 3.40}}};                       // the reference is step 0: not judged
  std::map<int, int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    auto leased = store_->LeaseTrial(worker, kT0, absl::Seconds(30));
    ASSERT_TRUE(leased.ok() && leased->has_value()) << leased.status();
    const v1::Trial& t = **leased;
    ids[t.index()] = t.id();
    v1::ReportProgressRequest p;
    p.set_worker_id(worker);
    p.set_trial_id(t.id());
    p.set_attempt(t.attempts());
    for (const auto& [step, loss] : evals[t.index()]) {
      v1::MetricPoint* m = p.add_points();
      m->set_step(step);
      m->set_val_loss(loss);
    }
    ASSERT_TRUE(store_->ReportProgress(p, kT0).ok());
    v1::FinishTrialRequest f = testing::FinishOf(worker, t, v1::TRIAL_SUCCEEDED);
    f.mutable_result()->set_final_val_loss(evals[t.index()].back().second);
    f.mutable_result()->set_unigram_loss(3.41);
    if (t.index() == 3) f.mutable_result()->set_val_loss_progress(0.01);
    ASSERT_TRUE(store_->FinishTrial(f, kT0).ok());
  }
  const auto failure = [&](int index) { return Failures(sweep)[ids[index]]; };
  EXPECT_EQ(failure(0), "plateau");  // stored before its progress: the plateau rule as it stood
  const auto update_seq = [&] {
    auto r = conn_->Exec("SELECT update_seq FROM trials WHERE id = $1", PgParams().Add(ids[0]));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->GetInt64(0, 0) : 0;
  };
  const int64_t seq_before = update_seq();
  auto ran = RunScript(sweep);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(ran->rows(), 1);  // only the first was judged now
  const auto progress = [&](int index) -> std::optional<double> {
    auto t = store_->GetTrial(ids[index]);
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok() || !t->result().has_val_loss_progress()) return std::nullopt;
    return t->result().val_loss_progress();
  };
  ASSERT_TRUE(progress(0).has_value());
  EXPECT_DOUBLE_EQ(*progress(0), trainer::ValLossProgress(evals[0], 80).value());
  EXPECT_NEAR(*progress(0), 0.25, 1e-12);
  EXPECT_EQ(progress(1), std::nullopt);
  EXPECT_EQ(progress(2), std::nullopt);
  EXPECT_EQ(progress(3), 0.01);
  EXPECT_EQ(progress(4), std::nullopt);
  EXPECT_EQ(trainer::ValLossProgress(evals[4], 80), std::nullopt);  // the trainer's twin agrees
  // Its label moved: still learning near the unigram loss. Run again, nothing changes.
  EXPECT_EQ(failure(0), "not_converged");
  EXPECT_GT(update_seq(), seq_before);  // watchers and export cursors see it changed
  auto again = RunScript(sweep);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->rows(), 0);
  // Another sweep's id touches none of these.
  auto other = RunScript(sweep + 1000);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->rows(), 0);
}

// ---------------------------------------------------------------- migration

// 0020 on a database at 0019: a trial stored as a plateau has no progress
// (no backfill) and keeps its label; the column takes new values.
TEST(NotConvergedMigrationTest, StoredPlateausKeepTheirLabel) {
  auto conn = testing::MigratedOverRows(
      20, {"INSERT INTO sweeps (id, name, spec, state, max_attempts, trial_count, created_at)"
           " VALUES (1, 's', '{\"name\": \"s\"}', 'COMPLETED', 3, 2, now())",
           "INSERT INTO trials (id, sweep_id, trial_index, placement, warmup_steps, peak_lr, seed, config,"
           " priority, state, attempts, final_val_loss, unigram_loss, created_at) VALUES"
           " (1, 1, 0, 'post', 0, 0.001, 0, '{}', 0, 'SUCCEEDED', 1, 3.40, 3.41, now()),"
           " (2, 1, 1, 'pre', 0, 0.001, 0, '{}', 0, 'SUCCEEDED', 1, 2.50, 3.41, now())"});
  ASSERT_TRUE(conn.ok()) << conn.status();
  auto rows = (*conn)->Exec("SELECT t.val_loss_progress IS NULL, v.failure FROM trials t"
                            " JOIN trial_loss_values v ON v.trial_id = t.id ORDER BY t.id");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->rows(), 2);
  EXPECT_TRUE(rows->GetBool(0, 0));
  EXPECT_EQ(rows->GetString(0, 1), "plateau");
  EXPECT_EQ(rows->GetString(1, 1), "");
  ASSERT_TRUE((*conn)->Exec("UPDATE trials SET val_loss_progress = 0.3 WHERE id = 1").ok());
  auto after = (*conn)->Exec("SELECT failure FROM trial_loss_values WHERE trial_id = 1");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->GetString(0, 0), "not_converged");
}

}  // namespace
}  // namespace normsweep::db
