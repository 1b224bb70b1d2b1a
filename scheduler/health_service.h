// grpc.health.v1.Health for normsweep-scheduler: SERVING for the whole
// server ("") and for normsweep.v1.SweepService and normsweep.v1.WorkerService
// until Shutdown, NOT_SERVING after it. On the sync API (gRPC's own
// implementation runs on the callback API; see proto/grpc/health/v1/health.proto).
// Health calls need no API token. Thread-safe.
#ifndef NORMSWEEP_SCHEDULER_HEALTH_SERVICE_H_
#define NORMSWEEP_SCHEDULER_HEALTH_SERVICE_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace normsweep::scheduler {

class HealthServiceImpl final : public grpc::health::v1::Health::Service {
 public:
  // services: the names answered besides "" (the whole server).
  // max_watchers: open Watch calls at most (each holds a thread; health
  // calls need no token, so anyone could open them).
  explicit HealthServiceImpl(std::vector<std::string> services, int max_watchers = 64,
                             absl::Duration watch_poll = absl::Seconds(1))
      : services_(std::move(services)), max_watchers_(max_watchers), watch_poll_(watch_poll) {}

  grpc::Status Check(grpc::ServerContext*, const grpc::health::v1::HealthCheckRequest*,
                     grpc::health::v1::HealthCheckResponse*) override;
  // Writes the status now and at every change; ends (OK) once NOT_SERVING
  // has been sent after Shutdown, or when the client goes away (noticed
  // within watch_poll). Each open Watch holds one of gRPC's sync threads
  // (probes use Check; a watcher or two is what this is for): beyond
  // max_watchers at once, RESOURCE_EXHAUSTED.
  grpc::Status Watch(grpc::ServerContext*, const grpc::health::v1::HealthCheckRequest*,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>*) override;

  // Everything NOT_SERVING from now on; open Watch calls send it and end
  // (at once, not at their poll). Returns how many were open.
  int Shutdown();
  // Watch calls whose handler is still running.
  int watchers();

 private:
  // SERVICE_UNKNOWN for a name not served.
  grpc::health::v1::HealthCheckResponse::ServingStatus StatusOf(const std::string& service)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::vector<std::string> services_;
  const int max_watchers_;
  const absl::Duration watch_poll_;
  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  int watchers_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace normsweep::scheduler

#endif  // NORMSWEEP_SCHEDULER_HEALTH_SERVICE_H_
