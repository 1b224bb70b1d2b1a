// The worker daemon: Worker registers with the scheduler, keeps every slot
// busy with leased trials (one trainer process per group of one or more),
// and drains on request. Run starts a thread per slot, the reporter
// (reporter.h) and the heartbeat, and joins them all before it returns;
// leases_.mu guards the leases and the fields marked below, and no call to
// the scheduler is made while holding it. The design: worker/README.md.
#ifndef NORMSWEEP_WORKER_WORKER_H_
#define NORMSWEEP_WORKER_WORKER_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "normsweep/v1/worker_service.pb.h"
#include "worker/group_supervisor.h"
#include "worker/lease.h"
#include "worker/reporter.h"
#include "worker/scheduler_client.h"
#include "worker/trial_launch.h"
#include "worker/trial_outcome.h"
#include "worker/trial_process.h"
#include "worker/trial_supervisor.h"
#include "worker/worker_metrics.h"
#include "worker/worker_options.h"

namespace normsweep::worker {

class Worker {
 public:
  Worker(SchedulerClient& client, Clock& clock, WorkerMetrics& metrics, WorkerOptions options);
  ~Worker();

  // Registers (retrying while the scheduler is unreachable), then runs until
  // Drain() has been called and the drain is complete. OK after a clean
  // drain; an error for bad options or when registration is refused.
  absl::Status Run();

  // Thread-safe, returns at once: starts draining (worker/README.md,
  // "Draining"): no new leases, running trials get the grace period, then
  // are stopped and handed back.
  void Drain();

  int64_t worker_id() const { return worker_id_.load(); }

 private:
  // What one LeaseTrial got: the trial, then its fused_trials; empty when
  // nothing was leased.
  using Group = std::vector<LeasePtr>;

  // RegisterWorker until it succeeds; the heartbeat interval to use.
  // CANCELLED when drained before registering.
  absl::StatusOr<absl::Duration> Register();
  void RunSlot(int slot);
  // Runs one group (one trial, or several fused) in one trainer process to
  // its end; returns the group prefetched meanwhile, if any. *idle_since:
  // when the slot's previous trainer ended (in), when this one did (out),
  // for the slot-idle histogram. The decisions are the GroupSupervisor's
  // (per poll) and DecideOutcome's (at the end).
  Group RunGroup(int slot, const Group& group, std::optional<absl::Time>* idle_since);
  // Reads the process's events until it is done, feeding them and each
  // poll's lease flags to the supervisor and doing what it says (a fused
  // trial whose final event is in is concluded at once); the members it
  // leaves unconcluded are the caller's. Returns the group prefetched
  // meanwhile, if any.
  Group Supervise(TrialProcess& proc, const Group& group, const std::vector<TrialLaunch>& launches,
                  GroupSupervisor& supervisor);
  // One event of the lease's trial: metrics, then its progress.
  void RecordEvent(Lease& lease, const v1::TrainEvent& event, absl::Time now);
  LeaseFlags FlagsOf(Lease& lease, absl::Time now);
  // Carries out DecideOutcome for what the trainer left for one trial:
  // FinishTrial queued or the lease forgotten. oom_killed: the cgroup's
  // oom_kill count grew while the trainer ran.
  void Conclude(const LeasePtr& lease, const GroupMember& run, const TrialProcess& proc, bool oom_killed,
                const std::string& dir);
  // LeaseTrial (max_trials = options_.fuse); empty when there is nothing to
  // lease or the call failed.
  Group LeaseGroup();
  // FinishTrial with the verdict's outcome, result, retry and interruption
  // (an interruption is logged with its cause and counted).
  void QueueFinish(const LeasePtr& lease, const TrialVerdict& verdict);
  // Waits up to d, returning early once draining.
  void SleepUnlessDraining(absl::Duration d);
  bool draining() const;

  // Renews every held lease each interval and applies cancelled_trial_ids
  // and lost_trial_ids.
  void HeartbeatLoop(absl::Duration interval);

  SchedulerClient& client_;
  Clock& clock_;
  WorkerMetrics& metrics_;
  const WorkerOptions options_;
  std::atomic<int64_t> worker_id_{0};
  absl::Mutex register_mu_;  // one re-registration at a time

  LeaseTable leases_;  // every lease held; its mu guards the fields below too
  bool draining_ ABSL_GUARDED_BY(leases_.mu) = false;
  absl::Time drain_deadline_ ABSL_GUARDED_BY(leases_.mu) = absl::InfiniteFuture();
  absl::Duration lease_hold_ ABSL_GUARDED_BY(leases_.mu) = absl::InfiniteDuration();  // 3/4 of the lease
  // Since the last successful Heartbeat, a failed one was answered by a
  // scheduler whose database was down: a lease that expires meanwhile is
  // "lease_lost", else "scheduler_restart".
  bool renewal_database_down_ ABSL_GUARDED_BY(leases_.mu) = false;

  Reporter reporter_;
  absl::Notification stop_background_;  // reporter and heartbeat threads
};

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_WORKER_H_
