// The faults chaos_test injects and how the stack recovered from each, read
// from the trials the API reported before and after it (chaos_watchers.h's
// polls).
#ifndef NORMSWEEP_TESTS_E2E_CHAOS_RECOVERY_H_
#define NORMSWEEP_TESTS_E2E_CHAOS_RECOVERY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "normsweep/v1/sweep.pb.h"
#include "tests/e2e/chaos_watchers.h"

namespace normsweep::chaos {

enum class FaultKind { kTrainer, kWorker, kScheduler, kPostgresCrash, kPostgresFast };

// "trainer SIGKILL", ...
const char* FaultName(FaultKind k);

// SUCCEEDED, DIVERGED, FAILED or CANCELLED.
bool IsFinal(v1::TrialState s);

struct Fault {
  FaultKind kind = FaultKind::kTrainer;
  absl::Time at;    // the fault began
  absl::Time done;  // the kill returned, or pg_ctl restart did
  int64_t trial_id = 0;  // the trial hit directly (trainer and worker faults)
  int attempt = 0;
  std::string what;      // target, for the report
  std::string note;      // e.g. how long the restarted scheduler took
};

// Over the trials RUNNING past step 0 just before the fault (a lease at step
// 0 is usually a slot's next trial, prefetched: it moves only once the
// slot's current one ends).
struct Recovery {
  // Every such trial has moved on: stored more steps in the same attempt
  // (not counted for the directly hit trial, whose buffered progress may
  // still arrive), gone back to the queue or been leased again, or ended.
  // The next fault waits for this.
  std::optional<absl::Duration> recovered;
  // Each of them has stored progress (the hit one: in a later attempt) or
  // ended; a re-queued trial may first wait for a free slot.
  std::optional<absl::Duration> all_progressing;
  // Progress stored for some trial other than the hit one.
  std::optional<absl::Duration> next_progress;
  // Some trial leased (its attempts grew).
  std::optional<absl::Duration> next_lease;
  // The hit trial back in the queue (or leased again); its next attempt
  // stored progress.
  std::optional<absl::Duration> hit_requeued, hit_progressing;
  // The hit trial ended in the attempt that was hit.
  std::optional<v1::TrialState> hit_ended;
};

// Recovery from f, measured over polls (the last poll before f.at is the
// "before"; polls from f.done on, the "after").
Recovery Measure(const std::vector<Poll>& polls, const Fault& f);

}  // namespace normsweep::chaos

#endif  // NORMSWEEP_TESTS_E2E_CHAOS_RECOVERY_H_
