// The worker's view of the scheduler's WorkerService, as an interface so
// that the Worker logic is tested against an in-memory fake
// (tests/worker/fake_scheduler_client.h) and runs against gRPC in production.
//
// Errors: UNAVAILABLE / DEADLINE_EXCEEDED mean "try again later" (the
// scheduler is unreachable, or its database is down: IsDatabaseUnavailable);
// FAILED_PRECONDITION means the lease is no longer held; anything else is a
// permanent refusal.
#ifndef NORMSWEEP_WORKER_SCHEDULER_CLIENT_H_
#define NORMSWEEP_WORKER_SCHEDULER_CLIENT_H_

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "normsweep/v1/worker_service.grpc.pb.h"

namespace normsweep::worker {

class SchedulerClient {
 public:
  virtual ~SchedulerClient() = default;
  virtual absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(const v1::RegisterWorkerRequest& request) = 0;
  virtual absl::StatusOr<v1::LeaseTrialResponse> LeaseTrial(const v1::LeaseTrialRequest& request) = 0;
  virtual absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request) = 0;
  virtual absl::StatusOr<v1::ReportProgressResponse> ReportProgress(const v1::ReportProgressRequest& request) = 0;
  virtual absl::StatusOr<v1::FinishTrialResponse> FinishTrial(const v1::FinishTrialRequest& request) = 0;
};

// True for errors after which the same call may succeed later.
bool IsRetryable(const absl::Status& status);

// UNAVAILABLE from a scheduler that answered but whose database is down (the
// trailing metadata kDatabaseUnavailableKey, common/grpc_status.h), told
// apart from a scheduler that could not be reached: a lease that could not
// be renewed then is "lease_lost", not "scheduler_restart". A payload on the
// status marks it; the message is the scheduler's.
absl::Status DatabaseUnavailableError(absl::string_view message);
bool IsDatabaseUnavailable(const absl::Status& status);

// Over a gRPC channel; every call has a deadline, and waits for most of it
// for the channel to connect before it goes out (fail-fast), so that a call
// made while the scheduler restarts goes as soon as it listens again, and
// one to a scheduler that stays away fails with gRPC's reason. Thread-safe (the stub is;
// progress reports are sent one at a time). ReportProgress goes over one
// StreamProgress stream kept open across calls (cheaper for the scheduler
// than a call per batch), with the same deadline for each batch's answer; a
// stream that broke is reopened on the next call, and a batch whose stream
// turned out stale (e.g. the scheduler restarted) is sent once more on a new
// one (progress is idempotent).
class GrpcSchedulerClient : public SchedulerClient {
 public:
  // target: "host:port". api_token: sent with every call when not empty
  // (common/api_token.h). credentials: the channel's (common/tls.h); null:
  // plaintext.
  explicit GrpcSchedulerClient(const std::string& target, absl::Duration deadline = absl::Seconds(5),
                               std::string api_token = "",
                               std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);
  ~GrpcSchedulerClient() override;

  absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(const v1::RegisterWorkerRequest& request) override;
  absl::StatusOr<v1::LeaseTrialResponse> LeaseTrial(const v1::LeaseTrialRequest& request) override;
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request) override;
  absl::StatusOr<v1::ReportProgressResponse> ReportProgress(const v1::ReportProgressRequest& request) override;
  absl::StatusOr<v1::FinishTrialResponse> FinishTrial(const v1::FinishTrialRequest& request) override;

 private:
  class ProgressStream;

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  const absl::Duration deadline_;
  const std::string api_token_;
  absl::Mutex progress_mu_;
  std::unique_ptr<ProgressStream> progress_ ABSL_GUARDED_BY(progress_mu_);
};

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_SCHEDULER_CLIENT_H_
