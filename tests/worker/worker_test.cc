// A trial's life in the Worker, against the in-memory FakeSchedulerClient
// and a fake trainer process (fake_trainer.cc) that prints scripted events,
// crashes, hangs or ignores SIGTERM: events batched to the scheduler, the
// live metrics, how an attempt ends (crash, signal, OOM killer, time limits,
// a lingering process, cancel), every slot kept busy. Real processes and
// real time, short intervals. The leases' faults: worker_leases_test.cc.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/fake_scheduler_client.h"
#include "tests/worker/worker_fixture.h"
#include "worker/memory_events.h"

namespace normsweep::worker::testing {
namespace {

using ::testing::Not;

TEST_F(WorkerTest, EventsBecomeBatchesThenFinishTrial) {
  const int64_t a = fake_.AddTrial(Config("mode=ok,step_ms=2", 60, 20));
  const int64_t b = fake_.AddTrial(Config("mode=diverge,step_ms=2", 30, 0));
  Start();
  ASSERT_TRUE(WaitFinished(a));
  ASSERT_TRUE(WaitFinished(b));
  const std::string metrics_text = Metrics();
  Stop();

  FakeSchedulerClient::TrialRecord ra = fake_.Get(a);
  ASSERT_EQ(ra.finishes.size(), 1u);
  const v1::FinishTrialRequest& f = ra.finishes[0];
  EXPECT_EQ(f.worker_id(), 42);
  EXPECT_EQ(f.attempt(), 1);
  EXPECT_EQ(f.outcome(), v1::TRIAL_SUCCEEDED);
  EXPECT_TRUE(f.result().has_final_val_loss());
  EXPECT_TRUE(f.result().has_best_val_loss());
  EXPECT_DOUBLE_EQ(f.result().tokens_per_s(), 1234.5);
  EXPECT_EQ(f.result().error(), "");
  // Every step once, with its evaluation merged or sent beside it.
  std::map<int, int> train_points;
  std::set<int> val_steps;
  for (const v1::MetricPoint& p : ra.points) {
    if (p.has_train_loss()) {
      ++train_points[p.step()];
      EXPECT_TRUE(p.has_lr() && p.has_grad_norm() && p.has_tokens_per_s()) << p.ShortDebugString();
    }
    if (p.has_val_loss()) val_steps.insert(p.step());
  }
  ASSERT_EQ(train_points.size(), 60u);
  for (const auto& [step, n] : train_points) EXPECT_EQ(n, 1) << "step " << step;
  EXPECT_EQ(val_steps, (std::set<int>{20, 40, 60}));
  // Batched: far fewer calls than steps.
  EXPECT_LT(ra.progress_calls, 30);
  ASSERT_EQ(ra.norms.size(), 1u);
  EXPECT_EQ(ra.norms[0].step(), 0);
  EXPECT_EQ(ra.norms[0].norms_size(), 4);  // 2 layers x (W1, W2)

  FakeSchedulerClient::TrialRecord rb = fake_.Get(b);
  ASSERT_EQ(rb.finishes.size(), 1u);
  EXPECT_EQ(rb.finishes[0].outcome(), v1::TRIAL_DIVERGED);
  EXPECT_EQ(rb.finishes[0].result().diverged_step(), 30);

  EXPECT_THAT(metrics_text, HasSubstr("normsweep_worker_trials_finished_total{outcome=\"SUCCEEDED\"} 1"));
  EXPECT_THAT(metrics_text, HasSubstr("normsweep_worker_trials_finished_total{outcome=\"DIVERGED\"} 1"));
  EXPECT_THAT(metrics_text, HasSubstr("normsweep_worker_busy_slots{device=\"cpu\"} 0"));
  EXPECT_THAT(metrics_text, Not(HasSubstr("normsweep_worker_trial_train_loss{")));  // series removed at the end
  EXPECT_THAT(metrics_text, Not(HasSubstr("normsweep_trial_train_loss{")));  // and under the deprecated name
  EXPECT_THAT(metrics_text, HasSubstr("normsweep_worker_slot_idle_seconds_count 1"));
}

TEST_F(WorkerTest, LiveTrialMetricsCarryTheTrialLabels) {
  const int64_t a = fake_.AddTrial(Config("mode=hang,crash_at=5", 100));
  Start();
  ASSERT_TRUE(WaitForStep(a, 5));
  const std::string text = Metrics();
  // The fake's trials have no extra axes: an empty variant.
  EXPECT_THAT(text, HasSubstr("normsweep_worker_trial_step{peak_lr=\"0.001\",placement=\"pre\",seed=\"3\",sweep=\"7\","
                              "trial=\"1\",variant=\"\",warmup_steps=\"4\"} 5"));
  EXPECT_THAT(text, HasSubstr("normsweep_worker_trial_learning_rate{"));
  EXPECT_THAT(text, HasSubstr("normsweep_worker_trial_grad_norm{"));
  EXPECT_THAT(text, HasSubstr("normsweep_worker_trial_train_loss{"));
  // The deprecated names, for one release: the old labels, the same value.
  EXPECT_THAT(text, HasSubstr("normsweep_trial_step{peak_lr=\"0.001\",placement=\"pre\",seed=\"3\",sweep=\"7\","
                              "trial=\"1\",warmup_steps=\"4\"} 5"));
  EXPECT_THAT(text, HasSubstr("normsweep_worker_busy_slots{device=\"cpu\"} 1"));
  EXPECT_THAT(text, HasSubstr("normsweep_worker_tokens_per_second{device=\"cpu\"} 1005"));
  fake_.CancelTrial(a);
  ASSERT_TRUE(WaitFinished(a));
}

// The trainer's issue-16 events (the fake's diag=1: an evaluation at step 0,
// log Z and per-block diagnostics at every evaluation, grad norms at every
// evaluation step, l0 in the final event): what reaches the scheduler, and
// the live gauges, gone when the trial ends.
TEST_F(WorkerTest, DiagnosticsReachTheSchedulerAndTheirGaugesLiveAsLongAsTheTrial) {
  // 3 blocks of diagnostics for a 2-layer model: the extra one is not exported.
  const int64_t a = fake_.AddTrial(Config("mode=hang,crash_at=20,diag=1,diag_layers=3", 100, 10));
  Start();
  ASSERT_TRUE(fake_.WaitFor(
      [a](FakeSchedulerClient& f) {
        return f.MaxStepLocked(a) >= 20 && f.DiagnosticStepsLocked(a) >= 3;  // steps 0, 10, 20
      },
      absl::Seconds(10)));
  const std::string live = Metrics();
  const std::string labels =
      "peak_lr=\"0.001\",placement=\"pre\",seed=\"3\",sweep=\"7\",trial=\"1\",variant=\"\",warmup_steps=\"4\"";
  // Step 20's evaluation: block l's logit 2 + l + 0.2, log Z 5.6 - 0.02.
  EXPECT_THAT(live, HasSubstr("normsweep_worker_trial_max_attn_logit{layer=\"1\"," + labels + "} 3.2"));
  EXPECT_THAT(live, HasSubstr("normsweep_worker_trial_max_attn_logit{layer=\"0\"," + labels + "} 2.2"));
  EXPECT_THAT(live, Not(HasSubstr("layer=\"2\"")));
  EXPECT_THAT(live, HasSubstr("normsweep_worker_trial_output_log_z{" + labels + "} 5.58"));
  EXPECT_THAT(live, HasSubstr("normsweep_worker_trial_update_ratio{layer=\"1\",matrix=\"fc2\"," + labels + "} 0.008"));
  EXPECT_THAT(live, HasSubstr("normsweep_worker_trial_update_ratio{layer=\"0\",matrix=\"qkv\"," + labels + "} 0.001"));
  fake_.CancelTrial(a);
  ASSERT_TRUE(WaitFinished(a));
  // A second trial whose final event lacks l0 (a resumed run): the worker
  // takes it from the step-0 evaluation.
  const int64_t b = fake_.AddTrial(Config("mode=ok,diag=1,no_l0=1", 20, 10));
  ASSERT_TRUE(WaitFinished(b));
  const std::string after = Metrics();
  Stop();
  EXPECT_THAT(after, Not(HasSubstr("normsweep_worker_trial_max_attn_logit{")));
  EXPECT_THAT(after, Not(HasSubstr("normsweep_worker_trial_update_ratio{")));
  EXPECT_THAT(after, Not(HasSubstr("normsweep_worker_trial_output_log_z{")));

  FakeSchedulerClient::TrialRecord ra = fake_.Get(a);
  ASSERT_EQ(ra.finishes.size(), 1u);
  EXPECT_EQ(ra.finishes[0].outcome(), v1::TRIAL_CANCELLED);
  EXPECT_DOUBLE_EQ(ra.finishes[0].result().init_val_loss(), 5.6);
  // The step-0 point: l0 and log Z, no training figures.
  std::map<int, v1::MetricPoint> points;  // the evaluations' points, by step
  for (const v1::MetricPoint& p : ra.points) {
    if (p.has_val_loss()) {
      EXPECT_TRUE(points.emplace(p.step(), p).second) << "step " << p.step() << " twice";
    }
  }
  ASSERT_TRUE(points.count(0));
  EXPECT_DOUBLE_EQ(points[0].val_loss(), 5.6);
  EXPECT_DOUBLE_EQ(points[0].output_log_z(), 5.6);
  EXPECT_FALSE(points[0].has_train_loss());
  ASSERT_TRUE(points.count(10));
  EXPECT_DOUBLE_EQ(points[10].output_log_z(), 5.59);
  std::vector<int> diag_steps, norm_steps;
  for (const v1::StepDiagnostics& d : ra.diagnostics) {
    diag_steps.push_back(d.step());
    ASSERT_EQ(d.layers_size(), 3);
    EXPECT_EQ(d.layers(2).layer(), 2);
    EXPECT_DOUBLE_EQ(d.layers(1).max_attn_logit(), 3.0 + d.step() / 100.0);
    EXPECT_EQ(d.layers(0).has_update_ratio_fc1(), d.step() > 0);
  }
  for (const v1::LayerGradNorms& g : ra.norms) {
    norm_steps.push_back(g.step());
    // The fake's norms: 1 + layer (+ 0.5 for W2) + step/1000.
    for (const v1::LayerGradNorm& n : g.norms()) {
      EXPECT_DOUBLE_EQ(n.norm(), 1.0 + n.layer() + (n.matrix() == "ffn.fc2" ? 0.5 : 0) + g.step() / 1000.0)
          << n.ShortDebugString();
    }
  }
  EXPECT_EQ(diag_steps, (std::vector<int>{0, 10, 20}));  // each once
  EXPECT_EQ(norm_steps, (std::vector<int>{0, 10, 20}));

  FakeSchedulerClient::TrialRecord rb = fake_.Get(b);
  ASSERT_EQ(rb.finishes.size(), 1u);
  EXPECT_EQ(rb.finishes[0].outcome(), v1::TRIAL_SUCCEEDED);
  EXPECT_DOUBLE_EQ(rb.finishes[0].result().init_val_loss(), 5.6);
  EXPECT_EQ(rb.diagnostics.size(), 3u);  // steps 0, 10, 20
}

TEST_F(WorkerTest, CrashWithoutFinalEventIsFailedWithExitStatusAndStderrAndRetried) {
  const int64_t a = fake_.AddTrial(Config("mode=crash,crash_at=4", 50));
  const int64_t b = fake_.AddTrial(Config("mode=segv,crash_at=2", 50));
  const int64_t c = fake_.AddTrial(Config("mode=ok", 5));  // the daemon carries on
  Start();
  ASSERT_TRUE(WaitFinished(c));
  Stop();
  FakeSchedulerClient::TrialRecord ra = fake_.Get(a);
  ASSERT_EQ(ra.finishes.size(), 1u);
  EXPECT_EQ(ra.finishes[0].outcome(), v1::TRIAL_FAILED);
  EXPECT_THAT(ra.finishes[0].result().error(), HasSubstr("exit status 3 without a final event"));
  EXPECT_THAT(ra.finishes[0].result().error(), HasSubstr("simulated crash at step 4"));
  EXPECT_TRUE(ra.finishes[0].retry());  // the trial's own failure: run again while attempts remain
  EXPECT_EQ(ra.finishes[0].interruption(), "");
  EXPECT_EQ(ra.points.size(), 4u);  // what it printed before crashing still arrives
  FakeSchedulerClient::TrialRecord rb = fake_.Get(b);
  ASSERT_EQ(rb.finishes.size(), 1u);
  EXPECT_EQ(rb.finishes[0].outcome(), v1::TRIAL_FAILED);
  EXPECT_THAT(rb.finishes[0].result().error(), HasSubstr("killed by signal 11"));
  EXPECT_EQ(fake_.Get(c).finishes[0].outcome(), v1::TRIAL_SUCCEEDED);
  // A FAILED trial's directory is kept for inspection, a SUCCEEDED one is not.
  EXPECT_TRUE(std::filesystem::exists(absl::StrCat(options_.work_dir, "/trial-", a, "-1/stderr.log")));
  EXPECT_FALSE(std::filesystem::exists(absl::StrCat(options_.work_dir, "/trial-", c, "-1")));
}

TEST_F(WorkerTest, TrainerKilledFromOutsideIsAnInterruptionItsOwnCrashIsItsFailure) {
  const int64_t a = fake_.AddTrial(Config("mode=sigkill,crash_at=3", 50));
  const int64_t b = fake_.AddTrial(Config("mode=segv,crash_at=2", 50));
  const int64_t c = fake_.AddTrial(Config("mode=crash,crash_at=2", 50));
  Start();
  ASSERT_TRUE(WaitFinished(a));
  ASSERT_TRUE(WaitFinished(b));
  ASSERT_TRUE(WaitFinished(c));
  Stop();
  FakeSchedulerClient::TrialRecord ra = fake_.Get(a);
  ASSERT_EQ(ra.finishes.size(), 1u);
  EXPECT_TRUE(ra.finishes[0].retry());
  EXPECT_EQ(ra.finishes[0].outcome(), v1::TRIAL_FAILED);
  EXPECT_THAT(ra.finishes[0].result().error(), HasSubstr("killed by signal 9"));
  EXPECT_EQ(ra.finishes[0].interruption(), "external_signal");
  EXPECT_EQ(ra.points.size(), 3u);  // its progress still arrives (the retry starts afresh)
  for (int64_t own : {b, c}) {
    const v1::FinishTrialRequest f = fake_.Get(own).finishes.at(0);
    EXPECT_TRUE(f.retry()) << own;
    EXPECT_EQ(f.interruption(), "") << own;
  }
  EXPECT_THAT(Metrics(), HasSubstr("normsweep_worker_interruptions_total{cause=\"external_signal\"} 1"));
}

// The OOM killer's SIGKILL, told by the cgroup's oom_kill count (here a file
// the fake trainer's mode=oom bumps before it SIGKILLs itself): the trial's
// own failure. A SIGKILL with the count unchanged is still from outside.
TEST_F(WorkerTest, OomKillIsTheTrialsOwnFailure) {
  const std::string events = dir_ + "/memory.events";
  std::ofstream(events) << "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n";
  options_.memory_events_file = events;
  const int64_t a = fake_.AddTrial(Config("mode=oom,crash_at=3,memory_events=" + events, 50));
  const int64_t b = fake_.AddTrial(Config("mode=sigkill,crash_at=3", 50));
  Start();
  ASSERT_TRUE(WaitFinished(a));
  ASSERT_TRUE(WaitFinished(b));
  Stop();
  EXPECT_EQ(ReadOomKills(events), 1);
  const v1::FinishTrialRequest fa = fake_.Get(a).finishes.at(0);
  EXPECT_EQ(fa.outcome(), v1::TRIAL_FAILED);
  EXPECT_TRUE(fa.retry());
  EXPECT_EQ(fa.interruption(), "");
  EXPECT_THAT(fa.result().error(), HasSubstr("normsweep-train killed by the OOM killer (killed by signal 9"));
  const v1::FinishTrialRequest fb = fake_.Get(b).finishes.at(0);
  EXPECT_TRUE(fb.retry());
  EXPECT_EQ(fb.interruption(), "external_signal");
  EXPECT_THAT(fb.result().error(), Not(HasSubstr("OOM")));
}

TEST_F(WorkerTest, MissingTrainerIsFailedNotFatal) {
  options_.trainer_path = dir_ + "/no-such-trainer";
  const int64_t a = fake_.AddTrial(Config("mode=ok", 5));
  Start();
  ASSERT_TRUE(WaitFinished(a));
  Stop();
  EXPECT_EQ(fake_.Get(a).finishes[0].outcome(), v1::TRIAL_FAILED);
  EXPECT_THAT(fake_.Get(a).finishes[0].result().error(), HasSubstr("could not start the trainer"));
}

TEST_F(WorkerTest, SilentTrialIsKilledAfterStallTimeout) {
  options_.stall_timeout = absl::Milliseconds(400);
  // Silent after step 3 (it still obeys SIGTERM, with a final CANCELLED
  // event that the worker overrides: the trial FAILED).
  absl::Duration took;
  ASSERT_NO_FATAL_FAILURE(
      ExpectKilled("mode=hang,crash_at=3", 50, {"no progress event for", "--stall-timeout-s=0.4"}, &took));
  Stop();
}

TEST_F(WorkerTest, TrialPastItsTimeLimitIsKilledEvenIfItIgnoresSigterm) {
  options_.trial_timeout = absl::Milliseconds(500);
  absl::Duration took;
  ASSERT_NO_FATAL_FAILURE(ExpectKilled("mode=ignore_term,step_ms=10", 100000,
                                       {"exceeded the trial time limit (--trial-timeout-s=0.5)"}, &took));
  EXPECT_GE(took, absl::Milliseconds(900));  // 0.5 s limit + 0.5 s SIGTERM grace, then SIGKILL
  Stop();
}

TEST_F(WorkerTest, ProcessLingeringAfterItsFinalEventIsKilledAndTheOutcomeStands) {
  const int64_t a = fake_.AddTrial(Config("mode=linger,pidfile=" + PidFile("linger"), 5));
  Start();
  ASSERT_TRUE(WaitFinished(a, absl::Seconds(5)));
  EXPECT_EQ(fake_.Get(a).finishes[0].outcome(), v1::TRIAL_SUCCEEDED);
  EXPECT_TRUE(ProcessGone(ReadPid(PidFile("linger"))));
  Stop();
}

TEST_F(WorkerTest, CancelFromHeartbeatStopsTheProcessAndFinishesCancelled) {
  const int64_t a = AddLongTrial("cancel");
  const int64_t b = fake_.AddTrial(Config("mode=ok", 5));
  Start();
  ASSERT_TRUE(WaitForStep(a, 3));
  fake_.CancelTrial(a, /*via_progress=*/false);
  const absl::Time cancelled = absl::Now();
  ASSERT_TRUE(WaitFinished(a));
  EXPECT_LT(absl::Now() - cancelled, absl::Seconds(3));
  FakeSchedulerClient::TrialRecord ra = fake_.Get(a);
  EXPECT_EQ(ra.finishes[0].outcome(), v1::TRIAL_CANCELLED);
  EXPECT_TRUE(ra.finishes[0].result().has_final_train_loss());  // the trainer's own CANCELLED event
  EXPECT_TRUE(ProcessGone(ReadPid(PidFile("cancel"))));
  // The heartbeat listed the running lease.
  bool listed = false;
  for (const v1::HeartbeatRequest& h : fake_.heartbeats()) {
    for (const v1::TrialLease& l : h.leases()) listed |= l.trial_id() == a && l.attempt() == 1;
  }
  EXPECT_TRUE(listed);
  ASSERT_TRUE(WaitFinished(b));  // the slot moves on
  Stop();
}

TEST_F(WorkerTest, CancelFromReportProgress) {
  options_.heartbeat_interval = absl::Seconds(60);  // only ReportProgress can tell
  const int64_t a = AddLongTrial();
  Start();
  ASSERT_TRUE(WaitForStep(a, 3));
  fake_.CancelTrial(a, /*via_progress=*/true);
  ASSERT_TRUE(WaitFinished(a, absl::Seconds(3)));
  EXPECT_EQ(fake_.Get(a).finishes[0].outcome(), v1::TRIAL_CANCELLED);
  Stop();
}

TEST_F(WorkerTest, KeepsEverySlotBusyAndPrefetchesTheNextLease) {
  options_.slots = {{"cpu", 1}, {"cpu", 1}};
  std::vector<int64_t> ids;
  // Each ends with a 400 ms final evaluation: the next lease must come
  // before it, not after the process has exited.
  for (int i = 0; i < 6; ++i) ids.push_back(fake_.AddTrial(Config("mode=ok,step_ms=5,end_ms=400", 40)));
  Start();
  for (int64_t id : ids) ASSERT_TRUE(WaitFinished(id));
  const std::string text = Metrics();
  Stop();
  for (int64_t id : ids) EXPECT_EQ(fake_.Get(id).finishes[0].outcome(), v1::TRIAL_SUCCEEDED);
  EXPECT_THAT(text, HasSubstr("normsweep_worker_trials_finished_total{outcome=\"SUCCEEDED\"} 6"));
  EXPECT_THAT(text, HasSubstr("normsweep_worker_slot_idle_seconds_count 4"));
  // Trials 3..6 were prefetched while 1..4 were still in their final
  // evaluation (two slots: trial k+2 follows trial k on its slot, give or take).
  for (int k = 2; k < 6; ++k) {
    const absl::Time leased = fake_.Get(ids[k]).leased_at;
    const absl::Time earliest_finish =
        std::min(fake_.Get(ids[k - 2]).finished_at, fake_.Get(ids[k - 1]).finished_at);
    EXPECT_LT(leased, earliest_finish - absl::Milliseconds(200)) << "trial " << ids[k] << " leased late";
  }
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "normsweep_worker_slot_idle_seconds_sum")) std::printf("%s\n", std::string(line).c_str());
  }
}

TEST_F(WorkerTest, DoesNotHoldANextLeaseLongBeforeTheTrialEnds) {
  options_.prefetch_lead = absl::Seconds(1);
  const int64_t a = AddLongTrial();  // ~1000 s to go
  fake_.AddTrial(Config("mode=ok", 5));
  Start();
  ASSERT_TRUE(WaitForStep(a, 20));
  EXPECT_EQ(fake_.leases_granted(), 1) << "leased the next trial while this one has ~1000 s to go";
  fake_.CancelTrial(a);
  ASSERT_TRUE(WaitFinished(a));
  Stop();
}

}  // namespace
}  // namespace normsweep::worker::testing
