// The worker's reporter: the only sender of ReportProgress and FinishTrial,
// so a slow or unreachable scheduler never blocks a slot reading its
// trainer's pipe. A batch stays in its lease's ProgressBuffer until the
// scheduler acknowledges it; a failed call is retried with back-off.
//
// Loop runs on the reporter thread, NoteRpc on any thread. The LeaseTable's
// mu guards what it reads and writes of the leases, and is never held
// across a call to the scheduler.
#ifndef NORMSWEEP_WORKER_REPORTER_H_
#define NORMSWEEP_WORKER_REPORTER_H_

#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "normsweep/v1/worker_service.pb.h"
#include "worker/lease.h"
#include "worker/progress_buffer.h"
#include "worker/scheduler_client.h"
#include "worker/worker_options.h"

namespace normsweep::worker {

class Reporter {
 public:
  // worker_id: the id the worker registered under (it changes when the
  // worker registers again).
  Reporter(SchedulerClient& client, Clock& clock, const WorkerOptions& options, LeaseTable& leases,
           const std::atomic<int64_t>& worker_id);

  // The reporter thread: a pass over the leases every tick (50 ms, or the
  // flush interval if shorter) until `stop` is notified, then a last one for
  // whatever arrived at the very end.
  void Loop(absl::Notification& stop);

  // Logs when the scheduler becomes unreachable or reachable again (then
  // ends every back-off). For every call to the scheduler; without mu held.
  void NoteRpc(const absl::Status& status, const char* what);

 private:
  // Forgets lost leases; reports the leases with something due.
  void Pass();
  // One lease's pending work: progress first (the scheduler refuses it
  // after FinishTrial), then the result.
  void Report(const LeasePtr& lease);
  // One call each; true when the lease has more to send at once.
  bool SendProgress(const LeasePtr& lease, const v1::ReportProgressRequest& request, const PeekedBatch& batch);
  bool SendFinish(const LeasePtr& lease, const v1::FinishTrialRequest& request);
  // A call that failed: refused as a lease not held (the lease is lost), or
  // retried after a back-off.
  void Fail(const LeasePtr& lease, const absl::Status& status, const char* what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(leases_.mu);
  // The scheduler refused a progress batch as invalid (INVALID_ARGUMENT):
  // the attempt ends as the trial's own failure.
  void RefuseProgress(Lease& lease, const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(leases_.mu);

  SchedulerClient& client_;
  Clock& clock_;
  const WorkerOptions& options_;
  LeaseTable& leases_;
  const std::atomic<int64_t>& worker_id_;
  std::atomic<bool> scheduler_unreachable_{false};  // for logging state changes only
};

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_REPORTER_H_
