// DecideOutcome, every branch: what the slot saw (final event or not, how
// the process ended, whether and why the worker stopped it) to the outcome,
// the error, FinishTrialRequest.retry and its interruption. No process, no
// scheduler.
#include "worker/trial_outcome.h"

#include <signal.h>

#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/schema/api_limits.h"

namespace normsweep::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Action = TrialVerdict::Action;

v1::TrainEvent Final(const std::string& outcome, const std::string& error = "") {
  v1::TrainEvent e;
  e.set_type("final");
  e.set_outcome(outcome);
  e.set_error(error);
  e.set_final_val_loss(2.5);
  e.set_best_val_loss(2.25);
  e.set_final_train_loss(2.75);
  e.set_final_val_accuracy(0.5);
  e.set_mean_tokens_per_s(1234);
  return e;
}

ProcessEnd Exited(int code, const std::string& stderr_tail = "") {
  return ProcessEnd{0, absl::StrCat("exit status ", code), stderr_tail};
}

ProcessEnd Killed(int sig, const std::string& stderr_tail = "") {
  return ProcessEnd{sig, absl::StrCat("killed by signal ", sig), stderr_tail};
}

TrialEnd End(std::optional<v1::TrainEvent> final_event, ProcessEnd process, TrialStop stop = TrialStop::kNone,
             std::string reason = "") {
  TrialEnd end;
  end.final_event = std::move(final_event);
  end.process = std::move(process);
  end.stop = stop;
  end.stop_reason = std::move(reason);
  return end;
}

TEST(DecideOutcomeTest, LostLeaseIsForgottenWithOrWithoutAFinalEvent) {
  EXPECT_EQ(DecideOutcome(End(std::nullopt, Killed(SIGTERM), TrialStop::kLost, "the lease was lost")).action,
            Action::kForget);
  EXPECT_EQ(DecideOutcome(End(Final("SUCCEEDED"), Exited(0), TrialStop::kLost)).action, Action::kForget);
}

TEST(DecideOutcomeTest, HandedBackIsAWorkerDrainedInterruption) {
  for (const std::optional<v1::TrainEvent>& final_event :
       {std::optional<v1::TrainEvent>(), std::optional(Final("CANCELLED"))}) {
    TrialVerdict v = DecideOutcome(End(final_event, Killed(SIGTERM), TrialStop::kHandBack, "grace"));
    EXPECT_EQ(v.action, Action::kFinish);
    EXPECT_EQ(v.outcome, v1::TRIAL_FAILED);
    EXPECT_TRUE(v.retry);
    EXPECT_EQ(v.interruption, "worker_drained");
    EXPECT_EQ(v.result.error(), "handed back: the worker was drained and the trial outlasted its grace period");
    EXPECT_FALSE(v.result.has_final_val_loss());  // the trainer's CANCELLED figures are not the trial's
  }
}

TEST(DecideOutcomeTest, ALeaseThatCouldNotBeRenewedIsLeaseLostOrSchedulerRestart) {
  TrialEnd end = End(std::nullopt, Killed(SIGTERM), TrialStop::kExpired, "the lease could not be renewed in time");
  end.database_down = true;
  TrialVerdict v = DecideOutcome(end);
  EXPECT_EQ(v.action, Action::kFinish);
  EXPECT_EQ(v.outcome, v1::TRIAL_FAILED);
  EXPECT_TRUE(v.retry);
  EXPECT_EQ(v.interruption, "lease_lost");
  EXPECT_EQ(v.result.error(),
            "the worker stopped the trainer: its lease could not be renewed in time (the scheduler's database was "
            "unavailable)");
  end.database_down = false;
  end.final_event = Final("CANCELLED");  // its answer to the SIGTERM
  v = DecideOutcome(end);
  EXPECT_TRUE(v.retry);
  EXPECT_EQ(v.interruption, "scheduler_restart");
  EXPECT_EQ(v.result.error(),
            "the worker stopped the trainer: its lease could not be renewed in time (no scheduler answered)");
}

TEST(DecideOutcomeTest, RefusedProgressIsTheTrialsOwnFailure) {
  TrialVerdict v =
      DecideOutcome(End(Final("SUCCEEDED"), Exited(0), TrialStop::kRefused, "points[0].train_loss: must be finite"));
  EXPECT_EQ(v.action, Action::kFinish);
  EXPECT_EQ(v.outcome, v1::TRIAL_FAILED);
  EXPECT_TRUE(v.retry);
  EXPECT_EQ(v.interruption, "");
  EXPECT_EQ(v.result.error(), "the scheduler refused the trainer's progress: points[0].train_loss: must be finite");
  EXPECT_FALSE(v.result.has_final_val_loss());
  v = RefusedProgressVerdict(std::string(5000, 'm'));
  EXPECT_EQ(v.result.error().size(), static_cast<size_t>(schema::kMaxErrorLength));
  // A refusal decides an attempt the trainer ended itself or that was handed
  // back; not one lost, given up, cancelled or timed out.
  for (TrialStop stop : {TrialStop::kNone, TrialStop::kHandBack, TrialStop::kRefused}) {
    EXPECT_TRUE(RefusalDecides(stop)) << static_cast<int>(stop);
  }
  for (TrialStop stop : {TrialStop::kLost, TrialStop::kExpired, TrialStop::kCancel, TrialStop::kTimeout}) {
    EXPECT_FALSE(RefusalDecides(stop)) << static_cast<int>(stop);
  }
}

TEST(DecideOutcomeTest, TimeoutFailsWithTheWatchdogsWords) {
  TrialVerdict v = DecideOutcome(End(std::nullopt, Killed(SIGTERM), TrialStop::kTimeout, "no progress event for 11 s"));
  EXPECT_EQ(v.action, Action::kFinish);
  EXPECT_EQ(v.outcome, v1::TRIAL_FAILED);
  EXPECT_EQ(v.result.error(), "no progress event for 11 s");
  EXPECT_FALSE(v.result.has_final_val_loss());
  EXPECT_FALSE(v.retry);  // the worker stopped it: the trial's own fault, FAILED at once
  EXPECT_EQ(v.interruption, "");
  // A final event that came in meanwhile keeps its figures; the error is the timeout.
  v = DecideOutcome(End(Final("FAILED", "its own"), Exited(0), TrialStop::kTimeout, "time limit"));
  EXPECT_EQ(v.outcome, v1::TRIAL_FAILED);
  EXPECT_EQ(v.result.error(), "time limit");
  EXPECT_DOUBLE_EQ(v.result.final_val_loss(), 2.5);
}

TEST(DecideOutcomeTest, CancelIsCancelledWithoutAnError) {
  TrialVerdict v = DecideOutcome(End(std::nullopt, Killed(SIGTERM), TrialStop::kCancel, "the sweep was cancelled"));
  EXPECT_EQ(v.action, Action::kFinish);
  EXPECT_EQ(v.outcome, v1::TRIAL_CANCELLED);
  EXPECT_EQ(v.result.error(), "");
  EXPECT_FALSE(v.retry);
  v = DecideOutcome(End(Final("CANCELLED", "stopped on SIGTERM"), Exited(0), TrialStop::kCancel));
  EXPECT_EQ(v.outcome, v1::TRIAL_CANCELLED);
  EXPECT_EQ(v.result.error(), "");
  EXPECT_DOUBLE_EQ(v.result.best_val_loss(), 2.25);
}

TEST(DecideOutcomeTest, TheFinalEventsOutcomeAndFigures) {
  TrialVerdict v = DecideOutcome(End(Final("SUCCEEDED"), Exited(0)));
  EXPECT_EQ(v.action, Action::kFinish);
  EXPECT_EQ(v.outcome, v1::TRIAL_SUCCEEDED);
  EXPECT_FALSE(v.retry);
  EXPECT_EQ(v.result.error(), "");
  EXPECT_DOUBLE_EQ(v.result.final_val_loss(), 2.5);
  EXPECT_DOUBLE_EQ(v.result.best_val_loss(), 2.25);
  EXPECT_DOUBLE_EQ(v.result.final_train_loss(), 2.75);
  EXPECT_DOUBLE_EQ(v.result.final_val_accuracy(), 0.5);
  EXPECT_DOUBLE_EQ(v.result.tokens_per_s(), 1234);
  EXPECT_FALSE(v.result.has_diverged_step());

  v1::TrainEvent diverged = Final("DIVERGED");
  diverged.set_diverged_step(17);
  v = DecideOutcome(End(diverged, Exited(0)));
  EXPECT_EQ(v.outcome, v1::TRIAL_DIVERGED);
  EXPECT_EQ(v.result.diverged_step(), 17);
  // The trainer's own cancellation (it got SIGTERM from the machine and said so).
  EXPECT_EQ(DecideOutcome(End(Final("CANCELLED"), Killed(SIGTERM))).outcome, v1::TRIAL_CANCELLED);
}

TEST(DecideOutcomeTest, FailedFinalEventKeepsItsErrorOrSaysHowTheProcessEnded) {
  TrialVerdict v = DecideOutcome(End(Final("FAILED", "cannot read data_file"), Exited(1, "ignored\n")));
  EXPECT_EQ(v.outcome, v1::TRIAL_FAILED);
  EXPECT_EQ(v.result.error(), "cannot read data_file");
  EXPECT_FALSE(v.retry);
  v = DecideOutcome(End(Final("FAILED"), Exited(1, "boom\n\n")));
  EXPECT_EQ(v.result.error(), "normsweep-train exit status 1; stderr: boom");
  EXPECT_FALSE(v.retry);
}

TEST(DecideOutcomeTest, AnUnknownOrUnfinishedOutcomeFails) {
  TrialVerdict v = DecideOutcome(End(Final("EXPLODED"), Exited(0)));
  EXPECT_EQ(v.outcome, v1::TRIAL_FAILED);
  EXPECT_EQ(v.result.error(), "trainer reported an unknown outcome 'EXPLODED'");
  for (const char* name : {"PENDING", "RUNNING", "UNSPECIFIED", "STATE_UNSPECIFIED", "succeeded", ""}) {
    v = DecideOutcome(End(Final(name), Exited(0)));
    EXPECT_EQ(v.outcome, v1::TRIAL_FAILED) << name;
    EXPECT_THAT(v.result.error(), HasSubstr("unknown outcome")) << name;
    EXPECT_FALSE(v.retry);
  }
}

// An exit without an outcome is the trial's own failure: run again while
// attempts remain (FinishTrialRequest.retry without an interruption).
TEST(DecideOutcomeTest, NoFinalEventFailsSayingHowTheProcessEndedAndIsRetried) {
  TrialVerdict v = DecideOutcome(End(std::nullopt, Exited(3, "Traceback\nValueError\n")));
  EXPECT_EQ(v.action, Action::kFinish);
  EXPECT_EQ(v.outcome, v1::TRIAL_FAILED);
  EXPECT_EQ(v.result.error(), "normsweep-train exit status 3 without a final event; stderr: Traceback\nValueError");
  EXPECT_TRUE(v.retry);
  EXPECT_EQ(v.interruption, "");
  v = DecideOutcome(End(std::nullopt, Exited(0, " \n")));  // nothing on stderr: no "; stderr"
  EXPECT_EQ(v.result.error(), "normsweep-train exit status 0 without a final event");
  EXPECT_TRUE(v.retry);
  EXPECT_EQ(v.interruption, "");
}

TEST(DecideOutcomeTest, KilledFromOutsideIsAnInterruptionItsOwnCrashIsItsFailure) {
  for (int sig : {SIGKILL, SIGTERM, SIGINT, SIGHUP}) {
    TrialVerdict v = DecideOutcome(End(std::nullopt, Killed(sig)));
    EXPECT_EQ(v.outcome, v1::TRIAL_FAILED) << sig;
    EXPECT_TRUE(v.retry) << sig;
    EXPECT_EQ(v.interruption, "external_signal") << sig;
    EXPECT_EQ(v.result.error(), absl::StrCat("normsweep-train killed by signal ", sig, " without a final event"));
  }
  for (int sig : {SIGSEGV, SIGABRT, SIGFPE, SIGILL, SIGBUS}) {
    TrialVerdict v = DecideOutcome(End(std::nullopt, Killed(sig, "Segmentation fault")));
    EXPECT_EQ(v.outcome, v1::TRIAL_FAILED) << sig;
    EXPECT_TRUE(v.retry) << sig;
    EXPECT_EQ(v.interruption, "") << sig;
    EXPECT_THAT(v.result.error(), HasSubstr("; stderr: Segmentation fault"));
  }
  // A final event came first: the outcome stands whatever killed the process after.
  TrialVerdict v = DecideOutcome(End(Final("SUCCEEDED"), Killed(SIGKILL)));
  EXPECT_FALSE(v.retry);
  EXPECT_EQ(v.interruption, "");
  // The worker's own SIGTERM (kTimeout, kCancel) is never the machine's.
  v = DecideOutcome(End(std::nullopt, Killed(SIGKILL), TrialStop::kTimeout, "t"));
  EXPECT_FALSE(v.retry);
  EXPECT_EQ(v.interruption, "");
}

// A SIGKILL while the cgroup's oom_kill count grew: the OOM killer's, the
// trial's own failure. Any other ending is decided as without the count.
TEST(DecideOutcomeTest, TheOomKillersSigkillIsTheTrialsOwnFailure) {
  ProcessEnd oom = Killed(SIGKILL, "allocating 80 GB");
  oom.oom_killed = true;
  TrialVerdict v = DecideOutcome(End(std::nullopt, oom));
  EXPECT_EQ(v.outcome, v1::TRIAL_FAILED);
  EXPECT_TRUE(v.retry);
  EXPECT_EQ(v.interruption, "");
  EXPECT_EQ(v.result.error(),
            "normsweep-train killed by the OOM killer (killed by signal 9) without a final event; stderr: allocating "
            "80 GB");
  ProcessEnd term = Killed(SIGTERM);
  term.oom_killed = true;  // another process's OOM kill meanwhile
  EXPECT_EQ(DecideOutcome(End(std::nullopt, term)).interruption, "external_signal");
  ProcessEnd segv = Killed(SIGSEGV);
  segv.oom_killed = true;
  v = DecideOutcome(End(std::nullopt, segv));
  EXPECT_EQ(v.interruption, "");
  EXPECT_THAT(v.result.error(), Not(HasSubstr("OOM")));
  // Its final event came first: the outcome stands.
  EXPECT_EQ(DecideOutcome(End(Final("SUCCEEDED"), oom)).outcome, v1::TRIAL_SUCCEEDED);
}

TEST(DecideOutcomeTest, ErrorsAreCutToTheApiLimitKeepingTheEnd) {
  const std::string tail = std::string(10000, 'x') + "the last line";
  TrialVerdict v = DecideOutcome(End(std::nullopt, Exited(1, tail)));
  ASSERT_EQ(v.result.error().size(), static_cast<size_t>(schema::kMaxErrorLength));
  EXPECT_EQ(v.result.error().substr(0, 4), "...x");
  EXPECT_THAT(v.result.error(), ::testing::EndsWith("the last line"));
  v = DecideOutcome(End(Final("FAILED", std::string(5000, 'e')), Exited(0)));
  EXPECT_EQ(v.result.error().size(), static_cast<size_t>(schema::kMaxErrorLength));
  v = DecideOutcome(End(std::nullopt, Killed(SIGTERM), TrialStop::kTimeout, std::string(5000, 'r')));
  EXPECT_EQ(v.result.error().size(), static_cast<size_t>(schema::kMaxErrorLength));
}

TEST(DecideOutcomeTest, StartFailure) {
  TrialVerdict v = StartFailureVerdict(absl::FailedPreconditionError("cannot create /w/trial-1-1: Permission denied"));
  EXPECT_EQ(v.action, Action::kFinish);
  EXPECT_EQ(v.outcome, v1::TRIAL_FAILED);
  EXPECT_FALSE(v.retry);
  EXPECT_EQ(v.interruption, "");
  EXPECT_EQ(v.result.error(), "worker could not start the trainer: cannot create /w/trial-1-1: Permission denied");
  v = StartFailureVerdict(absl::InternalError(std::string(5000, 'z')));
  EXPECT_EQ(v.result.error().size(), static_cast<size_t>(schema::kMaxErrorLength));
}

TEST(DecideOutcomeTest, KeepEnd) {
  EXPECT_EQ(KeepEnd("short", 10), "short");
  EXPECT_EQ(KeepEnd("0123456789", 10), "0123456789");
  EXPECT_EQ(KeepEnd("0123456789ab", 10), "...56789ab");
}

TEST(DecideOutcomeTest, InitialLossFromTheFinalEventElseTheStepZeroEvaluation) {
  v1::TrainEvent with_l0 = Final("SUCCEEDED");
  with_l0.set_init_val_loss(5.5);
  TrialEnd end = End(with_l0, Exited(0));
  end.step0_val_loss = 5.25;
  EXPECT_DOUBLE_EQ(DecideOutcome(end).result.init_val_loss(), 5.5);  // the final event's word wins
  // A final event without it (a run resumed from a checkpoint prints none):
  // the step-0 evaluation's val_loss, if the worker saw one.
  end = End(Final("DIVERGED"), Exited(0));
  EXPECT_FALSE(DecideOutcome(end).result.has_init_val_loss());
  end.step0_val_loss = 5.25;
  EXPECT_DOUBLE_EQ(DecideOutcome(end).result.init_val_loss(), 5.25);
  // No final event, a cancel, a timeout: l0 is still known.
  end = End(std::nullopt, Exited(3));
  end.step0_val_loss = 5.0;
  EXPECT_DOUBLE_EQ(DecideOutcome(end).result.init_val_loss(), 5.0);
  end = End(std::nullopt, Killed(SIGTERM), TrialStop::kCancel);
  end.step0_val_loss = 5.0;
  EXPECT_DOUBLE_EQ(DecideOutcome(end).result.init_val_loss(), 5.0);
  end = End(std::nullopt, Killed(SIGTERM), TrialStop::kTimeout, "too long");
  end.step0_val_loss = 5.0;
  EXPECT_DOUBLE_EQ(DecideOutcome(end).result.init_val_loss(), 5.0);
  // Only finite values (the API refuses others).
  with_l0.set_init_val_loss(std::numeric_limits<double>::quiet_NaN());
  end = End(with_l0, Exited(0));
  EXPECT_FALSE(DecideOutcome(end).result.has_init_val_loss());
  end.step0_val_loss = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(DecideOutcome(end).result.has_init_val_loss());
  end.step0_val_loss = 4.75;
  EXPECT_DOUBLE_EQ(DecideOutcome(end).result.init_val_loss(), 4.75);
}

TEST(IsKilledFromOutsideTest, MachineSignalsYesCrashesNo) {
  for (int sig : {SIGKILL, SIGTERM, SIGINT, SIGHUP}) EXPECT_TRUE(IsKilledFromOutside(sig)) << sig;
  for (int sig : {0, SIGSEGV, SIGABRT, SIGFPE, SIGILL, SIGBUS}) EXPECT_FALSE(IsKilledFromOutside(sig)) << sig;
}

}  // namespace
}  // namespace normsweep::worker
