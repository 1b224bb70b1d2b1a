// normsweep-scheduler stopped by SIGTERM with streams open and calls in
// flight: it cuts every stream (WatchSweep, health Watch, a worker's
// StreamProgress), logs one line saying what it cut, exits, and leaves the
// store as a client that retries expects: nothing it was told is stored is
// lost, nothing is stored twice. How fast it stops is the benchmark's
// (tests/bench/scheduler_stop.cc), not a test's.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <signal.h>

#include <atomic>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "normsweep/v1/sweep_service.grpc.pb.h"
#include "normsweep/v1/worker_service.grpc.pb.h"
#include "tests/common/fresh_database.h"
#include "tests/common/process_test.h"
#include "tests/common/specs.h"
#include "tests/scheduler/open_streams.h"

namespace normsweep {
namespace {

using ::testing::AnyOf;
using ::testing::Each;
using ::testing::HasSubstr;
using ::testing::Pair;

// Generous bound on waits for conditions that come in well under a second:
// only a failure guard.
constexpr double kGuardSeconds = 30;

// Leases that outlive the test (its workers send no heartbeats).
const std::vector<std::string> kFlags = {"--lease-seconds=600", "--maintenance-interval-ms=1000"};

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  return context;
}

// The codes a client of a stopping scheduler may see: it retries on both.
auto RetriedCode() {
  return AnyOf(static_cast<int>(grpc::StatusCode::UNAVAILABLE), static_cast<int>(grpc::StatusCode::CANCELLED));
}

using StopTest = testing::ProcessTest;

TEST_F(StopTest, SigtermCutsOpenStreamsAndSaysWhat) {
  testing::SchedulerProcess* scheduler = StartScheduler(kFlags);
  ASSERT_NE(scheduler, nullptr);
  auto streams = testing::OpenStreams::Open(scheduler->address(), {/*watch_sweep=*/3, /*health_watch=*/1,
                                                                   /*progress=*/2});
  ASSERT_TRUE(streams.ok()) << streams.status();

  ASSERT_EQ(kill(scheduler->process.pid(), SIGTERM), 0);
  EXPECT_EQ(scheduler->process.Wait(kGuardSeconds), 0) << "it did not exit by itself";
  ASSERT_TRUE((*streams)->WaitAllEnded(absl::Seconds(kGuardSeconds)));

  // WatchSweep and StreamProgress are cancelled (their clients resume on
  // another scheduler); a health watch hears NOT_SERVING and ends OK.
  EXPECT_THAT((*streams)->EndedWith(testing::OpenStreams::kWatchSweep), Each(Pair(RetriedCode(), ::testing::_)));
  EXPECT_THAT((*streams)->EndedWith(testing::OpenStreams::kProgress), Each(Pair(RetriedCode(), ::testing::_)));
  EXPECT_EQ((*streams)->EndedWith(testing::OpenStreams::kHealthWatch),
            (std::map<int, int>{{static_cast<int>(grpc::StatusCode::OK), 1}}));
  EXPECT_THAT(ReadWholeFile(dir_ + "/scheduler.log"),
              HasSubstr("stopping: cut 3 WatchSweep streams, 2 progress streams, 1 health watch; "));
}

// What one client saw of its calls: request id -> the code of its answer.
struct Seen {
  absl::Mutex mu;
  std::map<std::string, int> submits ABSL_GUARDED_BY(mu);
  std::vector<int> acked_steps ABSL_GUARDED_BY(mu);   // progress steps answered OK
  std::vector<int> failed_steps ABSL_GUARDED_BY(mu);  // the batch that failed (one step each)
  int progress_code ABSL_GUARDED_BY(mu) = 0;
};

constexpr int kTrialsPerSweep = 20;

v1::SubmitSweepRequest Submission(const std::string& request_id) {
  v1::SubmitSweepRequest request;
  request.set_request_id(request_id);
  *request.mutable_spec() = testing::SmallSpec("stop-" + request_id);
  request.mutable_spec()->add_seeds(0);
  for (int i = 1; i <= kTrialsPerSweep / 2; ++i) request.mutable_spec()->add_peak_lrs(1e-4 * i);
  return request;
}

// Submits sweeps until a call fails; each request id once.
void SubmitUntilStopped(const std::string& address, int caller, Seen* seen) {
  auto stub = v1::SweepService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  for (int i = 0;; ++i) {
    const std::string id = absl::StrCat("caller-", caller, "-", i);
    v1::SubmitSweepResponse response;
    const grpc::Status status = stub->SubmitSweep(Context().get(), Submission(id), &response);
    absl::MutexLock lock(&seen->mu);
    seen->submits[id] = status.error_code();
    if (!status.ok()) return;
  }
}

v1::ReportProgressRequest Batch(int64_t worker, const v1::Trial& trial, int step) {
  v1::ReportProgressRequest batch;
  batch.set_worker_id(worker);
  batch.set_trial_id(trial.id());
  batch.set_attempt(trial.attempts());
  v1::MetricPoint* point = batch.add_points();
  point->set_step(step);
  point->set_train_loss(5.0 - 0.001 * step);
  return batch;
}

// Reports one step a batch on a progress stream until the stream fails.
void StreamUntilStopped(const std::string& address, int64_t worker, const v1::Trial& trial, Seen* seen) {
  auto stub = v1::WorkerService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto stream = stub->StreamProgress(&context);
  for (int step = 1;; ++step) {
    v1::ReportProgressResponse response;
    if (!stream->Write(Batch(worker, trial, step)) || !stream->Read(&response)) {
      stream->WritesDone();
      const grpc::Status status = stream->Finish();
      absl::MutexLock lock(&seen->mu);
      seen->failed_steps.push_back(step);
      seen->progress_code = status.error_code();
      return;
    }
    absl::MutexLock lock(&seen->mu);
    seen->acked_steps.push_back(step);
  }
}

int64_t Count(db::PgConnection& sql, const std::string& query, const db::PgParams& params = db::PgParams()) {
  auto result = sql.Exec(query, params);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? result->GetInt64(0, 0) : -1;
}

TEST_F(StopTest, CallsDuringTheStopLoseNothingStored) {
  testing::SchedulerProcess* first = StartScheduler(kFlags);
  ASSERT_NE(first, nullptr);
  auto streams = testing::OpenStreams::Open(first->address(), {/*watch_sweep=*/2, /*health_watch=*/0,
                                                               /*progress=*/1});
  ASSERT_TRUE(streams.ok()) << streams.status();
  // A trial of its own for the progress writer, leased by the same worker.
  auto workers = v1::WorkerService::NewStub(grpc::CreateChannel(first->address(), grpc::InsecureChannelCredentials()));
  v1::LeaseTrialRequest lease_request;
  lease_request.set_worker_id((*streams)->worker_id());
  v1::LeaseTrialResponse lease;
  ASSERT_TRUE(workers->LeaseTrial(Context().get(), lease_request, &lease).ok());
  ASSERT_TRUE(lease.leased());

  Seen seen;
  std::vector<std::thread> clients;
  for (int c = 0; c < 2; ++c) clients.emplace_back(SubmitUntilStopped, first->address(), c, &seen);
  clients.emplace_back(StreamUntilStopped, first->address(), (*streams)->worker_id(), lease.trial(), &seen);
  {  // Every client has had calls answered: the stop finds them mid-way.
    // (Not ASSERT: the clients end only once the scheduler is stopped.)
    absl::MutexLock lock(&seen.mu);
    auto started = [&seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(seen.mu) {
      return seen.submits.size() >= 4 && !seen.acked_steps.empty();
    };
    EXPECT_TRUE(seen.mu.AwaitWithTimeout(absl::Condition(&started), absl::Seconds(kGuardSeconds)));
  }
  ASSERT_EQ(kill(first->process.pid(), SIGTERM), 0);
  EXPECT_EQ(first->process.Wait(kGuardSeconds), 0) << "it did not exit by itself";
  for (std::thread& t : clients) t.join();
  EXPECT_THAT(ReadWholeFile(dir_ + "/scheduler.log"), HasSubstr("stopping: cut 2 WatchSweep streams, "));

  // Each client's last call failed with a code it retries on.
  absl::MutexLock lock(&seen.mu);
  std::set<std::string> failed;
  for (const auto& [id, code] : seen.submits) {
    if (code == 0) continue;
    EXPECT_THAT(code, RetriedCode()) << id;
    failed.insert(id);
  }
  EXPECT_EQ(failed.size(), 2u);
  EXPECT_THAT(seen.progress_code, RetriedCode());

  // Retried on a new scheduler, each call is answered once and for all.
  testing::SchedulerProcess* second = StartScheduler(kFlags);
  ASSERT_NE(second, nullptr);
  auto sweeps = v1::SweepService::NewStub(grpc::CreateChannel(second->address(), grpc::InsecureChannelCredentials()));
  std::map<std::string, int64_t> sweep_of;  // request id -> sweep id
  for (const auto& [id, code] : seen.submits) {
    v1::SubmitSweepResponse response;
    const grpc::Status status = sweeps->SubmitSweep(Context().get(), Submission(id), &response);
    ASSERT_TRUE(status.ok()) << id << ": " << status.error_message();
    sweep_of[id] = response.sweep().id();
  }
  workers = v1::WorkerService::NewStub(grpc::CreateChannel(second->address(), grpc::InsecureChannelCredentials()));
  for (int step : seen.failed_steps) {
    v1::ReportProgressResponse response;
    const grpc::Status status =
        workers->ReportProgress(Context().get(), Batch((*streams)->worker_id(), lease.trial(), step), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  // The store: one sweep per request id with all its trials, and every
  // step reported once.
  auto sql = testing::Connect(conninfo_);
  ASSERT_TRUE(sql.ok()) << sql.status();
  for (const auto& [id, sweep] : sweep_of) {
    EXPECT_EQ(Count(**sql, "SELECT count(*) FROM trials WHERE sweep_id = $1", db::PgParams().Add(sweep)), kTrialsPerSweep) << id;
    EXPECT_EQ(Count(**sql, "SELECT trial_count FROM sweeps WHERE id = $1", db::PgParams().Add(sweep)), kTrialsPerSweep) << id;
  }
  EXPECT_EQ(Count(**sql, "SELECT count(*) FROM sweeps WHERE request_id LIKE 'caller-%'"),
            static_cast<int64_t>(sweep_of.size()));
  const int64_t steps = static_cast<int64_t>(seen.acked_steps.size() + seen.failed_steps.size());
  EXPECT_EQ(Count(**sql, "SELECT count(*) FROM trial_metrics WHERE trial_id = $1",
                  db::PgParams().Add(lease.trial().id())), steps);
  EXPECT_EQ(Count(**sql, "SELECT count(DISTINCT step) FROM trial_metrics WHERE trial_id = $1",
                  db::PgParams().Add(lease.trial().id())),
            steps);
}

// A write held by the database (here a lock the test holds) does not hold
// the stop: the scheduler exits without it, its client sees a code it
// retries on, and the retry finds the store as if the call had run once.
TEST_F(StopTest, AWriteBlockedOnTheDatabaseDoesNotHoldTheStop) {
  // No maintenance pass after the start: the only statement waiting on the
  // lock is the call's.
  std::vector<std::string> flags = kFlags;
  flags.push_back("--maintenance-interval-ms=600000");
  testing::SchedulerProcess* first = StartScheduler(flags);
  ASSERT_NE(first, nullptr);
  auto lock = testing::Connect(conninfo_);
  ASSERT_TRUE(lock.ok()) << lock.status();
  ASSERT_TRUE((*lock)->Exec("BEGIN").ok());
  ASSERT_TRUE((*lock)->Exec("LOCK TABLE sweeps IN ACCESS EXCLUSIVE MODE").ok());

  int code = -1;
  std::thread client([&code, address = first->address()] {
    auto stub = v1::SweepService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    v1::SubmitSweepResponse response;
    code = stub->SubmitSweep(Context().get(), Submission("blocked"), &response).error_code();
  });
  auto watcher = testing::Connect(conninfo_);
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  bool waiting = false;
  for (const absl::Time guard = absl::Now() + absl::Seconds(kGuardSeconds); !waiting && absl::Now() < guard;) {
    waiting = Count(**watcher,
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'normsweep-scheduler'"
                    " AND wait_event_type = 'Lock'") > 0;
    if (!waiting) absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(waiting) << "the call never reached the database";

  ASSERT_EQ(kill(first->process.pid(), SIGTERM), 0);
  EXPECT_EQ(first->process.Wait(kGuardSeconds), 0) << "it did not exit by itself";
  client.join();
  EXPECT_THAT(code, RetriedCode());
  const std::string log = ReadWholeFile(dir_ + "/scheduler.log");
  EXPECT_THAT(log, HasSubstr("stopping: cut 0 WatchSweep streams, 0 progress streams, 0 health watches; 1 call in flight"));
  EXPECT_THAT(log, HasSubstr("without waiting for the rest (1 call in flight"));
  ASSERT_TRUE((*lock)->Exec("ROLLBACK").ok());

  testing::SchedulerProcess* second = StartScheduler(kFlags);
  ASSERT_NE(second, nullptr);
  auto stub = v1::SweepService::NewStub(grpc::CreateChannel(second->address(), grpc::InsecureChannelCredentials()));
  v1::SubmitSweepResponse response;
  const grpc::Status retried = stub->SubmitSweep(Context().get(), Submission("blocked"), &response);
  ASSERT_TRUE(retried.ok()) << retried.error_message();
  EXPECT_EQ(Count(**watcher, "SELECT count(*) FROM sweeps WHERE request_id = 'blocked'"), 1);
  EXPECT_EQ(Count(**watcher, "SELECT count(*) FROM trials WHERE sweep_id = $1", db::PgParams().Add(response.sweep().id())),
            kTrialsPerSweep);
}

}  // namespace
}  // namespace normsweep
