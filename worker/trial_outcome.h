// What becomes of one trial attempt once its process has ended, decided from
// what the slot saw: the final event (or none), how the process ended, and
// whether the worker itself stopped it and why. Pure functions: tests need
// no process and no scheduler.
#ifndef NORMSWEEP_WORKER_TRIAL_OUTCOME_H_
#define NORMSWEEP_WORKER_TRIAL_OUTCOME_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/train.pb.h"

namespace normsweep::worker {

// Why the worker itself stopped a trial, if it did.
enum class TrialStop {
  kNone,      // it did not: the trainer ended by itself (or the machine killed it)
  kCancel,    // the sweep was cancelled
  kLost,      // the scheduler said the lease was lost
  kExpired,   // the lease could not be renewed in time (Worker's held_until passed)
  kRefused,   // the scheduler refused the trainer's progress as invalid
  kHandBack,  // draining: the grace period ended
  kTimeout,   // the watchdog: trial time limit, or no event for too long
};

// Whether a trainer that ended on this signal, without a final event and
// with no signal sent by the worker, was killed from outside (a SIGKILL,
// SIGTERM, SIGINT or SIGHUP: a service manager, kill -9) rather than by its
// own fault (SIGSEGV, SIGABRT, ...). A SIGKILL of the OOM killer is told
// apart by ProcessEnd.oom_killed.
bool IsKilledFromOutside(int term_signal);

// How the trainer process ended (from TrialProcess).
struct ProcessEnd {
  int term_signal = 0;      // 0 when it exited
  std::string description;  // "exit status 1", "killed by signal 9 (Killed)"
  std::string stderr_tail;
  // The cgroup's oom_kill count grew while it ran (memory_events.h); false
  // when the worker cannot tell.
  bool oom_killed = false;
};

struct TrialEnd {
  std::optional<v1::TrainEvent> final_event;
  ProcessEnd process;
  TrialStop stop = TrialStop::kNone;
  // kTimeout: the watchdog's words; kRefused: the scheduler's refusal. They
  // become the error.
  std::string stop_reason;
  // The val_loss of the trainer's step-0 evaluation (l0), if it printed one.
  std::optional<double> step0_val_loss;
  // kExpired: the failed renewals were answered by a scheduler whose
  // database was down (lease_lost); else no scheduler answered
  // (scheduler_restart).
  bool database_down = false;
};

struct TrialVerdict {
  enum class Action {
    kFinish,  // FinishTrial with outcome, result, retry, interruption
    kForget,  // the lease was lost: report nothing more
  };
  Action action = Action::kFinish;
  v1::TrialState outcome = v1::TRIAL_FAILED;
  v1::TrialResult result;  // error at most kMaxErrorLength
  // FinishTrialRequest.retry: run the trial again. With interruption empty
  // it was the trial's own failure (counted against max_attempts); with it
  // set, one of schema/interruptions.h (counted against max_interruptions).
  bool retry = false;
  std::string interruption;
};

// The outcome of an attempt whose process has ended:
//   lost -> kForget;
//   expired -> FAILED, retry, interruption lease_lost (database_down) or
//     scheduler_restart;
//   handed back -> FAILED, retry, interruption worker_drained;
//   refused -> FAILED, retry (the trial's own failure), the refusal as error;
//   timed out -> FAILED with the watchdog's reason;
//   cancelled -> CANCELLED (the final event's figures, if any, no error);
//   a final event -> its outcome and figures (an unknown outcome is FAILED;
//     FAILED without an error says how the process ended, with its stderr);
//   no final event -> FAILED saying how the process ended, with its stderr,
//     and retry: a signal from outside (IsKilledFromOutside) is an
//     interruption (external_signal), unless it was the OOM killer's SIGKILL;
//     the OOM killer, a crash signal and an exit are the trial's own
//     failure (no interruption).
// Every verdict that finishes the trial carries l0 (result.init_val_loss):
// the final event's, else the step-0 evaluation's; only a finite one.
TrialVerdict DecideOutcome(const TrialEnd& end);

// An interruption with its cause (schema/interruptions.h): FAILED, retry,
// the error saying what happened.
TrialVerdict InterruptionVerdict(absl::string_view cause, std::string error);

// Whether progress refused as invalid makes an attempt that ended with this
// stop the trial's own failure (RefusedProgressVerdict): when the trainer
// ended by itself, was handed back or was stopped for the refusal; not when
// the lease was lost or expired, the sweep cancelled or the watchdog fired.
bool RefusalDecides(TrialStop stop);

// The scheduler refused the attempt's progress as invalid (INVALID_ARGUMENT:
// the trainer sent values the API rejects): FAILED, retry, the trial's own
// failure, error "the scheduler refused the trainer's progress: <message>".
TrialVerdict RefusedProgressVerdict(absl::string_view message);

// The trainer could not be started: FAILED with the reason.
TrialVerdict StartFailureVerdict(const absl::Status& status);

// The final event's figures (init_val_loss only when finite).
v1::TrialResult ResultFromFinal(const v1::TrainEvent& final_event);

// s cut to at most n bytes, keeping its end behind "..." (the last lines of
// stderr say the most). n >= 3.
std::string KeepEnd(std::string s, size_t n);

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_TRIAL_OUTCOME_H_
