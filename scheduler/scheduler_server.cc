#include "scheduler/scheduler_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/wake_listener.h"

namespace normsweep::scheduler {
namespace {

std::string Count(int n, const char* one, const char* many) { return absl::StrCat(n, " ", n == 1 ? one : many); }

}  // namespace

absl::StatusOr<std::unique_ptr<SchedulerServer>> SchedulerServer::Start(db::Store& store, Clock& clock,
                                                                        const SchedulerServerOptions& options) {
  std::unique_ptr<SchedulerServer> s(new SchedulerServer());
  s->stop_grace_ = options.stop_grace;
  s->registry_ = std::make_shared<prometheus::Registry>();
  s->metrics_ = std::make_unique<SchedulerMetrics>(*s->registry_);
  s->scheduler_ = std::make_unique<Scheduler>(store, clock, *s->metrics_, options.scheduler);
  s->auth_ = std::make_unique<Authenticator>(options.api_token, options.token_roles);
  s->sweep_service_ = std::make_unique<SweepServiceImpl>(*s->scheduler_, *s->metrics_, *s->auth_);
  s->worker_service_ = std::make_unique<WorkerServiceImpl>(*s->scheduler_, *s->metrics_, *s->auth_);

  s->health_service_ = std::make_unique<HealthServiceImpl>(
      std::vector<std::string>{v1::SweepService::service_full_name(), v1::WorkerService::service_full_name()});

  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.grpc_address,
                           options.credentials != nullptr ? options.credentials : grpc::InsecureServerCredentials(),
                           &s->grpc_port_);
  builder.RegisterService(s->sweep_service_.get());
  builder.RegisterService(s->worker_service_.get());
  builder.RegisterService(s->health_service_.get());
  s->worker_cq_ = builder.AddCompletionQueue();
  builder.SetMaxReceiveMessageSize(16 << 20);
  // Small unary calls: no bandwidth-delay probing (PING frames that adjust
  // flow-control windows for bulk transfers) and no channelz bookkeeping.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.AddChannelArgument(GRPC_ARG_ENABLE_CHANNELZ, 0);
  // Sync-API handler threads block on the database; a burst of sync calls
  // starts more of them, and those beyond max_pollers end when idle. Their
  // queues do not poll (worker_cq_ does: see grpc_services.h).
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, options.min_pollers);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, options.max_pollers);
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->grpc_port_ == 0) {
    s->server_.reset();
    s->worker_cq_->Shutdown();  // never served: nothing pending on it
    void* tag;
    bool ok;
    while (s->worker_cq_->Next(&tag, &ok)) {
    }
    s->worker_cq_.reset();
    return absl::UnavailableError(absl::StrCat("cannot listen for gRPC on ", options.grpc_address));
  }
  s->worker_service_->UseQueue(s->worker_cq_.get());
  s->worker_thread_ = std::thread([service = s->worker_service_.get()] { service->Serve(); });
  if (!options.metrics_address.empty()) {
    try {
      s->exposer_ = std::make_unique<prometheus::Exposer>(options.metrics_address);
    } catch (const std::exception& e) {  // civetweb reports bind errors by throwing
      s->Shutdown();
      return absl::UnavailableError(absl::StrCat("cannot serve /metrics on ", options.metrics_address, ": ", e.what()));
    }
    s->exposer_->RegisterCollectable(s->registry_);
    std::vector<int> ports = s->exposer_->GetListeningPorts();
    s->metrics_port_ = ports.empty() ? 0 : ports[0];
  }
  // One pass before serving traffic so the gauges start filled in.
  (void)s->scheduler_->RunMaintenance();
  s->maintenance_ = std::thread([server = s.get(), interval = options.maintenance_interval] {
    server->MaintenanceLoop(interval);
  });
  return s;
}

void SchedulerServer::MaintenanceLoop(absl::Duration interval) {
  bool failing = false;
  while (!stop_.WaitForNotificationWithTimeout(interval)) {
    absl::Status status = scheduler_->RunMaintenance();
    if (!status.ok() && !failing) {
      LogLine("normsweep-scheduler", absl::StrCat("maintenance failed (will retry): ", status.ToString()));
    } else if (status.ok() && failing) {
      LogLine("normsweep-scheduler", "maintenance recovered");
    }
    failing = !status.ok();
  }
}

void SchedulerServer::Shutdown() {
  absl::MutexLock lock(&shutdown_mu_);  // a second caller waits for the first
  if (shut_down_) return;
  shut_down_ = true;
  stop_.Notify();
  if (server_ != nullptr) {  // null when Start failed to listen
    // Streams stay open until their client or the sweep ends: cut them now
    // rather than at the shutdown deadline. Each client sees its stream end
    // and opens it again on a scheduler that answers.
    const int watches = sweep_service_->CloseWatches();
    const int progress = worker_service_->CloseProgressStreams();
    const int health = health_service_->Shutdown();
    LogLine("normsweep-scheduler",
            absl::StrCat("stopping: cut ", Count(watches, "WatchSweep stream", "WatchSweep streams"), ", ",
                         Count(progress, "progress stream", "progress streams"), ", ",
                         Count(health, "health watch", "health watches"), "; ",
                         Count(calls_in_flight(), "call", "calls"), " in flight"));
    // New calls are refused now. Those in flight finish within the grace
    // (health watches at once, on NOT_SERVING).
    const absl::Time grace_end = absl::Now() + stop_grace_;
    while ((calls_in_flight() > 0 || health_service_->watchers() > 0) && absl::Now() < grace_end) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    // Then every connection is closed after a moment for the last answers
    // to reach the wire. A graceful shutdown would wait for each client to
    // acknowledge the server's GOAWAY ping; an idle client channel does so
    // only at its backup poll (every 5 s), which held the stop for 2-5 s.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
    worker_service_->Drain();
    worker_thread_.join();
  }
  if (maintenance_.joinable()) maintenance_.join();
  StopListener(metrics_port_, [this] { exposer_.reset(); });
}

int SchedulerServer::calls_in_flight() {
  if (server_ == nullptr) return 0;
  return sweep_service_->calls_in_flight() + worker_service_->calls_in_flight();
}

SchedulerServer::~SchedulerServer() { Shutdown(); }

}  // namespace normsweep::scheduler
