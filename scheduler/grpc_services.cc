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
