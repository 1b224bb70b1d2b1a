#include "tests/bench/load_report.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "db/pg_connection.h"

namespace normsweep::bench {
namespace {

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(p * (v.size() - 1));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

// The workers' results together.
struct Totals {
  int lifecycles = 0;
  int64_t points = 0;
  absl::Time drained = absl::InfiniteFuture();
  std::vector<absl::Time> finished;
  std::vector<double> lease_ms;
  std::vector<double> lease_at_s;  // when each lease started, seconds into the run
};

Totals Sum(const LoadRun& run) {
  Totals t;
  for (const auto& r : run.results) {
    if (!r.error.empty()) std::fprintf(stderr, "worker error: %s\n", r.error.c_str());
    t.lifecycles += r.lifecycles;
    t.drained = std::min(t.drained, r.drained_at);
    t.finished.insert(t.finished.end(), r.finished_at.begin(), r.finished_at.end());
    t.points += r.points;
    t.lease_ms.insert(t.lease_ms.end(), r.lease_ms.begin(), r.lease_ms.end());
    for (absl::Time at : r.lease_at) t.lease_at_s.push_back(absl::ToDoubleSeconds(at - run.start));
  }
  return t;
}

// The metric rows stored (-1 when unknown); with pg_stats, prints the
// costliest statements and each PostgreSQL process's CPU.
int64_t StoredRows(const LoadRun& run) {
  int64_t stored = -1;
  if (!run.conninfo.empty()) {
    db::PgConnectOptions options;
    options.conninfo = run.conninfo;
    auto conn = db::PgConnection::Connect(options);
    if (conn.ok()) {
      auto r = (*conn)->Exec("SELECT count(*) FROM trial_metrics");
      if (r.ok()) stored = r->GetInt64(0, 0);
      if (run.pg_stats) {
        auto ext = (*conn)->Exec("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
        if (!ext.ok()) std::fprintf(stderr, "pg_stat_statements: %s\n", ext.status().ToString().c_str());
        auto top = (*conn)->Exec(
            "SELECT calls, round((total_exec_time + total_plan_time)::numeric, 0),"
            " round(((total_exec_time + total_plan_time) / greatest(calls, 1))::numeric, 3),"
            " plans || ' plans ' || round(total_plan_time::numeric, 0) || ' ms  ' || left(query, 70)"
            " FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 10");
        if (!top.ok()) std::fprintf(stderr, "pg_stat_statements: %s\n", top.status().ToString().c_str());
        if (top.ok()) {
          for (int i = 0; i < top->rows(); ++i) {
            std::printf("  pg: %8s calls %8s ms total %8s ms/call  %s\n", top->GetString(i, 0).c_str(),
                        top->GetString(i, 1).c_str(), top->GetString(i, 2).c_str(), top->GetString(i, 3).c_str());
          }
        }
      }
    }
  }
  if (run.pg_stats) {
    for (const auto& [pid, process] : run.pg_processes_after) {
      auto before = run.pg_processes_before.find(pid);
      const double cpu = process.second - (before == run.pg_processes_before.end() ? 0 : before->second.second);
      if (cpu >= 0.05) std::printf("  pg process %6d %7.2f s CPU  %s\n", pid, cpu, process.first.c_str());
    }
  }
  return stored;
}

}  // namespace

double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(in, line);
  size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> f = absl::StrSplit(line.substr(close + 2), ' ');
  if (f.size() < 13) return 0;  // fields after the name: state(0) ... utime(11) stime(12)
  return (std::stod(f[11]) + std::stod(f[12])) / sysconf(_SC_CLK_TCK);
}

double PostgresCpuSeconds(const std::string& data_dir, ProcessCpu* by_process) {
  std::ifstream pidfile(data_dir + "/postmaster.pid");
  pid_t postmaster = 0;
  pidfile >> postmaster;
  if (postmaster <= 0) return 0;
  double total = ProcessCpuSeconds(postmaster);
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    pid_t pid = std::atoi(entry.path().filename().c_str());
    if (pid <= 0) continue;
    std::ifstream in(entry.path() / "stat");
    std::string line;
    std::getline(in, line);
    size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<std::string> f = absl::StrSplit(line.substr(close + 2), ' ');
    if (f.size() > 1 && std::atoi(f[1].c_str()) == postmaster) {
      const double cpu = ProcessCpuSeconds(pid);
      total += cpu;
      if (by_process != nullptr) {
        std::ifstream cmdline(entry.path() / "cmdline");
        std::string title;
        std::getline(cmdline, title, '\0');
        (*by_process)[pid] = {title, cpu};
      }
    }
  }
  return total;
}

namespace {

// NORMSWEEP_LOAD_DEBUG: the 30 slowest leases and when they started.
void PrintSlowLeases(const Totals& t) {
  std::vector<std::pair<double, double>> slow;
  for (size_t i = 0; i < t.lease_ms.size(); ++i) slow.emplace_back(t.lease_ms[i], t.lease_at_s[i]);
  std::sort(slow.rbegin(), slow.rend());
  for (size_t i = 0; i < std::min<size_t>(30, slow.size()); ++i) {
    std::printf("  slow lease %.1f ms at %.2f s\n", slow[i].first, slow[i].second);
  }
}

// The heading, then lifecycles, points and RPCs per second.
void PrintRates(const LoadRun& run, const Totals& t, int64_t stored) {
  const double seconds = run.seconds;
  std::printf("scheduler load: %d workers, %d trials x %d batches x %d steps, %s, PostgreSQL %s, %s\n", run.workers,
              t.lifecycles, run.batches, run.steps_per_batch, run.tls ? "TLS" : "plaintext",
              run.durable ? "durable (fsync on)" : "fsync off",
              run.rate > 0 ? absl::StrCat("paced at ", run.rate, " lifecycles/s").c_str() : "unpaced (saturation)");
  std::printf("  wall time            %.2f s\n", seconds);
  std::printf("  trial lifecycles/s   %.0f   (target >= 1000)\n", t.lifecycles / seconds);
  // The whole run includes its start (64 channels connecting, workers
  // registering, database backends preparing their statements) and its
  // drain (fewer than --workers busy once the queue is empty); the steady
  // rate counts the lifecycles that ended between 1 s in and the first
  // empty lease.
  const absl::Time steady_from = run.start + absl::Seconds(1);
  const absl::Time steady_to = std::min(t.drained, run.start + absl::Seconds(seconds));
  if (steady_to - steady_from >= absl::Seconds(1)) {
    const auto in_window = std::count_if(t.finished.begin(), t.finished.end(), [&](absl::Time at) {
      return at >= steady_from && at < steady_to;
    });
    std::printf("  steady lifecycles/s  %.0f   (from 1 s to the queue's end at %.2f s: %ld lifecycles)\n",
                in_window / absl::ToDoubleSeconds(steady_to - steady_from),
                absl::ToDoubleSeconds(steady_to - run.start), static_cast<long>(in_window));
  }
  std::printf("  metric points/s      %.0f   (target >= 50000)%s\n", t.points / seconds,
              stored >= 0 ? absl::StrCat("; rows stored: ", stored, " of ", t.points).c_str() : "");
  std::printf("  RPCs/s               %.0f\n",
              (t.lifecycles * (run.batches + 2.0) + t.lease_ms.size() - t.lifecycles) / seconds);
}

// Lease latency (all, and after the first second), the timeline, the CPU
// per lifecycle and the machine.
void PrintLatencyAndCpu(const LoadRun& run, const Totals& t) {
  std::vector<double> sorted = t.lease_ms;
  const double p50 = Percentile(sorted, 0.50), p99 = Percentile(sorted, 0.99);
  const double max = sorted.empty() ? 0 : *std::max_element(sorted.begin(), sorted.end());
  std::printf("  lease latency        p50 %.2f ms, p99 %.2f ms, max %.2f ms   (target p99 < 20 ms)\n", p50, p99, max);
  // The first second includes connecting 64 channels, starting database
  // backends and preparing statements on them.
  std::vector<double> steady;
  for (size_t i = 0; i < t.lease_ms.size(); ++i) {
    if (t.lease_at_s[i] >= 1.0) steady.push_back(t.lease_ms[i]);
  }
  if (!steady.empty()) {
    const double s50 = Percentile(steady, 0.50), s99 = Percentile(steady, 0.99);
    std::printf("  after the first 1 s  p50 %.2f ms, p99 %.2f ms (%zu leases)\n", s50, s99, steady.size());
  }
  if (const double step = run.timeline; step > 0) {
    std::map<int64_t, int> ended;  // interval index -> lifecycles that ended in it
    for (absl::Time at : t.finished) ++ended[static_cast<int64_t>(absl::ToDoubleSeconds(at - run.start) / step)];
    for (const auto& [i, n] : ended) {
      std::printf("  timeline %6.2f-%6.2f s  %5d lifecycles  %6.0f/s\n", i * step, (i + 1) * step, n, n / step);
    }
  }
  const int lifecycles = std::max(1, t.lifecycles);
  if (run.child) {
    std::printf("  CPU per lifecycle    %.0f us normsweep-scheduler, %.0f us PostgreSQL, %.0f us simulated workers\n",
                1e6 * run.scheduler_cpu / lifecycles, 1e6 * run.pg_cpu / lifecycles, 1e6 * run.self_cpu / lifecycles);
  } else {
    std::printf("  CPU per lifecycle    %.0f us in this process (scheduler + simulated workers), %.0f us in PostgreSQL\n",
                1e6 * run.self_cpu / lifecycles, 1e6 * run.pg_cpu / lifecycles);
  }
  std::printf("  machine              %ld cores, load average %.1f at the end (other work on the box inflates latency)\n",
              sysconf(_SC_NPROCESSORS_ONLN), run.load_average);
}

}  // namespace

int PrintLoadReport(const LoadRun& run) {
  const Totals totals = Sum(run);
  const int64_t stored = StoredRows(run);
  if (std::getenv("NORMSWEEP_LOAD_DEBUG") != nullptr) PrintSlowLeases(totals);
  PrintRates(run, totals, stored);
  PrintLatencyAndCpu(run, totals);
  return totals.lifecycles;
}

}  // namespace normsweep::bench
