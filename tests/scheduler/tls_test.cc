// TLS over real gRPC, with throwaway certificates (tests/common/test_certificates.h):
// the scheduler server in process on the in-memory store, and the real
// clients (the CLI's SweepClient, the worker's GrpcSchedulerClient) with the
// credentials common/tls.h makes. A TLS scheduler serves clients that trust
// its CA and refuses plaintext clients and clients trusting another CA; with
// a client CA it refuses clients without a certificate or with one that CA
// did not sign; the API token is still required over TLS. Under mutual TLS a
// token roles file's cn: line gives a client certificate its role.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <stdlib.h>

#include "absl/strings/str_cat.h"
#include "client/sweep_client.h"
#include "common/clock.h"
#include "common/tls.h"
#include "common/token_roles.h"
#include "db/memory_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "normsweep/v1/sweep_service.grpc.pb.h"
#include "scheduler/scheduler_server.h"
#include "tests/common/grpc_health.h"
#include "tests/common/certificates_test.h"
#include "tests/common/in_process_scheduler.h"
#include "tests/common/requests.h"
#include "worker/scheduler_client.h"

namespace normsweep::scheduler {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "tls test token";

class TlsTest : public testing::WithTestCertificates<testing::InProcessSchedulerTest> {
 protected:
  // mutual: with a client CA (mutual TLS).
  // roles: a token roles file's text ("": none).
  void StartServer(bool mutual, const std::string& token = "", const std::string& roles = "") {
    TlsServerOptions tls;
    tls.cert = {certs_->server_cert, "--tls-cert"};
    tls.key = {certs_->server_key, "--tls-key"};
    if (mutual) tls.client_ca = {certs_->ca, "--tls-client-ca"};
    auto credentials = MakeServerCredentials(tls);
    ASSERT_TRUE(credentials.ok()) << credentials.status();
    SchedulerServerOptions options = testing::LoopbackServerOptions();
    options.api_token = token;
    options.credentials = *credentials;
    if (!roles.empty()) {
      absl::StatusOr<TokenRoles> parsed = TokenRoles::Parse(roles, "roles.txt");
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      options.token_roles = std::make_shared<const TokenRoles>(*std::move(parsed));
    }
    testing::InProcessSchedulerTest::StartServer(options);
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

  static v1::SweepSpec Spec() { return testing::OneTrialSpec("tls"); }

};

TEST_F(TlsTest, TheRealClientsWorkOverTls) {
  StartServer(/*mutual=*/false);
  client::SweepClient cli(address_, absl::Seconds(10), "", Client(certs_->ca));
  auto submitted = cli.Submit(Spec(), "tls-test", false);
  ASSERT_TRUE(submitted.ok()) << submitted.status();

  worker::GrpcSchedulerClient worker(address_, absl::Seconds(10), "", Client(certs_->ca));
  int64_t worker_id = 0;
  auto leased = testing::RegisterAndLease(worker, &worker_id);
  ASSERT_TRUE(leased.ok()) << leased.status();
  ASSERT_TRUE(leased->leased());
  // The progress stream too.
  v1::ReportProgressRequest progress = testing::ProgressOf(worker_id, leased->trial());
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

// The client certificate's subject is /CN=normsweep test client
// (tests/common/test_certificates.cc).
TEST_F(TlsTest, ACommonNameLineGivesTheClientCertificateItsRole) {
  const std::string roles = absl::StrCat("ci read cn:normsweep test client\nalice submit ", Sha256Hex("alice's token"),
                                         "\n");
  ASSERT_NO_FATAL_FAILURE(StartServer(/*mutual=*/true, "", roles));
  auto credentials = Client(certs_->ca, certs_->client_cert, certs_->client_key);
  client::SweepClient certificate_only(address_, absl::Seconds(10), "", credentials);
  const absl::Status listed = certificate_only.ListSweeps(v1::SWEEP_STATE_UNSPECIFIED).status();
  EXPECT_TRUE(listed.ok()) << listed;
  const absl::Status denied = certificate_only.Submit(Spec(), "cn-1", false).status();
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied) << denied;
  EXPECT_THAT(std::string(denied.message()), HasSubstr("SubmitSweep needs the 'submit' role; 'ci' has 'read'"));
  worker::GrpcSchedulerClient worker(address_, absl::Seconds(10), "", credentials);
  v1::RegisterWorkerRequest reg;
  reg.set_name("w1");
  EXPECT_EQ(worker.RegisterWorker(reg).status().code(), absl::StatusCode::kPermissionDenied);

  // A token, when sent, decides: its own role and name, and an unknown one
  // is refused even with a known certificate.
  client::SweepClient with_token(address_, absl::Seconds(10), "alice's token", credentials);
  auto submitted = with_token.Submit(Spec(), "cn-1", false);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(submitted->sweep().submitted_by(), "alice");
  client::SweepClient unknown(address_, absl::Seconds(10), "nobody's token", credentials);
  EXPECT_EQ(unknown.ListSweeps(v1::SWEEP_STATE_UNSPECIFIED).status().code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(TlsTest, ACertificateWithoutALineIsUnauthenticated) {
  ASSERT_NO_FATAL_FAILURE(StartServer(/*mutual=*/true, "", "ci read cn:normsweep test someone else\n"));
  client::SweepClient cli(address_, absl::Seconds(10), "", Client(certs_->ca, certs_->client_cert, certs_->client_key));
  const absl::Status s = cli.ListSweeps(v1::SWEEP_STATE_UNSPECIFIED).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("client certificate CN 'normsweep test client' has no line"));
}

TEST_F(TlsTest, ACommonNameCountsOnlyUnderMutualTls) {
  // Without a client CA the server asks for no certificate: none is seen.
  ASSERT_NO_FATAL_FAILURE(StartServer(/*mutual=*/false, "", "ci submit cn:normsweep test client\n"));
  client::SweepClient cli(address_, absl::Seconds(10), "", Client(certs_->ca, certs_->client_cert, certs_->client_key));
  const absl::Status s = cli.ListSweeps(v1::SWEEP_STATE_UNSPECIFIED).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("requires an API token"));
}

}  // namespace
}  // namespace normsweep::scheduler
