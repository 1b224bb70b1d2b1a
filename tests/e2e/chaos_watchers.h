// What chaos_test watches while its faults land: the trials as the API
// reports them, polled, and the trainers that run, sampled from /proc. Each
// watcher runs on a thread of its own from its construction to Stop() (or
// its destruction) and is safe to read from any thread meanwhile.
#ifndef NORMSWEEP_TESTS_E2E_CHAOS_WATCHERS_H_
#define NORMSWEEP_TESTS_E2E_CHAOS_WATCHERS_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/sweep_client.h"
#include "normsweep/v1/sweep.pb.h"

namespace normsweep::chaos {

// "1.23 s", for the test's report.
std::string Seconds(absl::Duration d);

// ---- what the API says, polled ----

struct TrialView {
  v1::TrialState state = v1::TRIAL_STATE_UNSPECIFIED;
  int attempts = 0;
  int last_step = 0;
};

struct Poll {
  absl::Time at;  // when the call was made
  std::map<int64_t, TrialView> trials;
};

// Calls ListTrials every 100 ms on its own thread, through whichever
// scheduler answers, and keeps every answer (a run of a few minutes is a
// few thousand small maps). Thread-safe: mu_ guards polls_ and failed_.
class SweepObserver {
 public:
  SweepObserver(const std::string& target, int64_t sweep_id)
      : client_(target, absl::Seconds(2)), sweep_id_(sweep_id), thread_([this] { Run(); }) {}
  ~SweepObserver() { Stop(); }

  void Stop();
  std::vector<Poll> polls() const {
    absl::MutexLock lock(&mu_);
    return polls_;
  }
  int failed_polls() const {
    absl::MutexLock lock(&mu_);
    return failed_;
  }

 private:
  void Run();

  client::SweepClient client_;  // used on thread_ only
  const int64_t sweep_id_;
  mutable absl::Mutex mu_;
  std::vector<Poll> polls_ ABSL_GUARDED_BY(mu_);
  int failed_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Notification stop_;
  std::thread thread_;  // last: starts once the rest is built
};

// ---- what runs, sampled from /proc ----

// Lists the trainers whose command line holds `needle` (the test's
// directory) every 25 ms on its own thread and remembers every sample in
// which one trial had two live trainers, and every trainer that outlived its
// worker (had no worker parent for a second). Thread-safe: mu_ guards the
// results.
class TrainerSampler {
 public:
  explicit TrainerSampler(std::string needle) : needle_(std::move(needle)), thread_([this] { Run(); }) {}
  ~TrainerSampler() { Stop(); }

  void Stop();
  int samples() const {
    absl::MutexLock lock(&mu_);
    return samples_;
  }
  // Trainer processes seen, and the most alive at once.
  int trainers_seen() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(seen_.size());
  }
  int most_at_once() const {
    absl::MutexLock lock(&mu_);
    return most_at_once_;
  }
  // "trial 5: pids 123 (attempt 1), 456 (attempt 2) at 12.3 s", one line per
  // sample with two trainers of a trial.
  std::vector<std::string> overlaps() const {
    absl::MutexLock lock(&mu_);
    return overlaps_;
  }
  std::vector<std::string> orphans() const {
    absl::MutexLock lock(&mu_);
    return orphans_;
  }

 private:
  void Run();

  const std::string needle_;
  mutable absl::Mutex mu_;
  int samples_ ABSL_GUARDED_BY(mu_) = 0;
  int most_at_once_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<pid_t> seen_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> overlaps_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> orphans_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread thread_;  // last
};

}  // namespace normsweep::chaos

#endif  // NORMSWEEP_TESTS_E2E_CHAOS_WATCHERS_H_
