// Fused trials (WorkerOptions.fuse): one trainer process per leased group,
// its events routed to their lease by fused_index, a lease stopped alone by
// `cancel I` on the trainer's stdin, and every lease concluded exactly once
// when the process ends. Against the FakeSchedulerClient (which hands out
// groups of up to max_trials) and the fake trainer's fused mode.
#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/worker_fixture.h"
#include "worker/trial_process.h"

namespace normsweep::worker::testing {
namespace {

using FusedWorkerTest = WorkerTest;

// The fake's fused figures: trial i's train loss is 5.5 exp(-0.02 step)
// (1 + 0.1 i) and its final event's tokens/s 1000 + i.
TEST_F(FusedWorkerTest, EventsReachTheirOwnLeaseAndEachTrialFinishesOnItsOwn) {
  options_.fuse = 4;
  std::vector<int64_t> ids;
  for (int i = 0; i < 8; ++i) {
    // Trial 3 of the first group diverges at step 10; the others go on.
    ids.push_back(fake_.AddTrial(Config(i == 2 ? "mode=diverge,crash_at=10,step_ms=2" : "mode=ok,step_ms=2", 40, 20)));
  }
  Start();
  for (int64_t id : ids) ASSERT_TRUE(WaitFinished(id));
  // A fused trial is finished at its final event, before its process exits.
  ASSERT_TRUE(
      Eventually([&] { return absl::StrContains(Metrics(), "normsweep_worker_busy_slots{device=\"cpu\"} 0"); }));
  const std::string metrics_text = Metrics();
  Stop();
  EXPECT_EQ(fake_.leases_granted(), 8);
  for (int i = 0; i < 8; ++i) {
    const FakeSchedulerClient::TrialRecord r = fake_.Get(ids[i]);
    ASSERT_EQ(r.finishes.size(), 1u) << i;
    const int index = i % 4;  // its place in its group
    if (i == 2) {
      EXPECT_EQ(r.finishes[0].outcome(), v1::TRIAL_DIVERGED);
      EXPECT_EQ(r.finishes[0].result().diverged_step(), 10);
    } else {
      EXPECT_EQ(r.finishes[0].outcome(), v1::TRIAL_SUCCEEDED) << i;
    }
    EXPECT_DOUBLE_EQ(r.finishes[0].result().tokens_per_s(), 1000.0 + index) << i;
    std::set<int> steps;
    for (const v1::MetricPoint& p : r.points) {
      if (!p.has_train_loss()) continue;
      EXPECT_TRUE(steps.insert(p.step()).second) << "trial " << i << " step " << p.step() << " twice";
      EXPECT_NEAR(p.train_loss(), 5.5 * std::exp(-0.02 * p.step()) * (1.0 + 0.1 * index), 1e-4) << i;
    }
    EXPECT_EQ(steps.size(), i == 2 ? 10u : 40u) << i;
  }
  EXPECT_THAT(metrics_text, HasSubstr("normsweep_worker_trials_finished_total{outcome=\"SUCCEEDED\"} 7"));
  EXPECT_THAT(metrics_text, HasSubstr("normsweep_worker_slot_idle_seconds_count 1"));  // two processes, one gap
}

TEST_F(FusedWorkerTest, ALeaseCancelledOrLostAloneStopsAloneTheOthersGoOn) {
  options_.fuse = 3;
  const int64_t a = AddLongTrial("fused");
  const int64_t b = fake_.AddTrial(Config("mode=ok", 100000));
  const int64_t c = fake_.AddTrial(Config("mode=ok", 100000));
  Start();
  ASSERT_TRUE(WaitForStep(c, 3));
  const pid_t pid = ReadPid(PidFile("fused"));
  fake_.CancelTrial(b, /*via_progress=*/false);
  ASSERT_TRUE(WaitFinished(b));
  const FakeSchedulerClient::TrialRecord rb = fake_.Get(b);
  EXPECT_EQ(rb.finishes[0].outcome(), v1::TRIAL_CANCELLED);
  EXPECT_TRUE(rb.finishes[0].result().has_final_train_loss());  // its own CANCELLED event
  // The others go on in the same process.
  int at = 0;
  {
    const FakeSchedulerClient::TrialRecord rc = fake_.Get(c);
    for (const v1::MetricPoint& p : rc.points) at = std::max(at, p.step());
  }
  ASSERT_TRUE(WaitForStep(a, at + 10));
  EXPECT_FALSE(ProcessGone(pid));
  EXPECT_TRUE(fake_.Get(a).finishes.empty());
  // A lease lost alone: stopped, not reported; a goes on.
  fake_.LoseLease(c);
  ASSERT_TRUE(fake_.WaitFor(
      [&](FakeSchedulerClient& f) { return f.MaxStepLocked(a) >= at + 40 && !f.FinishedLocked(c); },
      absl::Seconds(10)));
  EXPECT_FALSE(ProcessGone(pid));
  fake_.CancelTrial(a);
  ASSERT_TRUE(WaitFinished(a));
  EXPECT_EQ(fake_.Get(a).finishes[0].outcome(), v1::TRIAL_CANCELLED);
  ASSERT_TRUE(Eventually([&] { return ProcessGone(pid); }));
  Stop();
  EXPECT_TRUE(fake_.Get(c).finishes.empty());
  EXPECT_EQ(fake_.Get(b).finishes.size(), 1u);
  EXPECT_EQ(fake_.Get(a).finishes.size(), 1u);
}

// The fused process killed from outside (the fake SIGKILLs itself at trial
// 0's step 5): each lease without a final event ends as a solo trial killed
// so would (an external_signal interruption), once; one with its final
// event keeps its outcome.
TEST_F(FusedWorkerTest, AKilledFusedProcessConcludesEachLeaseExactlyOnce) {
  options_.fuse = 3;
  const int64_t a = fake_.AddTrial(Config("mode=sigkill,crash_at=5,step_ms=10", 50));
  const int64_t b = fake_.AddTrial(Config("mode=diverge,crash_at=2", 50));
  const int64_t c = fake_.AddTrial(Config("mode=ok", 50));
  Start();
  for (int64_t id : {a, b, c}) ASSERT_TRUE(WaitFinished(id));
  ASSERT_TRUE(WaitInterrupted("external_signal", 2));
  Stop();
  for (int64_t id : {a, c}) {
    const FakeSchedulerClient::TrialRecord r = fake_.Get(id);
    ASSERT_EQ(r.finishes.size(), 1u) << id;
    EXPECT_EQ(r.finishes[0].outcome(), v1::TRIAL_FAILED);
    EXPECT_TRUE(r.finishes[0].retry());
    EXPECT_EQ(r.finishes[0].interruption(), "external_signal");
    EXPECT_THAT(r.finishes[0].result().error(), HasSubstr("killed by signal 9"));
  }
  // The fake kills itself amid step 5: after trial 0's event, before trial 2's.
  EXPECT_EQ(fake_.Get(a).points.size(), 5u);
  EXPECT_EQ(fake_.Get(c).points.size(), 4u);
  const FakeSchedulerClient::TrialRecord rb = fake_.Get(b);
  ASSERT_EQ(rb.finishes.size(), 1u);
  EXPECT_EQ(rb.finishes[0].outcome(), v1::TRIAL_DIVERGED);
  EXPECT_FALSE(rb.finishes[0].retry());
  EXPECT_THAT(Metrics(), HasSubstr("normsweep_worker_interruptions_total{cause=\"external_signal\"} 2"));
}

// A trainer deaf to `cancel I`: kill_after later the whole process gets
// SIGKILL; the cancelled lease is CANCELLED, its sibling ends as a process
// killed from outside.
TEST_F(FusedWorkerTest, ATrainerThatIgnoresCancelIsKilled) {
  options_.fuse = 2;
  const int64_t a = AddLongTrial("deaf", "ignore_cancel");
  const int64_t b = fake_.AddTrial(Config("mode=ok", 100000));
  Start();
  ASSERT_TRUE(WaitForStep(b, 3));
  fake_.CancelTrial(a);
  ASSERT_TRUE(WaitFinished(a));
  ASSERT_TRUE(WaitFinished(b));
  EXPECT_TRUE(ProcessGone(ReadPid(PidFile("deaf"))));
  Stop();
  EXPECT_EQ(fake_.Get(a).finishes.at(0).outcome(), v1::TRIAL_CANCELLED);
  EXPECT_EQ(fake_.Get(b).finishes.at(0).interruption(), "external_signal");
}

// Draining past the grace period: the whole group is handed back, each
// lease with its own FinishTrial.
TEST_F(FusedWorkerTest, DrainHandsTheWholeGroupBack) {
  options_.fuse = 2;
  options_.grace_period = absl::Milliseconds(300);
  const int64_t a = AddLongTrial("drain");
  const int64_t b = fake_.AddTrial(Config("mode=ok", 100000));
  Start();
  ASSERT_TRUE(WaitForStep(b, 3));
  Stop();
  EXPECT_TRUE(ProcessGone(ReadPid(PidFile("drain"))));
  for (int64_t id : {a, b}) {
    const FakeSchedulerClient::TrialRecord r = fake_.Get(id);
    ASSERT_EQ(r.finishes.size(), 1u) << id;
    EXPECT_EQ(r.finishes[0].interruption(), "worker_drained") << id;
  }
}

// A scheduler that ignores max_trials (one trial per lease): each trial
// runs alone, as with fuse 1.
TEST_F(FusedWorkerTest, AGroupOfOneRunsAsASoloTrial) {
  options_.fuse = 4;
  fake_.IgnoreMaxTrials(true);
  const int64_t a = fake_.AddTrial(Config("mode=ok", 20));
  const int64_t b = fake_.AddTrial(Config("mode=ok", 20));
  Start();
  ASSERT_TRUE(WaitFinished(a));
  ASSERT_TRUE(WaitFinished(b));
  Stop();
  for (int64_t id : {a, b}) {
    EXPECT_EQ(fake_.Get(id).finishes.at(0).outcome(), v1::TRIAL_SUCCEEDED);
    EXPECT_DOUBLE_EQ(fake_.Get(id).finishes.at(0).result().tokens_per_s(), 1234.5);  // the solo fake's figure
  }
}

// The trainer's stdin: lines reach it; once it is gone a write is an
// error, not a SIGPIPE (this test process does not ignore SIGPIPE).
TEST(TrialProcessStdinTest, LinesReachTheChildAndAGoneChildIsAnErrorNotSigpipe) {
  const std::string log = absl::StrCat(::testing::TempDir(), "/stdin_test_", getpid(), ".log");
  auto proc = TrialProcess::Start({"/bin/sh", "-c", "read line; echo \"got $line\""}, log, /*with_stdin=*/true);
  ASSERT_TRUE(proc.ok()) << proc.status();
  ASSERT_TRUE((*proc)->WriteLine("cancel 2").ok());
  std::vector<std::string> lines;
  while (!(*proc)->done()) (*proc)->Poll(absl::Milliseconds(100), &lines);
  EXPECT_THAT(lines, ::testing::ElementsAre("got cancel 2"));
  EXPECT_EQ((*proc)->exit_code(), 0);
  const absl::Status gone = (*proc)->WriteLine("cancel 0");
  EXPECT_TRUE(absl::IsUnavailable(gone)) << gone;
  auto solo = TrialProcess::Start({"/bin/true"}, log);
  ASSERT_TRUE(solo.ok()) << solo.status();
  EXPECT_TRUE(absl::IsFailedPrecondition((*solo)->WriteLine("cancel 0")));
  std::remove(log.c_str());
}

TEST_F(FusedWorkerTest, BadFuseIsRefused) {
  for (int fuse : {0, 65}) {
    options_.fuse = fuse;
    Worker worker(fake_, RealClock::Get(), metrics_, options_);
    const absl::Status status = worker.Run();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("fuse: ", fuse)));
  }
}

}  // namespace
}  // namespace normsweep::worker::testing
