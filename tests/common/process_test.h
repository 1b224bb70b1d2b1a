// The base of tests that run our binaries as a user does (normsweep-scheduler,
// normsweep-worker, normsweep-train, the normsweep CLI): the build's binary
// and source dirs (ctest sets them), a fresh database on the shared
// throwaway PostgreSQL, a work dir of the test's own (inside the server's
// temporary directory, removed with it), and the processes started through
// it, stopped when the test ends (workers first, then schedulers). When the
// test failed, or NORMSWEEP_TEST_SHOW_LOGS is set, the tails of the *.log
// files in the work dir are printed.
#ifndef NORMSWEEP_TESTS_COMMON_PROCESS_TEST_H_
#define NORMSWEEP_TESTS_COMMON_PROCESS_TEST_H_

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/common/scheduler_process.h"
#include "tests/common/subprocess.h"

namespace normsweep::testing {

struct CommandResult {
  int exit_code = -1;  // 128 + signal when killed; -1 when it ran out of time
  std::string output;  // stdout and stderr
};

class ProcessTest : public ::testing::Test {
 protected:
  // with_database false: no database and no work dir; the test makes its
  // own (a server of its own, e.g. one it crashes) and sets conninfo_, dir_.
  explicit ProcessTest(bool with_database = true) : with_database_(with_database) {}

  void SetUp() override;
  void TearDown() override;

  // normsweep-scheduler against conninfo_ (StartScheduler in
  // scheduler_process.h), logging to dir/scheduler.log (dir: dir_ when
  // empty). Kept until the test ends unless the test stops it. One that does
  // not start fails the test and returns nullptr.
  SchedulerProcess* StartScheduler(const std::vector<std::string>& extra_flags = {}, const std::string& dir = "");

  // normsweep-worker `name` against `scheduler` (an address or a gRPC
  // target) with cpu_slots slots of one thread each, the built trainer, work
  // dir dir_/name, no /metrics and a 2 s grace period; flags come last and
  // override these; env is added to its environment. Logs to dir_/name.log.
  // A worker that does not start fails the test and returns nullptr.
  Subprocess* StartWorker(const std::string& name, const std::string& scheduler, int cpu_slots = 1,
                          const std::vector<std::string>& flags = {},
                          const std::map<std::string, std::string>& env = {});

  // A program (argv[0] a path) to its end, killed after timeout_s; its
  // output logged to dir_/cli-N.log.
  CommandResult Run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
                    double timeout_s = 120);
  // Run for the normsweep CLI with args.
  CommandResult Cli(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
                    double timeout_s = 120);

  std::string bin_;       // NORMSWEEP_BINARY_DIR
  std::string src_;       // NORMSWEEP_SOURCE_DIR
  std::string conninfo_;  // the test's database
  std::string dir_;       // the test's work dir

 private:
  const bool with_database_;
  int commands_ = 0;
  // Deques: what Start* hands out stays where it is.
  std::deque<SchedulerProcess> started_schedulers_;
  std::deque<Subprocess> started_workers_;
};

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_PROCESS_TEST_H_
