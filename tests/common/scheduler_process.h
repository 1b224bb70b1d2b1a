// A real normsweep-scheduler for tests: started on free ports (it writes
// them to a port file), against a database the test made.
#ifndef NORMSWEEP_TESTS_COMMON_SCHEDULER_PROCESS_H_
#define NORMSWEEP_TESTS_COMMON_SCHEDULER_PROCESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/common/subprocess.h"

namespace normsweep::testing {

struct SchedulerProcess {
  Subprocess process;
  int grpc_port = 0;
  int metrics_port = 0;  // 0 without /metrics
  absl::Time listening;  // when it wrote its port file (it serves from then on)
  std::string address() const { return "127.0.0.1:" + std::to_string(grpc_port); }
};

// Starts <bin_dir>/scheduler/normsweep-scheduler with NORMSWEEP_DATABASE_URL =
// conninfo, logging to <dir>/scheduler.log; extra_flags come last (they
// override the defaults: a free port, 2 s leases, 300 ms heartbeats, no
// /metrics).
absl::StatusOr<SchedulerProcess> StartScheduler(const std::string& bin_dir, const std::string& conninfo,
                                                const std::string& dir,
                                                const std::vector<std::string>& extra_flags = {});

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_SCHEDULER_PROCESS_H_
