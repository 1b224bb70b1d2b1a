// The SweepService over gRPC against a real PostgreSQL: every rule of a
// sweep request is sent as a bad request, and the stored state must not
// change; analyses and idempotent submission.
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

#include "tests/scheduler/grpc_api_fixture.h"

namespace normsweep::scheduler {
namespace {

using ::testing::HasSubstr;

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
