// db-internal: the PostgresStore class (see db/postgres_store.h), defined in
// three files by job: db/postgres_store.cc (construction, the plain reads
// and writes, heartbeats, expiry), db/postgres_hot_path.cc (the batched
// lease, progress and finish statements of the group runners) and
// db/postgres_fused_lease.cc (fused leases), and what they share.
#ifndef NORMSWEEP_DB_POSTGRES_STORE_INTERNAL_H_
#define NORMSWEEP_DB_POSTGRES_STORE_INTERNAL_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "db/group_runner.h"
#include "db/pg_connection.h"
#include "db/postgres_store.h"
#include "db/store.h"

namespace normsweep::db {

absl::StatusOr<v1::Trial> LoadTrial(PgConnection& conn, int64_t trial_id);

// Runs fn on a pooled connection; retries once on a fresh connection when a
// stale pooled one turns out broken (not one closed after a timeout: that
// query would wait again), dropping the idle ones first (lost with it).
template <typename T, typename Fn>
absl::StatusOr<T> WithConnection(PgPool& pool, Fn&& fn) {
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<PgPool::Lease> conn = pool.Acquire();
    if (!conn.ok()) return conn.status();
    absl::StatusOr<T> result = fn(**conn);
    if (!result.ok() && (*conn)->broken() && attempt == 0 &&
        result.status().code() == absl::StatusCode::kUnavailable) {
      pool.DropIdle();
      continue;
    }
    return result;
  }
}

// A retried trial starts its metric history afresh (trial_ids: a PgArray).
// Run after its lease is taken and before the worker hears of it: nothing
// of the new attempt can be written yet, and the old attempt's writes fail
// the attempt check.
absl::Status ClearHistory(PgConnection& conn, const std::string& trial_ids);

// In a transaction on conn, for a sweep with max_concurrent_trials: takes
// the sweep's lease lock (until the transaction ends), which every leaser of
// such a sweep takes, so that the count of its RUNNING trials it returns
// stays exact until then.
absl::StatusOr<int64_t> LockSweepRunning(PgConnection& conn, int64_t sweep_id);

// Up to n of the pool's connections at once, so that each is a different
// one (opened if need be); fewer when the database cannot be reached.
std::vector<PgPool::Lease> AcquireAll(PgPool& pool, int n);

// See db/postgres_store.h. Thread-safe: each call borrows a connection from
// pool_; the group runners' threads own the items they run.
class PostgresStore final : public Store {
 public:
  explicit PostgresStore(const PostgresStoreOptions& options);

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
  // The synchronous calls wait for the asynchronous ones.
  absl::StatusOr<std::optional<v1::Trial>> LeaseTrial(int64_t worker_id, absl::Time now,
                                                      absl::Duration lease) override;
  absl::StatusOr<HeartbeatResult> Heartbeat(int64_t worker_id,
                                            const std::vector<v1::TrialLease>& leases,
                                            absl::Time now, absl::Duration lease) override;
  absl::StatusOr<ProgressResult> ReportProgress(const v1::ReportProgressRequest& request,
                                                absl::Time now) override;
  absl::StatusOr<v1::Trial> FinishTrial(const v1::FinishTrialRequest& request, absl::Time now,
                                        bool* finished_now) override;
  // db/postgres_fused_lease.cc: one transaction.
  absl::StatusOr<std::vector<v1::Trial>> LeaseTrialsById(int64_t worker_id, int64_t sweep_id,
                                                         const std::vector<int64_t>& trial_ids, absl::Time now,
                                                         absl::Duration lease) override;
  // Queued for fused_runner_'s thread, answered from there.
  void LeaseFittingAsync(int64_t worker_id, int64_t sweep_id, int max, TrialFilter fits, absl::Time now,
                         absl::Duration lease, TrialsDone done) override;
  // Queued for the group runners' threads, answered from there.
  void LeaseTrialAsync(int64_t worker_id, absl::Time now, absl::Duration lease, LeaseDone done) override;
  void ReportProgressAsync(const v1::ReportProgressRequest& request, absl::Time now, ProgressDone done) override;
  void FinishTrialAsync(const v1::FinishTrialRequest& request, absl::Time now, FinishDone done) override;
  using Store::ExpireLeases;
  absl::StatusOr<ExpiryResult> ExpireLeases(absl::Time now, const Outage& outage) override;
  absl::StatusOr<StoreStats> Stats(absl::Time live_since) override;
  absl::StatusOr<std::vector<v1::Worker>> ListWorkers(absl::Time live_since, bool live_only) override;
  absl::StatusOr<std::vector<WorkerSpeeds>> RecentTrialSpeeds(absl::Time live_since, int per_worker) override;
  absl::StatusOr<v1::GetSweepAnalysisResponse> GetSweepAnalysis(int64_t sweep_id, double tolerance) override;
  // db/pg_export.cc: on a connection of its own per export, at most
  // max_exports at once (RESOURCE_EXHAUSTED beyond).
  absl::Status ExportSweep(const ExportPlan& plan, const ExportOptions& options,
                           const ExportCallbacks& callbacks) override;

  // Has each of the group runners' connections prepare and plan the lease,
  // progress and finish statements now, on empty groups that change
  // nothing, instead of under the first wave of workers' calls (at start-up,
  // and after ANALYZE made their plans stale). Holds them all meanwhile.
  // Best effort: a failure only leaves that work to the calls.
  void WarmUp();
  // Opens the general pool's connections now (a backend start is not free),
  // rather than while the first workers register.
  void OpenPool();

 private:
  struct ProgressItem {
    const v1::ReportProgressRequest* request;
    ProgressDone done;
    absl::StatusOr<ProgressResult> result = absl::UnknownError("not run");
  };
  // Writes a group of ReportProgress requests (distinct trials) in one
  // statement, then answers them.
  void WriteProgressGroup(std::vector<ProgressItem*>& group);
  void WriteProgressStatement(std::vector<ProgressItem*>& group);
  // One statement for the group: (index in group, sweep cancelled) of each
  // item written; an item left out holds no lease, or its trial's progress
  // was written concurrently. lock_first: in a transaction that locks the
  // trials' rows first, so that the latter cannot happen.
  absl::StatusOr<std::vector<std::pair<int64_t, bool>>> RunProgressStatement(
      const std::vector<ProgressItem*>& group, bool lock_first);

  struct LeaseItem {
    int64_t worker_id;
    absl::Time now;
    absl::Duration lease;
    LeaseDone done;
    bool slow_path = false;  // the next trial belongs to a sweep with a limit
    absl::StatusOr<std::optional<v1::Trial>> result = absl::UnknownError("not run");
  };
  // Leases one trial each for a group of callers, in one statement (the
  // slow path after it), then answers them.
  void LeaseGroup(std::vector<LeaseItem*>& group);
  void LeaseGroupStatement(std::vector<LeaseItem*>& group);
  // One caller, one transaction: sweeps with max_concurrent_trials.
  absl::StatusOr<std::optional<v1::Trial>> LeaseSlowPath(int64_t worker_id, absl::Time now, absl::Duration lease);

  // A fused lease (LeaseFitting): several statements, run one caller at a
  // time on a thread of its own, so that neither a gRPC thread nor the
  // lease runner (single leases, the hot path) waits for it.
  struct FusedItem {
    int64_t worker_id;
    int64_t sweep_id;
    int max;
    TrialFilter fits;
    absl::Time now;
    absl::Duration lease;
    TrialsDone done;
  };

  struct FinishItem {
    const v1::FinishTrialRequest* request;
    absl::Time now;
    FinishDone done;
    absl::StatusOr<v1::Trial> result = absl::UnknownError("not run");
    bool finished_now = false;
  };
  // Finishes a group of trials (distinct) in one statement, then answers them.
  void FinishGroup(std::vector<FinishItem*>& group);
  void FinishStatement(std::vector<FinishItem*>& group);
  // A FinishTrial with retry (rare: a trainer the machine killed), one
  // statement of its own.
  void RetryStatement(FinishItem& item);

  const int pool_size_;
  PgPool pool_;
  const int max_exports_;
  std::atomic<int> exports_{0};  // running ExportSweep calls
  // The group runners' connections: generic plans only (see
  // PgConnectOptions::generic_plans; scheduler/README.md has the figures).
  const int hot_connections_;  // hot_pool_'s size
  PgPool hot_pool_;
  // Last: their threads stop (after running what is queued) before the
  // pool goes away. fused_runner_ first, so that it stops last: the lease
  // runner's callbacks submit to it until that runner has stopped.
  GroupRunner<FusedItem> fused_runner_;
  GroupRunner<ProgressItem> progress_runner_;
  GroupRunner<LeaseItem> lease_runner_;
  GroupRunner<FinishItem> finish_runner_;
};

}  // namespace normsweep::db

#endif  // NORMSWEEP_DB_POSTGRES_STORE_INTERNAL_H_
