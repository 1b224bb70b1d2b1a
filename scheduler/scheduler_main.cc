// normsweep-scheduler: serves SweepService and WorkerService on PostgreSQL.
//
// The database comes from the environment, never from flags (a password on
// a command line is visible to every user of the machine):
// NORMSWEEP_DATABASE_URL (a libpq URL or key=value string), or else libpq's
// own PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, PGPASSFILE...
// TLS files (common/tls.h) from --tls-cert/--tls-key/--tls-client-ca or
// NORMSWEEP_TLS_CERT/NORMSWEEP_TLS_KEY/NORMSWEEP_TLS_CLIENT_CA. Who may call
// what: the shared API token (NORMSWEEP_API_TOKEN, NORMSWEEP_API_TOKEN_FILE)
// and the token roles file (--token-roles-file or NORMSWEEP_TOKEN_ROLES_FILE,
// common/token_roles.h), read again on SIGHUP. Every line it writes to
// stderr starts with a UTC timestamp (common/log.h).
//
// Flags are spelled with dashes (common/flags.h); the underscore forms of
// earlier releases (--tls_cert) are aliases.
#include <signal.h>

#include <cstdio>  // std::rename
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/api_token.h"
#include "common/clock.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/tls.h"
#include "common/token_roles.h"
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
ABSL_FLAG(std::string, tls_cert, "",
          "TLS: PEM certificate chain of the gRPC port (default $NORMSWEEP_TLS_CERT; unset: plaintext)");
ABSL_FLAG(std::string, tls_key, "", "TLS: the certificate's PEM private key (default $NORMSWEEP_TLS_KEY)");
ABSL_FLAG(std::string, tls_client_ca, "",
          "Mutual TLS: PEM CA whose client certificates are required (default $NORMSWEEP_TLS_CLIENT_CA)");
ABSL_FLAG(std::string, token_roles_file, "",
          "Callers and their roles (read, submit, worker), one 'NAME ROLE SHA256HEX' or 'NAME ROLE cn:COMMON_NAME' a "
          "line; read again on SIGHUP (default $NORMSWEEP_TOKEN_ROLES_FILE)");

namespace {

using normsweep::db::OpenedPostgresStore;
using normsweep::db::PostgresStoreOptions;

struct Options {
  normsweep::scheduler::SchedulerServerOptions server;
  PostgresStoreOptions store;
  normsweep::TlsServerOptions tls;
  std::string port_file;
  std::string token_roles_file;  // "": none
};

normsweep::TlsFile FlagFile(const absl::Flag<std::string>& flag, const char* name) {
  return normsweep::TlsFile{absl::GetFlag(flag), name};
}

void Log(const std::string& message) { normsweep::LogLine("normsweep-scheduler", message); }

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
  o.tls.cert = FlagFile(FLAGS_tls_cert, "--tls-cert");
  o.tls.key = FlagFile(FLAGS_tls_key, "--tls-key");
  o.tls.client_ca = FlagFile(FLAGS_tls_client_ca, "--tls-client-ca");
  o.tls = normsweep::TlsServerOptionsWithEnvironment(o.tls);
  o.token_roles_file = absl::GetFlag(FLAGS_token_roles_file);
  if (const char* file = std::getenv("NORMSWEEP_TOKEN_ROLES_FILE"); o.token_roles_file.empty() && file != nullptr) {
    o.token_roles_file = file;
  }
  return o;
}

std::string DescribeRoles(const normsweep::TokenRoles& roles) {
  return absl::StrCat(roles.tokens(), roles.tokens() == 1 ? " token, " : " tokens, ", roles.common_names(),
                      roles.common_names() == 1 ? " certificate name" : " certificate names");
}

// SIGHUP: the token roles file read again; null (and the table kept as it
// was) when there is none or it does not parse. The caller logs the reload
// once it is in force (tests wait for that line).
std::shared_ptr<const normsweep::TokenRoles> ReadTokenRolesAgain(const Options& options) {
  if (options.token_roles_file.empty()) {
    Log("SIGHUP: no token roles file to read again (--token-roles-file, NORMSWEEP_TOKEN_ROLES_FILE)");
    return nullptr;
  }
  absl::StatusOr<normsweep::TokenRoles> roles = normsweep::TokenRoles::Load(options.token_roles_file);
  if (!roles.ok()) {
    Log(absl::StrCat("SIGHUP: the token roles file was not reloaded, the callers stay as they were: ",
                     roles.status().message()));
    return nullptr;
  }
  return std::make_shared<const normsweep::TokenRoles>(*std::move(roles));
}

void LogReloaded(const Options& options, const normsweep::TokenRoles& roles) {
  Log(absl::StrCat("SIGHUP: token roles file ", options.token_roles_file, " reloaded (", DescribeRoles(roles), ")"));
}

constexpr char kUsage[] =
    "normsweep-scheduler [flags]\n"
    "Database: NORMSWEEP_DATABASE_URL or the PG* environment variables.\n"
    "API token (optional): NORMSWEEP_API_TOKEN or NORMSWEEP_API_TOKEN_FILE; when set, every call must carry it.\n"
    "Token roles (optional): --token-roles-file (or NORMSWEEP_TOKEN_ROLES_FILE), read again on SIGHUP.\n"
    "TLS (optional): --tls-cert and --tls-key (or NORMSWEEP_TLS_CERT, NORMSWEEP_TLS_KEY), PEM files;\n"
    "  --tls-client-ca (or NORMSWEEP_TLS_CLIENT_CA) also requires a client certificate signed by that CA.";

}  // namespace

int main(int argc, char** argv) {
  if (std::optional<int> exit_code = normsweep::ParseFlagsForMain(argc, argv, kUsage)) return *exit_code;
  // Debian's Abseil checks every Mutex for lock-order cycles; measurable on hot paths.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  Options options = OptionsFromFlags();
  absl::StatusOr<std::string> api_token = normsweep::ApiTokenFromEnvironment();
  if (!api_token.ok()) {
    Log(std::string(api_token.status().message()));
    return 2;
  }
  options.server.api_token = *api_token;
  if (!options.token_roles_file.empty()) {
    absl::StatusOr<normsweep::TokenRoles> roles = normsweep::TokenRoles::Load(options.token_roles_file);
    if (!roles.ok()) {
      Log(absl::StrCat("--token-roles-file: ", roles.status().message()));
      return 2;
    }
    if (roles->common_names() > 0 && !options.tls.client_ca.given()) {
      Log("WARNING: the token roles file has cn: lines, but without mutual TLS (--tls-client-ca) no client "
          "certificate is ever presented: they match no call");
    }
    options.server.token_roles = std::make_shared<const normsweep::TokenRoles>(*std::move(roles));
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = normsweep::MakeServerCredentials(options.tls);
  if (!credentials.ok()) {
    Log(std::string(credentials.status().message()));
    return 2;
  }
  options.server.credentials = *credentials;
  if ((!options.server.api_token.empty() || options.server.token_roles != nullptr) && !options.tls.enabled()) {
    Log("WARNING: an API token is set but TLS is off: the token travels in the clear on every call "
        "(set --tls-cert and --tls-key, or NORMSWEEP_TLS_CERT and NORMSWEEP_TLS_KEY)");
  }

  // Signals are taken by sigwait below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);  // the token roles file, read again
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // The database may come up after us: retry with back-off, without a restart.
  OpenedPostgresStore db;
  absl::Duration backoff = absl::Milliseconds(200);
  while (true) {
    absl::StatusOr<OpenedPostgresStore> opened = normsweep::db::OpenPostgresStore(options.store);
    if (opened.ok()) {
      db = *std::move(opened);
      break;
    }
    Log(absl::StrCat("database not ready (retrying in ", absl::FormatDuration(backoff),
                     "): ", opened.status().ToString()));
    timespec ts{0, 0};
    const int sig = sigtimedwait(&signals, nullptr, &(ts = absl::ToTimespec(backoff)));
    if (sig == SIGHUP) {
      if (auto roles = ReadTokenRolesAgain(options)) {
        options.server.token_roles = std::move(roles);
        LogReloaded(options, *options.server.token_roles);
      }
      continue;
    }
    if (sig > 0) return 1;
    backoff = std::min(backoff * 2, absl::Seconds(10));
  }
  Log(absl::StrCat("database ", db.description, ", migrations applied"));

  auto server = normsweep::scheduler::SchedulerServer::Start(*db.store, normsweep::RealClock::Get(), options.server);
  if (!server.ok()) {
    Log(server.status().ToString());
    return 1;
  }
  std::string auth = options.server.api_token.empty() ? "" : "API token required";
  if (options.server.token_roles != nullptr) {
    absl::StrAppend(&auth, auth.empty() ? "" : ", ", "token roles file ", options.token_roles_file, " (",
                    DescribeRoles(*options.server.token_roles), ")");
  }
  Log(absl::StrCat("gRPC on port ", (*server)->grpc_port(), " (", normsweep::DescribeTls(options.tls), ", ",
                   auth.empty() ? "no API token" : auth, "), /metrics on port ", (*server)->metrics_port()));
  if (!options.port_file.empty()) {
    const std::string tmp = options.port_file + ".tmp";
    std::ofstream(tmp) << (*server)->grpc_port() << " " << (*server)->metrics_port() << "\n";
    std::rename(tmp.c_str(), options.port_file.c_str());
  }
  int sig = 0;
  while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) {
    if (auto roles = ReadTokenRolesAgain(options)) {
      (*server)->ReloadTokenRoles(roles);
      LogReloaded(options, *roles);
    }
  }
  const absl::Time signalled = absl::Now();
  Log(absl::StrCat("signal ", sig, ", shutting down"));
  // The stop is bounded: Shutdown cuts the streams at once and gives calls
  // in flight a grace period, but a handler blocked on the database (up to
  // its statement timeout) or a WatchSweep between polls would hold it
  // longer. Past kStopBudget the process exits without them: a write cut so
  // is rolled back by PostgreSQL or, if it committed, answered to no one;
  // either way its client sees UNAVAILABLE and retries, and every write is
  // idempotent.
  constexpr absl::Duration kStopBudget = absl::Milliseconds(800);
  // The server and the store are destroyed on return, once Shutdown has
  // left them idle; never on the way out below, where threads may use them.
  absl::Notification stopped;
  std::thread stopper([&] {
    (*server)->Shutdown();
    stopped.Notify();
  });
  if (!stopped.WaitForNotificationWithTimeout(kStopBudget - (absl::Now() - signalled))) {
    const int calls = (*server)->calls_in_flight();
    Log(absl::StrCat("stopped after ", absl::FormatDuration(absl::Now() - signalled),
                     " without waiting for the rest (", calls, calls == 1 ? " call" : " calls",
                     " in flight; their clients see UNAVAILABLE and retry)"));
    std::fflush(nullptr);
    std::_Exit(0);
  }
  stopper.join();
  Log(absl::StrCat("stopped in ", absl::FormatDuration(absl::Now() - signalled)));
  return 0;
}
