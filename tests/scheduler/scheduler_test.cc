// Scheduler logic over the in-memory store with an injected clock: no
// sockets, no sleeping for leases.
#include "scheduler/scheduler.h"

#include <prometheus/registry.h>

#include <thread>

#include "common/clock.h"
#include "db/memory_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/metric_value.h"
#include "tests/common/requests.h"

namespace normsweep::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using testing::MetricValue;

// The in-memory store, whose maintenance can be made to fail as a database
// outage does (UNAVAILABLE).
class OutageStore : public db::MemoryStore {
 public:
  using db::MemoryStore::ExpireLeases;
  absl::StatusOr<db::ExpiryResult> ExpireLeases(absl::Time now, const db::Outage& outage) override {
    if (down) return absl::UnavailableError("database down");
    return db::MemoryStore::ExpireLeases(now, outage);
  }
  bool down = false;
};

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() : metrics_(registry_), scheduler_(store_, clock_, metrics_, Options()) {}

  static SchedulerOptions Options() {
    SchedulerOptions o;
    o.lease_duration = absl::Seconds(60);
    o.worker_timeout = absl::Seconds(90);
    o.watch_poll_interval = absl::Milliseconds(20);
    return o;
  }

  v1::SubmitSweepRequest Request(int seeds = 2, int max_attempts = 2) {
    v1::SubmitSweepRequest r;
    r.set_request_id("req");
    v1::SweepSpec* s = r.mutable_spec();
    s->set_name("test");
    s->mutable_base()->set_d_model(32);
    s->mutable_base()->set_heads(2);
    s->add_placements("post");
    s->add_warmup_steps(0);
    s->add_peak_lrs(1e-3);
    for (int i = 0; i < seeds; ++i) s->add_seeds(i);
    s->set_max_attempts(max_attempts);
    return r;
  }

  int64_t Register() {
    v1::RegisterWorkerRequest r;
    r.set_name("w");
    auto resp = scheduler_.RegisterWorker(r);
    EXPECT_TRUE(resp.ok()) << resp.status();
    if (!resp.ok()) return 0;
    EXPECT_EQ(resp->lease_seconds(), 60);
    return resp->worker_id();
  }

  v1::Trial Lease(int64_t worker) {
    v1::LeaseTrialRequest r;
    r.set_worker_id(worker);
    auto resp = scheduler_.LeaseTrial(r);
    EXPECT_TRUE(resp.ok()) << resp.status();
    if (!resp.ok()) return v1::Trial();
    EXPECT_TRUE(resp->leased());
    return resp->trial();
  }

  // Submits Request() and points r at the new sweep.
  void WatchNewSweep(v1::WatchSweepRequest* r) {
    auto sweep = scheduler_.SubmitSweep(Request());
    ASSERT_TRUE(sweep.ok()) << sweep.status();
    r->set_sweep_id(sweep->sweep().id());
  }

  v1::HeartbeatResponse Heartbeat(int64_t worker, const v1::Trial& t) {
    v1::HeartbeatRequest r;
    r.set_worker_id(worker);
    v1::TrialLease* l = r.add_leases();
    l->set_trial_id(t.id());
    l->set_attempt(t.attempts());
    auto resp = scheduler_.Heartbeat(r);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.value_or(v1::HeartbeatResponse());
  }

  absl::StatusOr<v1::FinishTrialResponse> Finish(int64_t worker, const v1::Trial& t, v1::TrialState outcome) {
    v1::FinishTrialRequest r = testing::FinishOf(worker, t, outcome);
    r.mutable_result()->set_final_val_loss(1.25);
    return scheduler_.FinishTrial(r);
  }

  OutageStore store_;
  FakeClock clock_;
  prometheus::Registry registry_;
  SchedulerMetrics metrics_;
  Scheduler scheduler_;
};

TEST_F(SchedulerTest, SubmitIsIdempotentAndValidateOnlyStoresNothing) {
  v1::SubmitSweepRequest dry = Request();
  dry.set_validate_only(true);
  auto checked = scheduler_.SubmitSweep(dry);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(checked->sweep().trial_count(), 2);
  EXPECT_FALSE(checked->created());
  EXPECT_TRUE(scheduler_.ListSweeps({})->sweeps().empty());

  auto a = scheduler_.SubmitSweep(Request());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->created());
  EXPECT_EQ(a->sweep().spec().max_attempts(), 2);
  auto b = scheduler_.SubmitSweep(Request());
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->created());
  EXPECT_EQ(b->sweep().id(), a->sweep().id());
  EXPECT_EQ(scheduler_.ListSweeps({})->sweeps_size(), 1);

  v1::SubmitSweepRequest bad = Request();
  bad.set_request_id("other");
  bad.mutable_spec()->add_peak_lrs(-1);
  auto rejected = scheduler_.SubmitSweep(bad);
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler_.ListSweeps({})->sweeps_size(), 1);
}

// An expired lease is an interruption (worker_lost): it spends the trial's
// max_interruptions, not its max_attempts.
TEST_F(SchedulerTest, LeasesExpireWithTheClockAndFailAfterMaxInterruptions) {
  v1::SubmitSweepRequest request = Request(/*seeds=*/1, /*max_attempts=*/1);
  request.mutable_spec()->set_max_interruptions(2);
  auto sweep = scheduler_.SubmitSweep(request);
  ASSERT_TRUE(sweep.ok());
  int64_t w = Register();
  v1::Trial t = Lease(w);
  EXPECT_EQ(t.attempts(), 1);

  // Heartbeats keep the lease alive well past its first expiry.
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(absl::Seconds(40));
    v1::HeartbeatResponse hb = Heartbeat(w, t);
    EXPECT_THAT(hb.lost_trial_ids(), IsEmpty());
    ASSERT_TRUE(scheduler_.RunMaintenance().ok());
  }
  v1::GetTrialRequest get;
  get.set_trial_id(t.id());
  EXPECT_EQ(scheduler_.GetTrial(get)->trial().state(), v1::TRIAL_RUNNING);

  // Silence: the lease expires and the trial is queued again.
  clock_.Advance(absl::Seconds(61));
  ASSERT_TRUE(scheduler_.RunMaintenance().ok());
  EXPECT_EQ(scheduler_.GetTrial(get)->trial().state(), v1::TRIAL_PENDING);
  v1::HeartbeatResponse late = Heartbeat(w, t);
  EXPECT_THAT(late.lost_trial_ids(), ElementsAre(t.id()));

  v1::Trial again = Lease(w);
  EXPECT_EQ(again.id(), t.id());
  EXPECT_EQ(again.attempts(), 2);
  clock_.Advance(absl::Seconds(61));
  ASSERT_TRUE(scheduler_.RunMaintenance().ok());
  auto failed = scheduler_.GetTrial(get);
  EXPECT_EQ(failed->trial().state(), v1::TRIAL_FAILED);
  EXPECT_EQ(failed->trial().result().error(), "interrupted 2 times (max_interruptions), the last by worker_lost");
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_interruptions_total", {{"cause", "worker_lost"}}), 2);
  v1::GetSweepRequest gs;
  gs.set_sweep_id(sweep->sweep().id());
  EXPECT_EQ(scheduler_.GetSweep(gs)->sweep().state(), v1::SWEEP_COMPLETED);
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_trials_completed_total", {{"outcome", "FAILED"}}), 1);
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_trials", {{"state", "FAILED"}}), 1);
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_sweeps", {{"state", "COMPLETED"}}), 1);
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_lease_latency_seconds"), 2);
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_live_workers"), 1);
  clock_.Advance(absl::Seconds(120));
  ASSERT_TRUE(scheduler_.RunMaintenance().ok());
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_live_workers"), 0);
}

TEST_F(SchedulerTest, AKilledTrainersTrialRunsAgainAndItsHistoryTellsEachAttempt) {
  ASSERT_TRUE(scheduler_.SubmitSweep(Request(/*seeds=*/1, /*max_attempts=*/3)).ok());
  const int64_t w = Register();
  auto retry = [&](const v1::Trial& t) {
    v1::FinishTrialRequest r = testing::FinishOf(w, t, v1::TRIAL_FAILED);
    r.set_retry(true);
    r.mutable_result()->set_error("normsweep-train killed by signal 9 (Killed) without a final event");
    return scheduler_.FinishTrial(r);
  };
  // retry only with FAILED and an error saying what happened.
  v1::Trial t = Lease(w);
  v1::FinishTrialRequest bad = testing::FinishOf(w, t, v1::TRIAL_SUCCEEDED);
  bad.set_retry(true);
  EXPECT_THAT(scheduler_.FinishTrial(bad).status().message(), HasSubstr("retry: only with outcome TRIAL_FAILED"));
  bad.set_outcome(v1::TRIAL_FAILED);
  EXPECT_THAT(scheduler_.FinishTrial(bad).status().message(), HasSubstr("result.error: required with retry"));

  auto first = retry(t);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->trial().state(), v1::TRIAL_PENDING);
  ASSERT_TRUE(retry(t).ok());  // re-sent: counted once
  // No interruption named: the trial's own failure.
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_attempts_requeued_total", {{"reason", "failed"}}), 1);
  // The second attempt's lease expires, the third finishes.
  Lease(w);
  clock_.Advance(absl::Seconds(61));
  ASSERT_TRUE(scheduler_.RunMaintenance().ok());
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_attempts_requeued_total", {{"reason", "lease_expired"}}), 1);
  v1::Trial third = Lease(w);
  EXPECT_EQ(third.attempts(), 3);
  ASSERT_TRUE(Finish(w, third, v1::TRIAL_SUCCEEDED).ok());

  v1::GetTrialRequest get;
  get.set_trial_id(t.id());
  auto got = scheduler_.GetTrial(get);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->attempts_size(), 3);
  EXPECT_EQ(got->attempts(0).attempt(), 1);
  EXPECT_EQ(got->attempts(0).outcome(), v1::TRIAL_PENDING);
  EXPECT_THAT(got->attempts(0).reason(), HasSubstr("killed by signal 9"));
  EXPECT_EQ(got->attempts(1).attempt(), 2);
  EXPECT_EQ(got->attempts(1).reason(), "lease expired");
  EXPECT_EQ(got->attempts(2).attempt(), 3);
  EXPECT_EQ(got->attempts(2).outcome(), v1::TRIAL_SUCCEEDED);
  EXPECT_EQ(got->attempts(2).worker_id(), w);
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_trials_completed_total", {{"outcome", "SUCCEEDED"}}), 1);
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_trials_completed_total", {{"outcome", "FAILED"}}), 0);
}

// A lease that expires while maintenance finds the database down was lost to
// the outage (its worker could not renew it), not by its worker.
TEST_F(SchedulerTest, LeasesThatExpireDuringAnOutageAreLeaseLost) {
  ASSERT_TRUE(scheduler_.SubmitSweep(Request(/*seeds=*/1, /*max_attempts=*/1)).ok());
  const int64_t w = Register();
  const v1::Trial t = Lease(w);
  clock_.Advance(absl::Seconds(61));  // silence before any outage: the worker's loss
  ASSERT_TRUE(scheduler_.RunMaintenance().ok());
  Lease(w);
  clock_.Advance(absl::Seconds(20));
  store_.down = true;
  EXPECT_EQ(scheduler_.RunMaintenance().code(), absl::StatusCode::kUnavailable);
  clock_.Advance(absl::Seconds(50));  // the lease ends within the outage
  EXPECT_EQ(scheduler_.RunMaintenance().code(), absl::StatusCode::kUnavailable);
  store_.down = false;
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(scheduler_.RunMaintenance().ok());
  v1::GetTrialRequest get;
  get.set_trial_id(t.id());
  auto got = scheduler_.GetTrial(get);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->trial().state(), v1::TRIAL_PENDING);  // max_attempts 1 is untouched
  EXPECT_EQ(got->trial().interruptions(), 2);
  ASSERT_EQ(got->attempts_size(), 2);
  EXPECT_EQ(got->attempts(0).interruption(), "worker_lost");
  EXPECT_EQ(got->attempts(1).interruption(), "lease_lost");
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_interruptions_total", {{"cause", "worker_lost"}}), 1);
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_interruptions_total", {{"cause", "lease_lost"}}), 1);
  // A later lease that expires long after the outage is its worker's again.
  clock_.Advance(absl::Minutes(2));
  Lease(w);
  clock_.Advance(absl::Minutes(10));
  ASSERT_TRUE(scheduler_.RunMaintenance().ok());
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_interruptions_total", {{"cause", "worker_lost"}}), 2);
}

TEST_F(SchedulerTest, ARestartedWorkersTrialsAreQueuedWhenItRegistersAgain) {
  ASSERT_TRUE(scheduler_.SubmitSweep(Request(/*seeds=*/1)).ok());
  const int64_t before = Register();
  const v1::Trial t = Lease(before);
  const int64_t after = Register();  // the same name and hostname, 1 ms later: no lease has expired
  v1::GetTrialRequest get;
  get.set_trial_id(t.id());
  auto got = scheduler_.GetTrial(get);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->trial().state(), v1::TRIAL_PENDING);
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_attempts_requeued_total", {{"reason", "lease_expired"}}), 1);
  const v1::Trial again = Lease(after);
  EXPECT_EQ(again.id(), t.id());
  EXPECT_EQ(again.attempts(), 2);
}

TEST_F(SchedulerTest, ListWorkersLeavesOutSupersededRegistrationsUnlessAsked) {
  const int64_t old_id = Register();
  const int64_t new_id = Register();  // the same name and hostname: a restart
  v1::ListWorkersRequest r;
  auto current = scheduler_.ListWorkers(r);
  ASSERT_TRUE(current.ok());
  ASSERT_EQ(current->workers_size(), 1);
  EXPECT_EQ(current->workers(0).id(), new_id);
  r.set_include_superseded(true);
  auto all = scheduler_.ListWorkers(r);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->workers_size(), 2);
  EXPECT_EQ(all->workers(0).id(), old_id);
  EXPECT_EQ(all->workers(0).superseded_by(), new_id);
}

TEST_F(SchedulerTest, CancelledSweepIsReportedAtTheNextHeartbeat) {
  auto sweep = scheduler_.SubmitSweep(Request(/*seeds=*/3));
  ASSERT_TRUE(sweep.ok());
  int64_t w = Register();
  v1::Trial t = Lease(w);
  EXPECT_THAT(Heartbeat(w, t).cancelled_trial_ids(), IsEmpty());
  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id(sweep->sweep().id());
  auto cancelled = scheduler_.CancelSweep(cancel);
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->sweep().state(), v1::SWEEP_CANCELLED);
  EXPECT_THAT(Heartbeat(w, t).cancelled_trial_ids(), ElementsAre(t.id()));
  v1::LeaseTrialRequest lease;
  lease.set_worker_id(w);
  EXPECT_FALSE(scheduler_.LeaseTrial(lease)->leased());
  ASSERT_TRUE(Finish(w, t, v1::TRIAL_CANCELLED).ok());
  // The two pending trials the cancel took, and the running one that ended cancelled.
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_trials_completed_total", {{"outcome", "CANCELLED"}}), 3);
}

TEST_F(SchedulerTest, GetTrialReturnsTheMetricHistory) {
  ASSERT_TRUE(scheduler_.SubmitSweep(Request(1)).ok());
  int64_t w = Register();
  v1::Trial t = Lease(w);
  v1::ReportProgressRequest progress = testing::ProgressOf(w, t);
  for (int step = 1; step <= 10; ++step) {
    v1::MetricPoint* p = progress.add_points();
    p->set_step(step);
    p->set_train_loss(5.0 / step);
  }
  v1::LayerGradNorms* g = progress.add_layer_grad_norms();
  g->set_step(0);
  testing::AddNorm(g, 0, "ffn.fc1", 3.0);
  ASSERT_TRUE(scheduler_.ReportProgress(progress).ok());
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_progress_points_total", {{"kind", "metric"}}), 10);
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_progress_points_total", {{"kind", "layer_grad_norm"}}), 1);
  clock_.Advance(absl::Seconds(1));
  auto finished = Finish(w, t, v1::TRIAL_SUCCEEDED);
  ASSERT_TRUE(finished.ok()) << finished.status();
  ASSERT_TRUE(Finish(w, t, v1::TRIAL_SUCCEEDED).ok());  // re-sent at the same instant
  v1::GetTrialRequest get;
  get.set_trial_id(t.id());
  auto got = scheduler_.GetTrial(get);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->trial().state(), v1::TRIAL_SUCCEEDED);
  EXPECT_EQ(got->trial().last_step(), 10);
  ASSERT_EQ(got->metrics_size(), 10);
  EXPECT_DOUBLE_EQ(got->metrics(9).train_loss(), 0.5);
  ASSERT_EQ(got->layer_grad_norms_size(), 1);
  EXPECT_DOUBLE_EQ(got->layer_grad_norms(0).norms(0).norm(), 3.0);
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_trials_completed_total", {{"outcome", "SUCCEEDED"}}), 1);
}

TEST_F(SchedulerTest, WatchSweepStreamsStateChangesUntilDone) {
  auto sweep = scheduler_.SubmitSweep(Request(/*seeds=*/3));
  ASSERT_TRUE(sweep.ok());
  std::vector<v1::WatchSweepEvent> events;
  absl::Status watch_status;
  std::thread watcher([&] {
    v1::WatchSweepRequest r;
    r.set_sweep_id(sweep->sweep().id());
    watch_status = scheduler_.WatchSweep(
        r, [&](const v1::WatchSweepEvent& e) { events.push_back(e); return true; }, [] { return false; });
  });
  int64_t w = Register();
  for (int i = 0; i < 3; ++i) {
    v1::Trial t = Lease(w);
    absl::SleepFor(absl::Milliseconds(30));
    ASSERT_TRUE(Finish(w, t, i == 1 ? v1::TRIAL_DIVERGED : v1::TRIAL_SUCCEEDED).ok());
  }
  watcher.join();
  EXPECT_TRUE(watch_status.ok()) << watch_status;
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.front().trials_size(), 3);  // the first event: every trial
  EXPECT_EQ(events.front().sweep().state(), v1::SWEEP_RUNNING);
  EXPECT_EQ(events.back().sweep().state(), v1::SWEEP_COMPLETED);
  EXPECT_EQ(events.back().sweep().counts().diverged(), 1);
  // Every trial's final state was streamed.
  std::map<int64_t, v1::TrialState> last;
  bool saw_running = false;
  for (const auto& e : events) {
    for (const auto& t : e.trials()) {
      last[t.id()] = t.state();
      saw_running = saw_running || t.state() == v1::TRIAL_RUNNING;
    }
  }
  EXPECT_TRUE(saw_running);
  ASSERT_EQ(last.size(), 3u);
  for (const auto& [id, state] : last) EXPECT_TRUE(db::IsFinal(state)) << id;
}

TEST_F(SchedulerTest, WatchEndsWhenTheClientGoes) {
  v1::WatchSweepRequest r;
  ASSERT_NO_FATAL_FAILURE(WatchNewSweep(&r));
  int polls = 0;
  absl::Status s = scheduler_.WatchSweep(r, [](const v1::WatchSweepEvent&) { return true; },
                                         [&] { return ++polls > 3; });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  r.set_sweep_id(424242);
  s = scheduler_.WatchSweep(r, [](const v1::WatchSweepEvent&) { return true; }, [] { return false; });
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
}

TEST(WatchFloorTest, RereadsFromTheHighestNumberSeenASlackAgo) {
  FakeClock clock;
  WatchFloor floor(absl::Seconds(3));
  EXPECT_EQ(floor.Seen(clock.Now(), 5), 0);  // nothing seen 3 s ago yet
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(floor.Seen(clock.Now(), 9), 0);
  clock.Advance(absl::Seconds(2));  // the first poll is 3 s old now
  EXPECT_EQ(floor.Seen(clock.Now(), 12), 5);
  clock.Advance(absl::Seconds(1));  // the second one is
  EXPECT_EQ(floor.Seen(clock.Now(), 12), 9);
  // A clock that stands still never moves the floor.
  for (int i = 0; i < 100; ++i) EXPECT_EQ(floor.Seen(clock.Now(), 50 + i), 9);
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(floor.Seen(clock.Now(), 200), 149);
  EXPECT_EQ(floor.floor(), 149);
}

TEST_F(SchedulerTest, WatchWithAStillFakeClockPollsAtItsIntervalNotInALoop) {
  v1::WatchSweepRequest r;
  ASSERT_NO_FATAL_FAILURE(WatchNewSweep(&r));
  int polls = 0;
  const absl::Time until = absl::Now() + absl::Milliseconds(300);
  absl::Status s = scheduler_.WatchSweep(r, [](const v1::WatchSweepEvent&) { return true; }, [&] {
    ++polls;
    return absl::Now() >= until;
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  // watch_poll_interval is 20 ms of real time: about 15 polls, not thousands.
  EXPECT_GE(polls, 3);
  EXPECT_LE(polls, 20);
}

TEST_F(SchedulerTest, WorkerThatStopsHeartbeatingTurnsNotLive) {
  auto register_worker = [&](const std::string& name) {
    v1::RegisterWorkerRequest r;
    r.set_name(name);
    r.add_devices("cpu");
    auto resp = scheduler_.RegisterWorker(r);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? resp->worker_id() : int64_t{0};
  };
  const int64_t a = register_worker("a"), b = register_worker("b");
  ASSERT_TRUE(scheduler_.SubmitSweep(Request()).ok());
  Lease(a);
  auto list = [&](bool live_only) {
    v1::ListWorkersRequest r;
    r.set_live_only(live_only);
    auto resp = scheduler_.ListWorkers(r);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.value_or(v1::ListWorkersResponse());
  };
  v1::ListWorkersResponse all = list(false);
  ASSERT_EQ(all.workers_size(), 2);
  EXPECT_EQ(all.workers(0).id(), a);
  EXPECT_EQ(all.workers(0).name(), "a");
  EXPECT_TRUE(all.workers(0).live());
  EXPECT_EQ(all.workers(0).running_trials(), 1);
  EXPECT_EQ(all.workers(1).id(), b);
  EXPECT_TRUE(all.workers(1).live());
  EXPECT_EQ(all.workers(1).running_trials(), 0);

  // b keeps heartbeating; a falls silent. Live until worker_timeout (90 s)
  // has passed since a's last contact, as the gauge counts.
  clock_.Advance(absl::Seconds(45));
  v1::HeartbeatRequest hb;
  hb.set_worker_id(b);
  ASSERT_TRUE(scheduler_.Heartbeat(hb).ok());
  clock_.Advance(absl::Seconds(45));
  EXPECT_EQ(list(true).workers_size(), 2);  // a at exactly 90 s: still live
  clock_.Advance(absl::Seconds(1));
  all = list(false);
  ASSERT_EQ(all.workers_size(), 2);
  EXPECT_FALSE(all.workers(0).live());
  EXPECT_EQ(all.workers(0).running_trials(), 1);  // its lease is not expired yet
  EXPECT_TRUE(all.workers(1).live());
  v1::ListWorkersResponse live = list(true);
  ASSERT_EQ(live.workers_size(), 1);
  EXPECT_EQ(live.workers(0).id(), b);
  ASSERT_TRUE(scheduler_.RunMaintenance().ok());
  EXPECT_EQ(MetricValue(registry_, "normsweep_scheduler_live_workers"), 1);
  all = list(false);
  EXPECT_EQ(all.workers(0).running_trials(), 0);  // the expired lease went back to the queue
}

TEST_F(SchedulerTest, PagesThroughTrials) {
  auto sweep = scheduler_.SubmitSweep(Request(/*seeds=*/25));
  ASSERT_TRUE(sweep.ok());
  v1::ListTrialsRequest r;
  r.set_sweep_id(sweep->sweep().id());
  r.set_page_size(10);
  std::vector<int> indexes;
  for (int page = 0; page < 5; ++page) {
    auto resp = scheduler_.ListTrials(r);
    ASSERT_TRUE(resp.ok()) << resp.status();
    for (const auto& t : resp->trials()) indexes.push_back(t.index());
    if (resp->next_page_token().empty()) break;
    r.set_page_token(resp->next_page_token());
  }
  ASSERT_EQ(indexes.size(), 25u);
  for (int i = 0; i < 25; ++i) EXPECT_EQ(indexes[i], i);
}

}  // namespace
}  // namespace normsweep::scheduler
