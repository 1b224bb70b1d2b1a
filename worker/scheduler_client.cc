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
std::shared_ptr<grpc::Channel> Channel(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

}  // namespace

GrpcSchedulerClient::GrpcSchedulerClient(const std::string& target, absl::Duration deadline, std::string api_token)
    : stub_(v1::WorkerService::NewStub(Channel(target))), deadline_(deadline), api_token_(std::move(api_token)) {}

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
  return Invoke<v1::ReportProgressResponse>(
      deadline_, api_token_, [&](grpc::ClientContext* c, v1::ReportProgressResponse* out) { return stub_->ReportProgress(c, r, out); });
}

absl::StatusOr<v1::FinishTrialResponse> GrpcSchedulerClient::FinishTrial(const v1::FinishTrialRequest& r) {
  return Invoke<v1::FinishTrialResponse>(
      deadline_, api_token_, [&](grpc::ClientContext* c, v1::FinishTrialResponse* out) { return stub_->FinishTrial(c, r, out); });
}

}  // namespace normsweep::worker
