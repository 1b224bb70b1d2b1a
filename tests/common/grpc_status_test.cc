#include "common/grpc_status.h"

#include "gtest/gtest.h"

namespace normsweep {
namespace {

TEST(GrpcStatusTest, KeepsCodeAndMessageBothWays) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  const std::pair<absl::Status, grpc::StatusCode> cases[] = {
      {absl::InvalidArgumentError("spec.name: required"), grpc::StatusCode::INVALID_ARGUMENT},
      {absl::NotFoundError("sweep_id 7: no such sweep"), grpc::StatusCode::NOT_FOUND},
      {absl::FailedPreconditionError("lease not held"), grpc::StatusCode::FAILED_PRECONDITION},
      {absl::UnavailableError("database"), grpc::StatusCode::UNAVAILABLE},
      {absl::AlreadyExistsError("request_id"), grpc::StatusCode::ALREADY_EXISTS},
      {absl::DeadlineExceededError("timeout"), grpc::StatusCode::DEADLINE_EXCEEDED},
  };
  for (const auto& [status, code] : cases) {
    grpc::Status g = ToGrpcStatus(status);
    EXPECT_EQ(g.error_code(), code);
    EXPECT_EQ(g.error_message(), std::string(status.message()));
    EXPECT_EQ(FromGrpcStatus(g), status);
  }
}

}  // namespace
}  // namespace normsweep
