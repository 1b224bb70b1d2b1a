// Worker reconnect time (a benchmark program, not a test).
//
// A real normsweep-worker trains one long CPU trial against a real
// normsweep-scheduler on a fixed port, with a throwaway PostgreSQL. The
// scheduler is stopped (SIGTERM) and started again on the same port
// --restarts times. For each restart it prints the time from the new
// scheduler's port file (written once it listens) to the worker's first
// call that the new scheduler handled: its progress or lease counter on
// /metrics leaving zero, scraped every --scrape-ms. Then min/median/max.
// The worker reports progress continuously, so the figure is how long its
// channel takes to reconnect, not how long it waits between calls.
//
//   build/tests/normsweep-worker-reconnect [--restarts=10] [--tls]
#include <grpcpp/create_channel.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/tls.h"
#include "normsweep/v1/sweep_service.grpc.pb.h"
#include "tests/bench/bench_setup.h"
#include "tests/common/http_get.h"
#include "tests/common/read_file.h"
#include "tests/common/scheduler_process.h"
#include "tests/common/subprocess.h"
#include "tests/common/test_certificates.h"

ABSL_FLAG(int, restarts, 10, "Scheduler restarts to measure");
ABSL_FLAG(double, settle_s, 1.5, "Seconds between the worker's first call and the next restart");
ABSL_FLAG(int, scrape_ms, 5, "How often the new scheduler's /metrics is read");
ABSL_FLAG(bool, tls, false, "Run the scheduler and the worker with TLS (throwaway certificates)");
ABSL_FLAG(std::string, bin_dir, NORMSWEEP_BINARY_DIR_DEFAULT, "The build directory holding the binaries");
ABSL_FLAG(std::vector<std::string>, worker_env, {},
          "NAME=VALUE pairs for the worker's environment, e.g. GRPC_TRACE=subchannel");

constexpr char kUsage[] =
    "normsweep-worker-reconnect [flags]: how long a worker takes to reach a restarted scheduler "
    "(tests/bench/worker_reconnect.cc)";

namespace normsweep {
namespace {

// The scheduler as deployed, on `port`, /metrics on a free port.
absl::StatusOr<testing::SchedulerProcess> StartScheduler(const std::string& bin, const std::string& conninfo,
                                                         const std::string& dir, int port,
                                                         const std::vector<std::string>& tls) {
  std::vector<std::string> flags = bench::DeployedSchedulerFlags();
  flags.insert(flags.end(), {absl::StrCat("--port=", port), "--metrics-port=0"});
  flags.insert(flags.end(), tls.begin(), tls.end());
  return testing::StartScheduler(bin, conninfo, dir, flags);
}

// The sum of a counter's samples in a /metrics text (0 when absent).
double Counter(const std::string& metrics, const std::string& name) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
    if (!absl::StartsWith(line, name) || line.size() <= name.size()) continue;
    const char next = line[name.size()];
    if (next != ' ' && next != '{') continue;
    double v = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) sum += v;
  }
  return sum;
}

// Waits until the scheduler has handled a progress batch or a lease.
absl::StatusOr<absl::Time> FirstWorkerCall(int metrics_port, absl::Duration scrape, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    absl::StatusOr<std::string> m = testing::HttpGet(metrics_port, "/metrics");
    const absl::Time at = absl::Now();
    if (m.ok() && (Counter(*m, "normsweep_scheduler_progress_points_total") > 0 ||
                   Counter(*m, "normsweep_scheduler_lease_latency_seconds_count") > 0)) {
      return at;
    }
    absl::SleepFor(scrape);
  }
  return absl::DeadlineExceededError("no call from the worker");
}

int Run() {
  const std::string bin = absl::GetFlag(FLAGS_bin_dir);
  std::optional<bench::BenchDatabase> db = bench::StartDatabase("reconnect");
  if (!db.has_value()) return 1;
  const std::string& conninfo = db->conninfo;
  const std::string dir = db->server->dir();

  std::vector<std::string> scheduler_tls, worker_tls;
  TlsClientOptions client_tls;
  if (absl::GetFlag(FLAGS_tls)) {
    auto certs = testing::MakeTestCertificates(dir);
    if (!certs.ok()) {
      std::fprintf(stderr, "%s\n", certs.status().ToString().c_str());
      return 1;
    }
    scheduler_tls = {"--tls-cert=" + certs->server_cert, "--tls-key=" + certs->server_key};
    worker_tls = {"--tls-ca=" + certs->ca};
    client_tls.ca = {certs->ca, "--tls"};
  }

  const int port = testing::FreePort();
  std::optional<testing::SchedulerProcess> scheduler;  // Subprocess moves but does not assign
  if (auto started = StartScheduler(bin, conninfo, dir, port, scheduler_tls); started.ok()) {
    scheduler.emplace(*std::move(started));
  } else {
    std::fprintf(stderr, "scheduler: %s\n", started.status().ToString().c_str());
    return 1;
  }
  const std::string address = absl::StrCat("127.0.0.1:", port);

  // One trial that outlasts every restart: a tiny model, many steps.
  auto credentials = MakeChannelCredentials(client_tls);
  if (!credentials.ok()) return 1;
  auto sweeps = v1::SweepService::NewStub(grpc::CreateChannel(address, *credentials));
  v1::SubmitSweepRequest submit;
  v1::SweepSpec* spec = submit.mutable_spec();
  spec->set_name("reconnect");
  v1::TrainConfig* base = spec->mutable_base();
  base->set_layers(1);
  base->set_d_model(16);
  base->set_heads(2);
  base->set_seq_len(16);
  base->set_batch_size(4);
  base->set_steps(100000000);
  base->set_eval_every(1000000);
  spec->add_placements("pre");
  spec->add_warmup_steps(0);
  spec->add_peak_lrs(1e-3);
  spec->add_seeds(0);
  v1::SubmitSweepResponse submitted;
  grpc::ClientContext submit_ctx;
  if (grpc::Status st = sweeps->SubmitSweep(&submit_ctx, submit, &submitted); !st.ok()) {
    std::fprintf(stderr, "SubmitSweep: %s\n", st.error_message().c_str());
    return 1;
  }

  std::map<std::string, std::string> worker_env;
  for (const std::string& kv : absl::GetFlag(FLAGS_worker_env)) {
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) worker_env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  std::vector<std::string> worker_argv = {bin + "/worker/normsweep-worker", "--scheduler=" + address,
                                          "--name=reconnect", "--cpu-slots=1", "--threads-per-slot=1",
                                          "--trainer=" + bin + "/trainer/normsweep-train", "--work-dir=" + dir + "/work"};
  worker_argv.insert(worker_argv.end(), worker_tls.begin(), worker_tls.end());
  const std::string worker_log = dir + "/worker.log";
  auto worker = testing::Subprocess::Start(worker_argv, worker_env, worker_log);
  if (!worker.ok()) return 1;
  // Training: its progress reaches the first scheduler.
  if (!FirstWorkerCall(scheduler->metrics_port, absl::Milliseconds(20), absl::Seconds(30)).ok() ||
      !absl::StrContains(testing::ReadFile(worker_log), "started on cpu")) {
    std::fprintf(stderr, "the worker did not start its trial; see %s\n", worker_log.c_str());
    return 1;
  }

  std::vector<double> ms;
  std::printf("worker reconnect: %d scheduler restarts on port %d%s\n", absl::GetFlag(FLAGS_restarts), port,
              absl::GetFlag(FLAGS_tls) ? ", TLS" : "");
  for (int i = 1; i <= absl::GetFlag(FLAGS_restarts); ++i) {
    absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_settle_s)));
    const absl::Time stop = absl::Now();
    scheduler->process.Stop(SIGTERM);
    const absl::Time stopped = absl::Now();
    scheduler.reset();
    auto started = StartScheduler(bin, conninfo, dir, port, scheduler_tls);
    if (!started.ok()) {
      std::fprintf(stderr, "restart %d: %s\n", i, started.status().ToString().c_str());
      return 1;
    }
    scheduler.emplace(*std::move(started));
    absl::StatusOr<absl::Time> back = FirstWorkerCall(
        scheduler->metrics_port, absl::Milliseconds(absl::GetFlag(FLAGS_scrape_ms)), absl::Seconds(30));
    if (!back.ok()) {
      std::fprintf(stderr, "restart %d: no call from the worker within 30 s; see %s\n", i, worker_log.c_str());
      return 1;
    }
    const double down = absl::ToDoubleMilliseconds(scheduler->listening - stop);
    const double stopping = absl::ToDoubleMilliseconds(stopped - stop);
    const double gap = absl::ToDoubleMilliseconds(*back - scheduler->listening);
    ms.push_back(gap);
    std::printf("  restart %2d  scheduler down %6.0f ms (stopping %6.0f ms)  port file to the worker's first call %7.1f ms\n",
                i, down, stopping, gap);
    std::fflush(stdout);
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms.size() % 2 == 1 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  std::printf("  min %.1f ms, median %.1f ms, max %.1f ms (target: max <= 1000 ms)\n", ms.front(), median, ms.back());
  worker->Stop(SIGKILL);
  scheduler->process.Stop(SIGTERM);
  return 0;
}

}  // namespace
}  // namespace normsweep

int main(int argc, char** argv) { return normsweep::bench::Main(argc, argv, kUsage, normsweep::Run); }
