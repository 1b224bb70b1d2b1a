// In-memory Store for unit tests: the same semantics as PostgresStore, kept
// in maps. Thread-safe: mu_ guards everything.
#ifndef NORMSWEEP_DB_MEMORY_STORE_H_
#define NORMSWEEP_DB_MEMORY_STORE_H_

#include <map>
#include <string>
#include <tuple>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "db/store.h"

namespace normsweep::db {

class MemoryStore : public Store {
 public:
  absl::StatusOr<CreateSweepResult> CreateSweep(const std::string& request_id,
                                                const v1::SweepSpec& spec,
                                                const std::vector<NewTrial>& trials,
                                                absl::Time now, const std::string& submitted_by = "") override;
  absl::StatusOr<v1::Sweep> GetSweep(int64_t sweep_id) override;
  absl::StatusOr<std::vector<v1::Sweep>> ListSweeps(v1::SweepState state, int64_t before_id,
                                                    int limit) override;
  absl::StatusOr<v1::Sweep> CancelSweep(int64_t sweep_id, absl::Time now,
                                        const std::string& cancelled_by = "", int* cancelled_trials = nullptr) override;
  absl::StatusOr<std::vector<v1::Trial>> ListTrials(int64_t sweep_id, v1::TrialState state,
                                                    int32_t after_index, int limit) override;
  absl::StatusOr<std::vector<std::pair<v1::Trial, int64_t>>> TrialsChangedSince(
      int64_t sweep_id, int64_t after_seq) override;
  absl::StatusOr<v1::Trial> GetTrial(int64_t trial_id) override;
  absl::StatusOr<TrialHistory> GetTrialHistory(int64_t trial_id) override;
  absl::StatusOr<int64_t> RegisterWorker(const v1::RegisterWorkerRequest& request,
                                         absl::Time now) override;
  absl::StatusOr<std::optional<v1::Trial>> LeaseTrial(int64_t worker_id, absl::Time now,
                                                      absl::Duration lease) override;
  absl::StatusOr<std::vector<v1::Trial>> LeaseTrialsById(int64_t worker_id, int64_t sweep_id,
                                                         const std::vector<int64_t>& trial_ids, absl::Time now,
                                                         absl::Duration lease) override;
  absl::StatusOr<HeartbeatResult> Heartbeat(int64_t worker_id,
                                            const std::vector<v1::TrialLease>& leases,
                                            absl::Time now, absl::Duration lease) override;
  absl::StatusOr<ProgressResult> ReportProgress(const v1::ReportProgressRequest& request,
                                                absl::Time now) override;
  absl::StatusOr<v1::Trial> FinishTrial(const v1::FinishTrialRequest& request, absl::Time now,
                                        bool* finished_now) override;
  using Store::ExpireLeases;
  absl::StatusOr<ExpiryResult> ExpireLeases(absl::Time now, const Outage& outage) override;
  absl::StatusOr<StoreStats> Stats(absl::Time live_since) override;
  absl::StatusOr<std::vector<v1::Worker>> ListWorkers(absl::Time live_since, bool live_only) override;
  absl::StatusOr<std::vector<WorkerSpeeds>> RecentTrialSpeeds(absl::Time live_since, int per_worker) override;
  // db/memory_export.cc: the rows are copied under mu_, then sent.
  absl::Status ExportSweep(const ExportPlan& plan, const ExportOptions& options,
                           const ExportCallbacks& callbacks) override;

 private:
  struct StoredSweep {
    v1::Sweep sweep;  // counts are computed on read
  };
  struct StoredTrial {
    v1::Trial trial;
    int64_t seq = 0;
  };
  struct StoredWorker {
    v1::RegisterWorkerRequest info;
    absl::Time registered_at;
    absl::Time last_heartbeat;
    int64_t superseded_by = 0;
  };

  v1::Sweep SweepWithCounts(const v1::Sweep& sweep) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Touch(StoredTrial& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { t.seq = ++seq_; }
  // PENDING -> RUNNING for worker_id: the next attempt (a retry's history
  // cleared), as every lease takes it.
  void TakeLease(StoredTrial& t, int64_t worker_id, absl::Time now, absl::Duration lease)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeComplete(int64_t sweep_id, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // boundary_search: decides the line of a trial just finished and queues
  // the follow-up it asks for (proto/schema/boundary_search.h), as PostgresStore does
  // in the finish's transaction.
  void AdvanceBoundaryLine(const v1::Trial& finished, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends t's current attempt for `reason` (lease expiry, a retried
  // FinishTrial): records it, then PENDING, FAILED or CANCELLED by the rule
  // of RetriedAttemptError. Returns the new state.
  // Ends the current lease of t: cause "" for the trial's own failure, else
  // the interruption's (the rule of retry_trial.sql and expire_leases.sql).
  v1::TrialState EndAttempt(StoredTrial& t, const std::string& reason, const std::string& cause, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  int64_t next_sweep_id_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t next_trial_id_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t next_worker_id_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, StoredSweep> sweeps_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> sweep_by_request_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, StoredTrial> trials_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, StoredWorker> workers_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int64_t, int32_t>, v1::MetricPoint> metrics_ ABSL_GUARDED_BY(mu_);
  std::map<std::tuple<int64_t, int32_t, int32_t, std::string>, double> grad_norms_
      ABSL_GUARDED_BY(mu_);
  // (trial, step, layer): the first diagnostics of that block at that step
  std::map<std::tuple<int64_t, int32_t, int32_t>, v1::LayerDiagnostics> diagnostics_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int64_t, int32_t>, v1::TrialAttempt> attempts_ ABSL_GUARDED_BY(mu_);  // (trial, attempt)
  // ExportSweep's x of each row but the trials' (StoredTrial::seq): the seq_
  // of its last write, by (ExportTable, trial, step or attempt, layer).
  void StampExport(ExportTable table, int64_t trial, int32_t step, int32_t layer, int64_t seq)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    export_seq_[{static_cast<int>(table), trial, step, layer}] = seq;
  }
  std::map<std::tuple<int, int64_t, int32_t, int32_t>, int64_t> export_seq_ ABSL_GUARDED_BY(mu_);
};

}  // namespace normsweep::db

#endif  // NORMSWEEP_DB_MEMORY_STORE_H_
