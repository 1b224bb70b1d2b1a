// The worker daemon's logic: registers with the scheduler, keeps every slot
// busy with one trial each (a TrialProcess running normsweep-train), forwards
// progress in batches, finishes trials, heartbeats, honours cancellation and
// lost leases, and drains on request. worker_main.cc only parses flags,
// builds the gRPC client and the /metrics exposer, and turns SIGTERM/SIGINT
// into Drain().
//
// Threads (all started by Run, all joined before it returns):
//   - one slot thread per SlotSpec: leases (LeaseTrial), runs the trial's
//     process, reads its events into the lease's ProgressBuffer, stops the
//     process when cancelled / lost / timed out / drained, then hands the
//     outcome to the reporter and leases the next trial at once (or uses the
//     one it prefetched near the end of the current trial);
//   - the reporter thread: the only sender of ReportProgress and
//     FinishTrial, so a slow or unreachable scheduler never blocks a slot's
//     pipe reading; batches stay buffered until acknowledged and are
//     re-sent with back-off;
//   - the heartbeat thread: renews every held lease at the scheduler's
//     interval and applies cancelled_trial_ids / lost_trial_ids.
// RPCs are never made while holding mu_. mu_ guards leases_ and every
// field of every Lease (a Lease is shared by the three kinds of threads),
// draining_ and drain_deadline_.
//
// Fused trials (WorkerOptions.fuse = K > 1): LeaseTrial asks for up to K
// trials and a slot runs the group it got (the trial and its fused_trials)
// in one trainer process, `--config A,B,...`, one trial directory each. A
// group of one runs exactly as with fuse 1. Each lease of a group keeps its
// own ProgressBuffer, flags, TrialSupervisor, outcome and FinishTrial; the
// trainer's events are routed to their lease by fused_index. A lease that
// must stop alone (cancelled, lost, expired, refused, its own time-outs)
// gets `cancel I` on the trainer's stdin; the process gets SIGTERM only
// once no lease is left training (so a drain's stop is one SIGTERM), and
// SIGKILL when a stopped lease has no final event kill_after later (its
// siblings without a final event then end as a process killed from
// outside would) or when every lease has its final event and the process
// lingers kill_after after the last one. When the process ends, each
// lease without a final event is concluded once, exactly as a solo trial
// whose process ended that way (DecideOutcome). The group's next group is
// prefetched once every lease still training is near its end.
//
// Draining (Drain(), e.g. on SIGTERM): no new leases; a lease prefetched
// but not started is handed back; running trials get grace_period to end
// normally (then finished as usual); after that they are stopped and handed
// back: their progress so far is sent, then FinishTrial(FAILED, retry,
// interruption "worker_drained"), so the scheduler re-queues them at once
// without counting an attempt against them (it counts an interruption).
//
// Interruptions (schema/interruptions.h) the worker reports with
// FinishTrial(retry): a trainer killed by a signal it did not send
// ("external_signal"; not the OOM killer's, which is the trial's own
// failure), a lease it gave up because it could not renew it in time
// ("lease_lost" when the scheduler answered that its database was down,
// else "scheduler_restart"), a drain ("worker_drained"). Each is logged
// with its cause and counted in normsweep_worker_interruptions_total.
#ifndef NORMSWEEP_WORKER_WORKER_H_
#define NORMSWEEP_WORKER_WORKER_H_

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "normsweep/v1/worker_service.pb.h"
#include "worker/progress_buffer.h"
#include "worker/scheduler_client.h"
#include "worker/trial_outcome.h"
#include "worker/trial_process.h"
#include "worker/trial_supervisor.h"
#include "worker/worker_metrics.h"
#include "worker/worker_options.h"

namespace normsweep::worker {

// How one trial is run on one slot: its directory (config.json, stderr.log,
// checkpoint), the config with the slot's device and threads, the trainer's
// command line.
struct TrialLaunch {
  std::string dir;
  v1::TrainConfig config;
  std::vector<std::string> argv;
};
TrialLaunch MakeTrialLaunch(const WorkerOptions& options, const SlotSpec& slot, const v1::Trial& trial);
// The trainer's command line for one trial or a fused run of several (each
// launch with its dir and config as MakeTrialLaunch made them):
// `train --config A,B,... --events -`, and `--checkpoint-out` with one item
// per trial (empty for a trial that writes none) when any of them writes one.
std::vector<std::string> TrainerArgv(const WorkerOptions& options, const std::vector<TrialLaunch>& launches);

class Worker {
 public:
  Worker(SchedulerClient& client, Clock& clock, WorkerMetrics& metrics, WorkerOptions options);
  ~Worker();

  // Registers (retrying while the scheduler is unreachable), then runs until
  // Drain() has been called and the drain is complete. OK after a clean
  // drain; an error for bad options or when registration is refused.
  absl::Status Run();

  // Thread-safe, returns at once: starts draining (see the header comment).
  void Drain();

  int64_t worker_id() const { return worker_id_.load(); }

 private:
  enum class LeaseState {
    kPrefetched,  // leased, process not started yet
    kRunning,     // the slot's process is running
    kFinishing,   // outcome known: remaining progress, then FinishTrial
  };
  struct Lease {
    v1::Trial trial;  // as leased; never changes
    LeaseState state = LeaseState::kPrefetched;
    bool cancel_requested = false;
    bool lost = false;
    // Local clock: when the last successful LeaseTrial or Heartbeat that
    // covered this lease was sent, plus 3/4 of the lease. Past it the
    // scheduler may have given the trial to another worker (the heartbeats
    // failed, e.g. during a database outage), so its trainer is stopped
    // (never two trainers for one trial) and the attempt reported as an
    // interruption, lease_lost or scheduler_restart.
    absl::Time held_until = absl::InfiniteFuture();
    // Set when held_until is first seen passed: whether the failed renewals
    // were answered by a scheduler whose database was down.
    std::optional<bool> expired_database_down;
    // The scheduler refused a progress batch as invalid (INVALID_ARGUMENT):
    // its message. The attempt then ends as the trial's own failure.
    std::string refused;
    bool result_refused = false;  // FinishTrial was refused once (INVALID_ARGUMENT)
    TrialStop stop = TrialStop::kNone;  // how the trainer's run ended, once concluded
    ProgressBuffer progress;
    v1::FinishTrialRequest finish;  // set when state becomes kFinishing
    absl::Time retry_at = absl::InfinitePast();
    absl::Duration backoff = absl::ZeroDuration();
  };
  using LeasePtr = std::shared_ptr<Lease>;
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
  // for the slot-idle histogram. The decisions are each lease's
  // TrialSupervisor's (per poll) and DecideOutcome's (at the end).
  Group RunGroup(int slot, const Group& group, std::optional<absl::Time>* idle_since);
  // What one run of the trainer left for one of its trials.
  struct Supervised {
    std::optional<v1::TrainEvent> final_event;
    int last_step = 0;
    std::optional<double> step0_val_loss;  // the evaluation before the first update
    TrialStop stop = TrialStop::kNone;
    std::string stop_reason;
  };
  // Writes each trial's config into its directory and starts the trainer
  // (the group's stderr.log is one file, linked into every trial's dir).
  absl::StatusOr<std::unique_ptr<TrialProcess>> StartTrainer(const std::vector<TrialLaunch>& launches);
  // Reads the process's events until it is done, routing them to their
  // lease by fused_index and doing what the supervisors say after each
  // poll. Fills runs (one per lease); a fused trial whose final event
  // (other than FAILED) is in is concluded at once (*concluded), the rest
  // are left to the caller. Returns the group prefetched meanwhile, if any.
  Group Supervise(TrialProcess& proc, const Group& group, const std::vector<TrialLaunch>& launches,
                  std::vector<Supervised>* runs, std::vector<bool>* concluded);
  // One event: metrics, then the final event or the lease's progress.
  void RecordEvent(Lease& lease, const v1::TrainEvent& event, absl::Time now, Supervised* run);
  LeaseFlags FlagsOf(Lease& lease, absl::Time now);
  // Carries out DecideOutcome: FinishTrial queued or the lease forgotten.
  // oom_killed: the cgroup's oom_kill count grew while the trainer ran.
  void Conclude(const LeasePtr& lease, const Supervised& run, const TrialProcess& proc, bool oom_killed,
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

  void ReporterLoop();
  void ReportPass();
  // One lease's pending work (progress, then FinishTrial): runs on the
  // reporter thread without mu_ held while calling the scheduler.
  void Report(const LeasePtr& lease);
  // Logs when the scheduler becomes unreachable or reachable again (then
  // ends every back-off). Called without mu_ held.
  void NoteRpc(const absl::Status& status, const char* what);
  // The scheduler refused a progress batch or the result as invalid
  // (INVALID_ARGUMENT): the attempt ends as the trial's own failure.
  void RefuseProgress(Lease& lease, const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void HeartbeatLoop(absl::Duration interval);
  void EraseLease(int64_t trial_id, const Lease* lease) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  SchedulerClient& client_;
  Clock& clock_;
  WorkerMetrics& metrics_;
  const WorkerOptions options_;
  std::atomic<int64_t> worker_id_{0};
  absl::Mutex register_mu_;  // one re-registration at a time

  mutable absl::Mutex mu_;
  std::map<int64_t, LeasePtr> leases_ ABSL_GUARDED_BY(mu_);  // by trial id: every lease held
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time drain_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  absl::Duration lease_hold_ ABSL_GUARDED_BY(mu_) = absl::InfiniteDuration();  // 3/4 of the lease
  // Since the last successful Heartbeat, a failed one was answered by a
  // scheduler whose database was down: a lease that expires meanwhile is
  // "lease_lost", else "scheduler_restart".
  bool renewal_database_down_ ABSL_GUARDED_BY(mu_) = false;
  int lease_calls_ ABSL_GUARDED_BY(mu_) = 0;  // LeaseTrial calls in flight

  absl::Notification stop_background_;  // reporter and heartbeat threads
  std::atomic<bool> scheduler_unreachable_{false};  // for logging state changes only
};

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_WORKER_H_
