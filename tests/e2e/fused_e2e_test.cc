// Fused trials on the whole stack (issue 26 part 2): a throwaway PostgreSQL,
// normsweep-scheduler leasing groups (max_trials), normsweep-worker --fuse 4
// running each group in one real normsweep-train process. A sweep of four
// compatible trials (same shape, four peak lrs) trains fused, each trial
// with its own metrics and result; a fused trainer killed from outside
// re-queues each of its trials exactly once (an external_signal
// interruption), and they then succeed.
#include <signal.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "client/sweep_client.h"
#include "tests/common/read_file.h"
#include "tests/common/trainer_processes.h"
#include "tests/e2e/stack_test.h"

namespace normsweep {
namespace {

using ::testing::HasSubstr;
using testing::CommandResult;

// Four trials that differ only in peak lr: one fusion key.
std::string FusableSweep(const std::string& name, int steps) {
  return absl::StrCat("name: ", name,
                      "\nplacements: [pre]\nwarmup_steps: [5]\npeak_lrs: [1e-3, 2e-3, 3e-3, 4e-3]\nseeds: [0]\n"
                      "base: {layers: 1, d_model: 16, heads: 2, seq_len: 16, batch_size: 4, steps: ",
                      steps, ", eval_every: 10, eval_batches: 2}\n");
}

class FusedEndToEndTest : public testing::StackTest {
 protected:
  testing::Subprocess* StartFusedWorker(const std::string& name) {
    return ProcessTest::StartWorker(name, scheduler_->address(), 1, {"--fuse=4"});
  }

  std::vector<v1::Trial> Trials(int64_t sweep_id) {
    auto t = client_->ListTrials(sweep_id);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : std::vector<v1::Trial>();
  }

  bool WaitCompleted(int64_t id, double timeout_s) {
    const absl::Time deadline = absl::Now() + absl::Seconds(timeout_s);
    while (absl::Now() < deadline) {
      auto s = client_->GetSweep(id);
      if (s.ok() && s->state() == v1::SWEEP_COMPLETED) return true;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return false;
  }

  // Every trial SUCCEEDED after `attempts` attempts, with a metric row for
  // each step 0..steps and a result of its own.
  void ExpectFourSucceeded(int64_t sweep_id, int steps, int attempts) {
    const std::vector<v1::Trial> trials = Trials(sweep_id);
    ASSERT_EQ(trials.size(), 4u);
    std::set<double> lrs, final_losses;
    for (const v1::Trial& t : trials) {
      EXPECT_EQ(t.state(), v1::TRIAL_SUCCEEDED) << t.ShortDebugString();
      EXPECT_EQ(t.attempts(), attempts) << t.ShortDebugString();
      lrs.insert(t.config().lr());
      final_losses.insert(t.result().final_train_loss());
      auto got = client_->GetTrial(t.id());
      ASSERT_TRUE(got.ok()) << got.status();
      std::vector<int> seen;
      for (const v1::MetricPoint& m : got->metrics()) seen.push_back(m.step());
      std::vector<int> want;
      for (int s = 0; s <= steps; ++s) want.push_back(s);
      EXPECT_EQ(seen, want) << "trial " << t.id();
      // The lr schedule of its own peak lr reached the scheduler.
      double peak = 0;
      for (const v1::MetricPoint& m : got->metrics()) peak = std::max(peak, m.lr());
      EXPECT_NEAR(peak, t.config().lr(), 1e-9) << "trial " << t.id();
    }
    EXPECT_EQ(lrs.size(), 4u);
    EXPECT_EQ(final_losses.size(), 4u) << "each trial its own result";
  }
};

TEST_F(FusedEndToEndTest, FourCompatibleTrialsTrainFusedAndEachSucceeds) {
  ASSERT_NE(StartFusedWorker("fw"), nullptr);
  ASSERT_TRUE(WaitForLiveWorkers({"fw"}, 60));
  const int64_t id = SubmitFile(FusableSweep("fused", 40));
  ASSERT_TRUE(WaitCompleted(id, 300));
  ExpectFourSucceeded(id, 40, 1);
  const std::string log = testing::ReadFile(dir_ + "/fw.log");
  EXPECT_THAT(log, HasSubstr(" fused on cpu slot 0 (pid ")) << log;
}

TEST_F(FusedEndToEndTest, AFusedTrainerKilledFromOutsideRequeuesEachTrialOnce) {
  ASSERT_NE(StartFusedWorker("fw"), nullptr);
  ASSERT_TRUE(WaitForLiveWorkers({"fw"}, 60));
  const int steps = 3000;  // a few seconds: the kill comes well before the end
  const int64_t id = SubmitFile(FusableSweep("fused-kill", steps));
  // After the first progress of the fused run: SIGKILL to its trainer.
  pid_t killed = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (killed == 0 && absl::Now() < deadline) {
    bool progress = false;
    for (const v1::Trial& t : Trials(id)) progress |= t.last_step() > 0;
    const std::vector<testing::TrainerProcess> trainers = testing::ListTrainers(dir_);
    if (progress && trainers.size() == 1) {
      ASSERT_THAT(trainers[0].cmdline, HasSubstr("config.json,")) << "not a fused run: " << trainers[0].cmdline;
      killed = trainers[0].pid;
      ASSERT_EQ(kill(killed, SIGKILL), 0);
    }
    if (killed == 0) absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_NE(killed, 0) << "no fused trainer with progress to kill";
  ASSERT_TRUE(WaitCompleted(id, 300));
  ExpectFourSucceeded(id, steps, 2);
  for (const v1::Trial& t : Trials(id)) {
    EXPECT_EQ(t.interruptions(), 1) << t.ShortDebugString();
    auto got = client_->GetTrial(t.id());
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->attempts_size(), 2) << "trial " << t.id();
    EXPECT_EQ(got->attempts(0).attempt(), 1);
    EXPECT_EQ(got->attempts(0).outcome(), v1::TRIAL_PENDING);
    EXPECT_EQ(got->attempts(0).interruption(), "external_signal") << got->attempts(0).ShortDebugString();
    EXPECT_THAT(got->attempts(0).reason(), HasSubstr("killed by signal 9"));
    EXPECT_EQ(got->attempts(1).outcome(), v1::TRIAL_SUCCEEDED);
    EXPECT_EQ(got->attempts(1).interruption(), "");
  }
}

}  // namespace
}  // namespace normsweep
