// TLS over real gRPC, with throwaway certificates (tests/common/test_certificates.h):
// the scheduler server in process on the in-memory store, and the real
// clients (the CLI's SweepClient, the worker's GrpcSchedulerClient) with the
// credentials common/tls.h makes. A TLS scheduler serves clients that trust
// its CA and refuses plaintext clients and clients trusting another CA; with
// a client CA it refuses clients without a certificate or with one that CA
// did not sign; the API token is still required over TLS.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <stdlib.h>

#include "absl/strings/str_cat.h"
#include "client/sweep_client.h"
#include "common/clock.h"
#include "common/tls.h"
#include "db/memory_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "normsweep/v1/sweep_service.grpc.pb.h"
#include "scheduler/scheduler_server.h"
#include "tests/common/grpc_health.h"
#include "tests/common/test_certificates.h"
#include "worker/scheduler_client.h"

namespace normsweep::scheduler {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "tls test token";

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char dir[] = "/tmp/normsweep-tls-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = new std::string(dir);
    auto certs = testing::MakeTestCertificates(*dir_);
    ASSERT_TRUE(certs.ok()) << certs.status();
    certs_ = new testing::TestCertificates(*certs);
  }
  static void TearDownTestSuite() {
    if (dir_ != nullptr) std::system(("rm -rf '" + *dir_ + "'").c_str());
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  // client_ca: mutual TLS.
  void StartServer(bool mutual, const std::string& token = "") {
    TlsServerOptions tls;
    tls.cert = {certs_->server_cert, "--tls_cert"};
    tls.key = {certs_->server_key, "--tls_key"};
    if (mutual) tls.client_ca = {certs_->ca, "--tls_client_ca"};
    auto credentials = MakeServerCredentials(tls);
    ASSERT_TRUE(credentials.ok()) << credentials.status();
    SchedulerServerOptions options;
    options.grpc_address = "127.0.0.1:0";
    options.metrics_address = "";
    options.api_token = token;
    options.credentials = *credentials;
    auto server = SchedulerServer::Start(store_, RealClock::Get(), options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    address_ = absl::StrCat("127.0.0.1:", server_->grpc_port());
  }

  static std::shared_ptr<grpc::ChannelCredentials> Client(const std::string& ca, const std::string& cert = "",
                                                          const std::string& key = "") {
    TlsClientOptions tls;
    tls.ca = {ca, "--tls-ca"};
    tls.cert = {cert, "--tls-cert"};
    tls.key = {key, "--tls-key"};
    auto credentials = MakeChannelCredentials(tls);
    EXPECT_TRUE(credentials.ok()) << credentials.status();
    return credentials.ok() ? *credentials : nullptr;
  }

  // One ListSweeps through the CLI's client.
  absl::Status List(std::shared_ptr<grpc::ChannelCredentials> credentials, const std::string& address,
                    const std::string& token = "") {
    client::SweepClient cli(address, absl::Seconds(10), token, std::move(credentials));
    return cli.ListSweeps(v1::SWEEP_STATE_UNSPECIFIED).status();
  }

  static v1::SweepSpec Spec() {
    v1::SweepSpec s;
    s.set_name("tls");
    s.mutable_base()->set_d_model(32);
    s.mutable_base()->set_heads(2);
    s.mutable_base()->set_steps(10);
    s.add_placements("pre");
    s.add_warmup_steps(0);
    s.add_peak_lrs(1e-3);
    s.add_seeds(0);
    return s;
  }

  static std::string* dir_;
  static testing::TestCertificates* certs_;
  db::MemoryStore store_;
  std::unique_ptr<SchedulerServer> server_;
  std::string address_;
};

std::string* TlsTest::dir_ = nullptr;
testing::TestCertificates* TlsTest::certs_ = nullptr;

TEST_F(TlsTest, TheRealClientsWorkOverTls) {
  StartServer(/*mutual=*/false);
  client::SweepClient cli(address_, absl::Seconds(10), "", Client(certs_->ca));
  auto submitted = cli.Submit(Spec(), "tls-test", false);
  ASSERT_TRUE(submitted.ok()) << submitted.status();

  worker::GrpcSchedulerClient worker(address_, absl::Seconds(10), "", Client(certs_->ca));
  v1::RegisterWorkerRequest reg;
  reg.set_name("w1");
  reg.add_devices("cpu");
  auto registered = worker.RegisterWorker(reg);
  ASSERT_TRUE(registered.ok()) << registered.status();
  v1::LeaseTrialRequest lease;
  lease.set_worker_id(registered->worker_id());
  auto leased = worker.LeaseTrial(lease);
  ASSERT_TRUE(leased.ok()) << leased.status();
  ASSERT_TRUE(leased->leased());
  // The progress stream too.
  v1::ReportProgressRequest progress;
  progress.set_worker_id(registered->worker_id());
  progress.set_trial_id(leased->trial().id());
  progress.set_attempt(leased->trial().attempts());
  progress.add_points()->set_step(1);
  auto reported = worker.ReportProgress(progress);
  EXPECT_TRUE(reported.ok()) << reported.status();

  // By name as well as by address (the certificate has both).
  EXPECT_TRUE(List(Client(certs_->ca), absl::StrCat("localhost:", server_->grpc_port())).ok());
}

TEST_F(TlsTest, APlaintextClientIsRefused) {
  StartServer(/*mutual=*/false);
  const absl::Status s = List(nullptr, address_);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  // Health checking is no exception.
  std::string bytes;
  EXPECT_FALSE(testing::CallHealthCheck(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()), &bytes).ok());
}

TEST_F(TlsTest, AClientTrustingAnotherCaIsRefused) {
  StartServer(/*mutual=*/false);
  const absl::Status s = List(Client(certs_->other_ca), address_);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  // The worker's client too, which waits for a connection first: it still
  // fails within its deadline, as UNAVAILABLE with gRPC's reason.
  worker::GrpcSchedulerClient worker(address_, absl::Seconds(2), "", Client(certs_->other_ca));
  v1::RegisterWorkerRequest reg;
  reg.set_name("w1");
  const absl::Status w = worker.RegisterWorker(reg).status();
  EXPECT_EQ(w.code(), absl::StatusCode::kUnavailable) << w;
  EXPECT_TRUE(worker::IsRetryable(w)) << w;
}

TEST_F(TlsTest, MutualTlsRequiresAClientCertificateFromItsCa) {
  StartServer(/*mutual=*/true);
  EXPECT_EQ(List(Client(certs_->ca), address_).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(List(Client(certs_->ca, certs_->other_client_cert, certs_->other_client_key), address_).code(),
            absl::StatusCode::kUnavailable);
  const absl::Status ok = List(Client(certs_->ca, certs_->client_cert, certs_->client_key), address_);
  EXPECT_TRUE(ok.ok()) << ok;

  worker::GrpcSchedulerClient worker(address_, absl::Seconds(10), "",
                                     Client(certs_->ca, certs_->client_cert, certs_->client_key));
  v1::RegisterWorkerRequest reg;
  reg.set_name("w1");
  auto registered = worker.RegisterWorker(reg);
  EXPECT_TRUE(registered.ok()) << registered.status();
}

TEST_F(TlsTest, TheTokenIsStillRequiredOverTls) {
  StartServer(/*mutual=*/false, kToken);
  const absl::Status without = List(Client(certs_->ca), address_);
  EXPECT_EQ(without.code(), absl::StatusCode::kUnauthenticated) << without;
  EXPECT_EQ(List(Client(certs_->ca), address_, "wrong").code(), absl::StatusCode::kUnauthenticated);
  const absl::Status with = List(Client(certs_->ca), address_, kToken);
  EXPECT_TRUE(with.ok()) << with;
  worker::GrpcSchedulerClient worker(address_, absl::Seconds(10), "", Client(certs_->ca));
  v1::RegisterWorkerRequest reg;
  reg.set_name("w1");
  EXPECT_EQ(worker.RegisterWorker(reg).status().code(), absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace normsweep::scheduler
