// TLS with the real binaries: normsweep-scheduler with mutual TLS and an API
// token (files from flags), a normsweep-worker (files from NORMSWEEP_TLS_*)
// and the normsweep CLI (files from flags) run a sweep to its end; the CLI
// without TLS cannot reach it. A scheduler with a token and no TLS warns at
// start that the token travels in the clear. Logs name the files, never
// their contents.
#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/process_test.h"
#include "tests/common/read_file.h"
#include "tests/common/test_certificates.h"

namespace normsweep {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kToken[] = "tls processes token";

using testing::ReadFile;

class TlsProcessesTest : public testing::ProcessTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(ProcessTest::SetUp());
    auto certs = testing::MakeTestCertificates(dir_);
    ASSERT_TRUE(certs.ok()) << certs.status();
    certs_ = *certs;
    // Every child inherits the token (the scheduler requires it, the
    // worker and the CLI send it).
    setenv("NORMSWEEP_API_TOKEN", kToken, 1);
  }
  void TearDown() override {
    unsetenv("NORMSWEEP_API_TOKEN");
    ProcessTest::TearDown();
  }

  // The CLI against the scheduler on port.
  testing::CommandResult CliAt(std::vector<std::string> args, int port) {
    args.push_back(absl::StrCat("--scheduler=127.0.0.1:", port));
    return Cli(args);
  }

  testing::TestCertificates certs_;
};

TEST_F(TlsProcessesTest, WorkerAndCliRunASweepOverMutualTls) {
  testing::SchedulerProcess* scheduler = StartScheduler(
      {"--tls-cert=" + certs_.server_cert, "--tls-key=" + certs_.server_key, "--tls-client-ca=" + certs_.ca});
  ASSERT_NE(scheduler, nullptr);
  const std::string log = ReadFile(dir_ + "/scheduler.log");
  EXPECT_THAT(log, HasSubstr("mutual TLS (certificate " + certs_.server_cert));
  EXPECT_THAT(log, HasSubstr("API token required"));
  EXPECT_THAT(log, Not(HasSubstr("WARNING")));
  EXPECT_THAT(log, Not(HasSubstr("PRIVATE KEY")));

  testing::Subprocess* worker = StartWorker(
      "tls-worker", absl::StrCat("localhost:", scheduler->grpc_port), 1, {},
      {{"NORMSWEEP_TLS_CA", certs_.ca}, {"NORMSWEEP_TLS_CERT", certs_.client_cert},
       {"NORMSWEEP_TLS_KEY", certs_.client_key}});
  ASSERT_NE(worker, nullptr);

  const std::vector<std::string> tls = {"--tls-ca", certs_.ca, "--tls-cert", certs_.client_cert, "--tls-key",
                                        certs_.client_key};
  std::vector<std::string> submit = {"submit",        "--name",     "tls",          "--placements", "pre",
                                     "--lrs",         "1e-3",       "--set",        "steps=20",     "--set",
                                     "d_model=16",    "--set",      "heads=2",      "--set",        "layers=1",
                                     "--set",         "seq_len=16", "--set",        "batch_size=4", "--watch"};
  submit.insert(submit.end(), tls.begin(), tls.end());
  const testing::CommandResult submitted = CliAt(submit, scheduler->grpc_port);
  EXPECT_EQ(submitted.exit_code, 0);
  EXPECT_THAT(submitted.output, HasSubstr("completed"));
  EXPECT_THAT(ReadFile(dir_ + "/tls-worker.log"), HasSubstr("(mutual TLS (CA " + certs_.ca));

  // Without TLS, or with the CA but no client certificate: unreachable (exit 1).
  EXPECT_EQ(CliAt({"list"}, scheduler->grpc_port).exit_code, 1);
  EXPECT_EQ(CliAt({"list", "--tls-ca", certs_.ca}, scheduler->grpc_port).exit_code, 1);
  // A missing file: a usage error naming the flag and the path (exit 2).
  const testing::CommandResult missing = CliAt({"list", "--tls-ca", dir_ + "/missing.pem"}, scheduler->grpc_port);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.output, HasSubstr("--tls-ca: CA certificate " + dir_ + "/missing.pem: cannot read"));

  EXPECT_EQ(worker->Stop(SIGTERM), 0);
  EXPECT_EQ(scheduler->process.Stop(SIGTERM), 0);
}

TEST_F(TlsProcessesTest, ATokenWithoutTlsIsAWarning) {
  testing::SchedulerProcess* scheduler = StartScheduler();
  ASSERT_NE(scheduler, nullptr);
  EXPECT_THAT(ReadFile(dir_ + "/scheduler.log"),
              HasSubstr("WARNING: an API token is set but TLS is off: the token travels in the clear"));
  EXPECT_EQ(scheduler->process.Stop(SIGTERM), 0);
}

TEST_F(TlsProcessesTest, BadTlsFilesStopTheScheduler) {
  // The key of another certificate: exit 2 at start, naming both files.
  auto p = testing::Subprocess::Start({bin_ + "/scheduler/normsweep-scheduler", "--port=0",
                                       "--tls-cert=" + certs_.server_cert, "--tls-key=" + certs_.client_key},
                                      {{"NORMSWEEP_DATABASE_URL", conninfo_}}, dir_ + "/scheduler.log");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->Wait(30), 2);
  const std::string log = ReadFile(dir_ + "/scheduler.log");
  EXPECT_THAT(log, HasSubstr("--tls-key: private key " + certs_.client_key + " is not the key of --tls-cert: "
                             "certificate " + certs_.server_cert));
  EXPECT_THAT(log, Not(HasSubstr("BEGIN")));
}

}  // namespace
}  // namespace normsweep
