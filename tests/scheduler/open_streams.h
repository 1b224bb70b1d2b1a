// Client-side load for stopping a scheduler: open WatchSweep streams, health
// Watch calls and a worker's StreamProgress streams (each with a lease of its
// own and one batch answered), all open on the scheduler when Open returns.
// One thread per stream reads until the scheduler ends it and keeps the
// status. Used by stop_test.cc and the benchmark tests/bench/scheduler_stop.cc.
#ifndef NORMSWEEP_TESTS_SCHEDULER_OPEN_STREAMS_H_
#define NORMSWEEP_TESTS_SCHEDULER_OPEN_STREAMS_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace normsweep::testing {

struct OpenStreamsOptions {
  int watch_sweep = 0;
  int health_watch = 0;
  int progress = 0;  // one leased trial each
};

class OpenStreams {
 public:
  enum Kind { kWatchSweep = 0, kHealthWatch = 1, kProgress = 2 };

  // Submits a sweep with progress + 1 trials (one stays PENDING, so the
  // sweep is never done and its watches stay open), registers a worker,
  // leases `progress` trials and opens the streams on address.
  static absl::StatusOr<std::unique_ptr<OpenStreams>> Open(const std::string& address,
                                                           const OpenStreamsOptions& options);
  ~OpenStreams();  // cancels the streams still open and joins their threads

  // Waits until every stream has ended or timeout has passed; true if all ended.
  bool WaitAllEnded(absl::Duration timeout);
  // How the ended streams of a kind ended: status code -> count.
  std::map<int, int> EndedWith(Kind kind);

  int64_t sweep_id() const { return sweep_id_; }
  int64_t worker_id() const { return worker_id_; }

 private:
  OpenStreams() = default;
  // A stream's thread: its stream ended with code.
  void Ended(Kind kind, int code);

  int64_t sweep_id_ = 0;
  int64_t worker_id_ = 0;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts_;
  std::vector<std::thread> threads_;
  absl::Mutex mu_;
  int open_ ABSL_GUARDED_BY(mu_) = 0;  // streams opened and not yet ended
  std::map<int, int> ended_[3] ABSL_GUARDED_BY(mu_);
};

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_SCHEDULER_OPEN_STREAMS_H_
