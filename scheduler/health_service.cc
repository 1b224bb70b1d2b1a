#include "scheduler/health_service.h"

#include "common/quote.h"

#include <algorithm>
#include <string>

#include "absl/cleanup/cleanup.h"

namespace normsweep::scheduler {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

HealthCheckResponse::ServingStatus HealthServiceImpl::StatusOf(const std::string& service) {
  if (!service.empty() && std::find(services_.begin(), services_.end(), service) == services_.end()) {
    return HealthCheckResponse::SERVICE_UNKNOWN;
  }
  return shut_down_ ? HealthCheckResponse::NOT_SERVING : HealthCheckResponse::SERVING;
}

grpc::Status HealthServiceImpl::Check(grpc::ServerContext*, const HealthCheckRequest* request,
                                      HealthCheckResponse* response) {
  absl::MutexLock lock(&mu_);
  HealthCheckResponse::ServingStatus status = StatusOf(request->service());
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service: " + QuoteForError(request->service()));
  }
  response->set_status(status);
  return grpc::Status::OK;
}

grpc::Status HealthServiceImpl::Watch(grpc::ServerContext* context, const HealthCheckRequest* request,
                                      grpc::ServerWriter<HealthCheckResponse>* writer) {
  {
    absl::MutexLock lock(&mu_);
    if (watchers_ >= max_watchers_) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "too many open health watches (at most " + std::to_string(max_watchers_) +
                              "); use Check, or close one");
    }
    ++watchers_;
  }
  absl::Cleanup done = [this] {
    absl::MutexLock lock(&mu_);
    --watchers_;
  };
  HealthCheckResponse::ServingStatus sent = HealthCheckResponse::UNKNOWN;  // nothing sent yet
  for (;;) {
    HealthCheckResponse::ServingStatus now;
    bool shut_down;
    {
      absl::MutexLock lock(&mu_);
      auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return shut_down_ || StatusOf(request->service()) != sent;
      };
      mu_.AwaitWithTimeout(absl::Condition(&changed), watch_poll_);
      now = StatusOf(request->service());
      shut_down = shut_down_;
    }
    if (context->IsCancelled()) return grpc::Status::CANCELLED;
    if (now != sent) {
      HealthCheckResponse response;
      response.set_status(now);
      if (!writer->Write(response)) return grpc::Status::CANCELLED;
      sent = now;
    }
    // Nothing changes after Shutdown: end the call rather than hold the
    // server's shutdown until its deadline.
    if (shut_down) return grpc::Status::OK;
  }
}

int HealthServiceImpl::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  return watchers_;
}

int HealthServiceImpl::watchers() {
  absl::MutexLock lock(&mu_);
  return watchers_;
}

}  // namespace normsweep::scheduler
