// The names of trial and sweep states as they are stored, exported and
// printed: the generated enum names without their prefix (TRIAL_SUCCEEDED ->
// "SUCCEEDED"), so that adding a state to sweep.proto names it everywhere.
// Header-only: it needs the API protos (normsweep_scheduler_proto), which
// normsweep_schema, linked by normsweep-train, does not.
#ifndef NORMSWEEP_PROTO_SCHEMA_STATE_NAMES_H_
#define NORMSWEEP_PROTO_SCHEMA_STATE_NAMES_H_

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "normsweep/v1/sweep.pb.h"

namespace normsweep::schema {

namespace internal {
inline std::string WithoutPrefix(const std::string& name, absl::string_view prefix) {
  return absl::StartsWith(name, prefix) ? name.substr(prefix.size()) : name;
}
}  // namespace internal

// "PENDING", ..., "CANCELLED"; "UNSPECIFIED" for TRIAL_STATE_UNSPECIFIED and
// for values outside the enum.
inline std::string TrialStateName(v1::TrialState state) {
  if (state == v1::TRIAL_STATE_UNSPECIFIED || !v1::TrialState_IsValid(state)) return "UNSPECIFIED";
  return internal::WithoutPrefix(v1::TrialState_Name(state), "TRIAL_");
}

// The inverse of TrialStateName (exact, upper case); TRIAL_STATE_UNSPECIFIED
// for any other text.
inline v1::TrialState TrialStateFromName(absl::string_view name) {
  v1::TrialState state = v1::TRIAL_STATE_UNSPECIFIED;
  if (!v1::TrialState_Parse(absl::StrCat("TRIAL_", name), &state)) return v1::TRIAL_STATE_UNSPECIFIED;
  return state;
}

// "RUNNING", "COMPLETED", "CANCELLED"; "UNSPECIFIED" otherwise.
inline std::string SweepStateName(v1::SweepState state) {
  if (state == v1::SWEEP_STATE_UNSPECIFIED || !v1::SweepState_IsValid(state)) return "UNSPECIFIED";
  return internal::WithoutPrefix(v1::SweepState_Name(state), "SWEEP_");
}

inline v1::SweepState SweepStateFromName(absl::string_view name) {
  v1::SweepState state = v1::SWEEP_STATE_UNSPECIFIED;
  if (!v1::SweepState_Parse(absl::StrCat("SWEEP_", name), &state)) return v1::SWEEP_STATE_UNSPECIFIED;
  return state;
}

// A trial in one of these states runs no more: SUCCEEDED, DIVERGED, FAILED,
// CANCELLED.
inline bool IsFinal(v1::TrialState state) {
  return state == v1::TRIAL_SUCCEEDED || state == v1::TRIAL_DIVERGED || state == v1::TRIAL_FAILED ||
         state == v1::TRIAL_CANCELLED;
}

}  // namespace normsweep::schema

#endif  // NORMSWEEP_PROTO_SCHEMA_STATE_NAMES_H_
