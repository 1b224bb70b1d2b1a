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
#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/train.pb.h"

namespace normsweep::worker {

// Why the worker itself stopped a trial, if it did.
enum class TrialStop {
  kNone,      // it did not: the trainer ended by itself (or the machine killed it)
  kCancel,    // the sweep was cancelled
  kLost,      // the lease was lost
  kHandBack,  // draining: the grace period ended
  kTimeout,   // the watchdog: trial time limit, or no event for too long
};

// Whether a trainer that ended on this signal, without a final event and
// with no signal sent by the worker, was killed by the machine (the OOM
// killer, a SIGKILL or SIGTERM from outside) rather than by its own fault
// (SIGSEGV, SIGABRT, ...): such a trial is run again (FinishTrialRequest.retry).
bool IsKilledFromOutside(int term_signal);

// How the trainer process ended (from TrialProcess).
struct ProcessEnd {
  int term_signal = 0;      // 0 when it exited
  std::string description;  // "exit status 1", "killed by signal 9 (Killed)"
  std::string stderr_tail;
};

struct TrialEnd {
  std::optional<v1::TrainEvent> final_event;
  ProcessEnd process;
  TrialStop stop = TrialStop::kNone;
  std::string stop_reason;  // kTimeout: the watchdog's words, which become the error
  // The val_loss of the trainer's step-0 evaluation (l0), if it printed one.
  std::optional<double> step0_val_loss;
};

struct TrialVerdict {
  enum class Action {
    kFinish,    // FinishTrial with outcome, result, retry
    kForget,    // the lease was lost: report nothing more
    kHandBack,  // send the progress, not FinishTrial; the lease expires
  };
  Action action = Action::kFinish;
  v1::TrialState outcome = v1::TRIAL_FAILED;
  v1::TrialResult result;  // error at most kMaxErrorLength
  bool retry = false;      // FinishTrialRequest.retry: not the trial's fault
};

// The outcome of an attempt whose process has ended:
//   lost -> kForget; handed back -> kHandBack;
//   timed out -> FAILED with the watchdog's reason;
//   cancelled -> CANCELLED (the final event's figures, if any, no error);
//   a final event -> its outcome and figures (an unknown outcome is FAILED;
//     FAILED without an error says how the process ended, with its stderr);
//   no final event -> FAILED saying how the process ended, with its stderr,
//     and retry when a signal from outside ended it (IsKilledFromOutside).
// Every verdict that finishes the trial carries l0 (result.init_val_loss):
// the final event's, else the step-0 evaluation's; only a finite one.
TrialVerdict DecideOutcome(const TrialEnd& end);

// The trainer could not be started: FAILED with the reason.
TrialVerdict StartFailureVerdict(const absl::Status& status);

// The final event's figures (init_val_loss only when finite).
v1::TrialResult ResultFromFinal(const v1::TrainEvent& final_event);

// s cut to at most n bytes, keeping its end behind "..." (the last lines of
// stderr say the most). n >= 3.
std::string KeepEnd(std::string s, size_t n);

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_TRIAL_OUTCOME_H_
