#include "scheduler/grpc_services.h"

#include "common/api_token.h"
#include "common/grpc_status.h"

namespace normsweep::scheduler {
namespace {

template <typename T>
grpc::Status Reply(SchedulerMetrics& metrics, const char* method, absl::StatusOr<T> result, T* out) {
  if (!result.ok()) {
    metrics.RpcError(method, result.status().code());
    return ToGrpcStatus(result.status());
  }
  *out = *std::move(result);
  return grpc::Status::OK;
}

// The API token check, counted as an RPC error like any other.
grpc::Status Authenticate(SchedulerMetrics& metrics, const char* method, const grpc::ServerContextBase& context,
                          const std::string& token) {
  grpc::Status status = CheckApiToken(context, token);
  if (!status.ok()) metrics.RpcError(method, absl::StatusCode::kUnauthenticated);
  return status;
}

}  // namespace

#define NS_UNARY(Service, Method, Request, Response)                                              \
  grpc::Status Service::Method(grpc::ServerContext* context, const v1::Request* request,               \
                               v1::Response* response) {                                                 \
    if (grpc::Status auth = Authenticate(metrics_, #Method, *context, api_token_); !auth.ok()) return auth;  \
    return Reply(metrics_, #Method, scheduler_.Method(*request), response);                              \
  }

NS_UNARY(SweepServiceImpl, SubmitSweep, SubmitSweepRequest, SubmitSweepResponse)
NS_UNARY(SweepServiceImpl, GetSweep, GetSweepRequest, GetSweepResponse)
NS_UNARY(SweepServiceImpl, ListSweeps, ListSweepsRequest, ListSweepsResponse)
NS_UNARY(SweepServiceImpl, CancelSweep, CancelSweepRequest, CancelSweepResponse)
NS_UNARY(SweepServiceImpl, ListTrials, ListTrialsRequest, ListTrialsResponse)
NS_UNARY(SweepServiceImpl, GetTrial, GetTrialRequest, GetTrialResponse)
NS_UNARY(SweepServiceImpl, ListWorkers, ListWorkersRequest, ListWorkersResponse)
NS_UNARY(WorkerServiceImpl, RegisterWorker, RegisterWorkerRequest, RegisterWorkerResponse)
NS_UNARY(WorkerServiceImpl, Heartbeat, HeartbeatRequest, HeartbeatResponse)

#undef NS_UNARY

// Finishes the call from whichever thread the Scheduler answers on.
#define NS_CALLBACK(Method, Request, Response)                                                        \
  grpc::ServerUnaryReactor* WorkerServiceImpl::Method(grpc::CallbackServerContext* context,           \
                                                      const v1::Request* request, v1::Response* response) { \
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();                                    \
    if (grpc::Status auth = Authenticate(metrics_, #Method, *context, api_token_); !auth.ok()) {      \
      reactor->Finish(auth);                                                                          \
      return reactor;                                                                                 \
    }                                                                                                 \
    scheduler_.Method##Async(*request, [this, reactor, response](absl::StatusOr<v1::Response> result) { \
      reactor->Finish(Reply(metrics_, #Method, std::move(result), response));                         \
    });                                                                                               \
    return reactor;                                                                                   \
  }

NS_CALLBACK(LeaseTrial, LeaseTrialRequest, LeaseTrialResponse)
NS_CALLBACK(ReportProgress, ReportProgressRequest, ReportProgressResponse)
NS_CALLBACK(FinishTrial, FinishTrialRequest, FinishTrialResponse)

#undef NS_CALLBACK

namespace {

// One StreamProgress stream: read a request, hand it to the Scheduler, write
// its answer from whichever thread the Scheduler answers on, read the next.
// Only one operation is ever pending, so the members need no lock: each step
// starts the next from its own completion.
class ProgressStream final : public grpc::ServerBidiReactor<v1::ReportProgressRequest, v1::ReportProgressResponse> {
 public:
  ProgressStream(Scheduler& scheduler, SchedulerMetrics& metrics, grpc::Status auth)
      : scheduler_(scheduler), metrics_(metrics) {
    if (!auth.ok()) {
      Finish(auth);
      return;
    }
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed (or went away): every request was answered
      Finish(grpc::Status::OK);
      return;
    }
    scheduler_.ReportProgressAsync(request_, [this](absl::StatusOr<v1::ReportProgressResponse> result) {
      if (!result.ok()) {
        metrics_.RpcError("StreamProgress", result.status().code());
        Finish(ToGrpcStatus(result.status()));
        return;
      }
      response_ = *std::move(result);
      StartWrite(&response_);
    });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {  // the client went away
      Finish(grpc::Status::CANCELLED);
      return;
    }
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  Scheduler& scheduler_;
  SchedulerMetrics& metrics_;
  v1::ReportProgressRequest request_;
  v1::ReportProgressResponse response_;
};

}  // namespace

grpc::ServerBidiReactor<v1::ReportProgressRequest, v1::ReportProgressResponse>* WorkerServiceImpl::StreamProgress(
    grpc::CallbackServerContext* context) {
  return new ProgressStream(scheduler_, metrics_, Authenticate(metrics_, "StreamProgress", *context, api_token_));
}

grpc::Status SweepServiceImpl::WatchSweep(grpc::ServerContext* context, const v1::WatchSweepRequest* request,
                                          grpc::ServerWriter<v1::WatchSweepEvent>* writer) {
  if (grpc::Status auth = Authenticate(metrics_, "WatchSweep", *context, api_token_); !auth.ok()) return auth;
  absl::Status status = scheduler_.WatchSweep(
      *request, [writer](const v1::WatchSweepEvent& event) { return writer->Write(event); },
      [context] { return context->IsCancelled(); });
  if (!status.ok() && status.code() != absl::StatusCode::kCancelled) {
    metrics_.RpcError("WatchSweep", status.code());
  }
  return ToGrpcStatus(status);
}

}  // namespace normsweep::scheduler
