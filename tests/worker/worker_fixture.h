// The fixture of the Worker's tests against the in-memory
// FakeSchedulerClient and the fake trainer (fake_trainer.cc): a work dir per
// test, short intervals, real processes and real time. Header-only.
#ifndef NORMSWEEP_TESTS_WORKER_WORKER_FIXTURE_H_
#define NORMSWEEP_TESTS_WORKER_WORKER_FIXTURE_H_

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/fake_scheduler_client.h"
#include "worker/worker.h"
#include "worker/worker_metrics.h"

namespace normsweep::worker::testing {

using ::testing::HasSubstr;

inline std::string FakeTrainerPath() {
  const char* bin = std::getenv("NORMSWEEP_BINARY_DIR");
  return absl::StrCat(bin != nullptr ? bin : ".", "/tests/worker/normsweep-fake-trainer");
}

inline v1::TrainConfig Config(const std::string& script, int steps, int eval_every = 0) {
  v1::TrainConfig c;
  c.set_placement("pre");
  c.set_lr(1e-3);
  c.set_warmup_steps(4);
  c.set_seed(3);
  c.set_layers(2);
  c.set_steps(steps);
  c.set_eval_every(eval_every);
  c.set_task(script);
  return c;
}

inline bool ProcessGone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

inline pid_t ReadPid(const std::string& path) {
  std::ifstream in(path);
  pid_t pid = 0;
  in >> pid;
  return pid;
}

class WorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/worker_test_", getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    options_.name = "test-worker";
    options_.hostname = "host";
    options_.slots = {{"cpu", 1}};
    options_.trainer_path = FakeTrainerPath();
    options_.work_dir = dir_ + "/work";
    options_.flush_interval = absl::Milliseconds(100);
    options_.kill_after = absl::Milliseconds(500);
    options_.grace_period = absl::Seconds(10);
    options_.retry_min = absl::Milliseconds(50);
    options_.retry_max = absl::Milliseconds(200);
    options_.poll_min = absl::Milliseconds(20);
    options_.poll_max = absl::Milliseconds(100);
    options_.final_flush_timeout = absl::Seconds(3);
    fake_.SetHeartbeatIntervalMs(100);
  }
  void TearDown() override {
    if (worker_ != nullptr) Stop();
    std::filesystem::remove_all(dir_);
  }

  void Start() {
    worker_ = std::make_unique<Worker>(fake_, RealClock::Get(), metrics_, options_);
    thread_ = std::thread([this] { run_status_ = worker_->Run(); });
  }
  // Drains and waits for Run to return.
  void Stop() {
    worker_->Drain();
    thread_.join();
    EXPECT_TRUE(run_status_.ok()) << run_status_;
    worker_.reset();
  }
  // Starts the worker with one trial of the fake trainer (`script`, which
  // writes its pid to a file, `steps`) that the worker must kill: it ends
  // FAILED, with an error holding each of `errors`, within 5 s (*took), and
  // its process is gone.
  void ExpectKilled(const std::string& script, int steps, const std::vector<std::string>& errors,
                    absl::Duration* took) {
    const std::string pidfile = PidFile("killed");
    const int64_t id = fake_.AddTrial(Config(script + ",pidfile=" + pidfile, steps));
    const absl::Time start = absl::Now();
    Start();
    ASSERT_TRUE(WaitFinished(id));
    *took = absl::Now() - start;
    const FakeSchedulerClient::TrialRecord record = fake_.Get(id);
    ASSERT_FALSE(record.finishes.empty());
    EXPECT_EQ(record.finishes[0].outcome(), v1::TRIAL_FAILED);
    for (const std::string& e : errors) EXPECT_THAT(record.finishes[0].result().error(), HasSubstr(e));
    EXPECT_LT(*took, absl::Seconds(5));
    EXPECT_TRUE(ProcessGone(ReadPid(pidfile)));
  }

  // Polls `pred` until it holds; false after `timeout`.
  static bool Eventually(const std::function<bool()>& pred, absl::Duration timeout = absl::Seconds(10)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!pred()) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return true;
  }
  // The worker has counted `count` interruptions with this cause.
  bool WaitInterrupted(const std::string& cause, int count = 1) {
    return Eventually([&] {
      return absl::StrContains(
          Metrics(), absl::StrCat("normsweep_worker_interruptions_total{cause=\"", cause, "\"} ", count));
    });
  }
  // Waits until the scheduler has trial `id`'s progress up to `step`.
  bool WaitForStep(int64_t id, int step) {
    return fake_.WaitFor([id, step](FakeSchedulerClient& f) { return f.MaxStepLocked(id) >= step; },
                         absl::Seconds(10));
  }
  // A trial of the fake trainer's `mode` that trains for ~1000 s (100000
  // steps of 10 ms) unless stopped; given a name, it writes its pid to
  // PidFile(name).
  int64_t AddLongTrial(const std::string& name = "", const std::string& mode = "ok") {
    const std::string pid = name.empty() ? "" : ",pidfile=" + PidFile(name);
    return fake_.AddTrial(Config(absl::StrCat("mode=", mode, ",step_ms=10", pid), 100000));
  }
  std::string PidFile(const std::string& name) const { return absl::StrCat(dir_, "/", name, ".pid"); }
  bool WaitFinished(int64_t id, absl::Duration timeout = absl::Seconds(10)) {
    return fake_.WaitFor([id](FakeSchedulerClient& f) { return f.FinishedLocked(id); }, timeout);
  }
  std::string Metrics() {
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, registry_.Collect());
    return out.str();
  }

  std::string dir_;
  WorkerOptions options_;
  FakeSchedulerClient fake_;
  prometheus::Registry registry_;
  WorkerMetrics metrics_{registry_};
  std::unique_ptr<Worker> worker_;
  std::thread thread_;
  absl::Status run_status_;
};

}  // namespace normsweep::worker::testing

#endif  // NORMSWEEP_TESTS_WORKER_WORKER_FIXTURE_H_
