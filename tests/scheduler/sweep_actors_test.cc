// Who submitted and who cancelled a sweep (Sweep.submitted_by and
// Sweep.cancelled_by, issue 25), through the Scheduler on both stores
// (tests/common/store_kinds.h): stored, returned by GetSweep, ListSweeps and
// CancelSweep, kept by an idempotent resubmission and by a second cancel,
// and "" where no name was given (the shared API token, no token at all).
#include <prometheus/registry.h>

#include "common/clock.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "tests/common/in_process_scheduler.h"
#include "tests/common/store_kinds.h"

namespace normsweep::scheduler {
namespace {

class SweepActorsTest : public testing::BothStoresTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(BothStoresTest::SetUp());
    metrics_ = std::make_unique<SchedulerMetrics>(registry_);
    scheduler_ = std::make_unique<Scheduler>(*store_, clock_, *metrics_);
  }

  static v1::SubmitSweepRequest Submit(const std::string& request_id) {
    v1::SubmitSweepRequest r;
    r.set_request_id(request_id);
    *r.mutable_spec() = testing::OneTrialSpec("actors");
    return r;
  }
  static v1::CancelSweepRequest Cancel(int64_t id) {
    v1::CancelSweepRequest r;
    r.set_sweep_id(id);
    return r;
  }
  v1::Sweep Get(int64_t id) {
    v1::GetSweepRequest r;
    r.set_sweep_id(id);
    auto got = scheduler_->GetSweep(r);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? got->sweep() : v1::Sweep();
  }

  prometheus::Registry registry_;
  FakeClock clock_;
  std::unique_ptr<SchedulerMetrics> metrics_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_P(SweepActorsTest, SubmitterAndCancellerAreStoredAndReturned) {
  auto submitted = scheduler_->SubmitSweep(Submit("a-1"), "alice");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const int64_t id = submitted->sweep().id();
  EXPECT_EQ(submitted->sweep().submitted_by(), "alice");
  EXPECT_EQ(submitted->sweep().cancelled_by(), "");
  EXPECT_EQ(Get(id).submitted_by(), "alice");

  // The same request again, from someone else: the first sweep, as it was.
  auto again = scheduler_->SubmitSweep(Submit("a-1"), "bob");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created());
  EXPECT_EQ(again->sweep().submitted_by(), "alice");

  auto cancelled = scheduler_->CancelSweep(Cancel(id), "carol");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->sweep().state(), v1::SWEEP_CANCELLED);
  EXPECT_EQ(cancelled->sweep().cancelled_by(), "carol");
  // A finished sweep is returned unchanged: the first canceller stays.
  auto twice = scheduler_->CancelSweep(Cancel(id), "dave");
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_EQ(twice->sweep().cancelled_by(), "carol");

  const v1::Sweep read = Get(id);
  EXPECT_EQ(read.submitted_by(), "alice");
  EXPECT_EQ(read.cancelled_by(), "carol");
  v1::ListSweepsRequest list;
  auto listed = scheduler_->ListSweeps(list);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->sweeps_size(), 1);
  EXPECT_EQ(listed->sweeps(0).submitted_by(), "alice");
  EXPECT_EQ(listed->sweeps(0).cancelled_by(), "carol");
}

TEST_P(SweepActorsTest, NoNameIsEmpty) {
  auto submitted = scheduler_->SubmitSweep(Submit("b-1"));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  auto cancelled = scheduler_->CancelSweep(Cancel(submitted->sweep().id()));
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  const v1::Sweep read = Get(submitted->sweep().id());
  EXPECT_EQ(read.state(), v1::SWEEP_CANCELLED);
  EXPECT_EQ(read.submitted_by(), "");
  EXPECT_EQ(read.cancelled_by(), "");
}

INSTANTIATE_TEST_SUITE_P(Stores, SweepActorsTest, testing::BothStores(), testing::StoreKindName);

}  // namespace
}  // namespace normsweep::scheduler
