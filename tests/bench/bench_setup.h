// What the bench programs share (programs that print figures, not tests):
// main's flag parsing, a throwaway database, the scheduler's deployed
// settings. Called from the program's main thread.
#ifndef NORMSWEEP_TESTS_BENCH_BENCH_SETUP_H_
#define NORMSWEEP_TESTS_BENCH_BENCH_SETUP_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tests/common/postgres_instance.h"

namespace normsweep::bench {

// The scheduler as deployed (60 s leases, 15 s heartbeats, 5 s maintenance),
// in place of the short ones of testing::StartScheduler's defaults.
std::vector<std::string> DeployedSchedulerFlags();

struct BenchDatabase {
  std::unique_ptr<testing::PostgresInstance> server;
  std::string conninfo;  // of the database made on it
};

// A throwaway PostgreSQL with one database `name`; nullopt, with the reason
// on stderr, when either fails.
std::optional<BenchDatabase> StartDatabase(const std::string& name,
                                           const testing::PostgresInstanceOptions& options = {});

// A bench program's main: its flags (common/flags.h: dashes, underscores as
// an alias, --help), then run's exit status.
int Main(int argc, char** argv, absl::string_view usage, int (*run)());

}  // namespace normsweep::bench

#endif  // NORMSWEEP_TESTS_BENCH_BENCH_SETUP_H_
