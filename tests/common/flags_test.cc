// common/flags.h: dashed names, the underscore alias, bools, values, errors
// and --help, on flags of this test's own.
#include "common/flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_FLAG(int, metrics_port, 9464, "Prometheus /metrics port (-1: off)");
ABSL_FLAG(std::string, tls_client_ca, "", "Mutual TLS: the CA of client certificates");
ABSL_FLAG(bool, keep_trial_dirs, false, "Keep every trial's work dir");
ABSL_FLAG(double, grace_period_s, 30, "Grace period");
ABSL_FLAG(std::vector<std::string>, watch, std::vector<std::string>({"0", "10"}), "Series");

namespace normsweep {
namespace {

class FlagsTest : public ::testing::Test {
 protected:
  absl::StatusOr<ParsedFlags> Parse(std::vector<std::string> args) {
    args.insert(args.begin(), "/usr/bin/program");
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    return ParseFlags(static_cast<int>(argv.size()), argv.data());
  }

 private:
  absl::FlagSaver saver_;  // each test starts from the defaults
};

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST_F(FlagsTest, DashedNameIsCanonical) {
  EXPECT_EQ(DashedFlagName("tls_client_ca"), "tls-client-ca");
  EXPECT_EQ(DashedFlagName("port"), "port");
}

TEST_F(FlagsTest, DashesSetTheFlag) {
  ASSERT_TRUE(Parse({"--metrics-port=1234", "--tls-client-ca", "ca.pem", "--grace-period-s=2.5"}).ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_metrics_port), 1234);
  EXPECT_EQ(absl::GetFlag(FLAGS_tls_client_ca), "ca.pem");
  EXPECT_EQ(absl::GetFlag(FLAGS_grace_period_s), 2.5);
}

TEST_F(FlagsTest, UnderscoresAreAnAlias) {
  ASSERT_TRUE(Parse({"--metrics_port=1234", "--tls_client_ca", "ca.pem", "--keep_trial_dirs"}).ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_metrics_port), 1234);
  EXPECT_EQ(absl::GetFlag(FLAGS_tls_client_ca), "ca.pem");
  EXPECT_TRUE(absl::GetFlag(FLAGS_keep_trial_dirs));
}

TEST_F(FlagsTest, AMixedSpellingIsNoFlag) {
  absl::StatusOr<ParsedFlags> parsed = Parse({"--tls-client_ca=ca.pem"});
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("unknown flag --tls-client_ca"));
  EXPECT_EQ(absl::GetFlag(FLAGS_tls_client_ca), "");
}

TEST_F(FlagsTest, ASeparateValueMayStartWithADash) {
  ASSERT_TRUE(Parse({"--metrics-port", "-1"}).ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_metrics_port), -1);
}

TEST_F(FlagsTest, BoolsTakeNoSeparateValue) {
  ASSERT_TRUE(Parse({"--keep-trial-dirs"}).ok());
  EXPECT_TRUE(absl::GetFlag(FLAGS_keep_trial_dirs));
  for (const char* off : {"--nokeep-trial-dirs", "--no-keep-trial-dirs", "--nokeep_trial_dirs", "--keep-trial-dirs=false"}) {
    ASSERT_TRUE(Parse({"--keep-trial-dirs", off}).ok()) << off;
    EXPECT_FALSE(absl::GetFlag(FLAGS_keep_trial_dirs)) << off;
  }
  absl::StatusOr<ParsedFlags> parsed = Parse({"--keep-trial-dirs", "false"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_THAT(parsed->positional, ElementsAre("false"));
}

TEST_F(FlagsTest, ListsAndPositionals) {
  absl::StatusOr<ParsedFlags> parsed = Parse({"first", "--watch=1,2,3", "--", "--metrics-port=1"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(absl::GetFlag(FLAGS_watch), ElementsAre("1", "2", "3"));
  EXPECT_THAT(parsed->positional, ElementsAre("first", "--metrics-port=1"));
  EXPECT_EQ(absl::GetFlag(FLAGS_metrics_port), 9464);
  EXPECT_FALSE(parsed->help);
}

TEST_F(FlagsTest, ErrorsNameTheFlagAsGiven) {
  EXPECT_THAT(Parse({"--metrics-prot=1"}).status().message(), HasSubstr("unknown flag --metrics-prot (see --help)"));
  EXPECT_THAT(Parse({"--metrics_port=abc"}).status().message(), HasSubstr("--metrics_port: invalid value 'abc'"));
  EXPECT_THAT(Parse({"--tls-client-ca"}).status().message(), HasSubstr("--tls-client-ca needs a value"));
  EXPECT_THAT(Parse({"--keep-trial-dirs=maybe"}).status().message(),
              HasSubstr("--keep-trial-dirs: invalid value 'maybe'"));
  // --noNAME turns off a bool only.
  EXPECT_THAT(Parse({"--nometrics-port"}).status().message(), HasSubstr("unknown flag --nometrics-port"));
  // Abseil's own flags are not the program's.
  EXPECT_THAT(Parse({"--flagfile=/dev/null"}).status().message(), HasSubstr("unknown flag --flagfile"));
}

TEST_F(FlagsTest, HelpIsAskedFor) {
  for (const char* help : {"--help", "-h", "--helpfull"}) {
    absl::StatusOr<ParsedFlags> parsed = Parse({"--metrics_port=1", help});
    ASSERT_TRUE(parsed.ok()) << help;
    EXPECT_TRUE(parsed->help) << help;
  }
}

TEST_F(FlagsTest, HelpListsTheProgramsFlagsWithDashes) {
  const std::string help = FlagsHelp("program [flags]");
  EXPECT_THAT(help, AllOf(HasSubstr("program [flags]\n"), HasSubstr("  --metrics-port=9464\n"),
                          HasSubstr("      Prometheus /metrics port (-1: off)\n"), HasSubstr("  --tls-client-ca=\"\"\n"),
                          HasSubstr("  --keep-trial-dirs=false\n"), HasSubstr("  --watch=0,10\n")));
  EXPECT_THAT(help, AllOf(Not(HasSubstr("--metrics_port")), Not(HasSubstr("--tls_client_ca")),
                          Not(HasSubstr("--flagfile")), Not(HasSubstr("--helpfull"))));
  EXPECT_LT(help.find("--grace-period-s"), help.find("--metrics-port"));  // sorted
}

TEST_F(FlagsTest, MainExitsOnHelpAndErrorsOnly) {
  auto for_main = [](std::vector<std::string> args) {
    args.insert(args.begin(), "program");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    return ParseFlagsForMain(static_cast<int>(argv.size()), argv.data(), "program [flags]");
  };
  EXPECT_EQ(for_main({"--metrics-port=1"}), std::nullopt);
  EXPECT_EQ(for_main({"--bogus"}), 2);
  EXPECT_EQ(for_main({"stray"}), 2);
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(for_main({"--help"}), 0);
  EXPECT_THAT(::testing::internal::GetCapturedStdout(), HasSubstr("--metrics-port="));
}

}  // namespace
}  // namespace normsweep
