// normsweep-scheduler: serves SweepService and WorkerService on PostgreSQL.
//
// The database comes from the environment, never from flags (a password on
// a command line is visible to every user of the machine):
// NORMSWEEP_DATABASE_URL (a libpq URL or key=value string), or else libpq's
// own PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, PGPASSFILE...
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/api_token.h"
#include "common/clock.h"
#include "db/postgres_store.h"
#include "scheduler/scheduler_server.h"

ABSL_FLAG(std::string, host, "0.0.0.0", "Address to listen on (gRPC and /metrics)");
ABSL_FLAG(int, port, 50051, "gRPC port (0: pick a free one)");
ABSL_FLAG(int, metrics_port, 9464, "Prometheus /metrics port (0: pick a free one, -1: off)");
ABSL_FLAG(std::string, port_file, "", "Write \"<grpc port> <metrics port>\" here once serving");
ABSL_FLAG(int, lease_seconds, 60, "A lease lasts this long without a heartbeat");
ABSL_FLAG(int, heartbeat_interval_ms, 15000, "Heartbeat interval told to workers");
ABSL_FLAG(int, maintenance_interval_ms, 5000, "How often leases are expired and gauges refreshed");
ABSL_FLAG(int, db_pool_size, 8, "Database connections");
ABSL_FLAG(int, statement_timeout_ms, 10000, "Database statement timeout");

namespace {

using normsweep::db::PostgresStore;
using normsweep::db::PostgresStoreOptions;

struct Options {
  normsweep::scheduler::SchedulerServerOptions server;
  PostgresStoreOptions store;
  std::string port_file;
};

Options OptionsFromFlags() {
  Options o;
  const std::string host = absl::GetFlag(FLAGS_host);
  o.server.grpc_address = absl::StrCat(host, ":", absl::GetFlag(FLAGS_port));
  const int metrics_port = absl::GetFlag(FLAGS_metrics_port);
  o.server.metrics_address = metrics_port < 0 ? "" : absl::StrCat(host, ":", metrics_port);
  o.server.maintenance_interval = absl::Milliseconds(absl::GetFlag(FLAGS_maintenance_interval_ms));
  o.server.scheduler.lease_duration = absl::Seconds(absl::GetFlag(FLAGS_lease_seconds));
  o.server.scheduler.heartbeat_interval = absl::Milliseconds(absl::GetFlag(FLAGS_heartbeat_interval_ms));
  o.server.scheduler.worker_timeout = 3 * o.server.scheduler.heartbeat_interval;
  const char* url = std::getenv("NORMSWEEP_DATABASE_URL");
  o.store.connect.conninfo = url != nullptr ? url : "";
  o.store.connect.application_name = "normsweep-scheduler";
  o.store.connect.statement_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_statement_timeout_ms));
  o.store.pool_size = absl::GetFlag(FLAGS_db_pool_size);
  o.port_file = absl::GetFlag(FLAGS_port_file);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "normsweep-scheduler [flags]\n"
      "Database: NORMSWEEP_DATABASE_URL or the PG* environment variables.\n"
      "API token (optional): NORMSWEEP_API_TOKEN or NORMSWEEP_API_TOKEN_FILE; when set, every call must carry it.");
  absl::ParseCommandLine(argc, argv);
  // Debian's Abseil checks every Mutex for lock-order cycles; measurable on hot paths.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  Options options = OptionsFromFlags();
  absl::StatusOr<std::string> api_token = normsweep::ApiTokenFromEnvironment();
  if (!api_token.ok()) {
    std::fprintf(stderr, "normsweep-scheduler: %s\n", std::string(api_token.status().message()).c_str());
    return 2;
  }
  options.server.api_token = *api_token;

  // Signals are taken by sigwait below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // The database may come up after us: retry with back-off, without a restart.
  std::unique_ptr<PostgresStore> store;
  absl::Duration backoff = absl::Milliseconds(200);
  while (true) {
    absl::StatusOr<std::unique_ptr<PostgresStore>> opened = PostgresStore::Open(options.store);
    if (opened.ok()) {
      store = *std::move(opened);
      break;
    }
    std::fprintf(stderr, "normsweep-scheduler: database not ready (retrying in %s): %s\n",
                 absl::FormatDuration(backoff).c_str(), opened.status().ToString().c_str());
    timespec ts{0, 0};
    if (sigtimedwait(&signals, nullptr, &(ts = absl::ToTimespec(backoff))) > 0) return 1;
    backoff = std::min(backoff * 2, absl::Seconds(10));
  }
  std::fprintf(stderr, "normsweep-scheduler: database %s, migrations applied\n", store->description().c_str());

  auto server = normsweep::scheduler::SchedulerServer::Start(*store, normsweep::RealClock::Get(), options.server);
  if (!server.ok()) {
    std::fprintf(stderr, "normsweep-scheduler: %s\n", server.status().ToString().c_str());
    return 1;
  }
  std::fprintf(stderr, "normsweep-scheduler: gRPC on port %d (%s), /metrics on port %d\n", (*server)->grpc_port(),
               options.server.api_token.empty() ? "no API token" : "API token required",
               (*server)->metrics_port());
  if (!options.port_file.empty()) {
    const std::string tmp = options.port_file + ".tmp";
    std::ofstream(tmp) << (*server)->grpc_port() << " " << (*server)->metrics_port() << "\n";
    std::rename(tmp.c_str(), options.port_file.c_str());
  }
  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "normsweep-scheduler: signal %d, shutting down\n", sig);
  (*server)->Shutdown();
  return 0;
}
