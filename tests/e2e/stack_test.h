// The base of the end-to-end tests: ProcessTest (tests/common/process_test.h)
// with a normsweep-scheduler started for each test, the CLI's own client to
// it, and the normsweep CLI run against it. Header-only.
#ifndef NORMSWEEP_TESTS_E2E_STACK_TEST_H_
#define NORMSWEEP_TESTS_E2E_STACK_TEST_H_

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/sweep_client.h"
#include "tests/common/process_test.h"

namespace normsweep::testing {

class StackTest : public ProcessTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(ProcessTest::SetUp());
    scheduler_ = StartScheduler();
    ASSERT_NE(scheduler_, nullptr);
    client_ = std::make_unique<client::SweepClient>(scheduler_->address());
  }

  // The CLI against this test's scheduler (with_scheduler false: the
  // arguments name one, or none).
  CommandResult Cli(const std::vector<std::string>& args, double timeout_s = 120, bool with_scheduler = true) {
    std::map<std::string, std::string> env;
    if (with_scheduler) env["NORMSWEEP_SCHEDULER"] = scheduler_->address();
    return ProcessTest::Cli(args, env, timeout_s);
  }

  // Writes the sweep YAML to a file of its own and submits it with the CLI;
  // the new sweep's id (0 after a failed expectation).
  int64_t SubmitFile(const std::string& yaml) {
    const std::string path = absl::StrCat(dir_, "/sweep-", ++files_, ".yaml");
    std::ofstream(path) << yaml;
    CommandResult r = Cli({"submit", path});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    int64_t id = 0;
    EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(r.output), &id)) << r.output;
    return id;
  }

  // Waits until every named worker is registered and live.
  bool WaitForLiveWorkers(const std::set<std::string>& names, double timeout_s) {
    const absl::Time deadline = absl::Now() + absl::Seconds(timeout_s);
    while (absl::Now() < deadline) {
      auto workers = client_->ListWorkers(/*live_only=*/true);
      std::set<std::string> live;
      if (workers.ok()) {
        for (const v1::Worker& w : *workers) live.insert(w.name());
      }
      if (std::includes(live.begin(), live.end(), names.begin(), names.end())) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }

  SchedulerProcess* scheduler_ = nullptr;
  std::unique_ptr<client::SweepClient> client_;
  int files_ = 0;  // sweep files SubmitFile wrote
};

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_E2E_STACK_TEST_H_
