// The gRPC API tests' fixture: an in-process scheduler on a fresh
// PostgreSQL database with one sweep submitted and one trial leased, which
// every bad request must leave as it is. Header-only.
#ifndef NORMSWEEP_TESTS_SCHEDULER_GRPC_API_FIXTURE_H_
#define NORMSWEEP_TESTS_SCHEDULER_GRPC_API_FIXTURE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "db/pg_connection.h"
#include "db/postgres_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "normsweep/v1/sweep_service.grpc.pb.h"
#include "normsweep/v1/worker_service.grpc.pb.h"
#include "tests/common/fresh_database.h"
#include "tests/common/in_process_scheduler.h"
#include "tests/common/specs.h"

namespace normsweep::scheduler {

class GrpcApiTest : public testing::InProcessSchedulerTest {
 protected:
  void SetUp() override {
    auto conninfo = testing::FreshDatabase();
    ASSERT_TRUE(conninfo.ok()) << conninfo.status();
    conninfo_ = *conninfo;
    auto store = testing::OpenStore(conninfo_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    // No /metrics over HTTP here: two_schedulers_test.
    SchedulerServerOptions server_options = testing::LoopbackServerOptions();
    server_options.scheduler.watch_poll_interval = absl::Milliseconds(50);
    ASSERT_NO_FATAL_FAILURE(StartServer(server_options));

    // Something stored that bad requests must leave alone.
    grpc::ClientContext ctx;
    v1::SubmitSweepResponse resp;
    ASSERT_TRUE(sweeps_->SubmitSweep(&ctx, GoodRequest(), &resp).ok());
    sweep_id_ = resp.sweep().id();
    worker_id_ = RegisterWorker("w1");
    grpc::ClientContext lctx;
    v1::LeaseTrialRequest lreq;
    lreq.set_worker_id(worker_id_);
    v1::LeaseTrialResponse lresp;
    ASSERT_TRUE(workers_->LeaseTrial(&lctx, lreq, &lresp).ok());
    ASSERT_TRUE(lresp.leased());
    leased_ = lresp.trial();
  }

  static v1::SubmitSweepRequest GoodRequest() {
    v1::SubmitSweepRequest r;
    r.set_request_id("good");
    v1::SweepSpec* s = r.mutable_spec();
    *s = testing::SmallSpec("xiong2020-small");
    s->mutable_base()->set_steps(200);
    s->add_warmup_steps(100);
    s->add_peak_lrs(5e-4);
    s->add_peak_lrs(1e-3);
    s->add_seeds(0);
    return r;
  }

  int64_t RegisterWorker(const std::string& name) {
    grpc::ClientContext ctx;
    v1::RegisterWorkerRequest req;
    req.set_name(name);
    req.add_devices("cpu");
    v1::RegisterWorkerResponse resp;
    EXPECT_TRUE(workers_->RegisterWorker(&ctx, req, &resp).ok());
    return resp.worker_id();
  }

  // A progress batch for steps first..last (train loss 10 - 0.1 * step) of
  // the leased trial's lease, for trial_id (default: the leased trial).
  v1::ReportProgressRequest Batch(int first, int last, int64_t trial_id = 0) const {
    v1::ReportProgressRequest p;
    p.set_worker_id(worker_id_);
    p.set_trial_id(trial_id != 0 ? trial_id : leased_.id());
    p.set_attempt(leased_.attempts());
    for (int step = first; step <= last; ++step) {
      v1::MetricPoint* m = p.add_points();
      m->set_step(step);
      m->set_train_loss(10.0 - 0.1 * step);
    }
    return p;
  }

  // GetTrial over gRPC (the trial with its metric history); fails the test
  // when the call does.
  v1::GetTrialResponse GetTrialOverGrpc(int64_t trial_id) {
    grpc::ClientContext ctx;
    v1::GetTrialRequest request;
    request.set_trial_id(trial_id);
    v1::GetTrialResponse response;
    grpc::Status status = sweeps_->GetTrial(&ctx, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  // Everything stored, as text: every sweep and trial, and row counts. What
  // cannot be read fails the test and ends the text there.
  std::string Snapshot() {
    std::string out;
    auto sweeps = store_->ListSweeps(v1::SWEEP_STATE_UNSPECIFIED, 0, 1000);
    EXPECT_TRUE(sweeps.ok()) << sweeps.status();
    if (!sweeps.ok()) return out + "ListSweeps failed";
    for (const auto& s : *sweeps) {
      absl::StrAppend(&out, s.DebugString());
      auto trials = store_->ListTrials(s.id(), v1::TRIAL_STATE_UNSPECIFIED, -1, 100);
      EXPECT_TRUE(trials.ok()) << trials.status();
      if (!trials.ok()) return out + "ListTrials failed";
      for (const auto& t : *trials) absl::StrAppend(&out, t.DebugString());
    }
    auto conn = testing::Connect(conninfo_);
    EXPECT_TRUE(conn.ok()) << conn.status();
    if (!conn.ok()) return out + "no connection";
    auto counts = (*conn)->Exec(
        "SELECT (SELECT count(*) FROM sweeps), (SELECT count(*) FROM trials), (SELECT count(*) FROM workers),"
        " (SELECT count(*) FROM trial_metrics), (SELECT count(*) FROM layer_grad_norms),"
        " (SELECT max(update_seq) FROM trials), (SELECT count(*) FROM layer_diagnostics)");
    EXPECT_TRUE(counts.ok()) << counts.status();
    if (!counts.ok()) return out + "no counts";
    for (int c = 0; c < 7; ++c) absl::StrAppend(&out, counts->GetString(0, c), " ");
    return out;
  }

  // Sends a bad request and checks the code, the named field and that
  // nothing stored changed.
  void ExpectRejected(const std::string& what, const std::function<grpc::Status(grpc::ClientContext*)>& call,
                      grpc::StatusCode code, const std::string& field) {
    SCOPED_TRACE(what);
    const std::string before = Snapshot();
    grpc::ClientContext ctx;
    grpc::Status status = call(&ctx);
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    EXPECT_THAT(status.error_message(), ::testing::HasSubstr(field));
    EXPECT_EQ(Snapshot(), before);
    ++rejected_;
  }

  void ExpectBadSpec(const std::string& what, const std::function<void(v1::SubmitSweepRequest*)>& mutate,
                     const std::string& field) {
    v1::SubmitSweepRequest r = GoodRequest();
    r.set_request_id(absl::StrCat("bad-", rejected_));
    mutate(&r);
    ExpectRejected(what, [&](grpc::ClientContext* ctx) {
      v1::SubmitSweepResponse resp;
      return sweeps_->SubmitSweep(ctx, r, &resp);
    }, grpc::StatusCode::INVALID_ARGUMENT, field);
  }

  std::string conninfo_;
  int64_t sweep_id_ = 0;
  int64_t worker_id_ = 0;
  v1::Trial leased_;
  int rejected_ = 0;
};

}  // namespace normsweep::scheduler

#endif  // NORMSWEEP_TESTS_SCHEDULER_GRPC_API_FIXTURE_H_
