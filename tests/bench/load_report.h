// The load generator's report (tests/bench/scheduler_load.cc): the CPU the
// processes used, read from /proc, and the figures of a run, printed.
#ifndef NORMSWEEP_TESTS_BENCH_LOAD_REPORT_H_
#define NORMSWEEP_TESTS_BENCH_LOAD_REPORT_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "tests/bench/sim_worker.h"

namespace normsweep::bench {

// CPU seconds (user + system) a process has used so far, from /proc.
double ProcessCpuSeconds(pid_t pid);

// pid -> (process title, CPU seconds).
using ProcessCpu = std::map<pid_t, std::pair<std::string, double>>;

// The PostgreSQL server's processes: the postmaster and its children (those
// still running: an autovacuum worker that has exited is not counted). With
// by_process, adds each one's CPU seconds under its title ("postgres:
// walwriter", "postgres: postgres load [local] idle", ...).
double PostgresCpuSeconds(const std::string& data_dir, ProcessCpu* by_process = nullptr);

// What a run measured, and the settings its heading names.
struct LoadRun {
  int workers = 0, batches = 0, steps_per_batch = 0;
  bool tls = false, durable = false;
  double rate = 0;      // lifecycles/s it was paced at (0: unpaced)
  double timeline = 0;  // print lifecycles per interval of this many seconds (0: no timeline)
  bool pg_stats = false;  // print the costliest statements and each PostgreSQL process's CPU
  std::string conninfo;   // the database this program made ("": none, no row count)

  absl::Time start;
  double seconds = 0;  // wall time from start to the last worker's end
  double load_average = 0;  // 1 minute, at the end
  std::vector<WorkerResult> results;
  bool child = false;  // the scheduler ran as a process of its own
  double scheduler_cpu = 0, self_cpu = 0, pg_cpu = 0;  // CPU seconds over the run
  ProcessCpu pg_processes_before, pg_processes_after;
};

// Prints the figures; returns the lifecycles the workers completed.
int PrintLoadReport(const LoadRun& run);

}  // namespace normsweep::bench

#endif  // NORMSWEEP_TESTS_BENCH_LOAD_REPORT_H_
