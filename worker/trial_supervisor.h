// The per-poll decisions of one running trial, from times and flags only, so
// that tests drive it with a FakeClock's times and no process: when the
// worker stops the trial (lease lost, sweep cancelled, drain over, the
// watchdog's limits) with SIGTERM, when SIGKILL follows (kill_after after
// SIGTERM, or after the final event when the process lingers), and when to
// lease the slot's next trial meanwhile. GroupSupervisor holds one per
// trial of a group and turns what OnPoll says into the group's action.
//
// Owned by the slot thread that runs the trial; not thread-safe.
#ifndef NORMSWEEP_WORKER_TRIAL_SUPERVISOR_H_
#define NORMSWEEP_WORKER_TRIAL_SUPERVISOR_H_

#include <string>

#include "absl/time/time.h"
#include "worker/trial_outcome.h"
#include "worker/trial_watchdog.h"

namespace normsweep::worker {

// The lease's state at one poll, as the heartbeat and reporter threads left it.
struct LeaseFlags {
  bool lost = false;  // the scheduler said so
  bool cancel_requested = false;
  bool drain_expired = false;  // draining and the grace period is over
  bool expired = false;        // not renewed in time: the scheduler may have given it away
  bool refused = false;        // the scheduler refused its progress as invalid
};

// What the slot saw at one poll.
struct PollState {
  absl::Time now;
  bool final_seen = false;  // the final event has arrived (at this poll or before)
  bool exited = false;      // the process has exited
  int last_step = 0;        // the latest step event's step; 0 before the first
  LeaseFlags lease;
};

// What to do after that poll.
struct PollAction {
  int signal = 0;         // send to the process: 0 (none), SIGTERM or SIGKILL
  std::string log;        // a log line to write after the trial's name, or ""
  bool prefetch = false;  // lease the slot's next trial now (at most once per trial)
};

struct SupervisorLimits {
  absl::Duration trial_timeout = absl::ZeroDuration();  // 0: none
  absl::Duration stall_timeout = absl::ZeroDuration();  // 0: none
  absl::Duration kill_after = absl::Seconds(3);
  absl::Duration prefetch_lead = absl::Seconds(3);
};

// Whether the slot's next trial should be leased now: the final event is in,
// or the steps left at the pace so far (elapsed / last_step each) take at
// most `lead`.
bool ShouldPrefetch(absl::Duration elapsed, int last_step, int steps, bool final_seen, absl::Duration lead);

class TrialSupervisor {
 public:
  // started: when the process started; steps: the trial's TrainConfig.steps.
  TrialSupervisor(absl::Time started, int steps, const SupervisorLimits& limits);

  // A progress event arrived at `now`.
  void OnEvent(absl::Time now) { watchdog_.OnEvent(now); }

  // After each poll of the process. Once the final event is in, the run's
  // outcome stands: only a lost lease still stops it (without a signal; an
  // expired one does not: the outcome goes to the scheduler, which refuses
  // it if the lease is gone), and a process still there kill_after later
  // gets SIGKILL. Before it, the first of lost lease, expired lease, cancel,
  // refused progress, drain over and the watchdog's limits sends SIGTERM,
  // and SIGKILL follows kill_after later.
  PollAction OnPoll(const PollState& poll);

  // Why the worker stopped the trial (kNone: it did not), and its words for
  // it (empty for a lease lost after the final event).
  TrialStop stop() const { return stop_; }
  const std::string& stop_reason() const { return stop_reason_; }

 private:
  PollAction AfterFinal(const PollState& poll);
  PollAction BeforeFinal(const PollState& poll);

  const absl::Time started_;
  const int steps_;
  const SupervisorLimits limits_;
  TrialWatchdog watchdog_;
  TrialStop stop_ = TrialStop::kNone;
  std::string stop_reason_;
  absl::Time final_at_ = absl::InfiniteFuture();  // first poll that saw the final event
  bool lingering_killed_ = false;
  bool prefetch_tried_ = false;
};

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_TRIAL_SUPERVISOR_H_
