// The token roles file with the real normsweep-scheduler: it is read at
// start (a bad one stops the scheduler, naming the line), read again on
// SIGHUP without a restart (the next calls see the new callers), and a bad
// file on SIGHUP leaves the callers as they were, with the reason in the
// log. The test waits for the log line that says the reload is in force.
#include <signal.h>
#include <stdlib.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/sweep_client.h"
#include "common/token_roles.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/in_process_scheduler.h"
#include "tests/common/process_test.h"
#include "tests/common/read_file.h"

namespace normsweep {
namespace {

using ::testing::HasSubstr;
using testing::ReadFile;

constexpr char kAlice[] = "alice's submit token";
constexpr char kBob[] = "bob's read token";

class TokenRolesReloadTest : public testing::ProcessTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(ProcessTest::SetUp());
    roles_ = dir_ + "/roles.txt";
  }

  // Replaced at once (rename), as a ConfigMap's update is.
  void WriteRoles(const std::string& text) {
    const std::string tmp = roles_ + ".tmp";
    std::ofstream(tmp) << text;
    ASSERT_EQ(std::rename(tmp.c_str(), roles_.c_str()), 0);
  }

  // Waits until the scheduler's log holds text (at most 30 s).
  bool WaitForLog(const std::string& text) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (ReadFile(dir_ + "/scheduler.log").find(text) == std::string::npos) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(5));  // a poll of the condition, not a wait for time to pass
    }
    return true;
  }

  absl::StatusCode List(const testing::SchedulerProcess& scheduler, const std::string& token) {
    client::SweepClient cli(scheduler.address(), absl::Seconds(10), token);
    return cli.ListSweeps(v1::SWEEP_STATE_UNSPECIFIED).status().code();
  }

  std::string roles_;
};

TEST_F(TokenRolesReloadTest, SighupReadsTheFileAgainAndABadOneKeepsTheCallers) {
  ASSERT_NO_FATAL_FAILURE(WriteRoles(absl::StrCat("alice submit ", Sha256Hex(kAlice), "\n")));
  testing::SchedulerProcess* scheduler = StartScheduler({"--token-roles-file=" + roles_});
  ASSERT_NE(scheduler, nullptr);
  EXPECT_THAT(ReadFile(dir_ + "/scheduler.log"), HasSubstr("token roles file " + roles_ + " (1 token, 0 certificate names)"));
  EXPECT_EQ(List(*scheduler, kAlice), absl::StatusCode::kOk);
  EXPECT_EQ(List(*scheduler, kBob), absl::StatusCode::kUnauthenticated);

  // alice goes, bob comes, with read only.
  ASSERT_NO_FATAL_FAILURE(WriteRoles(absl::StrCat("# rotated\nbob read ", Sha256Hex(kBob), "\n")));
  ASSERT_EQ(kill(scheduler->process.pid(), SIGHUP), 0);
  ASSERT_TRUE(WaitForLog("SIGHUP: token roles file " + roles_ + " reloaded (1 token, 0 certificate names)"));
  EXPECT_EQ(List(*scheduler, kBob), absl::StatusCode::kOk);
  EXPECT_EQ(List(*scheduler, kAlice), absl::StatusCode::kUnauthenticated);
  client::SweepClient bob(scheduler->address(), absl::Seconds(10), kBob);
  const absl::Status submit = bob.Submit(testing::OneTrialSpec("reload"), "reload-1", false).status();
  EXPECT_EQ(submit.code(), absl::StatusCode::kPermissionDenied) << submit;

  // A file that does not parse: the callers stay, the log says why.
  ASSERT_NO_FATAL_FAILURE(WriteRoles(absl::StrCat("bob read ", Sha256Hex(kBob), "\nalice\n")));
  ASSERT_EQ(kill(scheduler->process.pid(), SIGHUP), 0);
  ASSERT_TRUE(WaitForLog("SIGHUP: the token roles file was not reloaded, the callers stay as they were: " + roles_ +
                         ":2: expected NAME ROLE SHA256HEX"));
  EXPECT_EQ(List(*scheduler, kBob), absl::StatusCode::kOk);
  EXPECT_EQ(List(*scheduler, kAlice), absl::StatusCode::kUnauthenticated);

  EXPECT_EQ(scheduler->process.Stop(SIGTERM), 0);
}

TEST_F(TokenRolesReloadTest, ABadFileAtStartStopsTheSchedulerNamingTheLine) {
  ASSERT_NO_FATAL_FAILURE(WriteRoles(absl::StrCat("# callers\nalice admin ", Sha256Hex(kAlice), "\n")));
  // The underscore spellings of earlier releases are still accepted (an
  // alias, common/flags.h); messages use the dashed one.
  auto p = testing::Subprocess::Start(
      {bin_ + "/scheduler/normsweep-scheduler", "--port=0", "--metrics_port=-1", "--token_roles_file=" + roles_},
      {{"NORMSWEEP_DATABASE_URL", conninfo_}}, dir_ + "/scheduler.log");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->Wait(30), 2);
  EXPECT_THAT(ReadFile(dir_ + "/scheduler.log"),
              HasSubstr("--token-roles-file: " + roles_ + ":2: role 'admin' is not read, submit or worker"));
}

TEST_F(TokenRolesReloadTest, TheVariableNamesTheFileAndTheSharedTokenStillOpensEverything) {
  ASSERT_NO_FATAL_FAILURE(WriteRoles(absl::StrCat("bob read ", Sha256Hex(kBob), "\n")));
  setenv("NORMSWEEP_TOKEN_ROLES_FILE", roles_.c_str(), 1);
  setenv("NORMSWEEP_API_TOKEN", "the shared token", 1);
  testing::SchedulerProcess* scheduler = StartScheduler();
  unsetenv("NORMSWEEP_TOKEN_ROLES_FILE");
  unsetenv("NORMSWEEP_API_TOKEN");
  ASSERT_NE(scheduler, nullptr);
  EXPECT_THAT(ReadFile(dir_ + "/scheduler.log"), HasSubstr("API token required, token roles file " + roles_));
  EXPECT_EQ(List(*scheduler, kBob), absl::StatusCode::kOk);
  EXPECT_EQ(List(*scheduler, ""), absl::StatusCode::kUnauthenticated);
  client::SweepClient shared(scheduler->address(), absl::Seconds(10), "the shared token");
  auto submitted = shared.Submit(testing::OneTrialSpec("shared"), "shared-1", false);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  client::SweepClient bob(scheduler->address(), absl::Seconds(10), kBob);
  EXPECT_EQ(bob.CancelSweep(submitted->sweep().id()).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(scheduler->process.Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace normsweep
