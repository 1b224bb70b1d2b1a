// The scheduler's durable state behind one interface, with two
// implementations that one test suite checks alike (tests/db/store_*_test.cc):
// MemoryStore (fast unit tests) and PostgresStore (production, libpq).
//
// Every method is one atomic step; time is passed in (the caller's injected
// clock), never read inside a store. Records are the API's proto messages.
// Implementations are thread-safe.
#ifndef NORMSWEEP_DB_STORE_H_
#define NORMSWEEP_DB_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "db/export.h"
#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/sweep_service.pb.h"
#include "normsweep/v1/worker_service.pb.h"
#include "proto/schema/state_names.h"

namespace normsweep::db {

// A trial to create: config (resolved), variant and index are taken from it.
struct NewTrial {
  int32_t index = 0;
  v1::TrainConfig config;
  std::string variant;
  std::optional<int32_t> boundary_line;  // boundary_search sweeps: the trial's line
};

struct CreateSweepResult {
  v1::Sweep sweep;
  bool created = false;  // false: request_id was used before; sweep is that one
};

struct HeartbeatResult {
  std::vector<int64_t> cancelled_trial_ids;  // renewed, but their sweep was cancelled
  std::vector<int64_t> lost_trial_ids;       // no longer leased to this worker
};

struct ProgressResult {
  bool cancel_requested = false;
};

struct ExpiryResult {
  int requeued = 0;   // back to PENDING
  int failed = 0;     // out of interruptions (max_interruptions)
  int cancelled = 0;  // their sweep was cancelled
  // All of them, by cause ("worker_lost", "lease_lost").
  std::map<std::string, int> interruptions;
};

// When the scheduler saw its database fail: a lease that expired within
// [from, until] could not be renewed through it, its worker stopped the
// trainer ("lease_lost", not "worker_lost"). The default is no outage.
struct Outage {
  absl::Time from = absl::InfiniteFuture();
  absl::Time until = absl::InfinitePast();
};

struct TrialHistory {
  std::vector<v1::MetricPoint> metrics;             // by step
  std::vector<v1::LayerGradNorms> layer_grad_norms;  // by step, then layer, then matrix
  std::vector<v1::StepDiagnostics> diagnostics;      // by step, then layer
  // Attempts that ended without a FinishTrial of their own outcome (lease
  // expired, or FinishTrialRequest.retry), by attempt. A final trial whose
  // last attempt is not among them ended it with FinishTrial.
  std::vector<v1::TrialAttempt> attempts;
};

// A trial a worker finished, for the cost estimate's throughput
// (Store::RecentTrialSpeeds).
struct TrialSpeed {
  v1::TrainConfig config;   // resolved, as stored
  double tokens_per_s = 0;  // TrialResult.tokens_per_s
};
struct WorkerSpeeds {
  int64_t worker_id = 0;           // the live registration
  std::vector<TrialSpeed> trials;  // newest first
};

struct StoreStats {
  v1::TrialCounts trials;        // all sweeps together
  int sweeps_running = 0;
  int sweeps_completed = 0;
  int sweeps_cancelled = 0;
  int live_workers = 0;          // heartbeat at or after the given time
};

class Store {
 public:
  virtual ~Store() = default;

  // Creates the sweep and all its trials at once (state RUNNING, trials
  // PENDING). A non-empty request_id seen before returns that sweep with
  // created = false; ALREADY_EXISTS when it came with a different spec.
  // submitted_by: the caller's name (Sweep.submitted_by; "" unknown). The
  // default, the same in every implementation, keeps the callers that have
  // no caller (tests, tools) as they were.
  virtual absl::StatusOr<CreateSweepResult> CreateSweep(const std::string& request_id,
                                                        const v1::SweepSpec& spec,
                                                        const std::vector<NewTrial>& trials,
                                                        absl::Time now,
                                                        const std::string& submitted_by = "") = 0;
  // NOT_FOUND naming sweep_id when there is no such sweep.
  virtual absl::StatusOr<v1::Sweep> GetSweep(int64_t sweep_id) = 0;
  // Newest first; only ids below before_id when before_id > 0.
  virtual absl::StatusOr<std::vector<v1::Sweep>> ListSweeps(v1::SweepState state, int64_t before_id,
                                                            int limit) = 0;
  // RUNNING -> CANCELLED, its PENDING trials -> CANCELLED, cancelled_by
  // recorded (Sweep.cancelled_by). A finished sweep is returned unchanged.
  // *cancelled_trials, when given, is set to the number of PENDING trials
  // this call cancelled (0 for a finished sweep).
  virtual absl::StatusOr<v1::Sweep> CancelSweep(int64_t sweep_id, absl::Time now,
                                                const std::string& cancelled_by = "",
                                                int* cancelled_trials = nullptr) = 0;
  // By index; only indexes above after_index. NOT_FOUND for an unknown sweep.
  virtual absl::StatusOr<std::vector<v1::Trial>> ListTrials(int64_t sweep_id, v1::TrialState state,
                                                            int32_t after_index, int limit) = 0;
  // The sweep's trials whose change sequence number is above after_seq, with
  // those numbers (for WatchSweep). Numbers only grow.
  virtual absl::StatusOr<std::vector<std::pair<v1::Trial, int64_t>>> TrialsChangedSince(
      int64_t sweep_id, int64_t after_seq) = 0;
  virtual absl::StatusOr<v1::Trial> GetTrial(int64_t trial_id) = 0;
  virtual absl::StatusOr<TrialHistory> GetTrialHistory(int64_t trial_id) = 0;

  virtual absl::StatusOr<int64_t> RegisterWorker(const v1::RegisterWorkerRequest& request,
                                                 absl::Time now) = 0;
  // Leases the PENDING trial of a RUNNING sweep with the highest priority,
  // then the oldest, skipping sweeps at max_concurrent_trials. nullopt: none.
  // NOT_FOUND for an unknown worker.
  virtual absl::StatusOr<std::optional<v1::Trial>> LeaseTrial(int64_t worker_id, absl::Time now,
                                                              absl::Duration lease) = 0;
  virtual absl::StatusOr<HeartbeatResult> Heartbeat(int64_t worker_id,
                                                    const std::vector<v1::TrialLease>& leases,
                                                    absl::Time now, absl::Duration lease) = 0;
  // Stores points, grad norms and diagnostics if the worker holds the lease
  // (FAILED_PRECONDITION otherwise). Idempotent: a point's fields per
  // (trial, step) and a block's diagnostics per (trial, step, layer) keep
  // their first value.
  virtual absl::StatusOr<ProgressResult> ReportProgress(const v1::ReportProgressRequest& request,
                                                        absl::Time now) = 0;
  // Final state and figures; idempotent for the same lease and outcome.
  // *finished_now (when given) says whether this call ended the lease: made
  // the trial final, or (retry) queued it again (false for a re-sent
  // FinishTrial). With request.retry the attempt is recorded and the trial
  // goes back to PENDING while its count allows (FAILED after the last,
  // CANCELLED in a cancelled sweep): with request.interruption empty it was
  // the trial's own failure, counted against max_attempts (attempts -
  // interruptions), else an interruption, counted against max_interruptions.
  // A re-sent retry for the same lease is a no-op, except that an
  // interruption's cause names the recorded one of an interrupted attempt
  // (the worker knows why a lease the scheduler found expired was lost).
  virtual absl::StatusOr<v1::Trial> FinishTrial(const v1::FinishTrialRequest& request, absl::Time now,
                                                bool* finished_now = nullptr) = 0;
  // The three calls of every trial's lifecycle, answered through a callback
  // (which may run on another thread, or before the call returns). A store
  // whose calls block on a database overrides them to queue the request and
  // answer from its own threads, so that gRPC callback handlers never block;
  // these defaults answer at once with the calls above. The request must
  // stay valid until done has been called.
  using LeaseDone = std::function<void(absl::StatusOr<std::optional<v1::Trial>>)>;
  using ProgressDone = std::function<void(absl::StatusOr<ProgressResult>)>;
  // finished_now as FinishTrial's.
  using FinishDone = std::function<void(absl::StatusOr<v1::Trial>, bool finished_now)>;
  virtual void LeaseTrialAsync(int64_t worker_id, absl::Time now, absl::Duration lease, LeaseDone done) {
    done(LeaseTrial(worker_id, now, lease));
  }
  virtual void ReportProgressAsync(const v1::ReportProgressRequest& request, absl::Time now, ProgressDone done) {
    done(ReportProgress(request, now));
  }
  virtual void FinishTrialAsync(const v1::FinishTrialRequest& request, absl::Time now, FinishDone done) {
    bool finished_now = false;
    absl::StatusOr<v1::Trial> trial = FinishTrial(request, now, &finished_now);
    done(std::move(trial), finished_now);
  }

  // Fused trials (LeaseTrialRequest.max_trials): leases to worker_id those
  // of trial_ids (trials of sweep_id) that are still PENDING while the sweep
  // is RUNNING, in index order, each as LeaseTrial leases one (attempts + 1,
  // lease until now + lease, a retry's history cleared); one taken meanwhile
  // by another leaser is skipped, never leased twice. Stops at the sweep's
  // max_concurrent_trials. Returns those leased, by index. NOT_FOUND for an
  // unknown worker.
  virtual absl::StatusOr<std::vector<v1::Trial>> LeaseTrialsById(int64_t worker_id, int64_t sweep_id,
                                                                 const std::vector<int64_t>& trial_ids,
                                                                 absl::Time now, absl::Duration lease) = 0;
  // Up to max of sweep_id's PENDING trials that fits accepts, in index
  // order, leased by LeaseTrialsById (a page of candidates at a time, so
  // that trials others take meanwhile are made up for from the next ones).
  // fits runs on the calling thread, for trials as ListTrials returns them.
  using TrialFilter = std::function<bool(const v1::Trial&)>;
  absl::StatusOr<std::vector<v1::Trial>> LeaseFitting(int64_t worker_id, int64_t sweep_id, int max,
                                                      const TrialFilter& fits, absl::Time now,
                                                      absl::Duration lease);
  // LeaseFitting answered through done, as LeaseTrialAsync is: a store whose
  // calls block runs it on a thread of its own (fits with it).
  using TrialsDone = std::function<void(absl::StatusOr<std::vector<v1::Trial>>)>;
  virtual void LeaseFittingAsync(int64_t worker_id, int64_t sweep_id, int max, TrialFilter fits, absl::Time now,
                                 absl::Duration lease, TrialsDone done) {
    done(LeaseFitting(worker_id, sweep_id, max, fits, now, lease));
  }

  // Leases that ended before now, each an interruption (never counted
  // against max_attempts): PENDING again while the trial's interruptions
  // stay below max_interruptions, else FAILED (CANCELLED when the sweep was
  // cancelled), each recorded as an attempt ("lease expired") with its cause:
  // "lease_lost" when it expired within the outage and its worker was not
  // superseded, else "worker_lost". Also completes sweeps whose trials are
  // all final.
  virtual absl::StatusOr<ExpiryResult> ExpireLeases(absl::Time now, const Outage& outage) = 0;
  absl::StatusOr<ExpiryResult> ExpireLeases(absl::Time now) { return ExpireLeases(now, Outage{}); }

  virtual absl::StatusOr<StoreStats> Stats(absl::Time live_since) = 0;
  // Every registered worker by id, live when its last heartbeat is at or
  // after live_since (as Stats counts them); only the live ones when live_only.
  // RegisterWorker marks earlier registrations of the same name and hostname
  // superseded (Worker.superseded_by) and ends their leases (expired as of
  // its call, for the next ExpireLeases); they are listed too, never live
  // (nor counted live by Stats: their process was restarted).
  virtual absl::StatusOr<std::vector<v1::Worker>> ListWorkers(absl::Time live_since, bool live_only) = 0;
  // For each live worker (as ListWorkers counts them), by id: the last
  // per_worker trials it finished SUCCEEDED with a tokens_per_s above 0,
  // newest first (by finished_at, then trial id), those of its earlier
  // registrations included (the same name and hostname: the worker was
  // restarted). Workers without such trials are left out.
  virtual absl::StatusOr<std::vector<WorkerSpeeds>> RecentTrialSpeeds(absl::Time live_since, int per_worker) = 0;

  // The sweep's rows of the analysis views (db/views: warmup_lr_grid_stats,
  // placement_sensitivity_at(tolerance)), as GetSweepAnalysis returns them.
  // NOT_FOUND for an unknown sweep. The views are SQL and exist only there:
  // a store without them (MemoryStore) answers UNIMPLEMENTED rather than
  // keep a second copy of their arithmetic.
  virtual absl::StatusOr<v1::GetSweepAnalysisResponse> GetSweepAnalysis(int64_t sweep_id, double tolerance);

  // ExportSweep (db/export.h): the rows of plan.table in chunks through
  // callbacks.send, then a last chunk (follow: once the sweep is final).
  // NOT_FOUND for an unknown sweep; CANCELLED when the client went away.
  // Blocks: run it on a thread that may block.
  virtual absl::Status ExportSweep(const ExportPlan& plan, const ExportOptions& options,
                                   const ExportCallbacks& callbacks) = 0;
};

// The spec as both stores keep it: a max_interruptions of 0 (a spec from a
// caller that does not set it) is the default, as the column's default is.
v1::SweepSpec StoredSpec(const v1::SweepSpec& spec);

// The NOT_FOUND errors of a missing sweep, trial or worker, the same words
// from both stores ("sweep_id 7: no such sweep").
absl::Status NoSweep(int64_t id);
absl::Status NoTrial(int64_t id);
absl::Status NoWorker(int64_t id);

// Errors that carry the database's own words (libpq's messages, with SQL,
// parameters, server paths) are marked, so that the scheduler's gRPC edge
// logs them and tells clients a plain message instead.
absl::Status MarkDatabaseError(absl::Status status);
bool IsDatabaseError(const absl::Status& status);

// The merge rule of a step's metrics, for points of one step that arrive
// apart (a step and its evaluation, a re-sent batch): every field `into`
// lacks is taken from `from`; what it has stays (the first value wins).
// PostgreSQL's statements keep the same rule across batches (COALESCE of the
// stored value first, db/sql); in C++ this is the one copy of it.
void MergeMetricPoint(const v1::MetricPoint& from, v1::MetricPoint* into);

// The l0 of a trial, its validation loss before the first update: the
// result's init_val_loss when finite, else the val_loss of its step-0 metric
// point when finite (a client may report l0 only as that point), else none.
// The boundary search judges probes by it; in SQL the rule is the view
// trial_l0 (db/views/40_trial_l0.sql), which the analysis views read too.
std::optional<double> TrialL0(std::optional<double> init_val_loss, std::optional<double> step0_val_loss);

// The attempt that ended a final trial through FinishTrial, which the stores
// do not record in trial_attempts: the trial itself (worker, finish time,
// final state, its error as the reason). GetTrial and ExportSweep's attempts
// list it after the recorded ones; nullopt when the trial is not final, has
// no attempt, or its last attempt is recorded (last_recorded: the highest
// recorded attempt number, 0 when none). In SQL: db/pg_export.cc's attempts.
std::optional<v1::TrialAttempt> FinishingAttempt(const v1::Trial& t, int32_t last_recorded);

// The outcome and error of an attempt retried or expired with `reason`:
// PENDING while attempts remain, FAILED after the last, CANCELLED when the
// sweep was cancelled. Both stores decide by this rule (PostgresStore in SQL).
std::string RetriedAttemptError(const std::string& reason, int attempts);
// The error of a trial FAILED by its last interruption (max_interruptions).
std::string InterruptedError(const std::string& cause, int interruptions);

// The states' stored names ("PENDING", ...; "RUNNING", ...) and which are
// final: the schema's one definition.
using schema::IsFinal;
using schema::SweepStateFromName;
using schema::SweepStateName;
using schema::TrialStateFromName;
using schema::TrialStateName;
// Adds n trials in `state` to counts.
void AddToCounts(v1::TrialState state, v1::TrialCounts* counts, int64_t n = 1);

}  // namespace normsweep::db

#endif  // NORMSWEEP_DB_STORE_H_
