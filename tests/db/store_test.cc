// One suite, two stores: every test runs against MemoryStore and against
// PostgresStore on a throwaway PostgreSQL (a fresh database per test).
#include "db/store.h"

#include <cmath>
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/store_kinds.h"
#include "tests/common/requests.h"
#include "tests/common/test_time.h"

namespace normsweep::db {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using testing::kT0;
const absl::Duration kLease = absl::Seconds(30);

class StoreTest : public testing::BothStoresTest {
 protected:

  static v1::SweepSpec Spec(const std::string& name, int trials, int priority = 0,
                            int max_attempts = 3, int max_concurrent = 0) {
    v1::SweepSpec spec;
    spec.set_name(name);
    spec.set_priority(priority);
    spec.set_max_attempts(max_attempts);
    spec.set_max_concurrent_trials(max_concurrent);
    for (int i = 0; i < trials; ++i) spec.add_seeds(i);
    return spec;
  }

  static std::vector<NewTrial> Trials(int n) {
    std::vector<NewTrial> out;
    for (int i = 0; i < n; ++i) {
      NewTrial t;
      t.index = i;
      t.config.set_placement(i % 2 == 0 ? "post" : "pre");
      t.config.set_lr(1e-3 * (i + 1));
      t.config.set_warmup_steps(100 * i);
      t.config.set_seed(i);
      t.config.set_d_model(64);
      t.variant = i % 3 == 0 ? "layers=12" : "";
      out.push_back(t);
    }
    return out;
  }

  // max_interruptions 0: the default (the stores fill it in, as the
  // expander does).
  v1::Sweep Create(const std::string& name, int trials, int priority = 0, int max_attempts = 3,
                   int max_concurrent = 0, int max_interruptions = 0) {
    v1::SweepSpec spec = Spec(name, trials, priority, max_attempts, max_concurrent);
    spec.set_max_interruptions(max_interruptions);
    auto r = store_->CreateSweep("", spec, Trials(trials), kT0);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->sweep : v1::Sweep();
  }

  // One trial leased, its progress stored, the lease expired and the trial
  // leased again: the new attempt starts with no history.
  void RetryStartsAfresh(int max_concurrent);

  int64_t Worker(const std::string& name = "w") {
    v1::RegisterWorkerRequest req;
    req.set_name(name);
    req.set_hostname("host");
    req.add_devices("cpu");
    auto id = store_->RegisterWorker(req, kT0);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : 0;
  }

  v1::Trial Lease(int64_t worker, absl::Time now = kT0) {
    auto t = store_->LeaseTrial(worker, now, kLease);
    EXPECT_TRUE(t.ok()) << t.status();
    EXPECT_TRUE(t.ok() && t->has_value());
    return t.ok() ? t->value_or(v1::Trial()) : v1::Trial();
  }

  absl::StatusOr<v1::Trial> Finish(int64_t worker, const v1::Trial& t, v1::TrialState outcome,
                                   absl::Time now = kT0) {
    v1::FinishTrialRequest req = testing::FinishOf(worker, t, outcome);
    req.mutable_result()->set_final_val_loss(2.5);
    req.mutable_result()->set_tokens_per_s(1000);
    return store_->FinishTrial(req, now);
  }

};

TEST_P(StoreTest, CreatesSweepWithPendingTrials) {
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

TEST_P(StoreTest, RequestIdMakesCreateIdempotent) {
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

TEST_P(StoreTest, UnknownIdsAreNotFoundAndNamed) {
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

TEST_P(StoreTest, LeasesByPriorityThenAge) {
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

TEST_P(StoreTest, RespectsMaxConcurrentTrials) {
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

TEST_P(StoreTest, CancelStopsLeasingAndTellsRunningTrials) {
  v1::Sweep sweep = Create("s", 3);
  int64_t w = Worker();
  v1::Trial running = Lease(w);
  auto cancelled = store_->CancelSweep(sweep.id(), kT0 + absl::Seconds(1));
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
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
  auto again = store_->CancelSweep(sweep.id(), kT0 + absl::Seconds(9));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->finished_at().seconds(), after->finished_at().seconds());
}

// An expired lease is an interruption ("worker_lost"): it never counts
// against max_attempts, only against max_interruptions.
TEST_P(StoreTest, ExpiredLeasesAreInterruptionsUntilMaxInterruptionsThenFail) {
  v1::Sweep sweep = Create("s", 1, 0, /*max_attempts=*/1, 0, /*max_interruptions=*/2);
  EXPECT_EQ(sweep.spec().max_interruptions(), 2);
  int64_t w = Worker();
  v1::Trial first = Lease(w, kT0);
  auto e0 = store_->ExpireLeases(kT0 + kLease - absl::Seconds(1));  // not yet
  ASSERT_TRUE(e0.ok()) << e0.status();
  EXPECT_EQ(e0->requeued, 0);
  EXPECT_THAT(e0->interruptions, IsEmpty());
  auto e1 = store_->ExpireLeases(kT0 + kLease + absl::Seconds(1));
  ASSERT_TRUE(e1.ok());
  EXPECT_EQ(e1->requeued, 1);
  EXPECT_EQ(e1->interruptions, (std::map<std::string, int>{{"worker_lost", 1}}));
  auto t = store_->GetTrial(first.id());
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->state(), v1::TRIAL_PENDING);  // max_attempts 1, yet queued again
  EXPECT_EQ(t->attempts(), 1);
  EXPECT_EQ(t->interruptions(), 1);
  EXPECT_EQ(t->worker_id(), 0);

  // The old lease is dead: its progress and result are refused.
  v1::ReportProgressRequest stale;
  stale.set_worker_id(w);
  stale.set_trial_id(first.id());
  stale.set_attempt(1);
  stale.add_points()->set_step(5);
  EXPECT_EQ(store_->ReportProgress(stale, kT0).status().code(), absl::StatusCode::kFailedPrecondition);

  const absl::Time t1 = kT0 + absl::Minutes(1);
  v1::Trial second = Lease(w, t1);
  EXPECT_EQ(second.id(), first.id());
  EXPECT_EQ(second.attempts(), 2);
  EXPECT_EQ(second.interruptions(), 1);
  EXPECT_EQ(Finish(w, first, v1::TRIAL_SUCCEEDED, t1).status().code(), absl::StatusCode::kFailedPrecondition);
  auto e2 = store_->ExpireLeases(t1 + kLease + absl::Seconds(1));
  ASSERT_TRUE(e2.ok());
  EXPECT_EQ(e2->failed, 1);
  t = store_->GetTrial(first.id());
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->state(), v1::TRIAL_FAILED);
  EXPECT_EQ(t->interruptions(), 2);
  EXPECT_EQ(t->result().error(), "interrupted 2 times (max_interruptions), the last by worker_lost");
  auto s = store_->GetSweep(sweep.id());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->state(), v1::SWEEP_COMPLETED);
  EXPECT_EQ(s->counts().failed(), 1);
}

TEST_P(StoreTest, ExpiredLeasesAreInTheTrialsAttemptHistory) {
  Create("s", 1, 0, /*max_attempts=*/2);
  const int64_t w = Worker();
  const v1::Trial first = Lease(w);
  ASSERT_TRUE(store_->ExpireLeases(kT0 + kLease + absl::Seconds(1)).ok());
  const absl::Time t1 = kT0 + absl::Minutes(2);
  Lease(w, t1);
  ASSERT_TRUE(store_->ExpireLeases(t1 + kLease + absl::Seconds(1)).ok());
  auto h = store_->GetTrialHistory(first.id());
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->attempts.size(), 2u);
  EXPECT_EQ(h->attempts[0].attempt(), 1);
  EXPECT_EQ(h->attempts[0].worker_id(), w);
  EXPECT_EQ(h->attempts[0].outcome(), v1::TRIAL_PENDING);
  EXPECT_EQ(h->attempts[0].reason(), "lease expired");
  EXPECT_EQ(h->attempts[0].interruption(), "worker_lost");
  EXPECT_EQ(h->attempts[0].ended_at().seconds(), absl::ToUnixSeconds(kT0 + kLease + absl::Seconds(1)));
  EXPECT_EQ(h->attempts[1].attempt(), 2);
  EXPECT_EQ(h->attempts[1].outcome(), v1::TRIAL_PENDING);  // max_attempts 2 is not what counts them
  EXPECT_EQ(h->attempts[1].interruption(), "worker_lost");
}

// A lease that expired while the scheduler saw its database fail was lost
// to the outage, unless its worker has registered again since (restarted).
TEST_P(StoreTest, LeasesExpiredWithinAnOutageWereLostToIt) {
  Create("s", 3);
  const int64_t w1 = Worker("w1"), w2 = Worker("w2"), w3 = Worker("w3");
  const v1::Trial before = Lease(w1, kT0 - absl::Minutes(5));  // expires before the outage
  const v1::Trial during = Lease(w2, kT0);                      // expires within it
  v1::RegisterWorkerRequest again;
  again.set_name("w3");
  again.set_hostname("host");
  const v1::Trial restarted = Lease(w3, kT0);
  ASSERT_TRUE(store_->RegisterWorker(again, kT0 + absl::Seconds(10)).ok());  // w3 restarted
  const Outage outage{kT0 - absl::Seconds(5), kT0 + absl::Minutes(2)};
  auto e = store_->ExpireLeases(kT0 + absl::Minutes(3), outage);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->requeued, 3);
  EXPECT_EQ(e->interruptions, (std::map<std::string, int>{{"lease_lost", 1}, {"worker_lost", 2}}));
  for (const auto& [trial, cause] : {std::pair{before, "worker_lost"}, std::pair{during, "lease_lost"},
                                     std::pair{restarted, "worker_lost"}}) {
    auto h = store_->GetTrialHistory(trial.id());
    ASSERT_TRUE(h.ok()) << h.status();
    ASSERT_EQ(h->attempts.size(), 1u);
    EXPECT_EQ(h->attempts[0].interruption(), cause) << "trial " << trial.id();
  }
}

// A trainer the machine killed: the worker finishes the attempt with retry.
absl::StatusOr<v1::Trial> Retry(Store& store, int64_t worker, const v1::Trial& t, absl::Time now,
                                bool* finished_now = nullptr) {
  v1::FinishTrialRequest req = testing::FinishOf(worker, t, v1::TRIAL_FAILED);
  req.set_retry(true);
  req.mutable_result()->set_error("normsweep-train killed by signal 9 without a final event");
  return store.FinishTrial(req, now, finished_now);
}

TEST_P(StoreTest, RetriedFinishRequeuesUntilMaxAttemptsThenFails) {
  v1::Sweep sweep = Create("s", 1, 0, /*max_attempts=*/2);
  const int64_t w1 = Worker("w1"), w2 = Worker("w2");
  const v1::Trial first = Lease(w1);
  bool finished_now = true;
  finished_now = false;
  auto r = Retry(*store_, w1, first, kT0 + absl::Seconds(5), &finished_now);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(finished_now);  // this call ended the lease
  EXPECT_EQ(r->state(), v1::TRIAL_PENDING);
  EXPECT_EQ(r->worker_id(), 0);
  EXPECT_FALSE(r->has_lease_expires_at());
  // Re-sent: a no-op, not a second attempt.
  auto again = Retry(*store_, w1, first, kT0 + absl::Seconds(6), &finished_now);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(finished_now);
  EXPECT_EQ(again->state(), v1::TRIAL_PENDING);
  // Nothing to expire: the lease was given back.
  auto expired = store_->ExpireLeases(kT0 + absl::Hours(1));
  ASSERT_TRUE(expired.ok());
  EXPECT_EQ(expired->requeued + expired->failed, 0);

  const v1::Trial second = Lease(w2, kT0 + absl::Seconds(10));
  EXPECT_EQ(second.id(), first.id());
  EXPECT_EQ(second.attempts(), 2);
  // The first attempt's retry, re-sent late, leaves the second alone.
  ASSERT_TRUE(Retry(*store_, w1, first, kT0 + absl::Seconds(11)).ok());
  auto running = store_->GetTrial(first.id());
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(running->state(), v1::TRIAL_RUNNING);
  EXPECT_EQ(running->worker_id(), w2);
  // Another worker's or another attempt's retry is refused.
  EXPECT_EQ(Retry(*store_, w1, second, kT0).status().code(), absl::StatusCode::kFailedPrecondition);

  auto last = Retry(*store_, w2, second, kT0 + absl::Seconds(20), &finished_now);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_TRUE(finished_now);
  EXPECT_EQ(last->state(), v1::TRIAL_FAILED);
  EXPECT_EQ(last->result().error(), "normsweep-train killed by signal 9 without a final event after 2 attempts");
  EXPECT_EQ(last->finished_at().seconds(), absl::ToUnixSeconds(kT0 + absl::Seconds(20)));
  auto s = store_->GetSweep(sweep.id());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->state(), v1::SWEEP_COMPLETED);
  EXPECT_EQ(s->counts().failed(), 1);
  // Re-sent after the trial became final: still a no-op.
  auto late = Retry(*store_, w2, second, kT0 + absl::Seconds(30), &finished_now);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_FALSE(finished_now);

  auto h = store_->GetTrialHistory(first.id());
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->attempts.size(), 2u);
  EXPECT_EQ(h->attempts[0].attempt(), 1);
  EXPECT_EQ(h->attempts[0].worker_id(), w1);
  EXPECT_EQ(h->attempts[0].outcome(), v1::TRIAL_PENDING);
  EXPECT_EQ(h->attempts[0].reason(), "normsweep-train killed by signal 9 without a final event");
  EXPECT_EQ(h->attempts[0].ended_at().seconds(), absl::ToUnixSeconds(kT0 + absl::Seconds(5)));
  EXPECT_EQ(h->attempts[1].attempt(), 2);
  EXPECT_EQ(h->attempts[1].worker_id(), w2);
  EXPECT_EQ(h->attempts[1].outcome(), v1::TRIAL_FAILED);
}

TEST_P(StoreTest, RetryInACancelledSweepCancelsTheTrial) {
  v1::Sweep sweep = Create("s", 1);
  const int64_t w = Worker();
  const v1::Trial t = Lease(w);
  ASSERT_TRUE(store_->CancelSweep(sweep.id(), kT0).ok());
  bool finished_now = false;
  auto r = Retry(*store_, w, t, kT0 + absl::Seconds(1), &finished_now);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(finished_now);
  EXPECT_EQ(r->state(), v1::TRIAL_CANCELLED);
  auto s = store_->GetSweep(sweep.id());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->counts().cancelled(), 1);
  EXPECT_EQ(s->counts().running(), 0);
}

// A retry that names an interruption: the worker saw its trainer killed
// from outside, could not renew the lease, or was drained.
absl::StatusOr<v1::Trial> Interrupted(Store& store, int64_t worker, const v1::Trial& t, const std::string& cause,
                                      absl::Time now, bool* finished_now = nullptr) {
  v1::FinishTrialRequest req = testing::FinishOf(worker, t, v1::TRIAL_FAILED);
  req.set_retry(true);
  req.set_interruption(cause);
  req.mutable_result()->set_error("normsweep-train killed by signal 15 without a final event");
  return store.FinishTrial(req, now, finished_now);
}

// Interruptions and the trial's own failures are counted apart: with
// max_attempts 1, neither an expired lease nor a reported interruption
// fails the trial; its own first failure does.
TEST_P(StoreTest, InterruptionsNeverSpendTheTrialsAttempts) {
  Create("s", 1, 0, /*max_attempts=*/1, 0, /*max_interruptions=*/3);
  const int64_t w = Worker();
  const v1::Trial first = Lease(w);
  ASSERT_TRUE(store_->ExpireLeases(kT0 + kLease + absl::Seconds(1)).ok());
  const v1::Trial second = Lease(w, kT0 + absl::Minutes(1));
  bool finished_now = false;
  auto r = Interrupted(*store_, w, second, "external_signal", kT0 + absl::Minutes(1), &finished_now);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(finished_now);
  EXPECT_EQ(r->state(), v1::TRIAL_PENDING);
  EXPECT_EQ(r->interruptions(), 2);
  const v1::Trial third = Lease(w, kT0 + absl::Minutes(2));
  EXPECT_EQ(third.attempts(), 3);
  auto failed = Retry(*store_, w, third, kT0 + absl::Minutes(3));
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->state(), v1::TRIAL_FAILED);
  EXPECT_EQ(failed->interruptions(), 2);
  EXPECT_EQ(failed->result().error(), "normsweep-train killed by signal 9 without a final event after 1 attempt");
  auto h = store_->GetTrialHistory(first.id());
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->attempts.size(), 3u);
  EXPECT_EQ(h->attempts[0].interruption(), "worker_lost");
  EXPECT_EQ(h->attempts[1].interruption(), "external_signal");
  EXPECT_EQ(h->attempts[1].outcome(), v1::TRIAL_PENDING);
  EXPECT_EQ(h->attempts[2].interruption(), "");
  EXPECT_EQ(h->attempts[2].outcome(), v1::TRIAL_FAILED);
}

TEST_P(StoreTest, ReportedInterruptionsFailTheTrialAtMaxInterruptions) {
  Create("s", 1, 0, /*max_attempts=*/3, 0, /*max_interruptions=*/1);
  const int64_t w = Worker();
  const v1::Trial t = Lease(w);
  auto r = Interrupted(*store_, w, t, "worker_drained", kT0 + absl::Seconds(1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->state(), v1::TRIAL_FAILED);
  EXPECT_EQ(r->result().error(), "interrupted 1 time (max_interruptions), the last by worker_drained");
}

// The scheduler found a lease expired ("worker_lost"); the worker, back in
// touch, says why it let it go. The cause is corrected; nothing is counted
// twice, and the trial's next lease is left alone.
TEST_P(StoreTest, TheWorkerNamesTheCauseOfALeaseFoundExpired) {
  Create("s", 1);
  const int64_t w1 = Worker("w1"), w2 = Worker("w2");
  const v1::Trial first = Lease(w1);
  ASSERT_TRUE(store_->ExpireLeases(kT0 + kLease + absl::Seconds(1)).ok());
  const v1::Trial second = Lease(w2, kT0 + kLease + absl::Seconds(2));
  // A retry without an interruption does not turn it into an own failure.
  bool finished_now = true;
  ASSERT_TRUE(Retry(*store_, w1, first, kT0 + kLease + absl::Seconds(3), &finished_now).ok());
  EXPECT_FALSE(finished_now);
  auto r = Interrupted(*store_, w1, first, "scheduler_restart", kT0 + kLease + absl::Seconds(3), &finished_now);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(finished_now);
  EXPECT_EQ(r->state(), v1::TRIAL_RUNNING);
  EXPECT_EQ(r->worker_id(), w2);
  EXPECT_EQ(r->interruptions(), 1);
  auto h = store_->GetTrialHistory(first.id());
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->attempts.size(), 1u);
  EXPECT_EQ(h->attempts[0].interruption(), "scheduler_restart");
  EXPECT_EQ(h->attempts[0].reason(), "lease expired");
  // Another worker cannot rename it.
  EXPECT_EQ(Interrupted(*store_, w2, first, "lease_lost", kT0 + kLease + absl::Seconds(4)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // An own failure recorded as such keeps its word.
  auto own = Retry(*store_, w2, second, kT0 + kLease + absl::Seconds(5));
  ASSERT_TRUE(own.ok()) << own.status();
  ASSERT_TRUE(Interrupted(*store_, w2, second, "lease_lost", kT0 + kLease + absl::Seconds(6)).ok());
  h = store_->GetTrialHistory(first.id());
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->attempts.size(), 2u);
  EXPECT_EQ(h->attempts[1].interruption(), "");
}

TEST_P(StoreTest, ARestartedWorkerSupersedesItsEarlierRegistrations) {
  v1::RegisterWorkerRequest req;
  req.set_name("box");
  req.set_hostname("h1");
  auto first = store_->RegisterWorker(req, kT0);
  auto second = store_->RegisterWorker(req, kT0 + absl::Seconds(1));
  req.set_hostname("h2");  // the same name elsewhere is another worker
  auto other = store_->RegisterWorker(req, kT0 + absl::Seconds(2));
  req.set_hostname("h1");
  auto third = store_->RegisterWorker(req, kT0 + absl::Seconds(3));
  ASSERT_TRUE(first.ok() && second.ok() && other.ok() && third.ok());
  auto all = store_->ListWorkers(kT0, /*live_only=*/false);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].superseded_by(), *second);
  EXPECT_EQ((*all)[1].superseded_by(), *third);
  EXPECT_EQ((*all)[2].superseded_by(), 0);
  EXPECT_EQ((*all)[3].superseded_by(), 0);
  // Heard from recently, but restarted since: not live, not counted.
  EXPECT_FALSE((*all)[1].live());
  EXPECT_TRUE((*all)[3].live());
  auto live = store_->ListWorkers(kT0, /*live_only=*/true);
  ASSERT_TRUE(live.ok()) << live.status();
  ASSERT_EQ(live->size(), 2u);
  EXPECT_EQ((*live)[0].id(), *other);
  EXPECT_EQ((*live)[1].id(), *third);
  auto stats = store_->Stats(kT0);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->live_workers, 2);
}

TEST_P(StoreTest, ARestartedWorkersLeasesEndWhenItRegistersAgain) {
  Create("s", 2);
  v1::RegisterWorkerRequest req;
  req.set_name("box");
  req.set_hostname("h1");
  auto first = store_->RegisterWorker(req, kT0);
  ASSERT_TRUE(first.ok());
  const v1::Trial held = Lease(*first);
  const int64_t other = Worker("other");
  const v1::Trial others = Lease(other);
  const absl::Time restart = kT0 + absl::Seconds(3);  // long before the lease would expire
  auto second = store_->RegisterWorker(req, restart);
  ASSERT_TRUE(second.ok());
  auto expired = store_->ExpireLeases(restart);
  ASSERT_TRUE(expired.ok()) << expired.status();
  EXPECT_EQ(expired->requeued, 1);
  auto t = store_->GetTrial(held.id());
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->state(), v1::TRIAL_PENDING);
  auto o = store_->GetTrial(others.id());
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->state(), v1::TRIAL_RUNNING);  // another worker's lease is left alone
  // The new registration leases it again.
  const v1::Trial again = Lease(*second, restart);
  EXPECT_EQ(again.id(), held.id());
  EXPECT_EQ(again.attempts(), 2);
}

TEST_P(StoreTest, HeartbeatRenewsLeasesAndReportsLostOnes) {
  Create("s", 2);
  int64_t w = Worker();
  v1::Trial t = Lease(w, kT0);
  v1::TrialLease good, wrong_attempt;
  good.set_trial_id(t.id());
  good.set_attempt(t.attempts());
  wrong_attempt.set_trial_id(t.id() + 1);  // pending, not leased to w
  wrong_attempt.set_attempt(1);
  auto hb = store_->Heartbeat(w, {good, wrong_attempt}, kT0 + absl::Seconds(20), kLease);
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_THAT(hb->lost_trial_ids, ElementsAre(t.id() + 1));
  EXPECT_THAT(hb->cancelled_trial_ids, IsEmpty());
  auto e = store_->ExpireLeases(kT0 + absl::Seconds(40));  // past the first lease, within the renewed one
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->requeued, 0);
  auto got = store_->GetTrial(t.id());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state(), v1::TRIAL_RUNNING);
  EXPECT_EQ(got->lease_expires_at().seconds(), absl::ToUnixSeconds(kT0 + absl::Seconds(50)));
  auto stats = store_->Stats(kT0 + absl::Seconds(10));
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->live_workers, 1);
  stats = store_->Stats(kT0 + absl::Seconds(21));
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->live_workers, 0);
}

TEST_P(StoreTest, ProgressIsIdempotentPerStepAndMergesEvalPoints) {
  Create("s", 1);
  int64_t w = Worker();
  v1::Trial t = Lease(w);
  v1::ReportProgressRequest req = testing::ProgressOf(w, t);
  for (int step = 1; step <= 3; ++step) {
    v1::MetricPoint* p = req.add_points();
    p->set_step(step);
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
  v1::MetricPoint* again = req.add_points();  // step 1 twice in one batch: merged, first value wins
  again->set_step(1);
  again->set_train_loss(77);
  again->set_tokens_per_s(5000);
  ASSERT_TRUE(store_->ReportProgress(req, kT0).ok());
  ASSERT_TRUE(store_->ReportProgress(req, kT0).ok());  // re-sent: no duplicates
  v1::ReportProgressRequest eval = req;                // the evaluation of step 2, later
  eval.clear_points();
  eval.clear_layer_grad_norms();
  v1::MetricPoint* e = eval.add_points();
  e->set_step(2);
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

TEST_P(StoreTest, StepZeroLogZAndDiagnosticsAreStoredOnceFirstValueKept) {
  Create("s", 1);
  int64_t w = Worker();
  v1::Trial t = Lease(w);
  v1::ReportProgressRequest zero;  // what a worker sends first: the evaluation before the first update
  zero.set_worker_id(w);
  zero.set_trial_id(t.id());
  zero.set_attempt(t.attempts());
  v1::MetricPoint* l0 = zero.add_points();
  l0->set_step(0);
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
    v1::MetricPoint* p = later.add_points();
    p->set_step(step);
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

TEST_P(StoreTest, FinishKeepsTheInitialLoss) {
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

TEST_P(StoreTest, ProgressOutOfOrderAndOverlappingBatchesKeepEachStepOnce) {
  Create("s", 1);
  int64_t w = Worker();
  v1::Trial t = Lease(w);
  auto batch = [&](int first, int last, double train_loss, std::vector<int> evals) {
    v1::ReportProgressRequest req = testing::ProgressOf(w, t);
    for (int step = last; step >= first; --step) {  // any order within a batch
      v1::MetricPoint* p = req.add_points();
      p->set_step(step);
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

TEST_P(StoreTest, RetriedTrialStartsItsHistoryAfresh) {
  // Leases of sweeps with max_concurrent_trials take another path.
  for (int max_concurrent : {0, 1}) {
    SCOPED_TRACE(absl::StrCat("max_concurrent_trials ", max_concurrent));
    RetryStartsAfresh(max_concurrent);
    if (HasFatalFailure()) return;
  }
}

void StoreTest::RetryStartsAfresh(int max_concurrent) {
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

TEST_P(StoreTest, FinishIsIdempotentAndCompletesTheSweep) {
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

TEST_P(StoreTest, ListsPageAndFilter) {
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

TEST_P(StoreTest, ChangeNumbersOnlyGrow) {
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

TEST_P(StoreTest, StatsCountTrialsSweepsAndWorkers) {
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

// A worker is live by its RegisterWorker and Heartbeat calls; leasing does
// not write its row (0008_trials_worker_fk.sql), so a worker that leases but
// stopped heartbeating for longer than the timeout counts as gone.
TEST_P(StoreTest, LivenessComesFromHeartbeatsNotLeases) {
  Create("a", 2);
  const int64_t w = Worker();  // registered at kT0
  Lease(w, kT0 + absl::Seconds(100));
  auto stats = store_->Stats(kT0 + absl::Seconds(50));
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->live_workers, 0);
  ASSERT_TRUE(store_->Heartbeat(w, {}, kT0 + absl::Seconds(100), kLease).ok());
  stats = store_->Stats(kT0 + absl::Seconds(50));
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->live_workers, 1);
}

TEST_P(StoreTest, ListsWorkersWithLivenessAndRunningTrials) {
  v1::RegisterWorkerRequest gpus;
  gpus.set_name("gpu-box");
  gpus.set_hostname("h1");
  gpus.add_devices("cuda:0");
  gpus.add_devices("odd \"name\", 1");  // survives the array round trip
  auto a = store_->RegisterWorker(gpus, kT0);
  ASSERT_TRUE(a.ok()) << a.status();
  v1::RegisterWorkerRequest bare;
  bare.set_name("bare");
  auto b = store_->RegisterWorker(bare, kT0 + absl::Seconds(1));
  ASSERT_TRUE(b.ok()) << b.status();
  const int64_t c = Worker("c");
  Create("s", 3);
  v1::Trial t1 = Lease(*a);
  Lease(*a);
  Lease(c);
  ASSERT_TRUE(Finish(*a, t1, v1::TRIAL_SUCCEEDED).ok());
  // c heartbeats later; a and b fall silent.
  ASSERT_TRUE(store_->Heartbeat(c, {}, kT0 + absl::Seconds(20), kLease).ok());

  auto all = store_->ListWorkers(kT0 + absl::Seconds(10), /*live_only=*/false);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  const v1::Worker& wa = (*all)[0];
  EXPECT_EQ(wa.id(), *a);
  EXPECT_EQ(wa.name(), "gpu-box");
  EXPECT_EQ(wa.hostname(), "h1");
  EXPECT_THAT(wa.devices(), ElementsAre("cuda:0", "odd \"name\", 1"));
  EXPECT_EQ(wa.registered_at().seconds(), absl::ToUnixSeconds(kT0));
  EXPECT_EQ(wa.last_heartbeat_at().seconds(), absl::ToUnixSeconds(kT0));
  EXPECT_FALSE(wa.live());
  EXPECT_EQ(wa.running_trials(), 1);  // the other one finished
  const v1::Worker& wb = (*all)[1];
  EXPECT_EQ(wb.id(), *b);
  EXPECT_EQ(wb.name(), "bare");
  EXPECT_THAT(wb.devices(), IsEmpty());
  EXPECT_EQ(wb.registered_at().seconds(), absl::ToUnixSeconds(kT0 + absl::Seconds(1)));
  EXPECT_FALSE(wb.live());
  EXPECT_EQ(wb.running_trials(), 0);
  const v1::Worker& wc = (*all)[2];
  EXPECT_EQ(wc.id(), c);
  EXPECT_THAT(wc.devices(), ElementsAre("cpu"));
  EXPECT_EQ(wc.registered_at().seconds(), absl::ToUnixSeconds(kT0));
  EXPECT_EQ(wc.last_heartbeat_at().seconds(), absl::ToUnixSeconds(kT0 + absl::Seconds(20)));
  EXPECT_TRUE(wc.live());
  EXPECT_EQ(wc.running_trials(), 1);

  auto live = store_->ListWorkers(kT0 + absl::Seconds(10), /*live_only=*/true);
  ASSERT_TRUE(live.ok()) << live.status();
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].id(), c);
  EXPECT_EQ((*live)[0].running_trials(), 1);
  // Live is "at or after", as Stats counts it.
  auto at_edge = store_->ListWorkers(kT0 + absl::Seconds(1), /*live_only=*/true);
  ASSERT_TRUE(at_edge.ok()) << at_edge.status();
  ASSERT_EQ(at_edge->size(), 2u);
  EXPECT_EQ((*at_edge)[0].id(), *b);
  auto stats = store_->Stats(kT0 + absl::Seconds(1));
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->live_workers, 2);
}

TEST_P(StoreTest, ConcurrentLeasesHandOutEveryTrialOnce) {
  Create("many", 300);
  // Eight callers on four workers: a worker with two free slots leases twice at once.
  std::vector<int64_t> workers;
  for (int i = 0; i < 4; ++i) workers.push_back(Worker(absl::StrCat("w", i)));
  std::mutex mu;
  std::vector<int64_t> leased;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int c = 0; c < 8; ++c) {
    threads.emplace_back([&, c] {
      while (true) {
        auto t = store_->LeaseTrial(workers[c % 4], kT0, kLease);
        std::lock_guard<std::mutex> lock(mu);
        if (!t.ok()) {
          errors.push_back(std::string(t.status().message()));
          return;
        }
        if (!t->has_value()) return;
        EXPECT_EQ((*t)->worker_id(), workers[c % 4]);
        leased.push_back((*t)->id());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_THAT(errors, IsEmpty());
  std::set<int64_t> unique(leased.begin(), leased.end());
  EXPECT_EQ(leased.size(), 300u);
  EXPECT_EQ(unique.size(), 300u);
}

TEST_P(StoreTest, ConcurrentLeasesRespectMaxConcurrentTrials) {
  v1::Sweep limited = Create("limited", 50, /*priority=*/1, 3, /*max_concurrent=*/3);
  std::vector<int64_t> workers;
  for (int i = 0; i < 12; ++i) workers.push_back(Worker(absl::StrCat("w", i)));
  std::atomic<int> leased{0}, errors{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 12; ++i) {
    threads.emplace_back([&, i] {
      auto t = store_->LeaseTrial(workers[i], kT0, kLease);
      if (!t.ok()) ++errors;
      else if (t->has_value()) ++leased;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(leased.load(), 3);
  EXPECT_EQ(store_->GetSweep(limited.id())->counts().running(), 3);
}

TEST_P(StoreTest, ConcurrentProgressReportsAreAllStoredOnce) {
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
          v1::MetricPoint* p = req.add_points();
          p->set_step(b * 10 + k);
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

INSTANTIATE_TEST_SUITE_P(Stores, StoreTest, testing::BothStores(), testing::StoreKindName);

}  // namespace
}  // namespace normsweep::db
