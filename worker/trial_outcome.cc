#include "worker/trial_outcome.h"

#include <signal.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "proto/schema/api_limits.h"
#include "proto/schema/interruptions.h"
#include "proto/schema/state_names.h"

namespace normsweep::worker {
namespace {

std::string TrimmedTail(const std::string& tail) {
  size_t end = tail.find_last_not_of(" \n\r\t");
  return end == std::string::npos ? "" : tail.substr(0, end + 1);
}

// The outcome the trainer's final event reports, when no stop of the
// worker's overrides it.
TrialVerdict FromFinalEvent(const v1::TrainEvent& final_event, const ProcessEnd& process) {
  TrialVerdict v;
  v.result = ResultFromFinal(final_event);
  v.outcome = schema::TrialStateFromName(final_event.outcome());
  if (!schema::IsFinal(v.outcome)) {
    v.outcome = v1::TRIAL_FAILED;
    v.result.set_error(absl::StrCat("trainer reported an unknown outcome '", final_event.outcome(), "'"));
  } else if (v.outcome == v1::TRIAL_FAILED && v.result.error().empty()) {
    v.result.set_error(
        absl::StrCat("normsweep-train ", process.description, "; stderr: ", TrimmedTail(process.stderr_tail)));
  }
  return v;
}

std::string WithStderr(std::string error, const ProcessEnd& process) {
  const std::string tail = TrimmedTail(process.stderr_tail);
  if (!tail.empty()) absl::StrAppend(&error, "; stderr: ", tail);
  return error;
}

// Only called when the worker sent no signal.
TrialVerdict WithoutFinalEvent(const ProcessEnd& process) {
  TrialVerdict v;
  v.outcome = v1::TRIAL_FAILED;
  if (process.term_signal == SIGKILL && process.oom_killed) {
    // It asked for more memory than the machine has: its own failure.
    v.result.set_error(WithStderr(
        absl::StrCat("normsweep-train killed by the OOM killer (", process.description, ") without a final event"),
        process));
    v.retry = true;
    return v;
  }
  v.result.set_error(
      WithStderr(absl::StrCat("normsweep-train ", process.description, " without a final event"), process));
  if (IsKilledFromOutside(process.term_signal)) {
    v.retry = true;
    v.interruption = std::string(schema::kExternalSignal);
  } else {
    // A crash signal or an exit without an outcome: the trial's own failure,
    // run again while attempts remain (the scheduler FAILs it after the last).
    v.retry = true;
  }
  return v;
}

}  // namespace

bool IsKilledFromOutside(int term_signal) {
  switch (term_signal) {
    case SIGKILL:  // kill -9 (or the OOM killer: ProcessEnd.oom_killed)
    case SIGTERM:  // a service manager stopping the machine's processes
    case SIGINT:
    case SIGHUP:
      return true;
    default:  // SIGSEGV, SIGABRT, SIGFPE, SIGILL, SIGBUS: the trainer's own crash
      return false;
  }
}

TrialVerdict DecideOutcome(const TrialEnd& end) {
  TrialVerdict v;
  switch (end.stop) {
    case TrialStop::kLost:
      v.action = TrialVerdict::Action::kForget;
      return v;
    case TrialStop::kExpired:
      v = InterruptionVerdict(end.database_down ? schema::kLeaseLost : schema::kSchedulerRestart,
                      end.database_down ? "the worker stopped the trainer: its lease could not be renewed in time "
                                          "(the scheduler's database was unavailable)"
                                        : "the worker stopped the trainer: its lease could not be renewed in time "
                                          "(no scheduler answered)");
      break;
    case TrialStop::kHandBack:
      v = InterruptionVerdict(schema::kWorkerDrained,
                              "handed back: the worker was drained and the trial outlasted its grace period");
      break;
    case TrialStop::kRefused:
      v = RefusedProgressVerdict(end.stop_reason);
      break;
    case TrialStop::kTimeout:
      v.outcome = v1::TRIAL_FAILED;
      if (end.final_event.has_value()) v.result = ResultFromFinal(*end.final_event);
      v.result.set_error(end.stop_reason);
      break;
    case TrialStop::kCancel:
      v.outcome = v1::TRIAL_CANCELLED;
      if (end.final_event.has_value()) v.result = ResultFromFinal(*end.final_event);
      v.result.clear_error();
      break;
    case TrialStop::kNone:
      v = end.final_event.has_value() ? FromFinalEvent(*end.final_event, end.process) : WithoutFinalEvent(end.process);
      break;
  }
  v.result.set_error(KeepEnd(v.result.error(), schema::kMaxErrorLength));
  if (!v.result.has_init_val_loss() && end.step0_val_loss.has_value() && std::isfinite(*end.step0_val_loss)) {
    v.result.set_init_val_loss(*end.step0_val_loss);
  }
  return v;
}

TrialVerdict InterruptionVerdict(absl::string_view cause, std::string error) {
  TrialVerdict v;
  v.outcome = v1::TRIAL_FAILED;
  v.retry = true;
  v.interruption = std::string(cause);
  v.result.set_error(KeepEnd(std::move(error), schema::kMaxErrorLength));
  return v;
}

bool RefusalDecides(TrialStop stop) {
  return stop == TrialStop::kNone || stop == TrialStop::kHandBack || stop == TrialStop::kRefused;
}

TrialVerdict RefusedProgressVerdict(absl::string_view message) {
  TrialVerdict v;
  v.outcome = v1::TRIAL_FAILED;
  v.retry = true;
  v.result.set_error(
      KeepEnd(absl::StrCat("the scheduler refused the trainer's progress: ", message), schema::kMaxErrorLength));
  return v;
}

TrialVerdict StartFailureVerdict(const absl::Status& status) {
  TrialVerdict v;
  v.outcome = v1::TRIAL_FAILED;
  v.result.set_error(
      KeepEnd(absl::StrCat("worker could not start the trainer: ", status.message()), schema::kMaxErrorLength));
  return v;
}

v1::TrialResult ResultFromFinal(const v1::TrainEvent& e) {
  v1::TrialResult r;
  if (e.has_final_val_loss()) r.set_final_val_loss(e.final_val_loss());
  if (e.has_best_val_loss()) r.set_best_val_loss(e.best_val_loss());
  if (e.has_final_train_loss()) r.set_final_train_loss(e.final_train_loss());
  if (e.has_final_val_accuracy()) r.set_final_val_accuracy(e.final_val_accuracy());
  if (e.has_diverged_step()) r.set_diverged_step(e.diverged_step());
  if (e.has_mean_tokens_per_s()) r.set_tokens_per_s(e.mean_tokens_per_s());
  if (e.has_init_val_loss() && std::isfinite(e.init_val_loss())) r.set_init_val_loss(e.init_val_loss());
  if (e.has_unigram_loss() && std::isfinite(e.unigram_loss())) r.set_unigram_loss(e.unigram_loss());
  if (e.has_val_loss_progress() && std::isfinite(e.val_loss_progress())) {
    r.set_val_loss_progress(e.val_loss_progress());
  }
  r.set_error(e.error());
  return r;
}

std::string KeepEnd(std::string s, size_t n) {
  if (s.size() <= n) return s;
  return "..." + s.substr(s.size() - (n - 3));
}

}  // namespace normsweep::worker
