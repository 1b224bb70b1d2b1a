// The decisions about one trainer process running a group of trials (one,
// or several fused), from its output lines, times and lease flags only, so
// that tests drive it with a FakeClock's times and no process: which
// member each event belongs to, which member its TrialSupervisor stops and
// whether that is `cancel I` on the trainer's stdin or a signal to the whole
// process, when SIGKILL follows, which fused member is concluded before the
// process ends, and when to lease the slot's next group. Worker::Supervise
// reads the process and carries out what OnPoll says.
//
// Owned by the slot thread that runs the group; not thread-safe.
#ifndef NORMSWEEP_WORKER_GROUP_SUPERVISOR_H_
#define NORMSWEEP_WORKER_GROUP_SUPERVISOR_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "normsweep/v1/train.pb.h"
#include "worker/trial_outcome.h"
#include "worker/trial_supervisor.h"

namespace normsweep::worker {

// One trial of the group: what the trainer printed for it and what was
// decided about it.
struct GroupMember {
  GroupMember(absl::Time started, int steps, const SupervisorLimits& limits)
      : supervisor(started, steps, limits), last_event_at(started) {}

  // What the process's end leaves for DecideOutcome (without the lease's
  // state: the database_down of an expired lease, refused progress).
  TrialEnd End(ProcessEnd process) const;

  TrialSupervisor supervisor;
  std::optional<v1::TrainEvent> final_event;
  int last_step = 0;                     // the latest step event's step
  std::optional<double> step0_val_loss;  // the evaluation before the first update (l0)
  absl::Time last_event_at;              // when its latest event (or the process) came
  absl::Time stopped_at = absl::InfiniteFuture();  // when its supervisor stopped it
  bool near_end = false;   // its supervisor asked for the next lease
  bool concluded = false;  // its outcome went before the process ended
};

// One line of the trainer's stdout.
struct RoutedLine {
  int member = -1;  // the member the event belongs to; -1: the line is ignored
  v1::TrainEvent event;
  std::string log;  // a log line to write after the first member's name, or ""
};

// A log line to write after a member's name, or the group's when member is -1.
struct GroupLog {
  int member = -1;
  std::string text;
};

// What to do after a poll, in this order.
struct GroupAction {
  std::vector<GroupLog> log;
  int signal = 0;             // to the whole process: 0 (none), SIGTERM or SIGKILL
  std::vector<int> cancel;    // members to stop alone: `cancel I` on the trainer's stdin
  std::vector<int> conclude;  // fused members whose outcome goes now
  bool prefetch = false;      // lease the slot's next group now (at most once)
};

class GroupSupervisor {
 public:
  // size: the group's trials, 1 or more; started: when the process started;
  // steps: their TrainConfig.steps; pid: the process's, for the log.
  GroupSupervisor(int size, absl::Time started, int steps, const SupervisorLimits& limits, int pid);

  // A line of the trainer's stdout, read at `now`: routed to its member by
  // fused_index, which records its step, l0 and final event. The first line
  // that is no event of this group's is logged, the rest only ignored.
  RoutedLine OnLine(const std::string& line, absl::Time now);

  // After each poll of the process. flags: each member's lease (read for
  // members not concluded only); exited: the process has exited.
  //  - Each member's TrialSupervisor decides; a fused member whose final
  //    event is in counts as ended, whatever its siblings do.
  //  - A member stopped gets `cancel I` while any sibling still trains; the
  //    process gets SIGTERM once none does (a drain's stop is one SIGTERM).
  //  - SIGKILL when a member's supervisor asks for it, except while siblings
  //    still train and the member was stopped at most kill_after plus twice
  //    the longest gap seen between two events of one trial ago (it ends at
  //    its next step in the trainer's lock step); and, fused, once every
  //    member's final event is in and the process lingers kill_after later.
  //  - A fused member whose final event is in, other than FAILED (its error
  //    may need the exit status and stderr), is concluded at once.
  //  - The next group is leased once every member still running is near
  //    its end.
  GroupAction OnPoll(absl::Time now, bool exited, const std::vector<LeaseFlags>& flags);

  int size() const { return static_cast<int>(members_.size()); }
  const GroupMember& member(int i) const { return members_[i]; }

 private:
  const SupervisorLimits limits_;
  const int pid_;
  const bool fused_;
  std::vector<GroupMember> members_;
  absl::Duration longest_gap_ = absl::ZeroDuration();  // between two events of one member
  int bad_lines_ = 0;
  absl::Time all_final_at_ = absl::InfiniteFuture();  // fused: when every final event was in
  bool lingering_killed_ = false;
  bool prefetched_ = false;
};

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_GROUP_SUPERVISOR_H_
