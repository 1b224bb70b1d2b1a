#include "tests/common/served_store_test.h"

#include <utility>

#include "tests/common/fresh_database.h"

namespace normsweep::testing {

void ServedStoreTest::SetUp() {
  ASSERT_NO_FATAL_FAILURE(ProcessTest::SetUp());
  auto opened = OpenStore(conninfo_);
  ASSERT_TRUE(opened.ok()) << opened.status();
  store_ = *std::move(opened);
  ASSERT_NO_FATAL_FAILURE(WriteRows());
  scheduler_ = StartScheduler();
  ASSERT_NE(scheduler_, nullptr);
}

CommandResult ServedStoreTest::Cli(const std::vector<std::string>& args) {
  return ProcessTest::Cli(args, {{"NORMSWEEP_SCHEDULER", scheduler_->address()}}, cli_timeout_s_);
}

CommandResult ServedStoreTest::Run(const std::vector<std::string>& argv) {
  return ProcessTest::Run(argv, {{"NORMSWEEP_SCHEDULER", scheduler_->address()}}, cli_timeout_s_);
}

}  // namespace normsweep::testing
