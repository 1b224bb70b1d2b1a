// Leases that end before their trial does, in both stores
// (store_fixture.h): expiry, an outage, a worker's retry and the
// interruption it names, each counted against max_interruptions or
// max_attempts as its cause says and kept in the trial's attempt history;
// and leases handed out to many callers at once.
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "db/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/requests.h"
#include "tests/db/store_fixture.h"

namespace normsweep::db {
namespace {

using ::testing::IsEmpty;

using StoreLeasesTest = StoreTest;

// An expired lease is an interruption ("worker_lost"): it never counts
// against max_attempts, only against max_interruptions.
TEST_P(StoreLeasesTest, ExpiredLeasesAreInterruptionsUntilMaxInterruptionsThenFail) {
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

TEST_P(StoreLeasesTest, ExpiredLeasesAreInTheTrialsAttemptHistory) {
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
TEST_P(StoreLeasesTest, LeasesExpiredWithinAnOutageWereLostToIt) {
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

TEST_P(StoreLeasesTest, RetriedFinishRequeuesUntilMaxAttemptsThenFails) {
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

TEST_P(StoreLeasesTest, RetryInACancelledSweepCancelsTheTrial) {
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
TEST_P(StoreLeasesTest, InterruptionsNeverSpendTheTrialsAttempts) {
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

TEST_P(StoreLeasesTest, ReportedInterruptionsFailTheTrialAtMaxInterruptions) {
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
TEST_P(StoreLeasesTest, TheWorkerNamesTheCauseOfALeaseFoundExpired) {
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

TEST_P(StoreLeasesTest, ConcurrentLeasesHandOutEveryTrialOnce) {
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

TEST_P(StoreLeasesTest, ConcurrentLeasesRespectMaxConcurrentTrials) {
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

INSTANTIATE_TEST_SUITE_P(Stores, StoreLeasesTest, testing::BothStores(), testing::StoreKindName);

}  // namespace
}  // namespace normsweep::db
