// The API token over real gRPC: a scheduler started with one refuses every
// SweepService and WorkerService call (sync, completion-queue and streaming) that
// does not carry it, changes nothing for them, still answers health checks,
// and serves the real clients (the CLI's SweepClient, the worker's
// GrpcSchedulerClient) that are given the token. Tokens with roles:
// token_roles_test.cc.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/sweep_client.h"
#include "common/api_token.h"
#include "common/clock.h"
#include "db/memory_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "normsweep/v1/sweep_service.grpc.pb.h"
#include "normsweep/v1/worker_service.grpc.pb.h"
#include "scheduler/scheduler_server.h"
#include "tests/common/grpc_health.h"
#include "tests/common/in_process_scheduler.h"
#include "worker/scheduler_client.h"

namespace normsweep::scheduler {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "correct horse battery staple";

class ApiTokenTest : public testing::InProcessSchedulerTest {
 protected:
  void SetUp() override {
    SchedulerServerOptions options = testing::LoopbackServerOptions();
    options.api_token = kToken;
    StartServer(options);
  }

  static v1::SubmitSweepRequest Submit() {
    v1::SubmitSweepRequest r;
    r.set_request_id("token-test");
    *r.mutable_spec() = testing::OneTrialSpec("token");
    return r;
  }
};

TEST_F(ApiTokenTest, CallsWithoutTheTokenAreRefusedAndChangeNothing) {
  for (const char* header : {"", "Bearer wrong", "correct horse battery staple"}) {
    grpc::ClientContext ctx;
    if (*header != '\0') ctx.AddMetadata("authorization", header);
    v1::SubmitSweepResponse resp;
    const grpc::Status s = sweeps_->SubmitSweep(&ctx, Submit(), &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << header;
    const char* says = *header == '\0'                          ? "requires an API token"
                       : absl::StartsWith(header, "Bearer ") ? "unknown API token"
                                                             : "is not 'Bearer <API token>'";
    EXPECT_THAT(s.error_message(), HasSubstr(says));
    EXPECT_THAT(s.error_message(), ::testing::Not(HasSubstr(kToken)));
  }
  // The worker's completion-queue calls and the watch stream are guarded too.
  grpc::ClientContext lctx;
  v1::LeaseTrialRequest lease;
  lease.set_worker_id(1);
  v1::LeaseTrialResponse lresp;
  EXPECT_EQ(workers_->LeaseTrial(&lctx, lease, &lresp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext rctx;
  v1::RegisterWorkerRequest reg;
  reg.set_name("w");
  v1::RegisterWorkerResponse rresp;
  EXPECT_EQ(workers_->RegisterWorker(&rctx, reg, &rresp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext wctx;
  v1::WatchSweepRequest watch;
  watch.set_sweep_id(1);
  auto reader = sweeps_->WatchSweep(&wctx, watch);
  v1::WatchSweepEvent event;
  EXPECT_FALSE(reader->Read(&event));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext pctx;
  auto progress = workers_->StreamProgress(&pctx);
  v1::ReportProgressRequest batch;
  batch.set_worker_id(1);
  batch.set_trial_id(1);
  batch.set_attempt(1);
  batch.add_points()->set_step(1);
  progress->Write(batch);
  v1::ReportProgressResponse answer;
  EXPECT_FALSE(progress->Read(&answer));
  EXPECT_EQ(progress->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // Nothing was stored: with the token, there are no sweeps.
  client::SweepClient with_token(address_, absl::Seconds(10), kToken);
  auto listed = with_token.ListSweeps(v1::SWEEP_STATE_UNSPECIFIED);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(listed->empty());
}

TEST_F(ApiTokenTest, TheRealClientsWithTheTokenWork) {
  client::SweepClient cli(address_, absl::Seconds(10), kToken);
  auto submitted = cli.Submit(Submit().spec(), "token-test", false);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  client::SweepClient no_token(address_, absl::Seconds(10));
  auto refused = no_token.GetSweep(submitted->sweep().id());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated);

  worker::GrpcSchedulerClient worker(address_, absl::Seconds(10), kToken);
  int64_t worker_id = 0;
  auto leased = testing::RegisterAndLease(worker, &worker_id);
  ASSERT_TRUE(leased.ok()) << leased.status();
  EXPECT_TRUE(leased->leased());
  v1::LeaseTrialRequest lease;
  lease.set_worker_id(worker_id);
  worker::GrpcSchedulerClient worker_without(address_, absl::Seconds(10));
  EXPECT_EQ(worker_without.LeaseTrial(lease).status().code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(ApiTokenTest, HealthCheckNeedsNoToken) {
  std::string bytes;
  const grpc::Status status = testing::CallHealthCheck(channel_, &bytes);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));  // SERVING
}

}  // namespace
}  // namespace normsweep::scheduler
