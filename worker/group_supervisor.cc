#include "worker/group_supervisor.h"

#include <signal.h>

#include <algorithm>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "proto/schema/train_config.h"

namespace normsweep::worker {

TrialEnd GroupMember::End(ProcessEnd process) const {
  return TrialEnd{final_event, std::move(process), supervisor.stop(), supervisor.stop_reason(), step0_val_loss};
}

GroupSupervisor::GroupSupervisor(int size, absl::Time started, int steps, const SupervisorLimits& limits, int pid)
    : limits_(limits), pid_(pid), fused_(size > 1), members_(size, GroupMember(started, steps, limits)) {}

RoutedLine GroupSupervisor::OnLine(const std::string& line, absl::Time now) {
  RoutedLine routed;
  if (line.empty()) return routed;
  absl::StatusOr<v1::TrainEvent> event = schema::TrainEventFromJson(line);
  const int index = event.ok() ? event->fused_index() : -1;
  if (index < 0 || index >= size()) {
    if (bad_lines_++ == 0) {
      routed.log = absl::StrCat("ignoring ", event.ok() ? "an event of no trial of this run" : "a non-event line",
                                ": ", KeepEnd(line, 200));
    }
    return routed;
  }
  GroupMember& m = members_[index];
  m.supervisor.OnEvent(now);
  longest_gap_ = std::max(longest_gap_, now - m.last_event_at);
  m.last_event_at = now;
  routed.member = index;
  routed.event = *std::move(event);
  if (routed.event.type() == "final") {
    m.final_event = routed.event;
  } else if (routed.event.type() == "step") {
    m.last_step = routed.event.step();
  } else if (routed.event.type() == "eval" && routed.event.step() == 0 && routed.event.has_val_loss()) {
    // l0, for a final event without init_val_loss (or no final event at all).
    m.step0_val_loss = routed.event.val_loss();
  }
  return routed;
}

GroupAction GroupSupervisor::OnPoll(absl::Time now, bool exited, const std::vector<LeaseFlags>& flags) {
  GroupAction action;
  std::vector<int> kill_asks;  // members whose supervisors ask for SIGKILL
  std::vector<int> stopping;   // members the supervisors stop at this poll
  for (int i = 0; i < size(); ++i) {
    GroupMember& m = members_[i];
    if (m.concluded) continue;
    const bool final_seen = m.final_event.has_value();
    // A fused trial with its final event is over, whatever its siblings do.
    const bool ended = exited || (fused_ && final_seen);
    const PollAction a = m.supervisor.OnPoll(PollState{now, final_seen, ended, m.last_step, flags[i]});
    if (!a.log.empty()) action.log.push_back({i, a.log});
    if (a.signal == SIGKILL) kill_asks.push_back(i);
    if (a.signal == SIGTERM) {
      stopping.push_back(i);
      m.stopped_at = now;
    }
    if (a.prefetch) m.near_end = true;
  }
  // A member still training: neither stopped by the worker nor ended.
  bool any_training = false, every_near_end = true, any_near_end = false, all_final = true;
  for (const GroupMember& m : members_) {
    const bool running = m.supervisor.stop() == TrialStop::kNone;
    any_training |= running && !m.final_event.has_value();
    all_final &= m.final_event.has_value();
    if (running) {
      every_near_end &= m.near_end;
      any_near_end |= m.near_end;
    }
  }
  bool kill = false;
  for (int i : kill_asks) {
    // While siblings train on, give the trainer its lock step's time.
    const absl::Time stopped_at = members_[i].stopped_at;
    const bool wait = fused_ && any_training && stopped_at != absl::InfiniteFuture() &&
                      now - stopped_at <= limits_.kill_after + 2 * longest_gap_;
    if (!wait) kill = true;
  }
  if (kill) {
    if (fused_ && !exited) action.log.push_back({-1, absl::StrCat("SIGKILL to the fused process (pid ", pid_, ")")});
    action.signal = SIGKILL;
  } else if (!stopping.empty() && !any_training) {
    action.signal = SIGTERM;  // nothing left to train: the whole process
  } else {
    action.cancel = std::move(stopping);
  }
  // Every final event is in (so nothing above signalled): the process should exit.
  if (fused_ && !any_training && !exited && all_final) {
    if (all_final_at_ == absl::InfiniteFuture()) all_final_at_ = now;
    if (!lingering_killed_ && now - all_final_at_ > limits_.kill_after) {
      action.log.push_back({-1, absl::StrCat("still running ", absl::FormatDuration(limits_.kill_after),
                                             " after every final event; SIGKILL")});
      action.signal = SIGKILL;
      lingering_killed_ = true;
    }
  }
  // A fused trial whose final event is in is over: its outcome goes now,
  // not when its siblings end. Not a FAILED one: its error may need the
  // process's exit status and stderr.
  for (int i = 0; fused_ && i < size(); ++i) {
    GroupMember& m = members_[i];
    if (m.concluded || !m.final_event.has_value() || m.final_event->outcome() == "FAILED") continue;
    m.concluded = true;
    action.conclude.push_back(i);
  }
  if (!prefetched_ && any_near_end && every_near_end) {
    prefetched_ = true;
    action.prefetch = true;
  }
  return action;
}

}  // namespace normsweep::worker
