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
#include "tests/common/postgres_instance.h"
#include "tests/common/scheduler_process.h"
#include "tests/common/subprocess.h"
#include "tests/common/test_certificates.h"

namespace normsweep {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kToken[] = "tls processes token";

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TlsProcessesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("NORMSWEEP_BINARY_DIR");
    ASSERT_NE(bin, nullptr) << "run under ctest (NORMSWEEP_BINARY_DIR)";
    bin_ = bin;
    auto pg = testing::SharedPostgres();
    ASSERT_TRUE(pg.ok()) << pg.status();
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    auto conninfo = (*pg)->CreateDatabase(absl::AsciiStrToLower(name));
    ASSERT_TRUE(conninfo.ok()) << conninfo.status();
    conninfo_ = *conninfo;
    dir_ = absl::StrCat((*pg)->dir(), "/", name);
    ASSERT_EQ(std::system(absl::StrCat("mkdir -p '", dir_, "'").c_str()), 0);
    auto certs = testing::MakeTestCertificates(dir_);
    ASSERT_TRUE(certs.ok()) << certs.status();
    certs_ = *certs;
    // Every child inherits the token (the scheduler requires it, the
    // worker and the CLI send it).
    setenv("NORMSWEEP_API_TOKEN", kToken, 1);
  }
  void TearDown() override {
    unsetenv("NORMSWEEP_API_TOKEN");
    if (HasFailure()) {
      for (const char* log : {"scheduler.log", "worker.log", "cli.log"}) {
        std::printf("---- %s ----\n%s\n", log, Read(dir_ + "/" + log).c_str());
      }
    }
  }

  // Runs the CLI to its end; its output goes to cli.log.
  int Cli(std::vector<std::string> args, int port) {
    args.insert(args.begin(), bin_ + "/client/normsweep");
    args.push_back(absl::StrCat("--scheduler=127.0.0.1:", port));
    auto cli = testing::Subprocess::Start(args, {}, dir_ + "/cli.log");
    EXPECT_TRUE(cli.ok()) << cli.status();
    return cli.ok() ? cli->Wait(120) : -1;
  }

  std::string bin_, conninfo_, dir_;
  testing::TestCertificates certs_;
};

TEST_F(TlsProcessesTest, WorkerAndCliRunASweepOverMutualTls) {
  auto scheduler = testing::StartScheduler(
      bin_, conninfo_, dir_,
      {"--tls_cert=" + certs_.server_cert, "--tls_key=" + certs_.server_key, "--tls_client_ca=" + certs_.ca});
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  const std::string log = Read(dir_ + "/scheduler.log");
  EXPECT_THAT(log, HasSubstr("mutual TLS (certificate " + certs_.server_cert));
  EXPECT_THAT(log, HasSubstr("API token required"));
  EXPECT_THAT(log, Not(HasSubstr("WARNING")));
  EXPECT_THAT(log, Not(HasSubstr("PRIVATE KEY")));

  auto worker = testing::Subprocess::Start(
      {bin_ + "/worker/normsweep-worker", absl::StrCat("--scheduler=localhost:", scheduler->grpc_port),
       "--name=tls-worker", "--cpu-slots=1", "--threads-per-slot=1", "--trainer=" + bin_ + "/trainer/normsweep-train",
       "--work-dir=" + dir_ + "/work"},
      {{"NORMSWEEP_TLS_CA", certs_.ca}, {"NORMSWEEP_TLS_CERT", certs_.client_cert},
       {"NORMSWEEP_TLS_KEY", certs_.client_key}},
      dir_ + "/worker.log");
  ASSERT_TRUE(worker.ok()) << worker.status();

  const std::vector<std::string> tls = {"--tls-ca", certs_.ca, "--tls-cert", certs_.client_cert, "--tls-key",
                                        certs_.client_key};
  std::vector<std::string> submit = {"submit",        "--name",     "tls",          "--placements", "pre",
                                     "--lrs",         "1e-3",       "--set",        "steps=20",     "--set",
                                     "d_model=16",    "--set",      "heads=2",      "--set",        "layers=1",
                                     "--set",         "seq_len=16", "--set",        "batch_size=4", "--watch"};
  submit.insert(submit.end(), tls.begin(), tls.end());
  EXPECT_EQ(Cli(submit, scheduler->grpc_port), 0);
  EXPECT_THAT(Read(dir_ + "/cli.log"), HasSubstr("completed"));
  EXPECT_THAT(Read(dir_ + "/worker.log"), HasSubstr("(mutual TLS (CA " + certs_.ca));

  // Without TLS, or with the CA but no client certificate: unreachable (exit 1).
  EXPECT_EQ(Cli({"list"}, scheduler->grpc_port), 1);
  EXPECT_EQ(Cli({"list", "--tls-ca", certs_.ca}, scheduler->grpc_port), 1);
  // A missing file: a usage error naming the flag and the path (exit 2).
  EXPECT_EQ(Cli({"list", "--tls-ca", dir_ + "/missing.pem"}, scheduler->grpc_port), 2);
  EXPECT_THAT(Read(dir_ + "/cli.log"), HasSubstr("--tls-ca: CA certificate " + dir_ + "/missing.pem: cannot read"));

  EXPECT_EQ(worker->Stop(SIGTERM), 0);
  EXPECT_EQ(scheduler->process.Stop(SIGTERM), 0);
}

TEST_F(TlsProcessesTest, ATokenWithoutTlsIsAWarning) {
  auto scheduler = testing::StartScheduler(bin_, conninfo_, dir_);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  EXPECT_THAT(Read(dir_ + "/scheduler.log"),
              HasSubstr("WARNING: an API token is set but TLS is off: the token travels in the clear"));
  EXPECT_EQ(scheduler->process.Stop(SIGTERM), 0);
}

TEST_F(TlsProcessesTest, BadTlsFilesStopTheScheduler) {
  // The key of another certificate: exit 2 at start, naming both files.
  auto p = testing::Subprocess::Start({bin_ + "/scheduler/normsweep-scheduler", "--port=0",
                                       "--tls_cert=" + certs_.server_cert, "--tls_key=" + certs_.client_key},
                                      {{"NORMSWEEP_DATABASE_URL", conninfo_}}, dir_ + "/scheduler.log");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->Wait(30), 2);
  const std::string log = Read(dir_ + "/scheduler.log");
  EXPECT_THAT(log, HasSubstr("--tls_key: private key " + certs_.client_key + " is not the key of --tls_cert: "
                             "certificate " + certs_.server_cert));
  EXPECT_THAT(log, Not(HasSubstr("BEGIN")));
}

}  // namespace
}  // namespace normsweep
