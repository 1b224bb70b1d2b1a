// The whole stack end to end, as a user runs it: a throwaway PostgreSQL, a
// real normsweep-scheduler, normsweep-worker processes running the real
// normsweep-train, and the normsweep CLI. Tiny models keep it quick.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "client/sweep_client.h"
#include "db/pg_connection.h"
#include "tests/common/fresh_database.h"
#include "tests/common/http_get.h"
#include "tests/common/process_test.h"
#include "tests/e2e/stack_test.h"
#include "tests/common/trainer_processes.h"

namespace normsweep {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

using testing::CommandResult;
using testing::CountTrainers;

// A sweep file over placements x warm-ups x lrs, one seed, a tiny model
// unless `model` says otherwise.
std::string SweepYaml(const std::string& name, int steps, const std::string& warmups, const std::string& lrs,
                      const std::string& placements = "post, pre",
                      const std::string& model = "layers: 1, d_model: 16, heads: 2, seq_len: 16, batch_size: 4") {
  return absl::StrCat("name: ", name, "\nplacements: [", placements, "]\nwarmup_steps: [", warmups,
                      "]\npeak_lrs: [", lrs, "]\nseeds: [0]\nbase: {", model, ", steps: ", steps,
                      ", eval_every: 10, eval_batches: 2}\n");
}

class EndToEndTest : public testing::StackTest {
 protected:
  // A worker against this test's scheduler; metrics_port 0: no /metrics.
  testing::Subprocess* StartWorker(const std::string& name, int slots, int metrics_port = 0) {
    return ProcessTest::StartWorker(name, scheduler_->address(), slots,
                                    {absl::StrCat("--metrics-port=", metrics_port)});
  }

  // Reads go through the CLI's own SweepService client.
  v1::Sweep GetSweep(int64_t id) {
    auto s = client_->GetSweep(id);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::Sweep();
  }

  std::vector<v1::Trial> ListTrials(int64_t sweep_id) {
    auto t = client_->ListTrials(sweep_id);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : std::vector<v1::Trial>();
  }

  v1::GetTrialResponse GetTrial(int64_t id) {
    auto t = client_->GetTrial(id);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : v1::GetTrialResponse();
  }

  // Waits until pred(sweep) or the timeout.
  template <typename Pred>
  bool WaitFor(int64_t id, Pred pred, double timeout_s) {
    const absl::Time deadline = absl::Now() + absl::Seconds(timeout_s);
    while (absl::Now() < deadline) {
      if (pred(GetSweep(id))) return true;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return false;
  }

  // A connection to this test's database, for what only SQL shows.
  std::unique_ptr<db::PgConnection> Sql() {
    auto conn = testing::Connect(conninfo_);
    EXPECT_TRUE(conn.ok()) << conn.status();
    return conn.ok() ? *std::move(conn) : nullptr;
  }

  // The trial's history, exactly once per step: the evaluation before the
  // first update at step 0 (val_loss l0 and log Z, no training figures),
  // then steps 1..steps; gradient norms and per-block diagnostics at step 0
  // and at every evaluation (every eval_every steps and the last, as
  // SweepYaml's eval_every: 10), each block once.
  void ExpectOneMetricRowPerStep(int64_t trial_id, int steps, int layers) {
    v1::GetTrialResponse t = GetTrial(trial_id);
    std::vector<int> seen;
    for (const v1::MetricPoint& m : t.metrics()) {
      seen.push_back(m.step());
      EXPECT_EQ(m.has_train_loss(), m.step() > 0) << "trial " << trial_id << " step " << m.step();
      if (m.step() == 0) {
        EXPECT_TRUE(m.has_val_loss() && m.has_output_log_z()) << "trial " << trial_id << ": " << m.ShortDebugString();
      }
    }
    std::vector<int> want(static_cast<size_t>(steps) + 1);
    for (int i = 0; i <= steps; ++i) want[static_cast<size_t>(i)] = i;
    EXPECT_EQ(seen, want) << "trial " << trial_id;
    std::vector<int> evals = {0};
    for (int s = 10; s < steps; s += 10) evals.push_back(s);
    evals.push_back(steps);
    std::vector<int> norm_steps, diag_steps;
    for (const v1::LayerGradNorms& g : t.layer_grad_norms()) {
      norm_steps.push_back(g.step());
      EXPECT_EQ(g.norms_size(), 2 * layers) << "trial " << trial_id << " step " << g.step() << ": W1, W2 per block";
    }
    for (const v1::StepDiagnostics& d : t.diagnostics()) {
      diag_steps.push_back(d.step());
      ASSERT_EQ(d.layers_size(), layers) << "trial " << trial_id << " step " << d.step();
      for (int l = 0; l < layers; ++l) {
        EXPECT_EQ(d.layers(l).layer(), l);
        EXPECT_TRUE(d.layers(l).has_max_attn_logit());
        EXPECT_EQ(d.layers(l).has_update_ratio_fc1(), d.step() > 0) << "trial " << trial_id << " step " << d.step();
      }
    }
    EXPECT_EQ(norm_steps, evals) << "trial " << trial_id;
    EXPECT_EQ(diag_steps, evals) << "trial " << trial_id;
    ASSERT_FALSE(t.metrics().empty());
    EXPECT_DOUBLE_EQ(t.trial().result().init_val_loss(), t.metrics(0).val_loss()) << "trial " << trial_id;
  }
};

TEST_F(EndToEndTest, TwoWorkersCompleteASweepAndTheCliPrintsIt) {
  const int metrics_port = testing::FreePort();
  ASSERT_NE(StartWorker("w1", 1, metrics_port), nullptr);
  ASSERT_NE(StartWorker("w2", 1), nullptr);
  // Both workers must be registered before the sweep exists, and a trial
  // must take longer than an idle worker's poll interval (at most 2 s)
  // divided by the trials one worker can run meanwhile: with 0.1 s trials
  // one worker took all eight before the other's first poll. About 0.8 s
  // each here (a load slows the trials, not the polls).
  ASSERT_TRUE(WaitForLiveWorkers({"w1", "w2"}, 60));
  const int64_t id = SubmitFile(SweepYaml("e2e", 30, "0, 10", "1e-3, 3e-3", "post, pre",
                                          "layers: 1, d_model: 64, heads: 2, seq_len: 64, batch_size: 8"));
  // While w1 runs a trial, its /metrics has the trial's diagnostics gauges
  // (from the evaluation at step 0 on).
  std::string live_metrics;
  const absl::Time live_deadline = absl::Now() + absl::Seconds(120);
  while (absl::Now() < live_deadline && !absl::StrContains(live_metrics, "normsweep_worker_trial_max_attn_logit{")) {
    if (GetSweep(id).state() == v1::SWEEP_COMPLETED) break;
    live_metrics = testing::HttpGet(metrics_port, "/metrics").value_or("");
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(live_metrics, HasSubstr("normsweep_worker_trial_max_attn_logit{layer=\"0\","));
  EXPECT_THAT(live_metrics, HasSubstr("normsweep_worker_trial_output_log_z{"));
  CommandResult watch = Cli({"watch", std::to_string(id)}, 300);
  ASSERT_EQ(watch.exit_code, 0) << watch.output;
  EXPECT_THAT(watch.output, HasSubstr("8/8 done"));
  EXPECT_THAT(watch.output, HasSubstr("Post-LN"));

  const std::vector<v1::Trial> trials = ListTrials(id);
  ASSERT_EQ(trials.size(), 8u);
  std::set<std::tuple<std::string, int, double>> points;
  std::set<int64_t> workers;
  for (const v1::Trial& t : trials) {
    EXPECT_EQ(t.state(), v1::TRIAL_SUCCEEDED) << t.ShortDebugString();
    EXPECT_TRUE(t.result().has_final_val_loss());
    EXPECT_EQ(t.attempts(), 1);
    points.insert({t.config().placement(), t.config().warmup_steps(), t.config().lr()});
    workers.insert(t.worker_id());
    ExpectOneMetricRowPerStep(t.id(), 30, 1);
  }
  EXPECT_EQ(points.size(), 8u);   // one trial (one result) per grid point
  EXPECT_EQ(workers.size(), 2u);  // both workers ran trials

  // The same in plain SQL: l0 on each trial and as its step-0 metric row,
  // typed diagnostics per evaluation step and block.
  std::unique_ptr<db::PgConnection> sql = Sql();
  ASSERT_NE(sql, nullptr);
  auto l0 = sql->Exec(
      "SELECT count(*), count(*) FILTER (WHERE t.init_val_loss = m.val_loss AND m.train_loss IS NULL"
      " AND m.output_log_z IS NOT NULL) FROM trials t JOIN trial_metrics m ON m.trial_id = t.id AND m.step = 0"
      " WHERE t.sweep_id = $1", db::PgParams().Add(id));
  ASSERT_TRUE(l0.ok()) << l0.status();
  EXPECT_EQ(l0->GetInt64(0, 0), 8);
  EXPECT_EQ(l0->GetInt64(0, 1), 8);
  auto diag = sql->Exec(
      "SELECT count(*), count(DISTINCT (d.trial_id, d.step, d.layer)), count(d.max_attn_logit),"
      " count(d.update_ratio_qkv), count(d.update_ratio_fc2), count(DISTINCT d.step)"
      " FROM layer_diagnostics d JOIN trials t ON t.id = d.trial_id WHERE t.sweep_id = $1", db::PgParams().Add(id));
  ASSERT_TRUE(diag.ok()) << diag.status();
  EXPECT_EQ(diag->GetInt64(0, 0), 8 * 4);  // 8 trials x steps 0, 10, 20, 30 x 1 block
  EXPECT_EQ(diag->GetInt64(0, 1), 8 * 4);
  EXPECT_EQ(diag->GetInt64(0, 2), 8 * 4);
  EXPECT_EQ(diag->GetInt64(0, 3), 8 * 3);  // no update ratios at step 0
  EXPECT_EQ(diag->GetInt64(0, 4), 8 * 3);
  EXPECT_EQ(diag->GetInt64(0, 5), 4);
  // val_loss_progress travels trainer -> worker -> scheduler -> trials: the
  // val loss at step 20 (the last evaluation at or before floor(0.75 * 30))
  // minus the final one, as the stored metrics have them.
  auto progress = sql->Exec(
      "SELECT count(*), count(*) FILTER (WHERE abs(t.val_loss_progress - (m20.val_loss - m30.val_loss)) < 1e-12)"
      " FROM trials t JOIN trial_metrics m20 ON m20.trial_id = t.id AND m20.step = 20"
      " JOIN trial_metrics m30 ON m30.trial_id = t.id AND m30.step = 30 WHERE t.sweep_id = $1",
      db::PgParams().Add(id));
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_EQ(progress->GetInt64(0, 0), 8);
  EXPECT_EQ(progress->GetInt64(0, 1), 8);
  CommandResult trial = Cli({"trial", std::to_string(trials[0].id())});
  ASSERT_EQ(trial.exit_code, 0) << trial.output;
  EXPECT_THAT(trial.output, HasSubstr("val loss progress over the last quarter "));
  EXPECT_THAT(trial.output, HasSubstr("l0 (validation loss at initialisation) "));
  EXPECT_THAT(trial.output, HasSubstr("per-block diagnostics at step 0 and at step 30, the last evaluation:"));

  CommandResult csv = Cli({"results", std::to_string(id), "--format", "csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.output;
  std::vector<std::string> lines = absl::StrSplit(csv.output, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 9u) << csv.output;  // header + 8 cells
  // trials, succeeded, diverged, then plateaued: these 30-step runs end near
  // the translate task's unigram loss, so whether one counts as plateaued
  // (proto/schema/failure.h) can turn on the last digits; failed, cancelled
  // and unfinished do not.
  EXPECT_THAT(csv.output, ContainsRegex("\npost,\"\",10,0\\.003,1,1,0,[01],0,0,0,"));
  CommandResult show = Cli({"show", std::to_string(id)});
  EXPECT_EQ(show.exit_code, 0);
  EXPECT_THAT(show.output, HasSubstr("8 succeeded"));
  CommandResult list = Cli({"list"});
  EXPECT_THAT(list.output, HasSubstr("completed"));
  CommandResult workers_table = Cli({"workers"});
  EXPECT_EQ(workers_table.exit_code, 0) << workers_table.output;
  EXPECT_THAT(workers_table.output, HasSubstr(" w1 "));
  EXPECT_THAT(workers_table.output, HasSubstr(" w2 "));
}

TEST_F(EndToEndTest, KilledWorkersTrialIsReleasedAndFinishesElsewhere) {
  testing::Subprocess* doomed = StartWorker("doomed", 1);
  ASSERT_NE(doomed, nullptr);
  // One trial of a few seconds.
  constexpr int kSteps = 1500;
  const int64_t id = SubmitFile(
      SweepYaml("killed", kSteps, "0", "1e-3", "pre", "layers: 2, d_model: 32, heads: 2, seq_len: 32, batch_size: 8"));
  // Let it run a while, then kill the worker outright.
  ASSERT_TRUE(WaitFor(id, [&](const v1::Sweep&) {
    std::vector<v1::Trial> t = ListTrials(id);
    return !t.empty() && t[0].last_step() >= 50;
  }, 60));
  doomed->Stop(SIGKILL);
  ASSERT_NE(StartWorker("rescuer", 1), nullptr);
  ASSERT_TRUE(WaitFor(id, [](const v1::Sweep& s) { return s.state() == v1::SWEEP_COMPLETED; }, 180))
      << GetSweep(id).ShortDebugString();
  const std::vector<v1::Trial> trials = ListTrials(id);
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state(), v1::TRIAL_SUCCEEDED);
  EXPECT_EQ(trials[0].attempts(), 2);
  // The second attempt re-sent steps the first had stored: still one row each.
  ExpectOneMetricRowPerStep(trials[0].id(), kSteps, 2);
  EXPECT_EQ(CountTrainers(dir_ + "/doomed"), 0) << "the killed worker's trainer must not outlive it";
}

TEST_F(EndToEndTest, CancelDuringARunStopsEveryTrial) {
  ASSERT_NE(StartWorker("c1", 1), nullptr);
  ASSERT_NE(StartWorker("c2", 1), nullptr);
  const int64_t id = SubmitFile(SweepYaml("cancel", 100000, "0, 10", "1e-3, 3e-3"));
  ASSERT_TRUE(WaitFor(id, [](const v1::Sweep& s) { return s.counts().running() >= 2; }, 60));
  const absl::Time started = absl::Now() + absl::Seconds(30);
  while (CountTrainers(dir_) == 0 && absl::Now() < started) absl::SleepFor(absl::Milliseconds(50));
  ASSERT_GT(CountTrainers(dir_), 0) << "the trainers of this test are visible in /proc";
  CommandResult cancel = Cli({"cancel", std::to_string(id)});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.output;
  ASSERT_TRUE(WaitFor(id, [](const v1::Sweep& s) {
    return s.counts().pending() == 0 && s.counts().running() == 0;
  }, 60)) << GetSweep(id).ShortDebugString();
  for (const v1::Trial& t : ListTrials(id)) {
    EXPECT_TRUE(t.state() == v1::TRIAL_CANCELLED || t.state() == v1::TRIAL_SUCCEEDED) << t.ShortDebugString();
  }
  EXPECT_EQ(GetSweep(id).state(), v1::SWEEP_CANCELLED);
  // No trainer left behind.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (CountTrainers(dir_) > 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(CountTrainers(dir_), 0);
}

TEST_F(EndToEndTest, CliErrorsAreClearAndNonZero) {
  const std::string dead = absl::StrCat("127.0.0.1:", testing::FreePort());
  CommandResult down = Cli({"list", "--scheduler", dead}, 60, false);
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_THAT(down.output, HasSubstr("cannot reach the scheduler at " + dead));

  const std::string bad = dir_ + "/bad.yaml";
  std::ofstream(bad) << "name: broken\nplacements: [post, pre\n";
  CommandResult malformed = Cli({"submit", bad});
  EXPECT_EQ(malformed.exit_code, 2);
  EXPECT_THAT(malformed.output, HasSubstr("bad.yaml: line"));

  const std::string invalid = dir_ + "/invalid.yaml";
  std::ofstream(invalid) << SweepYaml("invalid", 10, "0", "-1");
  CommandResult rejected = Cli({"submit", invalid});
  EXPECT_EQ(rejected.exit_code, 2);
  EXPECT_THAT(rejected.output, HasSubstr("peak_lrs"));

  CommandResult unknown = Cli({"show", "987654"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.output, HasSubstr("987654"));
  // Nothing was stored by the rejected submissions.
  CommandResult list = Cli({"list"});
  EXPECT_THAT(list.output, ::testing::Not(HasSubstr("invalid")));
}

}  // namespace
}  // namespace normsweep
