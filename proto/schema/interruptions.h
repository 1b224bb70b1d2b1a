// The causes of an interruption: an attempt that ended through no fault of
// the trial (TrialAttempt.interruption, FinishTrialRequest.interruption, the
// trial_attempts.cause column and the label of
// normsweep_scheduler_interruptions_total). The one list of their names.
#ifndef NORMSWEEP_PROTO_SCHEMA_INTERRUPTIONS_H_
#define NORMSWEEP_PROTO_SCHEMA_INTERRUPTIONS_H_

#include <array>

#include "absl/strings/string_view.h"

namespace normsweep::schema {

inline constexpr absl::string_view kWorkerLost = "worker_lost";
inline constexpr absl::string_view kLeaseLost = "lease_lost";
inline constexpr absl::string_view kSchedulerRestart = "scheduler_restart";
inline constexpr absl::string_view kExternalSignal = "external_signal";
inline constexpr absl::string_view kWorkerDrained = "worker_drained";

inline constexpr std::array<absl::string_view, 5> kInterruptionCauses = {
    kWorkerLost, kLeaseLost, kSchedulerRestart, kExternalSignal, kWorkerDrained};

inline bool IsInterruptionCause(absl::string_view name) {
  for (absl::string_view c : kInterruptionCauses) {
    if (c == name) return true;
  }
  return false;
}

}  // namespace normsweep::schema

#endif  // NORMSWEEP_PROTO_SCHEMA_INTERRUPTIONS_H_
