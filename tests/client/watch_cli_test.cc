// `normsweep watch` as a user runs it, against a real scheduler and
// PostgreSQL: trials that are leased but have reported nothing (a worker's
// prefetched lease) are not counted as running, and Ctrl-C stops the
// watching, not the sweep: the CLI says the sweep goes on and how to follow
// it again, exits 130, and the sweep still runs.
#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/leased_sweep.h"
#include "tests/common/metric_points.h"
#include "tests/common/read_file.h"
#include "tests/common/requests.h"
#include "tests/common/served_store_test.h"
#include "tests/common/subprocess.h"

namespace normsweep {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class WatchCliTest : public testing::ServedStoreTest {
 protected:
  // Two trials leased to worker "watch-test"; neither has reported yet.
  void WriteRows() override {
    v1::SweepSpec spec;
    spec.set_name("watch");
    spec.set_max_attempts(1);
    auto sweep = testing::CreateLeasedSweep(*store_, spec, testing::PostPreTrials(), "watch-test", absl::Now());
    ASSERT_TRUE(sweep.ok()) << sweep.status();
    sweep_id_ = sweep->sweep_id;
    worker_ = sweep->worker;
    leased_ = sweep->trials;
    ASSERT_EQ(leased_.size(), 2u);
  }

  // Steps [0, steps) of trial i, as its trainer would report them.
  void Report(int i, int steps) {
    v1::ReportProgressRequest progress = testing::ProgressOf(worker_, leased_[i]);
    for (int step = 0; step < steps; ++step) testing::AddPoint(progress, step)->set_train_loss(5.0 - 0.01 * step);
    ASSERT_TRUE(store_->ReportProgress(progress, absl::Now()).ok());
  }

  // Waits until the file at path holds text (the watch's output, written as
  // it comes); the file's contents.
  static std::string WaitForText(const std::string& path, const std::string& text) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    std::string contents;
    while (absl::Now() < deadline) {
      contents = testing::ReadFile(path);
      if (contents.find(text) != std::string::npos) return contents;
      absl::SleepFor(absl::Milliseconds(20));  // a poll of the condition, not a wait for time to pass
    }
    ADD_FAILURE() << "no " << text << " in " << path << " after 60 s:\n" << contents;
    return contents;
  }

  int64_t sweep_id_ = 0;
  int64_t worker_ = 0;
  std::vector<v1::Trial> leased_;
};

TEST_F(WatchCliTest, LeasedTrialsAreNotRunningAndCtrlCLeavesTheSweepRunning) {
  ASSERT_NO_FATAL_FAILURE(Report(0, 5));  // trial 0 trains; trial 1 is only leased
  const std::string log = dir_ + "/watch.log";
  const std::string id = absl::StrCat(sweep_id_);
  auto watch = testing::Subprocess::Start({bin_ + "/client/normsweep", "watch", id},
                                          {{"NORMSWEEP_SCHEDULER", scheduler_->address()}}, log);
  ASSERT_TRUE(watch.ok()) << watch.status();
  // Off a terminal, a line at the first update.
  std::string out = WaitForText(log, " | ETA ");
  EXPECT_THAT(out, HasSubstr("sweep " + id + " [..............................] 0/2 done | 1 running | "
                             "1 leased, not started | 0 pending |"));
  // Trial 1 starts training, then trial 0 ends: the next line (a trial
  // ended) counts trial 1 as running.
  ASSERT_NO_FATAL_FAILURE(Report(1, 1));
  v1::FinishTrialRequest finish = testing::FinishOf(worker_, leased_[0], v1::TRIAL_SUCCEEDED);
  finish.mutable_result()->set_final_val_loss(2.5);
  ASSERT_TRUE(store_->FinishTrial(finish, absl::Now()).ok());
  out = WaitForText(log, "] 1/2 done");
  EXPECT_THAT(out, HasSubstr("1/2 done | 1 running | 0 pending |"));

  // Ctrl-C: the watch ends, saying that the sweep goes on.
  EXPECT_EQ(watch->Stop(SIGINT), 130);
  out = testing::ReadFile(log);
  EXPECT_THAT(out, HasSubstr("normsweep: stopped watching; sweep " + id + " goes on"));
  EXPECT_THAT(out, HasSubstr("  follow it again: normsweep watch " + id + "\n"));
  EXPECT_THAT(out, HasSubstr("  stop it:         normsweep cancel " + id + "\n"));
  EXPECT_THAT(out, Not(HasSubstr("sweep " + id + " running\n")));  // not the end of a sweep
  auto sweep = store_->GetSweep(sweep_id_);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_EQ(sweep->state(), v1::SWEEP_RUNNING);
  EXPECT_EQ(sweep->counts().running(), 1);
  EXPECT_EQ(sweep->counts().cancelled(), 0);
}

}  // namespace
}  // namespace normsweep
