// gRPC adapters: each handler converts, calls Scheduler and maps the
// absl::Status with the one shared mapping (common/grpc_status.h). Most
// handlers use the sync API, which runs them on gRPC's thread pool, where
// blocking on the database is allowed; the worker's hot calls use the
// callback API and never block (no callback reactor thread is ever blocked).
#ifndef NORMSWEEP_SCHEDULER_GRPC_SERVICES_H_
#define NORMSWEEP_SCHEDULER_GRPC_SERVICES_H_

#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#include "normsweep/v1/sweep_service.grpc.pb.h"
#include "normsweep/v1/worker_service.grpc.pb.h"
#include "scheduler/scheduler.h"
#include "scheduler/scheduler_metrics.h"

namespace normsweep::scheduler {

class SweepServiceImpl final : public v1::SweepService::Service {
 public:
  SweepServiceImpl(Scheduler& scheduler, SchedulerMetrics& metrics, std::string api_token = "")
      : scheduler_(scheduler), metrics_(metrics), api_token_(std::move(api_token)) {}

  grpc::Status SubmitSweep(grpc::ServerContext*, const v1::SubmitSweepRequest*, v1::SubmitSweepResponse*) override;
  grpc::Status GetSweep(grpc::ServerContext*, const v1::GetSweepRequest*, v1::GetSweepResponse*) override;
  grpc::Status ListSweeps(grpc::ServerContext*, const v1::ListSweepsRequest*, v1::ListSweepsResponse*) override;
  grpc::Status CancelSweep(grpc::ServerContext*, const v1::CancelSweepRequest*, v1::CancelSweepResponse*) override;
  grpc::Status ListTrials(grpc::ServerContext*, const v1::ListTrialsRequest*, v1::ListTrialsResponse*) override;
  grpc::Status GetTrial(grpc::ServerContext*, const v1::GetTrialRequest*, v1::GetTrialResponse*) override;
  grpc::Status WatchSweep(grpc::ServerContext*, const v1::WatchSweepRequest*,
                          grpc::ServerWriter<v1::WatchSweepEvent>*) override;
  grpc::Status ListWorkers(grpc::ServerContext*, const v1::ListWorkersRequest*, v1::ListWorkersResponse*) override;

 private:
  Scheduler& scheduler_;
  SchedulerMetrics& metrics_;
  const std::string api_token_;  // empty: calls need no token
};

// The three calls of every trial's lifecycle use the callback API: the
// handler hands the request to the Scheduler's asynchronous call and returns;
// the store answers from its group runner's thread (db/group_runner.h), which
// finishes the whole group's calls. No thread per call waits for the
// database, and no thread is woken per call to send its answer.
// StreamProgress too: one reactor per stream, one request in flight.
using WorkerServiceBase = v1::WorkerService::WithCallbackMethod_LeaseTrial<
    v1::WorkerService::WithCallbackMethod_ReportProgress<v1::WorkerService::WithCallbackMethod_StreamProgress<
        v1::WorkerService::WithCallbackMethod_FinishTrial<v1::WorkerService::Service>>>>;

class WorkerServiceImpl final : public WorkerServiceBase {
 public:
  WorkerServiceImpl(Scheduler& scheduler, SchedulerMetrics& metrics, std::string api_token = "")
      : scheduler_(scheduler), metrics_(metrics), api_token_(std::move(api_token)) {}

  grpc::Status RegisterWorker(grpc::ServerContext*, const v1::RegisterWorkerRequest*,
                              v1::RegisterWorkerResponse*) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*, v1::HeartbeatResponse*) override;
  grpc::ServerUnaryReactor* LeaseTrial(grpc::CallbackServerContext*, const v1::LeaseTrialRequest*,
                                       v1::LeaseTrialResponse*) override;
  grpc::ServerUnaryReactor* ReportProgress(grpc::CallbackServerContext*, const v1::ReportProgressRequest*,
                                           v1::ReportProgressResponse*) override;
  grpc::ServerUnaryReactor* FinishTrial(grpc::CallbackServerContext*, const v1::FinishTrialRequest*,
                                        v1::FinishTrialResponse*) override;
  grpc::ServerBidiReactor<v1::ReportProgressRequest, v1::ReportProgressResponse>* StreamProgress(
      grpc::CallbackServerContext* context) override;

  // Cancels every open StreamProgress stream (and refuses new ones with
  // UNAVAILABLE): called before the server's Shutdown, so that it does not
  // wait its deadline for streams that stay open between batches. A batch
  // being stored meanwhile may or may not be; the worker sends it again.
  void CloseProgressStreams();

  class ProgressStream;  // one stream's reactor (grpc_services.cc)

 private:
  Scheduler& scheduler_;
  SchedulerMetrics& metrics_;
  const std::string api_token_;  // empty: calls need no token
  absl::Mutex streams_mu_;
  std::set<ProgressStream*> streams_ ABSL_GUARDED_BY(streams_mu_);  // the open ones
  bool closing_ ABSL_GUARDED_BY(streams_mu_) = false;
};

}  // namespace normsweep::scheduler

#endif  // NORMSWEEP_SCHEDULER_GRPC_SERVICES_H_
