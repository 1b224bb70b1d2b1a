// The scheduler's logic with a plain C++ API: the gRPC services are thin
// adapters over this class, and tests call it directly (no sockets).
// Dependencies arrive by reference: the Store (durable state), a Clock (lease
// times; tests inject FakeClock) and the metrics.
//
// Thread-safe. Holds no state that another replica would need: everything
// durable is in the Store; watch_mu_ only guards a change counter that wakes
// this replica's WatchSweep streams early (others poll).
#ifndef NORMSWEEP_SCHEDULER_SCHEDULER_H_
#define NORMSWEEP_SCHEDULER_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "db/store.h"
#include "normsweep/v1/sweep_service.pb.h"
#include "normsweep/v1/worker_service.pb.h"
#include "scheduler/scheduler_metrics.h"
#include "scheduler/sweep_spec.h"

namespace normsweep::scheduler {

struct SchedulerOptions {
  absl::Duration lease_duration = absl::Seconds(60);
  absl::Duration heartbeat_interval = absl::Seconds(15);
  // A worker without a heartbeat for this long is no longer counted live.
  absl::Duration worker_timeout = absl::Seconds(90);
  // WatchSweep polls the store at least this often (other replicas' changes).
  absl::Duration watch_poll_interval = absl::Milliseconds(500);
};

// WatchSweep's re-read floor. Change numbers are taken inside transactions,
// so a smaller one can commit after a larger one was seen: each poll
// therefore re-reads from the highest number seen at least `slack` ago (by
// the scheduler's clock). One per stream; not thread-safe.
class WatchFloor {
 public:
  explicit WatchFloor(absl::Duration slack) : slack_(slack) {}
  // A poll at `now` saw change numbers up to `highest`; returns the floor
  // for the next poll.
  int64_t Seen(absl::Time now, int64_t highest);
  int64_t floor() const { return floor_; }

 private:
  const absl::Duration slack_;
  std::deque<std::pair<absl::Time, int64_t>> seen_at_;  // (when, highest number seen)
  int64_t floor_ = 0;
};

class Scheduler {
 public:
  Scheduler(db::Store& store, Clock& clock, SchedulerMetrics& metrics, SchedulerOptions options = {});

  // ---- SweepService ----
  // submitted_by, cancelled_by: the caller's name (common/authenticator.h),
  // stored as Sweep.submitted_by and Sweep.cancelled_by. SubmitSweep fills
  // in the expanded grid, the warnings and the cost estimate
  // (sweep_preview.h, cost_estimate.h), for validate_only too; a sweep with
  // warnings is stored only with allow_warnings (FAILED_PRECONDITION
  // otherwise, before any store call).
  absl::StatusOr<v1::SubmitSweepResponse> SubmitSweep(const v1::SubmitSweepRequest& request,
                                                      const std::string& submitted_by = "");
  absl::StatusOr<v1::GetSweepResponse> GetSweep(const v1::GetSweepRequest& request);
  absl::StatusOr<v1::ListSweepsResponse> ListSweeps(const v1::ListSweepsRequest& request);
  absl::StatusOr<v1::CancelSweepResponse> CancelSweep(const v1::CancelSweepRequest& request,
                                                      const std::string& cancelled_by = "");
  absl::StatusOr<v1::ListTrialsResponse> ListTrials(const v1::ListTrialsRequest& request);
  absl::StatusOr<v1::GetTrialResponse> GetTrial(const v1::GetTrialRequest& request);
  // Calls send for each event until the sweep and all its trials are final
  // (OK), send returns false or cancelled() turns true (CANCELLED). Blocks the
  // calling thread: run it on a thread that may block.
  absl::Status WatchSweep(const v1::WatchSweepRequest& request,
                          const std::function<bool(const v1::WatchSweepEvent&)>& send,
                          const std::function<bool()>& cancelled);
  // Every registered worker by id; live means heard from within
  // worker_timeout, the rule of the live-workers gauge.
  absl::StatusOr<v1::ListWorkersResponse> ListWorkers(const v1::ListWorkersRequest& request);
  // The analysis views' rows for a sweep (db::Store::GetSweepAnalysis).
  absl::StatusOr<v1::GetSweepAnalysisResponse> GetSweepAnalysis(const v1::GetSweepAnalysisRequest& request);

  // ---- WorkerService ----
  absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(const v1::RegisterWorkerRequest& request);
  absl::StatusOr<v1::LeaseTrialResponse> LeaseTrial(const v1::LeaseTrialRequest& request);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);
  absl::StatusOr<v1::ReportProgressResponse> ReportProgress(const v1::ReportProgressRequest& request);
  absl::StatusOr<v1::FinishTrialResponse> FinishTrial(const v1::FinishTrialRequest& request);
  // The same three answered through done, which runs on the store's thread
  // (or before the call returns): what the gRPC callback handlers use, so
  // that no gRPC thread waits for the database. request must stay valid
  // until done has been called.
  template <typename T>
  using Done = std::function<void(absl::StatusOr<T>)>;
  void LeaseTrialAsync(const v1::LeaseTrialRequest& request, Done<v1::LeaseTrialResponse> done);
  void ReportProgressAsync(const v1::ReportProgressRequest& request, Done<v1::ReportProgressResponse> done);
  void FinishTrialAsync(const v1::FinishTrialRequest& request, Done<v1::FinishTrialResponse> done);

  // Expires leases and refreshes the gauges; the server calls it periodically.
  absl::Status RunMaintenance();

  const SchedulerOptions& options() const { return options_; }
  // ExportSweep streams from the store itself (scheduler/grpc_services.cc).
  db::Store& store() { return store_; }

 private:
  // Leases that ended before now back to the queue (or FAILED/CANCELLED),
  // counted in the metrics.
  absl::Status ExpireLeases(absl::Time now);
  // Keeps the latest outage of the database, as maintenance saw it
  // (UNAVAILABLE): a lease that expired within it, up to a lease after its
  // last failure, was lost to it ("lease_lost"), not to its worker.
  void NoteStoreOutcome(const absl::Status& status, absl::Time now);

  // LeaseTrialRequest.max_trials > 1: after the first trial (response's),
  // up to `more` PENDING trials of its sweep with its fusion key, added to
  // response.fused_trials; then done.
  void LeaseFused(int64_t worker_id, absl::Time now, int more, v1::LeaseTrialResponse response,
                  Done<v1::LeaseTrialResponse> done);

  // The cost estimate of trials on the live workers, with the throughput
  // measured on their finished trials (two store reads).
  absl::StatusOr<v1::CostEstimate> Estimate(const ValidSpec& valid, const std::vector<db::NewTrial>& trials);

  void NotifyChange();
  db::Store& store_;
  Clock& clock_;
  SchedulerMetrics& metrics_;
  const SchedulerOptions options_;

  absl::Mutex outage_mu_;
  std::optional<absl::Time> outage_from_ ABSL_GUARDED_BY(outage_mu_);
  absl::Time outage_last_ ABSL_GUARDED_BY(outage_mu_);
  bool in_outage_ ABSL_GUARDED_BY(outage_mu_) = false;

  absl::Mutex watch_mu_;
  uint64_t changes_ ABSL_GUARDED_BY(watch_mu_) = 0;
};

}  // namespace normsweep::scheduler

#endif  // NORMSWEEP_SCHEDULER_SCHEDULER_H_
