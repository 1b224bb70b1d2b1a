// normsweep-scheduler and a database that comes and goes: the scheduler
// starts before PostgreSQL is up (it waits, with back-off), answers
// UNAVAILABLE while the database is down, and serves again once it is back,
// without a restart.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <signal.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "normsweep/v1/sweep_service.grpc.pb.h"
#include "common/grpc_status.h"
#include "tests/common/postgres_instance.h"
#include "tests/common/process_test.h"
#include "tests/common/subprocess.h"

namespace normsweep {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

grpc::Status Submit(v1::SweepService::Stub& stub, const std::string& request_id, v1::SubmitSweepResponse* resp) {
  v1::SubmitSweepRequest req;
  req.set_request_id(request_id);
  v1::SweepSpec* spec = req.mutable_spec();
  spec->set_name("outage");
  spec->add_placements("pre");
  spec->add_warmup_steps(0);
  spec->add_peak_lrs(1e-3);
  spec->add_seeds(0);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return stub.SubmitSweep(&ctx, req, resp);
}

// A server of its own, which the test stops and starts.
class DbOutageTest : public testing::ProcessTest {
 protected:
  DbOutageTest() : ProcessTest(/*with_database=*/false) {}
};

TEST_F(DbOutageTest, SchedulerWaitsForTheDatabaseAndRecoversWithoutRestart) {
  auto pg = testing::PostgresInstance::Start();
  ASSERT_TRUE(pg.ok()) << pg.status();
  auto conninfo = (*pg)->CreateDatabase("outage");
  ASSERT_TRUE(conninfo.ok());
  ASSERT_TRUE((*pg)->Stop().ok());

  const std::string dir = (*pg)->dir();
  const std::string log = dir + "/scheduler.log";
  // The password in the URL must never reach the log (trust auth ignores it).
  auto scheduler = testing::Subprocess::Start(
      {bin_ + "/scheduler/normsweep-scheduler", "--host=127.0.0.1", "--port=0",
       "--metrics-port=-1", "--port-file=" + dir + "/ports", "--maintenance-interval-ms=200"},
      {{"NORMSWEEP_DATABASE_URL", *conninfo + " password=s3cret-pw connect_timeout=2"}}, log);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  absl::SleepFor(absl::Seconds(1));  // it is retrying now
  ASSERT_TRUE((*pg)->StartAgain().ok());
  auto ports = testing::WaitForFile(dir + "/ports", 30);
  ASSERT_TRUE(ports.ok()) << ports.status();
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", std::atoi(ports->c_str())),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::SweepService::NewStub(channel);
  v1::SubmitSweepResponse first;
  grpc::Status st = Submit(*stub, "before", &first);
  ASSERT_TRUE(st.ok()) << st.error_message();

  ASSERT_TRUE((*pg)->Stop().ok());
  v1::SubmitSweepResponse during;
  st = Submit(*stub, "during", &during);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
  v1::GetSweepRequest get;
  get.set_sweep_id(first.sweep().id());
  v1::GetSweepResponse got;
  grpc::ClientContext gctx;
  grpc::Status down = stub->GetSweep(&gctx, get, &got);
  EXPECT_EQ(down.error_code(), grpc::StatusCode::UNAVAILABLE);
  // A plain message, not libpq's (which names the socket and the server's
  // words), and a mark that says the scheduler answered: its database is down.
  EXPECT_THAT(down.error_message(), HasSubstr("the scheduler cannot reach its database"));
  EXPECT_THAT(down.error_message(), Not(HasSubstr("database:")));
  EXPECT_THAT(down.error_message(), Not(HasSubstr(dir)));
  EXPECT_EQ(gctx.GetServerTrailingMetadata().count(kDatabaseUnavailableKey), 1u);
  // And the CLI says so, rather than "cannot reach the scheduler".
  const std::string cli_log = dir + "/cli-during.out";
  auto cli = testing::Subprocess::Start({bin_ + "/client/normsweep", "list"},
                                        {{"NORMSWEEP_SCHEDULER", absl::StrCat("127.0.0.1:", std::atoi(ports->c_str()))}},
                                        cli_log);
  ASSERT_TRUE(cli.ok()) << cli.status();
  EXPECT_EQ(cli->Wait(60), 1);
  auto cli_text = testing::WaitForFile(cli_log, 1);
  ASSERT_TRUE(cli_text.ok());
  EXPECT_THAT(*cli_text, HasSubstr("is running, but its PostgreSQL database is unavailable"));
  EXPECT_THAT(*cli_text, Not(HasSubstr("cannot reach the scheduler")));
  absl::SleepFor(absl::Milliseconds(500));  // a few failing maintenance passes

  ASSERT_TRUE((*pg)->StartAgain().ok());
  grpc::Status back = grpc::Status(grpc::StatusCode::UNAVAILABLE, "not yet");
  for (int i = 0; i < 100 && !back.ok(); ++i) {
    grpc::ClientContext ctx;
    back = stub->GetSweep(&ctx, get, &got);
    if (!back.ok()) absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(back.ok()) << back.error_message();
  EXPECT_EQ(got.sweep().trial_count(), 1);
  v1::SubmitSweepResponse after;
  st = Submit(*stub, "after", &after);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(after.created());
  EXPECT_EQ(scheduler->Stop(SIGTERM), 0);

  auto text = testing::WaitForFile(log, 1);
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(*text, HasSubstr("database not ready"));
  EXPECT_THAT(*text, HasSubstr("GetSweep: UNAVAILABLE: database"));  // the detail is logged instead
  EXPECT_THAT(*text, Not(HasSubstr("s3cret-pw")));
}

}  // namespace
}  // namespace normsweep
