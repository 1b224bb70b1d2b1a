// gRPC adapters: each handler converts, calls Scheduler and maps the
// absl::Status with the one shared mapping (common/grpc_status.h). Most
// handlers use the sync API, which runs them on gRPC's thread pool, where
// blocking on the database is allowed; the worker's hot calls use the
// completion-queue API on one thread that does not wait for the database
// (WorkerServiceImpl).
#ifndef NORMSWEEP_SCHEDULER_GRPC_SERVICES_H_
#define NORMSWEEP_SCHEDULER_GRPC_SERVICES_H_

#include <grpcpp/alarm.h>

#include <atomic>
#include <memory>
#include <functional>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#include "normsweep/v1/sweep_service.grpc.pb.h"
#include "normsweep/v1/worker_service.grpc.pb.h"
#include "common/authenticator.h"
#include "common/grpc_status.h"
#include "scheduler/scheduler.h"
#include "scheduler/scheduler_metrics.h"

namespace normsweep::scheduler {

// The sync unary calls running in a service, for the stop's log line.
class CallsInFlight {
 public:
  // Counts one call for its lifetime.
  class Scope {
   public:
    explicit Scope(CallsInFlight& calls) : calls_(calls) { calls_.count_.fetch_add(1, std::memory_order_relaxed); }
    ~Scope() { calls_.count_.fetch_sub(1, std::memory_order_relaxed); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CallsInFlight& calls_;
  };
  int count() const { return count_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int> count_{0};
};

class SweepServiceImpl final : public v1::SweepService::Service {
 public:
  // auth: who may call what (common/authenticator.h); must outlive the service.
  SweepServiceImpl(Scheduler& scheduler, SchedulerMetrics& metrics, const Authenticator& auth)
      : scheduler_(scheduler), metrics_(metrics), auth_(auth) {}

  grpc::Status SubmitSweep(grpc::ServerContext*, const v1::SubmitSweepRequest*, v1::SubmitSweepResponse*) override;
  grpc::Status GetSweep(grpc::ServerContext*, const v1::GetSweepRequest*, v1::GetSweepResponse*) override;
  grpc::Status ListSweeps(grpc::ServerContext*, const v1::ListSweepsRequest*, v1::ListSweepsResponse*) override;
  grpc::Status CancelSweep(grpc::ServerContext*, const v1::CancelSweepRequest*, v1::CancelSweepResponse*) override;
  grpc::Status ListTrials(grpc::ServerContext*, const v1::ListTrialsRequest*, v1::ListTrialsResponse*) override;
  grpc::Status GetTrial(grpc::ServerContext*, const v1::GetTrialRequest*, v1::GetTrialResponse*) override;
  grpc::Status WatchSweep(grpc::ServerContext*, const v1::WatchSweepRequest*,
                          grpc::ServerWriter<v1::WatchSweepEvent>*) override;
  // Streams from the store (db/export.h) on this thread, off the hot path;
  // closed by CloseWatches like a watch.
  grpc::Status ExportSweep(grpc::ServerContext*, const v1::ExportSweepRequest*,
                           grpc::ServerWriter<v1::ExportChunk>*) override;
  grpc::Status ListWorkers(grpc::ServerContext*, const v1::ListWorkersRequest*, v1::ListWorkersResponse*) override;
  grpc::Status GetSweepAnalysis(grpc::ServerContext*, const v1::GetSweepAnalysisRequest*,
                                v1::GetSweepAnalysisResponse*) override;

  // Cancels every open WatchSweep stream (its client sees CANCELLED at once
  // and watches again elsewhere) and refuses new calls, streams or not,
  // with UNAVAILABLE; returns how many streams it cancelled. Called before the server's Shutdown: a
  // watch only ends at the sweep's end, so it would hold the server's stop
  // until its deadline. Its handler returns at its next poll of the store
  // (SchedulerOptions::watch_poll_interval), reading nothing more.
  int CloseWatches();
  // Unary calls running now (WatchSweep not counted).
  int calls_in_flight() const { return calls_.count(); }

 private:
  bool Refusing() const { return stopping_.load(); }

  Scheduler& scheduler_;
  SchedulerMetrics& metrics_;
  const Authenticator& auth_;
  CallsInFlight calls_;
  absl::Mutex mu_;
  // A server-streaming call (WatchSweep, ExportSweep) once authorised: kept
  // in watches_ while body runs, so that CloseWatches cuts it; body gets the
  // stream's stop condition (the scheduler stopping or the client gone). An
  // error other than CANCELLED is counted for method.
  grpc::Status RunStream(const char* method, grpc::ServerContext* context,
                         const std::function<absl::Status(const std::function<bool()>& stop)>& body);

  std::set<grpc::ServerContext*> watches_ ABSL_GUARDED_BY(mu_);  // the open WatchSweep and ExportSweep calls
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> stopping_{false};  // closing_, read without the lock by calls and the watches' polls
};

// The worker's hot calls (LeaseTrial, ReportProgress, StreamProgress,
// FinishTrial) use the completion-queue API, served by one thread (Serve):
// each handler hands the request to the Scheduler's asynchronous call, and
// PostgresStore answers from its group runner's thread (db/group_runner.h),
// which starts the whole group's replies. No thread per call waits for the
// database, and no thread is woken per call to send its answer. (A store
// that answers inline, like MemoryStore, does its work on Serve's thread,
// which is also the only one reading the network for the sync services:
// fine for an in-memory store, not for one that blocks.)
//
// Why not the callback API: in gRPC 1.51 its calls run on two "nexting"
// threads that poll one completion queue, and every network event hands the
// polling from one to the other (a futex wake-up and a context switch, about
// 26 per trial lifecycle, 6-12 us each on a VM). With one thread on one
// completion queue there is no one to hand to; the sync services' queues do
// not poll in a server that also has a polled queue (a hybrid server), so
// this thread is the scheduler's only poller.
//
// StreamProgress reads raw bytes and parses them itself: gRPC's own parse
// failure ends a Read as a half-close does, so a malformed message would
// end the stream with OK.
using WorkerServiceBase = v1::WorkerService::WithAsyncMethod_LeaseTrial<
    v1::WorkerService::WithAsyncMethod_ReportProgress<v1::WorkerService::WithRawMethod_StreamProgress<
        v1::WorkerService::WithAsyncMethod_FinishTrial<v1::WorkerService::Service>>>>;

// What a client is told of a failed call: the status as it is, but for an
// error carrying the database's own words (db::IsDatabaseError), which is
// logged with `method` and replaced by a plain message; UNAVAILABLE ones also
// get the trailing metadata kDatabaseUnavailableKey (common/grpc_status.h),
// so that a client can tell "scheduler up, its database down" from
// "scheduler unreachable".
grpc::Status ClientStatus(const absl::Status& status, const char* method, grpc::ServerContext* context);

class WorkerServiceImpl final : public WorkerServiceBase {
 public:
  // auth: who may call what (common/authenticator.h); must outlive the service.
  WorkerServiceImpl(Scheduler& scheduler, SchedulerMetrics& metrics, const Authenticator& auth)
      : scheduler_(scheduler), metrics_(metrics), auth_(auth) {}

  grpc::Status RegisterWorker(grpc::ServerContext*, const v1::RegisterWorkerRequest*,
                              v1::RegisterWorkerResponse*) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*, v1::HeartbeatResponse*) override;

  // The queue the hot calls run on (the server's, from AddCompletionQueue):
  // set once, before Serve's thread starts.
  void UseQueue(grpc::ServerCompletionQueue* cq) { cq_ = cq; }
  // Runs the hot calls on that queue until Drain has shut it down and it is
  // empty. Call from one thread, once.
  void Serve();

  // Cancels every open StreamProgress stream (and refuses new streams and
  // calls with UNAVAILABLE): called before the server's Shutdown, so that it
  // does not wait its deadline for streams that stay open between batches.
  // A batch being stored meanwhile is stored, but its answer may not
  // arrive; the worker sends it again. Returns how many it cancelled.
  int CloseProgressStreams();

  // Calls running now: the sync unary ones (RegisterWorker, Heartbeat) and
  // the hot ones waiting for the Scheduler's answer (a progress stream's
  // batch counts as one).
  int calls_in_flight();

  // After the server's Shutdown: waits until no Scheduler call is pending
  // (their answers start operations on the queue; the store's statement
  // timeout bounds the wait), then has Serve shut the queue down, drop what
  // is left and return.
  void Drain();

  class Call;  // a pending operation's tag (grpc_services.cc)
  template <typename Request, typename Response>
  class UnaryCall;
  class ProgressStream;

 private:
  bool Refusing() const { return refusing_.load(); }
  // Counts a Scheduler call whose answer is still to come; false (and not
  // counted) once CloseProgressStreams or Drain has begun: the call is
  // answered UNAVAILABLE.
  bool BeginSchedulerCall();
  void EndSchedulerCall();

  Scheduler& scheduler_;
  SchedulerMetrics& metrics_;
  const Authenticator& auth_;
  CallsInFlight calls_;                        // the sync unary ones
  grpc::ServerCompletionQueue* cq_ = nullptr;  // set by UseQueue
  bool draining_ = false;                      // Serve's thread only
  std::unique_ptr<grpc::Alarm> drain_alarm_;   // Drain's, fires on Serve's thread
  absl::Mutex mu_;
  int scheduler_calls_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // Drain has begun
  std::set<ProgressStream*> streams_ ABSL_GUARDED_BY(mu_);  // the open ones
  bool closing_ ABSL_GUARDED_BY(mu_) = false;  // CloseProgressStreams has begun
  std::atomic<bool> refusing_{false};          // closing_, for the sync calls
};

}  // namespace normsweep::scheduler

#endif  // NORMSWEEP_SCHEDULER_GRPC_SERVICES_H_
