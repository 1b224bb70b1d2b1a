// The Worker's leases against the in-memory FakeSchedulerClient and the
// fake trainer (fake_trainer.cc), when the scheduler is away or says no:
// progress buffered while it is unreachable, a lease lost or not renewed in
// time, progress refused as invalid, a drain that hands trials back, a
// worker the scheduler forgot. Real processes and real time, short
// intervals.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/fake_scheduler_client.h"
#include "tests/worker/worker_fixture.h"

namespace normsweep::worker::testing {
namespace {

TEST_F(WorkerTest, UnreachableSchedulerBuffersAndResendsWithoutLossOrDuplicates) {
  const int64_t a = fake_.AddTrial(Config("mode=ok,step_ms=10", 150, 50));
  Start();
  ASSERT_TRUE(WaitForStep(a, 5));
  fake_.SetUnavailable(true);
  absl::SleepFor(absl::Milliseconds(800));  // the trial keeps training meanwhile
  const int failed = fake_.unavailable_calls();
  fake_.SetUnavailable(false);
  ASSERT_TRUE(WaitFinished(a));
  Stop();
  EXPECT_GT(failed, 0);
  FakeSchedulerClient::TrialRecord ra = fake_.Get(a);
  EXPECT_EQ(ra.finishes[0].outcome(), v1::TRIAL_SUCCEEDED);
  std::map<int, int> train, val;
  for (const v1::MetricPoint& p : ra.points) {
    if (p.has_train_loss()) ++train[p.step()];
    if (p.has_val_loss()) ++val[p.step()];
  }
  ASSERT_EQ(train.size(), 150u);
  EXPECT_EQ(train.begin()->first, 1);
  for (const auto& [step, n] : train) EXPECT_EQ(n, 1) << "step " << step;
  EXPECT_EQ(val, (std::map<int, int>{{50, 1}, {100, 1}, {150, 1}}));
  EXPECT_EQ(ra.norms.size(), 1u);
}

TEST_F(WorkerTest, LostLeaseIsKilledAndNotReported) {
  const int64_t a = AddLongTrial("lost");
  Start();
  ASSERT_TRUE(WaitForStep(a, 3));
  fake_.LoseLease(a);
  const int64_t b = fake_.AddTrial(Config("mode=ok", 5));
  ASSERT_TRUE(WaitFinished(b));  // the slot is free again
  EXPECT_TRUE(ProcessGone(ReadPid(PidFile("lost"))));
  Stop();
  EXPECT_TRUE(fake_.Get(a).finishes.empty());
}

TEST_F(WorkerTest, DrainLetsRunningTrialsFinishWithinGracePeriod) {
  const int64_t a = fake_.AddTrial(Config("mode=ok,step_ms=10", 60));
  const int64_t b = fake_.AddTrial(Config("mode=ok", 5));
  Start();
  ASSERT_TRUE(WaitForStep(a, 2));
  Stop();  // returns once the running trial has finished
  EXPECT_EQ(fake_.Get(a).finishes.size(), 1u);
  EXPECT_EQ(fake_.Get(a).finishes[0].outcome(), v1::TRIAL_SUCCEEDED);
  // b may have been prefetched near a's end; it was never started, and if
  // leased, handed back at once.
  const FakeSchedulerClient::TrialRecord rb = fake_.Get(b);
  EXPECT_TRUE(rb.points.empty());
  EXPECT_FALSE(rb.held);
  if (!rb.finishes.empty()) {
    EXPECT_TRUE(rb.finishes[0].retry());
    EXPECT_EQ(rb.finishes[0].interruption(), "worker_drained");
    EXPECT_EQ(rb.finishes[0].result().error(), "handed back unstarted: the worker was drained");
  }
}

TEST_F(WorkerTest, DrainPastGracePeriodHandsTrialsBack) {
  options_.grace_period = absl::Milliseconds(300);
  const int64_t a = AddLongTrial("drain");
  fake_.AddTrial(Config("mode=ok", 5));
  Start();
  ASSERT_TRUE(WaitForStep(a, 2));
  const absl::Time start = absl::Now();
  Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  FakeSchedulerClient::TrialRecord ra = fake_.Get(a);
  // Handed back: FinishTrial(FAILED, retry, worker_drained) re-queues it at
  // once, without counting an attempt.
  ASSERT_EQ(ra.finishes.size(), 1u);
  EXPECT_EQ(ra.finishes[0].outcome(), v1::TRIAL_FAILED);
  EXPECT_TRUE(ra.finishes[0].retry());
  EXPECT_EQ(ra.finishes[0].interruption(), "worker_drained");
  EXPECT_THAT(ra.finishes[0].result().error(), HasSubstr("handed back: the worker was drained"));
  EXPECT_FALSE(ra.held);
  EXPECT_TRUE(ProcessGone(ReadPid(PidFile("drain"))));
  // Progress up to the stop was delivered (idempotent for the next attempt).
  int max_step = 0;
  for (const v1::MetricPoint& p : ra.points) max_step = std::max(max_step, p.step());
  EXPECT_GT(max_step, 10);
  EXPECT_EQ(fake_.leases_granted(), 1);
  EXPECT_THAT(Metrics(), HasSubstr("normsweep_worker_interruptions_total{cause=\"worker_drained\"} 1"));
}

// A hand-back is not reported while a LeaseTrial of the worker's is in
// flight (another slot's, sent before the drain): the scheduler re-queues
// the trial at once and would give it straight back, to be handed back
// again (a second interruption).
TEST_F(WorkerTest, HandBackWaitsForLeaseCallsInFlight) {
  options_.grace_period = absl::Milliseconds(300);
  options_.slots = {{"cpu", 1}, {"cpu", 1}};
  const int64_t a = AddLongTrial();
  Start();
  ASSERT_TRUE(WaitForStep(a, 2));
  fake_.HoldLeaseCalls(true);  // the idle slot's next poll waits in the scheduler
  ASSERT_TRUE(
      fake_.WaitFor([](FakeSchedulerClient& f) { return f.BlockedLeaseCallsLocked() > 0; }, absl::Seconds(10)));
  worker_->Drain();
  ASSERT_TRUE(WaitInterrupted("worker_drained"));
  EXPECT_TRUE(fake_.Get(a).finishes.empty()) << "handed back while a LeaseTrial was in flight";
  fake_.HoldLeaseCalls(false);
  ASSERT_TRUE(WaitFinished(a));
  Stop();
  const FakeSchedulerClient::TrialRecord ra = fake_.Get(a);
  ASSERT_EQ(ra.finishes.size(), 1u);
  EXPECT_EQ(ra.finishes[0].interruption(), "worker_drained");
  EXPECT_EQ(fake_.leases_granted(), 1);
}

// A lease the worker could not renew in time (the heartbeats failed for 3/4
// of the 2 s lease): the trainer is stopped and, once a scheduler answers
// again, reported as an interruption whose cause says why it could not be
// renewed: lease_lost when the scheduler answered that its database was
// down, scheduler_restart when no scheduler answered.
TEST_F(WorkerTest, ALeaseNotRenewedInTimeIsReportedWithWhyItCouldNotBe) {
  fake_.SetLeaseSeconds(2);
  for (const bool database_down : {true, false}) {
    const std::string cause = database_down ? "lease_lost" : "scheduler_restart";
    const int64_t a = AddLongTrial(cause);
    if (worker_ == nullptr) Start();
    ASSERT_TRUE(WaitForStep(a, 3));
    fake_.SetUnavailable(true, database_down);
    ASSERT_TRUE(WaitInterrupted(cause)) << Metrics();  // decided while the scheduler is still away
    EXPECT_TRUE(ProcessGone(ReadPid(PidFile(cause))));
    EXPECT_TRUE(fake_.Get(a).finishes.empty());
    fake_.SetUnavailable(false);
    ASSERT_TRUE(WaitFinished(a));
    const FakeSchedulerClient::TrialRecord ra = fake_.Get(a);
    ASSERT_EQ(ra.finishes.size(), 1u);
    EXPECT_EQ(ra.finishes[0].outcome(), v1::TRIAL_FAILED);
    EXPECT_TRUE(ra.finishes[0].retry());
    EXPECT_EQ(ra.finishes[0].interruption(), cause);
    EXPECT_THAT(ra.finishes[0].result().error(), HasSubstr("its lease could not be renewed in time"));
  }
  Stop();
}

// The scheduler let the lease go meanwhile (it refuses the progress): the
// interruption is still reported, so that the scheduler can record its
// cause, and forgotten when refused too.
TEST_F(WorkerTest, AnInterruptionIsReportedEvenWhenTheSchedulerLetTheLeaseGo) {
  fake_.SetLeaseSeconds(2);
  const int64_t a = AddLongTrial("expired");
  Start();
  ASSERT_TRUE(WaitForStep(a, 3));
  fake_.SetUnavailable(true, /*database_down=*/true);
  ASSERT_TRUE(WaitInterrupted("lease_lost"));
  fake_.LoseLease(a);
  fake_.SetUnavailable(false);
  ASSERT_TRUE(
      fake_.WaitFor([a](FakeSchedulerClient& f) { return f.RefusedFinishesLocked(a) > 0; }, absl::Seconds(10)));
  Stop();
  const FakeSchedulerClient::TrialRecord ra = fake_.Get(a);
  EXPECT_TRUE(ra.finishes.empty());
  ASSERT_EQ(ra.refused_finishes.size(), 1u);  // refused once, then forgotten
  EXPECT_EQ(ra.refused_finishes[0].interruption(), "lease_lost");
}

// Progress the scheduler refuses as invalid (values the API rejects): the
// trainer is stopped and the attempt is the trial's own failure, with the
// scheduler's words, not a lost lease.
TEST_F(WorkerTest, ProgressRefusedAsInvalidEndsTheAttemptAsTheTrialsFailure) {
  const int64_t a = AddLongTrial("refused");
  const int64_t b = fake_.AddTrial(Config("mode=ok", 5));
  Start();
  ASSERT_TRUE(WaitForStep(a, 3));
  fake_.RefuseProgress(a);
  ASSERT_TRUE(WaitFinished(a));
  ASSERT_TRUE(WaitFinished(b));  // the slot carries on
  Stop();
  EXPECT_TRUE(ProcessGone(ReadPid(PidFile("refused"))));
  const FakeSchedulerClient::TrialRecord ra = fake_.Get(a);
  ASSERT_EQ(ra.finishes.size(), 1u);
  EXPECT_EQ(ra.finishes[0].outcome(), v1::TRIAL_FAILED);
  EXPECT_TRUE(ra.finishes[0].retry());
  EXPECT_EQ(ra.finishes[0].interruption(), "");
  EXPECT_EQ(ra.finishes[0].result().error(),
            "the scheduler refused the trainer's progress: points[0].train_loss: must be finite");
  EXPECT_EQ(fake_.Get(b).finishes.at(0).outcome(), v1::TRIAL_SUCCEEDED);
}

// Refused progress of a trial that ends by itself meanwhile (its final
// event before or after the refusal): the outcome gives way to the refusal.
TEST_F(WorkerTest, ProgressRefusedAsInvalidOverridesTheFinalEvent) {
  const int64_t a = fake_.AddTrial(Config("mode=ok", 5));
  fake_.RefuseProgress(a);
  Start();
  ASSERT_TRUE(WaitFinished(a));
  Stop();
  const FakeSchedulerClient::TrialRecord ra = fake_.Get(a);
  ASSERT_EQ(ra.finishes.size(), 1u);
  EXPECT_EQ(ra.finishes[0].outcome(), v1::TRIAL_FAILED);
  EXPECT_TRUE(ra.finishes[0].retry());
  EXPECT_EQ(ra.finishes[0].interruption(), "");
  EXPECT_THAT(ra.finishes[0].result().error(), HasSubstr("the scheduler refused the trainer's progress"));
  EXPECT_TRUE(ra.points.empty());
}

TEST_F(WorkerTest, RegistersAgainWhenTheSchedulerForgetsIt) {
  const int64_t a = fake_.AddTrial(Config("mode=ok", 5));
  Start();
  ASSERT_TRUE(WaitFinished(a));
  EXPECT_EQ(fake_.Get(a).finishes[0].worker_id(), 42);
  fake_.ForgetWorker();
  const int64_t b = fake_.AddTrial(Config("mode=ok", 5));
  ASSERT_TRUE(WaitFinished(b));
  Stop();
  EXPECT_EQ(fake_.registrations(), 2);
  EXPECT_EQ(fake_.Get(b).finishes[0].worker_id(), 43);
}

TEST_F(WorkerTest, RegistersOnceTheSchedulerIsUp) {
  fake_.SetUnavailable(true);
  const int64_t a = fake_.AddTrial(Config("mode=ok", 5));
  Start();
  ASSERT_TRUE(Eventually([&] { return fake_.unavailable_calls() > 0; }));  // refused while away
  fake_.SetUnavailable(false);
  ASSERT_TRUE(WaitFinished(a));
  Stop();
}

}  // namespace
}  // namespace normsweep::worker::testing
