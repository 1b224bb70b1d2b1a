// The base of tests of the normsweep CLI against a real normsweep-scheduler
// (process_test.h) whose database the test also reaches through the store:
// rows written before the scheduler starts (WriteRows), and read or written
// while it serves them.
#ifndef NORMSWEEP_TESTS_COMMON_SERVED_STORE_TEST_H_
#define NORMSWEEP_TESTS_COMMON_SERVED_STORE_TEST_H_

#include <memory>
#include <string>
#include <vector>

#include "db/store.h"
#include "tests/common/process_test.h"
#include "tests/common/scheduler_process.h"

namespace normsweep::testing {

class ServedStoreTest : public ProcessTest {
 protected:
  // ProcessTest's set-up, store_ on the test's database, WriteRows, then
  // scheduler_ on the same database.
  void SetUp() override;

  // What the test writes through store_ before the scheduler starts;
  // nothing unless overridden. Fatal failures stop the set-up.
  virtual void WriteRows() {}

  // The normsweep CLI with args, or a program (argv), against scheduler_,
  // killed after cli_timeout_s_.
  CommandResult Cli(const std::vector<std::string>& args);
  CommandResult Run(const std::vector<std::string>& argv);

  double cli_timeout_s_ = 120;
  std::unique_ptr<db::Store> store_;
  SchedulerProcess* scheduler_ = nullptr;
};

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_SERVED_STORE_TEST_H_
