// SubmitSweep's grid, estimate and warnings over gRPC, on a MemoryStore and
// on a PostgresStore (a fresh database per test): the estimate without a
// finished trial (the assumed per-core figure) and with the live workers'
// finished trials (measured), a warned submit refused and nothing stored
// unless allow_warnings, and validate_only storing nothing. The figures'
// arithmetic is tests/scheduler/sweep_preview_test.cc's.
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/cost_estimate.h"
#include "tests/common/fresh_database.h"
#include "tests/common/in_process_scheduler.h"
#include "tests/common/requests.h"
#include "tests/common/specs.h"
#include "tests/common/store_kinds.h"
#include "trainer/settings/flops.h"

namespace normsweep::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

class SubmitPreviewTest : public testing::InProcessSchedulerTest,
                          public ::testing::WithParamInterface<testing::StoreKind> {
 protected:
  void SetUp() override {
    if (GetParam() == testing::StoreKind::kPostgres) {
      auto conninfo = testing::FreshDatabase();
      ASSERT_TRUE(conninfo.ok()) << conninfo.status();
      auto store = testing::OpenStore(*conninfo);
      ASSERT_TRUE(store.ok()) << store.status();
      store_ = *std::move(store);
    }
    ASSERT_NO_FATAL_FAILURE(StartServer());
  }

  // Post-LN and Pre-LN, d_model 64 (d_ff 256), 100 steps, warm-up `warmup`,
  // lrs 1e-3 and 3e-3, seed 0: 4 trials.
  static v1::SubmitSweepRequest Request(const std::string& name, int warmup = 0) {
    v1::SubmitSweepRequest r;
    r.set_request_id(name);
    *r.mutable_spec() = testing::SmallSpec(name);
    r.mutable_spec()->set_warmup_steps(0, warmup);
    r.mutable_spec()->add_peak_lrs(1e-3);
    r.mutable_spec()->add_peak_lrs(3e-3);
    r.mutable_spec()->add_seeds(0);
    return r;
  }

  grpc::Status Submit(const v1::SubmitSweepRequest& request, v1::SubmitSweepResponse* response) {
    grpc::ClientContext ctx;
    return sweeps_->SubmitSweep(&ctx, request, response);
  }

  int StoredSweeps() {
    grpc::ClientContext ctx;
    v1::ListSweepsResponse resp;
    grpc::Status s = sweeps_->ListSweeps(&ctx, v1::ListSweepsRequest(), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.sweeps_size();
  }

  int64_t Register(const std::string& name, int devices) {
    grpc::ClientContext ctx;
    v1::RegisterWorkerRequest req;
    req.set_name(name);
    for (int i = 0; i < devices; ++i) req.add_devices("cpu");
    v1::RegisterWorkerResponse resp;
    grpc::Status s = workers_->RegisterWorker(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.worker_id();
  }

  // worker leases a trial and finishes it with outcome at tokens_per_s.
  void RunTrial(int64_t worker, v1::TrialState outcome, double tokens_per_s) {
    grpc::ClientContext lctx;
    v1::LeaseTrialRequest lease;
    lease.set_worker_id(worker);
    v1::LeaseTrialResponse leased;
    ASSERT_TRUE(workers_->LeaseTrial(&lctx, lease, &leased).ok());
    ASSERT_TRUE(leased.leased());
    grpc::ClientContext fctx;
    v1::FinishTrialRequest finish = testing::FinishOf(worker, leased.trial(), outcome);
    finish.mutable_result()->set_final_val_loss(2.0);
    finish.mutable_result()->set_tokens_per_s(tokens_per_s);
    v1::FinishTrialResponse finished;
    grpc::Status s = workers_->FinishTrial(&fctx, finish, &finished);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
};

// Request's trials: 2,162,688 FLOPs per token, 100 steps of 32 x 64
// tokens, evaluations at steps 0 and 100 (8 batches at a third of it).
constexpr double kPerToken = 2162688;
constexpr double kTrialFlops = 204800 * kPerToken + 2.0 * 8 * 32 * 64 * kPerToken / 3;

TEST_P(SubmitPreviewTest, ValidateOnlyGivesTheGridAndAnAssumedEstimateAndStoresNothing) {
  v1::SubmitSweepRequest request = Request("dry");
  request.set_validate_only(true);
  v1::SubmitSweepResponse response;
  grpc::Status s = Submit(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(response.created());
  EXPECT_EQ(response.sweep().trial_count(), 4);
  ASSERT_EQ(response.axes_size(), 4);
  EXPECT_EQ(response.axes(0).name(), "seed");
  EXPECT_EQ(response.axes(2).name(), "peak_lr");
  EXPECT_THAT(response.axes(2).values(), ElementsAre("0.001", "0.003"));
  ASSERT_EQ(response.groups_size(), 2);
  EXPECT_EQ(response.groups(1).placement(), "pre");
  EXPECT_EQ(response.groups(1).trials(), 2);
  EXPECT_THAT(response.warnings(), IsEmpty());
  const v1::CostEstimate& e = response.estimate();
  EXPECT_DOUBLE_EQ(e.flops(), 4 * kTrialFlops);
  EXPECT_EQ(e.training_tokens(), 4 * 204800);
  EXPECT_FALSE(e.throughput_measured());
  EXPECT_DOUBLE_EQ(e.flops_per_s_per_slot(), kAssumedFlopsPerSecondPerCore);
  EXPECT_THAT(e.throughput_source(), StartsWith("assumed: 80 GFLOP/s per core x 1 thread"));
  EXPECT_DOUBLE_EQ(e.slot_hours(), 4 * kTrialFlops / kAssumedFlopsPerSecondPerCore / 3600);
  EXPECT_DOUBLE_EQ(e.core_hours(), e.slot_hours());
  EXPECT_EQ(e.slots(), 0);
  EXPECT_FALSE(e.has_wall_seconds());  // no live worker
  EXPECT_EQ(StoredSweeps(), 0);
}

TEST_P(SubmitPreviewTest, MeasuredThroughputComesFromTheLiveWorkersFinishedTrials) {
  const int64_t one = Register("one", 1);
  const int64_t two = Register("two", 2);
  v1::SubmitSweepResponse first;
  grpc::Status s = Submit(Request("first"), &first);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(first.created());
  EXPECT_FALSE(first.estimate().throughput_measured());  // nothing finished yet; slots are known
  EXPECT_EQ(first.estimate().slots(), 3);
  EXPECT_TRUE(first.estimate().has_wall_seconds());
  ASSERT_NO_FATAL_FAILURE(RunTrial(one, v1::TRIAL_SUCCEEDED, 1000));
  ASSERT_NO_FATAL_FAILURE(RunTrial(one, v1::TRIAL_SUCCEEDED, 3000));
  ASSERT_NO_FATAL_FAILURE(RunTrial(two, v1::TRIAL_SUCCEEDED, 5000));
  ASSERT_NO_FATAL_FAILURE(RunTrial(two, v1::TRIAL_DIVERGED, 1e9));  // not a finished run's speed

  v1::SubmitSweepRequest dry = Request("second");
  dry.set_validate_only(true);
  v1::SubmitSweepResponse response;
  s = Submit(dry, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const v1::CostEstimate& e = response.estimate();
  EXPECT_TRUE(e.throughput_measured());
  // Worker one's median is 2000 tokens/s, two's 5000: their median 3500.
  const double per_slot = 3500 * kPerToken;
  EXPECT_DOUBLE_EQ(e.flops_per_s_per_slot(), per_slot);
  EXPECT_THAT(e.throughput_source(), StartsWith("measured: 3 trials on 2 workers"));
  EXPECT_DOUBLE_EQ(e.slot_hours(), 4 * kTrialFlops / per_slot / 3600);
  EXPECT_EQ(e.slots(), 3);
  ASSERT_TRUE(e.has_wall_seconds());
  EXPECT_DOUBLE_EQ(e.wall_seconds(), 2 * kTrialFlops / per_slot);  // 4 equal trials on 3 slots
  EXPECT_EQ(StoredSweeps(), 1);
}

TEST_P(SubmitPreviewTest, AWarnedSubmitIsStoredOnlyWithAllowWarnings) {
  // Warm-up 150 of 100 steps: the peak lr is never reached.
  v1::SubmitSweepRequest request = Request("warned", /*warmup=*/150);
  v1::SubmitSweepResponse response;
  request.set_validate_only(true);
  grpc::Status s = Submit(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.warnings_size(), 1);
  EXPECT_THAT(response.warnings(0), StartsWith("warmup_steps 150 is longer than the run (steps 100)"));
  EXPECT_GT(response.estimate().flops(), 0);

  request.set_validate_only(false);
  response.Clear();
  s = Submit(request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("warmup_steps 150 is longer than the run"));
  EXPECT_THAT(s.error_message(), HasSubstr("normsweep submit --force"));
  EXPECT_THAT(s.error_message(), HasSubstr("force=True"));
  EXPECT_EQ(StoredSweeps(), 0);

  request.set_allow_warnings(true);
  s = Submit(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(response.created());
  ASSERT_EQ(response.warnings_size(), 1);
  EXPECT_EQ(response.sweep().trial_count(), 4);
  EXPECT_EQ(StoredSweeps(), 1);
}

INSTANTIATE_TEST_SUITE_P(Stores, SubmitPreviewTest, testing::BothStores(), testing::StoreKindName);

}  // namespace
}  // namespace normsweep::scheduler
