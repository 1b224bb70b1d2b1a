#include "worker/scheduler_client.h"

#include "common/api_token.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "common/grpc_status.h"

namespace normsweep::worker {

bool IsRetryable(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kInternal:   // e.g. the scheduler lost its database for a moment
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kCancelled:
      return true;
    default:
      return false;
  }
}

namespace {

// gRPC's default reconnect back-off grows to 2 minutes; a worker that lost
// its scheduler for a moment should be back within a couple of seconds.
std::shared_ptr<grpc::Channel> Channel(const std::string& target,
                                       std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  return grpc::CreateCustomChannel(target, credentials != nullptr ? credentials : grpc::InsecureChannelCredentials(),
                                   args);
}

}  // namespace

// One StreamProgress stream on a completion queue of its own, so that every
// operation can wait with a deadline; at most one operation is pending.
class GrpcSchedulerClient::ProgressStream {
 public:
  ProgressStream(v1::WorkerService::Stub& stub, const std::string& api_token) {
    AttachApiToken(&ctx_, api_token);
    stream_ = stub.AsyncStreamProgress(&ctx_, &cq_, this);
  }
  ~ProgressStream() {
    if (!finished_) {
      ctx_.TryCancel();
      grpc::Status ignored;
      stream_->Finish(&ignored, this);
      Wait(absl::InfiniteFuture());
    }
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  // Waits for the stream to start (the first call only).
  bool Started(absl::Time deadline) {
    if (started_) return true;
    started_ = Wait(deadline);
    return started_;
  }
  bool Write(const v1::ReportProgressRequest& request, absl::Time deadline) {
    stream_->Write(request, this);
    return Wait(deadline);
  }
  bool Read(v1::ReportProgressResponse* response, absl::Time deadline) {
    stream_->Read(response, this);
    return Wait(deadline);
  }
  // After a failed operation: why the stream ended.
  absl::Status Finish(absl::Time deadline) {
    if (timed_out_) return absl::DeadlineExceededError("StreamProgress: no answer within the deadline");
    grpc::Status status;
    stream_->Finish(&status, this);
    if (!Wait(deadline)) return absl::DeadlineExceededError("StreamProgress: no status within the deadline");
    finished_ = true;
    if (status.ok()) return absl::UnavailableError("StreamProgress: the scheduler closed the stream");
    return FromGrpcStatus(status);
  }
  bool reused() const { return reused_; }
  void set_reused() { reused_ = true; }

 private:
  // The pending operation's outcome; past the deadline the call is
  // cancelled, which completes the operation (not ok) at once.
  bool Wait(absl::Time deadline) {
    void* tag = nullptr;
    bool ok = false;
    if (cq_.AsyncNext(&tag, &ok, absl::ToChronoTime(deadline)) == grpc::CompletionQueue::GOT_EVENT) return ok;
    timed_out_ = true;
    ctx_.TryCancel();
    cq_.Next(&tag, &ok);
    return false;
  }

  grpc::ClientContext ctx_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<v1::ReportProgressRequest, v1::ReportProgressResponse>> stream_;
  bool started_ = false;
  bool finished_ = false;
  bool timed_out_ = false;
  bool reused_ = false;  // has answered a batch before
};

GrpcSchedulerClient::GrpcSchedulerClient(const std::string& target, absl::Duration deadline, std::string api_token,
                                         std::shared_ptr<grpc::ChannelCredentials> credentials)
    : stub_(v1::WorkerService::NewStub(Channel(target, std::move(credentials)))),
      deadline_(deadline),
      api_token_(std::move(api_token)) {}

GrpcSchedulerClient::~GrpcSchedulerClient() = default;

namespace {

template <typename Response, typename Call>
absl::StatusOr<Response> Invoke(absl::Duration deadline, const std::string& api_token, Call call) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  AttachApiToken(&ctx, api_token);
  Response response;
  grpc::Status status = call(&ctx, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

}  // namespace

absl::StatusOr<v1::RegisterWorkerResponse> GrpcSchedulerClient::RegisterWorker(const v1::RegisterWorkerRequest& r) {
  return Invoke<v1::RegisterWorkerResponse>(
      deadline_, api_token_, [&](grpc::ClientContext* c, v1::RegisterWorkerResponse* out) { return stub_->RegisterWorker(c, r, out); });
}

absl::StatusOr<v1::LeaseTrialResponse> GrpcSchedulerClient::LeaseTrial(const v1::LeaseTrialRequest& r) {
  return Invoke<v1::LeaseTrialResponse>(
      deadline_, api_token_, [&](grpc::ClientContext* c, v1::LeaseTrialResponse* out) { return stub_->LeaseTrial(c, r, out); });
}

absl::StatusOr<v1::HeartbeatResponse> GrpcSchedulerClient::Heartbeat(const v1::HeartbeatRequest& r) {
  return Invoke<v1::HeartbeatResponse>(
      deadline_, api_token_, [&](grpc::ClientContext* c, v1::HeartbeatResponse* out) { return stub_->Heartbeat(c, r, out); });
}

absl::StatusOr<v1::ReportProgressResponse> GrpcSchedulerClient::ReportProgress(const v1::ReportProgressRequest& r) {
  absl::MutexLock lock(&progress_mu_);
  const absl::Time deadline = absl::Now() + deadline_;
  while (true) {
    if (progress_ == nullptr) progress_ = std::make_unique<ProgressStream>(*stub_, api_token_);
    ProgressStream& stream = *progress_;
    v1::ReportProgressResponse response;
    if (stream.Started(deadline) && stream.Write(r, deadline) && stream.Read(&response, deadline)) {
      stream.set_reused();
      return response;
    }
    absl::Status status = stream.Finish(deadline);
    const bool stale = stream.reused() && IsRetryable(status) && status.code() != absl::StatusCode::kDeadlineExceeded;
    progress_.reset();
    // A stream that had answered before and now broke (the scheduler
    // restarted, the connection dropped): the batch goes once more on a new
    // stream. Anything else is this batch's answer.
    if (!stale) return status;
  }
}

absl::StatusOr<v1::FinishTrialResponse> GrpcSchedulerClient::FinishTrial(const v1::FinishTrialRequest& r) {
  return Invoke<v1::FinishTrialResponse>(
      deadline_, api_token_, [&](grpc::ClientContext* c, v1::FinishTrialResponse* out) { return stub_->FinishTrial(c, r, out); });
}

}  // namespace normsweep::worker
