// The worker's timing and bookkeeping pieces, with a FakeClock: progress
// batching (ProgressBuffer), the trial watchdog, the per-poll decisions of a
// running trial (TrialSupervisor: stop, SIGKILL, prefetch), the trial's
// command line, slot resolution.
#include <signal.h>

#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/clock.h"
#include "normsweep/v1/worker_service.pb.h"
#include "tests/worker/supervisor_limits.h"
#include "tests/worker/train_events.h"
#include "worker/progress_buffer.h"
#include "worker/slots.h"
#include "worker/trial_launch.h"
#include "worker/trial_supervisor.h"
#include "worker/trial_watchdog.h"

namespace normsweep::worker {
namespace {

using ::testing::HasSubstr;
using testing::TestLimits;

v1::TrainEvent Step(int step) {
  v1::TrainEvent e;
  e.set_type("step");
  e.set_step(step);
  e.set_train_loss(5.0 - step * 0.01);
  e.set_lr(1e-3);
  e.set_grad_norm(0.5);
  e.set_tokens_per_s(1000);
  return e;
}

v1::TrainEvent Eval(int step) {
  v1::TrainEvent e;
  e.set_type("eval");
  e.set_step(step);
  e.set_val_loss(4.0);
  e.set_val_accuracy(0.25);
  return e;
}

TEST(ProgressBufferTest, StepAndEvalOfOneStepBecomeOnePoint) {
  FakeClock clock;
  ProgressBuffer b;
  b.Add(Step(1), clock.Now());
  b.Add(Step(2), clock.Now());
  b.Add(Eval(2), clock.Now());
  v1::TrainEvent final_event;
  final_event.set_type("final");
  b.Add(final_event, clock.Now());  // carries no progress
  EXPECT_EQ(b.pending_points(), 2);
  v1::ReportProgressRequest r;
  ASSERT_EQ(b.Peek(BatchLimits::Api(100), &r).points, 2);
  EXPECT_FALSE(r.points(0).has_val_loss());
  EXPECT_EQ(r.points(1).step(), 2);
  EXPECT_DOUBLE_EQ(r.points(1).train_loss(), 4.98);
  EXPECT_DOUBLE_EQ(r.points(1).val_loss(), 4.0);
  EXPECT_DOUBLE_EQ(r.points(1).val_accuracy(), 0.25);
  EXPECT_DOUBLE_EQ(r.points(1).tokens_per_s(), 1000);
}

TEST(ProgressBufferTest, EvalAfterItsStepWentOutIsItsOwnPoint) {
  FakeClock clock;
  ProgressBuffer b;
  b.Add(Step(5), clock.Now());
  v1::ReportProgressRequest r;
  const PeekedBatch first = b.Peek(BatchLimits::Api(100), &r);
  ASSERT_EQ(first.points, 1);
  b.Add(Eval(5), clock.Now());  // the step's point is in flight: not merged
  b.Ack(first);
  EXPECT_EQ(b.pending_points(), 1);
  v1::ReportProgressRequest r2;
  ASSERT_EQ(b.Peek(BatchLimits::Api(100), &r2).points, 1);
  EXPECT_EQ(r2.points(0).step(), 5);
  EXPECT_FALSE(r2.points(0).has_train_loss());
  EXPECT_TRUE(r2.points(0).has_val_loss());
}

TEST(ProgressBufferTest, FlushesAfterIntervalOrWhenFull) {
  FakeClock clock;
  ProgressBuffer b;
  const absl::Duration interval = absl::Milliseconds(500);
  EXPECT_FALSE(b.ShouldFlush(clock.Now(), interval, 3));
  b.Add(Step(1), clock.Now());
  clock.Advance(absl::Milliseconds(499));
  EXPECT_FALSE(b.ShouldFlush(clock.Now(), interval, 3));
  clock.Advance(absl::Milliseconds(1));
  EXPECT_TRUE(b.ShouldFlush(clock.Now(), interval, 3));

  ProgressBuffer full;
  for (int s = 1; s <= 3; ++s) full.Add(Step(s), clock.Now());
  EXPECT_TRUE(full.ShouldFlush(clock.Now(), interval, 3));
}

TEST(ProgressBufferTest, UnacknowledgedBatchIsSentAgainAndAckedOneNever) {
  FakeClock clock;
  ProgressBuffer b;
  v1::TrainEvent g;
  g.set_type("grad_norms");
  g.set_step(0);
  v1::LayerGradNorm* n = g.add_layer_grad_norms();
  n->set_layer(0);
  n->set_matrix("ffn.fc1");
  n->set_norm(2.5);
  b.Add(g, clock.Now());
  for (int s = 1; s <= 5; ++s) b.Add(Step(s), clock.Now());

  v1::ReportProgressRequest first;
  ASSERT_EQ(b.Peek(BatchLimits::Api(3), &first).points, 3);
  ASSERT_EQ(first.layer_grad_norms_size(), 1);
  // The call failed: nothing acknowledged, the same batch goes again.
  v1::ReportProgressRequest again;
  const PeekedBatch sent = b.Peek(BatchLimits::Api(3), &again);
  ASSERT_EQ(sent.points, 3);
  EXPECT_EQ(sent.norms, 1);
  EXPECT_EQ(again.SerializeAsString(), first.SerializeAsString());
  b.Ack(sent);
  v1::ReportProgressRequest rest;
  const PeekedBatch last = b.Peek(BatchLimits::Api(3), &rest);
  ASSERT_EQ(last.points, 2);
  EXPECT_EQ(rest.points(0).step(), 4);
  EXPECT_EQ(rest.layer_grad_norms_size(), 0);
  b.Ack(last);
  EXPECT_TRUE(b.empty());
  EXPECT_FALSE(b.ShouldFlush(clock.Now() + absl::Hours(1), absl::Milliseconds(1), 1));
}

// An eval event with the diagnostics the trainer prints (Eval's figures,
// log Z, and per block the largest attention logit and, after step 0, the
// update ratios).
v1::TrainEvent EvalWithDiagnostics(int step, int layers) {
  v1::TrainEvent e = Eval(step);
  e.set_output_log_z(5.5 - 0.001 * step);
  for (int l = 0; l < layers; ++l) {
    v1::LayerDiagnostics* d = e.add_layer_diagnostics();
    d->set_layer(l);
    d->set_max_attn_logit(2.0 + l + 0.01 * step);
    if (step > 0) {
      d->set_update_ratio_qkv(1e-3 * (l + 1));
      d->set_update_ratio_proj(2e-3 * (l + 1));
      d->set_update_ratio_fc1(3e-3 * (l + 1));
      d->set_update_ratio_fc2(4e-3 * (l + 1));
    }
  }
  return e;
}

v1::TrainEvent GradNorms(int step, int layers) {
  return testing::GradNormsEvent(step, layers, [](int l, const std::string&) { return 1.0 + l; });
}

TEST(ProgressBufferTest, StepZeroEvaluationIsAPointAndDiagnosticsAStepOfTheirOwn) {
  FakeClock clock;
  ProgressBuffer b;
  b.Add(GradNorms(0, 2), clock.Now());
  b.Add(EvalWithDiagnostics(0, 2), clock.Now());  // l0, before the first update
  b.Add(Step(1), clock.Now());
  b.Add(Step(2), clock.Now());
  b.Add(GradNorms(2, 2), clock.Now());
  b.Add(EvalWithDiagnostics(2, 2), clock.Now());
  v1::ReportProgressRequest r;
  const PeekedBatch batch = b.Peek(BatchLimits::Api(100), &r);
  EXPECT_EQ(batch.points, 3);
  EXPECT_EQ(batch.norms, 2);
  EXPECT_EQ(batch.diagnostics, 2);
  ASSERT_EQ(r.points_size(), 3);
  EXPECT_EQ(r.points(0).step(), 0);
  EXPECT_DOUBLE_EQ(r.points(0).val_loss(), 4.0);
  EXPECT_DOUBLE_EQ(r.points(0).output_log_z(), 5.5);
  EXPECT_FALSE(r.points(0).has_train_loss());
  EXPECT_EQ(r.points(2).step(), 2);  // the evaluation merged into its step's point
  EXPECT_TRUE(r.points(2).has_train_loss());
  EXPECT_DOUBLE_EQ(r.points(2).output_log_z(), 5.498);
  EXPECT_FALSE(r.points(1).has_output_log_z());
  ASSERT_EQ(r.layer_grad_norms_size(), 2);
  EXPECT_EQ(r.layer_grad_norms(1).step(), 2);
  ASSERT_EQ(r.diagnostics_size(), 2);
  EXPECT_EQ(r.diagnostics(0).step(), 0);
  ASSERT_EQ(r.diagnostics(0).layers_size(), 2);
  EXPECT_EQ(r.diagnostics(0).layers(1).layer(), 1);
  EXPECT_DOUBLE_EQ(r.diagnostics(0).layers(1).max_attn_logit(), 3.0);
  EXPECT_FALSE(r.diagnostics(0).layers(1).has_update_ratio_qkv());
  EXPECT_EQ(r.diagnostics(1).step(), 2);
  EXPECT_DOUBLE_EQ(r.diagnostics(1).layers(1).update_ratio_fc2(), 8e-3);
  b.Ack(batch);
  EXPECT_TRUE(b.empty());
}

// A step's z term (z_loss > 0) goes into its point; a non-finite one (a
// diverging run's) is left out, as the API takes it finite or absent.
TEST(ProgressBufferTest, StepZTermIsKeptWhenFinite) {
  FakeClock clock;
  ProgressBuffer b;
  v1::TrainEvent one = Step(1);
  one.set_z_term(0.0125);
  v1::TrainEvent two = Step(2);
  two.set_z_term(std::numeric_limits<double>::quiet_NaN());
  b.Add(one, clock.Now());
  b.Add(two, clock.Now());
  b.Add(Step(3), clock.Now());
  v1::ReportProgressRequest r;
  b.Peek(BatchLimits::Api(100), &r);
  ASSERT_EQ(r.points_size(), 3);
  EXPECT_DOUBLE_EQ(r.points(0).z_term(), 0.0125);
  EXPECT_FALSE(r.points(1).has_z_term());
  EXPECT_TRUE(r.points(1).has_train_loss());
  EXPECT_FALSE(r.points(2).has_z_term());
}

TEST(ProgressBufferTest, NonFiniteDiagnosticsAreLeftOutTheRestStays) {
  FakeClock clock;
  ProgressBuffer b;
  v1::TrainEvent e = EvalWithDiagnostics(40, 2);
  e.set_output_log_z(std::numeric_limits<double>::infinity());
  e.mutable_layer_diagnostics(0)->set_max_attn_logit(std::numeric_limits<double>::quiet_NaN());
  e.mutable_layer_diagnostics(1)->set_update_ratio_proj(-std::numeric_limits<double>::infinity());
  b.Add(e, clock.Now());
  v1::ReportProgressRequest r;
  b.Peek(BatchLimits::Api(100), &r);
  ASSERT_EQ(r.points_size(), 1);
  EXPECT_TRUE(r.points(0).has_val_loss());
  EXPECT_FALSE(r.points(0).has_output_log_z());
  ASSERT_EQ(r.diagnostics_size(), 1);
  const v1::StepDiagnostics& d = r.diagnostics(0);
  ASSERT_EQ(d.layers_size(), 2);
  EXPECT_EQ(d.layers(0).layer(), 0);
  EXPECT_FALSE(d.layers(0).has_max_attn_logit());
  EXPECT_TRUE(d.layers(0).has_update_ratio_proj());
  EXPECT_TRUE(d.layers(1).has_max_attn_logit());
  EXPECT_FALSE(d.layers(1).has_update_ratio_proj());
  EXPECT_TRUE(d.layers(1).has_update_ratio_qkv());
}

TEST(ProgressBufferTest, NormsAndDiagnosticsGoInWholeStepsWithinTheLimits) {
  FakeClock clock;
  ProgressBuffer b;
  for (int s = 0; s <= 40; s += 10) {  // 5 evaluations of 3 blocks, 6 norms each
    b.Add(GradNorms(s, 3), clock.Now());
    b.Add(EvalWithDiagnostics(s, 3), clock.Now());
  }
  // 13 norms or 7 layers: 2 steps each; 3 diagnostic steps at most.
  const BatchLimits limits{100, 13, 3, 7};
  std::vector<int> norm_steps, diag_steps;
  int calls = 0;
  while (!b.empty()) {
    v1::ReportProgressRequest r;
    const PeekedBatch batch = b.Peek(limits, &r);
    int norms = 0, layers = 0;
    for (const v1::LayerGradNorms& g : r.layer_grad_norms()) {
      norms += g.norms_size();
      norm_steps.push_back(g.step());
    }
    for (const v1::StepDiagnostics& d : r.diagnostics()) {
      layers += d.layers_size();
      diag_steps.push_back(d.step());
    }
    EXPECT_LE(norms, 13);
    EXPECT_LE(layers, 7);
    EXPECT_LE(r.diagnostics_size(), 3);
    EXPECT_EQ(batch.norms, r.layer_grad_norms_size());
    EXPECT_EQ(batch.diagnostics, r.diagnostics_size());
    b.Ack(batch);
    ASSERT_LT(++calls, 10);
  }
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(norm_steps, (std::vector<int>{0, 10, 20, 30, 40}));
  EXPECT_EQ(diag_steps, (std::vector<int>{0, 10, 20, 30, 40}));
  // A step larger than the limit still goes (alone), rather than never.
  ProgressBuffer big;
  big.Add(GradNorms(0, 10), clock.Now());
  v1::ReportProgressRequest r;
  EXPECT_EQ(big.Peek(limits, &r).norms, 1);
}

TEST(TrialWatchdogTest, TrialTimeoutAndStall) {
  FakeClock clock;
  TrialWatchdog w(clock.Now(), absl::Seconds(60), absl::Seconds(10), absl::Seconds(3));
  clock.Advance(absl::Seconds(9));
  EXPECT_FALSE(w.Expired(clock.Now()).has_value());
  w.OnEvent(clock.Now());
  clock.Advance(absl::Seconds(9));
  EXPECT_FALSE(w.Expired(clock.Now()).has_value());
  clock.Advance(absl::Seconds(2));
  ASSERT_TRUE(w.Expired(clock.Now()).has_value());
  EXPECT_THAT(*w.Expired(clock.Now()), HasSubstr("no progress event for 11 s"));

  TrialWatchdog t(clock.Now(), absl::Seconds(60), absl::Seconds(10), absl::Seconds(3));
  for (int i = 0; i < 60; ++i) {
    clock.Advance(absl::Seconds(1));
    t.OnEvent(clock.Now());
  }
  EXPECT_FALSE(t.Expired(clock.Now()).has_value());
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(t.Expired(clock.Now()).has_value());
  EXPECT_THAT(*t.Expired(clock.Now()), HasSubstr("trial time limit (--trial-timeout-s=60)"));
}

TEST(TrialWatchdogTest, ZeroDisablesLimits) {
  FakeClock clock;
  TrialWatchdog w(clock.Now(), absl::ZeroDuration(), absl::ZeroDuration(), absl::Seconds(3));
  clock.Advance(absl::Hours(100));
  EXPECT_FALSE(w.Expired(clock.Now()).has_value());
}

TEST(TrialWatchdogTest, SigkillFollowsSigtermAfterKillAfter) {
  FakeClock clock;
  TrialWatchdog w(clock.Now(), absl::ZeroDuration(), absl::ZeroDuration(), absl::Seconds(3));
  EXPECT_FALSE(w.ShouldKill(clock.Now()));
  w.OnTerminate(clock.Now());
  EXPECT_TRUE(w.terminating());
  clock.Advance(absl::Seconds(2));
  w.OnTerminate(clock.Now());  // a second SIGTERM does not restart the wait
  EXPECT_FALSE(w.ShouldKill(clock.Now()));
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(w.ShouldKill(clock.Now()));
}

PollState At(FakeClock& clock, LeaseFlags lease = {}, bool final_seen = false, int last_step = 0,
             bool exited = false) {
  return PollState{clock.Now(), final_seen, exited, last_step, lease};
}

TEST(TrialSupervisorTest, RunningQuietlyDoesNothing) {
  FakeClock clock;
  TrialSupervisor s(clock.Now(), 1000, TestLimits());
  for (int i = 0; i < 50; ++i) {
    clock.Advance(absl::Seconds(1));
    s.OnEvent(clock.Now());
    const PollAction a = s.OnPoll(At(clock, {}, false, i + 1));
    EXPECT_EQ(a.signal, 0);
    EXPECT_EQ(a.log, "");
    EXPECT_FALSE(a.prefetch);  // 950 steps at 1 s each: far from the end
  }
  EXPECT_EQ(s.stop(), TrialStop::kNone);
  EXPECT_EQ(s.stop_reason(), "");
}

TEST(TrialSupervisorTest, StopsOnTheFirstReasonInOrderThenKills) {
  struct Case {
    LeaseFlags lease;
    TrialStop stop;
    const char* reason;
  };
  // LeaseFlags: lost, cancel_requested, drain_expired, expired, refused.
  for (const Case& c :
       {Case{{true, true, true, true, true}, TrialStop::kLost, "the lease was lost"},
        Case{{false, true, true, true, true}, TrialStop::kExpired, "the lease could not be renewed in time"},
        Case{{false, true, true, false, true}, TrialStop::kCancel, "the sweep was cancelled"},
        Case{{false, false, true, false, true}, TrialStop::kRefused, "the scheduler refused its progress"},
        Case{{false, false, true}, TrialStop::kHandBack, "the drain's grace period ended"}}) {
    FakeClock clock;
    TrialSupervisor s(clock.Now(), 100, TestLimits());
    clock.Advance(absl::Seconds(20));  // the watchdog would stop it too: the lease's state comes first
    const PollAction a = s.OnPoll(At(clock, c.lease));
    EXPECT_EQ(a.signal, SIGTERM) << c.reason;
    EXPECT_EQ(a.log, absl::StrCat("stopping (SIGTERM): ", c.reason));
    EXPECT_FALSE(a.prefetch);  // a stopped trial prefetches nothing
    EXPECT_EQ(s.stop(), c.stop);
    EXPECT_EQ(s.stop_reason(), c.reason);
    // Decided once: later flags change nothing, no second SIGTERM.
    clock.Advance(absl::Seconds(1));
    EXPECT_EQ(s.OnPoll(At(clock, {true, true, true, true, true})).signal, 0);
    EXPECT_EQ(s.stop(), c.stop);
    clock.Advance(absl::Seconds(2));  // kill_after since SIGTERM
    const PollAction kill = s.OnPoll(At(clock));
    EXPECT_EQ(kill.signal, SIGKILL);
    EXPECT_EQ(kill.log, "still running 3s after SIGTERM; SIGKILL");
    clock.Advance(absl::Milliseconds(100));
    EXPECT_EQ(s.OnPoll(At(clock, {}, false, 0, /*exited=*/true)).signal, 0);  // gone: nothing more
  }
}

TEST(TrialSupervisorTest, WatchdogStopsAStalledOrOverlongTrial) {
  FakeClock clock;
  TrialSupervisor stalled(clock.Now(), 100, TestLimits());
  clock.Advance(absl::Seconds(10));
  EXPECT_EQ(stalled.OnPoll(At(clock)).signal, 0);
  clock.Advance(absl::Milliseconds(100));
  const PollAction a = stalled.OnPoll(At(clock));
  EXPECT_EQ(a.signal, SIGTERM);
  EXPECT_EQ(stalled.stop(), TrialStop::kTimeout);
  EXPECT_THAT(stalled.stop_reason(), HasSubstr("no progress event for 10.1 s (--stall-timeout-s=10)"));
  EXPECT_THAT(a.log, HasSubstr("stopping (SIGTERM): no progress event"));

  TrialSupervisor overlong(clock.Now(), 100000, TestLimits());
  for (int i = 0; i < 61; ++i) {
    clock.Advance(absl::Seconds(1));
    overlong.OnEvent(clock.Now());
    overlong.OnPoll(At(clock, {}, false, i + 1));
  }
  EXPECT_EQ(overlong.stop(), TrialStop::kTimeout);
  EXPECT_THAT(overlong.stop_reason(), HasSubstr("trial time limit (--trial-timeout-s=60)"));
}

TEST(TrialSupervisorTest, AfterTheFinalEventOnlyALostLeaseCountsAndALingeringProcessIsKilledOnce) {
  FakeClock clock;
  TrialSupervisor s(clock.Now(), 100, TestLimits());
  clock.Advance(absl::Seconds(5));
  // Cancel, drain, an expired lease and refused progress come too late: the
  // outcome stands (the worker's Conclude makes refused progress the
  // trial's failure; the scheduler refuses the outcome of a lease it let go).
  PollAction a = s.OnPoll(At(clock, {false, true, true, true, true}, /*final_seen=*/true, 100));
  EXPECT_EQ(a.signal, 0);
  EXPECT_TRUE(a.prefetch);  // the final event is in: lease the next trial
  EXPECT_EQ(s.stop(), TrialStop::kNone);
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(s.OnPoll(At(clock, {}, true, 100)).signal, 0);  // exactly kill_after: not yet
  clock.Advance(absl::Milliseconds(100));
  a = s.OnPoll(At(clock, {}, true, 100));
  EXPECT_EQ(a.signal, SIGKILL);
  EXPECT_EQ(a.log, "still running 3s after its final event; SIGKILL");
  EXPECT_FALSE(a.prefetch);  // once per trial
  clock.Advance(absl::Seconds(10));
  EXPECT_EQ(s.OnPoll(At(clock, {}, true, 100)).signal, 0);  // once
  EXPECT_EQ(s.stop(), TrialStop::kNone);

  TrialSupervisor lost(clock.Now(), 100, TestLimits());
  a = lost.OnPoll(At(clock, {true, false, false}, true, 100));
  EXPECT_EQ(a.signal, 0);  // it is ending anyway: no signal
  EXPECT_FALSE(a.prefetch);
  EXPECT_EQ(lost.stop(), TrialStop::kLost);
  EXPECT_EQ(lost.stop_reason(), "");
}

TEST(TrialSupervisorTest, PrefetchesOnceNearTheEndByTheStepRate) {
  FakeClock clock;
  TrialSupervisor s(clock.Now(), 100, TestLimits());
  clock.Advance(absl::Seconds(10));
  EXPECT_FALSE(s.OnPoll(At(clock, {}, false, 0)).prefetch);  // no step yet: no rate
  EXPECT_FALSE(s.OnPoll(At(clock, {}, false, 50)).prefetch);  // 50 steps left at 0.2 s: 10 s
  EXPECT_TRUE(s.OnPoll(At(clock, {}, false, 77)).prefetch);   // 23 left at 0.13 s: 2.99 s
  EXPECT_FALSE(s.OnPoll(At(clock, {}, false, 90)).prefetch);  // already tried
}

TEST(ShouldPrefetchTest, FinalEventOrTheRemainingStepsWithinTheLead) {
  const absl::Duration lead = absl::Seconds(3);
  EXPECT_TRUE(ShouldPrefetch(absl::Seconds(1), 0, 100, /*final_seen=*/true, lead));
  EXPECT_FALSE(ShouldPrefetch(absl::Seconds(1), 0, 100, false, lead));
  EXPECT_TRUE(ShouldPrefetch(absl::Seconds(10), 70, 100, false, absl::Seconds(5)));  // 30 x 1/7 s = 4.3 s
  EXPECT_FALSE(ShouldPrefetch(absl::Seconds(10), 70, 100, false, lead));
  EXPECT_TRUE(ShouldPrefetch(absl::Seconds(10), 100, 100, false, lead));  // done stepping
  EXPECT_TRUE(ShouldPrefetch(absl::Seconds(10), 1, 1, false, absl::ZeroDuration()));
}

TEST(MakeTrialLaunchTest, DirectoryConfigAndCommandLine) {
  WorkerOptions options;
  options.work_dir = "/var/w";
  options.trainer_path = "/usr/bin/normsweep-train";
  v1::Trial trial;
  trial.set_id(42);
  trial.set_attempts(2);
  trial.mutable_config()->set_steps(7);
  TrialLaunch l = MakeTrialLaunch(options, SlotSpec{"cuda:1", 4}, trial);
  EXPECT_EQ(l.dir, "/var/w/trial-42-2");
  EXPECT_EQ(l.config.device(), "cuda:1");
  EXPECT_EQ(l.config.threads(), 4);
  EXPECT_EQ(l.config.steps(), 7);
  EXPECT_THAT(TrainerArgv(options, {l}), ::testing::ElementsAre("/usr/bin/normsweep-train", "train", "--config",
                                                                "/var/w/trial-42-2/config.json", "--events", "-"));
  trial.mutable_config()->set_checkpoint_every(5);
  l = MakeTrialLaunch(options, SlotSpec{"cpu", 1}, trial);
  const std::vector<std::string> argv = TrainerArgv(options, {l});
  ASSERT_EQ(argv.size(), 8u);
  EXPECT_EQ(argv[6], "--checkpoint-out");
  EXPECT_EQ(argv[7], "/var/w/trial-42-2/checkpoint.safetensors");
}

TEST(FusedArgvTest, OneConfigListAndACheckpointItemPerTrial) {
  WorkerOptions options;
  options.work_dir = "/var/w";
  options.trainer_path = "/usr/bin/normsweep-train";
  std::vector<TrialLaunch> launches;
  for (int id : {12, 13, 14}) {
    v1::Trial trial;
    trial.set_id(id);
    trial.set_attempts(1);
    launches.push_back(MakeTrialLaunch(options, SlotSpec{"cpu", 2}, trial));
  }
  EXPECT_THAT(TrainerArgv(options, launches),
              ::testing::ElementsAre("/usr/bin/normsweep-train", "train", "--config",
                                     "/var/w/trial-12-1/config.json,/var/w/trial-13-1/config.json,"
                                     "/var/w/trial-14-1/config.json",
                                     "--events", "-"));
  // One writes checkpoints: an item for each, empty for the others.
  launches[1].config.set_checkpoint_every(5);
  const std::vector<std::string> argv = TrainerArgv(options, launches);
  ASSERT_EQ(argv.size(), 8u);
  EXPECT_EQ(argv[6], "--checkpoint-out");
  EXPECT_EQ(argv[7], ",/var/w/trial-13-1/checkpoint.safetensors,");
}

TEST(ResolveSlotsTest, CpuSlotsSplitTheCores) {
  auto s = ResolveSlots("", 3, 0, /*detected_gpus=*/0, /*cores=*/8);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 3u);
  for (const SlotSpec& slot : *s) {
    EXPECT_EQ(slot.device, "cpu");
    EXPECT_EQ(slot.threads, 2);
  }
  auto one = ResolveSlots("", 0, 0, 0, 2);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].threads, 2);
  auto many = ResolveSlots("none", 4, 0, 2, 2);  // more slots than cores: one thread each
  ASSERT_TRUE(many.ok());
  ASSERT_EQ(many->size(), 4u);
  EXPECT_EQ((*many)[3].threads, 1);
  auto fixed = ResolveSlots("", 2, 3, 0, 2);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ((*fixed)[0].threads, 3);
}

TEST(ResolveSlotsTest, OneSlotPerGpu) {
  auto all = ResolveSlots("", 0, 0, 2, 16);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].device, "cuda:0");
  EXPECT_EQ((*all)[1].device, "cuda:1");
  EXPECT_EQ((*all)[1].threads, 8);
  auto listed = ResolveSlots("0,2", 0, 1, 4, 16);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[1].device, "cuda:2");
  EXPECT_EQ((*listed)[1].threads, 1);
  auto none_found = ResolveSlots("all", 0, 0, 0, 4);  // no GPU: one CPU slot
  ASSERT_TRUE(none_found.ok());
  ASSERT_EQ(none_found->size(), 1u);
  EXPECT_EQ((*none_found)[0].device, "cpu");
  auto cpu_only = ResolveSlots("", 2, 0, 4, 8);  // --cpu-slots alone: CPU only
  ASSERT_TRUE(cpu_only.ok());
  EXPECT_EQ(cpu_only->size(), 2u);
  EXPECT_EQ((*cpu_only)[0].device, "cpu");
}

TEST(ResolveSlotsTest, BadValuesNameTheFlag) {
  EXPECT_THAT(std::string(ResolveSlots("0,x", 0, 0, 2, 2).status().message()), HasSubstr("--gpus"));
  EXPECT_THAT(std::string(ResolveSlots("1,1", 0, 0, 2, 2).status().message()), HasSubstr("listed twice"));
  EXPECT_THAT(std::string(ResolveSlots("", -1, 0, 0, 2).status().message()), HasSubstr("--cpu-slots"));
  EXPECT_THAT(std::string(ResolveSlots("", 1, -2, 0, 2).status().message()), HasSubstr("--threads-per-slot"));
}

}  // namespace
}  // namespace normsweep::worker
