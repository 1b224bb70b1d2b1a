// The load generator's simulated workers (tests/bench/scheduler_load.cc):
// each on its own gRPC channel runs trial lifecycles (RegisterWorker once,
// then LeaseTrial, progress batches, FinishTrial) until a lease finds the
// queue empty. All share one completion queue driven by a few threads; a
// worker has at most one call in flight, so its state is touched only by
// the thread that took its completion.
#ifndef NORMSWEEP_TESTS_BENCH_SIM_WORKER_H_
#define NORMSWEEP_TESTS_BENCH_SIM_WORKER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/completion_queue.h>
#include <grpcpp/security/credentials.h>

#include "absl/time/time.h"

namespace normsweep::bench {

// What one simulated worker saw.
struct WorkerResult {
  std::vector<double> lease_ms;
  std::vector<absl::Time> lease_at;
  std::vector<absl::Time> finished_at;  // each lifecycle's end (FinishTrial answered)
  absl::Time drained_at = absl::InfiniteFuture();  // a lease first found the queue empty
  int lifecycles = 0;
  int64_t points = 0;
  std::string error;
};

// Paces lifecycle starts across all workers: the n-th start is not before
// start + n / rate. Thread-safe.
class Pacer {
 public:
  Pacer(double rate, absl::Time start) : rate_(rate), start_(start) {}
  // When the next lifecycle may start (the past when unpaced).
  absl::Time Next() {
    if (rate_ <= 0) return absl::InfinitePast();
    const int64_t n = next_.fetch_add(1);
    return start_ + absl::Seconds(n / rate_);
  }

 private:
  const double rate_;
  const absl::Time start_;
  std::atomic<int64_t> next_{0};
};

struct SimWorkerOptions {
  int workers = 64;          // one gRPC channel each
  int client_threads = 1;    // threads taking the shared completion queue's events
  int batches = 10;          // progress batches per trial
  int steps_per_batch = 10;  // metric points per batch
  int val_every = 0;         // also val_loss on steps divisible by this (0: never)
  // Channels without BDP probing, channelz, retries and the full filter stack.
  bool lean_client = true;
  // One StreamProgress stream per worker, as normsweep-worker does (false: a
  // ReportProgress call per batch).
  bool progress_stream = true;
};

class SimWorker;

// options.workers simulated workers; their channels open from construction
// to destruction.
class SimWorkers {
 public:
  SimWorkers(const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
             const SimWorkerOptions& options, Pacer* pacer);
  ~SimWorkers();

  // Runs every worker until it is done (once); their results, one per worker.
  const std::vector<WorkerResult>& Run();

 private:
  const int client_threads_;
  grpc::CompletionQueue cq_;
  std::atomic<int> running_;
  std::vector<WorkerResult> results_;
  std::vector<std::unique_ptr<SimWorker>> workers_;
};

}  // namespace normsweep::bench

#endif  // NORMSWEEP_TESTS_BENCH_SIM_WORKER_H_
