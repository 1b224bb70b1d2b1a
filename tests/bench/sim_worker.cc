#include "tests/bench/sim_worker.h"

#include <grpcpp/alarm.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/support/channel_arguments.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "normsweep/v1/worker_service.grpc.pb.h"

namespace normsweep::bench {

// One simulated worker: a state machine over asynchronous unary calls on its
// own channel. All workers share one completion queue, driven by
// --client-threads threads, so the load generator spends its CPU on gRPC
// calls rather than on switching between 64 blocked threads (the box it
// measures has 2 cores).
class SimWorker {
 public:
  SimWorker(const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& credentials, int index,
            const SimWorkerOptions& options, Pacer* pacer, grpc::CompletionQueue* cq, WorkerResult* out,
            std::atomic<int>* running)
      : index_(index), batches_(options.batches), steps_per_batch_(options.steps_per_batch),
        val_every_(options.val_every), progress_stream_(options.progress_stream), pacer_(pacer), cq_(cq), out_(out),
        running_(running) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own, like a real worker
    if (options.lean_client) {
      // The simulated workers share the box they measure: spend as little
      // as gRPC allows on the client side (the calls are the same).
      args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
      args.SetInt(GRPC_ARG_ENABLE_CHANNELZ, 0);
      args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
      args.SetInt(GRPC_ARG_MINIMAL_STACK, 1);
    }
    stub_ = v1::WorkerService::NewStub(grpc::CreateCustomChannel(target, credentials, args));
  }

  void Start() {
    v1::RegisterWorkerRequest reg;
    reg.set_name(absl::StrCat("load-", index_));
    reg.add_devices("cpu");
    state_ = State::kRegister;
    NewContext();
    auto rpc = stub_->AsyncRegisterWorker(ctx_.get(), reg, cq_);
    rpc->Finish(&registered_, &status_, this);
  }

  // A completion (call finished, stream operation done, or the pacing alarm
  // fired); ok is the completion queue's verdict on stream operations.
  void Proceed(bool ok) {
    switch (state_) {
      case State::kRegister:
        if (!status_.ok()) return Fail("RegisterWorker: ");
        return Lease();
      case State::kPacing:
        return SendLease();
      case State::kLease:
        out_->lease_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - lease_start_));
        out_->lease_at.push_back(lease_start_);
        if (!status_.ok()) return Fail("LeaseTrial: ");
        if (!leased_.leased()) {
          out_->drained_at = absl::Now();
          return CloseStreamThenDone();
        }
        batch_ = 0;
        return SendProgress();
      case State::kProgress:
        if (!status_.ok()) return Fail("ReportProgress: ");
        return Reported();
      case State::kStreamOpen:
        if (!ok) return StreamBroken();
        return WriteProgress();
      case State::kStreamWrite:
        if (!ok) return StreamBroken();
        state_ = State::kStreamRead;
        stream_->Read(&progress_response_, this);
        return;
      case State::kStreamRead:
        if (!ok) return StreamBroken();
        return Reported();
      case State::kStreamBroken:
        stream_.reset();
        return Fail("StreamProgress: ");
      case State::kStreamClosing:
        state_ = State::kStreamClosed;
        stream_->Finish(&status_, this);
        return;
      case State::kStreamClosed:
        stream_.reset();
        return Done();
      case State::kFinish:
        if (!status_.ok()) return Fail("FinishTrial: ");
        ++out_->lifecycles;
        out_->finished_at.push_back(absl::Now());
        return Lease();
      case State::kDone:
        return;
    }
  }

 private:
  enum class State {
    kRegister, kPacing, kLease, kProgress, kFinish, kDone,
    // StreamProgress: opening, a request written, its answer read, broken
    // (collecting the status), half-closed, finished.
    kStreamOpen, kStreamWrite, kStreamRead, kStreamBroken, kStreamClosing, kStreamClosed
  };

  void NewContext() { ctx_ = std::make_unique<grpc::ClientContext>(); }

  void Lease() {
    if (absl::Time at = pacer_->Next(); at > absl::Now()) {
      state_ = State::kPacing;
      alarm_ = std::make_unique<grpc::Alarm>();  // the last one has fired
      alarm_->Set(cq_, absl::ToChronoTime(at), this);
      return;
    }
    SendLease();
  }

  void SendLease() {
    state_ = State::kLease;
    v1::LeaseTrialRequest lease;
    lease.set_worker_id(registered_.worker_id());
    leased_.Clear();
    NewContext();
    lease_start_ = absl::Now();
    stub_->AsyncLeaseTrial(ctx_.get(), lease, cq_)->Finish(&leased_, &status_, this);
  }

  void SendProgress() {
    const v1::Trial& trial = leased_.trial();
    v1::ReportProgressRequest& progress = progress_;
    progress.Clear();
    progress.set_worker_id(registered_.worker_id());
    progress.set_trial_id(trial.id());
    progress.set_attempt(trial.attempts());
    for (int s = 0; s < steps_per_batch_; ++s) {
      const int step = batch_ * steps_per_batch_ + s + 1;
      v1::MetricPoint* p = progress.add_points();
      p->set_step(step);
      p->set_lr(1e-3 * std::min(1.0, step / 50.0));
      p->set_train_loss(5.5 / (1 + 0.01 * step));
      p->set_grad_norm(1.0 + 0.001 * step);
      p->set_tokens_per_s(25000);
      if (val_every_ > 0 && step % val_every_ == 0) p->set_val_loss(5.6 / (1 + 0.01 * step));
    }
    if (!progress_stream_) {
      state_ = State::kProgress;
      NewContext();
      stub_->AsyncReportProgress(ctx_.get(), progress, cq_)->Finish(&progress_response_, &status_, this);
      return;
    }
    if (stream_ == nullptr) {  // the worker's stream, kept open across its trials
      state_ = State::kStreamOpen;
      stream_ctx_ = std::make_unique<grpc::ClientContext>();
      // Prepared, then started: with several --client-threads, the opening's
      // completion can be taken by another thread before an Async...() call
      // would have returned the stream to assign.
      stream_ = stub_->PrepareAsyncStreamProgress(stream_ctx_.get(), cq_);
      stream_->StartCall(this);
      return;
    }
    WriteProgress();
  }

  void WriteProgress() {
    state_ = State::kStreamWrite;
    stream_->Write(progress_, this);
  }

  void Reported() {
    out_->points += steps_per_batch_;
    if (++batch_ < batches_) return SendProgress();
    SendFinish();
  }

  // A stream operation failed: the server ended the stream; its status says why.
  void StreamBroken() {
    state_ = State::kStreamBroken;
    stream_->Finish(&status_, this);
  }

  void CloseStreamThenDone() {
    if (stream_ == nullptr) return Done();
    state_ = State::kStreamClosing;
    stream_->WritesDone(this);
  }

  void SendFinish() {
    state_ = State::kFinish;
    const v1::Trial& trial = leased_.trial();
    v1::FinishTrialRequest finish;
    finish.set_worker_id(registered_.worker_id());
    finish.set_trial_id(trial.id());
    finish.set_attempt(trial.attempts());
    finish.set_outcome(v1::TRIAL_SUCCEEDED);
    finish.mutable_result()->set_final_val_loss(2.0);
    finish.mutable_result()->set_final_train_loss(1.9);
    finish.mutable_result()->set_init_val_loss(5.55);  // l0, as normsweep-worker sends it from the step-0 evaluation
    finish.mutable_result()->set_tokens_per_s(25000);
    NewContext();
    stub_->AsyncFinishTrial(ctx_.get(), finish, cq_)->Finish(&finish_response_, &status_, this);
  }

  void Fail(const std::string& what) {
    out_->error = what + status_.error_message();
    Done();
  }

  void Done() {
    state_ = State::kDone;
    running_->fetch_sub(1);
  }

  const int index_, batches_, steps_per_batch_, val_every_;
  const bool progress_stream_;
  Pacer* const pacer_;
  grpc::CompletionQueue* const cq_;
  WorkerResult* const out_;
  std::atomic<int>* const running_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientContext> stream_ctx_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<v1::ReportProgressRequest, v1::ReportProgressResponse>> stream_;
  std::unique_ptr<grpc::Alarm> alarm_;
  grpc::Status status_;
  State state_ = State::kRegister;
  int batch_ = 0;
  absl::Time lease_start_;
  v1::RegisterWorkerResponse registered_;
  v1::LeaseTrialResponse leased_;
  v1::ReportProgressRequest progress_;
  v1::ReportProgressResponse progress_response_;
  v1::FinishTrialResponse finish_response_;
};

namespace {

// Takes completions until every worker is done.
void DriveCompletions(grpc::CompletionQueue* cq, std::atomic<int>* running) {
  void* tag = nullptr;
  bool ok = false;
  while (running->load() > 0) {
    const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(100);
    switch (cq->AsyncNext(&tag, &ok, deadline)) {
      case grpc::CompletionQueue::GOT_EVENT:
        static_cast<SimWorker*>(tag)->Proceed(ok);
        break;
      case grpc::CompletionQueue::TIMEOUT:
        break;
      case grpc::CompletionQueue::SHUTDOWN:
        return;
    }
  }
}

}  // namespace

SimWorkers::SimWorkers(const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                       const SimWorkerOptions& options, Pacer* pacer)
    : client_threads_(std::max(1, options.client_threads)), running_(options.workers), results_(options.workers) {
  for (int i = 0; i < options.workers; ++i) {
    workers_.push_back(std::make_unique<SimWorker>(target, credentials, i, options, pacer, &cq_, &results_[i], &running_));
  }
}

SimWorkers::~SimWorkers() = default;

const std::vector<WorkerResult>& SimWorkers::Run() {
  for (auto& w : workers_) w->Start();
  std::vector<std::thread> threads;
  for (int i = 0; i < client_threads_; ++i) threads.emplace_back(DriveCompletions, &cq_, &running_);
  for (auto& t : threads) t.join();
  cq_.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq_.Next(&tag, &ok)) {
  }
  return results_;
}

}  // namespace normsweep::bench
