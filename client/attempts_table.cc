#include "client/attempts_table.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/time_util.h"

namespace normsweep::client {
namespace {

// What the attempt left the trial in, in words.
std::string Then(v1::TrialState outcome) {
  switch (outcome) {
    case v1::TRIAL_PENDING: return "re-queued";
    case v1::TRIAL_SUCCEEDED: return "succeeded";
    case v1::TRIAL_DIVERGED: return "diverged";
    case v1::TRIAL_FAILED: return "failed";
    case v1::TRIAL_CANCELLED: return "cancelled";
    default: return "?";
  }
}

// What the attempt counted as: an interruption's cause, or the trial's own
// failure (against max_attempts); "-" for an attempt that ended the trial
// with its own outcome.
std::string CountedAs(const v1::TrialAttempt& a) {
  if (!a.interruption().empty()) return a.interruption();
  if (a.outcome() == v1::TRIAL_PENDING || (a.outcome() == v1::TRIAL_FAILED && !a.reason().empty())) {
    return "own failure";
  }
  return "-";
}

}  // namespace

std::string RenderAttemptsTable(const google::protobuf::RepeatedPtrField<v1::TrialAttempt>& attempts) {
  if (attempts.empty()) return "";
  constexpr char kRow[] = "%-8s %-7s %-21s %-10s %-17s %s\n";
  std::string out = absl::StrFormat(kRow, "attempt", "worker", "ended", "then", "counted as", "reason");
  for (const v1::TrialAttempt& a : attempts) {
    const std::string ended = a.has_ended_at()
                                  ? google::protobuf::util::TimeUtil::ToString(
                                        google::protobuf::util::TimeUtil::SecondsToTimestamp(a.ended_at().seconds()))
                                  : "-";
    absl::StrAppendFormat(&out, kRow, absl::StrCat(a.attempt()), a.worker_id() == 0 ? "-" : absl::StrCat(a.worker_id()),
                          ended, Then(a.outcome()), CountedAs(a), a.reason().empty() ? "-" : a.reason().substr(0, 200));
  }
  return out;
}

}  // namespace normsweep::client
