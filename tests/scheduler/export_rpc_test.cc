// ExportSweep over real gRPC on an in-process scheduler (MemoryStore; the
// rows themselves are tests/db/export_test.cc's): the token like every other
// call, the errors' codes, chunks arriving, and a client that cancels mid-stream.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>

#include "absl/time/clock.h"
#include "db/memory_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler_server.h"
#include "tests/common/in_process_scheduler.h"

namespace normsweep::scheduler {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "export token 123";

// A MemoryStore that counts the exports running in it.
class CountingStore : public db::MemoryStore {
 public:
  absl::Status ExportSweep(const db::ExportPlan& plan, const db::ExportOptions& options,
                           const db::ExportCallbacks& callbacks) override {
    ++running;
    absl::Status s = db::MemoryStore::ExportSweep(plan, options, callbacks);
    --running;
    return s;
  }
  std::atomic<int> running{0};
};

class ExportRpcTest : public testing::InProcessSchedulerTest {
 protected:
  void SetUp() override {
    SchedulerServerOptions options = testing::LoopbackServerOptions();
    options.api_token = kToken;
    auto store = std::make_unique<CountingStore>();
    counting_ = store.get();
    store_ = std::move(store);
    StartServer(options);
    grpc::ClientContext ctx;
    Authorize(ctx);
    v1::SubmitSweepRequest r;
    *r.mutable_spec() = testing::OneTrialSpec("export");
    v1::SubmitSweepResponse resp;
    ASSERT_TRUE(sweeps_->SubmitSweep(&ctx, r, &resp).ok());
    sweep_id_ = resp.sweep().id();
  }
  static void Authorize(grpc::ClientContext& ctx) { ctx.AddMetadata("authorization", std::string("Bearer ") + kToken); }

  grpc::Status Export(const v1::ExportSweepRequest& req, bool with_token, std::vector<v1::ExportChunk>* chunks) {
    grpc::ClientContext ctx;
    if (with_token) Authorize(ctx);
    auto reader = sweeps_->ExportSweep(&ctx, req);
    v1::ExportChunk c;
    while (reader->Read(&c)) chunks->push_back(c);
    return reader->Finish();
  }
  int64_t sweep_id_ = 0;
  CountingStore* counting_ = nullptr;
};

TEST_F(ExportRpcTest, NeedsTheTokenAndStreamsTheTable) {
  v1::ExportSweepRequest req;
  req.set_sweep_id(sweep_id_);
  req.set_table("trials");
  std::vector<v1::ExportChunk> chunks;
  const grpc::Status refused = Export(req, false, &chunks);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(refused.error_message(), HasSubstr("requires an API token"));
  EXPECT_TRUE(chunks.empty());
  const grpc::Status ok = Export(req, true, &chunks);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].rows(), 1);
  EXPECT_TRUE(chunks[0].last());
  EXPECT_EQ(chunks[0].columns(0).name(), "trial_id");
  EXPECT_FALSE(chunks[0].cursor().empty());
}

TEST_F(ExportRpcTest, BadNamesAndUnknownSweeps) {
  std::vector<v1::ExportChunk> chunks;
  v1::ExportSweepRequest req;
  req.set_sweep_id(sweep_id_);
  req.set_table("metrics");
  req.add_metrics("lr");
  req.add_metrics("nope");
  grpc::Status s = Export(req, true, &chunks);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("metrics[1]: unknown metric 'nope'"));
  req.clear_metrics();
  req.set_table("losses");
  s = Export(req, true, &chunks);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("table: unknown table 'losses'"));
  req.set_table("trials");
  req.set_sweep_id(sweep_id_ + 50);
  s = Export(req, true, &chunks);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(chunks.empty());
}

TEST_F(ExportRpcTest, AClientThatCancelsAFollowEndsTheCall) {
  v1::ExportSweepRequest req;
  req.set_sweep_id(sweep_id_);
  req.set_table("metrics");
  req.set_follow(true);  // the sweep never ends here: only the cancel stops it
  grpc::ClientContext ctx;
  Authorize(ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto reader = sweeps_->ExportSweep(&ctx, req);
  v1::ExportChunk first;
  ASSERT_TRUE(reader->Read(&first));  // the rows so far; the server now polls for new ones
  EXPECT_FALSE(first.last());
  EXPECT_EQ(counting_->running, 1);
  ctx.TryCancel();
  v1::ExportChunk c;
  while (reader->Read(&c)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The server's call ends too (it checks every 50 ms while it waits).
  for (int i = 0; i < 200 && counting_->running > 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(counting_->running, 0);
  // A fresh export still works.
  std::vector<v1::ExportChunk> chunks;
  req.set_follow(false);
  EXPECT_TRUE(Export(req, true, &chunks).ok());
  EXPECT_TRUE(chunks.back().last());
}

}  // namespace
}  // namespace normsweep::scheduler
