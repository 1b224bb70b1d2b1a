#include "worker/scheduler_client.h"

#include "common/api_token.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/strings/cord.h"
#include "common/grpc_status.h"
#include "common/scheduler_channel.h"

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

// The payload of DatabaseUnavailableError.
constexpr char kDatabaseUnavailableUrl[] = "type.normsweep/worker.DatabaseUnavailable";

// FromGrpcStatus, with UNAVAILABLE marked when the scheduler's trailing
// metadata says its database is down.
absl::Status FromAnswer(const grpc::Status& status, const grpc::ClientContext& ctx) {
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      ctx.GetServerTrailingMetadata().count(kDatabaseUnavailableKey) > 0) {
    return DatabaseUnavailableError(status.error_message());
  }
  return FromGrpcStatus(status);
}

}  // namespace

absl::Status DatabaseUnavailableError(absl::string_view message) {
  absl::Status status = absl::UnavailableError(message);
  status.SetPayload(kDatabaseUnavailableUrl, absl::Cord("1"));
  return status;
}

bool IsDatabaseUnavailable(const absl::Status& status) {
  return absl::IsUnavailable(status) && status.GetPayload(kDatabaseUnavailableUrl).has_value();
}

namespace {

// Waits for the channel to be connected, for most of the time left before
// deadline; the call that follows is fail-fast, so a scheduler still
// unreachable then fails it with gRPC's reason (connection refused, TLS
// handshake failed) rather than a bare DEADLINE_EXCEEDED.
//
// Waiting here is what lets a reconnection finish: a connection attempt
// (TCP connect, TLS and HTTP/2 handshakes) only progresses while a thread
// polls the channel. A fail-fast call made while the channel is in
// TRANSIENT_FAILURE fails at once and polls nothing, so between the
// worker's calls nobody polled but gRPC's backup poller, every 5 s: attempts
// ran into their deadline unfinished, and workers took 2-6 s to come back to
// a scheduler restarted in under a second. A thread in WaitForConnected
// polls the attempt as it runs.
void AwaitConnection(grpc::Channel& channel, absl::Time deadline) {
  if (channel.GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY) return;
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return;
  const absl::Duration for_the_call = std::min(left / 5, absl::Seconds(1));
  channel.WaitForConnected(absl::ToChronoTime(deadline - for_the_call));
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
    return FromAnswer(status, ctx_);
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
    : channel_(SchedulerChannel(target, std::move(credentials))),
      stub_(v1::WorkerService::NewStub(channel_)),
      deadline_(deadline),
      api_token_(std::move(api_token)) {}

GrpcSchedulerClient::~GrpcSchedulerClient() = default;

namespace {

template <typename Response, typename Call>
absl::StatusOr<Response> Invoke(grpc::Channel& channel, absl::Duration timeout, const std::string& api_token,
                                Call call) {
  const absl::Time deadline = absl::Now() + timeout;
  AwaitConnection(channel, deadline);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(deadline));
  AttachApiToken(&ctx, api_token);
  Response response;
  grpc::Status status = call(&ctx, &response);
  if (!status.ok()) return FromAnswer(status, ctx);
  return response;
}

}  // namespace

absl::StatusOr<v1::RegisterWorkerResponse> GrpcSchedulerClient::RegisterWorker(const v1::RegisterWorkerRequest& r) {
  return Invoke<v1::RegisterWorkerResponse>(
      *channel_, deadline_, api_token_, [&](grpc::ClientContext* c, v1::RegisterWorkerResponse* out) { return stub_->RegisterWorker(c, r, out); });
}

absl::StatusOr<v1::LeaseTrialResponse> GrpcSchedulerClient::LeaseTrial(const v1::LeaseTrialRequest& r) {
  return Invoke<v1::LeaseTrialResponse>(
      *channel_, deadline_, api_token_, [&](grpc::ClientContext* c, v1::LeaseTrialResponse* out) { return stub_->LeaseTrial(c, r, out); });
}

absl::StatusOr<v1::HeartbeatResponse> GrpcSchedulerClient::Heartbeat(const v1::HeartbeatRequest& r) {
  return Invoke<v1::HeartbeatResponse>(
      *channel_, deadline_, api_token_, [&](grpc::ClientContext* c, v1::HeartbeatResponse* out) { return stub_->Heartbeat(c, r, out); });
}

absl::StatusOr<v1::ReportProgressResponse> GrpcSchedulerClient::ReportProgress(const v1::ReportProgressRequest& r) {
  absl::MutexLock lock(&progress_mu_);
  const absl::Time deadline = absl::Now() + deadline_;
  while (true) {
    if (progress_ == nullptr) {
      AwaitConnection(*channel_, deadline);
      progress_ = std::make_unique<ProgressStream>(*stub_, api_token_);
    }
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
      *channel_, deadline_, api_token_, [&](grpc::ClientContext* c, v1::FinishTrialResponse* out) { return stub_->FinishTrial(c, r, out); });
}

}  // namespace normsweep::worker
