// A trial the worker holds a lease on, and the table of every lease held:
// shared by the slot thread that runs the trial, the reporter thread that
// sends its progress and result, and the heartbeat thread that renews it.
// LeaseTable.mu guards the table and every field of every Lease.
#ifndef NORMSWEEP_WORKER_LEASE_H_
#define NORMSWEEP_WORKER_LEASE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/worker_service.pb.h"
#include "worker/progress_buffer.h"
#include "worker/trial_outcome.h"

namespace normsweep::worker {

enum class LeaseState {
  kPrefetched,  // leased, process not started yet
  kRunning,     // the slot's process is running
  kFinishing,   // outcome known: remaining progress, then FinishTrial
};

struct Lease {
  v1::Trial trial;  // as leased; never changes
  LeaseState state = LeaseState::kPrefetched;
  bool cancel_requested = false;
  bool lost = false;
  // Local clock: when the last successful LeaseTrial or Heartbeat that
  // covered this lease was sent, plus 3/4 of the lease. Past it the
  // scheduler may have given the trial to another worker (the heartbeats
  // failed, e.g. during a database outage), so its trainer is stopped
  // (never two trainers for one trial) and the attempt reported as an
  // interruption, lease_lost or scheduler_restart.
  absl::Time held_until = absl::InfiniteFuture();
  // Set when held_until is first seen passed: whether the failed renewals
  // were answered by a scheduler whose database was down.
  std::optional<bool> expired_database_down;
  // The scheduler refused a progress batch as invalid (INVALID_ARGUMENT):
  // its message. The attempt then ends as the trial's own failure.
  std::string refused;
  bool result_refused = false;  // FinishTrial was refused once (INVALID_ARGUMENT)
  TrialStop stop = TrialStop::kNone;  // how the trainer's run ended, once concluded
  ProgressBuffer progress;
  v1::FinishTrialRequest finish;  // set when state becomes kFinishing
  absl::Time retry_at = absl::InfinitePast();
  absl::Duration backoff = absl::ZeroDuration();
};
using LeasePtr = std::shared_ptr<Lease>;

// "trial 7 (attempt 2)": a lease in the log.
inline std::string LeaseName(const v1::Trial& t) {
  return absl::StrCat("trial ", t.id(), " (attempt ", t.attempts(), ")");
}

// Every lease held. The Worker's own shared fields are guarded by mu too:
// conditions that wait on them span both.
struct LeaseTable {
  mutable absl::Mutex mu;
  std::map<int64_t, LeasePtr> by_id ABSL_GUARDED_BY(mu);  // by trial id
  int lease_calls ABSL_GUARDED_BY(mu) = 0;                // LeaseTrial calls in flight

  // Forgets the lease, unless the trial's entry is already another lease's.
  void Erase(int64_t trial_id, const Lease* lease) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = by_id.find(trial_id);
    if (it != by_id.end() && it->second.get() == lease) by_id.erase(it);
  }
};

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_LEASE_H_
