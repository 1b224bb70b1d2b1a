// `normsweep COMMAND --help` for every command, as a user runs it: the
// command's own usage on stdout, exit status 0, no scheduler needed (none
// is reachable here); `normsweep --help` every command's; a misspelt
// command a "did you mean".
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cli_usage.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/read_file.h"

namespace normsweep::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

struct Output {
  int exit_code = -1;
  std::string out;
  std::string err;
};

class CliHelpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("NORMSWEEP_BINARY_DIR");
    ASSERT_NE(bin, nullptr) << "run under ctest (NORMSWEEP_BINARY_DIR)";
    cli_ = absl::StrCat(bin, "/client/normsweep");
    char dir[] = "/tmp/cli_help_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    std::remove((dir_ + "/out").c_str());
    std::remove((dir_ + "/err").c_str());
    rmdir(dir_.c_str());
  }

  // The CLI with args (words without quotes or spaces), stdout and stderr
  // apart; a scheduler address where nothing listens.
  Output Run(const std::string& args) {
    const std::string command = absl::StrCat("NORMSWEEP_SCHEDULER=127.0.0.1:1 ", cli_, " ", args, " >", dir_,
                                             "/out 2>", dir_, "/err");
    const int status = std::system(command.c_str());
    Output o;
    o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    o.out = testing::ReadFile(dir_ + "/out");
    o.err = testing::ReadFile(dir_ + "/err");
    return o;
  }

  std::string cli_;
  std::string dir_;
};

TEST_F(CliHelpTest, EveryCommandPrintsItsOwnUsage) {
  const std::vector<std::string> commands = CommandNames();
  EXPECT_THAT(commands, ::testing::ElementsAre("submit", "watch", "list", "show", "trial", "cancel", "results",
                                               "report", "export", "workers"));
  for (const std::string& command : commands) {
    // --help anywhere after the command, with or without its arguments.
    for (const std::string& args : {command + " --help", command + " 12 --help", command + " --help=1"}) {
      const Output o = Run(args);
      EXPECT_EQ(o.exit_code, 0) << args << ": " << o.err;
      EXPECT_EQ(o.out, *CommandUsage(command)) << args;
      EXPECT_EQ(o.err, "") << args;
    }
    const std::string usage = *CommandUsage(command);
    EXPECT_THAT(usage, StartsWith("Usage:\n  normsweep " + command + " ")) << command;
    EXPECT_THAT(usage, HasSubstr("Flags for every command:\n  --scheduler HOST:PORT")) << command;
    for (const std::string& other : commands) {
      if (other != command) {
        EXPECT_THAT(usage, Not(HasSubstr("normsweep " + other + " "))) << command;
      }
    }
  }
  EXPECT_EQ(CommandUsage("nope"), std::nullopt);
}

TEST_F(CliHelpTest, HelpAloneListsEveryCommand) {
  const Output o = Run("--help");
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.out, FullUsage());
  for (const std::string& command : CommandNames()) {
    EXPECT_THAT(o.out, HasSubstr("\n  normsweep " + command + " ")) << command;
  }
  // No command at all: the usage on stderr, exit status 2.
  const Output none = Run("");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(none.out, "");
  EXPECT_EQ(none.err, FullUsage());
}

TEST_F(CliHelpTest, AMisspeltCommandGetsTheClosest) {
  Output o = Run("sumbit x.yaml");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.err, HasSubstr("normsweep: unknown command 'sumbit'; did you mean 'submit'?\n"));
  o = Run("sumbit --help");  // not a command: no usage of its own
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.err, HasSubstr("unknown command 'sumbit'; did you mean 'submit'?"));
  o = Run("frobnicate");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.err, HasSubstr("unknown command 'frobnicate'\n"));
}

// Bad values of trial's flags are usage errors, before any call.
TEST_F(CliHelpTest, TrialEveryAndTailTakePositiveIntegers) {
  for (const std::string flag : {"--every 0", "--tail -3", "--every x", "--tail 1.5"}) {
    const Output o = Run("trial 5 " + flag);
    EXPECT_EQ(o.exit_code, 2) << flag << ": " << o.err;
    EXPECT_THAT(o.err, HasSubstr("trial: --" + flag.substr(2, flag.find(' ') - 2) + ": expected a positive integer, "
                                 "got '" + flag.substr(flag.find(' ') + 1) + "'"));
  }
}

}  // namespace
}  // namespace normsweep::client
