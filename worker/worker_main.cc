// normsweep-worker: the worker daemon. Registers with the scheduler, keeps
// every slot (GPU, or CPU share) busy with normsweep-train processes, exports
// Prometheus /metrics. SIGTERM/SIGINT drain it (see worker/README.md); a
// second signal exits at once (running trainers die with it).
//
// Flags are spelled with dashes (common/flags.h); underscores (--cpu_slots)
// are accepted as aliases.
// TLS to the scheduler (common/tls.h): --tls-ca, and for a scheduler that
// requires client certificates --tls-cert/--tls-key, or NORMSWEEP_TLS_CA,
// NORMSWEEP_TLS_CERT, NORMSWEEP_TLS_KEY. Every line it writes to stderr
// starts with a UTC timestamp (common/log.h).
#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/api_token.h"
#include "common/clock.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/tls.h"
#include "common/wake_listener.h"
#include "proto/schema/api_limits.h"
#include "worker/scheduler_client.h"
#include "worker/slots.h"
#include "worker/worker.h"
#include "worker/worker_metrics.h"
#include "worker/memory_events.h"
#include "worker/worker_options.h"

ABSL_FLAG(std::string, scheduler, "localhost:50051", "Scheduler address host:port");
ABSL_FLAG(std::string, name, "", "Worker name (default: the hostname)");
ABSL_FLAG(std::string, gpus, "", "GPUs to use: all, none, or indexes like 0,2 (default: all detected, "
                                 "unless --cpu-slots is given)");
ABSL_FLAG(int, cpu_slots, 0, "Trials to run at once on the CPU (default 1 when no GPU slot)");
ABSL_FLAG(int, fuse, 1,
          "Fused trials: lease up to this many compatible trials of a sweep at once and train them in one "
          "trainer process per slot (1..64; 1: one trial per process)");
ABSL_FLAG(int, threads_per_slot, 0, "Trainer threads per slot (default: cores / slots)");
ABSL_FLAG(std::string, trainer, "", "normsweep-train binary (default: next to this binary, then the build tree)");
ABSL_FLAG(std::string, work_dir, "", "Per-trial configs and stderr logs (default: $TMPDIR/normsweep-worker-NAME)");
ABSL_FLAG(std::string, metrics_host, "0.0.0.0", "Address for /metrics");
ABSL_FLAG(int, metrics_port, 0, "Prometheus /metrics port (0: off)");
ABSL_FLAG(double, trial_timeout_s, 0, "Kill a trial running longer than this and report it FAILED (0: no limit)");
ABSL_FLAG(double, stall_timeout_s, 600, "Kill a trial that prints no event for this long (0: no limit)");
ABSL_FLAG(double, grace_period_s, 30, "On SIGTERM, let running trials finish for this long, then hand them back");
ABSL_FLAG(double, kill_after_s, 3, "SIGKILL a trial this long after its SIGTERM");
ABSL_FLAG(double, prefetch_lead_s, 3, "Lease a slot's next trial when its running one should end within this long");
ABSL_FLAG(std::string, memory_events_file, "",
          "cgroup v2 memory.events whose oom_kill count tells an OOM kill of a trainer from a SIGKILL from "
          "outside (default: the worker's cgroup, from /proc/self/cgroup; none: do not tell them apart)");
ABSL_FLAG(bool, keep_trial_dirs, false, "Keep the work dir of every trial (FAILED ones are always kept)");
ABSL_FLAG(std::string, tls_ca, "",
          "TLS: PEM CA that signed the scheduler's certificate (default $NORMSWEEP_TLS_CA; unset: plaintext)");
ABSL_FLAG(std::string, tls_cert, "",
          "Mutual TLS: this worker's PEM certificate chain (default $NORMSWEEP_TLS_CERT)");
ABSL_FLAG(std::string, tls_key, "", "Mutual TLS: its PEM private key (default $NORMSWEEP_TLS_KEY)");

namespace {

using normsweep::worker::WorkerOptions;

std::string Hostname() {
  char buf[HOST_NAME_MAX + 1] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

std::string DefaultTrainer() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const auto& candidate : {self.parent_path() / "normsweep-train",
                                  self.parent_path().parent_path() / "trainer" / "normsweep-train"}) {
      if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
  }
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    size_t start = 0;
    while (start <= p.size()) {
      size_t end = p.find(':', start);
      if (end == std::string::npos) end = p.size();
      const std::string candidate = p.substr(start, end - start) + "/normsweep-train";
      if (end > start && access(candidate.c_str(), X_OK) == 0) return candidate;
      start = end + 1;
    }
  }
  return "normsweep-train";
}

void Log(const std::string& message) { normsweep::LogLine("normsweep-worker", message); }

int Fail(const std::string& message) {
  Log(message);
  return 2;
}

constexpr char kUsage[] =
    "normsweep-worker --scheduler host:port [--name NAME] [--cpu-slots N | --gpus all|none|0,2]\n"
    "  [--threads-per-slot N] [--fuse K] [--trainer PATH] [--work-dir DIR] [--metrics-port P]\n"
    "  [--trial-timeout-s S] [--stall-timeout-s S] [--grace-period-s S]\n"
    "  [--tls-ca CA.pem [--tls-cert CERT.pem --tls-key KEY.pem]]\n"
    "TLS: --tls-ca (or NORMSWEEP_TLS_CA) verifies the scheduler; --tls-cert/--tls-key (or NORMSWEEP_TLS_CERT,\n"
    "NORMSWEEP_TLS_KEY) present a client certificate to a scheduler that requires one.\n"
    "SIGTERM/SIGINT drain: no new leases; running trials get --grace-period-s to finish, then are\n"
    "stopped and handed back (FinishTrial with the interruption worker_drained: the scheduler re-queues them\n"
    "at once without counting an attempt).";

}  // namespace

int main(int argc, char** argv) {
  if (std::optional<int> exit_code = normsweep::ParseFlagsForMain(argc, argv, kUsage)) return *exit_code;

  WorkerOptions options;
  options.hostname = Hostname();
  options.name = absl::GetFlag(FLAGS_name).empty() ? options.hostname : absl::GetFlag(FLAGS_name);
  options.trainer_path = absl::GetFlag(FLAGS_trainer).empty() ? DefaultTrainer() : absl::GetFlag(FLAGS_trainer);
  if (access(options.trainer_path.c_str(), X_OK) != 0) {
    return Fail(absl::StrCat("--trainer: cannot execute '", options.trainer_path, "'"));
  }
  const std::string gpus = absl::GetFlag(FLAGS_gpus);
  const bool want_gpus = gpus == "all" || (gpus.empty() && absl::GetFlag(FLAGS_cpu_slots) == 0);
  const int detected = want_gpus ? normsweep::worker::DetectGpus(options.trainer_path) : 0;
  const unsigned cores = std::thread::hardware_concurrency();
  auto slots = normsweep::worker::ResolveSlots(gpus, absl::GetFlag(FLAGS_cpu_slots),
                                               absl::GetFlag(FLAGS_threads_per_slot), detected,
                                               cores == 0 ? 1 : static_cast<int>(cores));
  if (!slots.ok()) return Fail(std::string(slots.status().message()));
  options.slots = *slots;
  if (gpus == "all" && detected == 0) {
    Log(absl::StrCat("--gpus all: ", options.trainer_path, " lists no GPU; running ", options.slots.size(),
                     " CPU slot(s)"));
  }
  options.work_dir = absl::GetFlag(FLAGS_work_dir);
  if (options.work_dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    options.work_dir = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/normsweep-worker-", options.name);
  }
  for (const auto& [flag, value] : {std::pair{"--trial-timeout-s", absl::GetFlag(FLAGS_trial_timeout_s)},
                                    std::pair{"--stall-timeout-s", absl::GetFlag(FLAGS_stall_timeout_s)},
                                    std::pair{"--grace-period-s", absl::GetFlag(FLAGS_grace_period_s)},
                                    std::pair{"--kill-after-s", absl::GetFlag(FLAGS_kill_after_s)},
                                    std::pair{"--prefetch-lead-s", absl::GetFlag(FLAGS_prefetch_lead_s)}}) {
    if (!(value >= 0)) return Fail(absl::StrCat(flag, ": must be >= 0"));
  }
  options.trial_timeout = absl::Seconds(absl::GetFlag(FLAGS_trial_timeout_s));
  options.stall_timeout = absl::Seconds(absl::GetFlag(FLAGS_stall_timeout_s));
  options.grace_period = absl::Seconds(absl::GetFlag(FLAGS_grace_period_s));
  options.kill_after = absl::Seconds(absl::GetFlag(FLAGS_kill_after_s));
  options.prefetch_lead = absl::Seconds(absl::GetFlag(FLAGS_prefetch_lead_s));
  options.keep_trial_dirs = absl::GetFlag(FLAGS_keep_trial_dirs);
  const std::string memory_events = absl::GetFlag(FLAGS_memory_events_file);
  if (memory_events == "none") {
    options.memory_events_file = "";
  } else if (!memory_events.empty()) {
    if (!normsweep::worker::ReadOomKills(memory_events).has_value()) {
      return Fail(absl::StrCat("--memory-events-file: no oom_kill count can be read from '", memory_events, "'"));
    }
    options.memory_events_file = memory_events;
  } else {
    options.memory_events_file = normsweep::worker::DefaultMemoryEventsFile();
    if (!normsweep::worker::ReadOomKills(options.memory_events_file).has_value()) {
      options.memory_events_file = "";
      Log("no cgroup v2 memory.events with an oom_kill count: a SIGKILLed trainer counts as killed from outside, "
          "the OOM killer's too (--memory-events-file)");
    }
  }
  options.fuse = absl::GetFlag(FLAGS_fuse);
  if (options.fuse < 1 || options.fuse > normsweep::schema::kMaxFusedTrials) {
    return Fail(absl::StrCat("--fuse: ", options.fuse, " is not in [1, ", normsweep::schema::kMaxFusedTrials, "]"));
  }
  if (options.fuse > 1 && options.work_dir.find(',') != std::string::npos) {
    return Fail(absl::StrCat("--work-dir: '", options.work_dir, "' holds a comma, which --fuse ", options.fuse,
                             " cannot pass to the trainer (its path lists are comma-separated)"));
  }
  const int metrics_port = absl::GetFlag(FLAGS_metrics_port);
  if (metrics_port < 0 || metrics_port > 65535) return Fail("--metrics-port: must be in [0, 65535]");

  // Signals are taken by sigwait below; block them before any thread starts
  // (children unblock them again before exec).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto registry = std::make_shared<prometheus::Registry>();
  normsweep::worker::WorkerMetrics metrics(*registry);
  std::unique_ptr<prometheus::Exposer> exposer;
  if (metrics_port > 0) {
    const std::string address = absl::StrCat(absl::GetFlag(FLAGS_metrics_host), ":", metrics_port);
    try {
      exposer = std::make_unique<prometheus::Exposer>(address);
    } catch (const std::exception& e) {
      return Fail(absl::StrCat("cannot serve /metrics on ", address, ": ", e.what()));
    }
    exposer->RegisterCollectable(registry);
  }

  absl::StatusOr<std::string> api_token = normsweep::ApiTokenFromEnvironment();
  if (!api_token.ok()) return Fail(std::string(api_token.status().message()));
  normsweep::TlsClientOptions tls;
  tls.ca = {absl::GetFlag(FLAGS_tls_ca), "--tls-ca"};
  tls.cert = {absl::GetFlag(FLAGS_tls_cert), "--tls-cert"};
  tls.key = {absl::GetFlag(FLAGS_tls_key), "--tls-key"};
  tls = normsweep::TlsClientOptionsWithEnvironment(tls);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = normsweep::MakeChannelCredentials(tls);
  if (!credentials.ok()) return Fail(std::string(credentials.status().message()));
  normsweep::worker::GrpcSchedulerClient client(absl::GetFlag(FLAGS_scheduler), absl::Seconds(5), *api_token,
                                                *credentials);
  normsweep::worker::Worker worker(client, normsweep::RealClock::Get(), metrics, options);
  Log(absl::StrCat(options.name, ", scheduler ", absl::GetFlag(FLAGS_scheduler), " (", normsweep::DescribeTls(tls),
                   "), ", options.slots.size(), " slot(s) (", options.slots[0].device, " x", options.slots[0].threads,
                   " threads)", options.fuse > 1 ? absl::StrCat(", up to ", options.fuse, " fused trials per slot") : "",
                   ", trainer ", options.trainer_path, ", work dir ", options.work_dir,
                   metrics_port > 0 ? absl::StrCat(", /metrics on port ", metrics_port) : ""));

  std::thread([&worker, signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    Log(absl::StrCat("signal ", sig, ": draining (again to exit at once)"));
    worker.Drain();
    sigwait(&signals, &sig);
    Log(absl::StrCat("signal ", sig, ": exiting now"));
    std::_Exit(1);
  }).detach();

  absl::Status status = worker.Run();
  if (exposer != nullptr) normsweep::StopListener(metrics_port, [&exposer] { exposer.reset(); });
  if (!status.ok()) {
    Log(status.ToString());
    return 1;
  }
  return 0;
}
