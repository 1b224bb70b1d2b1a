// The gRPC API end to end against a real PostgreSQL: every validation rule
// is sent as a bad request over gRPC, and the stored state must not change.
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>

#include <cmath>
#include <limits>
#include <functional>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "db/pg_connection.h"
#include "db/postgres_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "normsweep/v1/sweep_service.grpc.pb.h"
#include "normsweep/v1/worker_service.grpc.pb.h"
#include "proto/schema/api_limits.h"
#include "scheduler/scheduler_server.h"
#include "scheduler/sweep_expander.h"
#include "worker/scheduler_client.h"
#include "prometheus/text_serializer.h"
#include "tests/common/grpc_health.h"
#include "tests/common/grpc_reflection.h"
#include "tests/common/fresh_database.h"
#include "tests/common/in_process_scheduler.h"
#include "tests/common/specs.h"
#include "tests/common/requests.h"
#include "trainer/settings/config.h"

namespace normsweep::scheduler {
namespace {

using ::testing::HasSubstr;

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
    EXPECT_THAT(status.error_message(), HasSubstr(field));
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

TEST_F(GrpcApiTest, RejectsBadSweepSpecsNamingTheField) {
  ExpectBadSpec("empty placements", [](auto* r) { r->mutable_spec()->clear_placements(); }, "spec.placements");
  ExpectBadSpec("empty warmup_steps", [](auto* r) { r->mutable_spec()->clear_warmup_steps(); }, "spec.warmup_steps");
  ExpectBadSpec("empty peak_lrs", [](auto* r) { r->mutable_spec()->clear_peak_lrs(); }, "spec.peak_lrs");
  ExpectBadSpec("empty seeds", [](auto* r) { r->mutable_spec()->clear_seeds(); }, "spec.seeds");
  ExpectBadSpec("oversize axis", [](auto* r) {
    for (int i = 1; i <= schema::kMaxAxisValues; ++i) r->mutable_spec()->add_seeds(i);
  }, "spec.seeds: at most 1000");
  ExpectBadSpec("grid over the limit", [](auto* r) {  // 2 x 3 x 2 x 1000 = 12,000
    r->mutable_spec()->add_warmup_steps(1000);
    for (int i = 1; i < 1000; ++i) r->mutable_spec()->add_seeds(i);
  }, "limit is 10000");
  ExpectBadSpec("lr <= 0", [](auto* r) { r->mutable_spec()->add_peak_lrs(0); }, "spec.peak_lrs[2]");
  ExpectBadSpec("lr negative", [](auto* r) { r->mutable_spec()->add_peak_lrs(-1e-3); }, "spec.peak_lrs[2]");
  ExpectBadSpec("lr NaN", [](auto* r) { r->mutable_spec()->add_peak_lrs(std::nan("")); }, "spec.peak_lrs[2]");
  ExpectBadSpec("lr infinite", [](auto* r) { r->mutable_spec()->add_peak_lrs(INFINITY); }, "spec.peak_lrs[2]");
  ExpectBadSpec("negative warm-up", [](auto* r) { r->mutable_spec()->add_warmup_steps(-10); }, "spec.warmup_steps[2]");
  ExpectBadSpec("heads not dividing d_model", [](auto* r) { r->mutable_spec()->mutable_base()->set_heads(3); },
                "heads");
  ExpectBadSpec("unknown placement", [](auto* r) { r->mutable_spec()->add_placements("middle"); },
                "spec.placements[2]");
  ExpectBadSpec("missing name", [](auto* r) { r->mutable_spec()->clear_name(); }, "spec.name");
  ExpectBadSpec("name too long", [](auto* r) { r->mutable_spec()->set_name(std::string(201, 'n')); }, "spec.name");
  ExpectBadSpec("request_id too long", [](auto* r) { r->set_request_id(std::string(129, 'r')); }, "request_id");
  ExpectBadSpec("base string too long", [](auto* r) {
    r->mutable_spec()->mutable_base()->set_data_file(std::string(2000, 'f'));
  }, "spec.base.data_file");
  ExpectBadSpec("unknown extra axis", [](auto* r) {
    v1::ExtraAxis* a = r->mutable_spec()->add_extra_axes();
    a->set_field("colour");
    a->add_values("red");
  }, "spec.extra_axes[0].field");
  ExpectBadSpec("bad extra-axis value", [](auto* r) {
    v1::ExtraAxis* a = r->mutable_spec()->add_extra_axes();
    a->set_field("beta2");
    a->add_values("0.98");
    a->add_values("lots");
  }, "spec.extra_axes[0].values[1]");
  ExpectBadSpec("random search with a grid", [](auto* r) {
    r->mutable_spec()->mutable_random_search()->set_samples(3);
  }, "spec.warmup_steps");
  ExpectBadSpec("random search bad lr range", [](auto* r) {
    r->mutable_spec()->clear_warmup_steps();
    r->mutable_spec()->clear_peak_lrs();
    v1::RandomSearch* rs = r->mutable_spec()->mutable_random_search();
    rs->set_samples(3);
    rs->set_lr_min(0);
    rs->set_lr_max(1e-3);
  }, "spec.random_search.lr_min");
}

TEST_F(GrpcApiTest, EquivalentValuesAreDuplicatesNotSecondTrials) {
  // Found on the resolved values: refused naming the later value's field.
  ExpectBadSpec("placement alias post-ln", [](auto* r) { r->mutable_spec()->add_placements("post-ln"); },
                "spec.placements[2]: duplicate value: 'post-ln' is the same setting as spec.placements[0]");
  ExpectBadSpec("placement alias pre_ln", [](auto* r) { r->mutable_spec()->add_placements("pre_ln"); },
                "spec.placements[2]: duplicate value: 'pre_ln' is the same setting as spec.placements[1]");
  ExpectBadSpec("empty placement", [](auto* r) { r->mutable_spec()->add_placements(""); },
                "spec.placements[2]: must not be empty");
  auto axis = [](const std::string& field, std::vector<std::string> values) {
    return [field, values](v1::SubmitSweepRequest* r) {
      v1::ExtraAxis* a = r->mutable_spec()->add_extra_axes();
      a->set_field(field);
      for (const std::string& v : values) a->add_values(v);
    };
  };
  ExpectBadSpec("int axis 2 and 02", axis("layers", {"2", "02"}), "spec.extra_axes[0].values[1]: duplicate value");
  ExpectBadSpec("int axis 2 and ' 2'", axis("layers", {"1", "2", " 2"}), "spec.extra_axes[0].values[2]: duplicate");
  ExpectBadSpec("double axis 0.5 and 0.50", axis("dropout", {"0.5", "0.50"}), "spec.extra_axes[0].values[1]: duplicate");
  ExpectBadSpec("double axis 1e-1 and 0.1", axis("dropout", {"0.1", "1e-1"}), "spec.extra_axes[0].values[1]: duplicate");
  ExpectBadSpec("seeds twice", [](auto* r) { r->mutable_spec()->add_seeds(0); }, "spec.seeds[1]: duplicate value");
  ExpectBadSpec("lr twice, spelled apart", [](auto* r) { r->mutable_spec()->add_peak_lrs(0.0005); },
                "spec.peak_lrs[2]: duplicate value");
  ExpectBadSpec("random samples that coincide", [](auto* r) {
    r->mutable_spec()->clear_warmup_steps();
    r->mutable_spec()->clear_peak_lrs();
    v1::RandomSearch* rs = r->mutable_spec()->mutable_random_search();
    rs->set_samples(2);
    rs->set_lr_min(1e-3);
    rs->set_lr_max(1e-3);
  }, "spec.random_search: trials 0 and 2 would have the same resolved config");

  // Distinct values still expand, with canonical variant labels.
  v1::SubmitSweepRequest ok = GoodRequest();
  ok.set_request_id("canonical");
  axis("dropout", {"0.50", "0.1"})(&ok);
  grpc::ClientContext ctx;
  v1::SubmitSweepResponse resp;
  ASSERT_TRUE(sweeps_->SubmitSweep(&ctx, ok, &resp).ok());
  auto trials = store_->ListTrials(resp.sweep().id(), v1::TRIAL_STATE_UNSPECIFIED, -1, 100);
  ASSERT_TRUE(trials.ok());
  ASSERT_EQ(trials->size(), 16u);
  EXPECT_EQ((*trials)[0].variant(), "dropout=0.5");
  EXPECT_EQ((*trials)[8].variant(), "dropout=0.1");
}

TEST_F(GrpcApiTest, NulCharactersAreRefusedInEveryStoredStringBeforeTheDatabase) {
  const std::string nul("a\0b", 3);
  ExpectBadSpec("name", [&](auto* r) { r->mutable_spec()->set_name(nul); }, "spec.name: must not contain NUL");
  ExpectBadSpec("request_id", [&](auto* r) { r->set_request_id(nul); }, "request_id: must not contain NUL");
  ExpectBadSpec("base.device", [&](auto* r) { r->mutable_spec()->mutable_base()->set_device(nul); },
                "spec.base.device: must not contain NUL");
  ExpectBadSpec("base.task", [&](auto* r) { r->mutable_spec()->mutable_base()->set_task(nul); },
                "spec.base.task: must not contain NUL");
  ExpectBadSpec("base.data_file", [&](auto* r) { r->mutable_spec()->mutable_base()->set_data_file(nul); },
                "spec.base.data_file: must not contain NUL");
  ExpectBadSpec("placement", [&](auto* r) { r->mutable_spec()->add_placements(nul); },
                "spec.placements[2]: must not contain NUL");
  for (const char* field : {"data_file", "task", "optimizer"}) {
    ExpectBadSpec(field, [&](auto* r) {
      v1::ExtraAxis* a = r->mutable_spec()->add_extra_axes();
      a->set_field(field);
      a->add_values(nul);
    }, "spec.extra_axes[0].values[0]: must not contain NUL");
  }
  ExpectBadSpec("extra-axis field", [&](auto* r) {
    v1::ExtraAxis* a = r->mutable_spec()->add_extra_axes();
    a->set_field(nul);
    a->add_values("1");
  }, "spec.extra_axes[0].field: 'a\\x00b' cannot be an axis");
  ExpectRejected("worker hostname", [&](auto* ctx) {
    v1::RegisterWorkerRequest r;
    r.set_name("w");
    r.set_hostname(nul);
    v1::RegisterWorkerResponse resp;
    return workers_->RegisterWorker(ctx, r, &resp);
  }, grpc::StatusCode::INVALID_ARGUMENT, "hostname: must not contain NUL");
}

TEST_F(GrpcApiTest, BadValuesAreQuotedBrieflyAndTheChannelCarriesOn) {
  const std::string huge(1 << 20, 'x');
  auto expect_brief = [&](const std::string& what, const std::function<grpc::Status(grpc::ClientContext*)>& call,
                          grpc::StatusCode code, const std::string& field) {
    SCOPED_TRACE(what);
    grpc::ClientContext ctx;
    grpc::Status status = call(&ctx);
    EXPECT_EQ(status.error_code(), code) << status.error_message().substr(0, 300);
    EXPECT_THAT(status.error_message(), HasSubstr(field));
    EXPECT_LT(status.error_message().size(), 1000u);  // of a 1 MB value
    // Other calls on the same channel still work.
    grpc::ClientContext get_ctx;
    v1::GetSweepRequest get;
    get.set_sweep_id(sweep_id_);
    v1::GetSweepResponse got;
    EXPECT_TRUE(sweeps_->GetSweep(&get_ctx, get, &got).ok());
  };
  auto submit = [&](const std::function<void(v1::SubmitSweepRequest*)>& mutate) {
    return [this, mutate](grpc::ClientContext* ctx) {
      v1::SubmitSweepRequest r = GoodRequest();
      r.set_request_id("brief");
      mutate(&r);
      v1::SubmitSweepResponse resp;
      return sweeps_->SubmitSweep(ctx, r, &resp);
    };
  };
  expect_brief("1 MB placement", submit([&](auto* r) { r->mutable_spec()->add_placements(huge); }),
               grpc::StatusCode::INVALID_ARGUMENT, "spec.placements[2]: at most 64 characters");
  expect_brief("unknown placement, long", submit([&](auto* r) { r->mutable_spec()->add_placements(std::string(64, 'p')); }),
               grpc::StatusCode::INVALID_ARGUMENT, "spec.placements[2]: placement: unknown placement 'pppp");
  expect_brief("1 MB axis field", submit([&](auto* r) {
    v1::ExtraAxis* a = r->mutable_spec()->add_extra_axes();
    a->set_field(huge);
    a->add_values("1");
  }), grpc::StatusCode::INVALID_ARGUMENT, "(1048576 bytes) cannot be an axis");
  expect_brief("long int axis value", submit([&](auto* r) {
    v1::ExtraAxis* a = r->mutable_spec()->add_extra_axes();
    a->set_field("layers");
    a->add_values(std::string(1000, '9') + "x");
  }), grpc::StatusCode::INVALID_ARGUMENT, "(1001 bytes) is not an integer");
  expect_brief("long optimizer", submit([&](auto* r) {
    r->mutable_spec()->mutable_base()->set_optimizer(std::string(1000, 'o'));
  }), grpc::StatusCode::INVALID_ARGUMENT, "unknown optimizer 'oooo");
  expect_brief("1 MB health service name", [&](grpc::ClientContext* ctx) {
    grpc::health::v1::HealthCheckRequest r;
    r.set_service(huge);
    grpc::health::v1::HealthCheckResponse resp;
    return grpc::health::v1::Health::NewStub(channel_)->Check(ctx, r, &resp);
  }, grpc::StatusCode::NOT_FOUND, "unknown service: 'xxxx");
  for (const char* token : {" 12", "+5", "12 ", "-1", "0x10", "99999999999999999999"}) {
    ExpectRejected(token, [&](auto* ctx) {
      v1::ListSweepsRequest r;
      r.set_page_token(token);
      v1::ListSweepsResponse resp;
      return sweeps_->ListSweeps(ctx, r, &resp);
    }, grpc::StatusCode::INVALID_ARGUMENT, "page_token: malformed");
  }
}

TEST_F(GrpcApiTest, StreamProgressWithAnUnparsableMessageEndsWithAnError) {
  const std::string before = Snapshot();
  for (const std::string& bytes : {std::string("\x08", 1), std::string(11, '\xff'), std::string("\x22\x05ab", 4)}) {
    std::string reply;
    grpc::Status status =
        testing::CallRawStream(channel_, "/normsweep.v1.WorkerService/StreamProgress", bytes, &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("could not be parsed"));
    EXPECT_TRUE(reply.empty());
  }
  EXPECT_EQ(Snapshot(), before);
  // A well-formed batch over the same raw path is still answered.
  std::string reply;
  grpc::Status status = testing::CallRawStream(channel_, "/normsweep.v1.WorkerService/StreamProgress",
                                               Batch(1, 3).SerializeAsString(), &reply);
  EXPECT_TRUE(status.ok()) << status.error_message();
  v1::ReportProgressResponse resp;
  EXPECT_TRUE(resp.ParseFromString(reply));
}

TEST_F(GrpcApiTest, GetSweepAnalysisReturnsTheViewsRows) {
  // One trial finished, one leased, six pending.
  grpc::ClientContext fctx;
  v1::FinishTrialRequest finish = testing::FinishOf(worker_id_, leased_, v1::TRIAL_SUCCEEDED);
  finish.mutable_result()->set_final_val_loss(2.5);
  v1::FinishTrialResponse fresp;
  ASSERT_TRUE(workers_->FinishTrial(&fctx, finish, &fresp).ok());

  grpc::ClientContext ctx;
  v1::GetSweepAnalysisRequest req;
  req.set_sweep_id(sweep_id_);
  v1::GetSweepAnalysisResponse resp;
  grpc::Status st = sweeps_->GetSweepAnalysis(&ctx, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(resp.cells_size(), 8);  // 2 placements x 2 warm-ups x 2 lrs
  int finished = 0, unfinished = 0;
  for (const v1::GridCell& c : resp.cells()) {
    EXPECT_EQ(c.trials(), 1);
    finished += c.succeeded();
    unfinished += c.unfinished();
    if (c.succeeded() == 1) {
      EXPECT_EQ(c.placement(), leased_.config().placement());
      EXPECT_EQ(c.warmup_steps(), leased_.config().warmup_steps());
      EXPECT_DOUBLE_EQ(c.peak_lr(), leased_.config().lr());
      EXPECT_EQ(c.mean_val_loss(), 2.5);
      EXPECT_FALSE(c.has_std_val_loss());  // one seed
    } else {
      EXPECT_FALSE(c.has_mean_val_loss());
    }
  }
  EXPECT_EQ(finished, 1);
  EXPECT_EQ(unfinished, 7);
  ASSERT_EQ(resp.placements_size(), 2);
  EXPECT_EQ(resp.placements(0).placement(), "post");
  EXPECT_EQ(resp.placements(1).placement(), "pre");
  EXPECT_EQ(resp.placements(0).tolerance(), 0.05);  // the view's default

  using C = grpc::StatusCode;
  for (double bad : {-0.1, 11.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    ExpectRejected("bad tolerance", [&](auto* c) {
      v1::GetSweepAnalysisRequest r;
      r.set_sweep_id(sweep_id_);
      r.set_near_best_tolerance(bad);
      v1::GetSweepAnalysisResponse out;
      return sweeps_->GetSweepAnalysis(c, r, &out);
    }, C::INVALID_ARGUMENT, "near_best_tolerance");
  }
  ExpectRejected("unknown sweep", [&](auto* c) {
    v1::GetSweepAnalysisRequest r;
    r.set_sweep_id(987654);
    v1::GetSweepAnalysisResponse out;
    return sweeps_->GetSweepAnalysis(c, r, &out);
  }, C::NOT_FOUND, "987654");
}

TEST_F(GrpcApiTest, ReusedRequestIdWithAnotherSpecIsAlreadyExists) {
  v1::SubmitSweepRequest r = GoodRequest();
  r.mutable_spec()->add_seeds(9);
  ExpectRejected("reuse", [&](grpc::ClientContext* ctx) {
    v1::SubmitSweepResponse resp;
    return sweeps_->SubmitSweep(ctx, r, &resp);
  }, grpc::StatusCode::ALREADY_EXISTS, "request_id 'good'");
  grpc::ClientContext ctx;
  v1::SubmitSweepResponse resp;
  ASSERT_TRUE(sweeps_->SubmitSweep(&ctx, GoodRequest(), &resp).ok());
  EXPECT_FALSE(resp.created());
  EXPECT_EQ(resp.sweep().id(), sweep_id_);
}

TEST_F(GrpcApiTest, RejectsUnknownAndMissingIds) {
  using C = grpc::StatusCode;
  ExpectRejected("GetSweep 0", [&](auto* ctx) {
    v1::GetSweepRequest r;
    v1::GetSweepResponse resp;
    return sweeps_->GetSweep(ctx, r, &resp);
  }, C::INVALID_ARGUMENT, "sweep_id");
  ExpectRejected("GetSweep unknown", [&](auto* ctx) {
    v1::GetSweepRequest r;
    r.set_sweep_id(987654);
    v1::GetSweepResponse resp;
    return sweeps_->GetSweep(ctx, r, &resp);
  }, C::NOT_FOUND, "sweep_id 987654");
  ExpectRejected("CancelSweep unknown", [&](auto* ctx) {
    v1::CancelSweepRequest r;
    r.set_sweep_id(987654);
    v1::CancelSweepResponse resp;
    return sweeps_->CancelSweep(ctx, r, &resp);
  }, C::NOT_FOUND, "sweep_id 987654");
  ExpectRejected("ListTrials unknown", [&](auto* ctx) {
    v1::ListTrialsRequest r;
    r.set_sweep_id(987654);
    v1::ListTrialsResponse resp;
    return sweeps_->ListTrials(ctx, r, &resp);
  }, C::NOT_FOUND, "sweep_id 987654");
  ExpectRejected("GetTrial unknown", [&](auto* ctx) {
    v1::GetTrialRequest r;
    r.set_trial_id(555555);
    v1::GetTrialResponse resp;
    return sweeps_->GetTrial(ctx, r, &resp);
  }, C::NOT_FOUND, "trial_id 555555");
  ExpectRejected("WatchSweep unknown", [&](auto* ctx) {
    v1::WatchSweepRequest r;
    r.set_sweep_id(987654);
    auto reader = sweeps_->WatchSweep(ctx, r);
    v1::WatchSweepEvent e;
    while (reader->Read(&e)) {}
    return reader->Finish();
  }, C::NOT_FOUND, "sweep_id 987654");
  ExpectRejected("LeaseTrial unknown worker", [&](auto* ctx) {
    v1::LeaseTrialRequest r;
    r.set_worker_id(4242);
    v1::LeaseTrialResponse resp;
    return workers_->LeaseTrial(ctx, r, &resp);
  }, C::NOT_FOUND, "worker_id 4242");
  ExpectRejected("Heartbeat unknown worker", [&](auto* ctx) {
    v1::HeartbeatRequest r;
    r.set_worker_id(4242);
    v1::HeartbeatResponse resp;
    return workers_->Heartbeat(ctx, r, &resp);
  }, C::NOT_FOUND, "worker_id 4242");
  ExpectRejected("ReportProgress unknown trial", [&](auto* ctx) {
    v1::ReportProgressRequest r;
    r.set_worker_id(worker_id_);
    r.set_trial_id(555555);
    r.set_attempt(1);
    r.add_points()->set_step(1);
    v1::ReportProgressResponse resp;
    return workers_->ReportProgress(ctx, r, &resp);
  }, C::NOT_FOUND, "trial_id 555555");
  ExpectRejected("FinishTrial unknown trial", [&](auto* ctx) {
    v1::FinishTrialRequest r;
    r.set_worker_id(worker_id_);
    r.set_trial_id(555555);
    r.set_attempt(1);
    r.set_outcome(v1::TRIAL_SUCCEEDED);
    v1::FinishTrialResponse resp;
    return workers_->FinishTrial(ctx, r, &resp);
  }, C::NOT_FOUND, "trial_id 555555");
  ExpectRejected("ReportProgress without the lease", [&](auto* ctx) {
    v1::ReportProgressRequest r;
    r.set_worker_id(worker_id_);
    r.set_trial_id(leased_.id());
    r.set_attempt(leased_.attempts() + 1);
    r.add_points()->set_step(1);
    v1::ReportProgressResponse resp;
    return workers_->ReportProgress(ctx, r, &resp);
  }, C::FAILED_PRECONDITION, "lease not held");
}

TEST_F(GrpcApiTest, RejectsBadWorkerRequestsNamingTheField) {
  using C = grpc::StatusCode;
  auto progress = [&](const std::function<void(v1::ReportProgressRequest*)>& mutate) {
    return [this, mutate](grpc::ClientContext* ctx) {
      v1::ReportProgressRequest r = testing::ProgressOf(worker_id_, leased_);
      r.add_points()->set_step(1);
      mutate(&r);
      v1::ReportProgressResponse resp;
      return workers_->ReportProgress(ctx, r, &resp);
    };
  };
  ExpectRejected("negative step", progress([](auto* r) { r->mutable_points(0)->set_step(-1); }), C::INVALID_ARGUMENT,
                 "points[0].step");
  ExpectRejected("too many points", progress([](auto* r) {
    for (int i = 0; i < schema::kMaxPointsPerReport; ++i) r->add_points()->set_step(i + 2);
  }), C::INVALID_ARGUMENT, "points: at most");
  ExpectRejected("matrix name too long", progress([](auto* r) {
    v1::LayerGradNorm* n = r->add_layer_grad_norms()->add_norms();
    n->set_matrix(std::string(65, 'm'));
  }), C::INVALID_ARGUMENT, "layer_grad_norms[0].norms[0].matrix");
  ExpectRejected("missing attempt", progress([](auto* r) { r->set_attempt(0); }), C::INVALID_ARGUMENT, "attempt");
  auto finish = [&](const std::function<void(v1::FinishTrialRequest*)>& mutate) {
    return [this, mutate](grpc::ClientContext* ctx) {
      v1::FinishTrialRequest r = testing::FinishOf(worker_id_, leased_, v1::TRIAL_SUCCEEDED);
      mutate(&r);
      v1::FinishTrialResponse resp;
      return workers_->FinishTrial(ctx, r, &resp);
    };
  };
  ExpectRejected("outcome PENDING", finish([](auto* r) { r->set_outcome(v1::TRIAL_PENDING); }), C::INVALID_ARGUMENT,
                 "outcome");
  ExpectRejected("outcome unset", finish([](auto* r) { r->clear_outcome(); }), C::INVALID_ARGUMENT, "outcome");
  ExpectRejected("error too long", finish([](auto* r) {
    r->set_outcome(v1::TRIAL_FAILED);
    r->mutable_result()->set_error(std::string(schema::kMaxErrorLength + 1, 'e'));
  }), C::INVALID_ARGUMENT, "result.error");
  ExpectRejected("error with a NUL character", finish([](auto* r) {
    r->set_outcome(v1::TRIAL_FAILED);
    r->mutable_result()->set_error(std::string("bad\0byte", 8));
  }), C::INVALID_ARGUMENT, "result.error");
  ExpectRejected("interruption without retry", finish([](auto* r) {
    r->set_outcome(v1::TRIAL_FAILED);
    r->mutable_result()->set_error("killed");
    r->set_interruption("external_signal");
  }), C::INVALID_ARGUMENT, "interruption: only with retry");
  ExpectRejected("unknown interruption", finish([](auto* r) {
    r->set_outcome(v1::TRIAL_FAILED);
    r->mutable_result()->set_error("killed");
    r->set_retry(true);
    r->set_interruption("cosmic_ray");
  }), C::INVALID_ARGUMENT, "interruption: unknown cause 'cosmic_ray'; one of worker_lost, lease_lost, "
                           "scheduler_restart, external_signal, worker_drained");
  ExpectRejected("worker name too long", [&](auto* ctx) {
    v1::RegisterWorkerRequest r;
    r.set_name(std::string(201, 'w'));
    v1::RegisterWorkerResponse resp;
    return workers_->RegisterWorker(ctx, r, &resp);
  }, C::INVALID_ARGUMENT, "name");
  ExpectRejected("worker device too long", [&](auto* ctx) {
    v1::RegisterWorkerRequest r;
    r.set_name("w");
    r.add_devices(std::string(65, 'd'));
    v1::RegisterWorkerResponse resp;
    return workers_->RegisterWorker(ctx, r, &resp);
  }, C::INVALID_ARGUMENT, "devices[0]");
  ExpectRejected("page size", [&](auto* ctx) {
    v1::ListSweepsRequest r;
    r.set_page_size(5000);
    v1::ListSweepsResponse resp;
    return sweeps_->ListSweeps(ctx, r, &resp);
  }, C::INVALID_ARGUMENT, "page_size");
  ExpectRejected("page token", [&](auto* ctx) {
    v1::ListTrialsRequest r;
    r.set_sweep_id(sweep_id_);
    r.set_page_token("abc");
    v1::ListTrialsResponse resp;
    return sweeps_->ListTrials(ctx, r, &resp);
  }, C::INVALID_ARGUMENT, "page_token");

  // Every rejection above is counted by method and code (as /metrics shows it).
  auto metrics = std::make_unique<std::string>(prometheus::TextSerializer().Serialize(server_->registry().Collect()));
  EXPECT_THAT(*metrics, HasSubstr("normsweep_scheduler_rpc_errors_total{code=\"INVALID_ARGUMENT\",method=\"ReportProgress\"} 4"));
  EXPECT_THAT(*metrics, HasSubstr("normsweep_scheduler_rpc_errors_total{code=\"INVALID_ARGUMENT\",method=\"FinishTrial\"} 6"));

  // A valid interruption re-queues the trial and is counted by its cause.
  grpc::ClientContext ctx;
  v1::FinishTrialRequest r = testing::FinishOf(worker_id_, leased_, v1::TRIAL_FAILED);
  r.set_retry(true);
  r.set_interruption("external_signal");
  r.mutable_result()->set_error("normsweep-train killed by signal 9 (Killed) without a final event");
  v1::FinishTrialResponse resp;
  ASSERT_TRUE(workers_->FinishTrial(&ctx, r, &resp).ok());
  EXPECT_EQ(resp.trial().state(), v1::TRIAL_PENDING);
  EXPECT_EQ(resp.trial().interruptions(), 1);
  metrics = std::make_unique<std::string>(prometheus::TextSerializer().Serialize(server_->registry().Collect()));
  EXPECT_THAT(*metrics, HasSubstr("normsweep_scheduler_interruptions_total{cause=\"external_signal\"} 1"));
  EXPECT_THAT(*metrics, HasSubstr("normsweep_scheduler_interruptions_total{cause=\"worker_lost\"} 0"));
  EXPECT_THAT(*metrics, HasSubstr("normsweep_scheduler_attempts_requeued_total{reason=\"interrupted\"} 1"));
}

// The diagnostics' fields (issue 16): each bad value names its field, the
// batch is refused whole and nothing is stored.
TEST_F(GrpcApiTest, RejectsBadDiagnosticsAndInitialLossNamingTheField) {
  using C = grpc::StatusCode;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  auto progress = [&](const std::function<void(v1::ReportProgressRequest*)>& mutate) {
    return [this, mutate](grpc::ClientContext* ctx) {
      v1::ReportProgressRequest r = Batch(0, 3);
      r.mutable_points(0)->set_val_loss(5.5);
      r.mutable_points(0)->set_output_log_z(5.5);
      for (int step : {0, 2}) {
        v1::StepDiagnostics* d = r.add_diagnostics();
        d->set_step(step);
        for (int layer = 0; layer < 2; ++layer) {
          v1::LayerDiagnostics* l = d->add_layers();
          l->set_layer(layer);
          l->set_max_attn_logit(3.0);
          if (step > 0) l->set_update_ratio_fc1(1e-3);
        }
      }
      mutate(&r);
      v1::ReportProgressResponse resp;
      return workers_->ReportProgress(ctx, r, &resp);
    };
  };
  ExpectRejected("NaN log Z", progress([&](auto* r) { r->mutable_points(0)->set_output_log_z(nan); }),
                 C::INVALID_ARGUMENT, "points[0].output_log_z: must be finite or absent, not nan");
  ExpectRejected("infinite z term", progress([&](auto* r) { r->mutable_points(1)->set_z_term(inf); }),
                 C::INVALID_ARGUMENT, "points[1].z_term: must be finite or absent, not inf");
  ExpectRejected("negative diagnostics step", progress([](auto* r) { r->mutable_diagnostics(1)->set_step(-2); }),
                 C::INVALID_ARGUMENT, "diagnostics[1].step: must be >= 0");
  ExpectRejected("layer missing", progress([](auto* r) { r->mutable_diagnostics(1)->mutable_layers(1)->clear_layer(); }),
                 C::INVALID_ARGUMENT, "diagnostics[1].layers[1].layer: required");
  ExpectRejected("negative layer", progress([](auto* r) { r->mutable_diagnostics(0)->mutable_layers(1)->set_layer(-1); }),
                 C::INVALID_ARGUMENT, "diagnostics[0].layers[1].layer: must be in [0, 256), not -1");
  ExpectRejected("layer past any model", progress([](auto* r) {
    r->mutable_diagnostics(0)->mutable_layers(0)->set_layer(trainer::kMaxLayers);
  }), C::INVALID_ARGUMENT, "diagnostics[0].layers[0].layer: must be in [0, 256), not 256");
  ExpectRejected("infinite attention logit", progress([&](auto* r) {
    r->mutable_diagnostics(1)->mutable_layers(1)->set_max_attn_logit(inf);
  }), C::INVALID_ARGUMENT, "diagnostics[1].layers[1].max_attn_logit: must be finite or absent, not inf");
  for (const char* field : {"update_ratio_qkv", "update_ratio_proj", "update_ratio_fc1", "update_ratio_fc2"}) {
    ExpectRejected(field, progress([&, field](auto* r) {
      v1::LayerDiagnostics* l = r->mutable_diagnostics(1)->mutable_layers(0);
      l->GetReflection()->SetDouble(l, l->GetDescriptor()->FindFieldByName(field), -inf);
    }), C::INVALID_ARGUMENT, absl::StrCat("diagnostics[1].layers[0].", field, ": must be finite or absent, not -inf"));
  }
  ExpectRejected("too many diagnostics steps", progress([](auto* r) {
    for (int i = 0; i < schema::kMaxDiagnosticStepsPerReport; ++i) r->add_diagnostics()->set_step(i + 3);
  }), C::INVALID_ARGUMENT, "diagnostics: at most 10000 steps");
  ExpectRejected("too many diagnostics layers", progress([](auto* r) {
    v1::StepDiagnostics* d = r->add_diagnostics();
    d->set_step(3);
    for (int i = 0; i < schema::kMaxDiagnosticLayersPerReport; ++i) d->add_layers()->set_layer(i % 256);
  }), C::INVALID_ARGUMENT, "diagnostics: at most 10000 layers in all");
  ExpectRejected("grad norm layer past any model", progress([](auto* r) {
    v1::LayerGradNorm* n = r->add_layer_grad_norms()->add_norms();
    n->set_layer(1000);
    n->set_matrix("ffn.fc1");
  }), C::INVALID_ARGUMENT, "layer_grad_norms[0].norms[0].layer: must be in [0, 256), not 1000");
  for (double bad : {nan, inf}) {
    ExpectRejected("non-finite l0", [&](grpc::ClientContext* ctx) {
      v1::FinishTrialRequest r = testing::FinishOf(worker_id_, leased_, v1::TRIAL_SUCCEEDED);
      r.mutable_result()->set_init_val_loss(bad);
      v1::FinishTrialResponse resp;
      return workers_->FinishTrial(ctx, r, &resp);
    }, C::INVALID_ARGUMENT, "result.init_val_loss: must be finite or absent");
  }

  // The same batch, unchanged, is stored; absent values are fine.
  grpc::ClientContext ctx;
  v1::ReportProgressResponse resp;
  ASSERT_TRUE(progress([](auto*) {})(&ctx).ok());
}

TEST_F(GrpcApiTest, GetTrialReturnsTheDiagnosticsAndTheInitialLoss) {
  v1::ReportProgressRequest p = Batch(0, 20);
  p.mutable_points(0)->clear_train_loss();  // the evaluation before the first update
  p.mutable_points(0)->set_val_loss(5.5);
  p.mutable_points(0)->set_output_log_z(5.25);
  p.mutable_points(20)->set_val_loss(3.5);
  p.mutable_points(20)->set_output_log_z(4.75);
  p.mutable_points(7)->set_z_term(0.0125);  // z_loss > 0: the step's z term
  for (int step : {20, 0}) {  // in any order
    v1::StepDiagnostics* d = p.add_diagnostics();
    d->set_step(step);
    for (int layer : {1, 0}) {
      v1::LayerDiagnostics* l = d->add_layers();
      l->set_layer(layer);
      l->set_max_attn_logit(2.0 + layer + step / 10.0);
      if (step > 0) {
        l->set_update_ratio_qkv(0.001 * (layer + 1));
        l->set_update_ratio_fc2(0.004 * (layer + 1));
      }
    }
  }
  {
    grpc::ClientContext ctx;
    v1::ReportProgressResponse resp;
    ASSERT_TRUE(workers_->ReportProgress(&ctx, p, &resp).ok());
  }
  {
    grpc::ClientContext ctx;
    v1::FinishTrialRequest f = testing::FinishOf(worker_id_, leased_, v1::TRIAL_SUCCEEDED);
    f.mutable_result()->set_final_val_loss(3.5);
    f.mutable_result()->set_init_val_loss(5.5);
    v1::FinishTrialResponse resp;
    ASSERT_TRUE(workers_->FinishTrial(&ctx, f, &resp).ok());
    EXPECT_DOUBLE_EQ(resp.trial().result().init_val_loss(), 5.5);
  }
  const v1::GetTrialResponse t = GetTrialOverGrpc(leased_.id());
  EXPECT_DOUBLE_EQ(t.trial().result().init_val_loss(), 5.5);
  ASSERT_EQ(t.metrics_size(), 21);
  EXPECT_EQ(t.metrics(0).step(), 0);
  EXPECT_DOUBLE_EQ(t.metrics(0).val_loss(), 5.5);
  EXPECT_DOUBLE_EQ(t.metrics(0).output_log_z(), 5.25);
  EXPECT_FALSE(t.metrics(0).has_train_loss());
  EXPECT_DOUBLE_EQ(t.metrics(20).output_log_z(), 4.75);
  EXPECT_FALSE(t.metrics(10).has_output_log_z());
  EXPECT_DOUBLE_EQ(t.metrics(7).z_term(), 0.0125);
  EXPECT_FALSE(t.metrics(8).has_z_term());
  ASSERT_EQ(t.diagnostics_size(), 2);  // by step, then layer
  EXPECT_EQ(t.diagnostics(0).step(), 0);
  EXPECT_EQ(t.diagnostics(1).step(), 20);
  ASSERT_EQ(t.diagnostics(1).layers_size(), 2);
  EXPECT_EQ(t.diagnostics(1).layers(0).layer(), 0);
  EXPECT_DOUBLE_EQ(t.diagnostics(1).layers(1).max_attn_logit(), 5.0);
  EXPECT_DOUBLE_EQ(t.diagnostics(1).layers(1).update_ratio_fc2(), 0.008);
  EXPECT_FALSE(t.diagnostics(1).layers(1).has_update_ratio_proj());
  EXPECT_FALSE(t.diagnostics(0).layers(0).has_update_ratio_qkv());
}

TEST_F(GrpcApiTest, WorkerLifecycleAndWatchOverGrpc) {
  // Watch from the start, on its own thread.
  std::vector<v1::WatchSweepEvent> events;
  grpc::Status watch_status;
  grpc::ClientContext watch_ctx;
  v1::WatchSweepRequest watch_req;
  watch_req.set_sweep_id(sweep_id_);
  auto reader = sweeps_->WatchSweep(&watch_ctx, watch_req);
  std::thread watcher([&] {
    v1::WatchSweepEvent e;
    while (reader->Read(&e)) events.push_back(e);
    watch_status = reader->Finish();
  });

  std::vector<v1::Trial> trials = {leased_};
  while (true) {
    grpc::ClientContext ctx;
    v1::LeaseTrialRequest r;
    r.set_worker_id(worker_id_);
    v1::LeaseTrialResponse resp;
    ASSERT_TRUE(workers_->LeaseTrial(&ctx, r, &resp).ok());
    if (!resp.leased()) break;
    trials.push_back(resp.trial());
  }
  ASSERT_EQ(trials.size(), 8u);
  for (const v1::Trial& t : trials) {
    grpc::ClientContext pctx;
    v1::ReportProgressRequest p = testing::ProgressOf(worker_id_, t);
    for (int step = 1; step <= 5; ++step) {
      v1::MetricPoint* m = p.add_points();
      m->set_step(step);
      m->set_train_loss(6.0 - step);
    }
    v1::ReportProgressResponse presp;
    ASSERT_TRUE(workers_->ReportProgress(&pctx, p, &presp).ok());
    EXPECT_FALSE(presp.cancel_requested());
    grpc::ClientContext fctx;
    v1::FinishTrialRequest f = testing::FinishOf(worker_id_, t, t.config().placement() == "post" && t.config().warmup_steps() == 0 ? v1::TRIAL_DIVERGED
                                                                                      : v1::TRIAL_SUCCEEDED);
    f.mutable_result()->set_final_val_loss(1.0 + t.index());
    v1::FinishTrialResponse fresp;
    ASSERT_TRUE(workers_->FinishTrial(&fctx, f, &fresp).ok());
  }
  watcher.join();
  EXPECT_TRUE(watch_status.ok()) << watch_status.error_message();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().sweep().state(), v1::SWEEP_COMPLETED);
  EXPECT_EQ(events.back().sweep().counts().diverged(), 2);
  EXPECT_EQ(events.back().sweep().counts().succeeded(), 6);

  const v1::GetTrialResponse gresp = GetTrialOverGrpc(trials[3].id());
  EXPECT_EQ(gresp.metrics_size(), 5);
  EXPECT_EQ(gresp.trial().last_step(), 5);
}

TEST_F(GrpcApiTest, StreamProgressAnswersEachBatchInOrderAndEndsOnTheFirstBadOne) {
  {  // three batches (one re-sent), then half-close: OK
    grpc::ClientContext ctx;
    auto stream = workers_->StreamProgress(&ctx);
    for (int first : {1, 6, 6}) {
      ASSERT_TRUE(stream->Write(Batch(first, first + 4)));
      v1::ReportProgressResponse resp;
      ASSERT_TRUE(stream->Read(&resp));
      EXPECT_FALSE(resp.cancel_requested());
    }
    ASSERT_TRUE(stream->WritesDone());
    grpc::Status status = stream->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  const v1::GetTrialResponse got = GetTrialOverGrpc(leased_.id());
  ASSERT_EQ(got.metrics_size(), 10);
  EXPECT_EQ(got.metrics(9).step(), 10);
  EXPECT_EQ(got.trial().last_step(), 10);

  // A bad request ends the stream with its status (the field named), and
  // what was sent after it is not stored.
  const std::string before = Snapshot();
  grpc::ClientContext ctx;
  auto stream = workers_->StreamProgress(&ctx);
  v1::ReportProgressRequest bad = Batch(11, 15);
  bad.mutable_points(2)->set_step(-3);
  ASSERT_TRUE(stream->Write(bad));
  stream->Write(Batch(11, 15));
  v1::ReportProgressResponse resp;
  EXPECT_FALSE(stream->Read(&resp));
  grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("points[2].step"));
  EXPECT_EQ(Snapshot(), before);

  // Unknown trial: NOT_FOUND, as ReportProgress says it.
  grpc::ClientContext ctx2;
  auto stream2 = workers_->StreamProgress(&ctx2);
  ASSERT_TRUE(stream2->Write(Batch(11, 15, 987654321)));
  EXPECT_FALSE(stream2->Read(&resp));
  status = stream2->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("987654321"));
}

// The worker's client sends progress over one stream: a refused batch ends
// that stream, the next batch opens another; a stream the client cancels
// mid-request leaves the scheduler serving.
TEST_F(GrpcApiTest, WorkerClientReopensItsProgressStream) {
  worker::GrpcSchedulerClient client(absl::StrCat("127.0.0.1:", server_->grpc_port()), absl::Seconds(10));
  ASSERT_TRUE(client.ReportProgress(Batch(1, 5)).ok());
  v1::ReportProgressRequest bad = Batch(6, 10);
  bad.mutable_points(1)->set_step(-1);
  absl::StatusOr<v1::ReportProgressResponse> refused = client.ReportProgress(bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("points[1].step"));
  absl::StatusOr<v1::ReportProgressResponse> next = client.ReportProgress(Batch(6, 10));
  EXPECT_TRUE(next.ok()) << next.status();

  {  // cancelled by its client while the scheduler answers
    grpc::ClientContext ctx;
    auto stream = workers_->StreamProgress(&ctx);
    stream->Write(Batch(11, 12));
    ctx.TryCancel();
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  next = client.ReportProgress(Batch(11, 15));
  EXPECT_TRUE(next.ok()) << next.status();
  const v1::GetTrialResponse got = GetTrialOverGrpc(leased_.id());
  EXPECT_EQ(got.metrics_size(), 15);
  EXPECT_EQ(got.trial().last_step(), 15);
}

// A stopping scheduler cancels the progress streams that wait for their
// worker's next batch instead of waiting out its shutdown deadline (5 s),
// and refuses new ones.
TEST_F(GrpcApiTest, ShutdownEndsIdleProgressStreamsAtOnce) {
  grpc::ClientContext ctx;
  auto stream = workers_->StreamProgress(&ctx);
  ASSERT_TRUE(stream->Write(Batch(1, 1)));
  v1::ReportProgressResponse resp;
  ASSERT_TRUE(stream->Read(&resp));  // answered; the stream now waits for the next batch
  const absl::Time start = absl::Now();
  server_->Shutdown();
  EXPECT_LT(absl::Now() - start, absl::Seconds(4)) << "waited for the shutdown deadline";
  EXPECT_FALSE(stream->Read(&resp));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(GrpcApiTest, ListWorkersOverGrpc) {
  const int64_t w2 = RegisterWorker("w2");
  grpc::ClientContext ctx;
  v1::ListWorkersRequest req;
  req.set_live_only(true);
  v1::ListWorkersResponse resp;
  grpc::Status status = sweeps_->ListWorkers(&ctx, req, &resp);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(resp.workers_size(), 2);
  EXPECT_EQ(resp.workers(0).id(), worker_id_);
  EXPECT_EQ(resp.workers(0).name(), "w1");
  EXPECT_EQ(resp.workers(0).devices_size(), 1);
  EXPECT_EQ(resp.workers(0).devices(0), "cpu");
  EXPECT_TRUE(resp.workers(0).live());
  EXPECT_EQ(resp.workers(0).running_trials(), 1);  // the trial SetUp leased
  EXPECT_TRUE(resp.workers(0).has_registered_at());
  EXPECT_TRUE(resp.workers(0).has_last_heartbeat_at());
  EXPECT_EQ(resp.workers(1).id(), w2);
  EXPECT_EQ(resp.workers(1).running_trials(), 0);
}

TEST_F(GrpcApiTest, HealthCheckSaysServing) {
  std::string bytes;
  const grpc::Status status = testing::CallHealthCheck(channel_, &bytes);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));  // HealthCheckResponse{status: SERVING}
}

TEST_F(GrpcApiTest, ReflectionListsTheServices) {
  // grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo with
  // {list_services: ""} (field 7: bytes 3a 00), as grpcurl sends it.
  std::string bytes;
  const grpc::Status status = testing::CallReflection(channel_, std::string("\x3a\x00", 2), &bytes);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(bytes, HasSubstr("normsweep.v1.SweepService"));
  EXPECT_THAT(bytes, HasSubstr("normsweep.v1.WorkerService"));
  EXPECT_THAT(bytes, HasSubstr("grpc.health.v1.Health"));
}

// boundary_search specs (issue 17): each bad field is refused over gRPC,
// naming it, and nothing is stored; a good one stores its coarse trials with
// their lines.
TEST_F(GrpcApiTest, RejectsBadBoundarySearchNamingTheField) {
  auto boundary = [](const std::function<void(v1::BoundarySearch*)>& change) {
    return [change](v1::SubmitSweepRequest* r) {
      r->mutable_spec()->clear_peak_lrs();
      v1::BoundarySearch* b = r->mutable_spec()->mutable_boundary_search();
      b->set_lr_min(1e-4);
      b->set_lr_max(1e-1);
      change(b);
    };
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  ExpectBadSpec("lr_min >= lr_max", boundary([](auto* b) { b->set_lr_min(0.2); }),
                "spec.boundary_search.lr_max: must be finite and > lr_min");
  ExpectBadSpec("lr_min = lr_max", boundary([](auto* b) { b->set_lr_max(1e-4); }), "spec.boundary_search.lr_max");
  ExpectBadSpec("lr_min 0", boundary([](auto* b) { b->set_lr_min(0); }), "spec.boundary_search.lr_min");
  ExpectBadSpec("lr_min NaN", boundary([nan](auto* b) { b->set_lr_min(nan); }), "spec.boundary_search.lr_min");
  ExpectBadSpec("lr_max infinite", boundary([inf](auto* b) { b->set_lr_max(inf); }), "spec.boundary_search.lr_max");
  ExpectBadSpec("resolution 1", boundary([](auto* b) { b->set_resolution(1); }),
                "spec.boundary_search.resolution: must be finite and > 1");
  ExpectBadSpec("resolution < 1", boundary([](auto* b) { b->set_resolution(0.8); }), "spec.boundary_search.resolution");
  ExpectBadSpec("resolution NaN", boundary([nan](auto* b) { b->set_resolution(nan); }),
                "spec.boundary_search.resolution");
  ExpectBadSpec("initial_points 1", boundary([](auto* b) { b->set_initial_points(1); }),
                "spec.boundary_search.initial_points");
  ExpectBadSpec("min_improvement < 0", boundary([](auto* b) { b->set_min_improvement(-1); }),
                "spec.boundary_search.min_improvement");
  ExpectBadSpec("max_val_loss infinite", boundary([inf](auto* b) { b->set_max_val_loss(inf); }),
                "spec.boundary_search.max_val_loss");
  ExpectBadSpec("peak_lrs too", [&](v1::SubmitSweepRequest* r) {
    boundary([](auto*) {})(r);
    r->mutable_spec()->add_peak_lrs(1e-3);
  }, "spec.peak_lrs: must be empty when boundary_search is set");
  ExpectBadSpec("random_search too", [&](v1::SubmitSweepRequest* r) {
    boundary([](auto*) {})(r);
    r->mutable_spec()->mutable_random_search()->set_samples(2);
  }, "spec.random_search: must be unset when boundary_search is set");

  v1::SubmitSweepRequest good = GoodRequest();
  good.set_request_id("boundary");
  boundary([](auto*) {})(&good);
  grpc::ClientContext ctx;
  v1::SubmitSweepResponse resp;
  ASSERT_TRUE(sweeps_->SubmitSweep(&ctx, good, &resp).ok());
  EXPECT_EQ(resp.sweep().trial_count(), 2 * 2 * 4);  // 4 lines x 4 coarse lrs
  EXPECT_EQ(resp.sweep().spec().boundary_search().resolution(), 1.25);  // the default, stored
  grpc::ClientContext lctx;
  v1::ListTrialsRequest lreq;
  lreq.set_sweep_id(resp.sweep().id());
  v1::ListTrialsResponse trials;
  ASSERT_TRUE(sweeps_->ListTrials(&lctx, lreq, &trials).ok());
  ASSERT_EQ(trials.trials_size(), 16);
  for (const v1::Trial& t : trials.trials()) EXPECT_TRUE(t.has_boundary_line()) << t.index();
  EXPECT_EQ(trials.trials(15).boundary_line(), 3);
}

}  // namespace
}  // namespace normsweep::scheduler
