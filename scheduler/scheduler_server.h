// normsweep-scheduler as a library: the gRPC server (SweepService,
// WorkerService, health checking, reflection), the Prometheus exposer and
// the maintenance thread (lease expiry, gauges). Tests and the load
// generator start it in-process on ephemeral ports.
//
// Thread-safe; the maintenance thread is owned and joined by Shutdown().
#ifndef NORMSWEEP_SCHEDULER_SCHEDULER_SERVER_H_
#define NORMSWEEP_SCHEDULER_SCHEDULER_SERVER_H_

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/authenticator.h"
#include "common/clock.h"
#include "common/token_roles.h"
#include "db/store.h"
#include "scheduler/grpc_services.h"
#include "scheduler/health_service.h"
#include "scheduler/scheduler.h"
#include "scheduler/scheduler_metrics.h"

namespace normsweep::scheduler {

struct SchedulerServerOptions {
  std::string grpc_address = "0.0.0.0:50051";    // port 0: pick a free one
  std::string metrics_address = "0.0.0.0:9464";  // empty: no /metrics
  absl::Duration maintenance_interval = absl::Seconds(5);
  // gRPC sync server threads waiting for calls. The worker's hot calls have
  // their own thread (grpc_services.h); the sync ones are rare.
  int min_pollers = 1;
  int max_pollers = 2;
  // How long Shutdown lets calls in flight finish before gRPC cancels them
  // (their clients see CANCELLED and retry; every write is idempotent).
  // Open streams are cut at once whatever this is.
  absl::Duration stop_grace = absl::Milliseconds(500);
  // When not empty, the single shared token that opens every SweepService
  // and WorkerService call (common/api_token.h); health checking and
  // reflection stay open.
  std::string api_token;
  // When not null, the token roles file's callers (common/token_roles.h):
  // every call then needs one of them or api_token. ReloadTokenRoles
  // replaces it.
  std::shared_ptr<const TokenRoles> token_roles;
  // The gRPC port's credentials (common/tls.h); null: plaintext.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  SchedulerOptions scheduler;
};

class SchedulerServer {
 public:
  // store and clock must outlive the server.
  static absl::StatusOr<std::unique_ptr<SchedulerServer>> Start(db::Store& store, Clock& clock,
                                                                const SchedulerServerOptions& options);
  ~SchedulerServer();

  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }  // 0 without /metrics
  Scheduler& scheduler() { return *scheduler_; }
  prometheus::Registry& registry() { return *registry_; }

  // Stops accepting calls; cuts every open stream at once (WatchSweep and
  // StreamProgress cancelled, health watches sent NOT_SERVING) and logs one
  // line saying what it cut and how many calls were in flight; lets those
  // calls finish for stop_grace, then gRPC cancels them; waits for the
  // handlers to return (a WatchSweep's at its next poll, a call on the
  // database at its statement) and stops the maintenance thread and
  // /metrics. Idempotent. normsweep-scheduler's main bounds the whole stop
  // (scheduler_main.cc).
  void Shutdown();
  // Calls running now (open streams not counted): the unfinished work when
  // a stop runs out of time.
  int calls_in_flight();
  void Wait() { server_->Wait(); }
  // The calls that start from now on are checked against roles (the token
  // roles file read again: SIGHUP). Calls already past their check are not.
  void ReloadTokenRoles(std::shared_ptr<const TokenRoles> roles) { auth_->Reload(std::move(roles)); }

 private:
  SchedulerServer() = default;
  void MaintenanceLoop(absl::Duration interval);

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<SchedulerMetrics> metrics_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<SweepServiceImpl> sweep_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<HealthServiceImpl> health_service_;
  std::unique_ptr<grpc::ServerCompletionQueue> worker_cq_;  // the hot calls' (grpc_services.h)
  std::unique_ptr<grpc::Server> server_;
  std::thread worker_thread_;  // serves worker_cq_
  std::unique_ptr<prometheus::Exposer> exposer_;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  absl::Duration stop_grace_;
  absl::Notification stop_;
  std::thread maintenance_;
  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace normsweep::scheduler

#endif  // NORMSWEEP_SCHEDULER_SCHEDULER_SERVER_H_
