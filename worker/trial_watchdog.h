// Decides when a running trial must be stopped, from times only, so that
// tests drive it with a FakeClock: the trial ran past its time limit, or
// printed no event for too long; and, once stopped with SIGTERM, when to
// escalate to SIGKILL.
//
// Owned by the slot thread that runs the trial; not thread-safe.
#ifndef NORMSWEEP_WORKER_TRIAL_WATCHDOG_H_
#define NORMSWEEP_WORKER_TRIAL_WATCHDOG_H_

#include <cmath>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace normsweep::worker {

class TrialWatchdog {
 public:
  // Zero durations disable that limit.
  TrialWatchdog(absl::Time started, absl::Duration trial_timeout, absl::Duration stall_timeout,
                absl::Duration kill_after)
      : started_(started),
        last_event_(started),
        trial_timeout_(trial_timeout),
        stall_timeout_(stall_timeout),
        kill_after_(kill_after) {}

  void OnEvent(absl::Time now) { last_event_ = now; }

  // Why the trial must be stopped now, if it must.
  std::optional<std::string> Expired(absl::Time now) const {
    if (trial_timeout_ > absl::ZeroDuration() && now - started_ > trial_timeout_) {
      return absl::StrCat("exceeded the trial time limit (--trial-timeout-s=",
                          absl::ToDoubleSeconds(trial_timeout_), ")");
    }
    if (stall_timeout_ > absl::ZeroDuration() && now - last_event_ > stall_timeout_) {
      return absl::StrCat("no progress event for ", std::round(absl::ToDoubleSeconds(now - last_event_) * 10) / 10,
                          " s (--stall-timeout-s=", absl::ToDoubleSeconds(stall_timeout_), ")");
    }
    return std::nullopt;
  }

  // SIGTERM went out at `now`.
  void OnTerminate(absl::Time now) {
    if (!terminating()) terminated_at_ = now;
  }
  bool terminating() const { return terminated_at_ != absl::InfiniteFuture(); }
  // SIGTERM was sent kill_after ago and the process is still there.
  bool ShouldKill(absl::Time now) const { return terminating() && now - terminated_at_ >= kill_after_; }

 private:
  const absl::Time started_;
  absl::Time last_event_;
  const absl::Duration trial_timeout_;
  const absl::Duration stall_timeout_;
  const absl::Duration kill_after_;
  absl::Time terminated_at_ = absl::InfiniteFuture();  // when SIGTERM went out
};

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_TRIAL_WATCHDOG_H_
