// Two normsweep-scheduler processes share one PostgreSQL (started together
// on a fresh database, so they also race to apply the migrations). Many
// concurrent LeaseTrial callers, half on each, must lease every trial
// exactly once. Also checks /metrics over HTTP and a clean SIGTERM exit.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <signal.h>

#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "normsweep/v1/sweep_service.grpc.pb.h"
#include "normsweep/v1/worker_service.grpc.pb.h"
#include "tests/common/http_get.h"
#include "tests/common/process_test.h"
#include "tests/common/requests.h"

namespace normsweep {
namespace {

using ::testing::HasSubstr;

struct Ports {
  int grpc = 0;
  int metrics = 0;
};

class TwoSchedulersTest : public testing::ProcessTest {};

TEST_F(TwoSchedulersTest, EveryTrialIsLeasedExactlyOnce) {
  const std::string binary = bin_ + "/scheduler/normsweep-scheduler";
  const std::string& dir = dir_;
  std::vector<testing::Subprocess> schedulers;
  for (int i = 0; i < 2; ++i) {
    const std::string port_file = absl::StrCat(dir, "/scheduler", i, ".ports");
    auto p = testing::Subprocess::Start(
        {binary, "--host=127.0.0.1", "--port=0", "--metrics-port=0", "--port-file=" + port_file,
         "--maintenance-interval-ms=200", "--db-pool-size=4"},
        {{"NORMSWEEP_DATABASE_URL", conninfo_}}, absl::StrCat(dir, "/scheduler", i, ".log"));
    ASSERT_TRUE(p.ok()) << p.status();
    schedulers.push_back(*std::move(p));
  }
  std::vector<Ports> ports;
  for (int i = 0; i < 2; ++i) {
    auto text = testing::WaitForFile(absl::StrCat(dir, "/scheduler", i, ".ports"), 30);
    ASSERT_TRUE(text.ok()) << text.status();
    std::vector<std::string> parts = absl::StrSplit(*text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
    ASSERT_EQ(parts.size(), 2u);
    Ports p;
    ASSERT_TRUE(absl::SimpleAtoi(parts[0], &p.grpc));
    ASSERT_TRUE(absl::SimpleAtoi(parts[1], &p.metrics));
    ports.push_back(p);
  }
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (const Ports& p : ports) {
    channels.push_back(grpc::CreateChannel(absl::StrCat("127.0.0.1:", p.grpc), grpc::InsecureChannelCredentials()));
  }

  // 2 placements x 200 seeds = 400 trials.
  v1::SubmitSweepRequest submit;
  submit.set_request_id("two-schedulers");
  v1::SweepSpec* spec = submit.mutable_spec();
  spec->set_name("race");
  spec->add_placements("post");
  spec->add_placements("pre");
  spec->add_warmup_steps(0);
  spec->add_peak_lrs(1e-3);
  for (int s = 0; s < 200; ++s) spec->add_seeds(s);
  v1::SubmitSweepResponse submitted;
  {
    grpc::ClientContext ctx;
    grpc::Status st = v1::SweepService::NewStub(channels[0])->SubmitSweep(&ctx, submit, &submitted);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  // The same request on the other replica is the same sweep.
  {
    grpc::ClientContext ctx;
    v1::SubmitSweepResponse again;
    ASSERT_TRUE(v1::SweepService::NewStub(channels[1])->SubmitSweep(&ctx, submit, &again).ok());
    EXPECT_FALSE(again.created());
    EXPECT_EQ(again.sweep().id(), submitted.sweep().id());
  }

  constexpr int kCallers = 16;
  std::mutex mu;
  std::vector<int64_t> leased;
  std::vector<std::string> errors;
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      auto stub = v1::WorkerService::NewStub(channels[c % 2]);
      grpc::ClientContext rctx;
      v1::RegisterWorkerRequest reg;
      reg.set_name(absl::StrCat("worker-", c));
      v1::RegisterWorkerResponse worker;
      grpc::Status st = stub->RegisterWorker(&rctx, reg, &worker);
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        errors.push_back(st.error_message());
        return;
      }
      while (true) {
        grpc::ClientContext ctx;
        v1::LeaseTrialRequest req;
        req.set_worker_id(worker.worker_id());
        v1::LeaseTrialResponse resp;
        st = stub->LeaseTrial(&ctx, req, &resp);
        if (!st.ok() || !resp.leased()) break;
        {
          std::lock_guard<std::mutex> lock(mu);
          leased.push_back(resp.trial().id());
        }
        grpc::ClientContext fctx;
        v1::FinishTrialRequest fin = testing::FinishOf(worker.worker_id(), resp.trial(), v1::TRIAL_SUCCEEDED);
        v1::FinishTrialResponse fresp;
        st = stub->FinishTrial(&fctx, fin, &fresp);
        if (!st.ok()) break;
      }
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        errors.push_back(st.error_message());
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_THAT(errors, ::testing::IsEmpty());
  std::set<int64_t> unique(leased.begin(), leased.end());
  EXPECT_EQ(leased.size(), 400u) << "a trial was leased twice, or one was never leased";
  EXPECT_EQ(unique.size(), 400u);

  grpc::ClientContext gctx;
  v1::GetSweepRequest get;
  get.set_sweep_id(submitted.sweep().id());
  v1::GetSweepResponse sweep;
  ASSERT_TRUE(v1::SweepService::NewStub(channels[1])->GetSweep(&gctx, get, &sweep).ok());
  EXPECT_EQ(sweep.sweep().state(), v1::SWEEP_COMPLETED);
  EXPECT_EQ(sweep.sweep().counts().succeeded(), 400);

  // /metrics on the second replica reflects the database within a few
  // maintenance intervals.
  std::string metrics;
  for (int i = 0; i < 100; ++i) {
    auto m = testing::HttpGet(ports[1].metrics, "/metrics");
    ASSERT_TRUE(m.ok()) << m.status();
    metrics = *m;
    if (metrics.find("normsweep_scheduler_trials{state=\"SUCCEEDED\"} 400") != std::string::npos) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_THAT(metrics, HasSubstr("normsweep_scheduler_trials{state=\"SUCCEEDED\"} 400"));
  EXPECT_THAT(metrics, HasSubstr("normsweep_scheduler_sweeps{state=\"COMPLETED\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("normsweep_scheduler_live_workers 16"));
  EXPECT_THAT(metrics, HasSubstr("normsweep_scheduler_lease_latency_seconds_count"));
  EXPECT_THAT(metrics, HasSubstr("normsweep_scheduler_trials_completed_total{outcome=\"SUCCEEDED\"}"));

  for (auto& s : schedulers) EXPECT_EQ(s.Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace normsweep
