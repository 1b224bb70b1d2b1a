// Scheduler stop time (a benchmark program, not a test).
//
// Starts the real normsweep-scheduler (deployed settings: /metrics on,
// 5 s maintenance, 60 s leases) on a throwaway PostgreSQL, opens N
// WatchSweep streams, H health Watch calls and P worker StreamProgress
// streams (tests/scheduler/open_streams.h), optionally keeps C clients
// submitting sweeps, then SIGTERMs it and measures the time from kill() to
// waitpid() returning. --rounds rounds per N; prints min/median/max per N,
// the machine (nproc, CPU model, load) and the scheduler's "stopping:" line
// of the last round.
//
//   build/tests/bench/normsweep-scheduler-stop [--watch=0,10,100] [--progress=4] [--health=1] [--callers=0]
//       [--rounds=5]
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "normsweep/v1/sweep_service.grpc.pb.h"
#include "tests/bench/bench_setup.h"
#include "tests/common/scheduler_process.h"
#include "tests/common/specs.h"
#include "tests/common/subprocess.h"
#include "tests/scheduler/open_streams.h"

ABSL_FLAG(std::vector<std::string>, watch, std::vector<std::string>({"0", "10", "100"}),
          "Numbers of open WatchSweep streams, one series each");
ABSL_FLAG(int, progress, 4, "Open StreamProgress streams (one leased trial each)");
ABSL_FLAG(int, health, 1, "Open health Watch calls");
ABSL_FLAG(int, callers, 0, "Clients submitting sweeps in a loop while the scheduler stops");
ABSL_FLAG(int, rounds, 5, "Stops per series");
ABSL_FLAG(std::string, bin_dir, NORMSWEEP_BINARY_DIR_DEFAULT, "The build directory holding the binaries");

constexpr char kUsage[] =
    "normsweep-scheduler-stop [flags]: the time from SIGTERM to a real scheduler's exit, with streams open "
    "(tests/bench/scheduler_stop.cc)";

namespace normsweep {
namespace {

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "model name")) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

std::string StoppingLine(const std::string& log) {
  std::ifstream in(log);
  std::string line, found;
  while (std::getline(in, line)) {
    if (absl::StrContains(line, "stopping:") || absl::StrContains(line, "stopped")) {
      found += (found.empty() ? "" : "\n    ") + line;
    }
  }
  return found.empty() ? "(none)" : found;
}

// Submits small sweeps until a call fails (the scheduler stopped).
void SubmitUntilStopped(const std::string& address, int caller, std::atomic<int>* submitted) {
  auto stub = v1::SweepService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  for (int i = 0;; ++i) {
    v1::SubmitSweepRequest request;
    request.set_request_id(absl::StrCat("caller-", caller, "-", absl::ToUnixNanos(absl::Now()), "-", i));
    *request.mutable_spec() = testing::SmallSpec("stop-bench");
    request.mutable_spec()->add_seeds(0);
    for (int lr = 1; lr <= 20; ++lr) request.mutable_spec()->add_peak_lrs(1e-4 * lr);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::SubmitSweepResponse response;
    if (!stub->SubmitSweep(&context, request, &response).ok()) return;
    ++*submitted;
  }
}

int Run() {
  const std::string bin = absl::GetFlag(FLAGS_bin_dir);
  std::optional<bench::BenchDatabase> db = bench::StartDatabase("stop_bench");
  if (!db.has_value()) return 1;
  std::printf("machine: nproc %u, %s, load %s (before)\n", std::thread::hardware_concurrency(), CpuModel().c_str(),
              LoadAverage().c_str());
  const int progress = absl::GetFlag(FLAGS_progress);
  const int health = absl::GetFlag(FLAGS_health);
  const int callers = absl::GetFlag(FLAGS_callers);
  int round_number = 0;
  std::string last_line;
  for (const std::string& w : absl::GetFlag(FLAGS_watch)) {
    const int watches = std::atoi(w.c_str());
    std::vector<double> ms;
    for (int r = 0; r < absl::GetFlag(FLAGS_rounds); ++r) {
      const std::string dir = absl::StrCat(db->server->dir(), "/round-", ++round_number);
      mkdir(dir.c_str(), 0755);
      std::vector<std::string> flags = bench::DeployedSchedulerFlags();
      flags.push_back("--metrics-port=0");
      auto scheduler = testing::StartScheduler(bin, db->conninfo, dir, flags);
      if (!scheduler.ok()) {
        std::fprintf(stderr, "scheduler: %s\n", scheduler.status().ToString().c_str());
        return 1;
      }
      auto streams = testing::OpenStreams::Open(scheduler->address(), {watches, health, progress});
      if (!streams.ok()) {
        std::fprintf(stderr, "streams: %s\n", streams.status().ToString().c_str());
        return 1;
      }
      std::atomic<int> submitted{0};
      std::vector<std::thread> threads;
      for (int c = 0; c < callers; ++c) threads.emplace_back(SubmitUntilStopped, scheduler->address(), c, &submitted);
      while (callers > 0 && submitted.load() < callers) absl::SleepFor(absl::Milliseconds(5));
      const absl::Time signalled = absl::Now();
      const int code = scheduler->process.Stop(SIGTERM);
      const absl::Duration took = absl::Now() - signalled;
      for (std::thread& t : threads) t.join();
      ms.push_back(absl::ToDoubleMilliseconds(took));
      if (code != 0) std::printf("  round %d: exit code %d\n", round_number, code);
      last_line = StoppingLine(dir + "/scheduler.log");
      std::printf("  round %d: %.0f ms %s\n", round_number, absl::ToDoubleMilliseconds(took), last_line.c_str());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("watch %3d, health %d, progress %d, callers %d: signal to exit min %.0f / median %.0f / max %.0f ms "
                "over %zu rounds\n",
                watches, health, progress, callers, ms.front(), ms[ms.size() / 2], ms.back(), ms.size());
    std::printf("  last round's log: %s\n", last_line.c_str());
    std::fflush(stdout);
  }
  std::printf("load %s (after)\n", LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace normsweep

int main(int argc, char** argv) { return normsweep::bench::Main(argc, argv, kUsage, normsweep::Run); }
