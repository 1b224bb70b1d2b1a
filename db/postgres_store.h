// The production Store on PostgreSQL through libpq. Several schedulers may
// share one database: leasing is one transaction with FOR UPDATE SKIP
// LOCKED, and every write is idempotent or guarded by the lease it belongs to.
// Thread-safe: each call borrows a connection from the pool. Leases,
// progress and results are queued for the group runners' threads, which
// write a group in one statement and answer it (the synchronous calls wait
// for that answer).
#ifndef NORMSWEEP_DB_POSTGRES_STORE_H_
#define NORMSWEEP_DB_POSTGRES_STORE_H_

#include <memory>
#include <string>

#include "db/group_runner.h"
#include "db/pg_connection.h"
#include "db/store.h"

namespace normsweep::db {

struct PostgresStoreOptions {
  PgConnectOptions connect;
  int pool_size = 8;
  // ReportProgress calls arriving together are written in one statement
  // (up to this many), by progress_writers threads (statements at once).
  int progress_group_size = 128;
  int progress_writers = 1;
  // LeaseTrial calls arriving together take their trials in one statement.
  int lease_group_size = 64;
  int lease_takers = 1;
  // FinishTrial calls arriving together are written in one statement.
  int finish_group_size = 64;
  int finish_writers = 1;
};

class PostgresStore : public Store {
 public:
  // Connects once and applies the migrations (UNAVAILABLE when the database
  // cannot be reached; the caller decides whether to retry).
  static absl::StatusOr<std::unique_ptr<PostgresStore>> Open(const PostgresStoreOptions& options);

  // host:port/dbname as user, never the password.
  const std::string& description() const { return description_; }

  absl::StatusOr<CreateSweepResult> CreateSweep(const std::string& request_id,
                                                const v1::SweepSpec& spec,
                                                const std::vector<NewTrial>& trials,
                                                absl::Time now) override;
  absl::StatusOr<v1::Sweep> GetSweep(int64_t sweep_id) override;
  absl::StatusOr<std::vector<v1::Sweep>> ListSweeps(v1::SweepState state, int64_t before_id,
                                                    int limit) override;
  absl::StatusOr<v1::Sweep> CancelSweep(int64_t sweep_id, absl::Time now) override;
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
  // Queued for the group runners' threads, answered from there.
  void LeaseTrialAsync(int64_t worker_id, absl::Time now, absl::Duration lease, LeaseDone done) override;
  void ReportProgressAsync(const v1::ReportProgressRequest& request, absl::Time now, ProgressDone done) override;
  void FinishTrialAsync(const v1::FinishTrialRequest& request, absl::Time now, FinishDone done) override;
  absl::StatusOr<ExpiryResult> ExpireLeases(absl::Time now) override;
  absl::StatusOr<StoreStats> Stats(absl::Time live_since) override;
  absl::StatusOr<std::vector<v1::Worker>> ListWorkers(absl::Time live_since, bool live_only) override;

 private:
  struct ProgressItem {
    const v1::ReportProgressRequest* request;
    ProgressDone done;
    absl::StatusOr<ProgressResult> result = absl::UnknownError("not run");
  };

  PostgresStore(const PostgresStoreOptions& options, std::string description);
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

  // Has each of the group runners' `connections` connections prepare and
  // plan the lease, progress and finish statements now, on empty groups that
  // change nothing, instead of under the first wave of workers' calls (at
  // start-up, and after ANALYZE made their plans stale). Holds them all
  // meanwhile. Best effort: a failure only leaves that work to the calls.
  void WarmUp(int connections);
  // Opens the general pool's `connections` connections now (a backend
  // start is 5-10 ms here), rather than while the first workers register.
  void OpenPool(int connections);

  // One caller, one transaction: sweeps with max_concurrent_trials.
  absl::StatusOr<std::optional<v1::Trial>> LeaseSlowPath(int64_t worker_id, absl::Time now, absl::Duration lease);

  PgPool pool_;
  // The group runners' connections: generic plans only (see
  // PgConnectOptions::generic_plans). FinishTrial's statement flipped between
  // plans and paid 0.3-0.5 ms of planning on half its calls (0.70 -> 0.37 ms
  // per call in tests/bench/scheduler_load).
  const int hot_connections_;  // hot_pool_'s size
  PgPool hot_pool_;
  const std::string description_;
  // Last: their threads stop (after running what is queued) before the
  // pool goes away.
  GroupRunner<ProgressItem> progress_runner_;
  GroupRunner<LeaseItem> lease_runner_;
  GroupRunner<FinishItem> finish_runner_;
};

}  // namespace normsweep::db

#endif  // NORMSWEEP_DB_POSTGRES_STORE_H_
