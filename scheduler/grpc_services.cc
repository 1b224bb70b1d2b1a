#include "scheduler/grpc_services.h"

#include <atomic>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/authenticator.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "db/store.h"

namespace normsweep::scheduler {

grpc::Status ClientStatus(const absl::Status& status, const char* method, grpc::ServerContext* context) {
  if (status.ok() || !db::IsDatabaseError(status)) return ToGrpcStatus(status);
  LogLine("normsweep-scheduler", absl::StrCat(method, ": ", status.ToString(absl::StatusToStringMode::kWithNoExtraData)));
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
      if (context != nullptr) context->AddTrailingMetadata(kDatabaseUnavailableKey, "1");
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "the scheduler cannot reach its database right now (it keeps retrying); try again shortly");
    case absl::StatusCode::kDeadlineExceeded:
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "the database did not answer in time; try again");
    case absl::StatusCode::kAborted:
      return grpc::Status(grpc::StatusCode::ABORTED, "a concurrent change got there first; try again");
    default:
      return grpc::Status(grpc::StatusCode::INTERNAL, "database error (the scheduler's log has the details)");
  }
}

namespace {

template <typename T>
grpc::Status Reply(SchedulerMetrics& metrics, const char* method, grpc::ServerContext* context,
                   absl::StatusOr<T> result, T* out) {
  if (!result.ok()) {
    metrics.RpcError(method, result.status().code());
    return ClientStatus(result.status(), method, context);
  }
  *out = *std::move(result);
  return grpc::Status::OK;
}

grpc::Status ShuttingDown() { return grpc::Status(grpc::StatusCode::UNAVAILABLE, "scheduler shutting down"); }

// Who the call comes from and whether its role lets it call `method`
// (common/authenticator.h), counted as an RPC error like any other when not.
// Runs before anything else a handler does. caller: the caller's name.
grpc::Status Authenticate(SchedulerMetrics& metrics, const char* method, const grpc::ServerContextBase& context,
                          const Authenticator& auth, std::string* caller = nullptr) {
  std::string name;
  grpc::Status status = auth.Check(context, method, caller != nullptr ? caller : &name);
  if (!status.ok()) metrics.RpcError(method, static_cast<absl::StatusCode>(status.error_code()));
  return status;
}

// The Scheduler's calls that record who made them (SubmitSweep, CancelSweep)
// take the caller's name; the others do not.
template <typename Response, typename Request>
absl::StatusOr<Response> CallScheduler(Scheduler& scheduler, absl::StatusOr<Response> (Scheduler::*method)(const Request&),
                                       const Request& request, const std::string&) {
  return (scheduler.*method)(request);
}
template <typename Response, typename Request>
absl::StatusOr<Response> CallScheduler(Scheduler& scheduler,
                                       absl::StatusOr<Response> (Scheduler::*method)(const Request&, const std::string&),
                                       const Request& request, const std::string& caller) {
  return (scheduler.*method)(request, caller);
}

}  // namespace

#define NS_UNARY(Service, Method, Request, Response)                                              \
  grpc::Status Service::Method(grpc::ServerContext* context, const v1::Request* request,               \
                               v1::Response* response) {                                                 \
    CallsInFlight::Scope in_flight(calls_);                                                             \
    if (Refusing()) return ShuttingDown();                                                               \
    std::string caller;                                                                                  \
    if (grpc::Status auth = Authenticate(metrics_, #Method, *context, auth_, &caller); !auth.ok()) return auth; \
    return Reply(metrics_, #Method, context, CallScheduler(scheduler_, &Scheduler::Method, *request, caller), \
                 response);                                                                              \
  }

NS_UNARY(SweepServiceImpl, SubmitSweep, SubmitSweepRequest, SubmitSweepResponse)
NS_UNARY(SweepServiceImpl, GetSweep, GetSweepRequest, GetSweepResponse)
NS_UNARY(SweepServiceImpl, ListSweeps, ListSweepsRequest, ListSweepsResponse)
NS_UNARY(SweepServiceImpl, CancelSweep, CancelSweepRequest, CancelSweepResponse)
NS_UNARY(SweepServiceImpl, ListTrials, ListTrialsRequest, ListTrialsResponse)
NS_UNARY(SweepServiceImpl, GetTrial, GetTrialRequest, GetTrialResponse)
NS_UNARY(SweepServiceImpl, ListWorkers, ListWorkersRequest, ListWorkersResponse)
NS_UNARY(SweepServiceImpl, GetSweepAnalysis, GetSweepAnalysisRequest, GetSweepAnalysisResponse)
NS_UNARY(WorkerServiceImpl, RegisterWorker, RegisterWorkerRequest, RegisterWorkerResponse)
NS_UNARY(WorkerServiceImpl, Heartbeat, HeartbeatRequest, HeartbeatResponse)

#undef NS_UNARY

// A pending operation on the worker's completion queue: Serve's thread
// calls Proceed when it completes. Every Call always has exactly one
// operation pending, or one Scheduler call (counted, see Drain) whose answer
// starts the next operation from the group runner's thread; so no two
// threads touch a Call at once (but for ProgressStream::Cancel, gRPC's
// thread-safe TryCancel), and it deletes itself after its last.
class WorkerServiceImpl::Call {
 public:
  virtual ~Call() = default;
  virtual void Proceed(bool ok) = 0;
};

// LeaseTrial, ReportProgress, FinishTrial: wait for a call, hand it to the
// Scheduler, send its answer.
template <typename Request, typename Response>
class WorkerServiceImpl::UnaryCall final : public WorkerServiceImpl::Call {
 public:
  using RequestFn = void (WorkerServiceImpl::*)(grpc::ServerContext*, Request*,
                                                grpc::ServerAsyncResponseWriter<Response>*, grpc::CompletionQueue*,
                                                grpc::ServerCompletionQueue*, void*);
  using HandleFn = void (Scheduler::*)(const Request&, Scheduler::Done<Response>);

  // Asks gRPC for the next call of this method.
  UnaryCall(WorkerServiceImpl& service, const char* method, RequestFn request_fn, HandleFn handle)
      : service_(service), method_(method), request_fn_(request_fn), handle_(handle), responder_(&context_) {
    (service_.*request_fn_)(&context_, &request_, &responder_, service_.cq_, service_.cq_, this);
  }

  void Proceed(bool ok) override {
    // !ok: the server is shutting down (no call came), or the answer could
    // not be sent (the client went away); either way this call is over.
    if (service_.draining_ || !ok || answering_) {
      delete this;
      return;
    }
    answering_ = true;
    new UnaryCall(service_, method_, request_fn_, handle_);  // the next call of this method
    if (grpc::Status auth = Authenticate(service_.metrics_, method_, context_, service_.auth_); !auth.ok()) {
      responder_.FinishWithError(auth, this);
      return;
    }
    if (!service_.BeginSchedulerCall()) {
      responder_.FinishWithError(ShuttingDown(), this);
      return;
    }
    (service_.scheduler_.*handle_)(request_, [this, service = &service_](absl::StatusOr<Response> result) {
      grpc::Status status = Reply(service->metrics_, method_, &context_, std::move(result), &response_);
      if (status.ok()) {
        responder_.Finish(response_, status, this);
      } else {
        responder_.FinishWithError(status, this);
      }
      // Not `this` any more: Serve's thread may have deleted it.
      service->EndSchedulerCall();
    });
  }

 private:
  WorkerServiceImpl& service_;
  const char* const method_;
  const RequestFn request_fn_;
  const HandleFn handle_;
  grpc::ServerContext context_;
  Request request_;
  Response response_;
  grpc::ServerAsyncResponseWriter<Response> responder_;
  bool answering_ = false;  // the call came; the pending operation is its answer
};

// One StreamProgress stream: read a request, hand it to the Scheduler, write
// its answer (from whichever thread the Scheduler answers on), read the
// next. CloseProgressStreams cancels it while it is in service_.streams_.
class WorkerServiceImpl::ProgressStream final : public WorkerServiceImpl::Call {
 public:
  explicit ProgressStream(WorkerServiceImpl& service) : service_(service), stream_(&context_) {
    service_.RequestStreamProgress(&context_, &stream_, service_.cq_, service_.cq_, this);
  }

  void Proceed(bool ok) override {
    if (service_.draining_) {
      Close();
      return;
    }
    switch (state_) {
      case State::kWaitingForCall:
        if (!ok) {  // the server is shutting down
          delete this;
          return;
        }
        new ProgressStream(service_);  // the next stream
        if (grpc::Status auth = Authenticate(service_.metrics_, "StreamProgress", context_, service_.auth_);
            !auth.ok()) {
          Finish(auth);
        } else if (!Register()) {
          Finish(ShuttingDown());
        } else {
          Read();
        }
        return;
      case State::kReading:
        if (!ok) {  // the client half-closed, went away, or the stream was cancelled
          Finish(cancelled_ ? grpc::Status::CANCELLED : grpc::Status::OK);
          return;
        }
        if (!Parse()) {
          service_.metrics_.RpcError("StreamProgress", absl::StatusCode::kInvalidArgument);
          Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "StreamProgress: a request could not be parsed as a ReportProgressRequest"));
          return;
        }
        if (!service_.BeginSchedulerCall()) {
          Finish(ShuttingDown());
          return;
        }
        state_ = State::kStoring;
        service_.scheduler_.ReportProgressAsync(
            request_, [this, service = &service_](absl::StatusOr<v1::ReportProgressResponse> result) {
              if (!result.ok()) {
                service->metrics_.RpcError("StreamProgress", result.status().code());
                Finish(ClientStatus(result.status(), "StreamProgress", &context_));
              } else {
                state_ = State::kWriting;
                stream_.Write(Serialize(*result), this);
              }
              service->EndSchedulerCall();  // not `this`: see UnaryCall
            });
        return;
      case State::kStoring:  // never completes an operation
        return;
      case State::kWriting:
        if (!ok) {  // the client went away, or the stream was cancelled
          Finish(grpc::Status::CANCELLED);
          return;
        }
        Read();
        return;
      case State::kFinishing:
        Close();
        return;
    }
  }

  // The pending operation fails at once (the worker sees CANCELLED and
  // resends the batch, if any, once a scheduler answers).
  void Cancel() {
    cancelled_ = true;  // a cancelled call must end CANCELLED (ServerContext::TryCancel)
    context_.TryCancel();
  }

 private:
  enum class State { kWaitingForCall, kReading, kStoring, kWriting, kFinishing };

  // The state is set before the operation starts: it may complete at once.
  void Read() {
    state_ = State::kReading;
    raw_request_.Clear();
    stream_.Read(&raw_request_, this);
  }
  bool Parse() {
    request_.Clear();
    return grpc::SerializationTraits<v1::ReportProgressRequest>::Deserialize(&raw_request_, &request_).ok();
  }
  grpc::ByteBuffer& Serialize(const v1::ReportProgressResponse& response) {
    bool own = false;
    raw_response_.Clear();
    (void)grpc::SerializationTraits<v1::ReportProgressResponse>::Serialize(response, &raw_response_, &own);
    return raw_response_;
  }
  void Finish(const grpc::Status& status) {
    state_ = State::kFinishing;
    stream_.Finish(status, this);
  }
  bool Register() {
    absl::MutexLock lock(&service_.mu_);
    if (service_.closing_) return false;
    service_.streams_.insert(this);
    return true;
  }
  void Close() {
    {
      absl::MutexLock lock(&service_.mu_);
      service_.streams_.erase(this);
    }
    delete this;
  }

  WorkerServiceImpl& service_;
  grpc::ServerContext context_;
  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> stream_;
  State state_ = State::kWaitingForCall;
  std::atomic<bool> cancelled_{false};
  grpc::ByteBuffer raw_request_;
  grpc::ByteBuffer raw_response_;
  v1::ReportProgressRequest request_;
};

namespace {

// Drain's tag: run on Serve's thread, so that no Proceed is running while
// the queue shuts down.
class DrainTag final : public WorkerServiceImpl::Call {
 public:
  explicit DrainTag(std::function<void()> run) : run_(std::move(run)) {}
  void Proceed(bool) override {
    run_();
    delete this;
  }

 private:
  std::function<void()> run_;
};

}  // namespace

void WorkerServiceImpl::Serve() {
  grpc::ServerCompletionQueue* const cq = cq_;
  using Lease = UnaryCall<v1::LeaseTrialRequest, v1::LeaseTrialResponse>;
  using Progress = UnaryCall<v1::ReportProgressRequest, v1::ReportProgressResponse>;
  using Finish = UnaryCall<v1::FinishTrialRequest, v1::FinishTrialResponse>;
  new Lease(*this, "LeaseTrial", &WorkerServiceImpl::RequestLeaseTrial, &Scheduler::LeaseTrialAsync);
  new Progress(*this, "ReportProgress", &WorkerServiceImpl::RequestReportProgress, &Scheduler::ReportProgressAsync);
  new Finish(*this, "FinishTrial", &WorkerServiceImpl::RequestFinishTrial, &Scheduler::FinishTrialAsync);
  new ProgressStream(*this);
  void* tag;
  bool ok;
  while (cq->Next(&tag, &ok)) static_cast<Call*>(tag)->Proceed(ok);
}

bool WorkerServiceImpl::BeginSchedulerCall() {
  absl::MutexLock lock(&mu_);
  if (stopping_ || closing_) return false;
  ++scheduler_calls_;
  return true;
}

void WorkerServiceImpl::EndSchedulerCall() {
  absl::MutexLock lock(&mu_);
  --scheduler_calls_;
}

void WorkerServiceImpl::Drain() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    mu_.Await(absl::Condition(
        +[](int* calls) { return *calls == 0; }, &scheduler_calls_));
  }
  drain_alarm_ = std::make_unique<grpc::Alarm>();
  drain_alarm_->Set(cq_, gpr_now(GPR_CLOCK_MONOTONIC), new DrainTag([this] {
                      draining_ = true;
                      cq_->Shutdown();
                    }));
}

int WorkerServiceImpl::CloseProgressStreams() {
  absl::MutexLock lock(&mu_);
  closing_ = true;
  refusing_.store(true);
  for (ProgressStream* stream : streams_) stream->Cancel();
  return static_cast<int>(streams_.size());
}

int WorkerServiceImpl::calls_in_flight() {
  absl::MutexLock lock(&mu_);
  return scheduler_calls_ + calls_.count();
}

int SweepServiceImpl::CloseWatches() {
  absl::MutexLock lock(&mu_);
  closing_ = true;
  stopping_.store(true);
  for (grpc::ServerContext* context : watches_) context->TryCancel();
  return static_cast<int>(watches_.size());
}

grpc::Status SweepServiceImpl::RunStream(
    const char* method, grpc::ServerContext* context,
    const std::function<absl::Status(const std::function<bool()>& stop)>& body) {
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return ShuttingDown();
    watches_.insert(context);
  }
  absl::Cleanup closed = [this, context] {
    absl::MutexLock lock(&mu_);
    watches_.erase(context);
  };
  absl::Status status = body([this, context] { return stopping_.load() || context->IsCancelled(); });
  if (!status.ok() && status.code() != absl::StatusCode::kCancelled) metrics_.RpcError(method, status.code());
  return ClientStatus(status, method, context);
}

grpc::Status SweepServiceImpl::WatchSweep(grpc::ServerContext* context, const v1::WatchSweepRequest* request,
                                          grpc::ServerWriter<v1::WatchSweepEvent>* writer) {
  if (grpc::Status auth = Authenticate(metrics_, "WatchSweep", *context, auth_); !auth.ok()) return auth;
  return RunStream("WatchSweep", context, [&](const std::function<bool()>& stop) {
    return scheduler_.WatchSweep(
        *request, [writer](const v1::WatchSweepEvent& event) { return writer->Write(event); }, stop);
  });
}

grpc::Status SweepServiceImpl::ExportSweep(grpc::ServerContext* context, const v1::ExportSweepRequest* request,
                                           grpc::ServerWriter<v1::ExportChunk>* writer) {
  if (grpc::Status auth = Authenticate(metrics_, "ExportSweep", *context, auth_); !auth.ok()) return auth;
  absl::StatusOr<db::ExportPlan> plan = db::PlanExport(*request);
  if (!plan.ok()) {
    metrics_.RpcError("ExportSweep", plan.status().code());
    return ClientStatus(plan.status(), "ExportSweep", context);
  }
  return RunStream("ExportSweep", context, [&](const std::function<bool()>& stop) {
    const db::ExportCallbacks callbacks{[this, writer](const v1::ExportChunk& chunk) {
                                          if (!writer->Write(chunk)) return false;
                                          metrics_.ExportChunkSent(chunk.rows());
                                          return true;
                                        },
                                        stop};
    return scheduler_.store().ExportSweep(*plan, db::ExportOptions(), callbacks);
  });
}

}  // namespace normsweep::scheduler
