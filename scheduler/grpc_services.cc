#include "scheduler/grpc_services.h"

#include <atomic>
#include <vector>

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

// One StreamProgress stream: read a request, hand it to the Scheduler, write
// its answer from whichever thread the Scheduler answers on, read the next.
// Only one operation is ever pending, so the members need no lock: each step
// starts the next from its own completion (and no lock is held around
// StartRead, StartWrite or Finish: gRPC may run the reaction inline).
// CloseProgressStreams cancels the call; refs_ keeps the reactor alive while
// it does (the stream deletes itself once gRPC is done with it and no one
// else holds it).
class WorkerServiceImpl::ProgressStream final
    : public grpc::ServerBidiReactor<v1::ReportProgressRequest, v1::ReportProgressResponse> {
 public:
  ProgressStream(WorkerServiceImpl& service, grpc::CallbackServerContext* context, grpc::Status auth)
      : service_(service), context_(context) {
    if (!auth.ok()) {
      Finish(auth);
      return;
    }
    {
      absl::MutexLock lock(&service_.streams_mu_);
      if (!service_.closing_) {
        service_.streams_.insert(this);
        registered_ = true;
      }
    }
    if (!registered_) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "scheduler shutting down"));
      return;
    }
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed, went away, or the stream was cancelled
      Finish(grpc::Status::OK);
      return;
    }
    service_.scheduler_.ReportProgressAsync(request_, [this](absl::StatusOr<v1::ReportProgressResponse> result) {
      if (!result.ok()) {
        service_.metrics_.RpcError("StreamProgress", result.status().code());
        Finish(ToGrpcStatus(result.status()));
        return;
      }
      response_ = *std::move(result);
      StartWrite(&response_);
    });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {  // the client went away, or the stream was cancelled
      Finish(grpc::Status::CANCELLED);
      return;
    }
    StartRead(&request_);
  }

  void OnDone() override {
    if (registered_) {
      absl::MutexLock lock(&service_.streams_mu_);
      service_.streams_.erase(this);
    }
    {
      // gRPC frees the context once this returns: no Cancel after it.
      absl::MutexLock lock(&done_mu_);
      done_ = true;
    }
    Unref();
  }

  // The pending operation fails at once (the worker sees CANCELLED and
  // resends the batch, if any, once a scheduler answers). Nothing when gRPC
  // is already done with the call.
  void Cancel() {
    absl::MutexLock lock(&done_mu_);
    if (!done_) context_->TryCancel();
  }

  void Ref() { refs_.fetch_add(1); }
  void Unref() {
    if (refs_.fetch_sub(1) == 1) delete this;
  }

 private:
  WorkerServiceImpl& service_;
  grpc::CallbackServerContext* const context_;
  bool registered_ = false;   // in service_.streams_; set before any reaction runs
  std::atomic<int> refs_{1};  // gRPC's, until OnDone
  absl::Mutex done_mu_;
  bool done_ ABSL_GUARDED_BY(done_mu_) = false;
  v1::ReportProgressRequest request_;
  v1::ReportProgressResponse response_;
};

grpc::ServerBidiReactor<v1::ReportProgressRequest, v1::ReportProgressResponse>* WorkerServiceImpl::StreamProgress(
    grpc::CallbackServerContext* context) {
  return new ProgressStream(*this, context, Authenticate(metrics_, "StreamProgress", *context, api_token_));
}

void WorkerServiceImpl::CloseProgressStreams() {
  std::vector<ProgressStream*> open;
  {
    absl::MutexLock lock(&streams_mu_);
    closing_ = true;
    for (ProgressStream* stream : streams_) {
      stream->Ref();  // alive until cancelled, whatever gRPC does meanwhile
      open.push_back(stream);
    }
  }
  for (ProgressStream* stream : open) {
    stream->Cancel();
    stream->Unref();
  }
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
