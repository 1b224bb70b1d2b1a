// How the PostgreSQL store keeps progress: batches raced through two
// replicas stored once, a batch's new steps as one row of arrays and the
// rest step by step, and issue 16's diagnostics as typed columns that plain
// SQL reads.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "db/pg_connection.h"
#include "db/store.h"
#include "gtest/gtest.h"
#include "tests/common/metric_points.h"
#include "tests/common/requests.h"
#include "tests/common/test_time.h"
#include "tests/db/postgres_fixture.h"

namespace normsweep::db {
namespace {

using testing::kT0;

// Two replicas (two stores on one database) receive the same progress
// batches at once, as when a worker re-sends a batch that timed out to
// another replica: every call succeeds and every step is stored once, with
// the values of whichever arrived first (new steps are inserted plainly; the
// loser of a race fails on the unique index and runs its group again).
TEST(ProgressRaceTest, SameBatchesThroughTwoStoresStoredOnce) {
  const std::string conninfo = NewDatabase("race");
  std::unique_ptr<Store> a = OpenStore(conninfo);
  std::unique_ptr<Store> b = OpenStore(conninfo);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  ASSERT_TRUE(CreateSweepOf(*a, "race", 4, 1).ok());
  const int64_t w = RegisterWorker(*a);
  const std::vector<v1::Trial> leased = LeaseTrials(*a, w, 4, absl::Minutes(10));
  ASSERT_EQ(leased.size(), 4u);
  // Connected and prepared before the race, so that neither store is done
  // before the other has started.
  for (Store* store : {a.get(), b.get()}) {
    ASSERT_TRUE(store->ReportProgress(testing::ProgressOf(w, leased[0]), kT0).ok());
  }
  constexpr int kBatches = 100;
  auto report = [&](Store* store, double loss) {
    for (int batch = 0; batch < kBatches; ++batch) {
      for (const v1::Trial& t : leased) {
        v1::ReportProgressRequest req = testing::ProgressOf(w, t);
        for (int s = 1; s <= 5; ++s) {
          v1::MetricPoint* p = testing::AddPoint(req, batch * 5 + s);
          p->set_train_loss(loss);
          if (s == 5 && loss > 0) p->set_val_loss(loss);  // only store a carries evaluations
        }
        auto r = store->ReportProgress(req, kT0);
        EXPECT_TRUE(r.ok()) << r.status();
      }
    }
  };
  std::thread ta(report, a.get(), 1.0), tb(report, b.get(), -1.0);
  ta.join();
  tb.join();
  auto conn = Connect(conninfo);
  ASSERT_NE(conn, nullptr);
  auto rows = conn->Exec(
      "SELECT count(*), count(DISTINCT (trial_id, step)), count(val_loss),"
      " count(*) FILTER (WHERE train_loss NOT IN (1, -1)) FROM trial_metrics");
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->GetInt64(0, 0), 4 * kBatches * 5);
  EXPECT_EQ(rows->GetInt64(0, 1), 4 * kBatches * 5);
  EXPECT_EQ(rows->GetInt64(0, 2), 4 * kBatches);  // filled in whichever batch came second
  EXPECT_EQ(rows->GetInt64(0, 3), 0);
  // Whichever store came second wrote only what the first lacked: a step's
  // evaluation, one row each in trial_metric_late, never a training figure.
  auto late = conn->Exec("SELECT count(*), count(train_loss) FROM trial_metric_late");
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_LE(late->GetInt64(0, 0), 4 * kBatches);
  EXPECT_EQ(late->GetInt64(0, 1), 0);
  for (const v1::Trial& t : leased) {
    auto stored = a->GetTrial(t.id());
    ASSERT_TRUE(stored.ok());
    EXPECT_EQ(stored->last_step(), kBatches * 5);
  }
}

// How 0005_metric_batches.sql stores progress: a batch's new steps as one
// row of arrays, the rest (an evaluation that missed its step's batch, a
// re-sent batch) step by step with only what the batches lack.
TEST(MetricStorageTest, NewStepsBecomeOneRowAndOnlyTheRestGoesStepByStep) {
  LeasedStore s;
  ASSERT_NO_FATAL_FAILURE(OpenLeasedStore("storage", 1, absl::Minutes(1), &s));
  const std::string& conninfo = s.conninfo;
  Store* store = s.store.get();
  const int64_t w = s.worker;
  const v1::Trial t = s.trials[0];
  auto send = [&](int first, int last, int eval_step) {
    v1::ReportProgressRequest req = testing::ProgressOf(w, t);
    for (int step = first; step <= last; ++step) {
      v1::MetricPoint* p = testing::AddPoint(req, step);
      if (step != eval_step) p->set_train_loss(step);
      if (step == eval_step) p->set_val_loss(100 + step);
    }
    ASSERT_TRUE(store->ReportProgress(req, kT0).ok());
  };
  send(1, 10, -1);
  send(10, 20, 10);  // step 10's evaluation, then new steps
  send(1, 10, -1);   // re-sent: nothing to add
  auto conn = Connect(conninfo);
  ASSERT_NE(conn, nullptr);
  auto batches = conn->Exec("SELECT first_step, last_step FROM trial_metric_batches ORDER BY first_step");
  ASSERT_TRUE(batches.ok()) << batches.status();
  ASSERT_EQ(batches->rows(), 2);
  EXPECT_EQ(batches->GetInt64(0, 0), 1);
  EXPECT_EQ(batches->GetInt64(0, 1), 10);
  EXPECT_EQ(batches->GetInt64(1, 0), 11);
  EXPECT_EQ(batches->GetInt64(1, 1), 20);
  auto late = conn->Exec("SELECT step, train_loss IS NULL, val_loss FROM trial_metric_late");
  ASSERT_TRUE(late.ok()) << late.status();
  ASSERT_EQ(late->rows(), 1);
  EXPECT_EQ(late->GetInt64(0, 0), 10);
  EXPECT_TRUE(late->GetBool(0, 1));
  EXPECT_DOUBLE_EQ(late->GetDouble(0, 2), 110);
  auto view = conn->Exec("SELECT count(*), count(val_loss), sum(train_loss) FROM trial_metrics");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->GetInt64(0, 0), 20);
  EXPECT_EQ(view->GetInt64(0, 1), 1);
  EXPECT_DOUBLE_EQ(view->GetDouble(0, 2), 210);  // 1 + ... + 20, each step once
}

// Issue 16's figures as typed columns that plain SQL reads by trial, step and
// layer: layer_diagnostics, trial_metrics.output_log_z (its step-0 row holds
// l0) and trials.init_val_loss; batches stored before migration 0011 have no
// output_log_z array and still read.
TEST(DiagnosticsStorageTest, TypedColumnsQueryableByTrialStepAndLayer) {
  LeasedStore s;
  ASSERT_NO_FATAL_FAILURE(OpenLeasedStore("diagnostics", 2, absl::Minutes(1), &s));
  const std::string& conninfo = s.conninfo;
  Store* store = s.store.get();
  const int64_t w = s.worker;
  const std::vector<v1::Trial>& trials = s.trials;
  // Trial 0: evaluations at steps 0, 10, 20 of 3 blocks; block l's logit at
  // step s is 10 * trial + l + s / 10, its fc2 ratio (s + l) / 1000.
  for (int k = 0; k < 2; ++k) {
    const v1::Trial& t = trials[k];
    v1::ReportProgressRequest req = testing::ProgressOf(w, t);
    for (int step = 0; step <= 20; ++step) {
      v1::MetricPoint* p = testing::AddPoint(req, step);
      if (step > 0) p->set_train_loss(6.0 - 0.1 * step);
      if (step % 10 == 0) {
        p->set_val_loss(step == 0 ? 5.5 + k : 5.0 - 0.1 * step);
        p->set_output_log_z(5.0 + k - step / 100.0);
        v1::StepDiagnostics* d = req.add_diagnostics();
        d->set_step(step);
        for (int layer = 0; layer < 3; ++layer) {
          v1::LayerDiagnostics* l = d->add_layers();
          l->set_layer(layer);
          l->set_max_attn_logit(10.0 * k + layer + step / 10.0);
          if (step > 0) l->set_update_ratio_fc2((step + layer) / 1000.0);
        }
      }
    }
    ASSERT_TRUE(store->ReportProgress(req, kT0).ok());
    ASSERT_TRUE(store->ReportProgress(req, kT0).ok());  // re-sent: stored once
    v1::FinishTrialRequest f = testing::FinishOf(w, t, v1::TRIAL_SUCCEEDED);
    f.mutable_result()->set_final_val_loss(3.0);
    if (k == 0) f.mutable_result()->set_init_val_loss(5.5);
    ASSERT_TRUE(store->FinishTrial(f, kT0).ok());
  }
  auto conn = Connect(conninfo);
  ASSERT_NE(conn, nullptr);
  const std::string t0 = absl::StrCat(trials[0].id()), t1 = absl::StrCat(trials[1].id());
  auto types = conn->Exec(
      "SELECT pg_typeof(step)::text, pg_typeof(layer)::text, pg_typeof(max_attn_logit)::text,"
      " pg_typeof(update_ratio_fc2)::text FROM layer_diagnostics LIMIT 1");
  ASSERT_TRUE(types.ok()) << types.status();
  EXPECT_EQ(types->GetString(0, 0), "integer");
  EXPECT_EQ(types->GetString(0, 1), "integer");
  EXPECT_EQ(types->GetString(0, 2), "double precision");
  EXPECT_EQ(types->GetString(0, 3), "double precision");
  auto counts = conn->Exec("SELECT count(*), count(DISTINCT (trial_id, step, layer)), count(update_ratio_fc2)"
                           " FROM layer_diagnostics");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->GetInt64(0, 0), 18);  // 2 trials x 3 steps x 3 blocks, each once
  EXPECT_EQ(counts->GetInt64(0, 1), 18);
  EXPECT_EQ(counts->GetInt64(0, 2), 12);  // none at step 0
  auto one = conn->Exec("SELECT max_attn_logit, update_ratio_fc2, update_ratio_qkv IS NULL FROM layer_diagnostics"
                        " WHERE trial_id = $1 AND step = $2 AND layer = $3",
                        PgParams().Add(trials[1].id()).Add(int64_t{20}).Add(int64_t{2}));
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->rows(), 1);
  EXPECT_DOUBLE_EQ(one->GetDouble(0, 0), 14.0);
  EXPECT_DOUBLE_EQ(one->GetDouble(0, 1), 0.022);
  EXPECT_TRUE(one->GetBool(0, 2));
  // The worst block per step of trial 0, as a dashboard asks it.
  auto worst = conn->Exec("SELECT step, max(max_attn_logit) FROM layer_diagnostics WHERE trial_id = $1"
                          " GROUP BY step ORDER BY step", PgParams().Add(trials[0].id()));
  ASSERT_TRUE(worst.ok()) << worst.status();
  ASSERT_EQ(worst->rows(), 3);
  EXPECT_EQ(worst->GetInt64(2, 0), 20);
  EXPECT_DOUBLE_EQ(worst->GetDouble(2, 1), 4.0);
  // l0: trials.init_val_loss where FinishTrial said it, and the step-0 row.
  auto l0 = conn->Exec("SELECT t.id, t.init_val_loss, m.val_loss, m.output_log_z, m.train_loss IS NULL"
                       " FROM trials t JOIN trial_metrics m ON m.trial_id = t.id AND m.step = 0 ORDER BY t.id");
  ASSERT_TRUE(l0.ok()) << l0.status();
  ASSERT_EQ(l0->rows(), 2);
  EXPECT_EQ(absl::StrCat(l0->GetInt64(0, 0)), t0);
  EXPECT_DOUBLE_EQ(l0->GetDouble(0, 1), 5.5);
  EXPECT_DOUBLE_EQ(l0->GetDouble(0, 2), 5.5);
  EXPECT_DOUBLE_EQ(l0->GetDouble(0, 3), 5.0);
  EXPECT_TRUE(l0->GetBool(0, 4));
  EXPECT_TRUE(l0->IsNull(1, 1));  // trial 1 finished without it
  EXPECT_DOUBLE_EQ(l0->GetDouble(1, 2), 6.5);
  auto log_z = conn->Exec("SELECT count(output_log_z), pg_typeof(min(output_log_z))::text FROM trial_metrics");
  ASSERT_TRUE(log_z.ok()) << log_z.status();
  EXPECT_EQ(log_z->GetInt64(0, 0), 6);
  EXPECT_EQ(log_z->GetString(0, 1), "double precision");

  // A batch stored before 0011 has no output_log_z array: its steps still
  // read, with NULL there.
  ASSERT_TRUE(conn->Exec("UPDATE trial_metric_batches SET output_log_z = NULL WHERE trial_id = $1",
                         PgParams().Add(trials[1].id())).ok());
  auto before = conn->Exec("SELECT count(*), count(output_log_z), count(train_loss) FROM trial_metrics"
                           " WHERE trial_id = $1", PgParams().Add(trials[1].id()));
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->GetInt64(0, 0), 21);
  EXPECT_EQ(before->GetInt64(0, 1), 1);  // only step 0's (trial_metric_late)
  EXPECT_EQ(before->GetInt64(0, 2), 20);
}

}  // namespace
}  // namespace normsweep::db
