// Progress in both stores (store_fixture.h): metric points, gradient norms,
// log Z and per-layer diagnostics stored once per step whatever the order,
// overlap or repetition of the batches, the first value of each figure kept;
// the initial loss of a finished trial; a retried trial's history started
// afresh; many senders at once.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "db/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/metric_points.h"
#include "tests/common/requests.h"
#include "tests/db/store_fixture.h"

namespace normsweep::db {
namespace {

using ::testing::IsEmpty;

class StoreProgressTest : public StoreTest {
 protected:
  // One trial leased, its progress stored, the lease expired and the trial
  // leased again: the new attempt starts with no history.
  void RetryStartsAfresh(int max_concurrent);
};

TEST_P(StoreProgressTest, ProgressIsIdempotentPerStepAndMergesEvalPoints) {
  Create("s", 1);
  int64_t w = Worker();
  v1::Trial t = Lease(w);
  v1::ReportProgressRequest req = testing::ProgressOf(w, t);
  for (int step = 1; step <= 3; ++step) {
    v1::MetricPoint* p = testing::AddPoint(req, step);
    p->set_lr(1e-4 * step);
    p->set_train_loss(step == 3 ? std::nan("") : 5.0 - step);
    p->set_grad_norm(1.5);
  }
  v1::LayerGradNorms* g = req.add_layer_grad_norms();
  g->set_step(0);
  for (int layer = 0; layer < 2; ++layer) {
    for (const char* m : {"ffn.fc1", "ffn.fc2"}) {
      testing::AddNorm(g, layer, m, 0.5 + layer);
    }
  }
  *g->add_norms() = g->norms(0);  // the same norm twice in one batch
  v1::MetricPoint* again = testing::AddPoint(req, 1);  // step 1 twice in one batch: merged, first value wins
  again->set_train_loss(77);
  again->set_tokens_per_s(5000);
  ASSERT_TRUE(store_->ReportProgress(req, kT0).ok());
  ASSERT_TRUE(store_->ReportProgress(req, kT0).ok());  // re-sent: no duplicates
  v1::ReportProgressRequest eval = req;                // the evaluation of step 2, later
  eval.clear_points();
  eval.clear_layer_grad_norms();
  v1::MetricPoint* e = testing::AddPoint(eval, 2);
  e->set_val_loss(3.25);
  e->set_train_loss(99);  // already stored: kept as first sent
  ASSERT_TRUE(store_->ReportProgress(eval, kT0).ok());

  auto h = store_->GetTrialHistory(t.id());
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->metrics.size(), 3u);
  EXPECT_EQ(h->metrics[0].step(), 1);
  EXPECT_DOUBLE_EQ(h->metrics[0].train_loss(), 4.0);
  EXPECT_DOUBLE_EQ(h->metrics[0].tokens_per_s(), 5000);
  EXPECT_FALSE(h->metrics[0].has_val_loss());
  EXPECT_DOUBLE_EQ(h->metrics[1].train_loss(), 3.0);
  EXPECT_DOUBLE_EQ(h->metrics[1].val_loss(), 3.25);
  EXPECT_TRUE(std::isnan(h->metrics[2].train_loss()));
  EXPECT_DOUBLE_EQ(h->metrics[2].lr(), 3e-4);
  ASSERT_EQ(h->layer_grad_norms.size(), 1u);
  EXPECT_EQ(h->layer_grad_norms[0].step(), 0);
  ASSERT_EQ(h->layer_grad_norms[0].norms_size(), 4);
  EXPECT_EQ(h->layer_grad_norms[0].norms(3).layer(), 1);
  EXPECT_EQ(h->layer_grad_norms[0].norms(3).matrix(), "ffn.fc2");
  EXPECT_DOUBLE_EQ(h->layer_grad_norms[0].norms(3).norm(), 1.5);
  auto trial = store_->GetTrial(t.id());
  ASSERT_TRUE(trial.ok());
  EXPECT_EQ(trial->last_step(), 3);
  EXPECT_TRUE(std::isnan(trial->last_train_loss()));
}

// One block's diagnostics at one step (issue 16): logit, and the update
// ratios after step 0.
v1::LayerDiagnostics Diag(int step, int layer, double offset = 0) {
  v1::LayerDiagnostics l;
  l.set_layer(layer);
  l.set_max_attn_logit(2.0 + layer + step / 100.0 + offset);
  if (step > 0) {
    l.set_update_ratio_qkv(0.001 * (layer + 1) + offset);
    l.set_update_ratio_proj(0.002 * (layer + 1) + offset);
    l.set_update_ratio_fc1(0.003 * (layer + 1) + offset);
    l.set_update_ratio_fc2(0.004 * (layer + 1) + offset);
  }
  return l;
}

TEST_P(StoreProgressTest, StepZeroLogZAndDiagnosticsAreStoredOnceFirstValueKept) {
  Create("s", 1);
  int64_t w = Worker();
  v1::Trial t = Lease(w);
  // What a worker sends first: the evaluation before the first update.
  v1::ReportProgressRequest zero = testing::ProgressOf(w, t);
  v1::MetricPoint* l0 = testing::AddPoint(zero, 0);
  l0->set_val_loss(5.5);
  l0->set_output_log_z(5.25);
  v1::StepDiagnostics* d0 = zero.add_diagnostics();
  d0->set_step(0);
  for (int layer : {0, 1}) *d0->add_layers() = Diag(0, layer);
  *d0->add_layers() = Diag(0, 1, 100);  // block 1 twice in one batch: the first is kept
  ASSERT_TRUE(store_->ReportProgress(zero, kT0).ok());
  auto trial = store_->GetTrial(t.id());
  ASSERT_TRUE(trial.ok());
  EXPECT_EQ(trial->last_step(), 0);
  EXPECT_DOUBLE_EQ(trial->last_val_loss(), 5.5);

  v1::ReportProgressRequest later = zero;  // steps 1..10, step 10 evaluated; step 0 re-sent
  later.mutable_points(0)->set_output_log_z(77);  // already stored: kept as first sent
  for (int step = 1; step <= 10; ++step) {
    v1::MetricPoint* p = testing::AddPoint(later, step);
    p->set_train_loss(5.0 - 0.1 * step);
    if (step == 10) {
      p->set_val_loss(4.0);
      p->set_output_log_z(4.5);
    }
  }
  v1::StepDiagnostics* d10 = later.add_diagnostics();
  d10->set_step(10);
  for (int layer : {1, 0}) *d10->add_layers() = Diag(10, layer);
  later.mutable_diagnostics(0)->mutable_layers(0)->set_max_attn_logit(99);  // step 0 re-sent, changed: kept
  ASSERT_TRUE(store_->ReportProgress(later, kT0).ok());
  ASSERT_TRUE(store_->ReportProgress(later, kT0).ok());  // re-sent whole: nothing twice
  v1::ReportProgressRequest late = zero;  // step 5's log Z alone, after its step was stored
  late.clear_diagnostics();
  late.mutable_points(0)->Clear();
  late.mutable_points(0)->set_step(5);
  late.mutable_points(0)->set_output_log_z(4.75);
  ASSERT_TRUE(store_->ReportProgress(late, kT0).ok());

  auto h = store_->GetTrialHistory(t.id());
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->metrics.size(), 11u);
  EXPECT_EQ(h->metrics[0].step(), 0);
  EXPECT_DOUBLE_EQ(h->metrics[0].val_loss(), 5.5);
  EXPECT_DOUBLE_EQ(h->metrics[0].output_log_z(), 5.25);
  EXPECT_FALSE(h->metrics[0].has_train_loss());
  EXPECT_DOUBLE_EQ(h->metrics[5].output_log_z(), 4.75);
  EXPECT_DOUBLE_EQ(h->metrics[5].train_loss(), 4.5);
  EXPECT_FALSE(h->metrics[4].has_output_log_z());
  EXPECT_DOUBLE_EQ(h->metrics[10].output_log_z(), 4.5);
  ASSERT_EQ(h->diagnostics.size(), 2u);  // by step, then layer
  EXPECT_EQ(h->diagnostics[0].step(), 0);
  EXPECT_EQ(h->diagnostics[1].step(), 10);
  for (const v1::StepDiagnostics& d : h->diagnostics) {
    ASSERT_EQ(d.layers_size(), 2) << "step " << d.step();
    for (int layer = 0; layer < 2; ++layer) {
      v1::LayerDiagnostics want = Diag(d.step(), layer);
      EXPECT_EQ(d.layers(layer).SerializeAsString(), want.SerializeAsString())
          << "step " << d.step() << ": " << d.layers(layer).ShortDebugString();
    }
  }
  EXPECT_FALSE(h->diagnostics[0].layers(0).has_update_ratio_qkv());
  trial = store_->GetTrial(t.id());
  ASSERT_TRUE(trial.ok());
  EXPECT_EQ(trial->last_step(), 10);
  EXPECT_DOUBLE_EQ(trial->last_val_loss(), 4.0);
}

TEST_P(StoreProgressTest, FinishKeepsTheInitialLoss) {
  Create("s", 2);
  int64_t w = Worker();
  v1::Trial a = Lease(w);
  v1::Trial b = Lease(w);
  v1::FinishTrialRequest req = testing::FinishOf(w, a, v1::TRIAL_DIVERGED);
  req.mutable_result()->set_init_val_loss(5.625);
  req.mutable_result()->set_diverged_step(17);
  auto fa = store_->FinishTrial(req, kT0);
  ASSERT_TRUE(fa.ok()) << fa.status();
  EXPECT_DOUBLE_EQ(fa->result().init_val_loss(), 5.625);
  EXPECT_FALSE(fa->result().has_final_val_loss());
  ASSERT_TRUE(store_->FinishTrial(req, kT0).ok());  // re-sent
  auto fb = Finish(w, b, v1::TRIAL_SUCCEEDED);      // without l0
  ASSERT_TRUE(fb.ok()) << fb.status();
  EXPECT_FALSE(fb->result().has_init_val_loss());
  auto got = store_->GetTrial(a.id());
  ASSERT_TRUE(got.ok());
  EXPECT_DOUBLE_EQ(got->result().init_val_loss(), 5.625);
  EXPECT_EQ(got->result().diverged_step(), 17);
  auto listed = store_->ListTrials(a.sweep_id(), v1::TRIAL_STATE_UNSPECIFIED, -1, 10);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_DOUBLE_EQ((*listed)[a.index()].result().init_val_loss(), 5.625);
  EXPECT_FALSE((*listed)[b.index()].result().has_init_val_loss());
}

TEST_P(StoreProgressTest, ProgressOutOfOrderAndOverlappingBatchesKeepEachStepOnce) {
  Create("s", 1);
  int64_t w = Worker();
  v1::Trial t = Lease(w);
  auto batch = [&](int first, int last, double train_loss, std::vector<int> evals) {
    v1::ReportProgressRequest req = testing::ProgressOf(w, t);
    for (int step = last; step >= first; --step) {  // any order within a batch
      v1::MetricPoint* p = testing::AddPoint(req, step);
      p->set_train_loss(train_loss + step);
      if (std::find(evals.begin(), evals.end(), step) != evals.end()) p->set_val_loss(100 + step);
    }
    auto r = store_->ReportProgress(req, kT0);
    EXPECT_TRUE(r.ok()) << r.status();
  };
  batch(11, 20, 0, {20});
  batch(1, 10, 0, {});       // arrives after the later batch
  batch(8, 13, 50, {9, 12, 20});  // overlaps both: fills the evaluations of 9 and 12 only
  batch(11, 20, 0, {20});    // re-sent
  batch(21, 22, 0, {});
  auto h = store_->GetTrialHistory(t.id());
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->metrics.size(), 22u);
  for (int i = 0; i < 22; ++i) {
    const v1::MetricPoint& p = h->metrics[i];
    EXPECT_EQ(p.step(), i + 1);
    EXPECT_DOUBLE_EQ(p.train_loss(), i + 1) << "step " << p.step();  // the first value sent
    const bool eval = p.step() == 9 || p.step() == 12 || p.step() == 20;
    EXPECT_EQ(p.has_val_loss(), eval) << "step " << p.step();
    if (eval) {
      EXPECT_DOUBLE_EQ(p.val_loss(), 100 + p.step());
    }
  }
  auto trial = store_->GetTrial(t.id());
  ASSERT_TRUE(trial.ok());
  EXPECT_EQ(trial->last_step(), 22);
}

TEST_P(StoreProgressTest, RetriedTrialStartsItsHistoryAfresh) {
  // Leases of sweeps with max_concurrent_trials take another path.
  for (int max_concurrent : {0, 1}) {
    SCOPED_TRACE(absl::StrCat("max_concurrent_trials ", max_concurrent));
    RetryStartsAfresh(max_concurrent);
    if (HasFatalFailure()) return;
  }
}

void StoreProgressTest::RetryStartsAfresh(int max_concurrent) {
  Create(absl::StrCat("s", max_concurrent), 1, 0, 3, max_concurrent);
  int64_t w = Worker(absl::StrCat("w", max_concurrent));
  v1::Trial t = Lease(w, kT0);
  v1::ReportProgressRequest req;
  req.set_worker_id(w);
  req.set_trial_id(t.id());
  req.set_attempt(1);
  req.add_points()->set_step(7);
  req.mutable_points(0)->set_train_loss(9);
  v1::LayerGradNorms* g = req.add_layer_grad_norms();
  g->set_step(0);
  testing::AddNorm(g, 0, "ffn.fc2", 1.5);
  v1::StepDiagnostics* d = req.add_diagnostics();
  d->set_step(7);
  *d->add_layers() = Diag(7, 0);
  ASSERT_TRUE(store_->ReportProgress(req, kT0).ok());
  v1::ReportProgressRequest late = req;  // step 7's evaluation, stored step by step
  late.clear_layer_grad_norms();
  late.clear_diagnostics();
  late.mutable_points(0)->clear_train_loss();
  late.mutable_points(0)->set_val_loss(8);
  ASSERT_TRUE(store_->ReportProgress(late, kT0).ok());
  ASSERT_TRUE(store_->ExpireLeases(kT0 + absl::Minutes(5)).ok());
  v1::Trial again = Lease(w, kT0 + absl::Minutes(6));
  EXPECT_EQ(again.attempts(), 2);
  EXPECT_EQ(again.last_step(), 0);
  auto h = store_->GetTrialHistory(t.id());
  ASSERT_TRUE(h.ok());
  EXPECT_THAT(h->metrics, IsEmpty());
  EXPECT_THAT(h->layer_grad_norms, IsEmpty());
  EXPECT_THAT(h->diagnostics, IsEmpty());
  // The new attempt writes the same steps afresh.
  req.set_attempt(2);
  ASSERT_TRUE(store_->ReportProgress(req, kT0 + absl::Minutes(6)).ok());
  h = store_->GetTrialHistory(t.id());
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(h->metrics.size(), 1u);
  EXPECT_EQ(h->metrics[0].train_loss(), 9);
  EXPECT_FALSE(h->metrics[0].has_val_loss());
  EXPECT_EQ(h->layer_grad_norms.size(), 1u);
  ASSERT_EQ(h->diagnostics.size(), 1u);
  EXPECT_EQ(h->diagnostics[0].layers_size(), 1);
}

TEST_P(StoreProgressTest, ConcurrentProgressReportsAreAllStoredOnce) {
  Create("progress", 12);
  int64_t w = Worker();
  std::vector<v1::Trial> trials;
  for (int i = 0; i < 12; ++i) trials.push_back(Lease(w));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  // Two senders per trial, each sending every batch (so each batch arrives twice).
  for (int s = 0; s < 24; ++s) {
    threads.emplace_back([&, s] {
      const v1::Trial& t = trials[s % 12];
      for (int b = 0; b < 5; ++b) {
        v1::ReportProgressRequest req = testing::ProgressOf(w, t);
        for (int k = 1; k <= 10; ++k) {
          v1::MetricPoint* p = testing::AddPoint(req, b * 10 + k);
          p->set_train_loss(1.0 / (b * 10 + k));
        }
        if (!store_->ReportProgress(req, kT0).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (const v1::Trial& t : trials) {
    auto h = store_->GetTrialHistory(t.id());
    ASSERT_TRUE(h.ok());
    ASSERT_EQ(h->metrics.size(), 50u);
    EXPECT_DOUBLE_EQ(h->metrics[49].train_loss(), 1.0 / 50);
    EXPECT_EQ(store_->GetTrial(t.id())->last_step(), 50);
  }
}

TEST(MergeMetricPointTest, TheFirstValueOfEachFieldWinsTheRestFillIn) {
  v1::MetricPoint into, from;
  into.set_step(7);
  into.set_train_loss(2.5);
  into.set_lr(1e-3);
  from.set_step(7);
  from.set_train_loss(9.0);  // already there: kept
  from.set_val_loss(2.75);   // missing: taken
  from.set_val_accuracy(0.5);
  from.set_grad_norm(0.0);   // zero is a value, not "empty"
  MergeMetricPoint(from, &into);
  EXPECT_EQ(into.step(), 7);
  EXPECT_EQ(into.train_loss(), 2.5);
  EXPECT_EQ(into.lr(), 1e-3);
  EXPECT_EQ(into.val_loss(), 2.75);
  EXPECT_EQ(into.val_accuracy(), 0.5);
  ASSERT_TRUE(into.has_grad_norm());
  EXPECT_EQ(into.grad_norm(), 0.0);
  EXPECT_FALSE(into.has_tokens_per_s());
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreProgressTest, testing::BothStores(), testing::StoreKindName);

}  // namespace
}  // namespace normsweep::db
