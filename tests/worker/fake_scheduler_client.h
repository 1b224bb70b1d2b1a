// An in-memory WorkerService for the Worker's unit tests: trials to lease,
// lease checks like the real scheduler's (FAILED_PRECONDITION for a lease
// not held), every accepted call recorded, and switches for what tests
// need: the scheduler unreachable (or its database down), a trial
// cancelled, a lease lost, progress refused as invalid.
//
// Thread-safe: mu_ guards everything; the Worker calls it from several
// threads while the test inspects it.
#ifndef NORMSWEEP_TESTS_WORKER_FAKE_SCHEDULER_CLIENT_H_
#define NORMSWEEP_TESTS_WORKER_FAKE_SCHEDULER_CLIENT_H_

#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/scheduler_client.h"

namespace normsweep::worker::testing {

class FakeSchedulerClient : public SchedulerClient {
 public:
  struct TrialRecord {
    v1::Trial trial;
    bool held = false;                          // leased and not finished/lost
    std::vector<v1::MetricPoint> points;        // every point of every accepted ReportProgress
    std::vector<v1::LayerGradNorms> norms;
    std::vector<v1::StepDiagnostics> diagnostics;
    int progress_calls = 0;                     // accepted
    std::vector<v1::FinishTrialRequest> finishes;  // accepted
    int refused_calls = 0;                      // FAILED_PRECONDITION
    std::vector<v1::FinishTrialRequest> refused_finishes;  // FAILED_PRECONDITION
    absl::Time leased_at = absl::InfinitePast();   // latest lease
    absl::Time finished_at = absl::InfinitePast(); // first accepted FinishTrial
  };

  // A PENDING trial; returns its id.
  int64_t AddTrial(const v1::TrainConfig& config);

  // database_down: the scheduler answers, but its database is down
  // (DatabaseUnavailableError) rather than not at all.
  void SetUnavailable(bool unavailable, bool database_down = false);
  // RegisterWorker's lease_seconds (default 60).
  void SetLeaseSeconds(int seconds);
  // While held, LeaseTrial calls wait (counted in blocked_lease_calls) until
  // released, as a slow scheduler's would.
  void HoldLeaseCalls(bool hold);
  int BlockedLeaseCallsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return blocked_lease_calls_; }
  // LeaseTrial with max_trials > 1 hands out the next PENDING trials in
  // order, up to max_trials, as one fused group (all are of sweep 7); with
  // ignore, one trial only, as a scheduler that predates fused trials.
  void IgnoreMaxTrials(bool ignore);
  // ReportProgress for the trial is refused as INVALID_ARGUMENT, as the
  // scheduler refuses values the API rejects.
  void RefuseProgress(int64_t id);
  // The sweep was cancelled: Heartbeat lists the trial in cancelled_trial_ids,
  // and ReportProgress says cancel_requested unless via_progress is false.
  void CancelTrial(int64_t id, bool via_progress = true);
  // The lease expired behind the worker's back.
  void LoseLease(int64_t id);
  void SetHeartbeatIntervalMs(int ms);
  // The scheduler's database was replaced: the current worker id is
  // unknown (NOT_FOUND) until the worker registers again.
  void ForgetWorker();
  int registrations();

  TrialRecord Get(int64_t id);
  int unavailable_calls();
  int leases_granted();
  std::vector<v1::HeartbeatRequest> heartbeats();

  // Waits until pred (called with mu_ held) is true; false on timeout.
  bool WaitFor(const std::function<bool(FakeSchedulerClient&)>& pred, absl::Duration timeout);
  // Helpers for pred (mu_ must be held, as it is inside WaitFor).
  bool FinishedLocked(int64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int MaxStepLocked(int64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int DiagnosticStepsLocked(int64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);  // StepDiagnostics received
  bool HeldLocked(int64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int RefusedFinishesLocked(int64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(const v1::RegisterWorkerRequest& request) override;
  absl::StatusOr<v1::LeaseTrialResponse> LeaseTrial(const v1::LeaseTrialRequest& request) override;
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request) override;
  absl::StatusOr<v1::ReportProgressResponse> ReportProgress(const v1::ReportProgressRequest& request) override;
  absl::StatusOr<v1::FinishTrialResponse> FinishTrial(const v1::FinishTrialRequest& request) override;

  absl::Mutex mu_;

 private:
  // UNAVAILABLE (counted) while SetUnavailable(true), as a down scheduler.
  absl::Status Reachable() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckLease(int64_t worker, int64_t trial, int32_t attempt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reachable, then CheckLease: the record of the trial whose lease a
  // progress or finish call holds.
  // The next PENDING trial, leased to `worker`.
  v1::Trial LeaseNext(int64_t worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<TrialRecord*> HeldTrial(int64_t worker, int64_t trial, int32_t attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t worker_id_ ABSL_GUARDED_BY(mu_) = 0;     // the latest registration's id (42, 43, ...)
  bool worker_known_ ABSL_GUARDED_BY(mu_) = false;
  int registrations_ ABSL_GUARDED_BY(mu_) = 0;
  int heartbeat_ms_ ABSL_GUARDED_BY(mu_) = 100;
  bool unavailable_ ABSL_GUARDED_BY(mu_) = false;
  bool database_down_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_lease_calls_ ABSL_GUARDED_BY(mu_) = false;
  bool ignore_max_trials_ ABSL_GUARDED_BY(mu_) = false;
  int blocked_lease_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int lease_seconds_ ABSL_GUARDED_BY(mu_) = 60;
  std::map<int64_t, bool> refuse_progress_ ABSL_GUARDED_BY(mu_);
  int unavailable_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int leases_granted_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<int64_t> pending_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, TrialRecord> trials_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, bool> cancelled_ ABSL_GUARDED_BY(mu_);  // id -> also via progress
  std::vector<v1::HeartbeatRequest> heartbeats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace normsweep::worker::testing

#endif  // NORMSWEEP_TESTS_WORKER_FAKE_SCHEDULER_CLIENT_H_
