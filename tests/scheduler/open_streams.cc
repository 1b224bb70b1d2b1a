#include "tests/scheduler/open_streams.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "normsweep/v1/sweep_service.grpc.pb.h"
#include "normsweep/v1/worker_service.grpc.pb.h"
#include "tests/common/specs.h"

namespace normsweep::testing {
namespace {

absl::Status Failed(const char* what, const grpc::Status& status) {
  return absl::UnavailableError(absl::StrCat(what, ": ", status.error_code(), " ", status.error_message()));
}

std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + absl::ToChronoSeconds(timeout));
  return context;
}

}  // namespace

absl::StatusOr<std::unique_ptr<OpenStreams>> OpenStreams::Open(const std::string& address,
                                                               const OpenStreamsOptions& options) {
  std::unique_ptr<OpenStreams> s(new OpenStreams());
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  // Shared with the streams' threads, which may outlive this call.
  std::shared_ptr<v1::SweepService::Stub> sweeps = v1::SweepService::NewStub(channel);
  std::shared_ptr<v1::WorkerService::Stub> workers = v1::WorkerService::NewStub(channel);
  std::shared_ptr<grpc::health::v1::Health::Stub> health = grpc::health::v1::Health::NewStub(channel);

  v1::SubmitSweepRequest submit;
  submit.set_request_id(absl::StrCat("open-streams-", absl::ToUnixNanos(absl::Now())));
  *submit.mutable_spec() = SmallSpec("open-streams");
  submit.mutable_spec()->clear_placements();
  submit.mutable_spec()->add_placements("pre");
  submit.mutable_spec()->add_seeds(0);
  for (int i = 0; i <= options.progress; ++i) submit.mutable_spec()->add_peak_lrs(1e-4 * (i + 1));
  v1::SubmitSweepResponse submitted;
  if (grpc::Status st = sweeps->SubmitSweep(Context(absl::Seconds(30)).get(), submit, &submitted); !st.ok()) {
    return Failed("SubmitSweep", st);
  }
  s->sweep_id_ = submitted.sweep().id();

  // Each stream's thread reads its first answer, signals, then reads to the end.
  auto start = [&s](std::function<void(grpc::ClientContext*, absl::Notification*)> run) {
    s->contexts_.push_back(std::make_unique<grpc::ClientContext>());
    grpc::ClientContext* context = s->contexts_.back().get();
    auto opened = std::make_shared<absl::Notification>();
    {
      absl::MutexLock lock(&s->mu_);
      ++s->open_;
    }
    s->threads_.emplace_back([context, opened, run] { run(context, opened.get()); });
    return opened;
  };
  std::vector<std::shared_ptr<absl::Notification>> opened;

  for (int i = 0; i < options.watch_sweep; ++i) {
    opened.push_back(start([self = s.get(), sweeps](grpc::ClientContext* context,
                                                                                  absl::Notification* first) {
      v1::WatchSweepRequest request;
      request.set_sweep_id(self->sweep_id_);
      auto reader = sweeps->WatchSweep(context, request);
      v1::WatchSweepEvent event;
      bool any = false;
      while (reader->Read(&event)) {
        if (!any) first->Notify();
        any = true;
      }
      if (!any) first->Notify();
      self->Ended(kWatchSweep, reader->Finish().error_code());
    }));
  }
  for (int i = 0; i < options.health_watch; ++i) {
    opened.push_back(start([self = s.get(), health](grpc::ClientContext* context,
                                                                                  absl::Notification* first) {
      grpc::health::v1::HealthCheckRequest request;
      auto reader = health->Watch(context, request);
      grpc::health::v1::HealthCheckResponse response;
      bool any = false;
      while (reader->Read(&response)) {
        if (!any) first->Notify();
        any = true;
      }
      if (!any) first->Notify();
      self->Ended(kHealthWatch, reader->Finish().error_code());
    }));
  }

  if (options.progress > 0) {
    v1::RegisterWorkerRequest reg;
    reg.set_name(absl::StrCat("open-streams-", submitted.sweep().id()));
    reg.set_hostname("bench");
    reg.add_devices("cpu");
    v1::RegisterWorkerResponse registered;
    if (grpc::Status st = workers->RegisterWorker(Context(absl::Seconds(30)).get(), reg, &registered); !st.ok()) {
      return Failed("RegisterWorker", st);
    }
    s->worker_id_ = registered.worker_id();
  }
  for (int i = 0; i < options.progress; ++i) {
    v1::LeaseTrialRequest lease_request;
    lease_request.set_worker_id(s->worker_id_);
    v1::LeaseTrialResponse lease;
    if (grpc::Status st = workers->LeaseTrial(Context(absl::Seconds(30)).get(), lease_request, &lease); !st.ok()) {
      return Failed("LeaseTrial", st);
    }
    if (!lease.leased()) return absl::InternalError("LeaseTrial: nothing leased");
    v1::ReportProgressRequest batch;
    batch.set_worker_id(s->worker_id_);
    batch.set_trial_id(lease.trial().id());
    batch.set_attempt(lease.trial().attempts());
    v1::MetricPoint* point = batch.add_points();
    point->set_step(1);
    point->set_train_loss(5.0);
    opened.push_back(start([self = s.get(), workers, batch](grpc::ClientContext* context,
                                                                                       absl::Notification* first) {
      auto stream = workers->StreamProgress(context);
      v1::ReportProgressResponse response;
      bool any = stream->Write(batch) && stream->Read(&response);
      first->Notify();
      while (any && stream->Read(&response)) {
      }
      self->Ended(kProgress, stream->Finish().error_code());
    }));
  }
  for (auto& n : opened) n->WaitForNotification();
  {
    absl::MutexLock lock(&s->mu_);
    for (int k = 0; k < 3; ++k) {
      if (!s->ended_[k].empty()) {
        return absl::InternalError(absl::StrCat("a stream of kind ", k, " ended before the stop (code ",
                                                s->ended_[k].begin()->first, ")"));
      }
    }
  }
  return s;
}

void OpenStreams::Ended(Kind kind, int code) {
  absl::MutexLock lock(&mu_);
  ++ended_[kind][code];
  --open_;
}

bool OpenStreams::WaitAllEnded(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(+[](int* open) { return *open == 0; }, &open_), timeout);
}

std::map<int, int> OpenStreams::EndedWith(Kind kind) {
  absl::MutexLock lock(&mu_);
  return ended_[kind];
}

OpenStreams::~OpenStreams() {
  for (auto& context : contexts_) context->TryCancel();
  for (std::thread& t : threads_) t.join();
}

}  // namespace normsweep::testing
