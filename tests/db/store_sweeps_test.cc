// Sweeps and their trials in both stores (store_fixture.h): creation and
// its request id, unknown ids, the leasing order (priority, age,
// max_concurrent_trials), cancelling, finishing, listing pages and filters,
// change numbers and the stats.
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "db/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/requests.h"
#include "tests/db/store_fixture.h"

namespace normsweep::db {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using StoreSweepsTest = StoreTest;

TEST_P(StoreSweepsTest, CreatesSweepWithPendingTrials) {
  v1::Sweep sweep = Create("s", 4);
  EXPECT_GT(sweep.id(), 0);
  EXPECT_EQ(sweep.state(), v1::SWEEP_RUNNING);
  EXPECT_EQ(sweep.trial_count(), 4);
  EXPECT_EQ(sweep.counts().pending(), 4);
  EXPECT_EQ(sweep.spec().seeds_size(), 4);
  auto trials = store_->ListTrials(sweep.id(), v1::TRIAL_STATE_UNSPECIFIED, -1, 100);
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 4u);
  const v1::Trial& t = (*trials)[1];
  EXPECT_EQ(t.index(), 1);
  EXPECT_EQ(t.state(), v1::TRIAL_PENDING);
  EXPECT_EQ(t.config().placement(), "pre");
  EXPECT_DOUBLE_EQ(t.config().lr(), 2e-3);
  EXPECT_EQ(t.config().warmup_steps(), 100);
  EXPECT_EQ(t.config().d_model(), 64);
  EXPECT_EQ((*trials)[0].variant(), "layers=12");
  EXPECT_EQ(t.attempts(), 0);
  EXPECT_EQ(absl::FromUnixSeconds(t.created_at().seconds()), kT0);
}

TEST_P(StoreSweepsTest, RequestIdMakesCreateIdempotent) {
  auto a = store_->CreateSweep("req-1", Spec("s", 3), Trials(3), kT0);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->created);
  auto b = store_->CreateSweep("req-1", Spec("s", 3), Trials(3), kT0 + absl::Seconds(5));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(b->created);
  EXPECT_EQ(b->sweep.id(), a->sweep.id());
  EXPECT_EQ(b->sweep.request_id(), "req-1");
  auto c = store_->CreateSweep("req-1", Spec("other", 2), Trials(2), kT0);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kAlreadyExists);
  auto all = store_->ListSweeps(v1::SWEEP_STATE_UNSPECIFIED, 0, 100);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].trial_count(), 3);
}

TEST_P(StoreSweepsTest, UnknownIdsAreNotFoundAndNamed) {
  auto s = store_->GetSweep(999);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("sweep_id 999"));
  EXPECT_EQ(store_->CancelSweep(999, kT0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->ListTrials(999, v1::TRIAL_STATE_UNSPECIFIED, -1, 10).status().code(),
            absl::StatusCode::kNotFound);
  auto t = store_->GetTrial(12345);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("trial_id 12345"));
  EXPECT_EQ(store_->GetTrialHistory(12345).status().code(), absl::StatusCode::kNotFound);
  auto l = store_->LeaseTrial(777, kT0, kLease);
  EXPECT_EQ(l.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(l.status().message()), HasSubstr("worker_id 777"));
  EXPECT_EQ(store_->Heartbeat(777, {}, kT0, kLease).status().code(), absl::StatusCode::kNotFound);
}

TEST_P(StoreSweepsTest, LeasesByPriorityThenAge) {
  v1::Sweep low = Create("low", 2, /*priority=*/0);
  v1::Sweep high = Create("high", 2, /*priority=*/5);
  int64_t w = Worker();
  std::vector<std::pair<int64_t, int>> order;
  for (int i = 0; i < 4; ++i) {
    v1::Trial t = Lease(w);
    order.emplace_back(t.sweep_id(), t.index());
    EXPECT_EQ(t.state(), v1::TRIAL_RUNNING);
    EXPECT_EQ(t.attempts(), 1);
    EXPECT_EQ(t.worker_id(), w);
  }
  EXPECT_THAT(order, ElementsAre(std::pair<int64_t, int>{high.id(), 0}, std::pair<int64_t, int>{high.id(), 1},
                                 std::pair<int64_t, int>{low.id(), 0}, std::pair<int64_t, int>{low.id(), 1}));
  auto none = store_->LeaseTrial(w, kT0, kLease);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST_P(StoreSweepsTest, RespectsMaxConcurrentTrials) {
  v1::Sweep limited = Create("limited", 5, /*priority=*/10, 3, /*max_concurrent=*/2);
  v1::Sweep other = Create("other", 1, /*priority=*/0);
  int64_t w = Worker();
  v1::Trial a = Lease(w);
  v1::Trial b = Lease(w);
  EXPECT_EQ(a.sweep_id(), limited.id());
  EXPECT_EQ(b.sweep_id(), limited.id());
  v1::Trial c = Lease(w);  // limited is full: the lower-priority sweep's trial
  EXPECT_EQ(c.sweep_id(), other.id());
  auto none = store_->LeaseTrial(w, kT0, kLease);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(Finish(w, a, v1::TRIAL_SUCCEEDED).ok());
  v1::Trial d = Lease(w);
  EXPECT_EQ(d.sweep_id(), limited.id());
  EXPECT_EQ(d.index(), 2);
}

TEST_P(StoreSweepsTest, CancelStopsLeasingAndTellsRunningTrials) {
  v1::Sweep sweep = Create("s", 3);
  int64_t w = Worker();
  v1::Trial running = Lease(w);
  int taken = -1;
  auto cancelled = store_->CancelSweep(sweep.id(), kT0 + absl::Seconds(1), "", &taken);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(taken, 2) << "the two pending trials";
  EXPECT_EQ(cancelled->state(), v1::SWEEP_CANCELLED);
  EXPECT_EQ(cancelled->counts().cancelled(), 2);
  EXPECT_EQ(cancelled->counts().running(), 1);
  auto none = store_->LeaseTrial(w, kT0, kLease);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  v1::TrialLease lease;
  lease.set_trial_id(running.id());
  lease.set_attempt(running.attempts());
  auto hb = store_->Heartbeat(w, {lease}, kT0 + absl::Seconds(2), kLease);
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_THAT(hb->cancelled_trial_ids, ElementsAre(running.id()));
  EXPECT_THAT(hb->lost_trial_ids, IsEmpty());

  v1::ReportProgressRequest progress = testing::ProgressOf(w, running);
  progress.add_points()->set_step(1);
  auto p = store_->ReportProgress(progress, kT0);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->cancel_requested);

  ASSERT_TRUE(Finish(w, running, v1::TRIAL_CANCELLED).ok());
  auto after = store_->GetSweep(sweep.id());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state(), v1::SWEEP_CANCELLED);
  EXPECT_EQ(after->counts().cancelled(), 3);
  // Cancelling again changes nothing.
  auto again = store_->CancelSweep(sweep.id(), kT0 + absl::Seconds(9), "", &taken);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(taken, 0);
  EXPECT_EQ(again->finished_at().seconds(), after->finished_at().seconds());
}

TEST_P(StoreSweepsTest, FinishIsIdempotentAndCompletesTheSweep) {
  v1::Sweep sweep = Create("s", 2);
  int64_t w = Worker();
  v1::Trial a = Lease(w);
  v1::Trial b = Lease(w);
  auto fa = Finish(w, a, v1::TRIAL_SUCCEEDED);
  ASSERT_TRUE(fa.ok()) << fa.status();
  EXPECT_EQ(fa->state(), v1::TRIAL_SUCCEEDED);
  EXPECT_DOUBLE_EQ(fa->result().final_val_loss(), 2.5);
  EXPECT_FALSE(fa->has_lease_expires_at());
  bool finished_now = true;
  v1::FinishTrialRequest resend = testing::FinishOf(w, a, v1::TRIAL_SUCCEEDED);
  ASSERT_TRUE(store_->FinishTrial(resend, kT0, &finished_now).ok());  // re-sent
  EXPECT_FALSE(finished_now);
  EXPECT_EQ(Finish(w, a, v1::TRIAL_DIVERGED).status().code(), absl::StatusCode::kFailedPrecondition);
  int64_t other = Worker("other");
  EXPECT_EQ(Finish(other, b, v1::TRIAL_SUCCEEDED).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->GetSweep(sweep.id())->state(), v1::SWEEP_RUNNING);
  v1::FinishTrialRequest diverged = testing::FinishOf(w, b, v1::TRIAL_DIVERGED);
  diverged.mutable_result()->set_diverged_step(17);
  diverged.mutable_result()->set_final_train_loss(std::numeric_limits<double>::infinity());
  auto fb = store_->FinishTrial(diverged, kT0 + absl::Seconds(3));
  ASSERT_TRUE(fb.ok()) << fb.status();
  EXPECT_EQ(fb->result().diverged_step(), 17);
  EXPECT_TRUE(std::isinf(fb->result().final_train_loss()));
  EXPECT_FALSE(fb->result().has_final_val_loss());
  auto s = store_->GetSweep(sweep.id());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->state(), v1::SWEEP_COMPLETED);
  EXPECT_EQ(s->counts().succeeded(), 1);
  EXPECT_EQ(s->counts().diverged(), 1);
  EXPECT_EQ(s->finished_at().seconds(), absl::ToUnixSeconds(kT0 + absl::Seconds(3)));
}

TEST_P(StoreSweepsTest, ListsPageAndFilter) {
  v1::Sweep a = Create("a", 5);
  v1::Sweep b = Create("b", 1);
  v1::Sweep c = Create("c", 1);
  ASSERT_TRUE(store_->CancelSweep(b.id(), kT0).ok());
  auto page = store_->ListSweeps(v1::SWEEP_STATE_UNSPECIFIED, 0, 2);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].id(), c.id());
  EXPECT_EQ((*page)[1].id(), b.id());
  auto rest = store_->ListSweeps(v1::SWEEP_STATE_UNSPECIFIED, b.id(), 2);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->size(), 1u);
  EXPECT_EQ((*rest)[0].id(), a.id());
  EXPECT_EQ((*rest)[0].counts().pending(), 5);
  auto cancelled = store_->ListSweeps(v1::SWEEP_CANCELLED, 0, 10);
  ASSERT_TRUE(cancelled.ok());
  ASSERT_EQ(cancelled->size(), 1u);
  EXPECT_EQ((*cancelled)[0].id(), b.id());

  int64_t w = Worker();
  Lease(w);  // a's trial 0
  auto trials = store_->ListTrials(a.id(), v1::TRIAL_STATE_UNSPECIFIED, 1, 2);
  ASSERT_TRUE(trials.ok());
  ASSERT_EQ(trials->size(), 2u);
  EXPECT_EQ((*trials)[0].index(), 2);
  auto running = store_->ListTrials(a.id(), v1::TRIAL_RUNNING, -1, 10);
  ASSERT_TRUE(running.ok());
  ASSERT_EQ(running->size(), 1u);
  EXPECT_EQ((*running)[0].index(), 0);
}

TEST_P(StoreSweepsTest, ChangeNumbersOnlyGrow) {
  v1::Sweep s = Create("s", 3);
  auto all = store_->TrialsChangedSince(s.id(), 0);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  int64_t high = 0;
  for (const auto& [t, seq] : *all) high = std::max(high, seq);
  auto none = store_->TrialsChangedSince(s.id(), high);
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(*none, IsEmpty());
  int64_t w = Worker();
  v1::Trial t = Lease(w);
  auto changed = store_->TrialsChangedSince(s.id(), high);
  ASSERT_TRUE(changed.ok());
  ASSERT_EQ(changed->size(), 1u);
  EXPECT_EQ((*changed)[0].first.id(), t.id());
  EXPECT_GT((*changed)[0].second, high);
  EXPECT_EQ(store_->TrialsChangedSince(999, 0).status().code(), absl::StatusCode::kNotFound);
}

TEST_P(StoreSweepsTest, StatsCountTrialsSweepsAndWorkers) {
  Create("a", 3);
  v1::Sweep b = Create("b", 1);
  ASSERT_TRUE(store_->CancelSweep(b.id(), kT0).ok());
  int64_t w = Worker();
  v1::Trial t = Lease(w);
  ASSERT_TRUE(Finish(w, t, v1::TRIAL_SUCCEEDED).ok());
  Lease(w);
  auto stats = store_->Stats(kT0);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->trials.pending(), 1);
  EXPECT_EQ(stats->trials.running(), 1);
  EXPECT_EQ(stats->trials.succeeded(), 1);
  EXPECT_EQ(stats->trials.cancelled(), 1);
  EXPECT_EQ(stats->sweeps_running, 1);
  EXPECT_EQ(stats->sweeps_cancelled, 1);
  EXPECT_EQ(stats->live_workers, 1);
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreSweepsTest, testing::BothStores(), testing::StoreKindName);

}  // namespace
}  // namespace normsweep::db
