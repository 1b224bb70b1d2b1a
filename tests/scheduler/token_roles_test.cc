// Token roles over real gRPC (issue 25): every caller (a read, a submit and
// a worker token from the token roles file, the shared all-roles API token,
// an unknown token, none) against every SweepService and WorkerService
// method, found in the services' descriptors so that a new RPC is covered
// the day it is added. The expected role comes from the issue's rules here,
// not from common/token_roles.cc's table. Also: a denied call changes
// nothing; the sweep records who submitted and who cancelled it; a reload
// takes effect for the next call; health checking and reflection stay open.
#include <google/protobuf/descriptor.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/sweep_client.h"
#include "common/api_token.h"
#include "common/token_roles.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "normsweep/v1/sweep_service.grpc.pb.h"
#include "normsweep/v1/worker_service.grpc.pb.h"
#include "scheduler/scheduler_server.h"
#include "tests/common/grpc_health.h"
#include "tests/common/grpc_reflection.h"
#include "tests/common/in_process_scheduler.h"

namespace normsweep::scheduler {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kShared[] = "the shared all-roles token";
constexpr char kReader[] = "a notebook's read token";
constexpr char kSubmitter[] = "alice's submit token";
constexpr char kOtherSubmitter[] = "carol's submit token";
constexpr char kWorker[] = "node-1's worker token";
constexpr char kUnknown[] = "a token nobody issued";

std::shared_ptr<const TokenRoles> Roles(const std::string& text) {
  absl::StatusOr<TokenRoles> roles = TokenRoles::Parse(text, "roles.txt");
  EXPECT_TRUE(roles.ok()) << roles.status();
  return roles.ok() ? std::make_shared<const TokenRoles>(*std::move(roles)) : nullptr;
}

std::string RolesFile() {
  return absl::StrCat("# test callers\n", "nb read ", Sha256Hex(kReader), "\n", "alice submit ",
                      Sha256Hex(kSubmitter), "\n", "carol submit ", Sha256Hex(kOtherSubmitter), "\n",
                      "node-1 worker ", Sha256Hex(kWorker), "\n");
}

// The role the issue gives a method: WorkerService is the worker's;
// SubmitSweep and CancelSweep need submit; Get*, List*, WatchSweep,
// GetSweepAnalysis and ExportSweep need read. nullopt: the issue says nothing.
std::optional<Role> IssueRole(const google::protobuf::MethodDescriptor& method) {
  const std::string& name = method.name();
  if (method.service()->full_name() == v1::WorkerService::service_full_name()) return Role::kWorker;
  if (name == "SubmitSweep" || name == "CancelSweep") return Role::kSubmit;
  if (absl::StartsWith(name, "Get") || absl::StartsWith(name, "List") || name == "WatchSweep" ||
      name == "ExportSweep") {
    return Role::kRead;
  }
  return std::nullopt;
}

// Any method, unary or streaming, by its path: one empty request, then
// half-close, one reply read, the status. An empty request is invalid for
// every method that validates (ids 0), so no call that passes the check
// waits for anything.
grpc::Status CallWithEmptyRequest(const std::shared_ptr<grpc::Channel>& channel, const std::string& path,
                                  const std::string& token) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  AttachApiToken(&ctx, token);
  void* tag = nullptr;
  bool ok = false;
  auto call = stub.PrepareCall(&ctx, path, &cq);
  call->StartCall(reinterpret_cast<void*>(1));
  cq.Next(&tag, &ok);
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1);
  call->Write(request, reinterpret_cast<void*>(2));
  cq.Next(&tag, &ok);
  call->WritesDone(reinterpret_cast<void*>(3));
  cq.Next(&tag, &ok);
  grpc::ByteBuffer reply;
  call->Read(&reply, reinterpret_cast<void*>(4));
  cq.Next(&tag, &ok);
  grpc::Status status(grpc::StatusCode::UNKNOWN, "no status");
  call->Finish(&status, reinterpret_cast<void*>(5));
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

class TokenRolesTest : public testing::InProcessSchedulerTest {
 protected:
  void SetUp() override {
    SchedulerServerOptions options = testing::LoopbackServerOptions();
    options.api_token = kShared;
    options.token_roles = Roles(RolesFile());
    StartServer(options);
  }

  client::SweepClient As(const std::string& token) { return client::SweepClient(address_, absl::Seconds(10), token); }
};

struct CallerCase {
  const char* label;
  const char* token;
  std::optional<Role> role;  // nullopt: not a caller the scheduler knows
  const char* name;
};

TEST_F(TokenRolesTest, EveryCallerAgainstEveryMethod) {
  const CallerCase callers[] = {
      {"read", kReader, Role::kRead, "nb"},          {"submit", kSubmitter, Role::kSubmit, "alice"},
      {"worker", kWorker, Role::kWorker, "node-1"},  {"shared", kShared, Role::kAll, ""},
      {"unknown", kUnknown, std::nullopt, ""},       {"none", "", std::nullopt, ""},
  };
  int methods = 0;
  for (const char* service : {v1::SweepService::service_full_name(), v1::WorkerService::service_full_name()}) {
    const google::protobuf::ServiceDescriptor* descriptor =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
    ASSERT_NE(descriptor, nullptr) << service;
    for (int m = 0; m < descriptor->method_count(); ++m) {
      const google::protobuf::MethodDescriptor& method = *descriptor->method(m);
      const std::string path = absl::StrCat("/", service, "/", method.name());
      const std::optional<Role> needed = IssueRole(method);
      ASSERT_TRUE(needed.has_value()) << path << ": the issue gives it no role; add it to IssueRole and RoleForMethod";
      EXPECT_EQ(RoleForMethod(method.name()), needed) << path;
      ++methods;
      for (const CallerCase& caller : callers) {
        SCOPED_TRACE(absl::StrCat(path, " as ", caller.label));
        const grpc::Status status = CallWithEmptyRequest(channel_, path, caller.token);
        if (*caller.token != '\0') {
          EXPECT_THAT(status.error_message(), Not(HasSubstr(caller.token)));
        }
        if (!caller.role.has_value()) {
          EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
          EXPECT_THAT(status.error_message(),
                      HasSubstr(*caller.token == '\0' ? "requires an API token" : "unknown API token"));
        } else if (RoleGrants(*caller.role, *needed)) {
          // Past the check: whatever the empty request earns, but not a
          // refusal, and not UNIMPLEMENTED (a handler that is missing never
          // checked the caller).
          EXPECT_NE(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
          EXPECT_NE(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
          EXPECT_NE(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
        } else {
          EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
          EXPECT_EQ(status.error_message(),
                    absl::StrCat(method.name(), " needs the '", RoleName(*needed), "' role; '", caller.name,
                                 "' has '", RoleName(*caller.role), "'"));
        }
      }
    }
  }
  EXPECT_GE(methods, 16);  // 10 SweepService methods with ExportSweep, 6 WorkerService ones
}

TEST_F(TokenRolesTest, DeniedCallsChangeNothingAndTheSweepRecordsWho) {
  const v1::SweepSpec spec = testing::OneTrialSpec("roles");
  auto denied = As(kReader).Submit(spec, "roles-1", false);
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(denied.status().message()), HasSubstr("SubmitSweep needs the 'submit' role; 'nb' has 'read'"));
  EXPECT_EQ(As(kWorker).Submit(spec, "roles-1", false).status().code(), absl::StatusCode::kPermissionDenied);
  auto none = As(kShared).ListSweeps(v1::SWEEP_STATE_UNSPECIFIED);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());

  auto checked = As(kSubmitter).Submit(spec, "", true);  // validate_only
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(checked->sweep().submitted_by(), "alice");
  auto submitted = As(kSubmitter).Submit(spec, "roles-1", false);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const int64_t id = submitted->sweep().id();
  EXPECT_EQ(submitted->sweep().submitted_by(), "alice");
  EXPECT_EQ(submitted->sweep().cancelled_by(), "");

  EXPECT_EQ(As(kReader).CancelSweep(id).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(As(kWorker).CancelSweep(id).status().code(), absl::StatusCode::kPermissionDenied);
  auto running = As(kReader).GetSweep(id);
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_EQ(running->state(), v1::SWEEP_RUNNING);
  EXPECT_EQ(running->cancelled_by(), "");

  auto cancelled = As(kOtherSubmitter).CancelSweep(id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), v1::SWEEP_CANCELLED);
  EXPECT_EQ(cancelled->cancelled_by(), "carol");
  // A second cancel leaves the first canceller.
  ASSERT_TRUE(As(kSubmitter).CancelSweep(id).ok());
  auto read = As(kReader).GetSweep(id);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->submitted_by(), "alice");
  EXPECT_EQ(read->cancelled_by(), "carol");
  auto listed = As(kReader).ListSweeps(v1::SWEEP_STATE_UNSPECIFIED);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].submitted_by(), "alice");
  EXPECT_EQ((*listed)[0].cancelled_by(), "carol");

  // The shared token has no name: "" as before token roles.
  auto shared = As(kShared).Submit(testing::OneTrialSpec("shared"), "roles-2", false);
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_EQ(shared->sweep().submitted_by(), "");
}

TEST_F(TokenRolesTest, AReloadTakesEffectForTheNextCall) {
  ASSERT_TRUE(As(kSubmitter).ListSweeps(v1::SWEEP_STATE_UNSPECIFIED).ok());
  // alice is demoted to read, nb is gone, dave is new.
  server_->ReloadTokenRoles(Roles(absl::StrCat("alice read ", Sha256Hex(kSubmitter), "\ndave submit ",
                                               Sha256Hex("dave's token"), "\n")));
  EXPECT_EQ(As(kReader).ListSweeps(v1::SWEEP_STATE_UNSPECIFIED).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(As(kSubmitter).ListSweeps(v1::SWEEP_STATE_UNSPECIFIED).ok());
  EXPECT_EQ(As(kSubmitter).Submit(testing::OneTrialSpec("r"), "r", false).status().code(),
            absl::StatusCode::kPermissionDenied);
  auto dave = As("dave's token").Submit(testing::OneTrialSpec("r"), "r", false);
  ASSERT_TRUE(dave.ok()) << dave.status();
  EXPECT_EQ(dave->sweep().submitted_by(), "dave");
  EXPECT_TRUE(As(kShared).ListSweeps(v1::SWEEP_STATE_UNSPECIFIED).ok());  // still every role
}

TEST_F(TokenRolesTest, HealthAndReflectionStayOpen) {
  std::string bytes;
  const grpc::Status health = testing::CallHealthCheck(channel_, &bytes);
  ASSERT_TRUE(health.ok()) << health.error_message();
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));  // SERVING
  std::string reply;
  const grpc::Status reflection = testing::CallReflection(channel_, std::string("\x3a\x01*", 3), &reply);  // list_services
  ASSERT_TRUE(reflection.ok()) << reflection.error_message();
  EXPECT_THAT(reply, HasSubstr(v1::SweepService::service_full_name()));
}

// A roles file alone, without the shared token, requires a token: with no
// caller in it, nobody gets in.
class RolesFileAloneTest : public testing::InProcessSchedulerTest {};

TEST_F(RolesFileAloneTest, AnEmptyFileLetsNobodyIn) {
  SchedulerServerOptions options = testing::LoopbackServerOptions();
  options.token_roles = Roles("# nobody yet\n");
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  for (const char* token : {"", kShared, kReader}) {
    client::SweepClient cli(address_, absl::Seconds(10), token);
    EXPECT_EQ(cli.ListSweeps(v1::SWEEP_STATE_UNSPECIFIED).status().code(), absl::StatusCode::kUnauthenticated)
        << token;
  }
}

}  // namespace
}  // namespace normsweep::scheduler
