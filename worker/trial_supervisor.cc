#include "worker/trial_supervisor.h"

#include <signal.h>

#include "absl/strings/str_cat.h"

namespace normsweep::worker {

bool ShouldPrefetch(absl::Duration elapsed, int last_step, int steps, bool final_seen, absl::Duration lead) {
  if (final_seen) return true;
  return last_step > 0 && elapsed / last_step * (steps - last_step) <= lead;
}

TrialSupervisor::TrialSupervisor(absl::Time started, int steps, const SupervisorLimits& limits)
    : started_(started),
      steps_(steps),
      limits_(limits),
      watchdog_(started, limits.trial_timeout, limits.stall_timeout, limits.kill_after) {}

PollAction TrialSupervisor::OnPoll(const PollState& poll) {
  PollAction action;
  if (poll.final_seen && stop_ == TrialStop::kNone) {
    action = AfterFinal(poll);
  } else if (stop_ == TrialStop::kNone) {
    action = BeforeFinal(poll);
  } else if (watchdog_.ShouldKill(poll.now) && !poll.exited) {
    action.signal = SIGKILL;
    action.log = absl::StrCat("still running ", absl::FormatDuration(limits_.kill_after), " after SIGTERM; SIGKILL");
  }
  if (!prefetch_tried_ && stop_ == TrialStop::kNone &&
      ShouldPrefetch(poll.now - started_, poll.last_step, steps_, poll.final_seen, limits_.prefetch_lead)) {
    prefetch_tried_ = true;
    action.prefetch = true;
  }
  return action;
}

PollAction TrialSupervisor::AfterFinal(const PollState& poll) {
  PollAction action;
  if (poll.lease.lost) stop_ = TrialStop::kLost;
  if (final_at_ == absl::InfiniteFuture()) final_at_ = poll.now;
  if (!lingering_killed_ && !poll.exited && poll.now - final_at_ > limits_.kill_after) {
    action.signal = SIGKILL;
    action.log =
        absl::StrCat("still running ", absl::FormatDuration(limits_.kill_after), " after its final event; SIGKILL");
    lingering_killed_ = true;
  }
  return action;
}

PollAction TrialSupervisor::BeforeFinal(const PollState& poll) {
  PollAction action;
  if (poll.lease.lost) {
    stop_ = TrialStop::kLost;
    stop_reason_ = "the lease was lost";
  } else if (poll.lease.expired) {
    stop_ = TrialStop::kExpired;
    stop_reason_ = "the lease could not be renewed in time";
  } else if (poll.lease.cancel_requested) {
    stop_ = TrialStop::kCancel;
    stop_reason_ = "the sweep was cancelled";
  } else if (poll.lease.refused) {
    stop_ = TrialStop::kRefused;
    stop_reason_ = "the scheduler refused its progress";
  } else if (poll.lease.drain_expired) {
    stop_ = TrialStop::kHandBack;
    stop_reason_ = "the drain's grace period ended";
  } else if (std::optional<std::string> why = watchdog_.Expired(poll.now)) {
    stop_ = TrialStop::kTimeout;
    stop_reason_ = *why;
  }
  if (stop_ != TrialStop::kNone) {
    action.signal = SIGTERM;
    action.log = absl::StrCat("stopping (SIGTERM): ", stop_reason_);
    watchdog_.OnTerminate(poll.now);
  }
  return action;
}

}  // namespace normsweep::worker
