// Scheduler load generator (a benchmark program, not a test).
//
// N simulated workers (default 64), each on its own gRPC channel, run trial
// lifecycles against normsweep-scheduler: LeaseTrial, 10 ReportProgress
// batches of 10 steps (lr, train_loss, grad_norm, tokens_per_s; val_loss
// every --val-every steps), FinishTrial. By default it starts a throwaway
// PostgreSQL and the normsweep-scheduler built beside it, as its own process
// on a loopback port (--in-process: a scheduler in this process instead);
// --scheduler points it at a running one (whose database must be reachable
// for the final row count only when started here).
//
// Prints trial lifecycles/s, metric points stored/s and the lease latency
// (client-observed round trip) p50/p99/max. The simulated workers are in
// sim_worker.h, the report in load_report.h.
//
// --tls runs the same load over TLS: throwaway certificates (openssl, as the
// tests make them) for the scheduler started here, its CA for the simulated
// workers; with --scheduler, --tls-ca names the CA of that scheduler's
// certificate instead.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/create_channel.h>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/tls.h"
#include "db/memory_store.h"
#include "db/postgres_store.h"
#include "normsweep/v1/sweep_service.grpc.pb.h"
#include "scheduler/scheduler_server.h"
#include "tests/bench/bench_setup.h"
#include "tests/bench/load_report.h"
#include "tests/bench/sim_worker.h"
#include "tests/common/subprocess.h"
#include "tests/common/test_certificates.h"

ABSL_FLAG(int, workers, 64, "Simulated workers (one gRPC channel each)");
ABSL_FLAG(bool, lean_client, true,
          "Client channels without BDP probing, channelz, retries and the full filter stack");
ABSL_FLAG(int, client_threads, 1, "Threads driving the simulated workers' asynchronous calls");
ABSL_FLAG(int, trials, 10000, "Trials to run (one sweep per 10,000)");
ABSL_FLAG(int, batches, 10, "ReportProgress batches per trial");
ABSL_FLAG(int, steps_per_batch, 10, "Metric points per batch");
ABSL_FLAG(int, val_every, 0,
          "Also set val_loss on every step divisible by this, as an evaluation would (0: never; "
          "tests/bench/export_bench.py uses 10)");
ABSL_FLAG(std::string, scheduler, "", "host:port of a running scheduler (default: start one here)");
ABSL_FLAG(bool, durable, false, "Throwaway PostgreSQL with fsync and synchronous_commit on");
ABSL_FLAG(bool, pg_stats, false, "Print the costliest statements (pg_stat_statements) at the end");
ABSL_FLAG(std::string, scheduler_binary, NORMSWEEP_SCHEDULER_BINARY,
          "The normsweep-scheduler to start as a separate process (default: the one built with this program)");
ABSL_FLAG(bool, in_process, false,
          "Run the scheduler in this process instead (gRPC's client and server then share one poller pool, "
          "whose threads hand every network event to each other: slower than two processes)");
ABSL_FLAG(double, rate, 0,
          "Start at most this many lifecycles per second in total (0: as fast as the workers go); "
          "below saturation, lease latency is service time rather than queueing");
ABSL_FLAG(std::vector<std::string>, pg_settings, {},
          "Extra settings for the throwaway PostgreSQL, e.g. autovacuum=off,wal_level=minimal");
ABSL_FLAG(bool, memory_store, false,
          "Use the in-memory store (measures gRPC and scheduler overhead only; implies --in-process)");
ABSL_FLAG(int, db_pool_size, 16, "Database connections of the in-process scheduler");
ABSL_FLAG(double, timeline, 0,
          "Also print how many lifecycles ended in each interval of this many seconds (0: no timeline)");
ABSL_FLAG(bool, tls, false, "TLS between the simulated workers and the scheduler (throwaway certificates)");
ABSL_FLAG(std::string, tls_ca, "", "With --scheduler: the CA of its TLS certificate (implies --tls)");
ABSL_FLAG(bool, progress_stream, true,
          "Report progress over one StreamProgress stream per worker, as normsweep-worker does "
          "(false: a ReportProgress call per batch)");

namespace normsweep::bench {
namespace {

// The scheduler the simulated workers call, and what it stands on.
struct Target {
  std::optional<BenchDatabase> db;                     // a throwaway PostgreSQL started here
  std::unique_ptr<db::Store> store;                    // the in-process scheduler's
  std::unique_ptr<scheduler::SchedulerServer> server;  // a scheduler in this process
  std::optional<testing::Subprocess> child;            // a scheduler process started here
  std::string address;                                 // host:port
};

// The throwaway PostgreSQL (none with --memory-store) and, for a scheduler
// in this process, its store. False when either fails.
bool StartStore(Target* t) {
  if (absl::GetFlag(FLAGS_memory_store)) {
    t->store = std::make_unique<db::MemoryStore>();
    return true;
  }
  testing::PostgresInstanceOptions pg_options;
  pg_options.fast_unsafe = !absl::GetFlag(FLAGS_durable);
  pg_options.extra_settings = {"max_connections=200", "shared_buffers=256MB"};
  for (const std::string& setting : absl::GetFlag(FLAGS_pg_settings)) pg_options.extra_settings.push_back(setting);
  if (absl::GetFlag(FLAGS_pg_stats)) {
    pg_options.extra_settings.push_back("shared_preload_libraries=pg_stat_statements");
    pg_options.extra_settings.push_back("pg_stat_statements.track_planning=on");
  }
  t->db = StartDatabase("load", pg_options);
  if (!t->db.has_value()) return false;
  if (!absl::GetFlag(FLAGS_in_process)) return true;  // a scheduler process opens its own
  db::PostgresStoreOptions options;
  options.connect.conninfo = t->db->conninfo;
  options.pool_size = absl::GetFlag(FLAGS_db_pool_size);
  auto opened = db::OpenPostgresStore(options);
  if (!opened.ok()) {
    std::fprintf(stderr, "store: %s\n", opened.status().ToString().c_str());
    return false;
  }
  t->store = std::move(opened->store);
  return true;
}

// Throwaway certificates for a scheduler started here: the server's files,
// and the CA in client. False when they cannot be made.
bool MakeCertificates(const Target& t, TlsServerOptions* server, TlsClientOptions* client) {
  std::string certs_dir = t.db ? t.db->server->dir() + "/certs" : "";
  if (certs_dir.empty()) {
    char dir[] = "/tmp/normsweep-load-certs-XXXXXX";
    if (mkdtemp(dir) == nullptr) return false;
    certs_dir = dir;
  }
  std::filesystem::create_directories(certs_dir);
  auto certs = testing::MakeTestCertificates(certs_dir);
  if (!certs.ok()) {
    std::fprintf(stderr, "certificates: %s\n", certs.status().ToString().c_str());
    return false;
  }
  server->cert = {certs->server_cert, "--tls"};
  server->key = {certs->server_key, "--tls"};
  client->ca = {certs->ca, "--tls"};
  return true;
}

// The scheduler binary as a process of its own on a free port. Its flags
// keep the underscore spellings: tests/bench/scheduler_ab.sh points
// --scheduler-binary at older builds, which know no other.
bool StartSchedulerProcess(Target* t, const TlsServerOptions& tls) {
  const std::string dir = t->db->server->dir();
  const std::string port_file = dir + "/scheduler.ports";
  std::vector<std::string> argv = {absl::GetFlag(FLAGS_scheduler_binary), "--host=127.0.0.1", "--port=0",
                                   "--metrics_port=-1", "--port_file=" + port_file,
                                   absl::StrCat("--db_pool_size=", absl::GetFlag(FLAGS_db_pool_size))};
  if (tls.enabled()) {
    argv.push_back("--tls_cert=" + tls.cert.path);
    argv.push_back("--tls_key=" + tls.key.path);
  }
  auto started = testing::Subprocess::Start(argv, {{"NORMSWEEP_DATABASE_URL", t->db->conninfo}}, dir + "/scheduler.log");
  if (!started.ok()) return false;
  t->child.emplace(*std::move(started));
  auto ports = testing::WaitForFile(port_file, 30);
  if (!ports.ok()) {
    std::fprintf(stderr, "scheduler did not start: %s\n", ports.status().ToString().c_str());
    return false;
  }
  t->address = absl::StrCat("127.0.0.1:", std::atoi(ports->c_str()));
  return true;
}

bool StartSchedulerInProcess(Target* t, const TlsServerOptions& tls) {
  scheduler::SchedulerServerOptions server_options;
  server_options.grpc_address = "127.0.0.1:0";
  server_options.metrics_address = "";
  auto credentials = MakeServerCredentials(tls);
  if (!credentials.ok()) {
    std::fprintf(stderr, "%s\n", credentials.status().ToString().c_str());
    return false;
  }
  server_options.credentials = *credentials;
  auto s = scheduler::SchedulerServer::Start(*t->store, RealClock::Get(), server_options);
  if (!s.ok()) {
    std::fprintf(stderr, "scheduler: %s\n", s.status().ToString().c_str());
    return false;
  }
  t->server = *std::move(s);
  t->address = absl::StrCat("127.0.0.1:", t->server->grpc_port());
  return true;
}

// Sweeps of up to 10,000 trials: 2 placements x 5 warm-ups x seeds.
bool SubmitSweeps(const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                  int trials) {
  auto sweeps = v1::SweepService::NewStub(grpc::CreateChannel(address, credentials));
  for (int done = 0, n = 0; done < trials; ++n) {
    const int size = std::min(10000, trials - done) / 10 * 10;
    if (size == 0) break;
    v1::SubmitSweepRequest req;
    // Over 1,000 trials, warm-ups past the default 1,000 steps: the
    // scheduler warns, and a load test means it.
    req.set_allow_warnings(true);
    v1::SweepSpec* spec = req.mutable_spec();
    spec->set_name(absl::StrCat("load-", n));
    spec->add_placements("post");
    spec->add_placements("pre");
    for (int w : {0, 1000, 2000, 4000, 8000}) spec->add_warmup_steps(w);
    spec->add_peak_lrs(5e-4);
    for (int s = 0; s < size / 10; ++s) spec->add_seeds(s);
    v1::SubmitSweepResponse resp;
    grpc::ClientContext ctx;
    grpc::Status st = sweeps->SubmitSweep(&ctx, req, &resp);
    if (!st.ok()) {
      std::fprintf(stderr, "SubmitSweep: %s\n", st.error_message().c_str());
      return false;
    }
    done += size;
  }
  return true;
}

SimWorkerOptions SimWorkerOptionsFromFlags() {
  SimWorkerOptions o;
  o.workers = absl::GetFlag(FLAGS_workers);
  o.client_threads = absl::GetFlag(FLAGS_client_threads);
  o.batches = absl::GetFlag(FLAGS_batches);
  o.steps_per_batch = absl::GetFlag(FLAGS_steps_per_batch);
  o.val_every = absl::GetFlag(FLAGS_val_every);
  o.lean_client = absl::GetFlag(FLAGS_lean_client);
  o.progress_stream = absl::GetFlag(FLAGS_progress_stream);
  return o;
}

// Runs the simulated workers against t, measuring the processes' CPU.
LoadRun RunWorkers(const Target& t, const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  const SimWorkerOptions options = SimWorkerOptionsFromFlags();
  LoadRun run;
  run.workers = options.workers;
  run.batches = options.batches;
  run.steps_per_batch = options.steps_per_batch;
  run.durable = absl::GetFlag(FLAGS_durable);
  run.rate = absl::GetFlag(FLAGS_rate);
  run.timeline = absl::GetFlag(FLAGS_timeline);
  run.pg_stats = absl::GetFlag(FLAGS_pg_stats);
  run.conninfo = t.db ? t.db->conninfo : "";
  run.child = t.child.has_value();
  const std::string pg_data = t.db ? t.db->server->dir() + "/data" : "";
  const double pg_cpu0 = t.db ? PostgresCpuSeconds(pg_data, &run.pg_processes_before) : 0;
  const double self_cpu0 = ProcessCpuSeconds(getpid());
  const double child_cpu0 = t.child ? ProcessCpuSeconds(t.child->pid()) : 0;
  run.start = absl::Now();
  Pacer pacer(run.rate, run.start);
  SimWorkers workers(t.address, credentials, options, &pacer);
  run.results = workers.Run();
  run.seconds = absl::ToDoubleSeconds(absl::Now() - run.start);
  run.pg_cpu = t.db ? PostgresCpuSeconds(pg_data, &run.pg_processes_after) - pg_cpu0 : 0;
  run.self_cpu = ProcessCpuSeconds(getpid()) - self_cpu0;
  run.scheduler_cpu = t.child ? ProcessCpuSeconds(t.child->pid()) - child_cpu0 : 0;
  double load[1] = {0};
  getloadavg(load, 1);
  run.load_average = load[0];
  return run;
}

int Run() {
  Target t;
  t.address = absl::GetFlag(FLAGS_scheduler);
  const bool here = t.address.empty();  // the scheduler is started here
  const bool tls = absl::GetFlag(FLAGS_tls) || !absl::GetFlag(FLAGS_tls_ca).empty();
  if (tls && !here && absl::GetFlag(FLAGS_tls_ca).empty()) {
    std::fprintf(stderr, "--tls with --scheduler needs --tls-ca (the CA of that scheduler's certificate)\n");
    return 2;
  }
  if (here && !StartStore(&t)) return 1;
  // TLS: the scheduler's credentials (as flags for a child process) and the workers'.
  TlsServerOptions server_tls;
  TlsClientOptions client_tls;
  if (tls && here) {
    if (!MakeCertificates(t, &server_tls, &client_tls)) return 1;
  } else if (tls) {
    client_tls.ca = {absl::GetFlag(FLAGS_tls_ca), "--tls-ca"};
  }
  auto client_credentials = MakeChannelCredentials(client_tls);
  if (!client_credentials.ok()) {
    std::fprintf(stderr, "%s\n", client_credentials.status().ToString().c_str());
    return 2;
  }
  if (here && !absl::GetFlag(FLAGS_in_process) && t.db && !StartSchedulerProcess(&t, server_tls)) return 1;
  if (t.address.empty() && !StartSchedulerInProcess(&t, server_tls)) return 1;
  if (!SubmitSweeps(t.address, *client_credentials, absl::GetFlag(FLAGS_trials))) return 1;

  LoadRun run = RunWorkers(t, *client_credentials);
  run.tls = tls;
  const int lifecycles = PrintLoadReport(run);
  if (t.server) t.server->Shutdown();
  if (t.child) t.child->Stop(SIGTERM);
  return lifecycles > 0 ? 0 : 1;
}

int RunWithoutDeadlockDetection() {
  // Debian's Abseil checks every Mutex for lock-order cycles; measurable on hot paths.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return Run();
}

constexpr char kUsage[] =
    "normsweep-scheduler-load [flags]: simulated workers against normsweep-scheduler; lifecycles/s, points/s "
    "and lease latency (tests/bench/scheduler_load.cc)";

}  // namespace
}  // namespace normsweep::bench

int main(int argc, char** argv) {
  return normsweep::bench::Main(argc, argv, normsweep::bench::kUsage, normsweep::bench::RunWithoutDeadlockDetection);
}
