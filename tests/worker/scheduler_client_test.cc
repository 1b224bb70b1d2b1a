// GrpcSchedulerClient against a stand-in WorkerService on a loopback port:
// an UNAVAILABLE answer carrying the scheduler's "database unavailable"
// trailing metadata is told apart from a plain UNAVAILABLE, on unary calls
// and on the progress stream.
#include "worker/scheduler_client.h"

#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "gtest/gtest.h"
#include "normsweep/v1/worker_service.grpc.pb.h"

namespace normsweep::worker {
namespace {

// Heartbeat and StreamProgress: UNAVAILABLE with the database's metadata (as
// scheduler/grpc_services.cc answers while its database is down);
// FinishTrial: UNAVAILABLE without it.
class DatabaseDownService final : public v1::WorkerService::Service {
 public:
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest*, v1::HeartbeatResponse*) override {
    return DatabaseDown(ctx);
  }
  grpc::Status StreamProgress(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::ReportProgressResponse, v1::ReportProgressRequest>* stream) override {
    v1::ReportProgressRequest request;
    stream->Read(&request);
    return DatabaseDown(ctx);
  }
  grpc::Status FinishTrial(grpc::ServerContext*, const v1::FinishTrialRequest*, v1::FinishTrialResponse*) override {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
  }

 private:
  static grpc::Status DatabaseDown(grpc::ServerContext* ctx) {
    ctx->AddTrailingMetadata(kDatabaseUnavailableKey, "1");
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the scheduler cannot reach its database right now");
  }
};

class SchedulerClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    client_ = std::make_unique<GrpcSchedulerClient>(absl::StrCat("127.0.0.1:", port_));
  }
  void TearDown() override {
    client_.reset();
    server_->Shutdown();
  }

  DatabaseDownService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<GrpcSchedulerClient> client_;
};

TEST_F(SchedulerClientTest, DatabaseUnavailableIsToldApartFromAPlainUnavailable) {
  absl::StatusOr<v1::HeartbeatResponse> heartbeat = client_->Heartbeat(v1::HeartbeatRequest());
  ASSERT_TRUE(absl::IsUnavailable(heartbeat.status())) << heartbeat.status();
  EXPECT_TRUE(IsDatabaseUnavailable(heartbeat.status())) << heartbeat.status();
  EXPECT_EQ(heartbeat.status().message(), "the scheduler cannot reach its database right now");
  EXPECT_TRUE(IsRetryable(heartbeat.status()));

  absl::StatusOr<v1::ReportProgressResponse> progress = client_->ReportProgress(v1::ReportProgressRequest());
  ASSERT_TRUE(absl::IsUnavailable(progress.status())) << progress.status();
  EXPECT_TRUE(IsDatabaseUnavailable(progress.status())) << progress.status();

  absl::StatusOr<v1::FinishTrialResponse> finish = client_->FinishTrial(v1::FinishTrialRequest());
  ASSERT_TRUE(absl::IsUnavailable(finish.status())) << finish.status();
  EXPECT_FALSE(IsDatabaseUnavailable(finish.status())) << finish.status();
}

TEST(DatabaseUnavailableErrorTest, MarkedUnavailableOnly) {
  EXPECT_TRUE(IsDatabaseUnavailable(DatabaseUnavailableError("down")));
  EXPECT_EQ(DatabaseUnavailableError("down").message(), "down");
  EXPECT_FALSE(IsDatabaseUnavailable(absl::UnavailableError("down")));
  EXPECT_FALSE(IsDatabaseUnavailable(absl::OkStatus()));
}

}  // namespace
}  // namespace normsweep::worker
