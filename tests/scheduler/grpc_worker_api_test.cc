// The WorkerService over gRPC against a real PostgreSQL: every rule of a
// worker request is sent as a bad request, and the stored state must not
// change; the worker's lifecycle, its progress stream, health and reflection.
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

}  // namespace
}  // namespace normsweep::scheduler
